// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * gpu.bpf.o's programs, each through its own entry: the GPU module's uprobe and
 * uretprobe on the stub libcudart.so.13 the tests build (tests/gpu/), attached by the
 * uprobe registry once the watcher saw cuda_pattern open it, and its sched_process_exit
 * tracepoint by a process killed inside a call. Each case asserts the program's effect
 * in the module's maps, its telemetry key, and, where one can be made, an error counted
 * under its name. The last case checks that every program of the object ran.
 *
 *   test_bpf_prog_gpu CUDA_PATTERN STUB_LIBCUDART
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <bpf/bpf.h>

#include "prog_common.h"
#include "bpf/fair_share_defs.h"
#include "gpu.skel.h"
#include "tests/gpu/probe_points.h"

#define NPROBES GPU_TEST_CUDART_POINTS
#define MiB	(1ull << 20)

static char *pattern_bin, *stub_lib;

static struct prog_case cases[] = {
	{"gpu_uprobe", "real uprobe on the stub libcudart.so.13",
	 "gpu_procs insert E2BIG (the map full of processes)"},
	{"gpu_uretprobe", "real uretprobe on the stub libcudart.so.13",
	 "probe_read_user EFAULT (an unmapped devPtr)"},
	{"gpu_task_exit", "real tracepoint sched/sched_process_exit (a process killed in a call)",
	 NULL, "its one fallible call deletes what its lookup just found"},
	{"gpu_exec", "real tracepoint sched/sched_process_exec (a process that used CUDA execs)",
	 NULL, "its fallible calls delete what its walks and lookup just found"},
	{"gpu_slot_free", "BPF_PROG_TEST_RUN by the module's sweep (a thread gone unseen)", NULL,
	 "no fallible call: an array lookup and a compare-and-swap"},
	{"gpu_exec_drop", "BPF_PROG_TEST_RUN as the module's restart runs it (an exec in its gap)",
	 NULL, "its fallible calls delete what its walks and lookup just found"},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

struct fixture {
	struct prog_env *env;
	struct prog_child child;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	const char *only[] = {stub_lib, NULL};

	f->env = prog_env_new();
	prog_env_only(f->env, only);
	/* The launch body's stack read is tested: it is off by default. */
	bpftel_gpu__configure(f->env->gpu, true, 0);
	assert_int_equal(bpftel_module__run(f->env->gpu_mod), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	prog_child_stop(&f->child);
	prog_env_free(f->env);
	free(f);
	return 0;
}

static struct bpf_object *gpu_obj(struct fixture *f)
{
	return bpftel_module__object(f->env->gpu_mod);
}

/* cuda_pattern MODE [N] on the stub, once the GPU module's uprobes are on it. */
static void start_pattern(struct fixture *f, char *mode, char *n)
{
	char *argv[] = {pattern_bin, stub_lib, mode, n, NULL};

	prog_child_start(&f->child, argv);
	if (!WAIT_FOR(prog_attached(f->env, BPFTEL_GPU_MODULE, f->child.pid) == NPROBES))
		fail_msg("%zu of %d uprobes attached for pid %d",
			 prog_attached(f->env, BPFTEL_GPU_MODULE, f->child.pid), NPROBES,
			 (int)f->child.pid);
}

/* The module's row for pid. */
static struct bpftel_gpu_proc gpu_row(struct fixture *f, pid_t pid)
{
	struct bpftel_gpu_proc *rows, row = {};
	int n, i;

	n = bpftel_gpu__processes(f->env->gpu, &rows);
	for (i = 0; i < n; i++) {
		if (rows[i].pid == (__u32)pid)
			row = rows[i];
	}
	if (n >= 0)
		free(rows);
	if (!row.pid)
		fail_msg("no GPU row for pid %d", (int)pid);
	return row;
}

/* The entry probe counts every call of cuda_pattern's stub pattern, per function. */
static void test_gpu_uprobe_counts_every_call(void **state)
{
	static const __u64 calls[GPU_FN__COUNT] = {
		[GPU_FN_LAUNCH] = 5,	  [GPU_FN_MALLOC] = 4,	     [GPU_FN_FREE] = 2,
		[GPU_FN_MEMCPY] = 3,	  [GPU_FN_MEMCPY_ASYNC] = 1, [GPU_FN_STREAM_SYNC] = 1,
		[GPU_FN_DEVICE_SYNC] = 1, [GPU_FN_SET_DEVICE] = 2,
	};
	struct fixture *f = *state;
	struct bpftel_gpu_proc row;
	__u64 runs;
	int i;

	start_pattern(f, "stub", NULL);
	assert_true(prog_rodata_u32(gpu_obj(f), "tlm_key_prog_gpu_uprobe") > 0);
	runs = prog_run_cnt(gpu_obj(f), "gpu_uprobe");
	prog_child_play(&f->child, NULL, 0);
	row = gpu_row(f, f->child.pid);
	for (i = 0; i < GPU_FN__COUNT; i++)
		assert_int_equal(row.st.calls[i], calls[i]);
	/* The launch body: grid 2x3x1 by block 32x4x1, 1 KiB of shared memory read from
	 * the caller's stack. */
	assert_int_equal(row.st.threads, 5 * 6 * 128);
	assert_true(row.shared_mem_counted);
	assert_int_equal(row.st.shared_mem_bytes, 5 * 1024);
	/* Only this process maps the stub: each run was one of its 19 calls. */
	if (bpftel_telemetry__stats_enabled(f->env->tlm))
		assert_int_equal(prog_run_cnt(gpu_obj(f), "gpu_uprobe") - runs, 19);
	prog_ran(cases, NCASES, "gpu_uprobe");
}

/* A before_init hook, as any component may register: gpu_procs holds 64 processes
 * instead of 4096, so that 100 processes fill it in a moment (sanitizers included). */
static int shrink_procs(const struct bpftel_hook_before_init *h, void *ctx)
{
	(void)ctx;
	return bpf_map__set_max_entries(bpf_object__find_map_by_name(h->obj, "gpu_procs"), 64);
}

/* gpu_procs full: each further process's first call fails to insert its row, counted
 * under gpu_uprobe, exactly once per process. */
static void test_gpu_uprobe_full_process_map_counted(void **state)
{
	struct fixture *f = *state;
	struct bpf_map *procs;
	long forked, distinct, free_slots;
	char out[128];

	assert_int_equal(bpftel_module__stop(f->env->gpu_mod), 0);
	assert_int_equal(bpftel_module__add_before_init(f->env->gpu_mod, shrink_procs, NULL), 0);
	assert_int_equal(bpftel_module__run(f->env->gpu_mod), 0);
	procs = bpf_object__find_map_by_name(gpu_obj(f), "gpu_procs");
	assert_int_equal(bpf_map__max_entries(procs), 64);
	start_pattern(f, "fork", "100");
	free_slots = bpf_map__max_entries(procs) - prog_map_entries(gpu_obj(f), "gpu_procs");
	prog_child_play(&f->child, out, sizeof(out));
	assert_int_equal(sscanf(out, "forked %ld distinct %ld", &forked, &distinct), 2);
	assert_true(distinct > free_slots);
	assert_int_equal(prog_map_entries(gpu_obj(f), "gpu_procs"), bpf_map__max_entries(procs));
	assert_int_equal(
		prog_errors(f->env, "gpu", "gpu_uprobe", "gpu_procs", "insert", E2BIG),
		distinct - free_slots);
	prog_error_counted(cases, NCASES, "gpu_uprobe");
}

/* The return probe accounts what returned: allocations, frees, copies, errors. */
static void test_gpu_uretprobe_accounts_returns(void **state)
{
	struct fixture *f = *state;
	struct bpftel_gpu_proc row;
	__u64 runs;

	start_pattern(f, "stub", NULL);
	assert_true(prog_rodata_u32(gpu_obj(f), "tlm_key_prog_gpu_uretprobe") > 0);
	runs = prog_run_cnt(gpu_obj(f), "gpu_uretprobe");
	prog_child_play(&f->child, NULL, 0);
	row = gpu_row(f, f->child.pid);
	assert_int_equal(row.st.mem[GPU_MEM_DEVICE].allocs, 3);
	assert_int_equal(row.st.mem[GPU_MEM_DEVICE].alloc_bytes, 7 * MiB);
	assert_int_equal(row.st.mem[GPU_MEM_DEVICE].frees, 2);
	assert_int_equal(row.st.mem[GPU_MEM_DEVICE].freed_bytes, 3 * MiB);
	assert_int_equal(row.st.mem[GPU_MEM_DEVICE].outstanding_bytes, 4 * MiB);
	assert_int_equal(row.st.mem[GPU_MEM_DEVICE].peak_bytes, 7 * MiB);
	assert_int_equal(row.st.memcpy_bytes[GPU_MEMCPY_H2D], 2 * MiB + 512);
	assert_int_equal(row.st.memcpy_bytes[GPU_MEMCPY_D2H], 4096);
	assert_int_equal(row.st.failed[GPU_FN_MALLOC], 1);
	assert_int_equal(row.st.failed[GPU_FN_SET_DEVICE], 1);
	assert_int_equal(row.st.device, 1);
	assert_int_equal(row.nerrors, 2);
	if (bpftel_telemetry__stats_enabled(f->env->tlm))
		assert_int_equal(prog_run_cnt(gpu_obj(f), "gpu_uretprobe") - runs, 19);
	prog_ran(cases, NCASES, "gpu_uretprobe");
}

/* cudaMalloc succeeds without storing through devPtr (unmapped): the return probe's
 * read of the pointer fails, counted under gpu_uretprobe, once per call. */
static void test_gpu_uretprobe_bad_devptr_counted(void **state)
{
	struct fixture *f = *state;
	struct bpftel_gpu_proc row;
	char out[128];

	start_pattern(f, "badptr", "5");
	prog_child_play(&f->child, out, sizeof(out));
	assert_string_equal(out, "malloc 5 failed 0");
	row = gpu_row(f, f->child.pid);
	assert_int_equal(row.st.mem[GPU_MEM_DEVICE].allocs, 5);
	assert_int_equal(row.st.allocs_untracked, 5);
	assert_int_equal(
		prog_errors(f->env, "gpu", "gpu_uretprobe", "probe_read_user", "call", EFAULT), 5);
	prog_error_counted(cases, NCASES, "gpu_uretprobe");
}

/* struct gpu_call_key of bpf/lib/gpu_probes.h, and its value's size. */
struct call_key {
	__u64 pid_tgid;
	__u32 func, pad;
};

/* A process killed inside cudaStreamSynchronize leaves its entry in gpu_inflight (no
 * return probe runs); the exit tracepoint drops it. */
static void test_gpu_task_exit_drops_a_dead_call(void **state)
{
	struct fixture *f = *state;
	int fd = bpf_map__fd(bpf_object__find_map_by_name(gpu_obj(f), "gpu_inflight"));
	struct call_key key = {.func = GPU_FN_STREAM_SYNC};
	__u64 val[6], runs; /* struct gpu_call: 3 words and the freed record */

	start_pattern(f, "hang", NULL);
	assert_true(prog_rodata_u32(gpu_obj(f), "tlm_key_prog_gpu_task_exit") > 0);
	key.pid_tgid = (__u64)f->child.pid << 32 | (__u32)f->child.pid;
	prog_child_go(&f->child);
	if (!WAIT_FOR(!bpf_map_lookup_elem(fd, &key, val)))
		fail_msg("pid %d never entered the call", (int)f->child.pid);
	runs = prog_run_cnt(gpu_obj(f), "gpu_task_exit");
	kill(f->child.pid, SIGKILL);
	prog_child_stop(&f->child); /* reaped: its exit, tracepoint included, is over */
	assert_true(bpf_map_lookup_elem(fd, &key, val) < 0);
	assert_int_equal(errno, ENOENT);
	if (bpftel_telemetry__stats_enabled(f->env->tlm))
		assert_true(prog_run_cnt(gpu_obj(f), "gpu_task_exit") > runs);
	prog_ran(cases, NCASES, "gpu_task_exit");
}

/* A process that used CUDA execs itself: the exec tracepoint drops its row, and all it
 * had, before the new program runs (which waits for a line before its first call). */
static void test_gpu_exec_drops_the_old_program(void **state)
{
	struct fixture *f = *state;
	struct bpftel_gpu_proc *rows;
	int n, i, found = 0;
	char line[64];
	__u64 runs;

	start_pattern(f, "reexec", NULL);
	assert_true(prog_rodata_u32(gpu_obj(f), "tlm_key_prog_gpu_exec") > 0);
	prog_child_play(&f->child, NULL, 0);
	assert_int_equal(gpu_row(f, f->child.pid).st.calls[GPU_FN_LAUNCH], 3);
	runs = prog_run_cnt(gpu_obj(f), "gpu_exec");
	prog_child_go(&f->child); /* the line it execs on */
	assert_non_null(fgets(line, sizeof(line), f->child.out));
	assert_int_equal(strncmp(line, "loaded ", 7), 0);
	n = bpftel_gpu__processes(f->env->gpu, &rows);
	for (i = 0; i < n; i++)
		found |= rows[i].pid == (__u32)f->child.pid;
	if (n > 0)
		free(rows);
	assert_int_equal(found, 0);
	if (bpftel_telemetry__stats_enabled(f->env->tlm))
		assert_true(prog_run_cnt(gpu_obj(f), "gpu_exec") > runs);
	prog_ran(cases, NCASES, "gpu_exec");
}

/*
 * A thread's state slot held by a thread gone without an exit its probe saw (its
 * process had no row: gpu_procs full): the sweep frees it through gpu_slot_free, and
 * leaves a live thread's slot alone.
 */
static void test_gpu_slot_free_by_the_sweep(void **state)
{
	struct fixture *f = *state;
	int fd = bpf_map__fd(bpf_object__find_map_by_name(gpu_obj(f), "gpu_thread_slots"));
	__u64 live = (__u64)getpid() << 32 | (__u32)syscall(SYS_gettid), dead, runs;
	struct gpu_thread_slot slot = {}, got;
	__u32 idead, ilive = (__u32)live % GPU_THREAD_SLOTS;
	pid_t pid;

	do { /* a thread id gone, of another slot than ours */
		pid = fork();
		if (!pid)
			_exit(0);
		assert_true(pid > 0);
		assert_int_equal(waitpid(pid, NULL, 0), pid);
	} while ((__u32)pid % GPU_THREAD_SLOTS == ilive);
	dead = (__u64)pid << 32 | (__u32)pid;
	idead = (__u32)pid % GPU_THREAD_SLOTS;
	slot.owner = dead;
	assert_int_equal(bpf_map_update_elem(fd, &idead, &slot, BPF_ANY), 0);
	slot.owner = live;
	assert_int_equal(bpf_map_update_elem(fd, &ilive, &slot, BPF_ANY), 0);
	runs = prog_run_cnt(gpu_obj(f), "gpu_slot_free");
	bpftel_gpu__sweep(f->env->gpu);
	assert_int_equal(bpf_map_lookup_elem(fd, &idead, &got), 0);
	assert_int_equal(got.owner, 0);
	assert_int_equal(bpf_map_lookup_elem(fd, &ilive, &got), 0);
	assert_int_equal(got.owner, live);
	if (bpftel_telemetry__stats_enabled(f->env->tlm))
		assert_true(prog_run_cnt(gpu_obj(f), "gpu_slot_free") > runs);
	slot.owner = 0;
	assert_int_equal(bpf_map_update_elem(fd, &ilive, &slot, BPF_ANY), 0);
	prog_ran(cases, NCASES, "gpu_slot_free");
}

/*
 * A process that exec'd in a restart's gap: the module's start runs gpu_exec_drop for
 * it (user/modules/gpu/gpu_gap.c), the exec tracepoint's body, which drops its row and
 * allocations; another process's stay.
 */
static void test_gpu_exec_drop(void **state)
{
	struct fixture *f = *state;
	struct bpf_object *obj = gpu_obj(f);
	int procs = bpf_map__fd(bpf_object__find_map_by_name(obj, "gpu_procs"));
	int allocs = bpf_map__fd(bpf_object__find_map_by_name(obj, "gpu_allocs"));
	int prog = bpf_program__fd(bpf_object__find_program_by_name(obj, "gpu_exec_drop"));
	__u32 tgid = 5000008, other = 5000009; /* above any pid_max: no process's */
	struct gpu_alloc_key k = {.tgid = tgid, .ptr = 0x1000}, ko = {.tgid = other, .ptr = 0x1000};
	struct gpu_alloc a = {.size = 4096, .kind = GPU_MEM_DEVICE};
	struct gpu_exec_drop_args args = {.tgid = tgid};
	LIBBPF_OPTS(bpf_test_run_opts, run, .ctx_in = &args, .ctx_size_in = sizeof(args));
	struct gpu_proc_stats st = {};
	__u64 runs;

	assert_true(procs >= 0 && allocs >= 0 && prog >= 0);
	assert_int_equal(bpf_map_update_elem(procs, &tgid, &st, BPF_NOEXIST), 0);
	assert_int_equal(bpf_map_update_elem(procs, &other, &st, BPF_NOEXIST), 0);
	assert_int_equal(bpf_map_update_elem(allocs, &k, &a, BPF_NOEXIST), 0);
	assert_int_equal(bpf_map_update_elem(allocs, &ko, &a, BPF_NOEXIST), 0);
	runs = prog_run_cnt(obj, "gpu_exec_drop");
	assert_int_equal(bpf_prog_test_run_opts(prog, &run), 0);
	assert_int_equal(bpf_map_lookup_elem(procs, &tgid, &st), -ENOENT);
	assert_int_equal(bpf_map_lookup_elem(allocs, &k, &a), -ENOENT);
	assert_int_equal(bpf_map_lookup_elem(procs, &other, &st), 0);
	assert_int_equal(bpf_map_lookup_elem(allocs, &ko, &a), 0);
	assert_int_equal(bpf_map_delete_elem(allocs, &ko), 0);
	assert_int_equal(bpf_map_delete_elem(procs, &other), 0);
	if (bpftel_telemetry__stats_enabled(f->env->tlm))
		assert_true(prog_run_cnt(obj, "gpu_exec_drop") > runs);
	prog_ran(cases, NCASES, "gpu_exec_drop");
}

/* With every module loaded under one telemetry owner, as in the agent: each program's
 * key is assigned and no two programs share one. */
static void test_keys_assigned_and_distinct(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(bpftel_module__run(f->env->usm_mod), 0);
	assert_int_equal(prog_assert_keys_distinct(f->env),
			 8 + 6 + 5); /* the watcher's programs, the GPU's, the USM's */
}

static void test_every_program_run(void **state)
{
	struct gpu *skel = gpu__open();

	(void)state;
	assert_non_null(skel);
	prog_coverage("gpu.bpf.o", skel->obj, cases, NCASES);
	gpu__destroy(skel);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_gpu_uprobe_counts_every_call),
		T(test_gpu_uprobe_full_process_map_counted),
		T(test_gpu_uretprobe_accounts_returns),
		T(test_gpu_uretprobe_bad_devptr_counted),
		T(test_gpu_task_exit_drops_a_dead_call),
		T(test_gpu_exec_drops_the_old_program),
		T(test_gpu_slot_free_by_the_sweep),
		T(test_gpu_exec_drop),
		T(test_keys_assigned_and_distinct),
#undef T
		cmocka_unit_test(test_every_program_run),
	};

	if (argc != 3) {
		fprintf(stderr, "usage: test_bpf_prog_gpu CUDA_PATTERN STUB_LIBCUDART\n");
		return 2;
	}
	pattern_bin = argv[1];
	stub_lib = argv[2];
	bpftel_test_require_bpf();
	return cmocka_run_group_tests_name("prog_gpu", tests, NULL, NULL);
}
