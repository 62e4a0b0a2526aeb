// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Event pipeline: start-up fairness of the shared round-robin counter (sequential and
 * concurrent sources), drops by stage with exact accounting, no callback after stop,
 * stop racing start without leaking threads or fds, and the lifecycle's error codes.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "tests/count_dir.h"

#include "user/events/events.h"

#define OPTS(...) \
	((struct bpftel_events_opts){.sz = sizeof(struct bpftel_events_opts), __VA_ARGS__})

struct counter {
	__u64 seen[BPFTEL_EVENTS_MAX_WORKERS]; /* records seen, by the callback's worker arg */
};

static int count_cb(void *ctx, const void *data, size_t size, unsigned int worker)
{
	struct counter *c = ctx;

	(void)data;
	(void)size;
	__atomic_fetch_add(&c->seen[worker], 1, __ATOMIC_RELAXED);
	return 0;
}

static struct bpftel_events *new_events(struct bpftel_events_opts opts)
{
	struct bpftel_events *ev;

	assert_int_equal(bpftel_events__new(&opts, &ev), 0);
	return ev;
}

/* Every record accounted for, and the worker arg matches the worker's stats. */
static void assert_balanced(struct bpftel_events *ev, const struct counter *c, __u64 total)
{
	struct bpftel_events_stats st;
	__u64 lo = UINT64_MAX, hi = 0;
	unsigned int w;

	bpftel_events__stats(ev, &st);
	assert_int_equal(st.dispatched, total);
	assert_int_equal(st.processed, total);
	assert_int_equal(st.drop_queue_full + st.drop_too_big + st.drop_parse, 0);
	for (w = 0; w < st.workers; w++) {
		assert_int_equal(st.per_worker[w], __atomic_load_n(&c->seen[w], __ATOMIC_RELAXED));
		lo = st.per_worker[w] < lo ? st.per_worker[w] : lo;
		hi = st.per_worker[w] > hi ? st.per_worker[w] : hi;
	}
	assert_true(hi - lo <= 1);
}

/*
 * M sources, each dispatching K records in turn, right after start. Per-source
 * counters would give worker 0 the first record of every source (M=4, K=3, W=4:
 * 4/4/4/0; M=7, K=5: 14/7/7/7); the shared counter gives floor or ceil of M*K/W.
 */
static void test_fairness_sequential(void **state)
{
	static const struct {
		int m, k;
	} cases[] = {{4, 3}, {7, 5}, {3, 1}, {5, 9}};
	char rec[64] = "";
	size_t i;
	int s, k;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct bpftel_events *ev = new_events(OPTS(.workers = 4, .queue_len = 64));
		struct counter c = {};

		for (s = 0; s < cases[i].m; s++)
			assert_int_equal(bpftel_events__add_source(ev, count_cb, &c), s);
		assert_int_equal(bpftel_events__start(ev), 0);
		for (s = 0; s < cases[i].m; s++) {
			for (k = 0; k < cases[i].k; k++)
				assert_int_equal(bpftel_events__dispatch(ev, s, rec, sizeof(rec)),
						 0);
		}
		assert_int_equal(bpftel_events__stop(ev), 0);
		assert_balanced(ev, &c, (__u64)cases[i].m * cases[i].k);
		bpftel_events__free(ev);
	}
}

struct producer {
	struct bpftel_events *ev;
	int source, k;
	int *go;
	__u64 ok, full, shutdown;
	bool *quit; /* NULL: dispatch k records; else until *quit and refused once */
};

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	char rec[64];
	int i, err;

	memset(rec, p->source, sizeof(rec));
	while (!__atomic_load_n(p->go, __ATOMIC_ACQUIRE))
		;
	for (i = 0;
	     p->quit ? !(__atomic_load_n(p->quit, __ATOMIC_ACQUIRE) && p->shutdown) : i < p->k;
	     i++) {
		err = bpftel_events__dispatch(p->ev, p->source, rec, sizeof(rec));
		p->ok += err == 0;
		p->full += err == -ENOBUFS;
		p->shutdown += err == -ESHUTDOWN;
	}
	return NULL;
}

/* M threads, one source each, dispatching K records at once. */
static void test_fairness_concurrent(void **state)
{
	enum { M = 7, K = 1000 };
	struct bpftel_events *ev = new_events(OPTS(.workers = 4, .max_record = 64));
	struct producer p[M];
	pthread_t th[M];
	struct counter c = {};
	int i, go = 0;

	(void)state;
	for (i = 0; i < M; i++) {
		p[i] = (struct producer){.ev = ev, .k = K, .go = &go};
		p[i].source = bpftel_events__add_source(ev, count_cb, &c);
		assert_int_equal(p[i].source, i);
	}
	assert_int_equal(bpftel_events__start(ev), 0);
	for (i = 0; i < M; i++)
		assert_int_equal(pthread_create(&th[i], NULL, producer_main, &p[i]), 0);
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	for (i = 0; i < M; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(p[i].ok, K);
	}
	assert_int_equal(bpftel_events__stop(ev), 0);
	assert_balanced(ev, &c, M * K);
	bpftel_events__free(ev);
}

struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool open;
	int calls;
};

static int gated_cb(void *ctx, const void *data, size_t size, unsigned int worker)
{
	struct gate *g = ctx;

	(void)data;
	(void)size;
	(void)worker;
	pthread_mutex_lock(&g->lock);
	g->calls++;
	while (!g->open)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
	return 0;
}

/* One worker stuck in its callback, 2 slots: the first 2 records fit, the rest drop. */
static void test_drop_queue_full(void **state)
{
	struct bpftel_events *ev = new_events(OPTS(.workers = 1, .queue_len = 2));
	struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0};
	struct bpftel_events_stats st;
	int i, src, ok = 0, full = 0;
	char rec[64] = "";

	(void)state;
	src = bpftel_events__add_source(ev, gated_cb, &g);
	assert_int_equal(bpftel_events__start(ev), 0);
	for (i = 0; i < 10; i++) {
		int err = bpftel_events__dispatch(ev, src, rec, sizeof(rec));

		ok += err == 0;
		full += err == -ENOBUFS;
	}
	assert_int_equal(ok, 2);
	assert_int_equal(full, 8);
	pthread_mutex_lock(&g.lock);
	g.open = true;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
	assert_int_equal(bpftel_events__stop(ev), 0);

	bpftel_events__stats(ev, &st);
	assert_int_equal(st.dispatched, 10);
	assert_int_equal(st.drop_queue_full, 8);
	assert_int_equal(st.processed, 2);
	assert_int_equal(g.calls, 2);
	assert_int_equal(st.processed + st.drop_queue_full, st.dispatched);
	bpftel_events__free(ev);
}

static int parse_cb(void *ctx, const void *data, size_t size, unsigned int worker)
{
	(void)ctx;
	(void)worker;
	return size && *(const char *)data == 'x' ? -EINVAL : 0;
}

/* Over max_record: dropped at dispatch. Callback says malformed: dropped as parse. */
static void test_drop_too_big_and_parse(void **state)
{
	struct bpftel_events *ev = new_events(OPTS(.max_record = 64));
	struct bpftel_events_stats st;
	char rec[65] = "ok", bad[8] = "x";
	int src, i;

	(void)state;
	src = bpftel_events__add_source(ev, parse_cb, NULL);
	assert_int_equal(bpftel_events__start(ev), 0);
	assert_int_equal(bpftel_events__dispatch(ev, src, rec, 65), -EMSGSIZE);
	assert_int_equal(bpftel_events__dispatch(ev, src, rec, 64), 0);
	assert_int_equal(bpftel_events__dispatch(ev, src, rec, 0), 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(bpftel_events__dispatch(ev, src, bad, sizeof(bad)), 0);
	assert_int_equal(bpftel_events__dispatch(ev, src + 1, rec, 8), -EINVAL);
	assert_int_equal(bpftel_events__stop(ev), 0);

	bpftel_events__stats(ev, &st);
	assert_int_equal(st.dispatched, 6);
	assert_int_equal(st.drop_too_big, 1);
	assert_int_equal(st.drop_parse, 3);
	assert_int_equal(st.processed, 2);
	assert_int_equal(st.drop_queue_full, 0);
	bpftel_events__free(ev);
}

struct after_stop {
	bool stopped;
	int late; /* callbacks that ran after stop returned */
};

static int after_stop_cb(void *ctx, const void *data, size_t size, unsigned int worker)
{
	struct after_stop *a = ctx;

	(void)data;
	(void)size;
	(void)worker;
	if (__atomic_load_n(&a->stopped, __ATOMIC_ACQUIRE))
		__atomic_fetch_add(&a->late, 1, __ATOMIC_RELAXED);
	return 0;
}

/* Producers keep dispatching through stop: nothing runs after, nothing is lost. */
static void test_no_callback_after_stop(void **state)
{
	enum { P = 3, ROUNDS = 10 };
	struct timespec ms = {0, 2 * 1000 * 1000};
	struct bpftel_events_stats st;
	int round, i;

	(void)state;
	for (round = 0; round < ROUNDS; round++) {
		struct bpftel_events *ev = new_events(OPTS(.queue_len = 64, .max_record = 64));
		struct after_stop a = {};
		struct producer p[P];
		pthread_t th[P];
		bool quit = false;
		int go = 1, src;
		__u64 ok = 0, full = 0;

		src = bpftel_events__add_source(ev, after_stop_cb, &a);
		assert_int_equal(bpftel_events__start(ev), 0);
		for (i = 0; i < P; i++) {
			p[i] = (struct producer){.ev = ev, .source = src, .go = &go, .quit = &quit};
			assert_int_equal(pthread_create(&th[i], NULL, producer_main, &p[i]), 0);
		}
		/* Stop once records flow, however slow the machine (a fixed 2 ms was not
		 * always enough under ASan on a loaded CI host). */
		do {
			nanosleep(&ms, NULL);
			bpftel_events__stats(ev, &st);
		} while (!st.processed);
		assert_int_equal(bpftel_events__stop(ev), 0);
		__atomic_store_n(&a.stopped, true, __ATOMIC_RELEASE);
		nanosleep(&ms, NULL);
		__atomic_store_n(&quit, true, __ATOMIC_RELEASE);
		for (i = 0; i < P; i++) {
			pthread_join(th[i], NULL);
			ok += p[i].ok;
			full += p[i].full;
			assert_true(p[i].shutdown > 0);
		}
		assert_int_equal(a.late, 0);
		bpftel_events__stats(ev, &st);
		assert_true(ok > 0);
		assert_int_equal(st.processed, ok);
		assert_int_equal(st.drop_queue_full, full);
		assert_int_equal(st.processed + st.drop_queue_full, st.dispatched);
		bpftel_events__free(ev);
	}
}

/* Exited threads leave /proc/self/task a moment after pthread_join (the kernel reaps
 * them after waking the joiner): wait for it up to 30 s, a deadline no loaded host
 * reaches, the usual wait a millisecond or two. */
static int settled_threads(int base)
{
	struct timespec ms = {0, 1000 * 1000};
	int i, n = count_dir("/proc/self/task");

	for (i = 0; i < 30000 && n != base; i++) {
		nanosleep(&ms, NULL);
		n = count_dir("/proc/self/task");
	}
	return n;
}

struct racer {
	struct bpftel_events *ev;
	bool wait_starting; /* stop once start is under way, else right away */
	int ret;
};

static void *start_main(void *arg)
{
	struct racer *r = arg;

	r->ret = bpftel_events__start(r->ev);
	return NULL;
}

static void *stop_main(void *arg)
{
	struct racer *r = arg;

	while (r->wait_starting && bpftel_events__state(r->ev) == BPFTEL_EVENTS_STOPPED)
		;
	r->ret = bpftel_events__stop(r->ev);
	return NULL;
}

/* Stop races start 200 times: start returns 0 or -ECANCELED, nothing is left behind.
 * Every other time the start is held in STARTING (its threads up) until the stop comes:
 * cancelled then, whatever the machine's speed; the others race freely. */
static void test_stop_during_start(void **state)
{
	struct bpftel_events *ev = new_events(OPTS(.workers = 3));
	int fds = count_dir("/proc/self/fd"), threads = count_dir("/proc/self/task");
	int i, cancelled = 0, src;
	struct counter c = {};
	char rec[16] = "";

	(void)state;
	src = bpftel_events__add_source(ev, count_cb, &c);
	for (i = 0; i < 200; i++) {
		struct racer a = {.ev = ev}, b = {.ev = ev, .wait_starting = i % 2 == 0};
		pthread_t ta, tb;

		bpftel_events__hold_start(ev, b.wait_starting);
		assert_int_equal(pthread_create(&tb, NULL, stop_main, &b), 0);
		assert_int_equal(pthread_create(&ta, NULL, start_main, &a), 0);
		pthread_join(ta, NULL);
		pthread_join(tb, NULL);
		assert_true(a.ret == 0 || a.ret == -ECANCELED);
		if (b.wait_starting)
			assert_int_equal(a.ret, -ECANCELED);
		assert_int_equal(b.ret, 0);
		cancelled += a.ret == -ECANCELED;
		/* Stop ran before start began: start won, stop again. */
		if (bpftel_events__state(ev) == BPFTEL_EVENTS_RUNNING)
			assert_int_equal(bpftel_events__stop(ev), 0);
		assert_int_equal(bpftel_events__state(ev), BPFTEL_EVENTS_STOPPED);
		assert_int_equal(bpftel_events__dispatch(ev, src, rec, sizeof(rec)), -ESHUTDOWN);
	}
	print_message("%d of 200 starts cancelled\n", cancelled);
	assert_true(cancelled >= 100);
	bpftel_events__hold_start(ev, false);
	assert_int_equal(count_dir("/proc/self/fd"), fds);
	assert_int_equal(settled_threads(threads), threads);

	/* Still works after all that. */
	assert_int_equal(bpftel_events__start(ev), 0);
	for (i = 0; i < 9; i++)
		assert_int_equal(bpftel_events__dispatch(ev, src, rec, sizeof(rec)), 0);
	assert_int_equal(bpftel_events__stop(ev), 0);
	assert_balanced(ev, &c, 9);
	bpftel_events__free(ev);
	assert_int_equal(settled_threads(threads), threads);
}

static void test_lifecycle(void **state)
{
	struct bpftel_events *ev = new_events(OPTS(.workers = 2));
	struct counter c = {};
	char rec[16] = "";
	int src, i;

	(void)state;
	src = bpftel_events__add_source(ev, count_cb, &c);
	assert_int_equal(bpftel_events__stop(ev), 0);
	assert_int_equal(bpftel_events__dispatch(ev, src, rec, sizeof(rec)), -ESHUTDOWN);
	assert_int_equal(bpftel_events__start(ev), 0);
	assert_int_equal(bpftel_events__state(ev), BPFTEL_EVENTS_RUNNING);
	assert_int_equal(bpftel_events__start(ev), -EALREADY);
	assert_int_equal(bpftel_events__add_source(ev, count_cb, &c), -EBUSY);
	for (i = 0; i < 3; i++)
		assert_int_equal(bpftel_events__dispatch(ev, src, rec, sizeof(rec)), 0);
	assert_int_equal(bpftel_events__stop(ev), 0);
	assert_int_equal(bpftel_events__stop(ev), 0);
	assert_int_equal(bpftel_events__state(ev), BPFTEL_EVENTS_STOPPED);

	/* A restart goes on where the last run left the round robin. */
	assert_int_equal(bpftel_events__start(ev), 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(bpftel_events__dispatch(ev, src, rec, sizeof(rec)), 0);
	bpftel_events__free(ev); /* stops */
	assert_int_equal(c.seen[0], 3);
	assert_int_equal(c.seen[1], 3);
}

static void test_free_without_start(void **state)
{
	struct bpftel_events *ev = NULL;

	(void)state;
	assert_int_equal(bpftel_events__new(NULL, &ev), 0);
	assert_int_equal(bpftel_events__add_source(ev, count_cb, NULL), 0);
	bpftel_events__free(ev);
	bpftel_events__free(NULL);
}

static void test_bad_options(void **state)
{
	struct {
		struct bpftel_events_opts o;
		long extra;
	} big = {.o = {.sz = sizeof(big)}, .extra = 1};
	struct bpftel_events_opts bad[] = {
		OPTS(.queue_len = 3),
		OPTS(.workers = BPFTEL_EVENTS_MAX_WORKERS + 1),
		OPTS(.max_record = 1 << 21),
	};
	struct bpftel_events *ev = NULL;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(bpftel_events__new(&bad[i], &ev), -EINVAL);
		assert_null(ev);
	}
	assert_int_equal(bpftel_events__new(&big.o, &ev), -EINVAL);
	big.extra = 0;
	assert_int_equal(bpftel_events__new(&big.o, &ev), 0);
	assert_int_equal(bpftel_events__add_source(ev, NULL, NULL), -EINVAL);
	bpftel_events__free(ev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fairness_sequential),
		cmocka_unit_test(test_fairness_concurrent),
		cmocka_unit_test(test_drop_queue_full),
		cmocka_unit_test(test_drop_too_big_and_parse),
		cmocka_unit_test(test_no_callback_after_stop),
		cmocka_unit_test(test_stop_during_start),
		cmocka_unit_test(test_lifecycle),
		cmocka_unit_test(test_free_without_start),
		cmocka_unit_test(test_bad_options),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
