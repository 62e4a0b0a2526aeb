// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The GPU module against the real kernel, restarted while a process keeps the stub
 * libcudart.so.13 mapped: every start attaches its uprobes (tests/gpu/probe_points.h)
 * to that file again, every stop detaches them, the watcher keeps running for its other subscriber, and
 * BPF objects and fds are back to their baseline at the end. Shedding one file's load
 * (the self-overhead budget) and taking it back.
 *
 *   test_bpf_gpu_module CUDA_PATTERN STUB_LIBCUDART
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdbool.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <bpf/bpf.h>

#include "harness.h"
#include "user/manager/manager.h"
#include "gpu.h"
#include "user/modules/gpu/gpu.h"
#include "user/modules/gpu/gpu_series.h"
#include "user/sharedlibs/sharedlibs.h"
#include "user/sharedlibs/uprobes.h"
#include "tests/gpu/probe_points.h"

#define ROUNDS	  10
#define NPROBES	  GPU_TEST_CUDART_POINTS
#define OTHER_SUB "test-inventory"
/* Its libraries: the GPU's only, so that the host's TLS processes (mapping libssl
 * meanwhile) do not make the watcher open files while the test counts fds. */
#define OTHER_SETS SHLIB_LIBSET_BIT(SHLIB_LIBSET_GPU)

static const char *pattern_bin, *stub_lib;

struct fixture {
	struct bpftel_obj_counts base;
	struct bpftel_manager *mgr;
	struct bpftel_sharedlibs *sl;
	struct bpftel_uprobes *up;
	struct bpftel_gpu *gpu;
	pid_t child;
	int child_in;
};

/* Start cuda_pattern on the stub; it dlopens it and waits on its stdin. */
static pid_t start_pattern(int *in)
{
	int fds[2];
	pid_t pid;

	/* Opened before the fork: the child of a threaded process calls only what is
	 * async-signal-safe until it execs (freopen could wait for ever on an allocator
	 * lock another thread held at the fork). */
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

	assert_true(null >= 0);
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(fds[0], STDIN_FILENO);
		if (dup2(null, STDOUT_FILENO) < 0)
			_exit(127);
		close(fds[1]);
		execl(pattern_bin, pattern_bin, stub_lib, "stub", (char *)NULL);
		_exit(127);
	}
	close(null);
	close(fds[0]);
	*in = fds[1];
	return pid;
}

/* The registry's rows for the gpu module on the stub: probe points attached, and the
 * links that hold them. */
static size_t gpu_rows(struct fixture *f, size_t *links)
{
	struct bpftel_uprobe_file_info *rows;
	size_t attached = 0;
	int n, i;

	*links = 0;
	n = bpftel_uprobes__files(f->up, &rows);
	for (i = 0; i < n; i++) {
		if (!strcmp(rows[i].module, BPFTEL_GPU_MODULE) && rows[i].lib == SHLIB_LIB_CUDART) {
			attached += rows[i].attached;
			*links += rows[i].links;
		}
	}
	free(rows);
	return attached;
}

/* Uprobes the registry holds for the gpu module on the stub, waiting for want. */
static size_t gpu_links(struct fixture *f, size_t want)
{
	size_t got = 0, links;
	int tries;

	for (tries = 0; tries < 3000; tries++) {
		got = gpu_rows(f, &links);
		if (got == want)
			break;
		usleep(10000);
	}
	return got;
}

/* The registry reads the stub through an fd that it closes just after it shows the
 * file's links: wait for that, so that the counts taken next hold. */
static void stub_closed(void)
{
	char real[PATH_MAX];
	int tries;

	assert_non_null(realpath(stub_lib, real));
	for (tries = 0; tries < 3000 && bpftel_test_holds_fd_of(real); tries++)
		usleep(10000);
	if (bpftel_test_holds_fd_of(real))
		fail_msg("the registry still holds %s after 30 s", real);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	bpftel_test_baseline(&f->base);
	f->mgr = bpftel_manager__new();
	if (bpftel_sharedlibs__new(f->mgr, NULL, &f->sl) || bpftel_uprobes__new(&f->up))
		return -1;
	bpftel_sharedlibs__set_listener(f->sl, bpftel_uprobes__listener, f->up);
	if (bpftel_gpu__new(f->mgr, f->up, &f->gpu))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	struct bpftel_obj_counts now;

	if (f->child > 0) {
		close(f->child_in);
		kill(f->child, SIGKILL);
		waitpid(f->child, NULL, 0);
	}
	bpftel_manager__free(f->mgr);
	bpftel_uprobes__free(f->up);
	bpftel_sharedlibs__free(f->sl);
	bpftel_gpu__free(f->gpu);
	bpftel_test_settle_objects(&f->base, &now);
	assert_objects_back(&f->base, &now);
	free(f);
	return 0;
}

static void test_restart_reattaches_and_leaks_nothing(void **state)
{
	struct fixture *f = *state;
	struct bpftel_module *m = bpftel_gpu__module(f->gpu);
	struct bpftel_obj_counts running, now;
	uint64_t released;
	size_t links;
	int round;

	/* Another subscriber keeps the watcher up while the module comes and goes. */
	assert_int_equal(bpftel_manager__subscribe(f->mgr, BPFTEL_SHAREDLIBS_MODULE, OTHER_SUB,
						   OTHER_SETS),
			 0);
	assert_int_equal(bpftel_module__run(m), 0);
	f->child = start_pattern(&f->child_in);
	assert_int_equal(gpu_links(f, NPROBES), NPROBES);
	stub_closed();
	bpftel_test_count_objects(&running);

	for (round = 0; round < ROUNDS; round++) {
		released = bpftel_links_released();
		gpu_rows(f, &links);
		assert_int_equal(bpftel_module__stop(m), 0);
		assert_int_equal(gpu_links(f, 0), 0);
		/* The GPU object has a stop gate: its links went to the reaper, which takes
		 * ~80 ms for each of the 16, rather than being destroyed in the stop. */
		if (round == 0 && (!links || bpftel_links_released() - released < links))
			fail_msg("stop destroyed the uprobe links in place: no stop gate found "
				 "(%zu links, %llu handed to the reaper)",
				 links, (unsigned long long)(bpftel_links_released() - released));
		assert_int_equal(bpftel_module__state(
					 bpftel_manager__find(f->mgr, BPFTEL_SHAREDLIBS_MODULE)),
				 BPFTEL_MOD_RUNNING);
		assert_int_equal(bpftel_module__run(m), 0);
		/* The file is known already: attached again at start, no new event needed. */
		if (gpu_links(f, NPROBES) != NPROBES)
			fail_msg("round %d: %zu of %d uprobes attached after restart", round,
				 gpu_links(f, NPROBES), NPROBES);
	}
	/* Each stop handed its 16 links to the reaper (~80 ms each in the kernel). */
	bpftel_links_settle();
	assert_int_equal(bpftel_links_pending(), 0);
	bpftel_test_settle_objects(&running, &now);
	assert_objects_back(&running, &now);
	assert_int_equal(bpftel_module__restarts(m), ROUNDS);
	assert_int_equal(bpftel_module__stop(m), 0);
	assert_int_equal(bpftel_manager__unsubscribe(f->mgr, BPFTEL_SHAREDLIBS_MODULE, OTHER_SUB),
			 0);
}

/* The registry's view of the stub for the gpu module (the one file it has). */
static struct bpftel_uprobe_file_load stub_load(struct fixture *f)
{
	struct bpftel_uprobe_file_load *rows, r = {};
	int n, i;

	n = bpftel_uprobes__file_loads(f->up, BPFTEL_GPU_MODULE, &rows);
	for (i = 0; i < n; i++) {
		if (rows[i].nprocs && rows[i].pids[0] == (__u32)f->child)
			r = rows[i];
	}
	free(rows);
	return r;
}

static __u64 launches(struct fixture *f)
{
	struct bpftel_gpu_proc *p;
	__u64 calls = 0;
	int n, i;

	n = bpftel_gpu__processes(f->gpu, &p);
	for (i = 0; i < n; i++) {
		if (p[i].pid == (__u32)f->child)
			calls = p[i].st.calls[GPU_FN_LAUNCH];
	}
	free(p);
	return calls;
}

/*
 * Shedding load: the gpu module's links on the stub go (to the reaper), stay off
 * through sweeps, and come back on unshed; calls made afterwards are counted exactly,
 * per file too (19 entries and 19 returns in the stub pattern).
 */
static void test_shed_and_unshed_one_file(void **state)
{
	struct fixture *f = *state;
	struct bpftel_module *m = bpftel_gpu__module(f->gpu);
	struct bpftel_obj_counts attached, now;
	struct bpftel_uprobe_file_load r;
	int tries;

	assert_int_equal(bpftel_manager__subscribe(f->mgr, BPFTEL_SHAREDLIBS_MODULE, OTHER_SUB,
						   OTHER_SETS),
			 0);
	assert_int_equal(bpftel_module__run(m), 0);
	f->child = start_pattern(&f->child_in);
	assert_int_equal(gpu_links(f, NPROBES), NPROBES);
	bpftel_test_count_objects(&attached);
	r = stub_load(f);
	assert_true(r.counted && r.attached && !r.shed);
	assert_true(r.calls[0] == 0 && r.calls[1] == 0);

	assert_int_equal(bpftel_uprobes__shed(f->up, BPFTEL_GPU_MODULE, &r), 0);
	assert_int_equal(gpu_links(f, 0), 0);
	assert_int_equal(bpftel_uprobes__sweep(f->up), 0);
	r = stub_load(f);
	assert_true(r.shed && !r.attached);
	bpftel_links_settle();
	bpftel_test_count_objects(&now);
	assert_true(now.links < attached.links);

	assert_int_equal(bpftel_uprobes__unshed(f->up, BPFTEL_GPU_MODULE, &r), 0);
	assert_int_equal(gpu_links(f, NPROBES), NPROBES);
	assert_int_equal(write(f->child_in, "go\n", 3), 3);
	for (tries = 0; tries < 3000 && (r = stub_load(f)).calls[1] < 19; tries++)
		usleep(10000);
	assert_int_equal(r.calls[0], 19);
	assert_int_equal(r.calls[1], 19);
	assert_false(r.shed);
	assert_int_equal(launches(f), 5);
	assert_int_equal(bpftel_uprobes__shed(f->up, "nosuch", &r), -ENOENT);
	assert_int_equal(bpftel_module__stop(m), 0);
	/* A shed decided on loads read before the stop, landing after it: refused, so
	 * that the next instance attaches the file (it stayed shed for good). */
	assert_int_equal(bpftel_uprobes__shed(f->up, BPFTEL_GPU_MODULE, &r), -ENOENT);
	assert_int_equal(bpftel_module__run(m), 0);
	assert_int_equal(gpu_links(f, NPROBES), NPROBES);
	r = stub_load(f);
	assert_true(r.attached && !r.shed);
	assert_int_equal(bpftel_module__stop(m), 0);
	assert_int_equal(bpftel_manager__unsubscribe(f->mgr, BPFTEL_SHAREDLIBS_MODULE, OTHER_SUB),
			 0);
}

/* A fake /proc/<pid>: its stat's field 22 (start time) and its status's Tgid. */
static void fake_proc(const char *dir, __u32 pid, unsigned long long start)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%u", dir, pid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%u/stat", dir, pid);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%u (fake) R 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 %llu 0 0\n", pid, start);
	fclose(f);
	snprintf(path, sizeof(path), "%s/%u/status", dir, pid);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "Name:\tfake\nUmask:\t0022\nState:\tR\nTgid:\t%u\n", pid);
	fclose(f);
}

/* The module run with dir (made) as its /proc, where pid started at 1000, its row in
 * gpu_procs seen alive by a sweep (its start recorded). Returns gpu_procs' fd. */
static int swept_once(struct fixture *f, char *dir, __u32 pid)
{
	static struct gpu_proc_stats zero;
	int fd;

	assert_non_null(mkdtemp(dir));
	fake_proc(dir, pid, 1000);
	bpftel_gpu__set_procfd(f->gpu, open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC));
	assert_int_equal(bpftel_module__run(bpftel_gpu__module(f->gpu)), 0);
	fd = bpftel_gpu__map_fd(f->gpu, "gpu_procs");
	assert_true(fd >= 0);
	assert_int_equal(bpf_map_update_elem(fd, &pid, &zero, BPF_NOEXIST), 0);
	assert_int_equal(bpftel_gpu__sweep(f->gpu), 0); /* alive: its start recorded */
	return fd;
}

/* The new process of pid makes its calls (its row in gpu_procs, fd): three sweeps keep
 * it; then the module stops and dir goes. */
static void kept_by_sweeps(struct fixture *f, int fd, __u32 pid, const char *dir)
{
	static struct gpu_proc_stats zero;
	char cmd[96];
	int i;

	assert_int_equal(bpf_map_update_elem(fd, &pid, &zero, BPF_NOEXIST), 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(bpftel_gpu__sweep(f->gpu), 0);
	assert_int_equal(bpf_map_lookup_elem(fd, &pid, &zero), 0);
	assert_int_equal(bpftel_module__stop(bpftel_gpu__module(f->gpu)), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* A pid reused by a new CUDA process (another start time): the old process's state is
 * dropped once, and the new one's is kept at every sweep after. */
static void test_sweep_pid_reused(void **state)
{
	struct fixture *f = *state;
	char dir[] = "/tmp/bpftel-proc-XXXXXX";
	__u32 pid = 5000001; /* above any pid_max (2^22): only the fake /proc has it */
	int fd;

	fd = swept_once(f, dir, pid);
	fake_proc(dir, pid, 2000); /* exited; the pid is another's */
	assert_int_equal(bpftel_gpu__sweep(f->gpu), 1);
	kept_by_sweeps(f, fd, pid, dir);
}

/* Now, in clock ticks since boot (a /proc start time), less one tick. */
static unsigned long long ticks_ago_one(void)
{
	struct timespec boot;
	long hz = sysconf(_SC_CLK_TCK);

	assert_true(hz > 0);
	assert_int_equal(clock_gettime(CLOCK_BOOTTIME, &boot), 0);
	return (unsigned long long)boot.tv_sec * hz + boot.tv_nsec / (1000000000 / hz) - 1;
}

/* A pid reused between two sweeps by a process that exec'd (the old row went at its
 * exec) and called CUDA since (a row born after it started): the sweep keeps that row,
 * its start recorded anew, and so do the sweeps after. A row older than the new
 * process (a fork that called CUDA without exec) is the old one's: dropped. */
static void test_sweep_pid_reused_row_reborn(void **state)
{
	struct fixture *f = *state;
	char dir[] = "/tmp/bpftel-proc-XXXXXX", cmd[96];
	__u32 pid = 5000003; /* above any pid_max (2^22): only the fake /proc has it */
	struct gpu_proc_stats st = {0};
	struct timespec boot;
	int fd, i;

	fd = swept_once(f, dir, pid);
	fake_proc(dir, pid, ticks_ago_one()); /* exited; the pid is another's, started now */
	assert_int_equal(bpf_map_delete_elem(fd, &pid), 0); /* its exec */
	assert_int_equal(clock_gettime(CLOCK_BOOTTIME, &boot), 0); /* its first call's */
	st.born_ns = (__u64)boot.tv_sec * 1000000000ull + boot.tv_nsec;
	assert_int_equal(bpf_map_update_elem(fd, &pid, &st, BPF_NOEXIST), 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(bpftel_gpu__sweep(f->gpu), 0);
	assert_int_equal(bpf_map_lookup_elem(fd, &pid, &st), 0);
	/* Its start was recorded: the pid's next process is seen as such. */
	fake_proc(dir, pid, ticks_ago_one() + 1000);
	st.born_ns = 1; /* a row older than that process */
	assert_int_equal(bpf_map_update_elem(fd, &pid, &st, BPF_EXIST), 0);
	assert_int_equal(bpftel_gpu__sweep(f->gpu), 1);
	assert_int_not_equal(bpf_map_lookup_elem(fd, &pid, &st), 0);
	assert_int_equal(bpftel_module__stop(bpftel_gpu__module(f->gpu)), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* A process seen by a sweep exits while the module is stopped, and another takes its
 * pid: once started again, the module's sweeps take the new process for itself (its
 * start time is recorded anew), not for the old one gone. */
static void test_sweep_restart_forgets_starts(void **state)
{
	struct fixture *f = *state;
	char dir[] = "/tmp/bpftel-proc-XXXXXX";
	__u32 pid = 5000002; /* above any pid_max (2^22): only the fake /proc has it */
	int fd;

	swept_once(f, dir, pid);
	assert_int_equal(bpftel_module__stop(bpftel_gpu__module(f->gpu)), 0);
	fake_proc(dir, pid, 2000); /* exited meanwhile; the pid is another's */
	assert_int_equal(bpftel_module__run(bpftel_gpu__module(f->gpu)), 0);
	fd = bpftel_gpu__map_fd(f->gpu, "gpu_procs");
	assert_true(fd >= 0);
	kept_by_sweeps(f, fd, pid, dir);
}

/* A process seen by a sweep exits during the module's restart, and another takes its
 * pid: the restart kept the old process's row (gpu_restart_keeps) and the start the
 * sweep knew it by, so the next sweep drops that row rather than take it for the new
 * process's. */
static void test_sweep_restart_keeps_starts(void **state)
{
	struct fixture *f = *state;
	char dir[] = "/tmp/bpftel-proc-XXXXXX";
	__u32 pid = 5000004; /* above any pid_max (2^22): only the fake /proc has it */
	struct gpu_proc_stats st;
	int fd, stop_err = -1;

	swept_once(f, dir, pid);
	fake_proc(dir, pid, 2000); /* exited meanwhile; the pid is another's */
	assert_int_equal(bpftel_module__restart(bpftel_gpu__module(f->gpu), &stop_err), 0);
	assert_int_equal(stop_err, 0);
	fd = bpftel_gpu__map_fd(f->gpu, "gpu_procs");
	assert_true(fd >= 0);
	assert_int_equal(bpf_map_lookup_elem(fd, &pid, &st), 0); /* kept */
	assert_int_equal(bpftel_gpu__sweep(f->gpu), 1);
	kept_by_sweeps(f, fd, pid, dir);
}

/* pid's stat in dir with its whole line (52 fields): start time start (field 22), and
 * the addresses of its program's layout (fields 26-28, 45-51) from layout on; layout 0:
 * as the kernel shows them to a reader that may not ptrace the process (1, 1, zeros). */
static void fake_proc_laid(const char *dir, __u32 pid, unsigned long long start,
			   unsigned long long layout)
{
	char path[128];
	FILE *f;
	int i;

	fake_proc(dir, pid, start);
	snprintf(path, sizeof(path), "%s/%u/stat", dir, pid);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%u (fake) R", pid);
	for (i = 4; i <= 52; i++) {
		unsigned long long v = 0;

		if (i == 22)
			v = start;
		else if (!layout && (i == 26 || i == 27))
			v = 1;
		else if (layout && ((i >= 26 && i <= 28) || (i >= 45 && i <= 51)))
			v = layout + i;
		fprintf(f, " %llu", v);
	}
	fprintf(f, "\n");
	fclose(f);
}

static __u64 boot_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (__u64)ts.tv_sec * 1000000000ull + (__u64)ts.tv_nsec;
}

/* What happens in the gap, run by an after_stop hook (the old instance stopped, the new
 * one not yet started), once: the pids exec (laid out anew as layout[i]); born, if
 * any, makes its row again, as if the old instance had seen an exec and the new
 * program called, at that moment. */
struct gap_execs {
	const char *dir;
	__u32 pid[4];
	unsigned long long layout[4];
	int n;
	__u32 born;
	int procs_fd; /* its own: the old object's fds close with it */
	bool armed;
	int failed; /* asserted after: a hook must not jump out of the manager */
};

static int exec_in_gap(const struct bpftel_hook_after_stop *h, void *ctx)
{
	struct gap_execs *x = ctx;
	struct gpu_proc_stats st = {};
	int i;

	(void)h;
	if (!x->armed)
		return 0;
	x->armed = false;
	for (i = 0; i < x->n; i++)
		fake_proc_laid(x->dir, x->pid[i], 1000, x->layout[i]);
	if (x->born) {
		st.born_ns = boot_now_ns(); /* after the stop's note */
		x->failed += !!bpf_map_update_elem(x->procs_fd, &x->born, &st, BPF_EXIST);
	}
	return 0;
}

/*
 * Processes exec in a restart's gap, when no program is on the exec tracepoint: those
 * whose row was made before the stop noted their layout lose their row and
 * allocations, as the exec tracepoint would have dropped them (gpu_exec_drop), once
 * the new instance is attached. Kept: a process that did not exec; one whose row was
 * made after its layout was read (the new program's: an exec the old instance saw);
 * one whose layout was hidden when noted.
 */
static void test_restart_gap_exec(void **state)
{
	struct fixture *f = *state;
	char dir[] = "/tmp/bpftel-proc-XXXXXX", cmd[96];
	__u32 pid = 5000005, pid2 = 5000010, still = 5000006, late = 5000007, hid = 5000011;
	static struct gap_execs x; /* the hook outlives the test: the module's teardown */
	struct gpu_proc_stats st = {};
	struct gpu_alloc a = {.size = 4096, .kind = GPU_MEM_DEVICE};
	struct gpu_alloc_key ka = {.tgid = pid, .ptr = 0x7000}, ks = {.tgid = still, .ptr = 0x7000};
	struct bpftel_module *m = bpftel_gpu__module(f->gpu);
	int fd, allocs, stop_err = -1;
	__u32 kept[] = {still, late, hid};
	size_t i;

	assert_int_equal(bpftel_module__add_after_stop(m, exec_in_gap, &x), 0);
	fd = swept_once(f, dir, pid);
	fake_proc_laid(dir, pid, 1000, 0x1000);
	fake_proc_laid(dir, pid2, 1000, 0x1800);
	fake_proc_laid(dir, still, 1000, 0x2000);
	fake_proc_laid(dir, late, 1000, 0x3000);
	fake_proc_laid(dir, hid, 1000, 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(bpf_map_update_elem(fd, &kept[i], &st, BPF_NOEXIST), 0);
	assert_int_equal(bpf_map_update_elem(fd, &pid2, &st, BPF_NOEXIST), 0);
	allocs = bpftel_gpu__map_fd(f->gpu, "gpu_allocs");
	assert_true(allocs >= 0);
	assert_int_equal(bpf_map_update_elem(allocs, &ka, &a, BPF_NOEXIST), 0);
	assert_int_equal(bpf_map_update_elem(allocs, &ks, &a, BPF_NOEXIST), 0);
	x = (struct gap_execs){.dir = dir, .pid = {pid, pid2, late, hid},
			       .layout = {0x9000, 0x9800, 0xa000, 0xb000}, .n = 4, .born = late,
			       .procs_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0), .armed = true};
	assert_true(x.procs_fd >= 0);

	assert_int_equal(bpftel_module__restart(m, &stop_err), 0);
	assert_int_equal(stop_err, 0);
	assert_false(x.armed); /* they exec'd in the gap */
	assert_int_equal(x.failed, 0);
	close(x.procs_fd);
	fd = bpftel_gpu__map_fd(f->gpu, "gpu_procs");
	allocs = bpftel_gpu__map_fd(f->gpu, "gpu_allocs");
	assert_true(fd >= 0 && allocs >= 0);
	assert_int_equal(bpf_map_lookup_elem(fd, &pid, &st), -ENOENT);
	assert_int_equal(bpf_map_lookup_elem(fd, &pid2, &st), -ENOENT);
	assert_int_equal(bpf_map_lookup_elem(allocs, &ka, &a), -ENOENT);
	for (i = 0; i < 3; i++)
		assert_int_equal(bpf_map_lookup_elem(fd, &kept[i], &st), 0);
	assert_int_equal(bpf_map_lookup_elem(allocs, &ks, &a), 0);
	assert_int_equal(bpftel_module__stop(m), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* A new program's first call once the restart's uprobes are attached (a before_start
 * hook registered after the module's: the uprobe registry's attaches first), once: on
 * in pid's row if there still is one (the old program's), else in a new row. */
struct first_call {
	int procs_fd; /* its own: the old object's fds close with it */
	__u32 pid;
	bool armed;
	int failed;
};

static int first_call_after_attach(const struct bpftel_hook_before_start *h, void *ctx)
{
	struct first_call *x = ctx;
	struct gpu_proc_stats st = {};

	(void)h;
	if (!x->armed)
		return 0;
	x->armed = false;
	if (!bpf_map_lookup_elem(x->procs_fd, &x->pid, &st)) {
		st.dev[0].launches += 7;
		x->failed += !!bpf_map_update_elem(x->procs_fd, &x->pid, &st, BPF_EXIST);
		return 0;
	}
	st.born_ns = boot_now_ns();
	st.dev[0].launches = 7;
	x->failed += !!bpf_map_update_elem(x->procs_fd, &x->pid, &st, BPF_NOEXIST);
	return 0;
}

/*
 * A process exec'd in the restart's gap, and its new program calls as soon as the new
 * instance's uprobes are attached: its old row went before they were, so its first
 * calls are in a row of its own and stay, not dropped with the old one.
 */
static void test_restart_gap_exec_first_call(void **state)
{
	struct fixture *f = *state;
	char dir[] = "/tmp/bpftel-proc-XXXXXX", cmd[96];
	__u32 pid = 5000012;
	static struct gap_execs x; /* the hooks outlive the test: the module's teardown */
	static struct first_call c;
	struct gpu_proc_stats st = {};
	struct bpftel_module *m = bpftel_gpu__module(f->gpu);
	int fd, stop_err = -1;

	assert_int_equal(bpftel_module__add_after_stop(m, exec_in_gap, &x), 0);
	assert_int_equal(bpftel_module__add_before_start(m, first_call_after_attach, &c), 0);
	fd = swept_once(f, dir, pid);
	fake_proc_laid(dir, pid, 1000, 0x1000);
	x = (struct gap_execs){.dir = dir, .pid = {pid}, .layout = {0x9000}, .n = 1,
			       .procs_fd = -1, .armed = true};
	c = (struct first_call){.procs_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0), .pid = pid,
				.armed = true};
	assert_true(c.procs_fd >= 0);

	assert_int_equal(bpftel_module__restart(m, &stop_err), 0);
	assert_int_equal(stop_err, 0);
	assert_false(x.armed);
	assert_false(c.armed);
	assert_int_equal(c.failed, 0);
	close(c.procs_fd);
	fd = bpftel_gpu__map_fd(f->gpu, "gpu_procs");
	assert_true(fd >= 0);
	assert_int_equal(bpf_map_lookup_elem(fd, &pid, &st), 0);
	assert_int_equal(st.dev[0].launches, 7);
	assert_int_equal(bpftel_module__stop(m), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

struct exec_seam {
	int procs_fd, kernels_fd;
	__u32 pid;
	struct gpu_launch_key key;
	bool reborn; /* the new program's first call too, not the exec alone */
	int runs, failed;
};

/* What gpu_exec_body does (the process row goes, then its kernel rows), and, if
 * reborn, the new program's first call: a new row, born later. Under the module's
 * locks: failures are counted, asserted after. */
static int exec_between_reads(void *arg)
{
	struct exec_seam *x = arg;
	struct gpu_proc_stats st = {.born_ns = 200};

	x->runs++;
	x->failed += !!bpf_map_delete_elem(x->procs_fd, &x->pid);
	x->failed += !!bpf_map_delete_elem(x->kernels_fd, &x->key);
	if (x->reborn)
		x->failed += !!bpf_map_update_elem(x->procs_fd, &x->pid, &st, BPF_NOEXIST);
	return 0;
}

static __u64 launches_of(const struct bpftel_gpu_proc *rows, int n, __u32 pid, __u64 *born)
{
	__u64 sum = 0;
	int i, d;

	for (i = 0; i < n; i++) {
		if (rows[i].pid != pid)
			continue;
		for (d = 0; d < GPU_DEV_SLOTS; d++)
			sum += rows[i].st.dev[d].launches;
		*born = rows[i].st.born_ns;
	}
	return sum;
}

/* A process exec's while a report reads the maps (after its row, before its kernels):
 * the report leaves it out, rather than give the old program's row without its
 * launches (its counters would go down) or with the new program's, whether the exec
 * is still under way or the new program has called already; the next report has the
 * new program, born again. */
static void test_report_exec_between_reads(void **state)
{
	struct fixture *f = *state;
	struct gpu_proc_stats st = {.born_ns = 100};
	struct gpu_kernel k = {.launches = 5, .threads = 5};
	struct exec_seam x = {.pid = 5000003}; /* above any pid_max (2^22): no process's */
	int round;
	struct bpftel_gpu_proc *rows;
	__u64 born = 0;
	int n;

	assert_int_equal(bpftel_module__run(bpftel_gpu__module(f->gpu)), 0);
	x.procs_fd = bpftel_gpu__map_fd(f->gpu, "gpu_procs");
	x.kernels_fd = bpftel_gpu__map_fd(f->gpu, "gpu_kernels");
	x.key = (struct gpu_launch_key){.tgid = x.pid, .api = GPU_KERNEL_RUNTIME,
					.fn = GPU_FN_LAUNCH, .dev = 0,
					.bucket = GPU_LAUNCH_NO_BUCKET, .func = 0x1000};
	for (round = 0; round < 2; round++) {
		x.reborn = round;
		st.born_ns = 100;
		bpf_map_delete_elem(x.procs_fd, &x.pid);
		assert_int_equal(bpf_map_update_elem(x.procs_fd, &x.pid, &st, BPF_NOEXIST), 0);
		assert_int_equal(bpf_map_update_elem(x.kernels_fd, &x.key, &k, BPF_NOEXIST), 0);
		born = 0;
		n = bpftel_gpu__processes(f->gpu, &rows);
		assert_int_equal(launches_of(rows, n, x.pid, &born), 5);
		assert_int_equal(born, 100);
		free(rows);

		bpftel_gpu__set_report_seam(f->gpu, exec_between_reads, &x);
		n = bpftel_gpu__processes(f->gpu, &rows);
		bpftel_gpu__set_report_seam(f->gpu, NULL, NULL);
		assert_int_equal(x.runs, round + 1);
		assert_int_equal(x.failed, 0);
		born = 0;
		assert_int_equal(launches_of(rows, n, x.pid, &born), 0);
		assert_int_equal(born, 0); /* not listed */
		free(rows);

		n = bpftel_gpu__processes(f->gpu, &rows);
		assert_int_equal(launches_of(rows, n, x.pid, &born), 0);
		assert_int_equal(born, x.reborn ? 200 : 0); /* the new program, once it called */
		free(rows);
	}
	assert_int_equal(bpftel_module__stop(bpftel_gpu__module(f->gpu)), 0);
}

/* Keys of tgid in the map named name. */
static int keys_of(struct bpftel_gpu *g, const char *name, __u32 tgid)
{
	int fd = bpftel_gpu__map_fd(g, name), n = 0;
	char key[16], next[16], *prev = NULL;
	__u32 t;

	assert_true(fd >= 0);
	while (!bpf_map_get_next_key(fd, prev, next)) {
		memcpy(&t, next, sizeof(t));
		n += t == tgid;
		memcpy(key, next, sizeof(key));
		prev = key;
	}
	return n;
}

static void put(struct bpftel_gpu *g, const char *name, const void *key)
{
	static char zero[512]; /* a value of any of the maps */

	assert_int_equal(bpf_map_update_elem(bpftel_gpu__map_fd(g, name), key, zero, BPF_NOEXIST), 0);
}

/* Several processes gone at once: one sweep drops all of them and every key they had
 * in the module's maps (one walk of each map for all), and nothing of a live one. */
static void test_sweep_many_dead(void **state)
{
	static const char *maps[] = {"gpu_allocs", "gpu_errors", "gpu_kernels"};
	static const __u32 pids[] = {5000001, 5000002, 5000004, 5000010}; /* the last lives */
	char dir[] = "/tmp/bpftel-proc-XXXXXX", cmd[96];
	struct fixture *f = *state;
	struct gpu_kernel_key kk;
	struct gpu_alloc_key ak;
	struct gpu_err_key ek;
	size_t i, m;
	int k;

	assert_non_null(mkdtemp(dir));
	fake_proc(dir, pids[3], 1000); /* the others have no /proc entry: gone */
	bpftel_gpu__set_procfd(f->gpu, open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC));
	assert_int_equal(bpftel_module__run(bpftel_gpu__module(f->gpu)), 0);
	for (i = 0; i < 4; i++) {
		put(f->gpu, "gpu_procs", &pids[i]);
		for (k = 0; k < 3; k++) {
			ak = (struct gpu_alloc_key){.tgid = pids[i], .ptr = 0x1000 + (__u64)k};
			ek = (struct gpu_err_key){.tgid = pids[i], .func = (__u16)k};
			kk = (struct gpu_kernel_key){.tgid = pids[i], .func = 0x2000 + (__u64)k};
			put(f->gpu, "gpu_allocs", &ak);
			put(f->gpu, "gpu_errors", &ek);
			put(f->gpu, "gpu_kernels", &kk);
		}
	}
	assert_int_equal(bpftel_gpu__sweep(f->gpu), 3);
	for (m = 0; m < sizeof(maps) / sizeof(maps[0]); m++) {
		for (i = 0; i < 3; i++)
			assert_int_equal(keys_of(f->gpu, maps[m], pids[i]), 0);
		assert_int_equal(keys_of(f->gpu, maps[m], pids[3]), 3);
	}
	assert_int_equal(keys_of(f->gpu, "gpu_procs", pids[3]), 1);
	assert_int_equal(keys_of(f->gpu, "gpu_procs", pids[1]), 0);
	assert_int_equal(bpftel_gpu__sweep(f->gpu), 0);
	assert_int_equal(bpftel_module__stop(bpftel_gpu__module(f->gpu)), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/*
 * A report lists each process's most launched kernels up to an equal share of its 8192
 * (1024 at most): nine processes with 1000 kernels each, each launched more often than
 * any of a tenth process's two, leave room for those two, which keep their names (the
 * list was the 8192 most launched of all: the tenth's were left out, unnamed). Each
 * process's launches are whole whatever is listed.
 */
/* Above any pid_max (2^22): no process of the host's. */
#define FAIR_PID0 5100001u

/* Process pid's driver kernel func, launched launches times, its row in gpu_kernels;
 * and, with a name, that name as cuModuleGetFunction gave it (gpu_knames). */
static void put_driver_kernel(struct fixture *f, __u32 pid, __u64 func, __u64 launches,
			      const char *name)
{
	struct gpu_launch_key lk = {.tgid = pid, .api = GPU_KERNEL_DRIVER, .fn = GPU_FN_CU_LAUNCH,
				    .bucket = GPU_LAUNCH_NO_BUCKET, .func = func};
	struct gpu_kernel_key nk = {.tgid = pid, .api = GPU_KERNEL_DRIVER, .func = func};
	struct gpu_kernel k = {.launches = launches};
	struct gpu_kname kn = {.tgid = pid, .named = func};

	assert_int_equal(bpf_map_update_elem(bpftel_gpu__map_fd(f->gpu, "gpu_kernels"), &lk, &k,
					     BPF_NOEXIST),
			 0);
	if (!name)
		return;
	snprintf(kn.name, sizeof(kn.name), "%s", name);
	assert_int_equal(bpf_map_update_elem(bpftel_gpu__map_fd(f->gpu, "gpu_knames"), &nk, &kn,
					     BPF_NOEXIST),
			 0);
}

static void test_kernels_listed_fair_share(void **state)
{
	struct fixture *f = *state;
	struct bpftel_gpu_proc *rows;
	char name[16];
	int n, i, p;
	__u32 pid;

	assert_int_equal(bpftel_module__run(bpftel_gpu__module(f->gpu)), 0);
	for (p = 0; p < 10; p++) {
		pid = FAIR_PID0 + (__u32)p;
		put(f->gpu, "gpu_procs", &pid);
		for (i = 0; i < (p < 9 ? 1000 : 2); i++) {
			snprintf(name, sizeof(name), "victim%d", i);
			put_driver_kernel(f, pid, 0x5000 + (__u64)i, p < 9 ? 100 : 1,
					  p < 9 ? NULL : name);
		}
	}
	n = bpftel_gpu__processes(f->gpu, &rows);
	for (i = 0, p = 0; i < n; i++)
		p += rows[i].pid >= FAIR_PID0 && rows[i].pid < FAIR_PID0 + 10;
	assert_int_equal(p, 10);
	for (i = 0; i < n; i++) {
		if (rows[i].pid < FAIR_PID0 || rows[i].pid >= FAIR_PID0 + 10)
			continue; /* a real CUDA process of the host */
		if (rows[i].pid != FAIR_PID0 + 9) {
			assert_int_equal(bpftel_gpu_launches(&rows[i].st), 1000 * 100);
			continue;
		}
		assert_int_equal(bpftel_gpu_launches(&rows[i].st), 2);
		assert_int_equal(rows[i].nkernels, 2);
		assert_string_equal(rows[i].kernels[0].name, "victim0");
		assert_string_equal(rows[i].kernels[1].name, "victim1");
	}
	free(rows);
	assert_int_equal(bpftel_module__stop(bpftel_gpu__module(f->gpu)), 0);
}

/*
 * Over 1024 processes with kernels, each kept to its top 8, and more kernels than the
 * list holds (8192): 1100 processes with 8 busy kernels each, and one whose two kernels
 * were launched once. The list keeps each process's most launched in rounds: the quiet
 * one's two are listed, named (a sort of all by launches cut them).
 */
static void test_kernels_listed_in_rounds(void **state)
{
	struct fixture *f = *state;
	struct bpftel_gpu_proc *rows;
	int n, i, p, found = 0;
	const int procs = 1101;
	char name[16];
	__u32 pid;

	assert_int_equal(bpftel_module__run(bpftel_gpu__module(f->gpu)), 0);
	for (p = 0; p < procs; p++) {
		pid = FAIR_PID0 + 100 + (__u32)p;
		put(f->gpu, "gpu_procs", &pid);
		for (i = 0; i < (p < procs - 1 ? 8 : 2); i++) {
			snprintf(name, sizeof(name), "quiet%d", i);
			put_driver_kernel(f, pid, 0x9000 + (__u64)i, p < procs - 1 ? 100 : 1,
					  p < procs - 1 ? NULL : name);
		}
	}
	n = bpftel_gpu__processes(f->gpu, &rows);
	for (i = 0; i < n; i++) {
		if (rows[i].pid != FAIR_PID0 + 100 + (__u32)procs - 1)
			continue;
		found++;
		assert_int_equal(bpftel_gpu_launches(&rows[i].st), 2);
		assert_int_equal(rows[i].nkernels, 2);
		assert_string_equal(rows[i].kernels[0].name, "quiet0");
		assert_string_equal(rows[i].kernels[1].name, "quiet1");
	}
	assert_int_equal(found, 1);
	free(rows);
	assert_int_equal(bpftel_module__stop(bpftel_gpu__module(f->gpu)), 0);
}

/* The kernel of one process's only row, as a report names it. */
static void report_kernel_name(struct fixture *f, __u32 pid, char *name, size_t len)
{
	struct bpftel_gpu_proc *rows;
	int n, i, found = 0;

	n = bpftel_gpu__processes(f->gpu, &rows);
	for (i = 0; i < n; i++) {
		if (rows[i].pid != pid)
			continue;
		assert_int_equal(rows[i].nkernels, 1);
		assert_true(strlen(rows[i].kernels[0].name) < len);
		strcpy(name, rows[i].kernels[0].name);
		found++;
	}
	free(rows);
	assert_int_equal(found, 1);
}

/* A driver kernel's name entry half written (made empty, its name being read; the
 * program writes its owner last: gpu_kernel_named): not taken, the kernel unnamed in
 * that report, and named by the next once whole. */
static void test_driver_name_half_written(void **state)
{
	struct fixture *f = *state;
	struct gpu_kernel k = {.launches = 3};
	__u32 pid = FAIR_PID0 + 20;
	struct gpu_launch_key lk = {.tgid = pid, .api = GPU_KERNEL_DRIVER, .fn = GPU_FN_CU_LAUNCH,
				    .bucket = GPU_LAUNCH_NO_BUCKET, .func = 0x7000};
	struct gpu_kernel_key nk = {.tgid = pid, .api = GPU_KERNEL_DRIVER, .func = lk.func};
	struct gpu_kname kn = {};
	char name[BPFTEL_GPU_KERNEL_NAME];
	int nfd;

	assert_int_equal(bpftel_module__run(bpftel_gpu__module(f->gpu)), 0);
	nfd = bpftel_gpu__map_fd(f->gpu, "gpu_knames");
	put(f->gpu, "gpu_procs", &pid);
	assert_int_equal(bpf_map_update_elem(bpftel_gpu__map_fd(f->gpu, "gpu_kernels"), &lk, &k,
					     BPF_NOEXIST),
			 0);
	snprintf(kn.name, sizeof(kn.name), "half_wri");
	assert_int_equal(bpf_map_update_elem(nfd, &nk, &kn, BPF_NOEXIST), 0);
	report_kernel_name(f, pid, name, sizeof(name));
	assert_null(strstr(name, "half_wri"));
	snprintf(kn.name, sizeof(kn.name), "whole_name");
	kn.tgid = pid;
	kn.named = lk.func;
	assert_int_equal(bpf_map_update_elem(nfd, &nk, &kn, BPF_EXIST), 0);
	report_kernel_name(f, pid, name, sizeof(name));
	assert_string_equal(name, "whole_name");
	assert_int_equal(bpftel_module__stop(bpftel_gpu__module(f->gpu)), 0);
}

/* Above any pid_max: no process of the host's. */
#define LAST_PID0 5200001u

/* Process pid's row in gpu_procs, of owner, with its cudaMalloc calls (made or set). */
static void put_mallocs(struct fixture *f, __u32 pid, __u32 owner, __u64 calls)
{
	struct gpu_proc_stats st = {.owner = owner};

	st.calls[GPU_FN_MALLOC] = calls;
	assert_int_equal(bpf_map_update_elem(bpftel_gpu__map_fd(f->gpu, "gpu_procs"), &pid, &st,
					     BPF_ANY),
			 0);
}

/* A report as /metrics folds it: the "other" row's cudaMalloc calls (0: no such row),
 * and whether pid has series of its own. */
static __u64 other_mallocs(struct fixture *f, __u32 pid, bool *own)
{
	struct bpftel_gpu_proc *rows, *grown;
	size_t m, i;
	__u64 calls;
	bool other;
	int n;

	n = bpftel_gpu__processes(f->gpu, &rows);
	assert_true(n >= 0);
	grown = realloc(rows, ((size_t)n + 1) * sizeof(*rows));
	assert_non_null(grown);
	rows = grown;
	m = bpftel_gpu_series__fold(bpftel_gpu__series(f->gpu), rows, (size_t)n, &other);
	for (i = 0, *own = false; i < m; i++)
		*own |= rows[i].pid == pid;
	calls = other ? rows[m].st.calls[GPU_FN_MALLOC] : 0;
	free(rows);
	return calls;
}

/*
 * A process's counts after the last scrape are not lost when it exits: the sweep reads
 * the processes once more before it forgets the dead. Two of one user's processes have
 * series (its share of the budget at 1 %: 2), the third is folded, counts 5 by a scrape
 * and 9 by its exit: "other" says 9, not 5. A root process that lived between two
 * scrapes (its 7 calls never scraped) gets no series no one would see: in "other" too.
 */
static void test_sweep_reads_the_dead_last(void **state)
{
	char dir[] = "/tmp/bpftel-proc-XXXXXX", cmd[160];
	struct fixture *f = *state;
	__u32 i, pid;
	bool own;

	assert_non_null(mkdtemp(dir));
	for (i = 0; i < 3; i++)
		fake_proc(dir, LAST_PID0 + i, 1000);
	bpftel_gpu__set_procfd(f->gpu, open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC));
	bpftel_gpu__configure(f->gpu, false, 1);
	assert_int_equal(bpftel_module__run(bpftel_gpu__module(f->gpu)), 0);
	for (i = 0; i < 3; i++)
		put_mallocs(f, LAST_PID0 + i, 1000, 1 + 2 * i);
	assert_int_equal(other_mallocs(f, LAST_PID0 + 2, &own), 5);
	assert_false(own);
	assert_int_equal(bpftel_gpu__sweep(f->gpu), 0);

	put_mallocs(f, LAST_PID0 + 2, 1000, 9);
	put_mallocs(f, LAST_PID0 + 3, 0, 7); /* no /proc entry: gone at the next sweep */
	snprintf(cmd, sizeof(cmd), "rm -rf %s/%u", dir, LAST_PID0 + 2);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(bpftel_gpu__sweep(f->gpu), 2);
	assert_int_equal(other_mallocs(f, LAST_PID0 + 3, &own), 9 + 7);
	assert_false(own);
	for (pid = LAST_PID0; pid < LAST_PID0 + 2; pid++) { /* the live keep theirs */
		assert_int_equal(other_mallocs(f, pid, &own), 9 + 7);
		assert_true(own);
	}
	assert_int_equal(bpftel_module__stop(bpftel_gpu__module(f->gpu)), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

static int fail_read(void *arg)
{
	(void)arg;
	return -EAGAIN;
}

/*
 * The sweep's last read of the dead fails (the maps changed under it, as execs in a
 * loop can keep doing): the dead are kept for the next sweeps, a few, then forgotten
 * all the same, counted (exits_unread), so that failing reads cannot keep every dead
 * process's rows in the tables. The next to die get their tries too.
 */
static void test_sweep_last_read_fails(void **state)
{
	char dir[] = "/tmp/bpftel-proc-XXXXXX", cmd[96];
	struct fixture *f = *state;
	__u32 pid = LAST_PID0 + 10;
	int i;

	assert_non_null(mkdtemp(dir)); /* pid has no entry: gone */
	bpftel_gpu__set_procfd(f->gpu, open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC));
	assert_int_equal(bpftel_module__run(bpftel_gpu__module(f->gpu)), 0);
	put_mallocs(f, pid, 1000, 3);
	bpftel_gpu__set_report_seam(f->gpu, fail_read, NULL);
	for (i = 1; i < 3; i++) {
		assert_int_equal(bpftel_gpu__sweep(f->gpu), 0);
		assert_int_equal(keys_of(f->gpu, "gpu_procs", pid), 1);
	}
	assert_int_equal(bpftel_gpu__exits_unread(f->gpu), 0);
	assert_int_equal(bpftel_gpu__sweep(f->gpu), 1);
	assert_int_equal(keys_of(f->gpu, "gpu_procs", pid), 0);
	assert_int_equal(bpftel_gpu__exits_unread(f->gpu), 1);
	put_mallocs(f, pid + 1, 1000, 3);
	for (i = 1; i < 3; i++) {
		assert_int_equal(bpftel_gpu__sweep(f->gpu), 0);
		assert_int_equal(keys_of(f->gpu, "gpu_procs", pid + 1), 1);
	}
	assert_int_equal(bpftel_gpu__sweep(f->gpu), 1);
	assert_int_equal(bpftel_gpu__exits_unread(f->gpu), 2);
	bpftel_gpu__set_report_seam(f->gpu, NULL, NULL);
	assert_int_equal(bpftel_module__stop(bpftel_gpu__module(f->gpu)), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* A kernel's host function: this binary's own, which a report names by its symbol. */
static __attribute__((noinline, used)) void bpftel_test_sweep_kernel(void)
{
	__asm__ volatile("");
}

/* The key in gpu_kernels of self's launches of the kernel whose host function is
 * bpftel_test_sweep_kernel, this binary's symbol. */
static struct gpu_launch_key sweep_kernel_key(__u32 self)
{
	return (struct gpu_launch_key){.tgid = self,
				       .api = GPU_KERNEL_RUNTIME,
				       .fn = GPU_FN_LAUNCH,
				       .bucket = GPU_LAUNCH_NO_BUCKET,
				       .func = (__u64)(uintptr_t)bpftel_test_sweep_kernel};
}

/* The module run with dir (made) as its /proc, where self started at 1000. */
static void run_with_self(struct fixture *f, char *dir, __u32 self)
{
	assert_non_null(mkdtemp(dir));
	fake_proc(dir, self, 1000);
	bpftel_gpu__set_procfd(f->gpu, open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC));
	assert_int_equal(bpftel_module__run(bpftel_gpu__module(f->gpu)), 0);
}

/*
 * A kernel first read by the sweep's last read of the dead, which names nothing (it
 * parses no file under the report lock), is named by the next report with all its
 * launches in its series: none kept in kernel="other" for good, as they were when that
 * read made its handle and its launches then the series' base (seen in CI: a process's
 * first launches under kernel="other" when a sweep ran before the first scrape).
 */
static void test_sweep_read_names_no_kernel(void **state)
{
	char dir[] = "/tmp/bpftel-proc-XXXXXX", cmd[96];
	struct fixture *f = *state;
	__u32 self = (__u32)getpid();
	struct gpu_launch_key lk = sweep_kernel_key(self);
	struct gpu_proc_stats st = {};
	struct gpu_kernel k = {};
	struct bpftel_gpu_proc *rows;
	int n, i, round, found;

	run_with_self(f, dir, self); /* LAST_PID0 + 20 has no entry: gone */
	put_mallocs(f, LAST_PID0 + 20, 0, 1);
	for (round = 1; round <= 2; round++) {
		k.launches = 3 * (__u64)round; /* the process's row has those with no room */
		assert_int_equal(bpf_map_update_elem(bpftel_gpu__map_fd(f->gpu, "gpu_procs"),
						     &self, &st, BPF_ANY),
				 0);
		assert_int_equal(bpf_map_update_elem(bpftel_gpu__map_fd(f->gpu, "gpu_kernels"),
						     &lk, &k, BPF_ANY),
				 0);
		if (round == 1) /* its first read: the sweep's, of the dead */
			assert_int_equal(bpftel_gpu__sweep(f->gpu), 1);
		n = bpftel_gpu__processes(f->gpu, &rows);
		for (i = 0, found = 0; i < n; i++) {
			if (rows[i].pid != self)
				continue;
			found++;
			assert_int_equal(rows[i].nkseries, 1);
			assert_string_equal(rows[i].kseries[0].name, "bpftel_test_sweep_kernel");
			assert_int_equal(rows[i].kseries[0].launches, 3 * round);
			assert_int_equal(rows[i].kseries_other, 0);
		}
		free(rows);
		assert_int_equal(found, 1);
	}
	assert_int_equal(bpftel_module__stop(bpftel_gpu__module(f->gpu)), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* The launches of self's kernel series named "bpftel_test_sweep_kernel" in a report
 * (-1: no such series). */
static long long sweep_kernel_launches(struct fixture *f, __u32 self)
{
	struct bpftel_gpu_proc *rows;
	long long got = -1;
	int n, i;
	size_t k;

	n = bpftel_gpu__processes(f->gpu, &rows);
	for (i = 0; i < n; i++)
		for (k = 0; rows[i].pid == self && k < rows[i].nkseries; k++)
			if (!strcmp(rows[i].kseries[k].name, "bpftel_test_sweep_kernel"))
				got = (long long)rows[i].kseries[k].launches;
	free(rows);
	return got;
}

/*
 * A process execs, and the sweep's read of a dead process comes between the exec and
 * its new program's first call: the process is in no row then. The new program's
 * kernel series begin again at the next report, not held at the old program's counts
 * (its launches would not show until they passed the old ones).
 */
static void test_sweep_read_between_exec_and_call(void **state)
{
	char dir[] = "/tmp/bpftel-proc-XXXXXX", cmd[96];
	struct fixture *f = *state;
	__u32 self = (__u32)getpid();
	struct gpu_launch_key lk = sweep_kernel_key(self);
	struct gpu_proc_stats st = {.born_ns = 100};
	struct gpu_kernel k = {.launches = 5};
	int procs, kernels;

	run_with_self(f, dir, self); /* LAST_PID0 + 21 has no entry: gone */
	procs = bpftel_gpu__map_fd(f->gpu, "gpu_procs");
	kernels = bpftel_gpu__map_fd(f->gpu, "gpu_kernels");
	assert_int_equal(bpf_map_update_elem(procs, &self, &st, BPF_NOEXIST), 0);
	assert_int_equal(bpf_map_update_elem(kernels, &lk, &k, BPF_NOEXIST), 0);
	assert_int_equal(sweep_kernel_launches(f, self), 5);
	/* The exec (gpu_exec_body), then the sweep's read of another process, dead. */
	assert_int_equal(bpf_map_delete_elem(procs, &self), 0);
	assert_int_equal(bpf_map_delete_elem(kernels, &lk), 0);
	put_mallocs(f, LAST_PID0 + 21, 0, 1);
	assert_int_equal(bpftel_gpu__sweep(f->gpu), 1);
	/* The new program's first calls. */
	st.born_ns = 200;
	k.launches = 2;
	assert_int_equal(bpf_map_update_elem(procs, &self, &st, BPF_NOEXIST), 0);
	assert_int_equal(bpf_map_update_elem(kernels, &lk, &k, BPF_NOEXIST), 0);
	assert_int_equal(sweep_kernel_launches(f, self), 2);
	assert_int_equal(bpftel_module__stop(bpftel_gpu__module(f->gpu)), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_restart_reattaches_and_leaks_nothing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_shed_and_unshed_one_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sweep_pid_reused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sweep_pid_reused_row_reborn, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sweep_restart_forgets_starts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sweep_restart_keeps_starts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restart_gap_exec, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restart_gap_exec_first_call, setup, teardown),
		cmocka_unit_test_setup_teardown(test_report_exec_between_reads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sweep_many_dead, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sweep_reads_the_dead_last, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sweep_last_read_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sweep_read_names_no_kernel, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sweep_read_between_exec_and_call, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kernels_listed_fair_share, setup, teardown),
		cmocka_unit_test_setup_teardown(test_driver_name_half_written, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kernels_listed_in_rounds, setup, teardown),
	};

	if (argc != 3) {
		fprintf(stderr, "usage: test_bpf_gpu_module CUDA_PATTERN STUB_LIBCUDART\n");
		return 2;
	}
	pattern_bin = argv[1];
	stub_lib = argv[2];
	bpftel_test_require_bpf();
	return cmocka_run_group_tests_name("gpu_module", tests, NULL, NULL);
}
