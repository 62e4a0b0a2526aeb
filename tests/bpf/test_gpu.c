// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * BPF_PROG_TEST_RUN tests of bpf/gpu.bpf.c through its harness object: each case plays
 * CUDA runtime calls (probe bodies on synthetic registers, as a thread at a time) and
 * checks what the maps hold afterwards.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <bpf/bpf.h>

#include <linux/types.h>

#include "harness.h"
#include "gpu.h" /* before the skeleton: it names struct gpu_proc_stats */
#include "gpu_harness.skel.h"

#define GPU_TEST_ENTER	   0
#define GPU_TEST_RET	   16
#define GPU_TEST_TASK_EXIT 32

#define TGID	 5150
#define PID_TGID ((__u64)TGID << 32 | TGID)

/* Mirrors struct gpu_test_call of the harness. */
struct gpu_test_call {
	struct test_regs regs;
	__u64 pid_tgid;
	__u64 now;
	__u32 probe;
	__u32 __pad;
};

static struct gpu_harness *skel;

static void run(__u32 probe, struct test_regs *regs, __u64 pid_tgid, __u64 now)
{
	struct gpu_test_call ctx = {.pid_tgid = pid_tgid, .now = now, .probe = probe};
	int retval = -1;

	if (regs)
		ctx.regs = *regs;
	assert_int_equal(bpftel_test_run(skel->progs.gpu_test_call, &ctx, sizeof(ctx), &retval), 0);
	assert_int_equal(retval, 0);
}

static void enter(enum gpu_func f, struct test_regs *regs, __u64 now)
{
	run(GPU_TEST_ENTER + f, regs, PID_TGID, now);
}

static void ret(enum gpu_func f, long rc, __u64 now)
{
	struct test_regs regs = {.ax = (unsigned long)rc};

	run(GPU_TEST_RET + f, &regs, PID_TGID, now);
}

static struct gpu_proc_stats stats_of(__u32 tgid)
{
	struct gpu_proc_stats st;

	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.gpu_procs), &tgid, &st), 0);
	return st;
}

static __u64 error_count(__u32 tgid, enum gpu_func f, int error)
{
	struct gpu_err_key key = {.tgid = tgid, .func = f, .error = error};
	__u64 n = 0;

	bpf_map_lookup_elem(bpf_map__fd(skel->maps.gpu_errors), &key, &n);
	return n;
}

static size_t map_len(int fd, size_t key_size)
{
	char key[32], next[32];
	void *prev = NULL;
	size_t n = 0;

	while (!bpf_map_get_next_key(fd, prev, next)) {
		memcpy(key, next, key_size);
		prev = key;
		n++;
	}
	return n;
}

static void map_clear(int fd, size_t key_size)
{
	char next[32];

	(void)key_size;
	while (!bpf_map_get_next_key(fd, NULL, next))
		assert_int_equal(bpf_map_delete_elem(fd, next), 0);
}

static int case_setup(void **state)
{
	(void)state;
	map_clear(bpf_map__fd(skel->maps.gpu_procs), sizeof(__u32));
	map_clear(bpf_map__fd(skel->maps.gpu_allocs), sizeof(struct gpu_alloc_key));
	map_clear(bpf_map__fd(skel->maps.gpu_errors), sizeof(struct gpu_err_key));
	map_clear(bpf_map__fd(skel->maps.gpu_inflight), 16);
	return 0;
}

static int group_setup(void **state)
{
	(void)state;
	skel = gpu_harness__open_and_load();
	return skel ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	gpu_harness__destroy(skel);
	return 0;
}

/* cudaLaunchKernel(func, grid(2,3,4), block(32,2,1), args, sharedMem=4096, stream) */
static void test_launch_dims_and_shared_memory(void **state)
{
	__u64 stack[3] = {0xdead /* return address */, 4096 /* sharedMem */, 0 /* stream */};
	struct test_regs regs = {
		.di = 0x401000,
		.si = 2 | 3ul << 32,
		.dx = 4,
		.cx = 32 | 2ul << 32,
		.r8 = 1,
		.sp = (uintptr_t)stack,
	};
	struct gpu_proc_stats st;

	(void)state;
	enter(GPU_FN_LAUNCH, &regs, 100);
	ret(GPU_FN_LAUNCH, 0, 110);
	enter(GPU_FN_LAUNCH, &regs, 200);
	ret(GPU_FN_LAUNCH, 0, 210);
	st = stats_of(TGID);
	assert_int_equal(st.calls[GPU_FN_LAUNCH], 2);
	assert_int_equal(st.failed[GPU_FN_LAUNCH], 0);
	assert_int_equal(st.threads, 2 * (24 * 64)); /* 1536 threads per launch */
	assert_int_equal(st.launch_threads[10], 2);  /* 1024 <= 1536 < 2048 */
	assert_int_equal(st.shared_mem_bytes, 8192);
	assert_int_equal(st.device, -1);
	/* The hot call keeps no in-flight entry. */
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_inflight), 16), 0);
}

/* A launch whose stack cannot be read still counts; a zero-sized grid adds nothing. */
static void test_launch_unreadable_stack_and_empty_grid(void **state)
{
	struct test_regs regs = {.si = 0, .dx = 1, .cx = 1 | 1ul << 32, .r8 = 1, .sp = 8};
	struct gpu_proc_stats st;
	size_t i;

	(void)state;
	enter(GPU_FN_LAUNCH, &regs, 100);
	st = stats_of(TGID);
	assert_int_equal(st.calls[GPU_FN_LAUNCH], 1);
	assert_int_equal(st.threads, 0);
	assert_int_equal(st.shared_mem_bytes, 0);
	for (i = 0; i < GPU_LAUNCH_BUCKETS; i++)
		assert_int_equal(st.launch_threads[i], 0);
}

static void test_launch_error_counted(void **state)
{
	struct test_regs regs = {.si = 1 | 1ul << 32, .dx = 1, .cx = 1 | 1ul << 32, .r8 = 1};
	struct gpu_proc_stats st;

	(void)state;
	enter(GPU_FN_LAUNCH, &regs, 100);
	ret(GPU_FN_LAUNCH, 35 /* cudaErrorInsufficientDriver */, 110);
	enter(GPU_FN_LAUNCH, &regs, 120);
	ret(GPU_FN_LAUNCH, 35, 130);
	st = stats_of(TGID);
	assert_int_equal(st.failed[GPU_FN_LAUNCH], 2);
	assert_int_equal(error_count(TGID, GPU_FN_LAUNCH, 35), 2);
	assert_int_equal(error_count(TGID, GPU_FN_MALLOC, 35), 0);
}

/* cudaMalloc(&p, size): the pointer is read back through devPtr at return. */
static void test_malloc_free_outstanding_and_peak(void **state)
{
	__u64 slot_a = 0x7f0000100000, slot_b = 0x7f0000200000;
	struct test_regs ma = {.di = (uintptr_t)&slot_a, .si = 1 << 20};
	struct test_regs mb = {.di = (uintptr_t)&slot_b, .si = 4 << 20};
	struct test_regs fa = {.di = slot_a};
	struct gpu_alloc_key key = {.tgid = TGID, .ptr = slot_b};
	struct gpu_proc_stats st;
	struct gpu_alloc a;

	(void)state;
	enter(GPU_FN_MALLOC, &ma, 1000);
	ret(GPU_FN_MALLOC, 0, 1100);
	enter(GPU_FN_MALLOC, &mb, 2000);
	ret(GPU_FN_MALLOC, 0, 2500);
	enter(GPU_FN_FREE, &fa, 3000);
	ret(GPU_FN_FREE, 0, 3100);
	st = stats_of(TGID);
	assert_int_equal(st.allocs, 2);
	assert_int_equal(st.alloc_bytes, 5 << 20);
	assert_int_equal(st.frees, 1);
	assert_int_equal(st.freed_bytes, 1 << 20);
	assert_int_equal(st.outstanding_bytes, 4 << 20);
	assert_int_equal(st.peak_bytes, 5 << 20);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_allocs), sizeof(key)), 1);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.gpu_allocs), &key, &a), 0);
	assert_int_equal(a.size, 4 << 20);
	assert_int_equal(a.ktime_ns, 2500); /* when cudaMalloc returned */
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_inflight), 16), 0);
}

static void test_malloc_failure_allocates_nothing(void **state)
{
	__u64 slot = 0;
	struct test_regs m = {.di = (uintptr_t)&slot, .si = 1ul << 40};
	struct gpu_proc_stats st;

	(void)state;
	enter(GPU_FN_MALLOC, &m, 10);
	ret(GPU_FN_MALLOC, 2 /* cudaErrorMemoryAllocation */, 20);
	st = stats_of(TGID);
	assert_int_equal(st.calls[GPU_FN_MALLOC], 1);
	assert_int_equal(st.failed[GPU_FN_MALLOC], 1);
	assert_int_equal(st.allocs, 0);
	assert_int_equal(st.outstanding_bytes, 0);
	assert_int_equal(error_count(TGID, GPU_FN_MALLOC, 2), 1);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_allocs), 16), 0);
}

/* devPtr unreadable at return: counted as untracked, outstanding bytes untouched. */
static void test_malloc_unreadable_devptr(void **state)
{
	struct test_regs m = {.di = 8, .si = 4096};
	struct gpu_proc_stats st;

	(void)state;
	enter(GPU_FN_MALLOC, &m, 10);
	ret(GPU_FN_MALLOC, 0, 20);
	st = stats_of(TGID);
	assert_int_equal(st.allocs, 1);
	assert_int_equal(st.allocs_untracked, 1);
	assert_int_equal(st.outstanding_bytes, 0);
}

static void test_free_unknown_and_null(void **state)
{
	struct test_regs unknown = {.di = 0x7f00deadb000}, null = {.di = 0};
	struct gpu_proc_stats st;

	(void)state;
	enter(GPU_FN_FREE, &unknown, 10);
	ret(GPU_FN_FREE, 0, 20);
	enter(GPU_FN_FREE, &null, 30);
	ret(GPU_FN_FREE, 0, 40);
	st = stats_of(TGID);
	assert_int_equal(st.calls[GPU_FN_FREE], 2);
	assert_int_equal(st.frees, 0);
	assert_int_equal(st.frees_unknown, 1);
	assert_int_equal(st.outstanding_bytes, 0);
}

/* cudaMemcpy(dst, src, count, kind): bytes by kind; time for the synchronous one. */
static void test_memcpy_bytes_and_time(void **state)
{
	struct test_regs h2d = {.dx = 4096, .cx = GPU_MEMCPY_H2D};
	struct test_regs d2h = {.dx = 100, .cx = GPU_MEMCPY_D2H};
	struct test_regs odd = {.dx = 7, .cx = 99};
	struct gpu_proc_stats st;

	(void)state;
	enter(GPU_FN_MEMCPY, &h2d, 5000);
	ret(GPU_FN_MEMCPY, 0, 8000);
	enter(GPU_FN_MEMCPY_ASYNC, &d2h, 9000);
	ret(GPU_FN_MEMCPY_ASYNC, 0, 9100);
	enter(GPU_FN_MEMCPY, &odd, 10000);
	ret(GPU_FN_MEMCPY, 0, 10500);
	enter(GPU_FN_MEMCPY, &h2d, 11000);
	ret(GPU_FN_MEMCPY, 1 /* cudaErrorInvalidValue */, 11200);
	st = stats_of(TGID);
	assert_int_equal(st.memcpy_bytes[GPU_MEMCPY_H2D], 4096);
	assert_int_equal(st.memcpy_bytes[GPU_MEMCPY_D2H], 100);
	assert_int_equal(st.memcpy_bytes[GPU_MEMCPY_DEFAULT], 7);
	assert_int_equal(st.memcpy_ns, 3000 + 500);
	assert_int_equal(st.failed[GPU_FN_MEMCPY], 1);
	assert_int_equal(error_count(TGID, GPU_FN_MEMCPY, 1), 1);
}

static void test_sync_wait_and_set_device(void **state)
{
	struct test_regs none = {0}, dev3 = {.di = 3}, dev9 = {.di = 9};
	struct gpu_proc_stats st;

	(void)state;
	enter(GPU_FN_STREAM_SYNC, &none, 100);
	ret(GPU_FN_STREAM_SYNC, 0, 600);
	enter(GPU_FN_DEVICE_SYNC, &none, 1000);
	ret(GPU_FN_DEVICE_SYNC, 0, 3000);
	enter(GPU_FN_SET_DEVICE, &dev3, 4000);
	ret(GPU_FN_SET_DEVICE, 0, 4001);
	enter(GPU_FN_SET_DEVICE, &dev9, 5000);
	ret(GPU_FN_SET_DEVICE, 101 /* cudaErrorInvalidDevice */, 5001);
	st = stats_of(TGID);
	assert_int_equal(st.sync_ns, 500 + 2000);
	assert_int_equal(st.device, 3); /* the failed switch did not happen */
	assert_int_equal(error_count(TGID, GPU_FN_SET_DEVICE, 101), 1);
}

/* Returns pair with their own thread's entry only; one without an entry is ignored. */
static void test_return_pairs_per_thread(void **state)
{
	__u64 slot = 0x7f0000300000;
	struct test_regs m = {.di = (uintptr_t)&slot, .si = 8192};
	struct test_regs other_ret = {.ax = 0};
	struct gpu_proc_stats st;

	(void)state;
	ret(GPU_FN_MALLOC, 0, 5); /* no entry: attached mid-call */
	enter(GPU_FN_MALLOC, &m, 10);
	run(GPU_TEST_RET + GPU_FN_MALLOC, &other_ret, (__u64)TGID << 32 | (TGID + 1), 20);
	st = stats_of(TGID);
	assert_int_equal(st.allocs, 0);
	ret(GPU_FN_MALLOC, 0, 30); /* the right thread */
	st = stats_of(TGID);
	assert_int_equal(st.allocs, 1);
	assert_int_equal(st.outstanding_bytes, 8192);
}

/* A thread that exits inside a call leaves no in-flight entry behind. */
static void test_task_exit_drops_inflight(void **state)
{
	__u64 slot = 0x7f0000400000;
	struct test_regs m = {.di = (uintptr_t)&slot, .si = 64};
	struct gpu_proc_stats st;

	(void)state;
	enter(GPU_FN_MALLOC, &m, 10);
	enter(GPU_FN_DEVICE_SYNC, &m, 11);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_inflight), 16), 2);
	run(GPU_TEST_TASK_EXIT, NULL, PID_TGID, 12);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_inflight), 16), 0);
	ret(GPU_FN_MALLOC, 0, 13);
	st = stats_of(TGID);
	assert_int_equal(st.allocs, 0);
	/* Threads of processes that never used the runtime: nothing to look at. */
	run(GPU_TEST_TASK_EXIT, NULL, 77ull << 32 | 77, 14);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_procs), 4), 1);
}

static void test_processes_kept_apart(void **state)
{
	__u64 slot = 0x7f0000500000;
	struct test_regs m = {.di = (uintptr_t)&slot, .si = 100};
	__u64 other = 6160ull << 32 | 6160;

	(void)state;
	run(GPU_TEST_ENTER + GPU_FN_MALLOC, &m, other, 1);
	run(GPU_TEST_RET + GPU_FN_MALLOC, &(struct test_regs){.ax = 0}, other, 2);
	enter(GPU_FN_MALLOC, &m, 3);
	ret(GPU_FN_MALLOC, 0, 4);
	/* Same device pointer in two processes: two allocations. */
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_allocs), 16), 2);
	assert_int_equal(stats_of(6160).outstanding_bytes, 100);
	assert_int_equal(stats_of(TGID).outstanding_bytes, 100);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup(fn, case_setup)
	const struct CMUnitTest tests[] = {
		T(test_launch_dims_and_shared_memory),
		T(test_launch_unreadable_stack_and_empty_grid),
		T(test_launch_error_counted),
		T(test_malloc_free_outstanding_and_peak),
		T(test_malloc_failure_allocates_nothing),
		T(test_malloc_unreadable_devptr),
		T(test_free_unknown_and_null),
		T(test_memcpy_bytes_and_time),
		T(test_sync_wait_and_set_device),
		T(test_return_pairs_per_thread),
		T(test_task_exit_drops_inflight),
		T(test_processes_kept_apart),
	};

	bpftel_test_require_bpf();
	return cmocka_run_group_tests_name("gpu", tests, group_setup, group_teardown);
}
