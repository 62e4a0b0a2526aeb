// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The restart regression errors telemetry exists for: a GPU-style and a USM-style
 * module, both subscribed to the real shared-libraries watcher, all three
 * instrumented, are started concurrently from two threads, stopped the same way, and
 * started again, 100 rounds. Every round: both start, the watcher reports a library
 * open made after the restart, and telemetry holds no entry of a stopped module.
 *
 *   test_bpf_telemetry_restart [ROUNDS]   (default 100)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "telemetry/telemetry.h"
#include "tt_module.h"
#include "user/sharedlibs/sharedlibs.h"

static int rounds = 100;

struct op {
	struct bpftel_module *m;
	bool start;
	int ret;
};

static void *do_op(void *arg)
{
	struct op *op = arg;

	op->ret = op->start ? bpftel_module__run(op->m) : bpftel_module__stop(op->m);
	return NULL;
}

/* Start or stop both modules at once, from two threads. */
static void both(struct tt_module *a, struct tt_module *b, bool start)
{
	struct op ops[2] = {{a->module, start, -1}, {b->module, start, -1}};
	pthread_t th[2];
	int i;

	for (i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, do_op, &ops[i]);
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(ops[0].ret, 0);
	assert_int_equal(ops[1].ret, 0);
}

/* Create path, then open it read-only from a child: the watcher ignores the process
 * that loaded it (the agent opens libraries itself). Returns the child's pid. */
static pid_t touch_and_open(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), status;
	pid_t child;

	assert_true(fd >= 0);
	close(fd);
	child = fork();
	if (child == 0) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		_exit(fd >= 0 ? 0 : 1);
	}
	assert_true(child > 0);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return child;
}

static bool detected(struct bpftel_sharedlibs *sl, pid_t pid, const char *path)
{
	struct bpftel_shlib_detection *det;
	size_t n, i;
	bool found = false;

	n = bpftel_sharedlibs__detections(sl, &det);
	for (i = 0; i < n; i++)
		found |= det[i].pid == (__u32)pid && !strcmp(det[i].path, path);
	bpftel_shlib_detections_free(det, n);
	return found;
}

static bool wait_detected(struct bpftel_sharedlibs *sl, pid_t pid, const char *path)
{
	int i;

	for (i = 0; i < 3000; i++) {
		if (detected(sl, pid, path))
			return true;
		usleep(10000);
	}
	return false;
}

static void test_restart_rounds(void **state)
{
	struct bpftel_obj_counts base, now;
	struct bpftel_sharedlibs *sl;
	struct bpftel_telemetry *tlm;
	struct bpftel_manager *mgr;
	struct tt_module *gpu, *usm;
	char dir[64], sub[96], cudart[128], ssl[128];
	pid_t pc, ps;
	int r;

	(void)state;
	bpftel_test_baseline(&base);
	snprintf(dir, sizeof(dir), "/tmp/bpftel-restart-%d", getpid());
	assert_int_equal(mkdir(dir, 0755), 0);

	mgr = bpftel_manager__new();
	assert_int_equal(bpftel_telemetry__new(&tlm), 0);
	assert_int_equal(bpftel_sharedlibs__new(mgr, NULL, &sl), 0);
	gpu = tt_module_new(mgr, "gpu", true);
	usm = tt_module_new(mgr, "usm", true);
	assert_non_null(gpu);
	assert_non_null(usm);
	assert_int_equal(bpftel_telemetry__instrument(
				 tlm, bpftel_manager__find(mgr, BPFTEL_SHAREDLIBS_MODULE)),
			 0);
	assert_int_equal(bpftel_telemetry__instrument(tlm, gpu->module), 0);
	assert_int_equal(bpftel_telemetry__instrument(tlm, usm->module), 0);
	assert_int_equal(bpftel_manager__bind_shared(mgr, gpu->module, BPFTEL_SHAREDLIBS_MODULE,
						     SHLIB_LIBSET_BIT(SHLIB_LIBSET_GPU)),
			 0);
	assert_int_equal(bpftel_manager__bind_shared(mgr, usm->module, BPFTEL_SHAREDLIBS_MODULE,
						     SHLIB_LIBSET_BIT(SHLIB_LIBSET_CRYPTO)),
			 0);

	for (r = 0; r < rounds; r++) {
		both(gpu, usm, true);
		assert_int_equal(bpftel_manager__subscribers(mgr, BPFTEL_SHAREDLIBS_MODULE), 2);

		/* Telemetry is live: each getppid() counts an EFAULT in both modules. */
		getppid();
		assert_int_equal(bpftel_telemetry__module_entries(tlm, "gpu"), 1);
		assert_int_equal(bpftel_telemetry__module_entries(tlm, "usm"), 1);

		/* The watcher sees opens made after this restart, for both libsets. */
		snprintf(sub, sizeof(sub), "%s/r%d", dir, r);
		assert_int_equal(mkdir(sub, 0755), 0);
		snprintf(cudart, sizeof(cudart), "%s/libcudart.so.13", sub);
		snprintf(ssl, sizeof(ssl), "%s/libssl.so.3", sub);
		pc = touch_and_open(cudart);
		ps = touch_and_open(ssl);
		if (!wait_detected(sl, pc, cudart) || !wait_detected(sl, ps, ssl))
			fail_msg("round %d: watcher did not report %s and %s", r, cudart, ssl);

		both(gpu, usm, false);
		assert_int_equal(bpftel_module__state(bpftel_manager__find(mgr, "sharedlibs")),
				 BPFTEL_MOD_CLOSED);
		assert_int_equal(bpftel_telemetry__module_entries(tlm, "gpu"), 0);
		assert_int_equal(bpftel_telemetry__module_entries(tlm, "usm"), 0);
		assert_int_equal(bpftel_telemetry__module_entries(tlm, "sharedlibs"), 0);
		unlink(cudart);
		unlink(ssl);
		rmdir(sub);
	}
	printf("%d rounds: both modules started and stopped concurrently each round, "
	       "watcher restarted %llu times, no telemetry entry left by a stopped module\n",
	       rounds,
	       (unsigned long long)bpftel_module__restarts(
		       bpftel_manager__find(mgr, "sharedlibs")));

	bpftel_manager__free(mgr);
	bpftel_sharedlibs__free(sl);
	bpftel_telemetry__free(tlm);
	free(gpu);
	free(usm);
	rmdir(dir);
	bpftel_test_settle_objects(&base, &now);
	assert_objects_back(&base, &now);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_restart_rounds),
	};

	if (argc > 1)
		rounds = atoi(argv[1]);
	if (rounds <= 0) {
		fprintf(stderr, "usage: %s [ROUNDS > 0]\n", argv[0]);
		return 2;
	}
	bpftel_test_require_bpf();
	return cmocka_run_group_tests_name("telemetry_restart", tests, NULL, NULL);
}
