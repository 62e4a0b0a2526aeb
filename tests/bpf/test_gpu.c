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
#include <unistd.h>
#include <sys/syscall.h>
#include <cmocka.h>
#include <bpf/bpf.h>

#include <linux/types.h>

#include "harness.h"
#include "gpu.h" /* before the skeleton: it names struct gpu_proc_stats */
#include "user/modules/gpu/gpu.h"
#include "user/modules/gpu/gpu_shares.h"
#include "bpf/fair_share_defs.h"
#include "gpu_harness.skel.h"

#define GPU_TEST_ENTER	   0
#define GPU_TEST_RET	   GPU_FN__COUNT
#define GPU_TEST_TASK_EXIT (2 * GPU_FN__COUNT)
#define GPU_TEST_EXEC	   (2 * GPU_FN__COUNT + 1)

#define ALLOCS_PER_PROC 3
#define KERNEL_ROWS_PER_PROC 6
#define ERROR_KINDS_PER_PROC 3

#define TGID	 5150
#define PID_TGID ((__u64)TGID << 32 | TGID)
#define THREADS_SPILLED 16 /* gpu_threads' room in these tests */

/* Mirrors struct gpu_test_call of the harness. */
struct gpu_test_call {
	struct test_regs regs;
	__u64 pid_tgid;
	__u64 now;
	__u32 probe;
	__u32 __pad;
};

static struct gpu_harness *skel;
/* The users' shares as loaded (a quarter of each table), for each case to start from. */
static __s64 share_cap_default[GPU_SHARE__COUNT];

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

/* A return of a call whose entry had stack pointer sp: 8 above it, the return address
 * popped. */
static void ret_at(enum gpu_func f, long rc, __u64 now, __u64 sp)
{
	struct test_regs regs = {.ax = (unsigned long)rc, .sp = sp + 8};

	run(GPU_TEST_RET + f, &regs, PID_TGID, now);
}

/* The process's stats as the module reports them: its row of gpu_procs, and its
 * launches from its rows of gpu_kernels (bpftel_gpu_add_launches). */
static struct gpu_proc_stats stats_of(__u32 tgid)
{
	int fd = bpf_map__fd(skel->maps.gpu_kernels);
	struct gpu_launch_key key, *prev = NULL;
	struct gpu_proc_stats st;
	struct gpu_kernel k;

	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.gpu_procs), &tgid, &st), 0);
	while (!bpf_map_get_next_key(fd, prev, &key)) {
		prev = &key;
		if (key.tgid == tgid && !bpf_map_lookup_elem(fd, &key, &k))
			bpftel_gpu_add_launches(&st, &key, &k);
	}
	return st;
}

/* The rows of kernel (api, func) of TGID, summed; the sizes of the last one read (a
 * case that asserts sizes launches its kernel at one size). */
static struct gpu_kernel kernel_of(__u32 api, __u64 func)
{
	int fd = bpf_map__fd(skel->maps.gpu_kernels), rows = 0;
	struct gpu_launch_key key, *prev = NULL;
	struct gpu_kernel k = {}, row;

	while (!bpf_map_get_next_key(fd, prev, &key)) {
		prev = &key;
		if (key.tgid != TGID || key.api != api || key.func != func ||
		    bpf_map_lookup_elem(fd, &key, &row))
			continue;
		k.launches += row.launches;
		k.threads = bpftel_add_sat(k.threads, row.threads);
		memcpy(k.grid, row.grid, sizeof(k.grid));
		memcpy(k.block, row.block, sizeof(k.block));
		rows++;
	}
	assert_true(rows > 0);
	return k;
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

/* Delete process tgid's allocations, as the sweep does for a process gone. */
static void map_clear_tgid_allocs(__u32 tgid)
{
	int fd = bpf_map__fd(skel->maps.gpu_allocs);
	struct gpu_alloc_key key, next, *prev = NULL;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		if (key.tgid == tgid) {
			assert_int_equal(bpf_map_delete_elem(fd, &key), 0);
			prev = NULL; /* from the start again */
			continue;
		}
		prev = &key;
	}
}

/* The thread state slot that pid_tgid's thread id indexes. */
static struct gpu_thread_slot slot_of(__u64 pid_tgid)
{
	struct gpu_thread_slot slot = {};
	__u32 idx = (__u32)pid_tgid % GPU_THREAD_SLOTS;

	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.gpu_thread_slots), &idx,
					     &slot), 0);
	return slot;
}

static void slots_clear(void)
{
	const struct gpu_thread_slot free_slot = {};
	int fd = bpf_map__fd(skel->maps.gpu_thread_slots);
	__u32 idx;

	for (idx = 0; idx < GPU_THREAD_SLOTS; idx++)
		assert_int_equal(bpf_map_update_elem(fd, &idx, &free_slot, BPF_ANY), 0);
}

static int case_setup(void **state)
{
	(void)state;
	slots_clear();
	map_clear(bpf_map__fd(skel->maps.gpu_procs), sizeof(__u32));
	map_clear(bpf_map__fd(skel->maps.gpu_allocs), sizeof(struct gpu_alloc_key));
	map_clear(bpf_map__fd(skel->maps.gpu_errors), sizeof(struct gpu_err_key));
	map_clear(bpf_map__fd(skel->maps.gpu_inflight), 16);
	map_clear(bpf_map__fd(skel->maps.gpu_threads), 8);
	map_clear(bpf_map__fd(skel->maps.gpu_ctxs), 16);
	map_clear(bpf_map__fd(skel->maps.gpu_kernels), 16);
	map_clear(bpf_map__fd(skel->maps.gpu_knames), 16);
	map_clear(bpf_map__fd(skel->maps.gpu_khosts), 16);
	/* As root, with the default shares, none counted. */
	assert_int_equal(syscall(SYS_setresuid, 0, -1, -1), 0);
	map_clear(bpf_map__fd(skel->maps.fair_share), sizeof(struct fair_share_key));
	map_clear(bpf_map__fd(skel->maps.fair_share_adj), sizeof(struct fair_share_key));
	map_clear(bpf_map__fd(skel->maps.fair_share_refused), sizeof(struct fair_share_key));
	memcpy(skel->data->gpu_share_cap, share_cap_default, sizeof(share_cap_default));
	memset(skel->bss->gpu_share_refused, 0, sizeof(skel->bss->gpu_share_refused));
	return 0;
}

static int group_setup(void **state)
{
	(void)state;
	skel = gpu_harness__open();
	if (!skel)
		return -1;
	/* A share of the allocation map small enough to fill in a test; and room for
	 * THREADS_SPILLED threads whose slot another holds. */
	skel->rodata->gpu_allocs_per_proc = ALLOCS_PER_PROC;
	skel->rodata->gpu_kernel_rows_per_proc = KERNEL_ROWS_PER_PROC;
	skel->rodata->gpu_error_kinds_per_proc = ERROR_KINDS_PER_PROC;
	if (bpf_map__set_max_entries(skel->maps.gpu_threads, THREADS_SPILLED))
		return -1;
	skel->rodata->gpu_launch_shared_mem = 1;
	if (gpu_harness__load(skel))
		return -1;
	memcpy(share_cap_default, skel->data->gpu_share_cap, sizeof(share_cap_default));
	return 0;
}

/* The default: launches' shared memory not summed (gpu_launch_shared_mem = off). */
static int group_setup_default(void **state)
{
	(void)state;
	skel = gpu_harness__open();
	if (!skel || gpu_harness__load(skel))
		return -1;
	memcpy(share_cap_default, skel->data->gpu_share_cap, sizeof(share_cap_default));
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	gpu_harness__destroy(skel);
	return 0;
}

/* cudaLaunchKernel(func, grid(2,3,4), block(32,2,1), args, stack[1], stack[2]): the
 * sharedMem and stream arguments on the stack, under the return address. */
static struct test_regs launch_regs(const __u64 *stack)
{
	return (struct test_regs){.di = 0x401000, .si = 2 | 3ul << 32, .dx = 4,
				  .cx = 32 | 2ul << 32, .r8 = 1, .sp = (uintptr_t)stack};
}

/* cuLaunchKernel(f, 2,3,4, 32,2, stack[1], stack[2], ...): blockZ and sharedMem on the
 * stack. */
static struct test_regs cu_launch_regs(const __u64 *stack)
{
	return (struct test_regs){.di = 0xf00, .si = 2, .dx = 3, .cx = 4, .r8 = 32, .r9 = 2,
				  .sp = (uintptr_t)stack};
}

/* cudaLaunchKernel(func, grid(2,3,4), block(32,2,1), args, sharedMem=4096, stream) */
static void test_launch_dims_and_shared_memory(void **state)
{
	__u64 stack[3] = {0xdead /* return address */, 4096 /* sharedMem */, 0 /* stream */};
	struct test_regs regs = launch_regs(stack);
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

/* By default neither launch sums its shared memory, and the rest of a launch counts as
 * with it: the runtime's is never read, the driver's stack read is for blockZ. */
static void test_launch_shared_memory_off(void **state)
{
	__u64 stack[3] = {0xdead /* return address */, 4096 /* sharedMem */, 0};
	__u64 cu_stack[4] = {0xdead, 1 /* blockZ */, 256 /* sharedMem */, 0};
	struct test_regs rt = launch_regs(stack), cu = cu_launch_regs(cu_stack);
	struct gpu_proc_stats st;

	(void)state;
	assert_int_equal(skel->rodata->gpu_launch_shared_mem, 0);
	enter(GPU_FN_LAUNCH, &rt, 100);
	ret(GPU_FN_LAUNCH, 0, 110);
	enter(GPU_FN_CU_LAUNCH, &cu, 120);
	ret(GPU_FN_CU_LAUNCH, 0, 130);
	st = stats_of(TGID);
	assert_int_equal(st.calls[GPU_FN_LAUNCH], 1);
	assert_int_equal(st.calls[GPU_FN_CU_LAUNCH], 1);
	assert_int_equal(st.threads, 2 * (24 * 64));
	assert_int_equal(st.launch_threads[10], 2);
	assert_int_equal(st.shared_mem_bytes, 0);
}

/* A grid of 2^31-1 x 65535 x 65535 blocks of 1024 threads (CUDA's largest, ~2^73
 * threads): counted as the most 64 bits hold, in the largest size bucket, not wrapped
 * round to a small number. Launched again, of the same kernel and of another (two rows
 * the report sums), with a small one between: the count stays at the top (a wrapped sum
 * was a counter that went down). */
static void test_launch_threads_saturate(void **state)
{
	__u64 stack[3] = {0xdead, 0, 0};
	struct test_regs regs = launch_regs(stack), small = launch_regs(stack);
	struct gpu_proc_stats st;

	(void)state;
	regs.si = 0x7fffffffull | 65535ull << 32;
	regs.dx = 65535;
	regs.cx = 1024 | 1ull << 32;
	regs.r8 = 1;
	enter(GPU_FN_LAUNCH, &regs, 100);
	st = stats_of(TGID);
	assert_int_equal(st.calls[GPU_FN_LAUNCH], 1);
	assert_true(st.threads == ~0ULL);
	assert_int_equal(st.launch_threads[GPU_LAUNCH_BUCKETS - 1], 1);
	small.di = regs.di + 0x200; /* a small kernel between */
	enter(GPU_FN_LAUNCH, &small, 200);
	enter(GPU_FN_LAUNCH, &regs, 300);
	assert_true(kernel_of(GPU_KERNEL_RUNTIME, regs.di).threads == ~0ULL);
	regs.di += 0x100; /* another kernel: a row of its own */
	enter(GPU_FN_LAUNCH, &regs, 400);
	st = stats_of(TGID);
	assert_int_equal(st.calls[GPU_FN_LAUNCH], 4);
	assert_true(st.threads == ~0ULL);
	assert_true(st.dev[0].threads == ~0ULL); /* the runtime's default device */
	assert_int_equal(st.launch_threads[GPU_LAUNCH_BUCKETS - 1], 3);
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

/*
 * A launch that fails counts as a launch everywhere launches are counted (a launch call:
 * the process's, its threads and size, its device's, its kernel's), and as a failure
 * (failed, the error map, its device's errors): the launches taken are the difference.
 */
static void test_launch_error_counted(void **state)
{
	struct test_regs regs = {.di = 0x403000, .si = 2 | 1ul << 32, .dx = 1,
				 .cx = 8 | 1ul << 32, .r8 = 1};
	struct gpu_proc_stats st;
	struct gpu_kernel k;

	(void)state;
	enter(GPU_FN_LAUNCH, &regs, 100);
	ret(GPU_FN_LAUNCH, 35 /* cudaErrorInsufficientDriver */, 110);
	enter(GPU_FN_LAUNCH, &regs, 120);
	ret(GPU_FN_LAUNCH, 35, 130);
	enter(GPU_FN_LAUNCH, &regs, 140);
	ret(GPU_FN_LAUNCH, 0, 150);
	st = stats_of(TGID);
	assert_int_equal(st.calls[GPU_FN_LAUNCH], 3);
	assert_int_equal(st.failed[GPU_FN_LAUNCH], 2);
	assert_int_equal(error_count(TGID, GPU_FN_LAUNCH, 35), 2);
	assert_int_equal(error_count(TGID, GPU_FN_MALLOC, 35), 0);
	assert_int_equal(st.threads, 3 * 16);
	assert_int_equal(st.launch_threads[4], 3); /* 16 threads */
	assert_int_equal(st.dev[0].launches, 3);
	assert_int_equal(st.dev[0].threads, 3 * 16);
	assert_int_equal(st.dev[0].errors, 2);
	k = kernel_of(GPU_KERNEL_RUNTIME, 0x403000);
	assert_int_equal(k.launches, 3);
	assert_int_equal(k.threads, 3 * 16);
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
	assert_int_equal(st.mem[GPU_MEM_DEVICE].allocs, 2);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].alloc_bytes, 5 << 20);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].frees, 1);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].freed_bytes, 1 << 20);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 4 << 20);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].peak_bytes, 5 << 20);
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
	assert_int_equal(st.mem[GPU_MEM_DEVICE].allocs, 0);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 0);
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
	assert_int_equal(st.mem[GPU_MEM_DEVICE].allocs, 1);
	assert_int_equal(st.allocs_untracked, 1);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 0);
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
	assert_int_equal(st.mem[GPU_MEM_DEVICE].frees, 0);
	assert_int_equal(st.frees_unknown, 1);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 0);
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
	/* Sizes a crafted library says it copied: the sum stays at the top, never wraps. */
	h2d.dx = 1ull << 63;
	enter(GPU_FN_MEMCPY, &h2d, 12000);
	ret(GPU_FN_MEMCPY, 0, 12100);
	enter(GPU_FN_MEMCPY, &h2d, 13000);
	ret(GPU_FN_MEMCPY, 0, 13100);
	st = stats_of(TGID);
	assert_true(st.memcpy_bytes[GPU_MEMCPY_H2D] == ~0ULL);
	enter(GPU_FN_MEMCPY, &h2d, 14000);
	ret(GPU_FN_MEMCPY, 0, 14100);
	assert_true(stats_of(TGID).memcpy_bytes[GPU_MEMCPY_H2D] == ~0ULL);
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
	assert_int_equal(st.mem[GPU_MEM_DEVICE].allocs, 0);
	ret(GPU_FN_MALLOC, 0, 30); /* the right thread */
	st = stats_of(TGID);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].allocs, 1);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 8192);
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
	assert_int_equal(st.mem[GPU_MEM_DEVICE].allocs, 0);
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
	assert_int_equal(stats_of(6160).mem[GPU_MEM_DEVICE].outstanding_bytes, 100);
	assert_int_equal(stats_of(TGID).mem[GPU_MEM_DEVICE].outstanding_bytes, 100);
}

/* One allocation of func of size bytes, stored at *slot, returning at now. */
static void alloc_call(enum gpu_func f, __u64 *slot, __u64 size, __u64 now)
{
	struct test_regs r = {.di = (uintptr_t)slot, .si = size, .dx = 1};

	enter(f, &r, now);
	ret(f, 0, now + 1);
}

static void free_call(enum gpu_func f, __u64 ptr, __u64 now)
{
	struct test_regs r = {.di = ptr};

	enter(f, &r, now);
	ret(f, 0, now + 1);
}

static struct gpu_alloc alloc_of(__u32 tgid, __u64 ptr)
{
	struct gpu_alloc_key key = {.tgid = tgid, .ptr = ptr};
	struct gpu_alloc a = {};

	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.gpu_allocs), &key, &a), 0);
	return a;
}

/* A thread that dies inside a free: the allocation's record, which the free's entry
 * took, goes back (outstanding, as for a failed free), and a later free of the pointer
 * accounts it. */
static void test_task_exit_in_free_keeps_record(void **state)
{
	__u64 slot = 0x7f0000410000;
	struct test_regs fr = {.di = slot};
	struct gpu_proc_stats st;

	(void)state;
	alloc_call(GPU_FN_MALLOC, &slot, 4096, 10);
	enter(GPU_FN_FREE, &fr, 20);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_allocs), 16), 0); /* taken */
	run(GPU_TEST_TASK_EXIT, NULL, PID_TGID, 21);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_inflight), 16), 0);
	st = stats_of(TGID);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 4096);
	assert_int_equal(st.allocs_tracked, 1);
	assert_int_equal(alloc_of(TGID, slot).size, 4096);
	free_call(GPU_FN_FREE, slot, 30);
	st = stats_of(TGID);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 0);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].frees, 1);
	assert_int_equal(st.allocs_tracked, 0);
}

/* A free whose return goes unseen (its return probe detached mid-call), then the
 * thread's next free: the first one's record is not lost with its in-flight entry, but
 * put back, the allocation tracked and in the process's share as before. */
static void test_free_return_unseen_keeps_record(void **state)
{
	__u64 a = 0x7f0000420000, b = 0x7f0000421000;
	struct gpu_proc_stats st;

	(void)state;
	alloc_call(GPU_FN_MALLOC, &a, 4096, 10);
	alloc_call(GPU_FN_MALLOC, &b, 8192, 20);
	enter(GPU_FN_FREE, &(struct test_regs){.di = a}, 30); /* its return never comes */
	free_call(GPU_FN_FREE, b, 40);
	st = stats_of(TGID);
	assert_int_equal(st.allocs_tracked, 1);
	assert_int_equal(alloc_of(TGID, a).size, 4096);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 4096);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].frees, 1);
	free_call(GPU_FN_FREE, a, 50);
	st = stats_of(TGID);
	assert_int_equal(st.allocs_tracked, 0);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 0);
}

/* Fill gpu_inflight with syncs of other threads in flight. Returns its capacity. */
static __u32 inflight_fill(void)
{
	int fd = bpf_map__fd(skel->maps.gpu_inflight);
	__u32 i, max = bpf_map__max_entries(skel->maps.gpu_inflight);
	struct gpu_call_key key = {.func = GPU_FN_STREAM_SYNC};
	struct gpu_call val = {};

	for (i = 0; i < max; i++) {
		key.pid_tgid = 7000ull << 32 | (7000 + i);
		assert_int_equal(bpf_map_update_elem(fd, &key, &val, BPF_NOEXIST), 0);
	}
	return max;
}

/* Every filler of inflight_fill() is still there: none was evicted. */
static void assert_inflight_kept(__u32 max)
{
	int fd = bpf_map__fd(skel->maps.gpu_inflight);
	struct gpu_call_key key = {.func = GPU_FN_STREAM_SYNC};
	struct gpu_call val;
	__u32 i;

	for (i = 0; i < max; i++) {
		key.pid_tgid = 7000ull << 32 | (7000 + i);
		assert_int_equal(bpf_map_lookup_elem(fd, &key, &val), 0);
	}
}

/*
 * gpu_inflight full (calls of other threads in flight): an entry with no room to keep
 * its arguments is counted (calls_untracked), no other call's are dropped for it, and
 * its return accounts nothing. A free with no room leaves its allocation tracked.
 * Room again: calls are accounted again.
 */
static void test_inflight_full_counted(void **state)
{
	__u64 p = 0x7f5400000000, q = 0x7f5400100000;
	struct test_regs m = {.di = (uintptr_t)&q, .si = 4096}, fr = {.di = p}, none = {0};
	struct gpu_call_key first = {.pid_tgid = 7000ull << 32 | 7000, .func = GPU_FN_STREAM_SYNC};
	struct gpu_proc_stats st;
	__u32 max;

	(void)state;
	alloc_call(GPU_FN_MALLOC, &p, 100, 10); /* room: tracked */
	max = inflight_fill();
	enter(GPU_FN_MALLOC, &m, 20);
	ret(GPU_FN_MALLOC, 0, 21);
	enter(GPU_FN_FREE, &fr, 30);
	ret(GPU_FN_FREE, 0, 31);
	enter(GPU_FN_DEVICE_SYNC, &none, 40);
	ret(GPU_FN_DEVICE_SYNC, 0, 50);
	st = stats_of(TGID);
	assert_int_equal(st.calls_untracked, 3);
	assert_int_equal(st.calls[GPU_FN_MALLOC], 2);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].allocs, 1);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].frees, 0);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 100);
	assert_int_equal(st.allocs_tracked, 1);
	assert_int_equal(st.allocs_untracked, 0);
	assert_int_equal(alloc_of(TGID, p).size, 100);
	assert_int_equal(st.sync_ns, 0);
	/* A failure is one, kept or not: counted by function and by error. */
	enter(GPU_FN_DEVICE_SYNC, &none, 52);
	ret(GPU_FN_DEVICE_SYNC, 2, 53); /* cudaErrorMemoryAllocation */
	st = stats_of(TGID);
	assert_int_equal(st.calls_untracked, 4);
	assert_int_equal(st.failed[GPU_FN_DEVICE_SYNC], 1);
	assert_int_equal(error_count(TGID, GPU_FN_DEVICE_SYNC, 2), 1);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_inflight), 16), max);
	assert_inflight_kept(max);
	/* One call returns: room for one. */
	assert_int_equal(bpf_map_delete_elem(bpf_map__fd(skel->maps.gpu_inflight), &first), 0);
	free_call(GPU_FN_FREE, p, 60);
	st = stats_of(TGID);
	assert_int_equal(st.calls_untracked, 4);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].frees, 1);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 0);
	assert_int_equal(st.allocs_tracked, 0);
}

/* Two threads free one pointer at once: the first entry takes its record, the second
 * frees it (its record taken: a free of an unknown pointer), and the first fails (the
 * pointer is none of the process's any more). Nothing stays outstanding; a free that
 * fails otherwise (a sticky error) puts its record back. */
static void test_free_race_failed_invalid(void **state)
{
	__u64 p = 0x7f5600000000, q = 0x7f5600100000, b = (__u64)TGID << 32 | (TGID + 1);
	struct test_regs fr = {.di = p}, ok = {.ax = 0}, invalid = {.ax = 1}, sticky = {.ax = 999};
	struct gpu_proc_stats st;

	(void)state;
	alloc_call(GPU_FN_MALLOC, &p, 100, 10);
	run(GPU_TEST_ENTER + GPU_FN_FREE, &fr, PID_TGID, 20);
	run(GPU_TEST_ENTER + GPU_FN_FREE, &fr, b, 21);
	run(GPU_TEST_RET + GPU_FN_FREE, &ok, b, 22);
	run(GPU_TEST_RET + GPU_FN_FREE, &invalid, PID_TGID, 23);
	st = stats_of(TGID);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 0);
	assert_int_equal(st.dev[0].outstanding_bytes, 0);
	assert_int_equal(st.allocs_tracked, 0);
	assert_int_equal(st.allocs_untracked, 0);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_allocs), 16), 0);

	alloc_call(GPU_FN_MALLOC, &q, 200, 30);
	fr.di = q;
	run(GPU_TEST_ENTER + GPU_FN_FREE, &fr, PID_TGID, 40);
	run(GPU_TEST_RET + GPU_FN_FREE, &sticky, PID_TGID, 41);
	st = stats_of(TGID);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 200);
	assert_int_equal(alloc_of(TGID, q).size, 200);
	assert_int_equal(st.allocs_tracked, 1);
}

/* The wrong free of pinned host memory (cudaFree, cuMemFree_v2: a common bug) fails as
 * for a pointer that is none of the process's, but the memory is still there: its
 * record goes back, outstanding, and the right free (cudaFreeHost) frees it. Likewise
 * cudaFreeHost of device memory. */
static void test_wrong_free_keeps_allocation(void **state)
{
	__u64 p = 0x7f5700000000, q = 0x7f5700100000;
	struct test_regs fr = {.di = p};
	struct gpu_proc_stats st;

	(void)state;
	alloc_call(GPU_FN_MALLOC_HOST, &p, 4096, 10);
	enter(GPU_FN_FREE, &fr, 20);
	ret(GPU_FN_FREE, 1 /* cudaErrorInvalidValue */, 21);
	enter(GPU_FN_CU_MEM_FREE, &fr, 22);
	ret(GPU_FN_CU_MEM_FREE, 1 /* CUDA_ERROR_INVALID_VALUE */, 23);
	st = stats_of(TGID);
	assert_int_equal(st.failed[GPU_FN_FREE], 1);
	assert_int_equal(st.mem[GPU_MEM_HOST].outstanding_bytes, 4096);
	assert_int_equal(st.allocs_tracked, 1);
	assert_int_equal(alloc_of(TGID, p).size, 4096);
	free_call(GPU_FN_FREE_HOST, p, 30);
	st = stats_of(TGID);
	assert_int_equal(st.mem[GPU_MEM_HOST].outstanding_bytes, 0);
	assert_int_equal(st.mem[GPU_MEM_HOST].frees, 1);
	assert_int_equal(st.frees_unknown, 0);
	assert_int_equal(st.allocs_tracked, 0);

	alloc_call(GPU_FN_MALLOC, &q, 512, 40);
	fr.di = q;
	enter(GPU_FN_FREE_HOST, &fr, 50);
	ret(GPU_FN_FREE_HOST, 1, 51);
	st = stats_of(TGID);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 512);
	assert_int_equal(st.allocs_tracked, 1);
	/* The right free, failing so, is another thread's free that came first. */
	enter(GPU_FN_FREE, &fr, 60);
	ret(GPU_FN_FREE, 1, 61);
	st = stats_of(TGID);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 0);
	assert_int_equal(st.allocs_tracked, 0);
}

/* An allocation at an address still tracked (its free went unseen): the old record is
 * replaced, its bytes leave their kind, and the process holds one entry, not two. */
static void test_alloc_at_tracked_address_replaces(void **state)
{
	__u64 p = 0x7f5000000000;
	struct gpu_proc_stats st;

	(void)state;
	alloc_call(GPU_FN_MALLOC_ASYNC, &p, 100, 10);
	alloc_call(GPU_FN_MALLOC, &p, 200, 20); /* no free of p seen between */
	st = stats_of(TGID);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_allocs), 16), 1);
	assert_int_equal(st.allocs_tracked, 1);
	assert_int_equal(st.allocs_replaced, 1);
	assert_int_equal(st.allocs_untracked, 0);
	assert_int_equal(st.mem[GPU_MEM_ASYNC].outstanding_bytes, 0);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 200);
	assert_int_equal(st.dev[0].outstanding_bytes, 200);
	assert_int_equal(alloc_of(TGID, p).size, 200);
	free_call(GPU_FN_FREE, p, 30);
	st = stats_of(TGID);
	assert_int_equal(st.allocs_tracked, 0);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 0);
	assert_int_equal(st.frees_unknown, 0);
}

/* 0-byte allocations succeed with NULL: nothing held, no slot of the process's share
 * taken, however many there are. */
static void test_zero_size_allocs_not_tracked(void **state)
{
	__u64 null = 0, p = 0x7f5100000000;
	struct gpu_proc_stats st;
	int i;

	(void)state;
	for (i = 0; i < ALLOCS_PER_PROC + 2; i++)
		alloc_call(GPU_FN_MALLOC, &null, 0, 10 + i);
	alloc_call(GPU_FN_MALLOC, &p, 64, 50);
	st = stats_of(TGID);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].allocs, ALLOCS_PER_PROC + 3);
	assert_int_equal(st.allocs_tracked, 1);
	assert_int_equal(st.allocs_over_cap, 0);
	assert_int_equal(st.allocs_untracked, 0);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 64);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_allocs), 16), 1);
}

/* Sizes no device or host has (a process making them up: 2^63 twice) are counted but
 * not tracked, so that no sum of outstanding bytes can wrap (gpu_state.h); 2^48 bytes
 * (256 TiB) still are, and their free takes them off. */
static void test_alloc_larger_than_any_not_tracked(void **state)
{
	__u64 a = 0x7f5200000000, b = 0x7f5300000000, c = 0x7f5400000000;
	struct gpu_proc_stats st;

	(void)state;
	alloc_call(GPU_FN_MALLOC_MANAGED, &a, 1ull << 63, 10);
	alloc_call(GPU_FN_MALLOC_MANAGED, &b, 1ull << 63, 20);
	alloc_call(GPU_FN_MALLOC_MANAGED, &c, 1ull << 48, 30);
	st = stats_of(TGID);
	assert_int_equal(st.mem[GPU_MEM_MANAGED].allocs, 3);
	assert_true(st.mem[GPU_MEM_MANAGED].alloc_bytes == ~0ULL);
	assert_int_equal(st.allocs_untracked, 2);
	assert_int_equal(st.allocs_tracked, 1);
	assert_true(st.mem[GPU_MEM_MANAGED].outstanding_bytes == 1ll << 48);
	assert_true(st.mem[GPU_MEM_MANAGED].peak_bytes == 1ll << 48);
	assert_true(st.dev[0].outstanding_bytes == 1ll << 48);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_allocs), 16), 1);
	free_call(GPU_FN_FREE, a, 40); /* untracked: known to no one */
	free_call(GPU_FN_FREE, c, 50);
	st = stats_of(TGID);
	assert_int_equal(st.mem[GPU_MEM_MANAGED].outstanding_bytes, 0);
	assert_true(st.mem[GPU_MEM_MANAGED].peak_bytes == 1ll << 48);
	assert_int_equal(st.dev[0].outstanding_bytes, 0);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_allocs), 16), 0);
}

/* Thread 1 frees p; before its return, thread 2 is given p by a new allocation. The
 * free took p's record at its entry: thread 2's record stands, nothing is replaced,
 * and the bytes add up. */
static void test_free_and_alloc_of_one_address_race(void **state)
{
	__u64 p = 0x7f5200000000, other = (__u64)TGID << 32 | (TGID + 1);
	struct test_regs fr = {.di = p}, ok = {.ax = 0};
	struct test_regs m = {.di = (uintptr_t)&p, .si = 300, .dx = 1};
	struct gpu_proc_stats st;

	(void)state;
	alloc_call(GPU_FN_MALLOC, &p, 100, 10);
	enter(GPU_FN_FREE, &fr, 20);				   /* thread 1 */
	run(GPU_TEST_ENTER + GPU_FN_MALLOC, &m, other, 21);	   /* thread 2 */
	run(GPU_TEST_RET + GPU_FN_MALLOC, &ok, other, 22);
	ret(GPU_FN_FREE, 0, 23);				   /* thread 1 returns */
	st = stats_of(TGID);
	assert_int_equal(st.allocs_replaced, 0);
	assert_int_equal(st.allocs_tracked, 1);
	assert_int_equal(st.frees_unknown, 0);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].frees, 1);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].freed_bytes, 100);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 300);
	assert_int_equal(alloc_of(TGID, p).size, 300);
}

/* A free that fails leaves the allocation as it was: its record goes back (but for a
 * pointer the library says is none of the process's: test_free_race_failed_invalid). */
static void test_failed_free_keeps_allocation(void **state)
{
	__u64 p = 0x7f5300000000;
	struct test_regs fr = {.di = p};
	struct gpu_proc_stats st;

	(void)state;
	alloc_call(GPU_FN_MALLOC_MANAGED, &p, 4096, 10);
	enter(GPU_FN_FREE, &fr, 20);
	ret(GPU_FN_FREE, 719 /* cudaErrorLaunchFailure: sticky */, 21);
	st = stats_of(TGID);
	assert_int_equal(st.failed[GPU_FN_FREE], 1);
	assert_int_equal(st.allocs_tracked, 1);
	assert_int_equal(st.mem[GPU_MEM_MANAGED].outstanding_bytes, 4096);
	assert_int_equal(alloc_of(TGID, p).ktime_ns, 11); /* the record as it was */
	free_call(GPU_FN_FREE, p, 30);
	st = stats_of(TGID);
	assert_int_equal(st.mem[GPU_MEM_MANAGED].outstanding_bytes, 0);
	assert_int_equal(st.mem[GPU_MEM_MANAGED].frees, 1);
	assert_int_equal(st.allocs_tracked, 0);
}

/* Each allocating call makes its kind; a free takes the bytes off the kind the pointer
 * was allocated as, whichever call frees it (cudaFree of managed memory). */
static void test_memory_kinds(void **state)
{
	__u64 async = 0x7f1000000000, managed = 0x7f2000000000, host1 = 0x7f3000000000,
	      host2 = 0x7f3000100000, drv = 0x7f4000000000;
	struct gpu_proc_stats st;

	(void)state;
	alloc_call(GPU_FN_MALLOC_ASYNC, &async, 1000, 10);
	alloc_call(GPU_FN_MALLOC_MANAGED, &managed, 2000, 20);
	alloc_call(GPU_FN_MALLOC_HOST, &host1, 300, 30);
	assert_int_equal(alloc_of(TGID, managed).kind, GPU_MEM_MANAGED);
	assert_int_equal(alloc_of(TGID, host1).kind, GPU_MEM_HOST);
	free_call(GPU_FN_FREE_ASYNC, async, 40);
	free_call(GPU_FN_FREE, managed, 50);
	free_call(GPU_FN_FREE_HOST, host1, 60);
	alloc_call(GPU_FN_HOST_ALLOC, &host2, 400, 70);
	alloc_call(GPU_FN_CU_MEM_ALLOC_HOST, &drv, 50, 80);
	st = stats_of(TGID);
	assert_int_equal(st.mem[GPU_MEM_ASYNC].allocs, 1);
	assert_int_equal(st.mem[GPU_MEM_ASYNC].frees, 1);
	assert_int_equal(st.mem[GPU_MEM_ASYNC].outstanding_bytes, 0);
	assert_int_equal(st.mem[GPU_MEM_ASYNC].peak_bytes, 1000);
	assert_int_equal(st.mem[GPU_MEM_MANAGED].alloc_bytes, 2000);
	assert_int_equal(st.mem[GPU_MEM_MANAGED].freed_bytes, 2000);
	assert_int_equal(st.mem[GPU_MEM_MANAGED].outstanding_bytes, 0);
	assert_int_equal(st.mem[GPU_MEM_HOST].allocs, 3);
	assert_int_equal(st.mem[GPU_MEM_HOST].frees, 1);
	assert_int_equal(st.mem[GPU_MEM_HOST].outstanding_bytes, 450);
	assert_int_equal(st.mem[GPU_MEM_HOST].peak_bytes, 450);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].allocs, 0);
	assert_int_equal(st.allocs_tracked, 2);
	assert_int_equal(st.calls[GPU_FN_HOST_ALLOC], 1);
	assert_int_equal(st.calls[GPU_FN_CU_MEM_ALLOC_HOST], 1);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_allocs), 16), 2);
}

/* A process holds at most its share of gpu_kernels' rows: a new kernel past it counts in
 * the process's stats (launches and threads exact), not per kernel; a kernel with a row
 * still adds there, and another process still gets rows. */
static void test_kernel_rows_cap_per_process(void **state)
{
	struct test_regs regs = {.si = 2 | 1ul << 32, .dx = 1, .cx = 8 | 1ul << 32, .r8 = 1};
	struct gpu_proc_stats st;
	int i;

	(void)state;
	for (i = 0; i <= KERNEL_ROWS_PER_PROC; i++) {
		regs.di = 0x410000 + (__u64)i * 0x100;
		enter(GPU_FN_LAUNCH, &regs, 100 + i);
		ret(GPU_FN_LAUNCH, 0, 100 + i);
	}
	regs.di = 0x410000; /* a kernel with a row */
	enter(GPU_FN_LAUNCH, &regs, 200);
	ret(GPU_FN_LAUNCH, 0, 201);
	run(GPU_TEST_ENTER + GPU_FN_LAUNCH, &regs, 6160ull << 32 | 6160, 300);
	st = stats_of(TGID);
	assert_int_equal(st.calls[GPU_FN_LAUNCH], KERNEL_ROWS_PER_PROC + 2);
	assert_int_equal(st.threads, (KERNEL_ROWS_PER_PROC + 2) * 16);
	assert_int_equal(st.dev[GPU_DEV_UNKNOWN].launches + st.dev[0].launches,
			 KERNEL_ROWS_PER_PROC + 2);
	assert_int_equal(st.kernel_rows, KERNEL_ROWS_PER_PROC);
	assert_int_equal(st.kernel_rows_over_cap, 1);
	assert_int_equal(kernel_of(GPU_KERNEL_RUNTIME, 0x410000).launches, 2);
	assert_int_equal(stats_of(6160).kernel_rows, 1);
	/* Its rows and the other's: none for the kernel past the share. */
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_kernels), 16), KERNEL_ROWS_PER_PROC + 1);
}

/* Likewise its share of gpu_errors' kinds: a failure of a new kind past it counts in
 * its failed calls only; a kind with a row still adds there. */
static void test_error_kinds_cap_per_process(void **state)
{
	__u64 slot = 0x7f0000600000;
	struct test_regs m = {.di = (uintptr_t)&slot, .si = 64};
	struct gpu_proc_stats st;
	int i;

	(void)state;
	for (i = 0; i <= ERROR_KINDS_PER_PROC; i++) {
		enter(GPU_FN_MALLOC, &m, 10 + 2 * i);
		ret(GPU_FN_MALLOC, 200 + i, 11 + 2 * i);
	}
	enter(GPU_FN_MALLOC, &m, 50);
	ret(GPU_FN_MALLOC, 200, 51); /* a kind with a row */
	st = stats_of(TGID);
	assert_int_equal(st.failed[GPU_FN_MALLOC], ERROR_KINDS_PER_PROC + 2);
	assert_int_equal(st.error_kinds, ERROR_KINDS_PER_PROC);
	assert_int_equal(st.error_kinds_over_cap, 1);
	assert_int_equal(error_count(TGID, GPU_FN_MALLOC, 200), 2);
	assert_int_equal(error_count(TGID, GPU_FN_MALLOC, 200 + ERROR_KINDS_PER_PROC), 0);
}

/* A process holds at most its share of gpu_allocs; another process is not held back,
 * and a free gives the slot back. */
static void test_allocation_cap_per_process(void **state)
{
	__u64 slots[ALLOCS_PER_PROC + 1], other = 0x7f5000000000, again = 0x7f6000000000;
	struct gpu_proc_stats st;
	int i;

	(void)state;
	for (i = 0; i <= ALLOCS_PER_PROC; i++) {
		slots[i] = 0x7f0000000000 + (__u64)i * 4096;
		alloc_call(GPU_FN_MALLOC, &slots[i], 4096, 10 + i);
	}
	run(GPU_TEST_ENTER + GPU_FN_MALLOC, &(struct test_regs){.di = (uintptr_t)&other, .si = 64},
	    6160ull << 32 | 6160, 20);
	run(GPU_TEST_RET + GPU_FN_MALLOC, &(struct test_regs){.ax = 0}, 6160ull << 32 | 6160, 21);
	st = stats_of(TGID);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].allocs, ALLOCS_PER_PROC + 1);
	assert_int_equal(st.allocs_tracked, ALLOCS_PER_PROC);
	assert_int_equal(st.allocs_over_cap, 1);
	assert_int_equal(st.allocs_untracked, 1);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, ALLOCS_PER_PROC * 4096);
	assert_int_equal(stats_of(6160).allocs_tracked, 1);
	free_call(GPU_FN_FREE, slots[0], 30);
	alloc_call(GPU_FN_MALLOC, &again, 4096, 40);
	st = stats_of(TGID);
	assert_int_equal(st.allocs_tracked, ALLOCS_PER_PROC);
	assert_int_equal(st.allocs_over_cap, 1);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_allocs), 16), ALLOCS_PER_PROC + 1);
}

/*
 * Users' shares (bpf/lib/fair_share.h): a user but root holds at most its share of each
 * table over all its processes. The owner is the real uid of the thread that runs the
 * program: these cases take another user's for this thread alone (a raw setresuid, not
 * glibc's, which would change every thread's).
 */
#define SHARE_USER 4300
#define SHARE_TGID(i) (7000u + (i))

static void as_real_uid(__u32 uid)
{
	assert_int_equal(syscall(SYS_setresuid, uid, -1, -1), 0);
}

static __u64 pt_of(__u32 tgid)
{
	return (__u64)tgid << 32 | tgid;
}

/* What owner uid holds of table as the programs count it (with userspace's
 * correction); -1 when no count is kept. */
static __s64 share_held(__u32 uid, __u32 table)
{
	struct fair_share_key k = {.uid = uid, .table = table};
	__s64 n = 0, adj = 0;

	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.fair_share), &k, &n))
		return -1;
	bpf_map_lookup_elem(bpf_map__fd(skel->maps.fair_share_adj), &k, &adj);
	return n + adj;
}

/* What owner uid was refused of table (fair_share_refused); 0 when none counted. */
static __u64 refused_of(__u32 uid, __u32 table)
{
	struct fair_share_key k = {.uid = uid, .table = table};
	__u64 n = 0;

	bpf_map_lookup_elem(bpf_map__fd(skel->maps.fair_share_refused), &k, &n);
	return n;
}

static bool has_row(__u32 tgid)
{
	struct gpu_proc_stats st;

	return !bpf_map_lookup_elem(bpf_map__fd(skel->maps.gpu_procs), &tgid, &st);
}

/* cudaSetDevice(0) by process tgid: a call that makes its row. */
static void set_device_as(__u32 tgid, __u64 now)
{
	run(GPU_TEST_ENTER + GPU_FN_SET_DEVICE, &(struct test_regs){.di = 0}, pt_of(tgid), now);
	run(GPU_TEST_RET + GPU_FN_SET_DEVICE, &(struct test_regs){.ax = 0}, pt_of(tgid), now + 1);
}

static void alloc_as(__u32 tgid, __u64 *slot, __u64 now)
{
	run(GPU_TEST_ENTER + GPU_FN_MALLOC, &(struct test_regs){.di = (uintptr_t)slot, .si = 64},
	    pt_of(tgid), now);
	run(GPU_TEST_RET + GPU_FN_MALLOC, &(struct test_regs){.ax = 0}, pt_of(tgid), now + 1);
}

static void free_as(__u32 tgid, __u64 ptr, __u64 now)
{
	run(GPU_TEST_ENTER + GPU_FN_FREE, &(struct test_regs){.di = ptr}, pt_of(tgid), now);
	run(GPU_TEST_RET + GPU_FN_FREE, &(struct test_regs){.ax = 0}, pt_of(tgid), now + 1);
}

/* A user's processes past its share of gpu_procs get no row, each call counted as
 * refused; its other processes, other users' and root's are not held back; an exec
 * gives the row back. */
static void test_share_processes_per_user(void **state)
{
	(void)state;
	skel->data->gpu_share_cap[GPU_SHARE_PROCS] = 2;
	as_real_uid(SHARE_USER);
	set_device_as(SHARE_TGID(0), 10);
	set_device_as(SHARE_TGID(1), 20);
	assert_int_equal(stats_of(SHARE_TGID(0)).owner, SHARE_USER);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_PROCS), 2);
	set_device_as(SHARE_TGID(2), 30);
	assert_false(has_row(SHARE_TGID(2)));
	assert_int_equal(skel->bss->gpu_share_refused[GPU_SHARE_PROCS], 1);
	set_device_as(SHARE_TGID(2), 40); /* each call tries again */
	assert_int_equal(skel->bss->gpu_share_refused[GPU_SHARE_PROCS], 2);
	assert_int_equal(refused_of(SHARE_USER, GPU_SHARE_PROCS), 2); /* and by its owner */
	set_device_as(SHARE_TGID(0), 50); /* a process with a row still counts */
	assert_int_equal(stats_of(SHARE_TGID(0)).calls[GPU_FN_SET_DEVICE], 2);
	as_real_uid(SHARE_USER + 1);
	set_device_as(SHARE_TGID(3), 60);
	assert_int_equal(stats_of(SHARE_TGID(3)).owner, SHARE_USER + 1);
	as_real_uid(0);
	set_device_as(SHARE_TGID(4), 70);
	assert_int_equal(stats_of(SHARE_TGID(4)).owner, 0);
	assert_int_equal(share_held(0, GPU_SHARE_PROCS), -1); /* root's are not counted */
	assert_int_equal(skel->bss->gpu_share_refused[GPU_SHARE_PROCS], 2);
	/* One of the user's processes runs a new program: its row goes, and its place. */
	run(GPU_TEST_EXEC, NULL, pt_of(SHARE_TGID(0)), 80);
	assert_false(has_row(SHARE_TGID(0)));
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_PROCS), 1);
	as_real_uid(SHARE_USER);
	set_device_as(SHARE_TGID(2), 90);
	assert_true(has_row(SHARE_TGID(2)));
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_PROCS), 2);
}

/* A user's allocations over all its processes stay within its share of gpu_allocs, on
 * top of each process's own; what is refused is counted, a free makes room, and an
 * exec gives back what the old program held. */
static void test_share_allocations_per_user(void **state)
{
	__u64 a[ALLOCS_PER_PROC], b[2] = {0x7f7000000000, 0x7f7000001000};
	struct gpu_proc_stats st;
	int i;

	(void)state;
	skel->data->gpu_share_cap[GPU_SHARE_ALLOCS] = ALLOCS_PER_PROC + 1;
	as_real_uid(SHARE_USER);
	for (i = 0; i < ALLOCS_PER_PROC; i++) {
		a[i] = 0x7f6000000000 + (__u64)i * 4096;
		alloc_as(SHARE_TGID(0), &a[i], 10 + 2 * i);
	}
	alloc_as(SHARE_TGID(1), &b[0], 20);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_ALLOCS), ALLOCS_PER_PROC + 1);
	alloc_as(SHARE_TGID(1), &b[1], 30); /* under its process's cap, over its user's */
	st = stats_of(SHARE_TGID(1));
	assert_int_equal(st.allocs_tracked, 1);
	assert_int_equal(st.allocs_over_cap, 1);
	assert_int_equal(st.allocs_untracked, 1);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].allocs, 2);
	assert_int_equal(skel->bss->gpu_share_refused[GPU_SHARE_ALLOCS], 1);
	/* Another user's process is not held back. */
	as_real_uid(SHARE_USER + 1);
	alloc_as(SHARE_TGID(2), &b[1], 40);
	assert_int_equal(stats_of(SHARE_TGID(2)).allocs_tracked, 1);
	/* A free of the user's makes room for its next. */
	as_real_uid(SHARE_USER);
	free_as(SHARE_TGID(0), a[0], 50);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_ALLOCS), ALLOCS_PER_PROC);
	b[1] = 0x7f7000002000;
	alloc_as(SHARE_TGID(1), &b[1], 60);
	assert_int_equal(stats_of(SHARE_TGID(1)).allocs_tracked, 2);
	assert_int_equal(skel->bss->gpu_share_refused[GPU_SHARE_ALLOCS], 1);
	/* The first process execs: its row and its allocations leave the user's shares. */
	run(GPU_TEST_EXEC, NULL, pt_of(SHARE_TGID(0)), 70);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_ALLOCS), 2);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_PROCS), 1);
}

/* Likewise the kernel rows and error kinds: past the user's share, a new kernel's
 * launches count in the process's totals only, a new kind's failures in its failed
 * calls only. */
static void test_share_kernel_rows_and_error_kinds(void **state)
{
	struct test_regs k = {.si = 2 | 1ul << 32, .dx = 1, .cx = 8 | 1ul << 32, .r8 = 1};
	__u64 slot = 0x7f0000600000;
	struct test_regs m = {.di = (uintptr_t)&slot, .si = 64};
	struct gpu_proc_stats st;

	(void)state;
	skel->data->gpu_share_cap[GPU_SHARE_KERNEL_ROWS] = 2;
	skel->data->gpu_share_cap[GPU_SHARE_ERROR_KINDS] = 1;
	as_real_uid(SHARE_USER);
	k.di = 0x410000;
	run(GPU_TEST_ENTER + GPU_FN_LAUNCH, &k, pt_of(SHARE_TGID(0)), 10);
	k.di = 0x410100;
	run(GPU_TEST_ENTER + GPU_FN_LAUNCH, &k, pt_of(SHARE_TGID(1)), 20);
	k.di = 0x410200;
	run(GPU_TEST_ENTER + GPU_FN_LAUNCH, &k, pt_of(SHARE_TGID(1)), 30);
	st = stats_of(SHARE_TGID(1));
	assert_int_equal(st.calls[GPU_FN_LAUNCH], 2);
	assert_int_equal(st.threads, 2 * 16);
	assert_int_equal(st.kernel_rows, 1);
	assert_int_equal(st.kernel_rows_over_cap, 1);
	assert_int_equal(skel->bss->gpu_share_refused[GPU_SHARE_KERNEL_ROWS], 1);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_KERNEL_ROWS), 2);
	run(GPU_TEST_ENTER + GPU_FN_MALLOC, &m, pt_of(SHARE_TGID(0)), 40);
	run(GPU_TEST_RET + GPU_FN_MALLOC, &(struct test_regs){.ax = 200}, pt_of(SHARE_TGID(0)), 41);
	run(GPU_TEST_ENTER + GPU_FN_MALLOC, &m, pt_of(SHARE_TGID(1)), 50);
	run(GPU_TEST_RET + GPU_FN_MALLOC, &(struct test_regs){.ax = 201}, pt_of(SHARE_TGID(1)), 51);
	st = stats_of(SHARE_TGID(1));
	assert_int_equal(st.failed[GPU_FN_MALLOC], 1);
	assert_int_equal(st.error_kinds, 0);
	assert_int_equal(st.error_kinds_over_cap, 1);
	assert_int_equal(error_count(SHARE_TGID(0), GPU_FN_MALLOC, 200), 1);
	assert_int_equal(error_count(SHARE_TGID(1), GPU_FN_MALLOC, 201), 0);
	assert_int_equal(skel->bss->gpu_share_refused[GPU_SHARE_ERROR_KINDS], 1);
}

/* Thread i of process tgid (thread 0 its leader; the others' ids apart from any
 * SHARE_TGID's, and from each other's slots). */
static __u64 thread_of(__u32 tgid, __u32 i)
{
	return (__u64)tgid << 32 | (tgid + 1000 * i);
}

/* cudaDeviceSynchronize by thread pid_tgid: its entry, and its return (ret). */
static void sync_as(__u64 pid_tgid, __u64 now, bool ret)
{
	run((ret ? GPU_TEST_RET : GPU_TEST_ENTER) + GPU_FN_DEVICE_SYNC,
	    &(struct test_regs){.ax = 0}, pid_tgid, now);
}

/* The state of a thread whose slot another holds, from gpu_threads; -1 owner: none. */
static __s64 spilled_owner(__u64 pid_tgid)
{
	struct gpu_thread th;

	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.gpu_threads), &pid_tgid, &th))
		return -1;
	return th.owner;
}

/* A user's threads hold at most its share of the threads' state, slots and spilled
 * alike: past it a thread gets none (counted, and tried again at its next runtime call)
 * and its calls still count; its exit, or its process's exec, gives the state back. */
static void test_share_threads_per_user(void **state)
{
	__u64 a = thread_of(SHARE_TGID(0), 0), b = thread_of(SHARE_TGID(0), 1);
	__u64 c = thread_of(SHARE_TGID(1), 0), d = a + GPU_THREAD_SLOTS; /* a's slot */
	__u64 r = thread_of(SHARE_TGID(2), 0);

	(void)state;
	skel->data->gpu_share_cap[GPU_SHARE_THREADS] = 2;
	as_real_uid(SHARE_USER);
	sync_as(a, 10, false);
	sync_as(a, 11, true);
	sync_as(b, 12, false);
	sync_as(b, 13, true);
	assert_int_equal(slot_of(a).owner, a);
	assert_int_equal(slot_of(a).th.owner, SHARE_USER);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_THREADS), 2);
	sync_as(c, 14, false); /* a third thread, of another process of the user's */
	sync_as(c, 15, true);
	assert_int_equal(slot_of(c).owner, 0);
	assert_int_equal(skel->bss->gpu_share_refused[GPU_SHARE_THREADS], 1);
	assert_int_equal(stats_of(SHARE_TGID(1)).calls[GPU_FN_DEVICE_SYNC], 1);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_THREADS), 2);
	/* Another user's thread whose slot a holds: its state spills, in its own share. */
	as_real_uid(SHARE_USER + 1);
	sync_as(d, 16, false);
	sync_as(d, 17, true);
	assert_int_equal(spilled_owner(d), SHARE_USER + 1);
	assert_int_equal(share_held(SHARE_USER + 1, GPU_SHARE_THREADS), 1);
	as_real_uid(0);
	sync_as(r, 18, false);
	sync_as(r, 19, true);
	assert_int_equal(slot_of(r).owner, r);
	assert_int_equal(share_held(0, GPU_SHARE_THREADS), -1); /* root's are not counted */
	/* b exits: its place is c's at c's next runtime call. */
	run(GPU_TEST_TASK_EXIT, NULL, b, 20);
	assert_int_equal(slot_of(b).owner, 0);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_THREADS), 1);
	as_real_uid(SHARE_USER);
	sync_as(c, 21, false);
	sync_as(c, 22, true);
	assert_int_equal(slot_of(c).owner, c);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_THREADS), 2);
	assert_int_equal(skel->bss->gpu_share_refused[GPU_SHARE_THREADS], 1);
	as_real_uid(0);
	/* d exits: its spilled state goes, and its owner's count. */
	run(GPU_TEST_TASK_EXIT, NULL, d, 23);
	assert_int_equal(spilled_owner(d), -1);
	assert_int_equal(share_held(SHARE_USER + 1, GPU_SHARE_THREADS), 0);
	/* a's process runs a new program: a's state goes back with its row. */
	run(GPU_TEST_EXEC, NULL, a, 24);
	assert_int_equal(slot_of(a).owner, 0);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_THREADS), 1);
}

/* A user's calls between entry and return hold at most its share of gpu_inflight:
 * past it a call's return goes unaccounted (calls_untracked, and the refusal counted);
 * a return, a thread's exit mid-call and an exec give the entries back. */
static void test_share_calls_in_flight_per_user(void **state)
{
	__u64 t0 = thread_of(SHARE_TGID(0), 0), t1 = thread_of(SHARE_TGID(0), 1);
	__u64 t2 = thread_of(SHARE_TGID(0), 2), o = thread_of(SHARE_TGID(1), 0);
	int inflight = bpf_map__fd(skel->maps.gpu_inflight);
	struct gpu_proc_stats st;

	(void)state;
	skel->data->gpu_share_cap[GPU_SHARE_CALLS_IN_FLIGHT] = 2;
	as_real_uid(SHARE_USER);
	sync_as(t0, 10, false);
	sync_as(t1, 20, false);
	sync_as(t2, 30, false);
	assert_int_equal(map_len(inflight, 16), 2);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_CALLS_IN_FLIGHT), 2);
	assert_int_equal(skel->bss->gpu_share_refused[GPU_SHARE_CALLS_IN_FLIGHT], 1);
	st = stats_of(SHARE_TGID(0));
	assert_int_equal(st.calls[GPU_FN_DEVICE_SYNC], 3);
	assert_int_equal(st.calls_untracked, 1);
	/* Another user's call is not held back. */
	as_real_uid(SHARE_USER + 1);
	sync_as(o, 40, false);
	assert_int_equal(share_held(SHARE_USER + 1, GPU_SHARE_CALLS_IN_FLIGHT), 1);
	as_real_uid(0);
	/* Returns: t0's is accounted (10 ns in the sync), t2's had no entry. */
	sync_as(t0, 50, true);
	sync_as(t2, 60, true);
	st = stats_of(SHARE_TGID(0));
	assert_int_equal(st.sync_ns, 40);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_CALLS_IN_FLIGHT), 1);
	/* t1 dies in its call; the other user's process execs in its own. */
	run(GPU_TEST_TASK_EXIT, NULL, t1, 70);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_CALLS_IN_FLIGHT), 0);
	run(GPU_TEST_EXEC, NULL, o, 80);
	assert_int_equal(share_held(SHARE_USER + 1, GPU_SHARE_CALLS_IN_FLIGHT), 0);
	assert_int_equal(map_len(inflight, 16), 0);
	/* Root's are not counted. */
	sync_as(PID_TGID, 90, false);
	assert_int_equal(share_held(0, GPU_SHARE_CALLS_IN_FLIGHT), -1);
	assert_int_equal(map_len(inflight, 16), 1);
}

/* Who was refused the most, per table (fair_share_refusers_read): most first, of two
 * refused as many the lower owner, 4 at most; root never. */
static void test_share_refusers(void **state)
{
	struct fair_share_refusers top[GPU_SHARE__COUNT];
	const __u32 refusals[] = {1, 3, 2, 3, 5, 1}; /* by user SHARE_USER + i */
	__u32 u, i;

	(void)state;
	skel->data->gpu_share_cap[GPU_SHARE_PROCS] = 1;
	for (u = 0; u < 6; u++) {
		as_real_uid(SHARE_USER + u);
		set_device_as(SHARE_TGID(10 * u), 1); /* its one row */
		for (i = 0; i < refusals[u]; i++)
			set_device_as(SHARE_TGID(10 * u + 1), 2 + i);
	}
	as_real_uid(0);
	assert_int_equal(refused_of(SHARE_USER + 4, GPU_SHARE_PROCS), 5);
	/* Root is never refused; a count of its, were there one, is not listed. */
	{
		struct fair_share_key k = {.uid = 0, .table = GPU_SHARE_PROCS};
		__u64 many = 100;

		assert_int_equal(bpf_map_update_elem(bpf_map__fd(skel->maps.fair_share_refused),
						     &k, &many, BPF_NOEXIST),
				 0);
	}
	memset(top, 0xff, sizeof(top));
	assert_int_equal(fair_share_refusers_read(bpf_map__fd(skel->maps.fair_share_refused), top,
						  GPU_SHARE__COUNT),
			 0);
	assert_int_equal(top[GPU_SHARE_PROCS].n, FAIR_SHARE_HOLDERS);
	assert_int_equal(top[GPU_SHARE_PROCS].v[0].owner, SHARE_USER + 4);
	assert_int_equal(top[GPU_SHARE_PROCS].v[0].refused, 5);
	assert_int_equal(top[GPU_SHARE_PROCS].v[1].owner, SHARE_USER + 1); /* 3, the lower */
	assert_int_equal(top[GPU_SHARE_PROCS].v[2].owner, SHARE_USER + 3);
	assert_int_equal(top[GPU_SHARE_PROCS].v[3].owner, SHARE_USER + 2);
	assert_int_equal(top[GPU_SHARE_PROCS].v[3].refused, 2);
	assert_int_equal(top[GPU_SHARE_ALLOCS].n, 0);
}

/* A call whose return went unseen (its return probe detached mid-call) leaves its
 * record: the thread's next call of the function replaces it, at its owner's share or
 * not, without taking another entry of the share; its return accounts its own record,
 * never the old one's. */
static void test_share_calls_in_flight_left_over(void **state)
{
	__u64 t0 = thread_of(SHARE_TGID(0), 0), t1 = thread_of(SHARE_TGID(0), 1);
	int inflight = bpf_map__fd(skel->maps.gpu_inflight);
	struct gpu_proc_stats st;

	(void)state;
	skel->data->gpu_share_cap[GPU_SHARE_CALLS_IN_FLIGHT] = 2;
	as_real_uid(SHARE_USER);
	sync_as(t0, 10, false); /* its return never comes */
	sync_as(t0, 20, false); /* replaces it: the share holds one still */
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_CALLS_IN_FLIGHT), 1);
	assert_int_equal(skel->bss->gpu_share_refused[GPU_SHARE_CALLS_IN_FLIGHT], 0);
	skel->data->gpu_share_cap[GPU_SHARE_CALLS_IN_FLIGHT] = 1;
	sync_as(t1, 25, false); /* another thread's, past the share */
	assert_int_equal(skel->bss->gpu_share_refused[GPU_SHARE_CALLS_IN_FLIGHT], 1);
	sync_as(t0, 30, true);
	sync_as(t1, 35, true); /* no record: nothing accounted */
	st = stats_of(SHARE_TGID(0));
	assert_int_equal(st.sync_ns, 10); /* from 20, not 10 */
	assert_int_equal(st.calls_untracked, 1);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_CALLS_IN_FLIGHT), 0);
	/* At the share: the thread's own record left over is replaced all the same. */
	sync_as(t0, 40, false); /* never returns */
	sync_as(t0, 70, false);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_CALLS_IN_FLIGHT), 1);
	assert_int_equal(skel->bss->gpu_share_refused[GPU_SHARE_CALLS_IN_FLIGHT], 1);
	assert_int_equal(map_len(inflight, 16), 1);
	sync_as(t0, 80, true);
	as_real_uid(0);
	st = stats_of(SHARE_TGID(0));
	assert_int_equal(st.sync_ns, 20); /* 10 more: from 70 */
	assert_int_equal(st.calls_untracked, 1);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_CALLS_IN_FLIGHT), 0);
}

/* The maps a recount reads and writes. */
static struct gpu_share_maps share_maps(void)
{
	return (struct gpu_share_maps){
		.procs = bpf_map__fd(skel->maps.gpu_procs),
		.thread_slots = bpf_map__fd(skel->maps.gpu_thread_slots),
		.threads = bpf_map__fd(skel->maps.gpu_threads),
		.inflight = bpf_map__fd(skel->maps.gpu_inflight),
		.counts = bpf_map__fd(skel->maps.fair_share),
		.adj = bpf_map__fd(skel->maps.fair_share_adj),
	};
}

/* The sweep drops a dead process's row and entries, which the programs never see: the
 * recount sets its owner's counts to what the rows hold, so that the user's next
 * process is admitted, names who holds the most, and forgets a user left with none. */
static void test_share_recount(void **state)
{
	struct fair_share_holders top[GPU_SHARE__COUNT];
	const struct gpu_share_maps m = share_maps();
	int procs = m.procs, counts = m.counts;
	__u64 a = 0x7f6000000000, b = 0x7f6000001000;
	__u32 dead = SHARE_TGID(1), other = SHARE_TGID(3);

	(void)state;
	memset(top, 0xff, sizeof(top));
	assert_int_equal(bpftel_gpu_shares_recount(&m, top), 0);
	assert_int_equal(top[GPU_SHARE_PROCS].n, 0); /* nobody but root holds any */
	skel->data->gpu_share_cap[GPU_SHARE_PROCS] = 2;
	as_real_uid(SHARE_USER);
	alloc_as(SHARE_TGID(0), &a, 10);
	alloc_as(dead, &b, 20);
	set_device_as(SHARE_TGID(2), 30);
	assert_false(has_row(SHARE_TGID(2)));
	as_real_uid(SHARE_USER + 1);
	set_device_as(other, 40);
	as_real_uid(0);
	/* As the sweep drops a process gone: its entries, then its row. */
	map_clear_tgid_allocs(dead);
	assert_int_equal(bpf_map_delete_elem(procs, &dead), 0);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_PROCS), 2);
	assert_int_equal(bpftel_gpu_shares_recount(&m, top), 0);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_PROCS), 1);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_ALLOCS), 1);
	assert_int_equal(top[GPU_SHARE_PROCS].n, 2);
	assert_int_equal(top[GPU_SHARE_PROCS].v[0].owner, SHARE_USER); /* a tie: the lower */
	assert_int_equal(top[GPU_SHARE_PROCS].v[0].held, 1);
	assert_int_equal(top[GPU_SHARE_PROCS].v[1].owner, SHARE_USER + 1);
	assert_int_equal(top[GPU_SHARE_ALLOCS].n, 1);
	assert_int_equal(top[GPU_SHARE_ALLOCS].v[0].held, 1);
	assert_int_equal(top[GPU_SHARE_KERNEL_ROWS].n, 0);
	as_real_uid(SHARE_USER);
	set_device_as(SHARE_TGID(2), 50);
	assert_true(has_row(SHARE_TGID(2)));
	as_real_uid(0);
	/* The other user's process goes too: its counts are forgotten. */
	assert_int_equal(bpf_map_delete_elem(procs, &other), 0);
	assert_int_equal(bpftel_gpu_shares_recount(&m, top), 0);
	assert_int_equal(share_held(SHARE_USER + 1, GPU_SHARE_PROCS), -1);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_PROCS), 2);
	assert_int_equal(top[GPU_SHARE_PROCS].n, 1);
	assert_int_equal(top[GPU_SHARE_PROCS].v[0].held, 2);
	/* A count that moves during a walk (an allocation made meanwhile) is seen: the
	 * recount walks again rather than correct by what it half saw. */
	{
		struct fair_share_tally *t;
		__u64 c = 0x7f6000002000;

		assert_int_equal(fair_share_tally_begin(counts, GPU_SHARE_ALLOCS, &t), 0);
		assert_non_null(t);
		assert_false(fair_share_tally_moved(t, counts));
		as_real_uid(SHARE_USER);
		alloc_as(SHARE_TGID(0), &c, 60);
		as_real_uid(0);
		assert_true(fair_share_tally_moved(t, counts));
		fair_share_tally_free(t);
	}
}

/* Threads gone unseen (the sweep frees their slots and drops their calls, which the
 * programs never see): the recount sets the owners' counts of the threads' state and
 * the calls in flight to what the slots, the spill map and gpu_inflight name. */
static void test_share_recount_threads_and_calls(void **state)
{
	__u64 x = thread_of(SHARE_TGID(0), 0), y = thread_of(SHARE_TGID(0), 1);
	__u64 z = x + GPU_THREAD_SLOTS; /* x's slot: z's state spills */
	const struct gpu_thread_slot free_slot = {};
	struct fair_share_holders top[GPU_SHARE__COUNT];
	const struct gpu_share_maps m = share_maps();
	struct gpu_call_key ck = {.pid_tgid = x, .func = GPU_FN_DEVICE_SYNC};
	__u32 idx = (__u32)y % GPU_THREAD_SLOTS;

	(void)state;
	as_real_uid(SHARE_USER);
	sync_as(x, 10, false); /* in its call */
	sync_as(y, 20, false);
	sync_as(y, 21, true);
	as_real_uid(SHARE_USER + 1);
	sync_as(z, 30, false);
	sync_as(z, 31, true);
	as_real_uid(0);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_THREADS), 2);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_CALLS_IN_FLIGHT), 1);
	/* As the sweep: x's call dropped, y's slot freed, behind the programs' back. */
	assert_int_equal(bpf_map_delete_elem(m.inflight, &ck), 0);
	assert_int_equal(bpf_map_update_elem(m.thread_slots, &idx, &free_slot, BPF_ANY), 0);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_THREADS), 2);
	assert_int_equal(bpftel_gpu_shares_recount(&m, top), 0);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_THREADS), 1);
	assert_int_equal(share_held(SHARE_USER, GPU_SHARE_CALLS_IN_FLIGHT), -1); /* none left: forgotten */
	assert_int_equal(share_held(SHARE_USER + 1, GPU_SHARE_THREADS), 1);
	assert_int_equal(top[GPU_SHARE_THREADS].n, 2);
	assert_int_equal(top[GPU_SHARE_THREADS].v[0].owner, SHARE_USER);
	assert_int_equal(top[GPU_SHARE_THREADS].v[0].held, 1);
	assert_int_equal(top[GPU_SHARE_THREADS].v[1].owner, SHARE_USER + 1);
	assert_int_equal(top[GPU_SHARE_CALLS_IN_FLIGHT].n, 0);
}

/* A driver launch f of a 2x3x4 grid of 32x2x1 blocks with 256 bytes of shared memory
 * (regs), then one whose sizes cannot be read (bad) that fails with err: both counted,
 * only the first's threads. The process's stats after. */
static struct gpu_proc_stats driver_launches(enum gpu_func f, struct test_regs *regs,
					     struct test_regs *bad, int err)
{
	struct gpu_proc_stats st;

	enter(f, regs, 100);
	ret(f, 0, 110);
	enter(f, bad, 120);
	ret(f, err, 130);
	st = stats_of(TGID);
	assert_int_equal(st.calls[f], 2);
	assert_int_equal(st.calls[GPU_FN_LAUNCH], 0);
	assert_int_equal(st.threads, 24 * 64);
	assert_int_equal(st.launch_threads[10], 1);
	assert_int_equal(st.shared_mem_bytes, 256);
	assert_int_equal(st.failed[f], 1);
	assert_int_equal(error_count(TGID, f, err), 1);
	return st;
}

/* cuLaunchKernel(f, 2,3,4, 32,2,1 (blockZ on the stack), sharedMem 256, ...). */
static void test_driver_launch_dims(void **state)
{
	__u64 stack[4] = {0xdead /* return address */, 1 /* blockZ */, 256 /* sharedMem */, 0};
	struct test_regs regs = cu_launch_regs(stack);
	struct test_regs bad = regs;
	struct gpu_proc_stats st;

	(void)state;
	bad.sp = 8; /* unreadable stack: counted, no threads */
	st = driver_launches(GPU_FN_CU_LAUNCH, &regs, &bad, 34 /* CUDA_ERROR_STUB_LIBRARY */);
	/* No context seen made: the driver's device is not known. */
	assert_int_equal(st.dev[GPU_DEV_UNKNOWN].launches, 2);
	assert_int_equal(st.dev[GPU_DEV_UNKNOWN].errors, 1);
}

/* Driver memory, copies and syncs, as the runtime's. */
static void test_driver_memory_copies_syncs(void **state)
{
	__u64 dptr = 0x7f7000000000;
	struct test_regs htod = {.di = dptr, .si = 0x1000, .dx = 8192};
	struct test_regs dtoh = {.di = 0x1000, .si = dptr, .dx = 100};
	struct test_regs none = {0};
	struct gpu_proc_stats st;

	(void)state;
	alloc_call(GPU_FN_CU_MEM_ALLOC, &dptr, 1 << 20, 10);
	enter(GPU_FN_CU_MEMCPY_HTOD, &htod, 100);
	ret(GPU_FN_CU_MEMCPY_HTOD, 0, 400);
	enter(GPU_FN_CU_MEMCPY_DTOH_ASYNC, &dtoh, 500);
	ret(GPU_FN_CU_MEMCPY_DTOH_ASYNC, 0, 510);
	enter(GPU_FN_CU_CTX_SYNC, &none, 600);
	ret(GPU_FN_CU_CTX_SYNC, 0, 1600);
	enter(GPU_FN_CU_STREAM_SYNC, &none, 2000);
	ret(GPU_FN_CU_STREAM_SYNC, 0, 2100);
	enter(GPU_FN_CU_INIT, &none, 3000);
	ret(GPU_FN_CU_INIT, 34, 3001);
	free_call(GPU_FN_CU_MEM_FREE, dptr, 4000);
	st = stats_of(TGID);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].allocs, 1);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].frees, 1);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].peak_bytes, 1 << 20);
	assert_int_equal(st.memcpy_bytes[GPU_MEMCPY_H2D], 8192);
	assert_int_equal(st.memcpy_bytes[GPU_MEMCPY_D2H], 100);
	assert_int_equal(st.memcpy_ns, 300); /* the synchronous copy only */
	assert_int_equal(st.sync_ns, 1000 + 100);
	assert_int_equal(error_count(TGID, GPU_FN_CU_INIT, 34), 1);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_inflight), 16), 0);
}

/* The runtime calls the driver on the same thread: those driver calls are the runtime
 * call's, skipped (counted as nested); a driver call of the program's own is counted. */
static void test_driver_inside_runtime_not_counted_twice(void **state)
{
	__u64 rt = 0x7f8000000000, drv = 0x7f8000000000, own = 0x7f9000000000;
	struct test_regs m = {.di = (uintptr_t)&rt, .si = 4096, .sp = 0x7000};
	struct test_regs dm = {.di = (uintptr_t)&drv, .si = 4096, .sp = 0x6f00};
	struct test_regs one = {.si = 1, .dx = 1, .cx = 1, .r8 = 1, .r9 = 1, .sp = 0x7000};
	struct test_regs cu = {.si = 1, .dx = 1, .cx = 1, .r8 = 1, .r9 = 1, .sp = 0x6e00};
	struct gpu_proc_stats st;

	(void)state;
	enter(GPU_FN_MALLOC, &m, 10);
	enter(GPU_FN_CU_MEM_ALLOC, &dm, 11); /* libcudart calling libcuda, deeper */
	ret_at(GPU_FN_CU_MEM_ALLOC, 0, 12, dm.sp);
	ret_at(GPU_FN_MALLOC, 0, 13, m.sp);
	enter(GPU_FN_LAUNCH, &one, 20);
	enter(GPU_FN_CU_LAUNCH, &cu, 21);
	ret_at(GPU_FN_CU_LAUNCH, 0, 22, cu.sp);
	ret_at(GPU_FN_LAUNCH, 0, 23, one.sp);
	alloc_call(GPU_FN_CU_MEM_ALLOC, &own, 512, 30); /* the program's own driver call */
	st = stats_of(TGID);
	assert_int_equal(st.calls[GPU_FN_MALLOC], 1);
	assert_int_equal(st.calls[GPU_FN_CU_MEM_ALLOC], 1);
	assert_int_equal(st.calls[GPU_FN_LAUNCH], 1);
	assert_int_equal(st.calls[GPU_FN_CU_LAUNCH], 0);
	assert_int_equal(st.driver_nested, 2); /* the entries; their returns are skipped as well */
	assert_int_equal(st.mem[GPU_MEM_DEVICE].allocs, 2);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 4096 + 512);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_inflight), 16), 0);
}

/* The runtime retains its device's primary context inside one of its calls: the retain
 * is not counted again, but the context's device is learnt, and a program that makes
 * that context current itself has its driver calls there. */
static void test_nested_primary_context_learnt(void **state)
{
	__u64 p = 0x7f8000000000, ctx_slot = 0, stack[3] = {0xdead, 1, 0};
	struct test_regs m = {.di = (uintptr_t)&p, .si = 4096, .sp = 0x7000};
	struct test_regs retain = {.di = (uintptr_t)&ctx_slot, .si = 2, .sp = 0x6f00};
	struct test_regs set = {.di = 0xc7};
	struct test_regs launch = {.si = 1, .dx = 1, .cx = 1, .r8 = 1, .r9 = 1,
				   .sp = (uintptr_t)stack};
	struct gpu_proc_stats st;

	(void)state;
	enter(GPU_FN_MALLOC, &m, 10);
	enter(GPU_FN_CU_PRIMARY_CTX_RETAIN, &retain, 11); /* libcudart calling libcuda */
	ctx_slot = 0xc7;
	ret_at(GPU_FN_CU_PRIMARY_CTX_RETAIN, 0, 12, retain.sp);
	ret_at(GPU_FN_MALLOC, 0, 13, m.sp);
	enter(GPU_FN_CU_CTX_SET_CURRENT, &set, 20); /* the program's own */
	ret(GPU_FN_CU_CTX_SET_CURRENT, 0, 21);
	enter(GPU_FN_CU_LAUNCH, &launch, 22);
	st = stats_of(TGID);
	assert_int_equal(st.calls[GPU_FN_CU_PRIMARY_CTX_RETAIN], 0);
	assert_int_equal(st.driver_nested, 1);
	assert_int_equal(st.calls[GPU_FN_CU_CTX_SET_CURRENT], 1);
	assert_int_equal(st.dev[2].launches, 1);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_inflight), 16), 0);
}

/* A runtime call whose return went unseen (begun before its return probe was attached,
 * or its return probe detached while it waited) leaves the depth raised. The thread's
 * own driver calls at or above that call's frame are still counted, and its next
 * runtime call starts the depth again. */
static void test_lost_runtime_return_heals(void **state)
{
	__u64 p = 0x7f8000000000, q = 0x7f8000100000, r = 0x7f8000200000;
	struct test_regs sync = {.sp = 0x7000};
	struct test_regs own = {.di = (uintptr_t)&p, .si = 100, .sp = 0x7000};
	struct test_regs rt = {.di = (uintptr_t)&q, .si = 200, .sp = 0x7100};
	struct test_regs inner = {.di = (uintptr_t)&q, .si = 200, .sp = 0x7000};
	struct test_regs deeper = {.di = (uintptr_t)&r, .si = 300, .sp = 0x6000};
	struct gpu_proc_stats st;

	(void)state;
	enter(GPU_FN_DEVICE_SYNC, &sync, 10); /* its return is never seen */
	/* The program's own driver call, from the same frame: not the runtime's. */
	enter(GPU_FN_CU_MEM_ALLOC, &own, 20);
	ret_at(GPU_FN_CU_MEM_ALLOC, 0, 21, own.sp);
	/* A runtime call from a frame above the lost one's: the depth starts again, and
	 * the driver call it makes, below it, is its own. */
	enter(GPU_FN_MALLOC, &rt, 30);
	enter(GPU_FN_CU_MEM_ALLOC, &inner, 31);
	ret_at(GPU_FN_CU_MEM_ALLOC, 0, 32, inner.sp);
	ret_at(GPU_FN_MALLOC, 0, 33, rt.sp);
	/* Back at depth 0: the program's driver call from deep in its stack is counted. */
	enter(GPU_FN_CU_MEM_ALLOC, &deeper, 40);
	ret_at(GPU_FN_CU_MEM_ALLOC, 0, 41, deeper.sp);
	st = stats_of(TGID);
	assert_int_equal(st.calls[GPU_FN_DEVICE_SYNC], 1);
	assert_int_equal(st.calls[GPU_FN_MALLOC], 1);
	assert_int_equal(st.calls[GPU_FN_CU_MEM_ALLOC], 2);
	assert_int_equal(st.driver_nested, 1);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].allocs, 3);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].outstanding_bytes, 100 + 200 + 300);
}

/* The current device per thread: cudaSetDevice; a context's device learnt where it is
 * made (cuCtxCreate_v2 makes it current, cuDevicePrimaryCtxRetain does not) and taken
 * on by cuCtxSetCurrent / cuCtxPushCurrent_v2; cuCtxSetCurrent(NULL) unbinds it. */
static void test_devices_per_thread(void **state)
{
	__u64 stack[3] = {0xdead, 1, 0}, ctx_slot = 0, p1 = 0x7fa000000000, p2 = 0x7fb000000000;
	struct test_regs launch = {.si = 1, .dx = 1, .cx = 1, .r8 = 1, .r9 = 1,
				   .sp = (uintptr_t)stack};
	struct test_regs rt_launch = {.si = 1 | 1ul << 32, .dx = 1, .cx = 1 | 1ul << 32, .r8 = 1,
				      .sp = (uintptr_t)stack};
	struct test_regs dev1 = {.di = 1}, create = {.di = (uintptr_t)&ctx_slot, .dx = 2};
	struct test_regs retain = {.di = (uintptr_t)&ctx_slot, .si = 3};
	struct test_regs set = {}, unknown = {.di = 0xbad0};
	__u64 other = (__u64)TGID << 32 | (TGID + 1);
	struct gpu_proc_stats st;

	(void)state;
	enter(GPU_FN_LAUNCH, &rt_launch, 1); /* runtime default: device 0 */
	ret(GPU_FN_LAUNCH, 0, 1);
	enter(GPU_FN_SET_DEVICE, &dev1, 2);
	ret(GPU_FN_SET_DEVICE, 0, 3);
	enter(GPU_FN_LAUNCH, &rt_launch, 4);
	ret(GPU_FN_LAUNCH, 0, 4);
	alloc_call(GPU_FN_MALLOC, &p1, 100, 5);
	ctx_slot = 0xc2;
	enter(GPU_FN_CU_CTX_CREATE, &create, 6);
	ret(GPU_FN_CU_CTX_CREATE, 0, 7);
	enter(GPU_FN_CU_LAUNCH, &launch, 8);
	ctx_slot = 0xc3;
	enter(GPU_FN_CU_PRIMARY_CTX_RETAIN, &retain, 9);
	ret(GPU_FN_CU_PRIMARY_CTX_RETAIN, 0, 10);
	enter(GPU_FN_CU_LAUNCH, &launch, 11); /* retain did not make it current: still 2 */
	set.di = 0xc3;
	enter(GPU_FN_CU_CTX_SET_CURRENT, &set, 12);
	ret(GPU_FN_CU_CTX_SET_CURRENT, 0, 13);
	alloc_call(GPU_FN_CU_MEM_ALLOC, &p2, 300, 14);
	enter(GPU_FN_CU_LAUNCH, &launch, 15);
	ret(GPU_FN_CU_LAUNCH, 700 /* CUDA_ERROR_LAUNCH_FAILED */, 16);
	/* Another thread of the process: its own device (the driver's: not known). */
	run(GPU_TEST_ENTER + GPU_FN_CU_LAUNCH, &launch, other, 17);
	enter(GPU_FN_CU_CTX_PUSH_CURRENT, &unknown, 18);
	ret(GPU_FN_CU_CTX_PUSH_CURRENT, 0, 19);
	enter(GPU_FN_CU_LAUNCH, &launch, 20);
	free_call(GPU_FN_FREE, p1, 21); /* off device 1, where it was made */
	/* A runtime launch in the unknown context: its device is not known either (not
	 * device 0, the runtime's default for a thread that never chose). */
	enter(GPU_FN_LAUNCH, &rt_launch, 22);
	ret(GPU_FN_LAUNCH, 0, 22);
	/* The context unbound: the driver has none; the runtime's next call binds its own
	 * device again, the one cudaSetDevice chose (1, not its default 0), and the
	 * driver's calls after it go there too. */
	set.di = 0;
	enter(GPU_FN_CU_CTX_SET_CURRENT, &set, 23);
	ret(GPU_FN_CU_CTX_SET_CURRENT, 0, 24);
	enter(GPU_FN_CU_LAUNCH, &launch, 25);
	enter(GPU_FN_LAUNCH, &rt_launch, 25);
	ret(GPU_FN_LAUNCH, 0, 25);
	enter(GPU_FN_CU_LAUNCH, &launch, 26);
	st = stats_of(TGID);
	assert_int_equal(st.dev[0].launches, 1);
	assert_int_equal(st.dev[1].launches, 3);
	assert_int_equal(st.dev[1].allocs, 1);
	assert_int_equal(st.dev[1].outstanding_bytes, 0);
	assert_int_equal(st.dev[2].launches, 2);
	assert_int_equal(st.dev[3].launches, 1);
	assert_int_equal(st.dev[3].errors, 1);
	assert_int_equal(st.dev[3].outstanding_bytes, 300);
	assert_int_equal(st.dev[GPU_DEV_UNKNOWN].launches, 4);
	assert_int_equal(st.device, 3);
	assert_int_equal(alloc_of(TGID, p2).dev, 3);
}

/* A thread that never chose a device, nor made a context current through the driver:
 * its first runtime call made the runtime's default device's primary context current
 * there, so a framework's driver launch after its cudaMalloc (cuBLAS's cuLaunchKernelEx,
 * Triton's cuLaunchKernel) is device 0's; and after cudaSetDevice(1), device 1's. A
 * thread the runtime never bound has none we know. */
static void test_driver_call_in_runtime_context(void **state)
{
	__u64 stack[3] = {0xdead, 1, 0}, p = 0x7fc000000000;
	struct test_regs launch = {.si = 1, .dx = 1, .cx = 1, .r8 = 1, .r9 = 1,
				   .sp = (uintptr_t)stack};
	struct test_regs dev1 = {.di = 1};
	__u64 other = (__u64)TGID << 32 | (TGID + 2);
	struct gpu_proc_stats st;

	(void)state;
	run(GPU_TEST_ENTER + GPU_FN_CU_LAUNCH, &launch, other, 1); /* no runtime call there */
	alloc_call(GPU_FN_MALLOC, &p, 100, 2);
	enter(GPU_FN_CU_LAUNCH, &launch, 3);
	enter(GPU_FN_SET_DEVICE, &dev1, 4);
	ret(GPU_FN_SET_DEVICE, 0, 5);
	enter(GPU_FN_CU_LAUNCH, &launch, 6);
	st = stats_of(TGID);
	assert_int_equal(st.dev[0].launches, 1);
	assert_int_equal(st.dev[0].allocs, 1);
	assert_int_equal(st.dev[1].launches, 1);
	assert_int_equal(st.dev[GPU_DEV_UNKNOWN].launches, 1);
}

/* Launches per kernel: cudaLaunchKernel's host function, cuLaunchKernel's CUfunction
 * (named by cuModuleGetFunction), each with its launches, threads and last sizes. */
static void test_kernels_counted_and_named(void **state)
{
	__u64 stack[3] = {0xdead, 1 /* blockZ / sharedMem */, 0};
	struct test_regs rt_a = {.di = 0x401000, .si = 2 | 3ul << 32, .dx = 1,
				 .cx = 32 | 1ul << 32, .r8 = 1, .sp = (uintptr_t)stack};
	struct test_regs rt_b = {.di = 0x402000, .si = 1 | 1ul << 32, .dx = 1,
				 .cx = 64 | 1ul << 32, .r8 = 1, .sp = (uintptr_t)stack};
	struct test_regs cu = {.di = 0xf00d, .si = 4, .dx = 1, .cx = 1, .r8 = 16, .r9 = 2,
			       .sp = (uintptr_t)stack};
	char name[] = "_Z6matmulPKfS0_Pfi";
	__u64 hfunc = 0xf00d;
	struct test_regs getfn = {.di = (uintptr_t)&hfunc, .si = 0x1234, .dx = (uintptr_t)name};
	struct gpu_kernel_key key = {.tgid = TGID, .api = GPU_KERNEL_DRIVER, .func = 0xf00d};
	struct gpu_kname kn = {};
	struct gpu_kernel k;

	(void)state;
	enter(GPU_FN_LAUNCH, &rt_a, 1);
	ret(GPU_FN_LAUNCH, 0, 2);
	enter(GPU_FN_LAUNCH, &rt_a, 3);
	ret(GPU_FN_LAUNCH, 0, 4);
	enter(GPU_FN_LAUNCH, &rt_b, 5);
	ret(GPU_FN_LAUNCH, 0, 6);
	enter(GPU_FN_CU_MODULE_GET_FUNCTION, &getfn, 7);
	ret(GPU_FN_CU_MODULE_GET_FUNCTION, 0, 8);
	enter(GPU_FN_CU_LAUNCH, &cu, 9);
	k = kernel_of(GPU_KERNEL_RUNTIME, 0x401000);
	assert_int_equal(k.launches, 2);
	assert_int_equal(k.threads, 2 * 6 * 32);
	assert_int_equal(k.grid[0], 2);
	assert_int_equal(k.grid[1], 3);
	assert_int_equal(k.block[0], 32);
	k = kernel_of(GPU_KERNEL_RUNTIME, 0x402000);
	assert_int_equal(k.launches, 1);
	assert_int_equal(k.threads, 64);
	k = kernel_of(GPU_KERNEL_DRIVER, 0xf00d);
	assert_int_equal(k.launches, 1);
	assert_int_equal(k.threads, 4 * 16 * 2 * 1);
	assert_int_equal(k.block[1], 2);
	assert_int_equal(k.block[2], 1);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.gpu_knames), &key, &kn), 0);
	assert_string_equal(kn.name, name);
	assert_int_equal(stats_of(TGID).calls[GPU_FN_CU_MODULE_GET_FUNCTION], 1);
}

/* A name as long as gpu_knames holds (GPU_KNAME_LEN - 1 bytes) is whole; one byte more
 * and the entry holds its first bytes, marked cut. */
static void test_kernel_name_cut_marked(void **state)
{
	struct test_regs getfn = {.si = 0x1234};
	struct gpu_kernel_key key = {.tgid = TGID, .api = GPU_KERNEL_DRIVER};
	int fd = bpf_map__fd(skel->maps.gpu_knames);
	char name[GPU_KNAME_LEN + 1];
	struct gpu_kname kn;
	__u64 hfunc;
	int i;

	(void)state;
	for (i = 0; i < 2; i++) {
		memset(name, 'a' + i, sizeof(name));
		name[GPU_KNAME_LEN - 1 + i] = '\0';
		hfunc = 0xa000 + i;
		getfn.di = (uintptr_t)&hfunc;
		getfn.dx = (uintptr_t)name;
		enter(GPU_FN_CU_MODULE_GET_FUNCTION, &getfn, 1 + 2 * i);
		ret(GPU_FN_CU_MODULE_GET_FUNCTION, 0, 2 + 2 * i);
		key.func = hfunc;
		assert_int_equal(bpf_map_lookup_elem(fd, &key, &kn), 0);
		assert_int_equal(strlen(kn.name), GPU_KNAME_LEN - 1);
		assert_int_equal(kn.name[0], 'a' + i);
		assert_int_equal(kn.cut, i);
	}
}

/* cuLaunchKernelEx(&config, f, ...): the sizes from the config, counted as a driver
 * launch of f; a config that cannot be read: the launch counts, its threads do not. */
static void test_driver_launch_ex(void **state)
{
	struct {
		__u32 grid[3], block[3], shared_mem;
		__u32 __pad;
		__u64 stream, attrs;
		__u32 nattrs;
	} cfg = {{2, 3, 4}, {32, 2, 1}, 256, 0, 0, 0, 0};
	struct test_regs regs = {.di = (uintptr_t)&cfg, .si = 0xbeef, .sp = 0x1000};
	struct test_regs bad = {.di = 8, .si = 0xbeef, .sp = 0x1000};
	struct gpu_proc_stats st;
	struct gpu_kernel k;

	(void)state;
	st = driver_launches(GPU_FN_CU_LAUNCH_EX, &regs, &bad, 1 /* CUDA_ERROR_INVALID_VALUE */);
	assert_int_equal(st.calls[GPU_FN_CU_LAUNCH], 0);
	/* Nothing left in flight: a launch's return needs only its code. */
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_inflight), 16), 0);
	k = kernel_of(GPU_KERNEL_DRIVER, 0xbeef);
	assert_int_equal(k.launches, 2);
	assert_int_equal(k.threads, 24 * 64);
}

/* Event syncs are waits, as the stream and device syncs: their time counted; a failed
 * one is an error and no wait. */
static void test_event_syncs(void **state)
{
	struct test_regs ev = {.di = 0x6000};
	struct gpu_proc_stats st;

	(void)state;
	enter(GPU_FN_EVENT_SYNC, &ev, 100);
	ret(GPU_FN_EVENT_SYNC, 0, 400);
	enter(GPU_FN_CU_EVENT_SYNC, &ev, 500);
	ret(GPU_FN_CU_EVENT_SYNC, 0, 600);
	enter(GPU_FN_CU_EVENT_SYNC, &ev, 700);
	ret(GPU_FN_CU_EVENT_SYNC, 400 /* CUDA_ERROR_INVALID_HANDLE */, 900);
	st = stats_of(TGID);
	assert_int_equal(st.sync_ns, 300 + 100);
	assert_int_equal(st.calls[GPU_FN_EVENT_SYNC], 1);
	assert_int_equal(st.calls[GPU_FN_CU_EVENT_SYNC], 2);
	assert_int_equal(error_count(TGID, GPU_FN_CU_EVENT_SYNC, 400), 1);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_inflight), 16), 0);
}

/* The driver's device-to-device copies and its unified-address ones (cuMemcpy(Async):
 * direction inferred, counted as default), the time inside the synchronous ones. */
static void test_driver_dtod_and_unified_copies(void **state)
{
	struct test_regs dtod = {.di = 0x7f9000000000, .si = 0x7f9000100000, .dx = 4096};
	struct test_regs uva = {.di = 0x7f9000000000, .si = 0x1000, .dx = 512};
	struct gpu_proc_stats st;

	(void)state;
	enter(GPU_FN_CU_MEMCPY_DTOD, &dtod, 100);
	ret(GPU_FN_CU_MEMCPY_DTOD, 0, 150);
	enter(GPU_FN_CU_MEMCPY_DTOD_ASYNC, &dtod, 200);
	ret(GPU_FN_CU_MEMCPY_DTOD_ASYNC, 0, 210);
	enter(GPU_FN_CU_MEMCPY, &uva, 300);
	ret(GPU_FN_CU_MEMCPY, 0, 370);
	enter(GPU_FN_CU_MEMCPY_ASYNC, &uva, 400);
	ret(GPU_FN_CU_MEMCPY_ASYNC, 1 /* CUDA_ERROR_INVALID_VALUE */, 405);
	st = stats_of(TGID);
	assert_int_equal(st.memcpy_bytes[GPU_MEMCPY_D2D], 2 * 4096);
	assert_int_equal(st.memcpy_bytes[GPU_MEMCPY_DEFAULT], 512); /* the failed one: none */
	assert_int_equal(st.memcpy_bytes[GPU_MEMCPY_H2D] + st.memcpy_bytes[GPU_MEMCPY_D2H], 0);
	assert_int_equal(st.memcpy_ns, 50 + 70); /* the synchronous copies only */
	assert_int_equal(st.calls[GPU_FN_CU_MEMCPY_ASYNC], 1);
	assert_int_equal(error_count(TGID, GPU_FN_CU_MEMCPY_ASYNC, 1), 1);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_inflight), 16), 0);
}

/* Stream-ordered memory from a pool (cudaMallocFromPoolAsync) and the driver's
 * (cuMemAllocAsync, cuMemAllocFromPoolAsync, freed by cuMemFreeAsync): async memory,
 * tracked and freed as the runtime's cudaMallocAsync. */
static void test_stream_ordered_pools(void **state)
{
	__u64 pool = 0x7f1000000000, cu = 0x7f1000100000, cu_pool = 0x7f1000200000;
	struct gpu_proc_stats st;

	(void)state;
	alloc_call(GPU_FN_MALLOC_FROM_POOL_ASYNC, &pool, 1000, 10);
	alloc_call(GPU_FN_CU_MEM_ALLOC_ASYNC, &cu, 2000, 20);
	alloc_call(GPU_FN_CU_MEM_ALLOC_FROM_POOL_ASYNC, &cu_pool, 4000, 30);
	assert_int_equal(alloc_of(TGID, cu).kind, GPU_MEM_ASYNC);
	assert_int_equal(alloc_of(TGID, cu_pool).kind, GPU_MEM_ASYNC);
	free_call(GPU_FN_CU_MEM_FREE_ASYNC, cu, 40);
	free_call(GPU_FN_FREE_ASYNC, pool, 50);
	st = stats_of(TGID);
	assert_int_equal(st.calls[GPU_FN_MALLOC_FROM_POOL_ASYNC], 1);
	assert_int_equal(st.calls[GPU_FN_CU_MEM_ALLOC_ASYNC], 1);
	assert_int_equal(st.calls[GPU_FN_CU_MEM_ALLOC_FROM_POOL_ASYNC], 1);
	assert_int_equal(st.calls[GPU_FN_CU_MEM_FREE_ASYNC], 1);
	assert_int_equal(st.mem[GPU_MEM_ASYNC].allocs, 3);
	assert_int_equal(st.mem[GPU_MEM_ASYNC].frees, 2);
	assert_int_equal(st.mem[GPU_MEM_ASYNC].freed_bytes, 3000);
	assert_int_equal(st.mem[GPU_MEM_ASYNC].outstanding_bytes, 4000);
	assert_int_equal(st.mem[GPU_MEM_ASYNC].peak_bytes, 7000);
	assert_int_equal(st.mem[GPU_MEM_DEVICE].allocs, 0);
	assert_int_equal(st.frees_unknown, 0);
	assert_int_equal(st.allocs_tracked, 1);
}

/* cudaLaunchKernelExC(&config, func, args), what cudaLaunchKernelEx calls: the sizes and
 * the dynamic shared memory (a size_t here) from cudaLaunchConfig_t, counted as a
 * runtime launch of func on the runtime's device; a config that cannot be read: the
 * launch counts, its threads do not. */
static void test_runtime_launch_ex(void **state)
{
	struct {
		__u32 grid[3], block[3];
		__u64 shared_mem;
		__u64 stream, attrs;
		__u32 nattrs;
	} cfg = {{2, 3, 4}, {32, 2, 1}, 256, 0, 0, 0};
	struct test_regs regs = {.di = (uintptr_t)&cfg, .si = 0x401000, .sp = 0x1000};
	struct test_regs bad = {.di = 8, .si = 0x401000, .sp = 0x1000};
	struct gpu_launch_key unread = {.tgid = TGID, .api = GPU_KERNEL_RUNTIME,
					.fn = GPU_FN_LAUNCH_EX, .dev = 0,
					.bucket = GPU_LAUNCH_NO_BUCKET, .func = 0x401000};
	struct gpu_proc_stats st;
	struct gpu_kernel k;

	(void)state;
	enter(GPU_FN_LAUNCH_EX, &regs, 100);
	ret(GPU_FN_LAUNCH_EX, 0, 110);
	enter(GPU_FN_LAUNCH_EX, &bad, 120);
	ret(GPU_FN_LAUNCH_EX, 1 /* cudaErrorInvalidValue */, 130);
	st = stats_of(TGID);
	assert_int_equal(st.calls[GPU_FN_LAUNCH_EX], 2);
	assert_int_equal(st.calls[GPU_FN_LAUNCH], 0);
	assert_int_equal(st.threads, 24 * 64);
	assert_int_equal(st.launch_threads[10], 1);
	assert_int_equal(st.shared_mem_bytes, 256);
	assert_int_equal(st.failed[GPU_FN_LAUNCH_EX], 1);
	assert_int_equal(error_count(TGID, GPU_FN_LAUNCH_EX, 1), 1);
	/* The runtime's default device, as for cudaLaunchKernel. */
	assert_int_equal(st.dev[0].launches, 2);
	assert_int_equal(st.dev[0].errors, 1);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_inflight), 16), 0);
	k = kernel_of(GPU_KERNEL_RUNTIME, 0x401000);
	assert_int_equal(k.launches, 2);
	assert_int_equal(k.threads, 24 * 64);
	/* The launch whose config was unread: a row of no size, its sizes zeros. */
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.gpu_kernels), &unread, &k), 0);
	assert_int_equal(k.launches, 1);
	assert_int_equal(k.threads, 0);
	assert_int_equal(k.grid[0], 0);
}

/* cudaLaunchCooperativeKernel and cuLaunchCooperativeKernel take cudaLaunchKernel's and
 * cuLaunchKernel's arguments: counted as launches under their own functions. */
static void test_cooperative_launches(void **state)
{
	__u64 stack[3] = {0xdead /* return address */, 4096 /* sharedMem */, 0};
	__u64 cu_stack[4] = {0xdead, 1 /* blockZ */, 256 /* sharedMem */, 0};
	struct test_regs rt = launch_regs(stack), cu = cu_launch_regs(cu_stack);
	struct gpu_proc_stats st;

	(void)state;
	enter(GPU_FN_LAUNCH_COOP, &rt, 100);
	ret(GPU_FN_LAUNCH_COOP, 0, 110);
	enter(GPU_FN_CU_LAUNCH_COOP, &cu, 120);
	ret(GPU_FN_CU_LAUNCH_COOP, 720 /* CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE */, 130);
	st = stats_of(TGID);
	assert_int_equal(st.calls[GPU_FN_LAUNCH_COOP], 1);
	assert_int_equal(st.calls[GPU_FN_CU_LAUNCH_COOP], 1);
	assert_int_equal(st.calls[GPU_FN_LAUNCH] + st.calls[GPU_FN_CU_LAUNCH], 0);
	assert_int_equal(st.threads, 2 * (24 * 64));
	assert_int_equal(st.shared_mem_bytes, 4096 + 256);
	assert_int_equal(st.failed[GPU_FN_CU_LAUNCH_COOP], 1);
	assert_int_equal(error_count(TGID, GPU_FN_CU_LAUNCH_COOP, 720), 1);
	assert_int_equal(kernel_of(GPU_KERNEL_RUNTIME, 0x401000).launches, 1);
	assert_int_equal(kernel_of(GPU_KERNEL_DRIVER, 0xf00).launches, 1);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_inflight), 16), 0);
}

/* cudaGraphLaunch and cuGraphLaunch: counted calls, not kernel launches (a graph's kernels
 * run inside the driver), nothing kept in flight, as for a kernel launch; the driver's
 * graph launch inside the runtime's is not counted again. */
static void test_graph_launches(void **state)
{
	struct test_regs rt = {.di = 0x9000, .sp = 0x7000}, inner = {.di = 0x9000, .sp = 0x6f00};
	struct test_regs own = {.di = 0x9000, .sp = 0x7000};
	struct gpu_proc_stats st;

	(void)state;
	enter(GPU_FN_GRAPH_LAUNCH, &rt, 10);
	enter(GPU_FN_CU_GRAPH_LAUNCH, &inner, 11);
	ret_at(GPU_FN_CU_GRAPH_LAUNCH, 0, 12, inner.sp);
	ret_at(GPU_FN_GRAPH_LAUNCH, 0, 13, rt.sp);
	enter(GPU_FN_GRAPH_LAUNCH, &rt, 20);
	/* Between entry and return: nothing kept, no in-flight slot to run out of. */
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_inflight), 16), 0);
	ret_at(GPU_FN_GRAPH_LAUNCH, 1 /* cudaErrorInvalidValue */, 21, rt.sp);
	enter(GPU_FN_CU_GRAPH_LAUNCH, &own, 30);
	ret_at(GPU_FN_CU_GRAPH_LAUNCH, 0, 31, own.sp);
	st = stats_of(TGID);
	assert_int_equal(st.calls[GPU_FN_GRAPH_LAUNCH], 2);
	assert_int_equal(st.failed[GPU_FN_GRAPH_LAUNCH], 1);
	assert_int_equal(error_count(TGID, GPU_FN_GRAPH_LAUNCH, 1), 1);
	assert_int_equal(st.calls[GPU_FN_CU_GRAPH_LAUNCH], 1);
	assert_int_equal(st.driver_nested, 1);
	assert_int_equal(st.threads, 0);
	assert_int_equal(st.dev[0].launches + st.dev[GPU_DEV_UNKNOWN].launches, 0);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_kernels), 16), 0);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_inflight), 16), 0);
}

/*
 * A launch adds to its kernel's row and nothing else: the process's own stats hold no
 * launch while the row has room. With the kernel map full, a launch of a new row is
 * counted in the process's stats instead, by function, device and size, and one of a
 * row already there still goes to it: the totals stay exact either way.
 */
static void test_launch_rows_and_full_kernel_map(void **state)
{
	__u64 stack[3] = {0xdead, 0, 0};
	struct test_regs a = {.di = 0x401000, .si = 2 | 1ul << 32, .dx = 1, .cx = 32 | 1ul << 32,
			      .r8 = 1, .sp = (uintptr_t)stack};
	struct test_regs b = a;
	int fd = bpf_map__fd(skel->maps.gpu_kernels), pfd = bpf_map__fd(skel->maps.gpu_procs);
	struct gpu_launch_key key = {.tgid = 9000, .api = GPU_KERNEL_DRIVER};
	struct gpu_kernel one = {.launches = 1};
	struct gpu_proc_stats raw, st;
	__u32 i, tgid = TGID;

	(void)state;
	b.di = 0x402000;
	enter(GPU_FN_LAUNCH, &a, 1);
	ret(GPU_FN_LAUNCH, 0, 2);
	assert_int_equal(bpf_map_lookup_elem(pfd, &tgid, &raw), 0);
	assert_int_equal(raw.calls[GPU_FN_LAUNCH], 0);
	assert_int_equal(raw.threads, 0);
	assert_int_equal(map_len(fd, 16), 1);
	/* Fill the map with another process's rows. */
	for (i = 1; i < bpf_map__max_entries(skel->maps.gpu_kernels); i++) {
		key.func = i;
		assert_int_equal(bpf_map_update_elem(fd, &key, &one, BPF_NOEXIST), 0);
	}
	enter(GPU_FN_LAUNCH, &b, 3); /* a new row: no room */
	ret(GPU_FN_LAUNCH, 0, 4);
	enter(GPU_FN_LAUNCH, &a, 5); /* its row is there */
	ret(GPU_FN_LAUNCH, 0, 6);
	assert_int_equal(bpf_map_lookup_elem(pfd, &tgid, &raw), 0);
	assert_int_equal(raw.calls[GPU_FN_LAUNCH], 1);
	assert_int_equal(raw.threads, 64);
	assert_int_equal(raw.launch_threads[6], 1); /* 64 threads */
	assert_int_equal(raw.dev[0].launches, 1);
	assert_int_equal(kernel_of(GPU_KERNEL_RUNTIME, 0x401000).launches, 2);
	st = stats_of(TGID);
	assert_int_equal(st.calls[GPU_FN_LAUNCH], 3);
	assert_int_equal(st.threads, 3 * 64);
	assert_int_equal(st.launch_threads[6], 3);
	assert_int_equal(st.dev[0].launches, 3);
	assert_int_equal(st.dev[0].threads, 3 * 64);
}

/* __cudaGetKernel(&handle, hostFun): once it returned the handle, the handle maps to the
 * host function (gpu_khosts), by which userspace names the kernel launched by handle. A
 * failed call maps nothing. */
static void test_get_kernel_maps_handle(void **state)
{
	__u64 handle = 0, host = 0;
	struct test_regs get = {.di = (uintptr_t)&handle, .si = 0x401000};
	struct test_regs launch = {.di = 0xa000, .si = 1 | 1ull << 32, .dx = 1,
				   .cx = 32 | 1ull << 32, .r8 = 1};
	struct gpu_kernel_key key = {.tgid = TGID, .api = GPU_KERNEL_RUNTIME, .func = 0xa000};
	int fd = bpf_map__fd(skel->maps.gpu_khosts);

	(void)state;
	enter(GPU_FN_GET_KERNEL, &get, 1);
	handle = 0xa000; /* what the runtime wrote through its first argument */
	ret(GPU_FN_GET_KERNEL, 0, 2);
	assert_int_equal(bpf_map_lookup_elem(fd, &key, &host), 0);
	assert_int_equal(host, 0x401000);
	enter(GPU_FN_LAUNCH, &launch, 3);
	ret(GPU_FN_LAUNCH, 0, 4);
	assert_int_equal(kernel_of(GPU_KERNEL_RUNTIME, 0xa000).launches, 1);

	handle = 0;
	get.si = 0;
	enter(GPU_FN_GET_KERNEL, &get, 5);
	handle = 0xb000; /* a failed call: whatever it wrote is not a handle */
	ret(GPU_FN_GET_KERNEL, 98 /* cudaErrorInvalidDeviceFunction */, 6);
	key.func = 0xb000;
	assert_int_equal(bpf_map_lookup_elem(fd, &key, &host), -ENOENT);
	assert_int_equal(stats_of(TGID).calls[GPU_FN_GET_KERNEL], 2);
	assert_int_equal(stats_of(TGID).failed[GPU_FN_GET_KERNEL], 1);
	assert_int_equal(error_count(TGID, GPU_FN_GET_KERNEL, 98), 1);
}

/* cuLibraryGetKernel(&kernel, library, name) names the CUkernel; cuKernelGetFunction(&f,
 * kernel) gives its CUfunction the same name; a function of a kernel never named gets
 * none. */
static void test_library_kernel_named(void **state)
{
	static const char name[] = "sm80_xmma_gemm_cublas";
	__u64 kernel = 0, func = 0;
	struct test_regs get = {.di = (uintptr_t)&kernel, .dx = (uintptr_t)name};
	struct test_regs fn = {.di = (uintptr_t)&func, .si = 0xc000};
	struct gpu_kernel_key key = {.tgid = TGID, .api = GPU_KERNEL_DRIVER};
	int fd = bpf_map__fd(skel->maps.gpu_knames);
	struct gpu_kname kn;

	(void)state;
	enter(GPU_FN_CU_LIBRARY_GET_KERNEL, &get, 1);
	kernel = 0xc000;
	ret(GPU_FN_CU_LIBRARY_GET_KERNEL, 0, 2);
	enter(GPU_FN_CU_KERNEL_GET_FUNCTION, &fn, 3);
	func = 0xd000;
	ret(GPU_FN_CU_KERNEL_GET_FUNCTION, 0, 4);
	key.func = 0xc000;
	assert_int_equal(bpf_map_lookup_elem(fd, &key, &kn), 0);
	assert_string_equal(kn.name, name);
	key.func = 0xd000;
	assert_int_equal(bpf_map_lookup_elem(fd, &key, &kn), 0);
	assert_string_equal(kn.name, name);

	fn.si = 0xe000; /* a kernel made before we watched */
	enter(GPU_FN_CU_KERNEL_GET_FUNCTION, &fn, 5);
	func = 0xf000;
	ret(GPU_FN_CU_KERNEL_GET_FUNCTION, 0, 6);
	key.func = 0xf000;
	assert_int_equal(bpf_map_lookup_elem(fd, &key, &kn), -ENOENT);

	/* The kernel's entry holds another process's name (the LRU map reused it under
	 * a flood): the copy is taken back. */
	fn.si = 0xc000;
	key.func = 0xc000;
	assert_int_equal(bpf_map_lookup_elem(fd, &key, &kn), 0);
	kn.tgid = TGID + 1;
	assert_int_equal(bpf_map_update_elem(fd, &key, &kn, BPF_ANY), 0);
	enter(GPU_FN_CU_KERNEL_GET_FUNCTION, &fn, 7);
	func = 0xd100;
	ret(GPU_FN_CU_KERNEL_GET_FUNCTION, 0, 8);
	key.func = 0xd100;
	assert_int_equal(bpf_map_lookup_elem(fd, &key, &kn), -ENOENT);
	assert_int_equal(stats_of(TGID).calls[GPU_FN_CU_KERNEL_GET_FUNCTION], 3);
	assert_int_equal(stats_of(TGID).calls[GPU_FN_CU_LIBRARY_GET_KERNEL], 1);
}

/* cuCtxCreate_v4(&ctx, params, flags, dev) (CUDA 13's cuCtxCreate): the context is the
 * device's, and current: the thread's next driver launch is on it. */
static void test_ctx_create_v4_device(void **state)
{
	__u64 stack[3] = {0xdead, 1, 0}, ctx_slot = 0;
	struct test_regs launch = {.si = 1, .dx = 1, .cx = 1, .r8 = 1, .r9 = 1,
				   .sp = (uintptr_t)stack};
	struct test_regs create = {.di = (uintptr_t)&ctx_slot, .si = 0x1234 /* params */,
				   .dx = 0 /* flags */, .cx = 5 /* dev */};
	struct {
		__u32 tgid, __pad;
		__u64 ctx;
	} key = {.tgid = TGID, .ctx = 0xc5}; /* bpf/lib/gpu_state.h's gpu_ctx_key */
	__s32 dev = -1;

	(void)state;
	enter(GPU_FN_CU_CTX_CREATE_V4, &create, 1);
	ctx_slot = 0xc5;
	ret(GPU_FN_CU_CTX_CREATE_V4, 0, 2);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.gpu_ctxs), &key, &dev), 0);
	assert_int_equal(dev, 5);
	enter(GPU_FN_CU_LAUNCH, &launch, 3);
	assert_int_equal(stats_of(TGID).dev[5].launches, 1);
	assert_int_equal(stats_of(TGID).device, 5);
	assert_int_equal(stats_of(TGID).calls[GPU_FN_CU_CTX_CREATE_V4], 1);
}

/* A thread's state goes with it: its slot is free again. */
static void test_task_exit_drops_thread(void **state)
{
	struct test_regs dev1 = {.di = 1};

	(void)state;
	enter(GPU_FN_SET_DEVICE, &dev1, 1);
	ret(GPU_FN_SET_DEVICE, 0, 2);
	assert_int_equal(slot_of(PID_TGID).owner, PID_TGID);
	assert_int_equal(slot_of(PID_TGID).th.device, 1);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_threads), 8), 0);
	run(GPU_TEST_TASK_EXIT, NULL, PID_TGID, 3);
	assert_int_equal(slot_of(PID_TGID).owner, 0);
}

/*
 * Two threads whose ids index the same slot: the first holds it, the second's state
 * spills into gpu_threads, and each keeps its own device. Once the first is gone, the
 * second still finds its state there (not a new one in the free slot), and a third
 * thread of the index takes the slot. Each exit frees what its thread held.
 */
static void test_thread_slot_shared_by_index(void **state)
{
	__u64 stack[3] = {0xdead, 1, 0}, b = (__u64)TGID << 32 | (TGID + GPU_THREAD_SLOTS);
	__u64 c = (__u64)TGID << 32 | (TGID + 2 * GPU_THREAD_SLOTS);
	struct test_regs rt_launch = {.si = 1 | 1ul << 32, .dx = 1, .cx = 1 | 1ul << 32, .r8 = 1,
				      .sp = (uintptr_t)stack};
	struct test_regs dev1 = {.di = 1}, dev2 = {.di = 2}, sync = {.sp = 0x7ff0};
	struct test_regs nested = {.si = 1, .dx = 1, .cx = 1, .r8 = 1, .r9 = 1, .sp = 0x7f00};
	__u64 key;

	(void)state;
	enter(GPU_FN_SET_DEVICE, &dev1, 1);
	ret(GPU_FN_SET_DEVICE, 0, 2);
	run(GPU_TEST_ENTER + GPU_FN_SET_DEVICE, &dev2, b, 3);
	run(GPU_TEST_RET + GPU_FN_SET_DEVICE, &dev2, b, 4);
	assert_int_equal(slot_of(PID_TGID).owner, PID_TGID);
	assert_int_equal(slot_of(PID_TGID).spilled, 1);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_threads), 8), 1);
	assert_int_equal(bpf_map_get_next_key(bpf_map__fd(skel->maps.gpu_threads), NULL, &key), 0);
	assert_int_equal(key, b);
	run(GPU_TEST_ENTER + GPU_FN_LAUNCH, &rt_launch, b, 5);
	enter(GPU_FN_LAUNCH, &rt_launch, 6);
	assert_int_equal(stats_of(TGID).dev[1].launches, 1);
	assert_int_equal(stats_of(TGID).dev[2].launches, 1);

	run(GPU_TEST_TASK_EXIT, NULL, PID_TGID, 7);
	assert_int_equal(slot_of(PID_TGID).owner, 0);
	run(GPU_TEST_ENTER + GPU_FN_LAUNCH, &rt_launch, b, 8);
	assert_int_equal(stats_of(TGID).dev[2].launches, 2);
	/* Its runtime depth is found there too: a driver call below its runtime call is
	 * the runtime's own. */
	run(GPU_TEST_ENTER + GPU_FN_STREAM_SYNC, &sync, b, 8);
	run(GPU_TEST_ENTER + GPU_FN_CU_LAUNCH, &nested, b, 8);
	assert_int_equal(stats_of(TGID).driver_nested, 1);
	assert_int_equal(stats_of(TGID).calls[GPU_FN_CU_LAUNCH], 0);
	assert_int_equal(slot_of(PID_TGID).owner, 0);
	run(GPU_TEST_ENTER + GPU_FN_LAUNCH, &rt_launch, c, 9); /* the runtime's default: 0 */
	assert_int_equal(stats_of(TGID).dev[0].launches, 1);
	assert_int_equal(slot_of(PID_TGID).owner, c);

	run(GPU_TEST_TASK_EXIT, NULL, b, 10);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_threads), 8), 0);
	run(GPU_TEST_TASK_EXIT, NULL, c, 11);
	assert_int_equal(slot_of(PID_TGID).owner, 0);
}

/*
 * More threads whose slot another holds than gpu_threads has room for (a process of
 * thousands of threads, or a user's flood): those without room go without state; none
 * takes the state of a thread that has it (an LRU map gave it away), which keeps its
 * device.
 */
static void test_thread_states_not_evicted(void **state)
{
	__u64 stack[3] = {0xdead, 1, 0}, b = (__u64)TGID << 32 | (TGID + GPU_THREAD_SLOTS), x;
	struct test_regs rt_launch = {.si = 1 | 1ul << 32, .dx = 1, .cx = 1 | 1ul << 32, .r8 = 1,
				      .sp = (uintptr_t)stack};
	struct test_regs dev1 = {.di = 1}, dev3 = {.di = 3};
	int i;

	(void)state;
	enter(GPU_FN_SET_DEVICE, &dev1, 1); /* holds the slot */
	ret(GPU_FN_SET_DEVICE, 0, 2);
	run(GPU_TEST_ENTER + GPU_FN_SET_DEVICE, &dev3, b, 3);
	run(GPU_TEST_RET + GPU_FN_SET_DEVICE, &dev3, b, 4);
	for (i = 0; i < 2 * THREADS_SPILLED; i++) {
		x = (__u64)TGID << 32 | (TGID + (i + 2) * GPU_THREAD_SLOTS);
		run(GPU_TEST_ENTER + GPU_FN_SET_DEVICE, &dev1, x, 10 + 2 * i);
		run(GPU_TEST_RET + GPU_FN_SET_DEVICE, &dev1, x, 11 + 2 * i);
	}
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_threads), 8), THREADS_SPILLED);
	run(GPU_TEST_ENTER + GPU_FN_LAUNCH, &rt_launch, b, 100);
	assert_int_equal(stats_of(TGID).dev[3].launches, 1);
	for (i = 0; i < 2 * THREADS_SPILLED; i++)
		run(GPU_TEST_TASK_EXIT, NULL, (__u64)TGID << 32 | (TGID + (i + 2) * GPU_THREAD_SLOTS),
		    200);
	run(GPU_TEST_TASK_EXIT, NULL, b, 201);
	run(GPU_TEST_TASK_EXIT, NULL, PID_TGID, 202);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_threads), 8), 0);
}

/* Entries of a map (keys of key_size) whose key begins with tgid, or with a pid_tgid of
 * tgid when by_thread. */
static size_t keys_of(int fd, size_t key_size, __u32 tgid, bool by_thread)
{
	char key[32], next[32];
	void *prev = NULL;
	size_t n = 0;
	__u64 pid_tgid;
	__u32 t;

	while (!bpf_map_get_next_key(fd, prev, next)) {
		memcpy(&t, next, sizeof(t));
		memcpy(&pid_tgid, next, sizeof(pid_tgid));
		n += (by_thread ? pid_tgid >> 32 : t) == tgid;
		memcpy(key, next, key_size);
		prev = key;
	}
	return n;
}

/*
 * A process that execs leaves nothing of its old program: its allocations, kernels and
 * their names, errors, contexts, calls in flight and threads' state go, and its stats
 * row last; another process's stay. The new program's first call makes a new row,
 * born then, whose counts begin at 0.
 */
static void test_exec_drops_the_old_program(void **state)
{
	__u64 stack[3] = {0xdead, 1, 0}, p1 = 0x7f6000000000, p2 = 0x7f6100000000, ctx_slot = 0;
	__u64 b = (__u64)TGID << 32 | (TGID + GPU_THREAD_SLOTS), hfunc = 0xf00d;
	__u64 other = 7777ull << 32 | 7777, handle = 0;
	struct test_regs launch = {.di = 0x401000, .si = 1 | 1ul << 32, .dx = 1,
				   .cx = 32 | 1ul << 32, .r8 = 1, .sp = (uintptr_t)stack};
	struct test_regs dev1 = {.di = 1}, create = {.di = (uintptr_t)&ctx_slot, .dx = 2};
	struct test_regs getfn = {.di = (uintptr_t)&hfunc, .dx = (uintptr_t)"relu_kernel"};
	struct test_regs get = {.di = (uintptr_t)&handle, .si = 0x401000}, sync = {};
	struct test_regs m = {.di = (uintptr_t)&p2, .si = 64};
	static const char *const maps[] = {"gpu_allocs", "gpu_errors", "gpu_ctxs", "gpu_kernels",
					   "gpu_knames", "gpu_khosts"};
	struct gpu_proc_stats raw;
	struct bpf_map *map;
	size_t i;
	__u32 tgid = TGID;

	(void)state;
	alloc_call(GPU_FN_MALLOC, &p1, 100, 1);
	enter(GPU_FN_MALLOC, &m, 2);
	ret(GPU_FN_MALLOC, 2 /* cudaErrorMemoryAllocation */, 3);
	enter(GPU_FN_LAUNCH, &launch, 4);
	ret(GPU_FN_LAUNCH, 0, 4);
	enter(GPU_FN_SET_DEVICE, &dev1, 5);
	ret(GPU_FN_SET_DEVICE, 0, 6);
	enter(GPU_FN_CU_CTX_CREATE, &create, 7);
	ctx_slot = 0xc2;
	ret(GPU_FN_CU_CTX_CREATE, 0, 8);
	enter(GPU_FN_CU_MODULE_GET_FUNCTION, &getfn, 9);
	ret(GPU_FN_CU_MODULE_GET_FUNCTION, 0, 10);
	enter(GPU_FN_GET_KERNEL, &get, 11);
	handle = 0xa000;
	ret(GPU_FN_GET_KERNEL, 0, 12);
	run(GPU_TEST_ENTER + GPU_FN_SET_DEVICE, &dev1, b, 13); /* spilled, in flight */
	run(GPU_TEST_ENTER + GPU_FN_MALLOC, &m, other, 14);	/* another process */
	p2 = 0x7f6200000000;
	run(GPU_TEST_RET + GPU_FN_MALLOC, &sync, other, 15);
	run(GPU_TEST_ENTER + GPU_FN_LAUNCH, &launch, other, 16);
	for (i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
		map = bpf_object__find_map_by_name(skel->obj, maps[i]);
		assert_true(keys_of(bpf_map__fd(map), bpf_map__key_size(map), TGID, false) > 0);
	}
	assert_int_equal(keys_of(bpf_map__fd(skel->maps.gpu_inflight), 16, TGID, true), 1);
	assert_int_equal(keys_of(bpf_map__fd(skel->maps.gpu_threads), 8, TGID, true), 1);
	assert_int_equal(slot_of(PID_TGID).owner, PID_TGID);

	run(GPU_TEST_EXEC, NULL, PID_TGID, 20);
	for (i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
		map = bpf_object__find_map_by_name(skel->obj, maps[i]);
		assert_int_equal(keys_of(bpf_map__fd(map), bpf_map__key_size(map), TGID, false), 0);
	}
	assert_int_equal(keys_of(bpf_map__fd(skel->maps.gpu_inflight), 16, TGID, true), 0);
	assert_int_equal(keys_of(bpf_map__fd(skel->maps.gpu_threads), 8, TGID, true), 0);
	assert_int_equal(slot_of(PID_TGID).owner, 0);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.gpu_procs), &tgid, &raw),
			 -ENOENT);
	/* The other process keeps its allocation, launch and row. */
	assert_int_equal(keys_of(bpf_map__fd(skel->maps.gpu_allocs), 16, 7777, false), 1);
	assert_int_equal(keys_of(bpf_map__fd(skel->maps.gpu_kernels), 16, 7777, false), 1);
	assert_int_equal(stats_of(7777).calls[GPU_FN_LAUNCH], 1);

	/* The new program's first call: a new row, counting from 0. */
	enter(GPU_FN_LAUNCH, &launch, 30);
	ret(GPU_FN_LAUNCH, 0, 30);
	assert_int_equal(stats_of(TGID).calls[GPU_FN_LAUNCH], 1);
	assert_int_equal(stats_of(TGID).calls[GPU_FN_MALLOC], 0);
	assert_int_equal(stats_of(TGID).mem[GPU_MEM_DEVICE].outstanding_bytes, 0);
	assert_int_equal(stats_of(TGID).device, -1);
	assert_true(stats_of(TGID).born_ns > 0);
	/* Exec of a process that never called CUDA: nothing to drop, nothing made. */
	run(GPU_TEST_EXEC, NULL, 8888ull << 32 | 8888, 40);
	assert_int_equal(map_len(bpf_map__fd(skel->maps.gpu_procs), 4), 2);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup(fn, case_setup)
	const struct CMUnitTest tests[] = {
		T(test_launch_dims_and_shared_memory),
		T(test_launch_unreadable_stack_and_empty_grid),
		T(test_launch_threads_saturate),
		T(test_launch_error_counted),
		T(test_malloc_free_outstanding_and_peak),
		T(test_malloc_failure_allocates_nothing),
		T(test_malloc_unreadable_devptr),
		T(test_free_unknown_and_null),
		T(test_memcpy_bytes_and_time),
		T(test_sync_wait_and_set_device),
		T(test_return_pairs_per_thread),
		T(test_task_exit_drops_inflight),
		T(test_task_exit_in_free_keeps_record),
		T(test_free_return_unseen_keeps_record),
		T(test_kernel_rows_cap_per_process),
		T(test_error_kinds_cap_per_process),
		T(test_processes_kept_apart),
		T(test_memory_kinds),
		T(test_alloc_at_tracked_address_replaces),
		T(test_free_race_failed_invalid),
		T(test_wrong_free_keeps_allocation),
		T(test_zero_size_allocs_not_tracked),
		T(test_alloc_larger_than_any_not_tracked),
		T(test_free_and_alloc_of_one_address_race),
		T(test_failed_free_keeps_allocation),
		T(test_allocation_cap_per_process),
		T(test_driver_launch_dims),
		T(test_driver_launch_ex),
		T(test_runtime_launch_ex),
		T(test_stream_ordered_pools),
		T(test_driver_dtod_and_unified_copies),
		T(test_event_syncs),
		T(test_cooperative_launches),
		T(test_graph_launches),
		T(test_get_kernel_maps_handle),
		T(test_library_kernel_named),
		T(test_ctx_create_v4_device),
		T(test_driver_memory_copies_syncs),
		T(test_driver_inside_runtime_not_counted_twice),
		T(test_nested_primary_context_learnt),
		T(test_lost_runtime_return_heals),
		T(test_devices_per_thread),
		T(test_driver_call_in_runtime_context),
		T(test_launch_rows_and_full_kernel_map),
		T(test_task_exit_drops_thread),
		T(test_exec_drops_the_old_program),
		T(test_thread_slot_shared_by_index),
		T(test_thread_states_not_evicted),
		T(test_kernels_counted_and_named),
		T(test_kernel_name_cut_marked),
		T(test_inflight_full_counted),
		T(test_share_processes_per_user),
		T(test_share_allocations_per_user),
		T(test_share_kernel_rows_and_error_kinds),
		T(test_share_recount),
		T(test_share_threads_per_user),
		T(test_share_calls_in_flight_per_user),
		T(test_share_calls_in_flight_left_over),
		T(test_share_recount_threads_and_calls),
		T(test_share_refusers),
	};

	const struct CMUnitTest defaults[] = {
		T(test_launch_shared_memory_off),
	};

	bpftel_test_require_bpf();
	return cmocka_run_group_tests_name("gpu", tests, group_setup, group_teardown) |
	       cmocka_run_group_tests_name("gpu defaults", defaults, group_setup_default,
					   group_teardown);
}
