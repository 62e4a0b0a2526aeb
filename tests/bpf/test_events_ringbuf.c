// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Event pipeline fed by real BPF ring buffers: records a SEC("syscall") program writes
 * reach the workers intact and evenly spread; start/stop races with a consumer thread
 * leave no thread or fd behind.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "tests/count_dir.h"

#include "harness.h"
#include "events_test.skel.h"
#include "user/events/events.h"

#include "progs/events_test.h"

#define NOBJ 2

struct seen {
	__u64 records[NOBJ]; /* by the record's source tag */
	__u64 seq_sum[NOBJ];
};

static int record_cb(void *ctx, const void *data, size_t size, unsigned int worker)
{
	const struct events_test_record *r = data;
	struct seen *s = ctx;

	(void)worker;
	if (size != sizeof(*r) || r->source >= NOBJ || r->payload[0] != (__u8)r->seq)
		return -EINVAL;
	__atomic_fetch_add(&s->records[r->source], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->seq_sum[r->source], r->seq, __ATOMIC_RELAXED);
	return 0;
}

static void emit_flags(struct events_test *skel, __u32 count, __u32 source, __u64 flags)
{
	struct events_test_args args = {.count = count, .source = source, .flags = flags};
	int retval = -1;

	assert_int_equal(
		bpftel_test_run(skel->progs.events_test_emit, &args, sizeof(args), &retval), 0);
	assert_int_equal(retval, count);
}

static void emit(struct events_test *skel, __u32 count, __u32 source)
{
	emit_flags(skel, count, source, 0);
}

static void wait_processed(struct bpftel_events *ev, __u64 want, struct bpftel_events_stats *st)
{
	struct timespec ms = {0, 1000 * 1000};
	int i;

	for (i = 0; i < 60000; i++) { /* a generous deadline: returns once they are in */
		bpftel_events__stats(ev, st);
		if (st->processed + st->drop_parse >= want)
			return;
		nanosleep(&ms, NULL);
	}
}

/* Two ring buffers, three runs of 1000 records: 1500 per worker, all intact. */
static void test_ringbuf_sources(void **state)
{
	struct events_test *skel[NOBJ] = {};
	struct bpftel_events_opts opts = {.sz = sizeof(opts), .workers = 2};
	struct bpftel_events_stats st;
	struct bpftel_events *ev;
	struct seen seen = {};
	int i;

	(void)state;
	assert_int_equal(bpftel_events__new(&opts, &ev), 0);
	for (i = 0; i < NOBJ; i++) {
		skel[i] = events_test__open_and_load();
		assert_non_null(skel[i]);
		assert_int_equal(
			bpftel_events__add_ringbuf(ev, bpf_map__fd(skel[i]->maps.events_test_rb),
						   record_cb, &seen),
			i);
	}
	assert_int_equal(bpftel_events__start(ev), 0);
	emit(skel[0], 1000, 0);
	emit(skel[1], 1000, 1);
	emit(skel[0], 1000, 0);
	wait_processed(ev, 3000, &st);
	assert_int_equal(bpftel_events__stop(ev), 0);

	bpftel_events__stats(ev, &st);
	assert_int_equal(st.dispatched, 3000);
	assert_int_equal(st.processed, 3000);
	assert_int_equal(st.drop_parse + st.drop_queue_full + st.drop_too_big, 0);
	assert_int_equal(st.per_worker[0], 1500);
	assert_int_equal(st.per_worker[1], 1500);
	assert_int_equal(seen.records[0], 2000);
	assert_int_equal(seen.records[1], 1000);
	assert_int_equal(seen.seq_sum[0], 2 * 999 * 1000 / 2);
	assert_int_equal(seen.seq_sum[1], 999 * 1000 / 2);
	for (i = 0; i < NOBJ; i++)
		assert_int_equal(skel[i]->bss->emit_failed, 0);
	bpftel_events__free(ev);
	for (i = 0; i < NOBJ; i++)
		events_test__destroy(skel[i]);
}

static void *stop_main(void *arg)
{
	struct bpftel_events *ev = arg;

	while (bpftel_events__state(ev) == BPFTEL_EVENTS_STOPPED)
		;
	bpftel_events__stop(ev);
	return NULL;
}

/*
 * Stop during start with a consumer thread, then a normal run: no thread or fd left.
 * (The kernel-wide map and program counts are not compared: other tests' objects
 * are still being freed, and the pipeline creates none.)
 */
static void test_ringbuf_stop_during_start(void **state)
{
	struct bpftel_obj_counts base, now;
	struct timespec ms = {0, 1000 * 1000};
	struct bpftel_events_stats st;
	struct events_test *skel;
	struct bpftel_events *ev;
	struct seen seen = {};
	int i, err, threads;
	pthread_t t;

	(void)state;
	bpftel_test_count_objects(&base);
	threads = count_dir("/proc/self/task");
	skel = events_test__open_and_load();
	assert_non_null(skel);
	assert_int_equal(bpftel_events__new(NULL, &ev), 0);
	assert_int_equal(bpftel_events__add_ringbuf(ev, bpf_map__fd(skel->maps.events_test_rb),
						    record_cb, &seen),
			 0);
	for (i = 0; i < 50; i++) {
		assert_int_equal(pthread_create(&t, NULL, stop_main, ev), 0);
		err = bpftel_events__start(ev);
		pthread_join(t, NULL);
		assert_true(err == 0 || err == -ECANCELED);
		bpftel_events__stop(ev);
	}
	assert_int_equal(bpftel_events__start(ev), 0);
	emit(skel, 100, 0);
	wait_processed(ev, 100, &st);
	bpftel_events__free(ev);
	assert_int_equal(seen.records[0], 100);
	events_test__destroy(skel);

	for (i = 0; i < 30000 && count_dir("/proc/self/task") != threads; i++) /* <= 30 s */
		nanosleep(&ms, NULL);
	assert_int_equal(count_dir("/proc/self/task"), threads);
	bpftel_test_count_objects(&now);
	assert_int_equal(now.fds, base.fds);
}

static void *start_main(void *arg)
{
	return (void *)(long)bpftel_events__start(arg);
}

/*
 * Records that wait in the ring buffer when the pipeline starts (a busy program's,
 * its probes attached first) and those it holds when the pipeline stops (written
 * without a wake-up: the consumer asleep) are all processed: none read before the
 * tickets open, given back refused and lost uncounted, and none left behind.
 */
static void test_ringbuf_start_and_stop_drain(void **state)
{
	struct bpftel_events_opts opts = {.sz = sizeof(opts), .workers = 2};
	struct timespec ms = {0, 1000 * 1000};
	struct bpftel_events_stats st;
	struct events_test *skel;
	struct bpftel_events *ev;
	struct seen seen = {};
	int threads, i;
	void *ret;
	pthread_t t;

	(void)state;
	skel = events_test__open_and_load();
	assert_non_null(skel);
	assert_int_equal(bpftel_events__new(&opts, &ev), 0);
	assert_int_equal(bpftel_events__add_ringbuf(ev, bpf_map__fd(skel->maps.events_test_rb),
						    record_cb, &seen),
			 0);
	emit(skel, 500, 0);
	/* The start held while its threads run: a consumer that read now would lose. */
	threads = count_dir("/proc/self/task");
	bpftel_events__hold_start(ev, true);
	assert_int_equal(pthread_create(&t, NULL, start_main, ev), 0);
	for (i = 0; i < 30000 && count_dir("/proc/self/task") < threads + 1 + 2 + 1; i++)
		nanosleep(&ms, NULL);
	assert_int_equal(count_dir("/proc/self/task"), threads + 1 + 2 + 1);
	bpftel_events__hold_start(ev, false);
	pthread_join(t, &ret);
	assert_int_equal((long)ret, 0);
	wait_processed(ev, 500, &st);
	assert_int_equal(st.processed, 500);

	emit_flags(skel, 300, 1, BPF_RB_NO_WAKEUP);
	assert_int_equal(bpftel_events__stop(ev), 0);
	bpftel_events__stats(ev, &st);
	assert_int_equal(st.dispatched, 800);
	assert_int_equal(st.processed, 800);
	assert_int_equal(seen.records[0], 500);
	assert_int_equal(seen.records[1], 300);
	bpftel_events__free(ev);
	events_test__destroy(skel);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ringbuf_sources),
		cmocka_unit_test(test_ringbuf_stop_during_start),
		cmocka_unit_test(test_ringbuf_start_and_stop_drain),
	};

	bpftel_test_require_bpf();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
