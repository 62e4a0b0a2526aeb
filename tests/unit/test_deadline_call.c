// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Calls waited for up to a deadline (user/common/deadline_call.c). A call that blocks
 * here blocks for real (on a pipe nobody writes yet), so a short deadline always passes
 * first, however slow the machine; the tests then unblock it and wait for the thread to
 * end, up to a generous deadline, on a pipe its release writes to.
 * - a call that returns is waited for, its result given back, nothing counted;
 * - a call that blocks is abandoned at its deadline and counted stuck; once it returns,
 *   its thread releases it (undoing what it did) and it is no longer stuck;
 * - with BPFTEL_DEADLINE_STUCK_MAX stuck, the next call is refused before it runs;
 * - with BPFTEL_DEADLINE_STUCK_PER_OWNER of one owner stuck, that owner's next call is
 *   refused before it runs, and another owner's runs; calls that return in time do not
 *   count against their owner;
 * - as many abandoned within BPFTEL_DEADLINE_STRIKE_WINDOW_S, even once they ended, get
 *   the owner's calls refused until the window is over.
 * The windows run on a clock the tests move (bpftel_deadline_set_clock): each test
 * begins in a new window.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>

#include "user/common/deadline_call.h"

/* Up to a minute for a thread to end once unblocked: never reached but on a stalled
 * machine, and then the test fails rather than hangs. */
#define END_WAIT_MS 60000

struct job {
	struct bpftel_deadline_call call;
	int block_fd;	 /* run reads one byte from it: blocks until the test writes */
	int released_fd; /* release writes one byte to it */
	int value;
	int *runs;
};

static int run_job(struct bpftel_deadline_call *c)
{
	struct job *j = (struct job *)c;
	char b;

	__atomic_add_fetch(j->runs, 1, __ATOMIC_RELAXED);
	if (j->block_fd >= 0 && read(j->block_fd, &b, 1) != 1)
		return -EIO;
	return j->value;
}

static void release_job(struct bpftel_deadline_call *c)
{
	struct job *j = (struct job *)c;
	char b = 1;

	if (j->released_fd >= 0 && write(j->released_fd, &b, 1) != 1)
		abort();
	free(j);
}

static __u64 fake_ns = 1;

static __u64 fake_clock(void)
{
	return __atomic_load_n(&fake_ns, __ATOMIC_RELAXED);
}

/* Past every owner's window. */
static void next_window(void)
{
	__atomic_add_fetch(&fake_ns, BPFTEL_DEADLINE_STRIKE_WINDOW_S * 1000000000ULL, __ATOMIC_RELAXED);
}

/* Each test's pipes: the blocked runs read block[0], the releases write released[1]. */
static int block[2], released[2];

static int each_in_a_new_window(void **state)
{
	(void)state;
	bpftel_deadline_set_clock(fake_clock);
	next_window();
	return pipe(block) || pipe(released);
}

static int close_pipes(void **state)
{
	(void)state;
	close(block[0]);
	close(block[1]);
	close(released[0]);
	close(released[1]);
	return 0;
}

static struct job *job_of(__u64 owner, int block_fd, int released_fd, int value, int *runs)
{
	struct job *j = calloc(1, sizeof(*j));

	assert_non_null(j);
	j->call.owner = owner;
	j->call.run = run_job;
	j->call.release = release_job;
	j->block_fd = block_fd;
	j->released_fd = released_fd;
	j->value = value;
	j->runs = runs;
	return j;
}

static struct job *job_new(int block_fd, int released_fd, int value, int *runs)
{
	return job_of(0, block_fd, released_fd, value, runs);
}

/* Wait for n releases on fd, each up to END_WAIT_MS. */
static void wait_released(int fd, int n)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char b;

	while (n--) {
		assert_int_equal(poll(&p, 1, END_WAIT_MS), 1);
		assert_int_equal(read(fd, &b, 1), 1);
	}
}

static void test_returns_in_time(void **state)
{
	struct bpftel_deadline_stats before, after;
	int runs = 0;
	struct job *j = job_new(-1, -1, 7, &runs);

	(void)state;
	bpftel_deadline_stats(&before);
	/* A minute: run returns at once, and the call with it. */
	assert_int_equal(bpftel_deadline_call(&j->call, 60000), 0);
	assert_int_equal(j->call.ret, 7);
	assert_int_equal(runs, 1);
	free(j);
	bpftel_deadline_stats(&after);
	assert_int_equal(after.abandoned, before.abandoned);
	assert_int_equal(after.stuck, 0);
}

static void test_abandoned_then_released(void **state)
{
	struct bpftel_deadline_stats before, s;
	int runs = 0;
	struct job *j;

	(void)state;
	bpftel_deadline_stats(&before);
	j = job_new(block[0], released[1], 5, &runs);
	assert_int_equal(bpftel_deadline_call(&j->call, 20), -ETIMEDOUT);
	bpftel_deadline_stats(&s);
	assert_int_equal(s.abandoned, before.abandoned + 1);
	assert_int_equal(s.stuck, 1);
	/* The file system answers: the thread ends and releases the job (no leak: ASan). */
	assert_int_equal(write(block[1], "x", 1), 1);
	wait_released(released[0], 1);
	bpftel_deadline_stats(&s);
	assert_int_equal(s.stuck, 0);
	assert_int_equal(s.abandoned, before.abandoned + 1);
}

static void test_refused_when_too_many_stuck(void **state)
{
	struct bpftel_deadline_stats before, s;
	int runs = 0, i;
	struct job *j;

	(void)state;
	bpftel_deadline_stats(&before);
	/* As many owners as it takes, each at its own cap. */
	for (i = 0; i < BPFTEL_DEADLINE_STUCK_MAX; i++) {
		j = job_of(i / BPFTEL_DEADLINE_STUCK_PER_OWNER, block[0], released[1], 0, &runs);
		assert_int_equal(bpftel_deadline_call(&j->call, 10), -ETIMEDOUT);
	}
	/* An owner with none stuck is refused too: the whole is reached. */
	j = job_of(BPFTEL_DEADLINE_STUCK_MAX, block[0], released[1], 0, &runs);
	assert_int_equal(bpftel_deadline_call(&j->call, 60000), -EBUSY);
	free(j); /* refused: still the caller's, never run */
	bpftel_deadline_stats(&s);
	assert_int_equal(s.stuck, BPFTEL_DEADLINE_STUCK_MAX);
	assert_int_equal(s.refused, before.refused + 1);
	assert_int_equal(s.refused_owner, before.refused_owner);
	/* Each stuck run reads one byte, then ends. */
	for (i = 0; i < BPFTEL_DEADLINE_STUCK_MAX; i++)
		assert_int_equal(write(block[1], "x", 1), 1);
	wait_released(released[0], BPFTEL_DEADLINE_STUCK_MAX);
	assert_int_equal(__atomic_load_n(&runs, __ATOMIC_RELAXED), BPFTEL_DEADLINE_STUCK_MAX);
	bpftel_deadline_stats(&s);
	assert_int_equal(s.stuck, 0);
	/* And calls run again: a new owner's at once, a struck one's after its window. */
	j = job_of(BPFTEL_DEADLINE_STUCK_MAX, -1, -1, 3, &runs);
	assert_int_equal(bpftel_deadline_call(&j->call, 60000), 0);
	assert_int_equal(j->call.ret, 3);
	free(j);
	j = job_new(-1, -1, 4, &runs);
	assert_int_equal(bpftel_deadline_call(&j->call, 60000), -EDQUOT);
	next_window();
	assert_int_equal(bpftel_deadline_call(&j->call, 60000), 0);
	assert_int_equal(j->call.ret, 4);
	free(j);
}

static void test_refused_per_owner(void **state)
{
	enum { USER = 1000, OTHER = 1001 };
	struct bpftel_deadline_stats before, s;
	int runs = 0, i;
	struct job *j;

	(void)state;
	bpftel_deadline_stats(&before);
	/* Calls that return in time leave nothing counted against their owner. */
	for (i = 0; i < 3 * BPFTEL_DEADLINE_STUCK_PER_OWNER; i++) {
		j = job_of(USER, -1, -1, i, &runs);
		assert_int_equal(bpftel_deadline_call(&j->call, 60000), 0);
		assert_int_equal(j->call.ret, i);
		free(j);
	}
	for (i = 0; i < BPFTEL_DEADLINE_STUCK_PER_OWNER; i++) {
		j = job_of(USER, block[0], released[1], 0, &runs);
		assert_int_equal(bpftel_deadline_call(&j->call, 10), -ETIMEDOUT);
	}
	/* Its next call is refused untried, ... */
	j = job_of(USER, -1, -1, 1, &runs);
	assert_int_equal(bpftel_deadline_call(&j->call, 60000), -EDQUOT);
	free(j);
	bpftel_deadline_stats(&s);
	assert_int_equal(s.stuck, BPFTEL_DEADLINE_STUCK_PER_OWNER);
	assert_int_equal(s.refused, before.refused + 1);
	assert_int_equal(s.refused_owner, before.refused_owner + 1);
	/* ... another owner's runs, and so do those of no known owner. */
	j = job_of(OTHER, -1, -1, 4, &runs);
	assert_int_equal(bpftel_deadline_call(&j->call, 60000), 0);
	assert_int_equal(j->call.ret, 4);
	free(j);
	j = job_of(BPFTEL_DEADLINE_NO_OWNER, -1, -1, 5, &runs);
	assert_int_equal(bpftel_deadline_call(&j->call, 60000), 0);
	assert_int_equal(j->call.ret, 5);
	free(j);
	/* Once one of its stuck calls ends, the owner's calls are still refused in its
	 * window (it was struck as often), and run again after it. */
	assert_int_equal(write(block[1], "x", 1), 1);
	wait_released(released[0], 1);
	j = job_of(USER, -1, -1, 6, &runs);
	assert_int_equal(bpftel_deadline_call(&j->call, 60000), -EDQUOT);
	next_window();
	assert_int_equal(bpftel_deadline_call(&j->call, 60000), 0);
	assert_int_equal(j->call.ret, 6);
	free(j);
	for (i = 1; i < BPFTEL_DEADLINE_STUCK_PER_OWNER; i++)
		assert_int_equal(write(block[1], "x", 1), 1);
	wait_released(released[0], BPFTEL_DEADLINE_STUCK_PER_OWNER - 1);
	bpftel_deadline_stats(&s);
	assert_int_equal(s.stuck, 0);
}

static void test_struck_in_its_window(void **state)
{
	enum { USER = 2000 };
	struct bpftel_deadline_stats before, s;
	int runs = 0, i;
	struct job *j;

	(void)state;
	bpftel_deadline_stats(&before);
	/* Abandoned, then ended (its daemon answered), one after the other: never more
	 * than one stuck. */
	for (i = 0; i < BPFTEL_DEADLINE_STUCK_PER_OWNER; i++) {
		j = job_of(USER, block[0], released[1], 0, &runs);
		assert_int_equal(bpftel_deadline_call(&j->call, 10), -ETIMEDOUT);
		assert_int_equal(write(block[1], "x", 1), 1);
		wait_released(released[0], 1);
	}
	bpftel_deadline_stats(&s);
	assert_int_equal(s.stuck, 0);
	assert_int_equal(s.abandoned, before.abandoned + BPFTEL_DEADLINE_STUCK_PER_OWNER);
	/* Late in the window, still refused. */
	__atomic_add_fetch(&fake_ns, (BPFTEL_DEADLINE_STRIKE_WINDOW_S - 1) * 1000000000ULL,
			   __ATOMIC_RELAXED);
	j = job_of(USER, -1, -1, 8, &runs);
	assert_int_equal(bpftel_deadline_call(&j->call, 60000), -EDQUOT);
	bpftel_deadline_stats(&s);
	assert_int_equal(s.refused_owner, before.refused_owner + 1);
	/* Its window over, it runs. */
	__atomic_add_fetch(&fake_ns, 1000000000ULL, __ATOMIC_RELAXED);
	assert_int_equal(bpftel_deadline_call(&j->call, 60000), 0);
	assert_int_equal(j->call.ret, 8);
	free(j);
}

/* A test in a new window of its own, with pipes of its own. */
#define WINDOWED(t) cmocka_unit_test_setup_teardown(t, each_in_a_new_window, close_pipes)

int main(void)
{
	const struct CMUnitTest tests[] = {
		WINDOWED(test_returns_in_time),
		WINDOWED(test_abandoned_then_released),
		WINDOWED(test_refused_when_too_many_stuck),
		WINDOWED(test_refused_per_owner),
		WINDOWED(test_struck_in_its_window),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
