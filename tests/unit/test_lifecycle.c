// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The lifecycle thread's queue (user/agent/lifecycle.c), with the agent's module action
 * and the control server's answers faked here: requests run one at a time, in the
 * order they came; identical ones waiting right behind each other are answered by one
 * run; one behind another request never is (stop, start, stop must leave the module
 * stopped). The first request's run waits until the test has queued the rest, so what
 * waits is known, not raced. A query (a module's command, on the reports instance) is
 * answered by its own run, each.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "user/agent/agent.h"
#include "user/agent/control.h"
#include "user/agent/lifecycle.h"

#define MAX_RUNS    16
#define MAX_TICKETS 16

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static char runs[MAX_RUNS][32]; /* "action name" of each run, in order */
static int nruns, reloads;
static bool first_running, release_first;
static int answered[MAX_TICKETS]; /* ticket -> the run that answered it, 1-based */

/* The agent's action, faked: note it, hold the first until released, answer its number. */
json_t *bpftel_agent_module_action(struct bpftel_agent *agent, json_t *req)
{
	int n;

	(void)agent;
	pthread_mutex_lock(&lock);
	n = nruns++;
	if (n < MAX_RUNS)
		snprintf(runs[n], sizeof(runs[n]), "%s %s",
			 json_string_value(json_object_get(req, "action")),
			 json_string_value(json_object_get(req, "name")));
	if (!n) {
		first_running = true;
		pthread_cond_broadcast(&cond);
		while (!release_first)
			pthread_cond_wait(&cond, &lock);
	}
	pthread_mutex_unlock(&lock);
	return json_pack("{s:i}", "run", n + 1);
}

static int queries;

/* The agent's queries, faked: "nosuch" is no command; any other answers its number. */
json_t *bpftel_agent_query(struct bpftel_agent *agent, const char *cmd, json_t *req)
{
	int n;

	(void)agent;
	(void)req;
	pthread_mutex_lock(&lock);
	n = ++queries;
	pthread_mutex_unlock(&lock);
	return strcmp(cmd, "nosuch") ? json_pack("{s:i}", "run", 100 + n) : NULL;
}

int bpftel_agent_apply(struct bpftel_agent *agent, const struct bpftel_config *next, bool starting)
{
	(void)agent;
	(void)next;
	(void)starting;
	pthread_mutex_lock(&lock);
	reloads++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	return 0;
}

int bpftel_ctl_server__complete(struct bpftel_ctl_server *srv, __u64 ticket, json_t *resp)
{
	(void)srv;
	pthread_mutex_lock(&lock);
	if (ticket < MAX_TICKETS)
		answered[ticket] = json_object_get(resp, "error")
					   ? -1
					   : (int)json_integer_value(json_object_get(resp, "run"));
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	json_decref(resp);
	return 0;
}

static __u64 gone_ticket; /* a client that hung up */

bool bpftel_ctl_server__waiting(struct bpftel_ctl_server *srv, __u64 ticket)
{
	(void)srv;
	return ticket != gone_ticket;
}

/* Wait, with lock, until done(): a generous deadline, never a fixed sleep. */
static bool wait_for(bool (*done)(void))
{
	struct timespec dl;
	bool ok;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 60;
	pthread_mutex_lock(&lock);
	while (!(ok = done()) && pthread_cond_timedwait(&cond, &lock, &dl) != ETIMEDOUT)
		;
	ok = done();
	pthread_mutex_unlock(&lock);
	return ok;
}

static int expect_answers;

static bool first_is_running(void)
{
	return first_running;
}

static bool all_answered(void)
{
	int t;

	for (t = 1; t <= expect_answers; t++)
		if (!answered[t])
			return false;
	return true;
}

static void queue(struct bpftel_lifecycle *lc, const char *action, const char *name, __u64 ticket)
{
	json_t *req = json_pack("{s:s,s:s,s:s}", "cmd", "module", "action", action, "name", name);

	assert_int_equal(bpftel_lifecycle__module(lc, req, ticket), 0);
	json_decref(req);
}

static void test_order_and_merges(void **state)
{
	static const char *const want[] = {"restart usm", "stop gpu", "start gpu", "stop gpu",
					   "restart gpu"};
	static const int answer_run[] = {0, 1, 2, 3, 4, 4, 5, 5, 5};
	struct bpftel_agent agent = {0};
	struct bpftel_config cfg = {0};
	struct bpftel_lifecycle *lc;
	size_t i;

	(void)state;
	assert_int_equal(bpftel_lifecycle__start(&agent, &lc), 0);
	queue(lc, "restart", "usm", 1);
	assert_true(wait_for(first_is_running));
	/* Behind the running one: */
	queue(lc, "stop", "gpu", 2);
	queue(lc, "start", "gpu", 3);
	queue(lc, "stop", "gpu", 4);
	queue(lc, "stop", "gpu", 5); /* right behind 4: answered by 4's run */
	assert_int_equal(bpftel_lifecycle__reload(lc, &cfg), 0);
	queue(lc, "restart", "gpu", 6);
	queue(lc, "restart", "gpu", 7);
	queue(lc, "restart", "gpu", 8);
	expect_answers = 8;

	pthread_mutex_lock(&lock);
	release_first = true;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	assert_true(wait_for(all_answered));
	bpftel_lifecycle__stop(lc);

	/* Each request ran after every one queued before it, in order. */
	assert_int_equal(nruns, 5);
	for (i = 0; i < 5; i++)
		assert_string_equal(runs[i], want[i]);
	assert_int_equal(reloads, 1);
	/* Ticket t answered by the run answer_run[t]: 5 by 4's, 7 and 8 by 6's. */
	for (i = 1; i <= 8; i++)
		assert_int_equal(answered[i], answer_run[i]);
}

static int want_runs;

static bool ran_all(void)
{
	return nruns == want_runs;
}

/* Requests whose clients went away cannot pile up: past BPFTEL_LIFECYCLE_QUEUE_MAX
 * waiting, a module request is refused (busy); a reload still queues. Every one
 * queued runs. */
static void test_queue_bounded(void **state)
{
	struct bpftel_agent agent = {0};
	struct bpftel_config cfg = {0};
	struct bpftel_lifecycle *lc;
	json_t *req;
	int i;

	(void)state;
	nruns = reloads = 0;
	first_running = release_first = false;
	assert_int_equal(bpftel_lifecycle__start(&agent, &lc), 0);
	queue(lc, "restart", "usm", 100);
	assert_true(wait_for(first_is_running));
	for (i = 0; i < BPFTEL_LIFECYCLE_QUEUE_MAX; i++) /* none identical to the one before */
		queue(lc, i % 2 ? "stop" : "start", "gpu", 100 + i);
	req = json_pack("{s:s,s:s,s:s}", "cmd", "module", "action", "stop", "name", "usm");
	assert_int_equal(bpftel_lifecycle__module(lc, req, 999), -EBUSY);
	json_decref(req);
	assert_int_equal(bpftel_lifecycle__reload(lc, &cfg), 0);

	want_runs = 1 + BPFTEL_LIFECYCLE_QUEUE_MAX;
	pthread_mutex_lock(&lock);
	release_first = true;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	assert_true(wait_for(ran_all));
	/* Room again once they ran. */
	queue(lc, "stop", "usm", 101);
	want_runs++;
	assert_true(wait_for(ran_all));
	bpftel_lifecycle__stop(lc);
	assert_int_equal(reloads, 1);
}

/* Queries are answered each by its own run, identical ones too (a report is not an
 * action), in order; one no module answers gets an error; one whose client went away
 * is not made. */
static void test_queries_each_answered(void **state)
{
	struct bpftel_agent agent = {0};
	struct bpftel_lifecycle *lc;
	json_t *gpu = json_pack("{s:s}", "cmd", "gpu"), *bad = json_pack("{s:s}", "cmd", "nosuch");

	(void)state;
	memset(answered, 0, sizeof(answered));
	queries = 0;
	gone_ticket = 3; /* before the thread starts: it reads it */
	assert_int_equal(bpftel_lifecycle__start(&agent, &lc), 0);
	assert_int_equal(bpftel_lifecycle__query(lc, gpu, 1), 0);
	assert_int_equal(bpftel_lifecycle__query(lc, gpu, 2), 0);
	assert_int_equal(bpftel_lifecycle__query(lc, gpu, 3), 0);
	assert_int_equal(bpftel_lifecycle__query(lc, bad, 4), 0);
	expect_answers = 2;
	assert_true(wait_for(all_answered));
	pthread_mutex_lock(&lock);
	answered[3] = -2; /* never answered (its client went away): wait for 4 alone */
	pthread_mutex_unlock(&lock);
	expect_answers = 4;
	assert_true(wait_for(all_answered));
	bpftel_lifecycle__stop(lc);
	assert_int_equal(queries, 3);
	assert_int_equal(answered[1], 101);
	assert_int_equal(answered[2], 102);
	assert_int_equal(answered[4], -1);
	json_decref(gpu);
	json_decref(bad);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_merges),
		cmocka_unit_test(test_queue_bounded),
		cmocka_unit_test(test_queries_each_answered),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
