// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The agent's lifecycle thread (lifecycle.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "control.h"
#include "lifecycle.h"
#include "user/common/log.h"

struct job {
	struct job *next;
	json_t *req; /* a module request or a query, or NULL for a reload */
	bool query;
	__u64 ticket;
	struct bpftel_config cfg; /* reload */
};

struct bpftel_lifecycle {
	struct bpftel_agent *agent;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct job *head, **tail;
	size_t queued; /* jobs in the queue (not the one running) */
	bool stopping;
	pthread_t th;
};

static bool same_request(json_t *a, json_t *b)
{
	return a && b && json_equal(json_object_get(a, "action"), json_object_get(b, "action")) &&
	       json_equal(json_object_get(a, "name"), json_object_get(b, "name"));
}

static void answer(struct bpftel_lifecycle *lc, struct job *j, json_t *resp)
{
	if (bpftel_ctl_server__complete(lc->agent->ctl, j->ticket, resp) == -ENOENT)
		pr_debug("control: the client of a module request went away");
}

static void job_free(struct job *j)
{
	json_decref(j->req);
	free(j);
}

/*
 * With lc->lock: take the jobs identical to first that wait right behind it out of the
 * queue (answered alike). Only those: one further back, behind another request, is
 * answered by what runs after that one (stop, start, stop leaves the module stopped).
 */
static struct job *take_same(struct bpftel_lifecycle *lc, struct job *first)
{
	struct job *same = NULL, *j;

	while ((j = lc->head) && same_request(first->req, j->req)) {
		lc->head = j->next;
		lc->queued--;
		if (!lc->head)
			lc->tail = &lc->head;
		j->next = same;
		same = j;
	}
	return same;
}

static void run_module_job(struct bpftel_lifecycle *lc, struct job *j)
{
	struct job *same, *next;
	json_t *resp;

	pthread_mutex_lock(&lc->lock);
	same = take_same(lc, j);
	pthread_mutex_unlock(&lc->lock);
	resp = bpftel_agent_module_action(lc->agent, j->req);
	for (; same; same = next) {
		next = same->next;
		answer(lc, same, json_deep_copy(resp));
		job_free(same);
	}
	answer(lc, j, resp);
}

/* A report is made only for a client still waiting: one that gave up (its deadline
 * passed while reports before it waited on a slow file system) and asked again would
 * otherwise fill the queue with reports nobody reads. Unlike a module action, a report
 * changes nothing. */
static void run_query_job(struct bpftel_lifecycle *lc, struct job *j)
{
	const char *cmd = json_string_value(json_object_get(j->req, "cmd"));
	json_t *resp;

	if (!bpftel_ctl_server__waiting(lc->agent->ctl, j->ticket)) {
		pr_debug("control: a %s report's client went away: not made", cmd ? cmd : "?");
		return;
	}
	resp = bpftel_agent_query(lc->agent, cmd ? cmd : "", j->req);
	answer(lc, j, resp ? resp : bpftel_ctl_error("unknown command '%.64s'", cmd ? cmd : ""));
}

static void *lifecycle_main(void *arg)
{
	struct bpftel_lifecycle *lc = arg;
	struct job *j;

	pthread_mutex_lock(&lc->lock);
	for (;;) {
		while (!lc->head && !lc->stopping)
			pthread_cond_wait(&lc->wake, &lc->lock);
		if (lc->stopping)
			break;
		j = lc->head;
		lc->head = j->next;
		lc->queued--;
		if (!lc->head)
			lc->tail = &lc->head;
		pthread_mutex_unlock(&lc->lock);
		if (j->query)
			run_query_job(lc, j);
		else if (j->req)
			run_module_job(lc, j);
		else
			bpftel_agent_apply(lc->agent, &j->cfg, false);
		job_free(j);
		pthread_mutex_lock(&lc->lock);
	}
	pthread_mutex_unlock(&lc->lock);
	return NULL;
}

int bpftel_lifecycle__start(struct bpftel_agent *agent, struct bpftel_lifecycle **out)
{
	struct bpftel_lifecycle *lc = calloc(1, sizeof(*lc));
	int err;

	if (!lc)
		return -ENOMEM;
	lc->agent = agent;
	lc->tail = &lc->head;
	pthread_mutex_init(&lc->lock, NULL);
	pthread_cond_init(&lc->wake, NULL);
	err = pthread_create(&lc->th, NULL, lifecycle_main, lc);
	if (err) {
		pthread_cond_destroy(&lc->wake);
		pthread_mutex_destroy(&lc->lock);
		free(lc);
		return -err;
	}
	*out = lc;
	return 0;
}

static int enqueue(struct bpftel_lifecycle *lc, struct job *j)
{
	pthread_mutex_lock(&lc->lock);
	if (lc->stopping) {
		pthread_mutex_unlock(&lc->lock);
		return -ESHUTDOWN;
	}
	/* A request is refused past the bound: clients that queue one and hang up
	 * (its slot of the control server freed) could grow the queue without end, each
	 * job a configuration's size. A reload is not: SIGHUP is the operator's. */
	if (j->req && lc->queued >= BPFTEL_LIFECYCLE_QUEUE_MAX) {
		pthread_mutex_unlock(&lc->lock);
		return -EBUSY;
	}
	lc->queued++;
	*lc->tail = j;
	lc->tail = &j->next;
	pthread_cond_signal(&lc->wake);
	pthread_mutex_unlock(&lc->lock);
	return 0;
}

static int enqueue_request(struct bpftel_lifecycle *lc, json_t *req, bool query, __u64 ticket)
{
	struct job *j = calloc(1, sizeof(*j));
	int err;

	if (!j || !(j->req = json_deep_copy(req))) {
		free(j);
		return -ENOMEM;
	}
	j->query = query;
	j->ticket = ticket;
	err = enqueue(lc, j);
	if (err)
		job_free(j);
	return err;
}

int bpftel_lifecycle__module(struct bpftel_lifecycle *lc, json_t *req, __u64 ticket)
{
	return enqueue_request(lc, req, false, ticket);
}

int bpftel_lifecycle__query(struct bpftel_lifecycle *lc, json_t *req, __u64 ticket)
{
	return enqueue_request(lc, req, true, ticket);
}

int bpftel_lifecycle__reload(struct bpftel_lifecycle *lc, const struct bpftel_config *next)
{
	struct job *j = calloc(1, sizeof(*j));
	int err;

	if (!j)
		return -ENOMEM;
	j->cfg = *next;
	err = enqueue(lc, j);
	if (err)
		free(j);
	return err;
}

void bpftel_lifecycle__stop(struct bpftel_lifecycle *lc)
{
	struct job *j, *next;

	if (!lc)
		return;
	pthread_mutex_lock(&lc->lock);
	lc->stopping = true;
	j = lc->head;
	lc->head = NULL;
	lc->tail = &lc->head;
	pthread_cond_signal(&lc->wake);
	pthread_mutex_unlock(&lc->lock);
	for (; j; j = next) {
		next = j->next;
		if (j->req)
			answer(lc, j, bpftel_ctl_error("the agent is stopping"));
		job_free(j);
	}
	pthread_join(lc->th, NULL);
	pthread_cond_destroy(&lc->wake);
	pthread_mutex_destroy(&lc->lock);
	free(lc);
}
