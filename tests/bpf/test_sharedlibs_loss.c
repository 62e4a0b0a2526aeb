// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Library events lost on the way, and the library found all the same: by the /proc
 * rescan that the watcher's housekeeping does after any loss. The real watcher, uprobe
 * registry and GPU module; cuda_pattern dlopens the stub libcudart.so.13 after
 * lib_open filled what its event would need:
 *
 *  - in the kernel: a 4 KiB ring buffer (the agent's ringbuf_kib) and its consumer held
 *    (bpftel_module__hold_consumer); every open that no longer fits is counted as lost,
 *    by the watcher and by errors telemetry under the program that lost it, alike.
 *  - in userspace: 16-record queues (queue_len) and a listener that blocks the
 *    watcher's worker, so the queue is full when the stub's event arrives: dropped,
 *    counted as queue_full.
 *
 * Either way the GPU module's uprobes are not on the stub until housekeeping runs, and
 * are on it once it has. And a flood of execs, in a ring buffer of their own, takes no
 * room from library opens: the stub's event gets through.
 *
 *   test_bpf_sharedlibs_loss CUDA_PATTERN STUB_LIBCUDART LIB_OPEN
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "prog_common.h"
#include "tests/gpu/probe_points.h"

#define NPROBES GPU_TEST_CUDART_POINTS /* the GPU module's on the stub libcudart */

static char *pattern_bin, *stub_lib, *lib_open_bin;

struct fixture {
	struct prog_env *env;
	struct prog_child child;
	char dir[64], lib[96];
	/* The worker's gate: closed, every detection waits in the listener. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool closed;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	FILE *file;

	f->env = prog_env_new();
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	snprintf(f->dir, sizeof(f->dir), "/tmp/bpftel-loss-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->lib, sizeof(f->lib), "%s/libcuda.so.1", f->dir);
	file = fopen(f->lib, "w");
	assert_non_null(file);
	fclose(file);
	*state = f;
	return 0;
}

static void gate_open(struct fixture *f)
{
	pthread_mutex_lock(&f->lock);
	f->closed = false;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	gate_open(f); /* a stop joins the worker */
	prog_child_stop(&f->child);
	prog_env_free(f->env);
	unlink(f->lib);
	rmdir(f->dir);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	free(f);
	return 0;
}

/* The registry's listener, behind the gate. */
static void gate_listener(void *ctx, const struct bpftel_shlib_detection *d)
{
	struct fixture *f = ctx;

	pthread_mutex_lock(&f->lock);
	while (f->closed)
		pthread_cond_wait(&f->cond, &f->lock);
	pthread_mutex_unlock(&f->lock);
	bpftel_uprobes__listener(f->env->up, d);
}

static struct bpftel_sharedlibs_counters counters(struct fixture *f)
{
	struct bpftel_sharedlibs_counters c;

	assert_int_equal(bpftel_sharedlibs__counters(f->env->sl, &c), 0);
	return c;
}

static struct bpftel_module_event_stats event_stats(struct fixture *f)
{
	struct bpftel_module_event_stats es;

	bpftel_module__event_stats(f->env->shlib_mod, &es);
	return es;
}

/* The stub's process, started once its library event cannot get through. */
static void start_pattern(struct fixture *f)
{
	char *argv[] = {pattern_bin, stub_lib, "stub", NULL};

	prog_child_start(&f->child, argv); /* "loaded": the dlopen, and its event, are done */
}

/* Not attached through an event: the rescan of housekeeping finds the stub. */
static void check_found_by_rescan(struct fixture *f)
{
	assert_int_equal(prog_attached(f->env, BPFTEL_GPU_MODULE, f->child.pid), 0);
	bpftel_module__ops(f->env->shlib_mod)->housekeeping(f->env->shlib_mod);
	if (!WAIT_FOR(prog_attached(f->env, BPFTEL_GPU_MODULE, f->child.pid) == NPROBES))
		fail_msg("the rescan did not attach the stub of pid %d: %zu probe points",
			 (int)f->child.pid, prog_attached(f->env, BPFTEL_GPU_MODULE, f->child.pid));
}

/* Ring-buffer output failures of the watcher's programs, from errors telemetry. */
static __u64 telemetry_lost(struct fixture *f)
{
	struct bpftel_tlm_error *e;
	__u64 sum = 0;
	int n, i;

	n = bpftel_telemetry__errors(f->env->tlm, &e);
	for (i = 0; i < n; i++) {
		if (!strcmp(e[i].module, BPFTEL_SHAREDLIBS_MODULE) &&
		    (!strcmp(e[i].resource, "shlib_events") ||
		     !strcmp(e[i].resource, "shlib_exec_events")) &&
		    !strcmp(e[i].op, "ringbuf_output"))
			sum += e[i].count;
	}
	if (n >= 0)
		free(e);
	return sum;
}

static void test_kernel_loss_found_by_rescan(void **state)
{
	struct bpftel_pipeline_settings ps = {.ringbuf_bytes = 4096};
	struct fixture *f = *state;
	char *fill[] = {lib_open_bin, "openat", f->lib, "200", NULL};
	struct bpftel_sharedlibs_counters full, after;
	struct bpf_map *rb;

	bpftel_manager__set_pipeline(f->env->mgr, &ps);
	assert_int_equal(bpftel_module__run(f->env->gpu_mod), 0);
	rb = bpf_object__find_map_by_name(bpftel_module__object(f->env->shlib_mod), "shlib_events");
	assert_int_equal(bpf_map__max_entries(rb), 4096);
	assert_int_equal(bpftel_module__hold_consumer(f->env->shlib_mod, true), 0);
	/* 200 records of over 100 bytes: 4 KiB holds a few dozen, the rest are lost. */
	prog_run(fill);
	full = counters(f);
	assert_true(full.kernel[SHLIB_CNT_LOST] > 0);
	start_pattern(f);
	after = counters(f);
	/* Nothing fits any more: the stub's event was lost, not emitted. */
	assert_int_equal(after.kernel[SHLIB_CNT_EMITTED], full.kernel[SHLIB_CNT_EMITTED]);
	assert_true(after.kernel[SHLIB_CNT_LOST] > full.kernel[SHLIB_CNT_LOST]);
	assert_int_equal(bpftel_module__hold_consumer(f->env->shlib_mod, false), 0);
	/* What the ring buffer held is read, and handled. */
	if (!WAIT_FOR(counters(f).received >= after.kernel[SHLIB_CNT_EMITTED]))
		fail_msg("the watcher never read its ring buffer");
	check_found_by_rescan(f);
	/* Each loss counted twice, alike: by the watcher and under the program. */
	after = counters(f);
	assert_int_equal(telemetry_lost(f),
			 after.kernel[SHLIB_CNT_LOST] + after.kernel[SHLIB_CNT_EXEC_LOST]);
}

static void test_queue_loss_found_by_rescan(void **state)
{
	struct bpftel_pipeline_settings ps = {.workers = 1, .queue_len = 16};
	struct fixture *f = *state;
	char *fill[] = {lib_open_bin, "openat", f->lib, "200", NULL};
	struct bpftel_module_event_stats es;
	__u64 emitted;

	bpftel_manager__set_pipeline(f->env->mgr, &ps);
	f->closed = true;
	bpftel_sharedlibs__set_listener(f->env->sl, gate_listener, f);
	assert_int_equal(bpftel_module__run(f->env->gpu_mod), 0);
	/* The first detection holds the worker; 16 slots fill, the rest are dropped. */
	prog_run(fill);
	start_pattern(f);
	emitted = counters(f).kernel[SHLIB_CNT_EMITTED];
	assert_true(emitted >= 201);
	/* Every record emitted up to the stub's was read: all but the 16 queued dropped
	 * (nothing processed while the gate is closed), the stub's among them. */
	if (!WAIT_FOR((es = event_stats(f)).lost_queue_full + 16 >= emitted))
		fail_msg("%llu records dropped of %llu", (unsigned long long)es.lost_queue_full,
			 (unsigned long long)emitted);
	assert_int_equal(es.processed, 0);
	assert_int_equal(counters(f).kernel[SHLIB_CNT_LOST], 0);
	gate_open(f);
	/* At least: the host's opens meanwhile may be processed after them. */
	if (!WAIT_FOR(event_stats(f).processed >= 16))
		fail_msg("the 16 queued records were not processed");
	check_found_by_rescan(f);
	assert_true(event_stats(f).lost_queue_full >= emitted - 16);
}

/* A flood of execs, which any user can make, fills the execs' own ring buffer, not the
 * library opens': the stub's event still gets through, and the GPU module attaches to
 * it with no rescan. */
static void test_exec_flood_spares_library_events(void **state)
{
	struct bpftel_pipeline_settings ps = {.ringbuf_bytes = 4096};
	struct fixture *f = *state;
	char *flood[] = {"/bin/sh", "-c",
			 "i=0; while [ $i -lt 200 ]; do /bin/true; i=$((i + 1)); done", NULL};
	struct bpftel_sharedlibs_counters full, after;

	bpftel_manager__set_pipeline(f->env->mgr, &ps);
	assert_int_equal(bpftel_module__run(f->env->gpu_mod), 0);
	/* Execs asked for as USM asks (Go), without USM's crypto libraries: the host's opens
	 * of libssl would take room in the library ring meanwhile. */
	assert_int_equal(bpftel_manager__subscribe(f->env->mgr, BPFTEL_SHAREDLIBS_MODULE, "test",
						   SHLIB_LIBSET_BIT(SHLIB_LIBSET_GPU) |
							   SHLIB_SUB_EXECS),
			 0);
	assert_int_equal(bpftel_module__hold_consumer(f->env->shlib_mod, true), 0);
	/* 200 exec records of over 100 bytes: 4 KiB holds a few dozen. */
	prog_run(flood);
	full = counters(f);
	assert_true(full.kernel[SHLIB_CNT_EXEC_LOST] > 0);
	start_pattern(f);
	after = counters(f);
	assert_true(after.kernel[SHLIB_CNT_EMITTED] > full.kernel[SHLIB_CNT_EMITTED]);
	assert_int_equal(after.kernel[SHLIB_CNT_LOST], 0); /* no library open's */
	assert_int_equal(bpftel_module__hold_consumer(f->env->shlib_mod, false), 0);
	if (!WAIT_FOR(prog_attached(f->env, BPFTEL_GPU_MODULE, f->child.pid) == NPROBES))
		fail_msg("the stub of pid %d was not attached from its event: %zu probe points",
			 (int)f->child.pid, prog_attached(f->env, BPFTEL_GPU_MODULE, f->child.pid));
	after = counters(f);
	assert_int_equal(telemetry_lost(f),
			 after.kernel[SHLIB_CNT_LOST] + after.kernel[SHLIB_CNT_EXEC_LOST]);
}

/* A copy of the file at src at dst: the longest path open(2) takes. */
static void copy_file(const char *src, const char *dst)
{
	char buf[65536];
	FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
	size_t n;

	assert_non_null(in);
	assert_non_null(out);
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		assert_int_equal(fwrite(buf, 1, n, out), n);
	fclose(in);
	assert_int_equal(fclose(out), 0);
}

/* The stub dlopened at a path of SHLIB_PATH_MAX - 1 bytes, the longest the kernel
 * takes: its event, the largest record the watcher sends, gets through the consumer
 * (not dropped as too big), and the GPU module attaches to the stub with no rescan. */
static void test_longest_path_event_delivered(void **state)
{
	static const char lib[] = "/libcudart.so.13";
	struct fixture *f = *state;
	char path[SHLIB_PATH_MAX], cmd[96], *argv[] = {pattern_bin, path, "stub", NULL};
	size_t len, part, left;

	len = (size_t)snprintf(path, sizeof(path), "%s/d", f->dir);
	assert_int_equal(mkdir(path, 0755), 0);
	/* Directories of up to 200 bytes, "/" each, filling what the name leaves; never
	 * leaving 1 byte (a directory's "/" and no name). */
	while ((left = SHLIB_PATH_MAX - 1 - (len + sizeof(lib) - 1)) > 0) {
		part = left - 1 <= 200 ? left - 1 : left - 1 - 200 >= 2 ? 200 : 198;
		path[len++] = '/';
		memset(path + len, 'd', part);
		len += part;
		path[len] = '\0';
		assert_int_equal(mkdir(path, 0755), 0);
	}
	memcpy(path + len, lib, sizeof(lib));
	assert_int_equal(strlen(path), SHLIB_PATH_MAX - 1);
	copy_file(stub_lib, path);
	assert_int_equal(bpftel_module__run(f->env->gpu_mod), 0);
	prog_child_start(&f->child, argv);
	if (!WAIT_FOR(prog_attached(f->env, BPFTEL_GPU_MODULE, f->child.pid) == NPROBES))
		fail_msg("the stub at a path of %zu bytes was not attached from its event: %zu "
			 "probe points, %llu records too big",
			 strlen(path), prog_attached(f->env, BPFTEL_GPU_MODULE, f->child.pid),
			 (unsigned long long)event_stats(f).lost_too_big);
	assert_int_equal(event_stats(f).lost_too_big, 0);
	prog_child_stop(&f->child);
	snprintf(cmd, sizeof(cmd), "rm -rf %s/d", f->dir);
	assert_int_equal(system(cmd), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_kernel_loss_found_by_rescan, setup, teardown),
		cmocka_unit_test_setup_teardown(test_queue_loss_found_by_rescan, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_flood_spares_library_events, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_longest_path_event_delivered, setup,
						teardown),
	};

	if (argc != 4) {
		fprintf(stderr, "usage: test_bpf_sharedlibs_loss CUDA_PATTERN STUB_LIBCUDART "
				"LIB_OPEN\n");
		return 2;
	}
	pattern_bin = argv[1];
	stub_lib = argv[2];
	lib_open_bin = argv[3];
	bpftel_test_require_bpf();
	return cmocka_run_group_tests_name("sharedlibs_loss", tests, NULL, NULL);
}
