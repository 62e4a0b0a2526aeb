// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Uprobe trap cost calibration (user/manager/trapcost.h): it measures a cost for both
 * kinds, with multi-uprobe links and with perf-event uprobes, and leaves nothing
 * behind once the reaper is done (links, programs, fds); where it cannot run (no
 * privileges) it says so and leaves nothing either. No timing is asserted here.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "user/manager/manager.h"
#include "user/manager/trapcost.h"
#include "user/manager/uprobe_multi.h"

static void calibrate_and_settle(const char *want_link)
{
	struct bpftel_obj_counts base, now;
	struct bpftel_trap_cost tc;

	bpftel_test_baseline(&base);
	assert_int_equal(bpftel_trap_cost_calibrate(&tc), 0);
	assert_true(tc.known);
	assert_string_equal(tc.link, want_link);
	assert_true(tc.uprobe_ns > 0 && tc.uretprobe_ns > 0 && tc.pair_ns > 0);
	/* positive, or -1 where it vanished in the noise: never 0 or another negative */
	assert_true(tc.uprobe_emulated_ns > 0 || tc.uprobe_emulated_ns == -1);
	assert_int_equal(tc.calls, BPFTEL_TRAP_CALLS * BPFTEL_TRAP_BATCHES);
	printf("# %s: uprobe %.0f ns, uretprobe %.0f ns, both %.0f ns, call %.1f ns, took %.1f "
	       "ms\n",
	       tc.link, tc.uprobe_ns, tc.uretprobe_ns, tc.pair_ns, tc.call_ns, tc.took_ms);
	printf("# uprobe on an emulated instruction: %.0f ns\n", tc.uprobe_emulated_ns);
	bpftel_links_settle();
	bpftel_test_settle_objects(&base, &now);
	assert_objects_back(&base, &now);
}

/*
 * A detection that fails for a moment (the process out of fds) is not kept: the next
 * one, with fds again, finds the kernel's multi-uprobe links. In a child, first of
 * this process's tests: nothing detected yet.
 */
static void test_detect_failure_not_kept(void **state)
{
	int status, fds[256], n = 0, fd;
	struct rlimit lim;
	char why[160];
	pid_t pid;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		if (getrlimit(RLIMIT_NOFILE, &lim))
			_exit(10);
		lim.rlim_cur = 200;
		if (setrlimit(RLIMIT_NOFILE, &lim))
			_exit(11);
		while (n < 256 && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
			fds[n++] = fd;
		if (errno != EMFILE)
			_exit(12);
		if (bpftel_uprobe_multi_detect(why, sizeof(why)) != -EMFILE)
			_exit(13);
		while (n)
			close(fds[--n]);
		/* 0 on a kernel with them; else its own verdict (exit 3: skipped), never
		 * the failure of the moment kept */
		n = bpftel_uprobe_multi_detect(why, sizeof(why));
		_exit(!n ? 0 : n == -EMFILE ? 14 : 3);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 3)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_multi_links(void **state)
{
	char why[160];

	(void)state;
	if (bpftel_uprobe_multi_detect(why, sizeof(why)))
		skip(); /* a kernel without them: the perf-event case covers it */
	calibrate_and_settle("multi");
}

/* As on a kernel without multi-uprobe links (before 6.6). */
static void test_perf_event_uprobes(void **state)
{
	(void)state;
	bpftel_uprobe_multi_set_fault(-EOPNOTSUPP);
	calibrate_and_settle("perf_event");
	bpftel_uprobe_multi_set_fault(0);
}

/* Without privileges nothing loads: unknown, with the reason, and no fd left. */
static void test_unprivileged_is_unknown(void **state)
{
	struct bpftel_obj_counts before, after;
	int status;
	pid_t pid;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct bpftel_trap_cost tc;
		int err;

		if (setgid(65534) || setuid(65534))
			_exit(2);
		bpftel_test_count_objects(&before);
		err = bpftel_trap_cost_calibrate(&tc);
		bpftel_test_count_objects(&after);
		printf("# unprivileged: %s (%d)\n", tc.error, err);
		_exit(err < 0 && !tc.known && tc.error[0] && after.fds == before.fds ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_detect_failure_not_kept),
		cmocka_unit_test(test_multi_links),
		cmocka_unit_test(test_perf_event_uprobes),
		cmocka_unit_test(test_unprivileged_is_unknown),
	};

	bpftel_test_require_bpf();
	return cmocka_run_group_tests_name("trapcost", tests, NULL, NULL);
}
