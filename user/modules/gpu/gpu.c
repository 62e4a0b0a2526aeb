// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "gpu.h"
#include "bpf/fair_share_defs.h"
#include "gpu.skel.h"
#include "gpu_gap.h"
#include "gpu_kernels.h"
#include "gpu_series.h"
#include "gpu_shares.h"
#include "user/common/ctl.h"
#include "user/common/fd.h"
#include "user/common/log.h"
#include "user/common/proc.h"
#include "user/manager/manager.h"
#include "user/manager/map_batch.h"
#include "user/sharedlibs/sharedlibs.h"
#include "user/sharedlibs/uprobes.h"

/* A process's row of gpu_procs and when it was made (its born_ns). */
struct pid_born {
	__u32 pid;
	__u64 born;
};

/* A process of gpu_procs and its start time when the sweep first saw it (0: unknown). */
struct proc_start {
	__u32 pid;
	__u64 start;
};

struct bpftel_gpu {
	struct bpftel_module_ops ops;
	struct bpftel_module *module;
	pthread_mutex_t lock;	/* guards skel, loaded, launch_shared_mem, opens, maps_gen */
	struct gpu *skel;	/* while the module is open */
	/* Its maps are read only once loaded: the load writes their fds (libbpf, without
	 * our lock), while housekeeping and reports run. */
	bool loaded;
	bool launch_shared_mem; /* config: taken at the module's next open */
	__u64 opens;		/* of the BPF object: its fds are new each time */
	/* What its maps hold: changed by a load of new ones, not of those a restart kept
	 * (gpu_restart_keeps). */
	__u64 maps_gen;
	/* Users' shares (gpu_shares.h), under lock: the configuration's percent, applied at
	 * once; the uid ranges the programs have; who held the most at the last recount;
	 * the refusals of objects closed; when the next recount and look at the ranges are
	 * due. */
	unsigned int user_share_percent;
	struct fair_share_uid_ranges subuid;
	struct fair_share_holders share_holders[GPU_SHARE__COUNT];
	struct fair_share_refusers share_refusers[GPU_SHARE__COUNT];
	__u64 share_refused_retired[GPU_SHARE__COUNT];
	__u32 share_entries[GPU_SHARE__COUNT]; /* the tables' sizes, as last opened */
	__u64 shares_due_ns;
	bool shares_warned; /* a recount failed, and the log said so */
	bool threads_dropped; /* the sweep deleted threads' entries: recount (atomic) */
	/* Sweeps in a row whose last read of the dead failed (report_last), and processes
	 * forgotten without it: their counts since the last report lost (atomic). */
	unsigned int last_reads_failed;
	__u64 exits_unread;
	unsigned int shares_full_said; /* by table: an owner held its whole share, said */
	/*
	 * What reports remember from one to the next (counters must not go down: a
	 * series of /metrics is computed from the maps and what the report before saw),
	 * under report_lock: maps read and state updated in the same order. Taken
	 * before lock. Names are parsed under neither (bpftel_gpu__processes()).
	 */
	pthread_mutex_t report_lock;
	struct bpftel_gpu_kernels *kernels;
	struct bpftel_gpu_errors *errors;
	struct bpftel_gpu_series *series; /* its own lock: /metrics' processes */
	__u64 state_gen_maps; /* the maps the state is of (maps_gen) */
	__u64 state_gen;   /* changed by each update of the state (a report, a sweep) */
	bool naming;	   /* a report is parsing files for kernel names */
	struct pid_born *borns; /* each process's row as last reported: when it was made */
	size_t nborns;
	/* The sweep's: /proc, and what it knows of the processes of gpu_procs (by pid),
	 * under sweep_lock, taken before the others. */
	pthread_mutex_t sweep_lock;
	int procfd;			 /* swapped under both sweep_lock and procfd_lock */
	pthread_mutex_t procfd_lock; /* enough to read procfd (the restart's gap) */
	struct proc_start *starts;
	size_t nstarts;
	__u64 starts_maps; /* the maps starts was recorded against (maps_gen) */
	int (*seam)(void *); /* tests: bpftel_gpu__set_report_seam */
	void *seam_arg;
	/* A restart's gap (gpu_gap.h): noted by its stop, checked by its start, both on
	 * the lifecycle thread (the module's lock held), which alone touches it. */
	struct gpu_gap gap;
};

static void gpu_housekeeping(struct bpftel_module *m);

/*
 * What a restart keeps (bpftel_module__restart), all of it or none: every table of
 * state and the users' counts of them, which agree. The processes' rows, their
 * allocations (outstanding memory and its age go on; a free after the restart finds
 * its allocation), kernel rows and error kinds, the contexts' devices, the kernels'
 * names (which a program gives once, at its start), the threads' state (their device)
 * and calls in flight: a call whose entry the old programs saw has its return unseen,
 * as for a probe detached mid-call (a free's record goes back to its allocation at the
 * thread's next free, outstanding again though the free may have worked). Not the
 * refusals (since the module started) nor the uprobe hits (since attached). A process
 * that execs in the restart's gap is found by its print (gpu_gap.h) and its state
 * dropped before the new instance attaches, as the exec tracepoint would have.
 */
static const char *const gpu_restart_keeps[] = {
	"gpu_procs",   "gpu_allocs", "gpu_errors", "gpu_inflight", "gpu_threads",
	"gpu_thread_slots", "gpu_ctxs", "gpu_kernels", "gpu_knames", "gpu_khosts",
	"fair_share",  "fair_share_adj", NULL};

const char *const bpftel_gpu_age_names[BPFTEL_GPU_AGE_BUCKETS] = {"lt_10s", "lt_1m", "lt_10m",
								  "lt_1h", "ge_1h"};
static const __u64 age_limits_s[BPFTEL_GPU_AGE_BUCKETS - 1] = {10, 60, 600, 3600};

/* The uprobes, attached by the registry to every libcudart and libcuda file a process
 * uses: one entry and one return program, the function in each probe point's cookie.
 * libcuda's symbols carry no version (the toolkit's stubs/libcuda.so has none). */
#define ENTER_RET(lib, sym, fn)                            \
	{lib, "gpu_uprobe", sym, false, fn},               \
	{                                                  \
		lib, "gpu_uretprobe", sym, true, fn        \
	}
#define RT(sym, fn) ENTER_RET(SHLIB_LIB_CUDART, sym, fn)
/* A function some versions lack: absent, no probe and no failure (bpftel libs counts
 * it among skipped_optional). */
#define OPT(lib_, sym, fn)                                                                  \
	{.lib = lib_, .prog = "gpu_uprobe", .symbol = sym, .cookie = fn, .optional = true},  \
	{                                                                                   \
		.lib = lib_, .prog = "gpu_uretprobe", .symbol = sym, .retprobe = true,       \
		.cookie = fn, .optional = true                                               \
	}
#define OPT_RT(sym, fn) OPT(SHLIB_LIB_CUDART, sym, fn)
#define OPT_CU(sym, fn) OPT(SHLIB_LIB_CUDA, sym, fn)
#define CU(sym, fn) ENTER_RET(SHLIB_LIB_CUDA, sym, fn)

static const struct bpftel_uprobe_spec uprobe_specs[] = {
	RT("cudaLaunchKernel", GPU_FN_LAUNCH),
	RT("cudaMalloc", GPU_FN_MALLOC),
	RT("cudaFree", GPU_FN_FREE),
	RT("cudaMemcpy", GPU_FN_MEMCPY),
	RT("cudaMemcpyAsync", GPU_FN_MEMCPY_ASYNC),
	RT("cudaStreamSynchronize", GPU_FN_STREAM_SYNC),
	RT("cudaDeviceSynchronize", GPU_FN_DEVICE_SYNC),
	RT("cudaSetDevice", GPU_FN_SET_DEVICE),
	RT("cudaMallocAsync", GPU_FN_MALLOC_ASYNC),
	RT("cudaFreeAsync", GPU_FN_FREE_ASYNC),
	RT("cudaMallocManaged", GPU_FN_MALLOC_MANAGED),
	RT("cudaMallocHost", GPU_FN_MALLOC_HOST),
	RT("cudaHostAlloc", GPU_FN_HOST_ALLOC),
	RT("cudaFreeHost", GPU_FN_FREE_HOST),
	/* nvcc 12.8+'s launch by handle; older runtimes lack it: not a failure there. */
	OPT_RT("__cudaGetKernel", GPU_FN_GET_KERNEL),
	/* cudaLaunchKernelEx's, CUDA 11.8+: optional too. */
	OPT_RT("cudaLaunchKernelExC", GPU_FN_LAUNCH_EX),
	RT("cudaLaunchCooperativeKernel", GPU_FN_LAUNCH_COOP),
	RT("cudaGraphLaunch", GPU_FN_GRAPH_LAUNCH),
	RT("cudaMallocFromPoolAsync", GPU_FN_MALLOC_FROM_POOL_ASYNC),
	RT("cudaEventSynchronize", GPU_FN_EVENT_SYNC),
	/* The per-thread default stream variants (--default-stream per-thread): their calls
	 * are the function's. */
	RT("cudaLaunchKernel_ptsz", GPU_FN_LAUNCH),
	RT("cudaMemcpy_ptds", GPU_FN_MEMCPY),
	RT("cudaMemcpyAsync_ptsz", GPU_FN_MEMCPY_ASYNC),
	RT("cudaStreamSynchronize_ptsz", GPU_FN_STREAM_SYNC),
	RT("cudaMallocAsync_ptsz", GPU_FN_MALLOC_ASYNC),
	RT("cudaFreeAsync_ptsz", GPU_FN_FREE_ASYNC),
	OPT_RT("cudaLaunchKernelExC_ptsz", GPU_FN_LAUNCH_EX),
	RT("cudaLaunchCooperativeKernel_ptsz", GPU_FN_LAUNCH_COOP),
	RT("cudaGraphLaunch_ptsz", GPU_FN_GRAPH_LAUNCH),
	RT("cudaMallocFromPoolAsync_ptsz", GPU_FN_MALLOC_FROM_POOL_ASYNC),
	CU("cuLaunchKernel", GPU_FN_CU_LAUNCH),
	CU("cuMemAlloc_v2", GPU_FN_CU_MEM_ALLOC),
	CU("cuMemFree_v2", GPU_FN_CU_MEM_FREE),
	CU("cuMemcpyHtoD_v2", GPU_FN_CU_MEMCPY_HTOD),
	CU("cuMemcpyDtoH_v2", GPU_FN_CU_MEMCPY_DTOH),
	CU("cuMemcpyHtoDAsync_v2", GPU_FN_CU_MEMCPY_HTOD_ASYNC),
	CU("cuMemcpyDtoHAsync_v2", GPU_FN_CU_MEMCPY_DTOH_ASYNC),
	CU("cuCtxSynchronize", GPU_FN_CU_CTX_SYNC),
	CU("cuStreamSynchronize", GPU_FN_CU_STREAM_SYNC),
	CU("cuInit", GPU_FN_CU_INIT),
	CU("cuCtxCreate_v2", GPU_FN_CU_CTX_CREATE),
	CU("cuDevicePrimaryCtxRetain", GPU_FN_CU_PRIMARY_CTX_RETAIN),
	CU("cuCtxSetCurrent", GPU_FN_CU_CTX_SET_CURRENT),
	CU("cuCtxPushCurrent_v2", GPU_FN_CU_CTX_PUSH_CURRENT),
	CU("cuMemAllocManaged", GPU_FN_CU_MEM_ALLOC_MANAGED),
	CU("cuMemAllocHost_v2", GPU_FN_CU_MEM_ALLOC_HOST),
	CU("cuMemFreeHost", GPU_FN_CU_MEM_FREE_HOST),
	CU("cuModuleGetFunction", GPU_FN_CU_MODULE_GET_FUNCTION),
	/* Drivers before CUDA 12.0 lack these three, before 12.5 cuCtxCreate_v4. */
	OPT_CU("cuLaunchKernelEx", GPU_FN_CU_LAUNCH_EX),
	OPT_CU("cuLibraryGetKernel", GPU_FN_CU_LIBRARY_GET_KERNEL),
	OPT_CU("cuKernelGetFunction", GPU_FN_CU_KERNEL_GET_FUNCTION),
	OPT_CU("cuCtxCreate_v4", GPU_FN_CU_CTX_CREATE_V4), /* CUDA 13's cuda.h: cuCtxCreate */
	CU("cuLaunchCooperativeKernel", GPU_FN_CU_LAUNCH_COOP),
	CU("cuGraphLaunch", GPU_FN_CU_GRAPH_LAUNCH),
	CU("cuMemAllocAsync", GPU_FN_CU_MEM_ALLOC_ASYNC),
	CU("cuMemAllocFromPoolAsync", GPU_FN_CU_MEM_ALLOC_FROM_POOL_ASYNC),
	CU("cuMemFreeAsync", GPU_FN_CU_MEM_FREE_ASYNC),
	CU("cuMemcpyDtoD_v2", GPU_FN_CU_MEMCPY_DTOD),
	CU("cuMemcpyDtoDAsync_v2", GPU_FN_CU_MEMCPY_DTOD_ASYNC),
	CU("cuMemcpy", GPU_FN_CU_MEMCPY),
	CU("cuMemcpyAsync", GPU_FN_CU_MEMCPY_ASYNC),
	CU("cuEventSynchronize", GPU_FN_CU_EVENT_SYNC),
	/* CUDA 13's, a context's sync by handle: counted as cuCtxSynchronize. */
	OPT_CU("cuCtxSynchronize_v2", GPU_FN_CU_CTX_SYNC),
	CU("cuLaunchKernel_ptsz", GPU_FN_CU_LAUNCH),
	OPT_CU("cuLaunchKernelEx_ptsz", GPU_FN_CU_LAUNCH_EX),
	CU("cuMemcpyHtoD_v2_ptds", GPU_FN_CU_MEMCPY_HTOD),
	CU("cuMemcpyDtoH_v2_ptds", GPU_FN_CU_MEMCPY_DTOH),
	CU("cuMemcpyHtoDAsync_v2_ptsz", GPU_FN_CU_MEMCPY_HTOD_ASYNC),
	CU("cuMemcpyDtoHAsync_v2_ptsz", GPU_FN_CU_MEMCPY_DTOH_ASYNC),
	CU("cuStreamSynchronize_ptsz", GPU_FN_CU_STREAM_SYNC),
	CU("cuLaunchCooperativeKernel_ptsz", GPU_FN_CU_LAUNCH_COOP),
	CU("cuGraphLaunch_ptsz", GPU_FN_CU_GRAPH_LAUNCH),
	CU("cuMemAllocAsync_ptsz", GPU_FN_CU_MEM_ALLOC_ASYNC),
	CU("cuMemAllocFromPoolAsync_ptsz", GPU_FN_CU_MEM_ALLOC_FROM_POOL_ASYNC),
	CU("cuMemFreeAsync_ptsz", GPU_FN_CU_MEM_FREE_ASYNC),
	CU("cuMemcpyDtoD_v2_ptds", GPU_FN_CU_MEMCPY_DTOD),
	CU("cuMemcpyDtoDAsync_v2_ptsz", GPU_FN_CU_MEMCPY_DTOD_ASYNC),
	CU("cuMemcpy_ptds", GPU_FN_CU_MEMCPY),
	CU("cuMemcpyAsync_ptsz", GPU_FN_CU_MEMCPY_ASYNC),
};

static const struct bpftel_probe_spec task_exit_probe = {
	.name = "task-exit",
	.policy = BPFTEL_PROBE_REQUIRED,
	.ncand = 1,
	.cand = {{BPFTEL_ATTACH_TRACEPOINT, "gpu_task_exit", "sched/sched_process_exit"}},
};

/* A process's exec: the old program's state goes (bpf/lib/gpu_probes.h gpu_exec_body). */
static const struct bpftel_probe_spec exec_probe = {
	.name = "exec",
	.policy = BPFTEL_PROBE_REQUIRED,
	.ncand = 1,
	.cand = {{BPFTEL_ATTACH_TRACEPOINT, "gpu_exec", "sched/sched_process_exec"}},
};

/* The tables shared out by user, as the log names them. */
static const char *const gpu_share_labels[GPU_SHARE__COUNT] = {
	[GPU_SHARE_PROCS] = "the CUDA processes' rows",
	[GPU_SHARE_ALLOCS] = "the tracked allocations",
	[GPU_SHARE_KERNEL_ROWS] = "the kernel rows",
	[GPU_SHARE_ERROR_KINDS] = "the error kinds",
	[GPU_SHARE_THREADS] = "the threads' state",
	[GPU_SHARE_CALLS_IN_FLIGHT] = "the calls in flight",
};

/* How many entries table t (enum gpu_share_table) shares out: its map's, or for the
 * threads' state, the slots' and the spill map's. */
static __u32 gpu_share_entries(const struct gpu *skel, int t)
{
	switch (t) {
	case GPU_SHARE_PROCS:
		return bpf_map__max_entries(skel->maps.gpu_procs);
	case GPU_SHARE_ALLOCS:
		return bpf_map__max_entries(skel->maps.gpu_allocs);
	case GPU_SHARE_KERNEL_ROWS:
		return bpf_map__max_entries(skel->maps.gpu_kernels);
	case GPU_SHARE_THREADS:
		return bpf_map__max_entries(skel->maps.gpu_thread_slots) +
		       bpf_map__max_entries(skel->maps.gpu_threads);
	case GPU_SHARE_CALLS_IN_FLIGHT:
		return bpf_map__max_entries(skel->maps.gpu_inflight);
	default:
		return bpf_map__max_entries(skel->maps.gpu_errors);
	}
}

/*
 * Users' shares of the tables (bpf/lib/fair_share.h), from user_share_percent, into the
 * data the programs read where an entry is made: before load, the object's image;
 * loaded, the live map, so that a change applies to the next entry. Not while it loads
 * (loaded false): gpu_load writes them once it has. Under g->lock.
 */
static void gpu_set_share_caps(struct bpftel_gpu *g)
{
	int t;

	if (!g->skel || !g->skel->data)
		return;
	for (t = 0; t < GPU_SHARE__COUNT; t++) {
		g->share_entries[t] = gpu_share_entries(g->skel, t);
		g->skel->data->gpu_share_cap[t] =
			fair_share_cap(g->share_entries[t], g->user_share_percent);
	}
}

/* The uid ranges granted to users (fair_share_read_apply), under g->lock. */
static void gpu_apply_ranges(struct bpftel_gpu *g, const struct fair_share_read *rd, bool live)
{
	fair_share_read_apply(&g->subuid, "gpu", rd,
			      g->skel && g->skel->bss ? g->skel->bss->fair_share_ranges : NULL,
			      g->skel && g->skel->bss ? &g->skel->bss->fair_share_ranges_live
						      : NULL,
			      live);
}

static int gpu_open(struct bpftel_module *m)
{
	struct bpftel_gpu *g = bpftel_module__priv(m);
	struct fair_share_read *rd;
	struct bpf_program *prog;
	struct gpu *skel;

	skel = gpu__open();
	if (!skel)
		return -errno;
	/* The registry loads the uprobe programs it attaches, the manager its probes'; the
	 * sweep's own program is loaded with the object. */
	bpf_object__for_each_program(prog, skel->obj) bpf_program__set_autoload(prog, false);
	bpf_program__set_autoload(skel->progs.gpu_slot_free, true);
	bpf_program__set_autoload(skel->progs.gpu_exec_drop, true);
	/* File I/O: before the lock. */
	rd = fair_share_prepare("gpu", &skel->rodata->fair_share_pidns_dev,
				&skel->rodata->fair_share_pidns_ino);
	if (!rd) {
		gpu__destroy(skel);
		return -ENOMEM;
	}
	pthread_mutex_lock(&g->lock);
	skel->rodata->gpu_launch_shared_mem = g->launch_shared_mem;
	g->skel = skel;
	g->opens++;
	gpu_set_share_caps(g);
	gpu_apply_ranges(g, rd, false);
	pthread_mutex_unlock(&g->lock);
	free(rd);
	bpftel_module__set_object(m, skel->obj);
	return bpftel_module__add_probe(m, &task_exit_probe) ?:
	       bpftel_module__add_probe(m, &exec_probe);
}

static int gpu_load(struct bpftel_module *m)
{
	struct bpftel_gpu *g = bpftel_module__priv(m);

	int err = gpu__load(g->skel);

	if (!err) {
		pthread_mutex_lock(&g->lock);
		if (!bpftel_module__reused_maps(m))
			g->maps_gen++;
		else
			g->shares_due_ns = 0; /* the holders, blanked at close: at once */
		g->loaded = true;
		/* Again: a configuration applied while it loaded was not written. */
		gpu_set_share_caps(g);
		pthread_mutex_unlock(&g->lock);
	}
	return err;
}

static void gpu_close(struct bpftel_module *m)
{
	struct bpftel_gpu *g = bpftel_module__priv(m);
	struct gpu *skel;
	int t;

	pthread_mutex_lock(&g->lock);
	/* Its refusals outlive it: counters since the agent started. */
	for (t = 0; g->loaded && g->skel->bss && t < GPU_SHARE__COUNT; t++)
		g->share_refused_retired[t] +=
			__atomic_load_n(&g->skel->bss->gpu_share_refused[t], __ATOMIC_RELAXED);
	g->loaded = false;
	/* The tables go (a restart's kept ones are recounted at once: gpu_load). */
	memset(g->share_holders, 0, sizeof(g->share_holders));
	memset(g->share_refusers, 0, sizeof(g->share_refusers));
	g->subuid.ranges = 0; /* the next open reads the files again */
	memset(&g->subuid.seen, 0, sizeof(g->subuid.seen));
	skel = g->skel;
	g->skel = NULL;
	pthread_mutex_unlock(&g->lock);
	gpu__destroy(skel); /* its fds closed, its memory unmapped: not under the lock */
}

/* What an owner but root may hold of the /metrics budgets, processes' series and
 * kernels' (g->user_share_percent of each, as of the kernel's tables). */
static void gpu_series_shares(struct bpftel_gpu *g)
{
	bpftel_gpu_series__set_per_owner(
		g->series, (size_t)fair_share_cap(BPFTEL_GPU_SERIES_PROCS, g->user_share_percent));
	bpftel_gpu_kernels__set_per_owner(
		g->kernels, (size_t)fair_share_cap(BPFTEL_GPU_KERNEL_SERIES, g->user_share_percent));
}

void bpftel_gpu__configure(struct bpftel_gpu *g, bool launch_shared_mem,
			   unsigned int user_share_percent)
{
	pthread_mutex_lock(&g->lock);
	g->launch_shared_mem = launch_shared_mem;
	g->user_share_percent = user_share_percent ? user_share_percent
						   : FAIR_SHARE_PERCENT_DEFAULT;
	gpu_series_shares(g);
	if (g->loaded)
		gpu_set_share_caps(g);
	pthread_mutex_unlock(&g->lock);
}

void bpftel_gpu__shares(struct bpftel_gpu *g, struct bpftel_gpu_shares *out)
{
	int t;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&g->lock);
	out->percent = g->user_share_percent;
	for (t = 0; t < GPU_SHARE__COUNT; t++) {
		out->refused[t] = g->share_refused_retired[t];
		if (g->loaded && g->skel->bss)
			out->refused[t] += __atomic_load_n(&g->skel->bss->gpu_share_refused[t],
							   __ATOMIC_RELAXED);
		out->entries[t] = g->share_entries[t];
		out->cap[t] = fair_share_cap(out->entries[t], g->user_share_percent);
		out->holders[t] = g->share_holders[t];
		out->refused_by[t] = g->share_refusers[t];
	}
	out->ranges = g->subuid.ranges;
	out->ranges_left_out = g->subuid.skipped;
	out->ranges_err = g->subuid.err;
	pthread_mutex_unlock(&g->lock);
}

/* An owner holding the whole of its share of a table, said once (fair_share_say_full).
 * Under g->lock. */
static void gpu_shares_full_say(struct bpftel_gpu *g)
{
	int t;

	for (t = 0; t < GPU_SHARE__COUNT; t++)
		fair_share_say_full(&g->shares_full_said, t, &g->share_holders[t],
				    fair_share_cap(g->share_entries[t], g->user_share_percent),
				    g->share_entries[t], "gpu", gpu_share_labels[t], "gpu",
				    "whose CUDA work runs as one user");
}

/* The maps a recount reads and writes, duplicated under g->lock from the loaded
 * object (-1: not loaded), so that the walk holds no lock and a close meanwhile frees
 * nothing under it. */
struct gpu_share_fds {
	struct gpu_share_maps m;
	int refused; /* fair_share_refused */
	__u64 opens;
};

#define SHARE_FDS 7 /* the fds of struct gpu_share_fds */

static int *share_fd(struct gpu_share_fds *f, int i)
{
	int *fds[SHARE_FDS] = {&f->m.procs,  &f->m.thread_slots, &f->m.threads, &f->m.inflight,
			       &f->m.counts, &f->m.adj,		 &f->refused};

	return fds[i];
}

static void share_fds_close(struct gpu_share_fds *f)
{
	int i;

	for (i = 0; i < SHARE_FDS; i++)
		bpftel_fd_close(share_fd(f, i));
}

/* 0, -EAGAIN when not loaded, or -errno (out of fds). */
static int share_fds_dup(struct bpftel_gpu *g, struct gpu_share_fds *f)
{
	const struct bpf_map *maps[SHARE_FDS];
	int i, err = 0;

	f->opens = g->opens;
	for (i = 0; i < SHARE_FDS; i++)
		*share_fd(f, i) = -1;
	if (!g->loaded)
		return -EAGAIN;
	maps[0] = g->skel->maps.gpu_procs;
	maps[1] = g->skel->maps.gpu_thread_slots;
	maps[2] = g->skel->maps.gpu_threads;
	maps[3] = g->skel->maps.gpu_inflight;
	maps[4] = g->skel->maps.fair_share;
	maps[5] = g->skel->maps.fair_share_adj;
	maps[6] = g->skel->maps.fair_share_refused;
	for (i = 0; i < SHARE_FDS && !err; i++) {
		*share_fd(f, i) = bpftel_fd_dup(bpf_map__fd(maps[i]));
		if (*share_fd(f, i) < 0)
			err = -errno;
	}
	if (err)
		share_fds_close(f);
	return err;
}

/*
 * From housekeeping, every FAIR_SHARE_RECOUNT_NS, or at once after a sweep dropped
 * processes (their entries leave their owners' shares only here): the uid ranges read
 * again if their files changed, then the shares recounted. File I/O and the maps'
 * walk run without the lock (nothing is read while only root holds entries).
 */
static void gpu_shares_housekeeping(struct bpftel_gpu *g, bool dropped)
{
	struct fair_share_refusers refused[GPU_SHARE__COUNT];
	struct fair_share_holders top[GPU_SHARE__COUNT];
	struct fair_share_read *rd;
	struct gpu_share_fds fds;
	struct subuid_files seen;
	__u64 now = bpftel_mono_ns();
	bool due;
	int err;

	pthread_mutex_lock(&g->lock);
	due = g->loaded && now >= g->shares_due_ns;
	if (due)
		g->shares_due_ns = now + FAIR_SHARE_RECOUNT_NS;
	seen = g->subuid.seen;
	pthread_mutex_unlock(&g->lock);
	if (due && (rd = fair_share_reread(&seen))) {
		pthread_mutex_lock(&g->lock);
		if (g->loaded)
			gpu_apply_ranges(g, rd, true);
		pthread_mutex_unlock(&g->lock);
		free(rd);
	}
	if (!due && !dropped)
		return;
	pthread_mutex_lock(&g->lock);
	err = share_fds_dup(g, &fds);
	memcpy(top, g->share_holders, sizeof(top));
	memcpy(refused, g->share_refusers, sizeof(refused));
	pthread_mutex_unlock(&g->lock);
	if (err == -EAGAIN)
		return; /* not loaded */
	if (!err)
		err = bpftel_gpu_shares_recount(&fds.m, top) ?:
		      fair_share_refusers_read(fds.refused, refused, GPU_SHARE__COUNT);
	share_fds_close(&fds);
	pthread_mutex_lock(&g->lock);
	if (g->loaded && g->opens == fds.opens) { /* not a new object's since */
		if (!err) {
			memcpy(g->share_holders, top, sizeof(top));
			memcpy(g->share_refusers, refused, sizeof(refused));
			gpu_shares_full_say(g);
		}
		if (err && !g->shares_warned)
			pr_warn("gpu: users' shares not recounted: %s (tried again every 10 s)",
				strerror(-err));
		g->shares_warned = err != 0;
	}
	pthread_mutex_unlock(&g->lock);
}

/* /proc as the sweep reads it (tests give another), duplicated: -1 if it cannot be.
 * Not under sweep_lock, which a sweep holds through its reads of /proc. */
static int gap_procfd(struct bpftel_gpu *g)
{
	int fd;

	pthread_mutex_lock(&g->procfd_lock);
	fd = bpftel_fd_dup(g->procfd);
	pthread_mutex_unlock(&g->procfd_lock);
	return fd;
}

/* A restart's stop, its programs still running (the first of its before_stop hooks,
 * registered last: before the uprobe registry's closes the object's stop gate, which
 * the exec tracepoint's program reads too): note each process and its print. */
static int gap_note(const struct bpftel_hook_before_stop *h, void *ctx)
{
	struct bpftel_gpu *g = ctx;
	int procs_fd = -1, procfd;
	__u64 maps_gen = 0;
	__u32 max = 0;

	gpu_gap_forget(&g->gap);
	if (!bpftel_module__restarting(h->module))
		return 0;
	pthread_mutex_lock(&g->lock);
	if (g->loaded) {
		procs_fd = bpftel_fd_dup(bpf_map__fd(g->skel->maps.gpu_procs));
		max = bpf_map__max_entries(g->skel->maps.gpu_procs);
		maps_gen = g->maps_gen;
	}
	pthread_mutex_unlock(&g->lock);
	procfd = procs_fd >= 0 ? gap_procfd(g) : -1;
	if (procfd >= 0) /* /proc read without a lock */
		gpu_gap_note(&g->gap, procs_fd, max, procfd, maps_gen);
	bpftel_fd_close(&procfd);
	bpftel_fd_close(&procs_fd);
	return 0;
}

/*
 * The new instance, loaded with the kept maps: those that exec'd in between lose what
 * they had. A row the new instance made since is newer than the print noted, and
 * stays. Twice: before its uprobes attach (again: before the first call of a new
 * program, which would count on in the old row, and be dropped with it, its threads'
 * slots freed under them), each process left noted again as that check read it; and
 * once its probes are attached, the exec tracepoint's included (an exec from now on is
 * its), for those that exec'd since that read. (The exec tracepoint attaches with the
 * module's other probes, after the uprobes: a program that execs in between and calls
 * at once has those first calls dropped with its old row.)
 */
static void gap_check(struct bpftel_gpu *g, struct bpftel_module *m, bool again)
{
	int procs_fd = -1, prog_fd = -1, procfd, dropped, left = 0;

	if (!g->gap.n)
		return;
	pthread_mutex_lock(&g->lock);
	if (g->loaded && g->maps_gen == g->gap.maps_gen && bpftel_module__reused_maps(m)) {
		procs_fd = bpftel_fd_dup(bpf_map__fd(g->skel->maps.gpu_procs));
		prog_fd = bpftel_fd_dup(bpf_program__fd(g->skel->progs.gpu_exec_drop));
	}
	pthread_mutex_unlock(&g->lock);
	procfd = procs_fd >= 0 && prog_fd >= 0 ? gap_procfd(g) : -1;
	if (procfd < 0) {
		gpu_gap_forget(&g->gap); /* new maps, or not to be read: nothing to drop */
	} else {
		dropped = gpu_gap_check(&g->gap, procs_fd, prog_fd, procfd, &left, again);
		if (dropped)
			pr_info("gpu: %d process%s exec'd during the restart: %s old program's "
				"state dropped", dropped, dropped == 1 ? "" : "es",
				dropped == 1 ? "its" : "their");
		if (left)
			pr_warn("gpu: %d more exec'd during the restart and %s (at most %d are "
				"dropped a check)", left,
				again ? "are left for the next check"
				      : "keep their old program's state",
				GPU_GAP_DROPS_MAX);
	}
	bpftel_fd_close(&procfd);
	bpftel_fd_close(&prog_fd);
	bpftel_fd_close(&procs_fd);
}

static int gap_check_before(const struct bpftel_hook_before_start *h, void *ctx)
{
	gap_check(ctx, h->module, true);
	return 0;
}

static int gap_check_after(const struct bpftel_hook_after_start *h, void *ctx)
{
	gap_check(ctx, h->module, false);
	return 0;
}

int bpftel_gpu__new(struct bpftel_manager *mgr, struct bpftel_uprobes *up, struct bpftel_gpu **out)
{
	struct bpftel_gpu *g = calloc(1, sizeof(*g));
	int err;

	if (!g)
		return -ENOMEM;
	pthread_mutex_init(&g->lock, NULL);
	pthread_mutex_init(&g->report_lock, NULL);
	pthread_mutex_init(&g->sweep_lock, NULL);
	pthread_mutex_init(&g->procfd_lock, NULL);
	g->kernels = bpftel_gpu_kernels__new(NULL);
	g->errors = bpftel_gpu_errors__new();
	g->series = bpftel_gpu_series__new(BPFTEL_GPU_SERIES_PROCS);
	g->procfd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (!g->kernels || !g->errors || !g->series || g->procfd < 0) {
		err = g->procfd < 0 ? -errno : -ENOMEM;
		pr_err("gpu: cannot register: %s", strerror(-err));
		if (g->procfd >= 0)
			close(g->procfd);
		bpftel_gpu_kernels__free(g->kernels);
		bpftel_gpu_errors__free(g->errors);
		bpftel_gpu_series__free(g->series);
		pthread_mutex_destroy(&g->procfd_lock);
		pthread_mutex_destroy(&g->sweep_lock);
		pthread_mutex_destroy(&g->report_lock);
		pthread_mutex_destroy(&g->lock);
		free(g);
		return err;
	}
	g->user_share_percent = FAIR_SHARE_PERCENT_DEFAULT;
	gpu_series_shares(g);
	g->share_entries[GPU_SHARE_PROCS] = GPU_MAX_PROCS;
	g->share_entries[GPU_SHARE_ALLOCS] = GPU_MAX_ALLOCS;
	g->share_entries[GPU_SHARE_KERNEL_ROWS] = GPU_MAX_LAUNCH_ROWS;
	g->share_entries[GPU_SHARE_ERROR_KINDS] = GPU_MAX_ERRORS;
	g->share_entries[GPU_SHARE_THREADS] = GPU_THREAD_SLOTS + GPU_MAX_THREADS;
	g->share_entries[GPU_SHARE_CALLS_IN_FLIGHT] = GPU_MAX_INFLIGHT;
	_Static_assert(GPU_SHARE__COUNT == 6, "every table's size before the first open");
	g->ops.name = BPFTEL_GPU_MODULE;
	g->ops.open = gpu_open;
	g->ops.load = gpu_load;
	g->ops.close = gpu_close;
	g->ops.restart_keeps = gpu_restart_keeps;
	g->ops.command = "gpu";
	g->ops.report = gpu_report;
	g->ops.metrics = gpu_metrics;
	g->ops.housekeeping = gpu_housekeeping;
	err = bpftel_manager__register(mgr, &g->ops, g, &g->module);
	/* Before the uprobe registry's start hook, which attaches the uprobes. */
	if (!err)
		err = bpftel_module__add_before_start(g->module, gap_check_before, g);
	if (!err)
		err = bpftel_uprobes__add_module(up, g->module, uprobe_specs,
						 sizeof(uprobe_specs) / sizeof(uprobe_specs[0]));
	if (!err)
		err = bpftel_manager__bind_shared(mgr, g->module, BPFTEL_SHAREDLIBS_MODULE,
						  SHLIB_LIBSET_BIT(SHLIB_LIBSET_GPU));
	/* Last: stop hooks run in reverse, and the note must come before the others'
	 * (above). */
	if (!err)
		err = bpftel_module__add_after_start(g->module, gap_check_after, g) ?:
		      bpftel_module__add_before_stop(g->module, gap_note, g);
	if (err) {
		/* Registered modules are freed with the manager; g must outlive it. */
		pr_err("gpu: cannot register: %s", strerror(-err));
		*out = g;
		return err;
	}
	*out = g;
	return 0;
}

__u64 bpftel_gpu__exits_unread(struct bpftel_gpu *g)
{
	return __atomic_load_n(&g->exits_unread, __ATOMIC_RELAXED);
}

struct bpftel_gpu_series *bpftel_gpu__series(struct bpftel_gpu *g)
{
	return g->series;
}

void bpftel_gpu__set_procfd(struct bpftel_gpu *g, int procfd)
{
	pthread_mutex_lock(&g->sweep_lock);
	pthread_mutex_lock(&g->procfd_lock);
	close(g->procfd);
	g->procfd = procfd;
	pthread_mutex_unlock(&g->procfd_lock);
	pthread_mutex_unlock(&g->sweep_lock);
}

void bpftel_gpu__set_report_seam(struct bpftel_gpu *g, int (*fn)(void *), void *arg)
{
	pthread_mutex_lock(&g->lock);
	g->seam = fn;
	g->seam_arg = arg;
	pthread_mutex_unlock(&g->lock);
}

int bpftel_gpu__map_fd(struct bpftel_gpu *g, const char *name)
{
	int fd;

	pthread_mutex_lock(&g->lock);
	fd = g->loaded ? bpf_object__find_map_fd_by_name(g->skel->obj, name) : -1;
	pthread_mutex_unlock(&g->lock);
	return fd;
}

void bpftel_gpu__free(struct bpftel_gpu *g)
{
	if (!g)
		return;
	bpftel_gpu_kernels__free(g->kernels);
	bpftel_gpu_errors__free(g->errors);
	bpftel_gpu_series__free(g->series);
	close(g->procfd);
	free(g->starts);
	free(g->borns);
	gpu_gap_forget(&g->gap);
	pthread_mutex_destroy(&g->procfd_lock);
	pthread_mutex_destroy(&g->sweep_lock);
	pthread_mutex_destroy(&g->report_lock);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

struct bpftel_module *bpftel_gpu__module(struct bpftel_gpu *g)
{
	return g->module;
}

/* Pids, and what begins with one (rows, struct pid_born): sorted and searched by it. */
static int cmp_pid(const void *a, const void *b)
{
	__u32 x = *(const __u32 *)a, y = *(const __u32 *)b;

	return x < y ? -1 : x > y;
}

_Static_assert(offsetof(struct bpftel_gpu_proc, pid) == 0, "a row begins with its pid");
_Static_assert(offsetof(struct pid_born, pid) == 0, "a pid_born begins with its pid");

/* The row of pid in rows, sorted by pid (unique_rows()): a kernel map of 32768 rows is
 * read under the module's lock, a row looked up for each. */
static struct bpftel_gpu_proc *find_proc(struct bpftel_gpu_proc *rows, size_t n, __u32 pid)
{
	return n ? bsearch(&pid, rows, n, sizeof(*rows), cmp_pid) : NULL;
}

/* The keys a walk visited: open addressing on their bytes, grown at half full. */
struct key_set {
	unsigned char *keys;
	bool *used;
	size_t cap, n, key_size;
};

static size_t key_hash(const void *key, size_t size)
{
	const unsigned char *p = key;
	__u64 h = 0xcbf29ce484222325ull; /* FNV-1a */
	size_t i;

	for (i = 0; i < size; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return (size_t)h;
}

/* 1: added, 0: there already, -ENOMEM. */
static int key_set_add(struct key_set *s, const void *key)
{
	size_t i;

	if ((s->n + 1) * 2 > s->cap) {
		struct key_set big = {.cap = s->cap ? s->cap * 2 : 256, .key_size = s->key_size};

		big.keys = malloc(big.cap * s->key_size);
		big.used = calloc(big.cap, sizeof(*big.used));
		if (!big.keys || !big.used) {
			free(big.keys);
			free(big.used);
			return -ENOMEM;
		}
		for (i = 0; i < s->cap; i++)
			if (s->used[i])
				key_set_add(&big, s->keys + i * s->key_size);
		free(s->keys);
		free(s->used);
		*s = big;
	}
	for (i = key_hash(key, s->key_size) & (s->cap - 1); s->used[i]; i = (i + 1) & (s->cap - 1))
		if (!memcmp(s->keys + i * s->key_size, key, s->key_size))
			return 0;
	s->used[i] = true;
	memcpy(s->keys + i * s->key_size, key, s->key_size);
	s->n++;
	return 1;
}

/*
 * A hash map's walk starts over from its first key when the key it holds was deleted
 * meanwhile (a free, while allocations are walked): the keys already visited come
 * round again. They are skipped, so each is visited once; and the walk is bounded, so
 * that churn cannot keep it going (what it did not reach is missed, not counted twice).
 */
size_t bpftel_gpu_map_walk(const struct bpftel_gpu_map_walk *w,
			   void (*visit)(void *arg, const void *key), void *arg)
{
	unsigned char key[BPFTEL_GPU_WALK_KEY_MAX], next[BPFTEL_GPU_WALK_KEY_MAX];
	struct key_set seen = {.key_size = w->key_size};
	size_t steps = 0, visited = 0;
	bool first = true;
	int r;

	if (w->key_size > BPFTEL_GPU_WALK_KEY_MAX)
		return 0;
	for (;;) {
		if (steps++ >= 2 * w->max_entries + 1) {
			if (w->cut)
				*w->cut = true;
			break;
		}
		if (w->next_key(w->ctx, first ? NULL : key, next))
			break;
		memcpy(key, next, w->key_size);
		first = false;
		r = key_set_add(&seen, key);
		if (r < 0) {
			if (w->cut)
				*w->cut = true;
			break;
		}
		if (r) {
			visit(arg, key);
			visited++;
		}
	}
	free(seen.keys);
	free(seen.used);
	return visited;
}

static int map_next_key(void *ctx, const void *prev, void *next)
{
	return bpf_map_get_next_key(*(const int *)ctx, prev, next);
}

struct alloc_walk {
	int fd;
	struct bpftel_gpu_proc *rows;
	size_t n;
	__u64 now;
};

/* One outstanding allocation (ak, a), added to its process's row. */
static int count_alloc_entry(void *arg, const void *key, const void *value)
{
	const struct gpu_alloc_key *ak = key;
	struct alloc_walk *aw = arg;
	struct bpftel_gpu_kind *k;
	struct bpftel_gpu_proc *p;
	struct gpu_alloc a;
	__u64 age;
	size_t b;

	memcpy(&a, value, sizeof(a));
	if (!(p = find_proc(aw->rows, aw->n, ak->tgid)) || a.kind >= GPU_MEM__COUNT)
		return 0;
	age = aw->now > a.ktime_ns ? aw->now - a.ktime_ns : 0;
	for (b = 0; b < BPFTEL_GPU_AGE_BUCKETS - 1; b++) {
		if (age < age_limits_s[b] * 1000000000ull)
			break;
	}
	k = &p->kinds[a.kind];
	k->outstanding_allocs++;
	k->age_allocs[b]++;
	k->age_bytes[b] += a.size;
	if (age > k->oldest_ns)
		k->oldest_ns = age;
	return 0;
}

static void count_alloc(void *arg, const void *key)
{
	struct alloc_walk *aw = arg;
	struct gpu_alloc a;

	if (!bpf_map_lookup_elem(aw->fd, key, &a))
		count_alloc_entry(aw, key, &a);
}

/* The BPF side deletes allocations as they are freed, while this reads them: in
 * batches, which those deletes cannot start over (a walk of the keys could be kept
 * from its end by another process's frees, the allocations past its bound then
 * missing from their processes' rows); by keys where the kernel has no batches. */
static void add_allocs(const struct bpf_map *map, struct bpftel_gpu_proc *rows, size_t n)
{
	struct alloc_walk aw = {bpf_map__fd(map), rows, n, bpftel_mono_ns()};
	struct bpftel_gpu_map_walk w = {map_next_key, &aw.fd, sizeof(struct gpu_alloc_key),
					bpf_map__max_entries(map)};

	if (bpf_map__key_size(map) == sizeof(struct gpu_alloc_key) &&
	    bpf_map__value_size(map) == sizeof(struct gpu_alloc) &&
	    !bpftel_map_batch_unsupported(bpftel_map_batch_walk(
		    aw.fd, sizeof(struct gpu_alloc_key), sizeof(struct gpu_alloc), count_alloc_entry,
		    &aw)))
		return;
	bpftel_gpu_map_walk(&w, count_alloc, &aw);
}

struct error_walk {
	int fd;
	struct bpftel_gpu_proc *rows;
	size_t n;
	struct bpftel_gpu_error_seen *es;
	size_t nes, cap;
	bool short_read; /* a kind not kept (no memory), or the walk cut at its bound */
};

static void read_error(void *arg, const void *key)
{
	const struct gpu_err_key *ek = key;
	struct error_walk *ew = arg;

	if (!find_proc(ew->rows, ew->n, ek->tgid))
		return;
	if (!bpftel_gpu_grow((void **)&ew->es, &ew->cap, ew->nes + 1, sizeof(*ew->es))) {
		ew->short_read = true;
		return;
	}
	if (bpf_map_lookup_elem(ew->fd, key, &ew->es[ew->nes].count))
		return;
	ew->es[ew->nes++].key = *ek;
}

/* The (function, error) kinds of failed calls of the processes in rows. A process's
 * exec deletes its keys meanwhile (gpu_exec_body): each key is read once. A kind the
 * walk missed (cut at its bound by execs in a loop, or no memory) would be counted in
 * its process's unlisted errors, then again once listed (a series of its own, starting
 * at its count): -EAGAIN then, as for the kernels, and no report of this read. */
static ssize_t read_errors(const struct bpf_map *map, struct bpftel_gpu_proc *rows, size_t n,
			   struct bpftel_gpu_error_seen **out)
{
	struct error_walk ew = {.fd = bpf_map__fd(map), .rows = rows, .n = n};
	struct bpftel_gpu_map_walk w = {map_next_key, &ew.fd, sizeof(struct gpu_err_key),
					bpf_map__max_entries(map), &ew.short_read};

	bpftel_gpu_map_walk(&w, read_error, &ew);
	*out = ew.es;
	return ew.short_read ? -EAGAIN : (ssize_t)ew.nes;
}

/* A kernel's launches as read: its rows of gpu_kernels (struct gpu_launch_key) merged. */
struct kernel_rows {
	struct gpu_kernel_key key; /* the kernel: its rows' keys less function, device, size */
	struct gpu_kernel k;	   /* their launches and threads summed */
	/* The row whose last sizes k holds: its launches and key. */
	__u64 best;
	struct gpu_launch_key best_key;
	__u32 rank; /* among its process's kernels, by launches (trim_in_rounds) */
};

/* Whose sizes a kernel shows: its most launched row's; between rows launched as often,
 * the larger size, then the lower device slot, then the lower function (the order in
 * which the map lists rows is the kernel's hash order: no tie may depend on it). */
static bool row_better(const struct kernel_rows *a, const struct kernel_rows *b)
{
	const struct gpu_launch_key *x = &a->best_key, *y = &b->best_key;
	int bx = x->bucket == GPU_LAUNCH_NO_BUCKET ? -1 : x->bucket;
	int by = y->bucket == GPU_LAUNCH_NO_BUCKET ? -1 : y->bucket;

	if (a->best != b->best)
		return a->best > b->best;
	if (bx != by)
		return bx > by;
	if (x->dev != y->dev)
		return x->dev < y->dev;
	return x->fn < y->fn;
}

/* Kernels listed per report at most (the most launched): the handles gpu_kernels.c
 * keeps. The launches of any others are in their processes' totals all the same. */
#define KERNELS_LISTED 8192

static int cmp_kernel_launches(const void *a, const void *b)
{
	__u64 x = ((const struct kernel_rows *)a)->k.launches;
	__u64 y = ((const struct kernel_rows *)b)->k.launches;

	return x < y ? 1 : x > y ? -1 : bpftel_gpu_kernel_key_cmp(a, b);
}

/*
 * kr[0..n) sorted by kernel (so by process), one per kernel: each process's most
 * launched, at most an equal share of the list (KERNELS_LISTED over the processes with
 * kernels), at least BPFTEL_GPU_TOP_KERNELS and at most BPFTEL_GPU_KERNELS_PER_PROC, in
 * place; *all false when some went. Returns the count.
 */
static size_t cap_per_process(struct kernel_rows *kr, size_t n, bool *all)
{
	size_t i, j, keep, out = 0, procs = 0, cap;

	for (i = 0; i < n; i = j, procs++)
		for (j = i; j < n && kr[j].key.tgid == kr[i].key.tgid; j++)
			;
	cap = procs ? KERNELS_LISTED / procs : KERNELS_LISTED;
	if (cap > BPFTEL_GPU_KERNELS_PER_PROC)
		cap = BPFTEL_GPU_KERNELS_PER_PROC;
	if (cap < BPFTEL_GPU_TOP_KERNELS)
		cap = BPFTEL_GPU_TOP_KERNELS;
	for (i = 0; i < n; i = j) {
		for (j = i; j < n && kr[j].key.tgid == kr[i].key.tgid; j++)
			;
		keep = j - i;
		if (keep > cap) {
			qsort(kr + i, keep, sizeof(*kr), cmp_kernel_launches);
			keep = cap;
			*all = false;
		}
		memmove(kr + out, kr + i, keep * sizeof(*kr));
		out += keep;
	}
	return out;
}

static int cmp_rank_launches(const void *a, const void *b)
{
	const struct kernel_rows *x = a, *y = b;

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return cmp_kernel_launches(a, b);
}

/*
 * kr[0..n) sorted by kernel (so by process), more than KERNELS_LISTED though each
 * process is at its cap (over 1024 processes): the list keeps each process's most
 * launched in rounds, every process's r-th before any process's (r+1)-th, to
 * KERNELS_LISTED. A sort of all by launches let the processes with busy kernels, as
 * many as a user can start, push out every kernel of a quieter process. Returns the
 * count kept.
 */
static size_t trim_in_rounds(struct kernel_rows *kr, size_t n)
{
	size_t i, j, r;

	for (i = 0; i < n; i = j) {
		for (j = i; j < n && kr[j].key.tgid == kr[i].key.tgid; j++)
			;
		qsort(kr + i, j - i, sizeof(*kr), cmp_kernel_launches);
		for (r = 0; r < j - i; r++)
			kr[i + r].rank = (__u32)r;
	}
	qsort(kr, n, sizeof(*kr), cmp_rank_launches);
	return n < KERNELS_LISTED ? n : KERNELS_LISTED;
}

/* kr[0..n) sorted by kernel: one entry per kernel. Returns the count. */
static size_t merge_kernels(struct kernel_rows *kr, size_t n)
{
	size_t i, out = 0;

	for (i = 0; i < n; i++) {
		if (!out || bpftel_gpu_kernel_key_cmp(&kr[out - 1].key, &kr[i].key)) {
			kr[out++] = kr[i];
			continue;
		}
		kr[out - 1].k.launches += kr[i].k.launches;
		kr[out - 1].k.threads = bpftel_add_sat(kr[out - 1].k.threads, kr[i].k.threads);
		if (row_better(&kr[i], &kr[out - 1])) {
			kr[out - 1].best = kr[i].best;
			kr[out - 1].best_key = kr[i].best_key;
			memcpy(kr[out - 1].k.grid, kr[i].k.grid, sizeof(kr[i].k.grid));
			memcpy(kr[out - 1].k.block, kr[i].k.block, sizeof(kr[i].k.block));
		}
	}
	return out;
}

struct kernel_walk {
	int fd;
	struct bpftel_gpu_proc *rows;
	size_t n;
	struct kernel_rows *kr;
	size_t nkr, cap;
	bool short_list; /* a row not kept (out of memory) */
	bool cut;	 /* the map not read to its end: the totals are short */
};

/* One row read: added to its process's stats, and kept. */
static void take_kernel_row(struct kernel_walk *kw, const struct gpu_launch_key *key,
			    const struct gpu_kernel *k)
{
	struct bpftel_gpu_proc *p = find_proc(kw->rows, kw->n, key->tgid);

	if (!p)
		return;
	bpftel_gpu_add_launches(&p->st, key, k);
	/* Out of memory: the totals stay whole, the list is short. */
	if (!bpftel_gpu_grow((void **)&kw->kr, &kw->cap, kw->nkr + 1, sizeof(*kw->kr))) {
		kw->short_list = true;
		return;
	}
	kw->kr[kw->nkr++] = (struct kernel_rows){
		.key = {.tgid = key->tgid, .api = key->api, .func = key->func},
		.k = *k, .best = k->launches, .best_key = *key};
}

static void read_kernel_row(void *arg, const void *key)
{
	struct kernel_walk *kw = arg;
	struct gpu_kernel k;

	if (!bpf_map_lookup_elem(kw->fd, key, &k))
		take_kernel_row(kw, key, &k);
}

#define KERNEL_BATCH 512

/* The rows in batches (a hash map's batch walks its buckets in order: it neither starts
 * over when a row is deleted, nor visits one twice). False when the kernel could not
 * (before any row was taken): the caller walks key by key instead. */
static bool read_kernel_batches(struct kernel_walk *kw)
{
	static __thread struct gpu_launch_key keys[KERNEL_BATCH];
	static __thread struct gpu_kernel vals[KERNEL_BATCH];
	__u32 at = 0, next, count, i;
	bool first = true;
	int err;

	do {
		count = KERNEL_BATCH;
		err = bpf_map_lookup_batch(kw->fd, first ? NULL : &at, &next, keys, vals, &count,
					   NULL);
		if (err && errno != ENOENT) {
			if (first)
				return false;
			kw->cut = true; /* rows taken, the rest not: no report of these */
			return true;
		}
		for (i = 0; i < count; i++)
			take_kernel_row(kw, &keys[i], &vals[i]);
		at = next;
		first = false;
	} while (!err);
	return true;
}

/* Every row of gpu_kernels of the processes in rows, each added to its process's stats
 * (calls, devices, threads, sizes: bpftel_gpu_add_launches) and kept (kr). Each row
 * once, though a process's exec deletes its rows meanwhile (gpu_exec_body): in batches,
 * or by a walk that starts over then and skips the keys it saw. Returns the count kept;
 * *all false when some row was not kept; -1 when the map could not be read to its end
 * (the processes' totals would be short: counters going down). */
static ssize_t read_kernel_rows(const struct bpf_map *map, struct bpftel_gpu_proc *rows, size_t n,
				struct kernel_rows **out, bool *all)
{
	struct kernel_walk kw = {.fd = bpf_map__fd(map), .rows = rows, .n = n};
	struct bpftel_gpu_map_walk w = {map_next_key, &kw.fd, sizeof(struct gpu_launch_key),
					bpf_map__max_entries(map), &kw.cut};

	if (bpf_map__key_size(map) != sizeof(struct gpu_launch_key) ||
	    bpf_map__value_size(map) != sizeof(struct gpu_kernel) || !read_kernel_batches(&kw))
		bpftel_gpu_map_walk(&w, read_kernel_row, &kw);
	*out = kw.kr;
	*all = !kw.short_list;
	if (kw.cut) {
		free(kw.kr);
		*out = NULL;
		return -1;
	}
	return (ssize_t)kw.nkr;
}

/*
 * The launches of the processes in rows: added to their stats, and per kernel (one
 * entry whatever its rows' functions, devices and sizes; at most KERNELS_LISTED), with
 * the names the driver gave and the host functions of the runtime's handles. *all:
 * whether every kernel is listed. -1 when the kernel map could not be read whole.
 */
static ssize_t read_kernels(struct gpu *skel, struct bpftel_gpu_proc *rows, size_t n,
			    struct bpftel_gpu_kernel_seen **out, bool *all)
{
	int names_fd = bpf_map__fd(skel->maps.gpu_knames), hosts_fd = bpf_map__fd(skel->maps.gpu_khosts);
	struct bpftel_gpu_kernel_seen *ks = NULL;
	struct kernel_rows *kr;
	struct gpu_kname kn, again;
	ssize_t read;
	size_t nkr, i;

	*out = NULL;
	read = read_kernel_rows(skel->maps.gpu_kernels, rows, n, &kr, all);
	if (read < 0)
		return -1;
	nkr = (size_t)read;
	if (nkr) {
		qsort(kr, nkr, sizeof(*kr), bpftel_gpu_kernel_key_cmp);
		nkr = merge_kernels(kr, nkr);
		nkr = cap_per_process(kr, nkr, all);
	}
	if (nkr > KERNELS_LISTED) {
		nkr = trim_in_rounds(kr, nkr);
		*all = false;
	}
	if (nkr)
		ks = calloc(nkr, sizeof(*ks));
	if (!ks) {
		*all = *all && !nkr;
		free(kr);
		return 0;
	}
	for (i = 0; i < nkr; i++) {
		ks[i].key = kr[i].key;
		ks[i].k = kr[i].k;
		/* Whole only once its owner is written, last (gpu_kernel_named; named is
		 * the handle the name was given, another for a copy: gpu_kernel_function),
		 * and read the same twice: a name read while the program fills it in (the
		 * copy may take the name before the owner) is not this report's. */
		if (ks[i].key.api == GPU_KERNEL_DRIVER &&
		    !bpf_map_lookup_elem(names_fd, &ks[i].key, &kn) &&
		    kn.tgid == ks[i].key.tgid && kn.named &&
		    !bpf_map_lookup_elem(names_fd, &ks[i].key, &again) &&
		    !memcmp(&kn, &again, sizeof(kn))) {
			kn.name[sizeof(kn.name) - 1] = '\0';
			memcpy(ks[i].driver_name, kn.name, sizeof(kn.name));
			ks[i].driver_cut = kn.cut;
		}
		if (ks[i].key.api == GPU_KERNEL_RUNTIME &&
		    bpf_map_lookup_elem(hosts_fd, &ks[i].key, &ks[i].host))
			ks[i].host = 0;
	}
	free(kr);
	*out = ks;
	return (ssize_t)nkr;
}

__s64 bpftel_gpu_proc__outstanding(const struct bpftel_gpu_proc *p)
{
	__s64 sum = 0;
	int k;

	for (k = 0; k < GPU_MEM__COUNT; k++)
		sum = bpftel_add_sat_s64(sum, p->st.mem[k].outstanding_bytes);
	return sum;
}

static int cmp_outstanding(const void *a, const void *b)
{
	const struct bpftel_gpu_proc *pa = a, *pb = b;
	__s64 oa = bpftel_gpu_proc__outstanding(pa), ob = bpftel_gpu_proc__outstanding(pb);

	if (oa != ob)
		return oa < ob ? 1 : -1;
	return pa->pid < pb->pid ? -1 : pa->pid > pb->pid;
}

/* rows[0..n) once per process, by pid. A walk of gpu_procs restarts from its first key
 * when the key it stands on is deleted (a process's exec: gpu_exec_body), and lists
 * some processes twice. Returns the count. */
static size_t unique_rows(struct bpftel_gpu_proc *rows, size_t n)
{
	size_t i, out = 0;

	if (n)
		qsort(rows, n, sizeof(*rows), cmp_pid);
	for (i = 0; i < n; i++)
		if (!out || rows[out - 1].pid != rows[i].pid)
			rows[out++] = rows[i];
	return out;
}

/*
 * A process whose row was made again since the last report (it exec'd: the BPF side
 * dropped the old program's row and all it had) is a new program: what the reports
 * learnt of the old one (its kernels' names and series, its error series) goes, and
 * its counters begin again. So does what they learnt of one whose row is gone (it
 * exec'd, and its new program has not called yet): read between its exec and its new
 * program's first call, by the sweep's read, which leaves the kernels as they were (a
 * full report's forgets the absent's), it would not be told apart from the new
 * program at the next. rows sorted by pid. With the report lock.
 */
static void forget_reborn(struct bpftel_gpu *g, const struct bpftel_gpu_proc *rows, size_t n)
{
	struct pid_born *now = malloc((n ? n : 1) * sizeof(*now)), *was;
	size_t i, j = 0;

	if (!now)
		return; /* the next report compares with the last one's */
	for (i = 0; i < g->nborns; i++) {
		while (j < n && rows[j].pid < g->borns[i].pid)
			j++;
		if (j == n || rows[j].pid != g->borns[i].pid) {
			bpftel_gpu_kernels__forget(g->kernels, g->borns[i].pid);
			bpftel_gpu_errors__forget(g->errors, g->borns[i].pid);
		}
	}
	for (i = 0; i < n; i++) {
		now[i] = (struct pid_born){.pid = rows[i].pid, .born = rows[i].st.born_ns};
		was = g->nborns ? bsearch(&now[i], g->borns, g->nborns, sizeof(*g->borns), cmp_pid)
				: NULL;
		/* 0: a row read between its making and its stamp (gpu_proc()). Where the
		 * last report's was stamped, it is a row made again: another program. */
		if (was && was->born && was->born != now[i].born) {
			bpftel_gpu_kernels__forget(g->kernels, now[i].pid);
			bpftel_gpu_errors__forget(g->errors, now[i].pid);
		}
	}
	free(g->borns);
	g->borns = now;
	g->nborns = n;
}

/*
 * The rows whose process exec'd while the report read the other maps: gpu_exec_body
 * drops the old program's row, then its kernels, errors and allocations, so that a row
 * read before the exec may have been paired with none of them (its counts would go
 * down), or with the new program's (its first call made a row again). Gone, or born
 * again, such a row is left out of this report, with its kernels and errors: the last
 * report's values stand for the old program, and the new one is in the next. A row
 * read before its stamp (born_ns 0) is the same process. With g->lock. Returns the
 * rows kept.
 */
static size_t drop_reborn(int procs_fd, struct bpftel_gpu_proc *rows, size_t n,
			  struct bpftel_gpu_kernel_seen *ks, ssize_t *nks,
			  struct bpftel_gpu_error_seen *es, size_t *nes)
{
	struct gpu_proc_stats now;
	size_t i, j, k, out = 0;

	for (i = 0; i < n; i++) {
		bool same = !bpf_map_lookup_elem(procs_fd, &rows[i].pid, &now) &&
			    (!rows[i].st.born_ns || now.born_ns == rows[i].st.born_ns);

		if (same) {
			rows[out++] = rows[i];
			continue;
		}
		/* In order: the kernels and errors stay sorted as read. */
		for (j = k = 0; j < (size_t)*nks; j++)
			if (ks[j].key.tgid != rows[i].pid)
				ks[k++] = ks[j];
		*nks = (ssize_t)k;
		for (j = k = 0; j < *nes; j++)
			if (es[j].key.tgid != rows[i].pid)
				es[k++] = es[j];
		*nes = k;
	}
	return out;
}

/* What a report reads of the maps, under the report lock. */
struct report_read {
	struct bpftel_gpu_proc *rows;
	size_t n;
	struct bpftel_gpu_kernel_seen *ks;
	ssize_t nks;
	struct bpftel_gpu_error_seen *es;
	size_t nes;
	bool all_kernels;
};

static void report_read_free(struct report_read *r)
{
	free(r->rows);
	free(r->ks);
	free(r->es);
	*r = (struct report_read){0};
}

/* Under report_lock: 0 and r read, 1 when the module is not loaded (no rows), or an
 * error (nothing read). */
static int read_report(struct bpftel_gpu *g, struct report_read *r)
{
	struct bpftel_gpu_proc *grown;
	__u32 key, next, *prev = NULL;
	size_t steps, cap = 0;
	ssize_t nes;
	int fd, err;

	*r = (struct report_read){.all_kernels = true};
	pthread_mutex_lock(&g->lock);
	if (!g->loaded) {
		pthread_mutex_unlock(&g->lock);
		return 1;
	}
	if (g->state_gen_maps != g->maps_gen) { /* new maps: counts begin again */
		bpftel_gpu_kernels__reset(g->kernels);
		bpftel_gpu_errors__reset(g->errors);
		bpftel_gpu_series__reset(g->series);
		free(g->borns);
		g->borns = NULL;
		g->nborns = 0;
		g->state_gen_maps = g->maps_gen;
		g->state_gen++;
	}
	/* The processes first, their kernels after: a process's launches are in its
	 * kernels' rows (but for those the kernel map had no room for, in its stats), so
	 * its totals are the sums of the same rows its kernels are read from. */
	fd = bpf_map__fd(g->skel->maps.gpu_procs);
	/* An exec deletes its process's key (gpu_exec_body): a walk standing on it starts
	 * over, so that execs in a loop could keep it going; bounded as
	 * bpftel_gpu_map_walk is. A walk cut short fails the report: a process missing
	 * from it would be taken for gone, its series dropped and started again. */
	steps = 2 * (size_t)bpf_map__max_entries(g->skel->maps.gpu_procs) + 1;
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		if (!steps--) {
			pthread_mutex_unlock(&g->lock);
			report_read_free(r);
			return -EAGAIN;
		}
		key = next;
		prev = &key;
		if (r->n == cap) {
			cap = cap ? cap * 2 : 16;
			grown = realloc(r->rows, cap * sizeof(*r->rows));
			if (!grown) {
				pthread_mutex_unlock(&g->lock);
				report_read_free(r);
				return -ENOMEM;
			}
			r->rows = grown;
		}
		memset(&r->rows[r->n], 0, sizeof(r->rows[r->n]));
		if (bpf_map_lookup_elem(fd, &key, &r->rows[r->n].st))
			continue; /* deleted meanwhile */
		r->rows[r->n].pid = key;
		r->rows[r->n].shared_mem_counted = g->skel->rodata->gpu_launch_shared_mem;
		r->n++;
	}
	r->n = unique_rows(r->rows, r->n);
	if (g->seam && (err = g->seam(g->seam_arg))) {
		pthread_mutex_unlock(&g->lock);
		report_read_free(r);
		return err;
	}
	add_allocs(g->skel->maps.gpu_allocs, r->rows, r->n);
	nes = read_errors(g->skel->maps.gpu_errors, r->rows, r->n, &r->es);
	r->nes = nes < 0 ? 0 : (size_t)nes;
	r->nks = nes < 0 ? -EAGAIN : read_kernels(g->skel, r->rows, r->n, &r->ks, &r->all_kernels);
	if (r->nks >= 0)
		r->n = drop_reborn(fd, r->rows, r->n, r->ks, &r->nks, r->es, &r->nes);
	pthread_mutex_unlock(&g->lock);
	/* A process's launches or error kinds short: its counters would go down, or an
	 * error be counted twice. */
	if (r->nks < 0) {
		report_read_free(r);
		return -EAGAIN;
	}
	return 0;
}

/* What a report read becomes the state the next one is told against: the processes'
 * series, their error kinds and, unless kernels is false, their kernels. With
 * g->report_lock. */
static void apply_report(struct bpftel_gpu *g, struct report_read *r,
			 const struct bpftel_gpu_sym *syms, size_t nsyms, bool kernels)
{
	forget_reborn(g, r->rows, r->n);
	bpftel_gpu_series__update(g->series, r->rows, r->n);
	bpftel_gpu_errors__fill(g->errors, r->rows, r->n, r->es, r->nes);
	if (kernels)
		bpftel_gpu_kernels__fill_named(g->kernels, r->rows, r->n, r->ks,
					       (size_t)r->nks, r->all_kernels, syms, nsyms);
	g->state_gen++;
}

/*
 * The dead processes dead[0..ndead) (sorted) read one last time before the sweep
 * forgets them, with every other process, as a report reads them: what they counted
 * since the last scrape is then in the state (a folded process's in "other", a kernel
 * series' in its retired launches) instead of lost with their rows, and one that no
 * scrape saw is folded (gpu_series.h). With g->report_lock. False when the maps could
 * not be read whole: the dead are kept for the next sweep.
 * The kernels' state is left as the last report left it: this read names nothing (no
 * file is parsed under the report lock), and a kernel first seen by it would have its
 * launches so far counted as kernel="other" by a read no one was shown, then kept there
 * for good as its series' base when a report named it. The dead's kernels are forgotten
 * with them; what they launched after the last scrape is "other"'s by the processes'
 * series (gpu_series.h).
 */
static bool report_last(struct bpftel_gpu *g, const __u32 *dead, size_t ndead)
{
	struct report_read r;
	size_t i;

	if (read_report(g, &r))
		return false;
	for (i = 0; i < r.n; i++)
		r.rows[i].gone =
			bsearch(&r.rows[i].pid, dead, ndead, sizeof(*dead), cmp_pid) != NULL;
	apply_report(g, &r, NULL, 0, false);
	report_read_free(&r);
	return true;
}

int bpftel_gpu__processes(struct bpftel_gpu *g, struct bpftel_gpu_proc **out)
{
	struct bpftel_gpu_sym syms[BPFTEL_GPU_NAME_BUDGET];
	struct bpftel_gpu_proc *rows;
	struct report_read r;
	bool asked = false;
	size_t nsyms = 0, n;
	__u64 gen;
	int err;

	*out = NULL;
	pthread_mutex_lock(&g->report_lock);
	for (;;) {
		err = read_report(g, &r);
		if (err) {
			pthread_mutex_unlock(&g->report_lock);
			return err < 0 ? err : 0;
		}
		if (asked)
			break;
		/* Kernels are named from the processes' files, opened and parsed without
		 * the lock (a slow or hostile file system must not hold /metrics and the
		 * sweep up). A report that updated the state meanwhile read the maps after
		 * this one: this one reads again, so that counters never go down, and
		 * uses the names it parsed. */
		asked = true;
		/* One report names at a time: another (a /metrics scrape while `bpftel gpu`
		 * waits on a file) does not wait on the same files; it has the names known,
		 * the rest in kernel="other" until a report names them. */
		if (g->naming)
			break;
		nsyms = bpftel_gpu_kernels__wanted(g->kernels, r.ks, (size_t)r.nks, syms);
		if (!nsyms)
			break;
		gen = g->state_gen;
		g->naming = true;
		pthread_mutex_unlock(&g->report_lock);
		bpftel_gpu_kernels__symbolize(g->kernels, syms, nsyms);
		pthread_mutex_lock(&g->report_lock);
		g->naming = false;
		if (gen == g->state_gen)
			break;
		report_read_free(&r);
	}
	apply_report(g, &r, syms, nsyms, true);
	pthread_mutex_unlock(&g->report_lock);
	rows = r.rows;
	n = r.n;
	free(r.ks);
	free(r.es);
	if (n) {
		qsort(rows, n, sizeof(*rows), cmp_outstanding);
	} else { /* rows is NULL when there are none (a row listed, then gone) */
		free(rows);
		rows = NULL;
	}
	*out = rows;
	return (int)n;
}

/* <procfd>/<pid>/<name>, at most size - 1 bytes of it, NUL-terminated: its length, or a
 * negative errno. Non-blocking: something other than a /proc file there (a FIFO) must
 * not hold the sweep. */
static ssize_t read_proc(int procfd, __u32 pid, const char *name, char *buf, size_t size)
{
	char path[32];
	size_t len = 0;
	ssize_t r = 0;
	int fd, err;

	snprintf(path, sizeof(path), "%u/%s", pid, name);
	fd = openat(procfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	while (len < size - 1 && (r = read(fd, buf + len, size - 1 - len)) > 0)
		len += (size_t)r;
	err = r < 0 ? -errno : 0;
	close(fd);
	buf[len] = '\0';
	return err ? err : (ssize_t)len;
}

/* Gone for good: no such process (ENOENT), or one that exited as it was read (ESRCH). */
static bool gone(ssize_t r)
{
	return r == -ENOENT || r == -ESRCH;
}

bool bpftel_gpu_proc_alive(int procfd, __u32 pid, __u64 *start)
{
	unsigned long long st = 0, tgid = 0;
	char buf[1024], *p;
	ssize_t r;

	/* Field 22 is within the first 1 KiB: a 16-byte comm and 21 numbers before it. */
	r = read_proc(procfd, pid, "stat", buf, sizeof(buf));
	if (gone(r))
		return false;
	if (r <= 0 || !bpftel_proc_stat_parse(buf, 22, 1, &st) || !st)
		return true; /* cannot tell */
	if (*start && st != *start)
		return false; /* the pid is another process's now */
	/* Tgid is the fourth line, after Name (its comm escaped: 64 bytes at most). */
	r = read_proc(procfd, pid, "status", buf, sizeof(buf));
	if (gone(r))
		return false;
	p = r > 0 ? strstr(buf, "\nTgid:") : NULL;
	if (!p || sscanf(p + 6, "%llu", &tgid) != 1)
		return true;
	if (tgid != pid)
		return false; /* a thread of another process (kill() would answer for it) */
	*start = st;
	return true;
}

/* The maps whose keys begin with a process's tgid: what a sweep deletes of the dead. */
#define DEAD_MAPS 6

/* The keys of the dead processes in one of the module's maps, all found before any is
 * deleted: a sweep deletes all of a process's keys or none (sweep). */
struct dead_keys {
	const __u32 *dead; /* sorted */
	int ndead;
	size_t key_size;
	unsigned char *keys;
	size_t n, cap;
	bool nomem;
};

static int collect_dead(void *ctx, const void *key, const void *value)
{
	struct dead_keys *dk = ctx;
	unsigned char *grown;
	size_t cap;
	__u32 tgid;

	(void)value;
	memcpy(&tgid, key, sizeof(tgid));
	if (!bsearch(&tgid, dk->dead, dk->ndead, sizeof(*dk->dead), cmp_pid))
		return 0;
	if (dk->n == dk->cap) {
		cap = dk->cap ? 2 * dk->cap : 64;
		grown = realloc(dk->keys, cap * dk->key_size);
		if (!grown) {
			dk->nomem = true;
			return 1;
		}
		dk->keys = grown;
		dk->cap = cap;
	}
	memcpy(dk->keys + dk->n++ * dk->key_size, key, dk->key_size);
	return 0;
}

/*
 * The keys of map whose first 4 bytes (the tgid) is one of the dead pids: one read of
 * the map for all of them (64 dead processes walked the allocations' 16384 keys 64
 * times, seconds under the lock). In batches (map_batch.h): another process's frees
 * cannot start it over, as they could a walk of its keys, bounded and then failed at
 * every sweep while that process kept freeing. The keys' walk is what a kernel without
 * batch operations gets. False when the map was not read to its end: the processes are
 * swept again.
 */
static bool dead_keys_of(const struct bpf_map *map, struct dead_keys *dk)
{
	size_t steps = 0, max = 4 * (size_t)bpf_map__max_entries(map) + 1;
	unsigned char key[16], next[16], *prev = NULL;
	int fd = bpf_map__fd(map), err;

	dk->key_size = bpf_map__key_size(map);
	if (dk->key_size < sizeof(__u32) || dk->key_size > sizeof(key))
		return false;
	err = bpftel_map_batch_walk(fd, dk->key_size, bpf_map__value_size(map), collect_dead, dk);
	if (!bpftel_map_batch_unsupported(err))
		return !err && !dk->nomem;
	while (!bpf_map_get_next_key(fd, prev, next)) {
		if (steps++ == max || collect_dead(dk, next, NULL))
			return false;
		memcpy(key, next, dk->key_size);
		prev = key;
	}
	return !dk->nomem;
}

/* Is the thread of pid_tgid gone? A signal-less tgkill answers ESRCH when no thread of
 * that id runs in that process: it exited, or left its id by exec (a thread other than
 * the leader that execs takes the leader's id, and no exit is ever seen for its own). */
static bool thread_gone(__u64 pid_tgid)
{
	return syscall(SYS_tgkill, (pid_t)(pid_tgid >> 32), (pid_t)(__u32)pid_tgid, 0) &&
	       errno == ESRCH;
}

struct gone_walk {
	int fd;
	int dropped;
};

/* Delete key if its thread is gone: true when deleted. */
static bool drop_one_gone(struct gone_walk *gw, const void *key)
{
	__u64 pid_tgid;

	memcpy(&pid_tgid, key, sizeof(pid_tgid));
	if (!thread_gone(pid_tgid) || bpf_map_delete_elem(gw->fd, key))
		return false;
	gw->dropped++;
	return true;
}

static int drop_if_gone(void *ctx, const void *key, const void *value)
{
	(void)value;
	drop_one_gone(ctx, key);
	return 0;
}

/*
 * Delete every key of map (each beginning with a pid_tgid) whose thread is gone. The
 * task-exit program drops a thread's calls in flight and state when it exits; a
 * thread that execs inside a probed call never exits under its id, and its entries
 * stayed for good: a user exec'ing from calls on threads could fill gpu_inflight for
 * every process. In batches, or by a bounded walk of its keys (dead_keys_of()).
 */
static int drop_gone_threads(int fd, size_t key_size, size_t value_size, __u32 max_entries)
{
	size_t steps = 0, max = 4 * (size_t)max_entries + 1;
	char key[16], next[16], *prev = NULL;
	struct gone_walk gw = {.fd = fd};
	int err;

	if (key_size < sizeof(__u64) || key_size > sizeof(key))
		return 0;
	/* In batches: a delete (here, or a program's) does not start it over. */
	err = bpftel_map_batch_walk(fd, key_size, value_size, drop_if_gone, &gw);
	if (!bpftel_map_batch_unsupported(err))
		return gw.dropped;
	while (!bpf_map_get_next_key(fd, prev, next) && steps++ < max) {
		if (drop_one_gone(&gw, next))
			continue; /* deleted: the walk goes on from where it was */
		memcpy(key, next, key_size);
		prev = key;
	}
	return gw.dropped;
}

/*
 * Free the slots of gpu_thread_slots (bpf/lib/gpu_state.h) whose thread is gone without
 * an exit its probe saw (its process's exec or exit ran while gpu_procs had no room for
 * it), as drop_gone_threads() drops their keys. Read in batches: the array is
 * GPU_THREAD_SLOTS long, and this runs at every sweep. Each is freed by the module's
 * gpu_slot_free program, a compare-and-swap against the owner read here: a slot freed
 * and taken by another thread since is not touched.
 */
static int free_slot_if_gone(void *ctx, const void *key, const void *value)
{
	struct gpu_slot_free_args args = {};
	LIBBPF_OPTS(bpf_test_run_opts, run, .ctx_in = &args, .ctx_size_in = sizeof(args));
	struct gpu_thread_slot s;

	memcpy(&s, value, sizeof(s));
	if (!s.owner || !thread_gone(s.owner))
		return 0;
	memcpy(&args.idx, key, sizeof(args.idx));
	args.owner = s.owner;
	bpf_prog_test_run_opts(*(const int *)ctx, &run);
	return 0;
}

static void drop_gone_thread_slots(int fd, int prog_fd)
{
	bpftel_map_batch_walk(fd, sizeof(__u32), sizeof(struct gpu_thread_slot), free_slot_if_gone,
			      &prog_fd);
}

/* The threads' tables a sweep walks for threads gone (drop_gone_threads,
 * drop_gone_thread_slots), and the program that frees a slot, duplicated under g->lock
 * from the loaded object (-1: not), so that the walks (a tgkill per thread) hold no
 * lock: reports and /metrics wait on it. */
struct gpu_thread_fds {
	int inflight, threads, slots, slot_free;
	__u32 inflight_max, threads_max, inflight_value, threads_value;
};

static void thread_fds_dup(const struct gpu *skel, struct gpu_thread_fds *f)
{
	f->inflight = bpftel_fd_dup(bpf_map__fd(skel->maps.gpu_inflight));
	f->threads = bpftel_fd_dup(bpf_map__fd(skel->maps.gpu_threads));
	f->slots = bpftel_fd_dup(bpf_map__fd(skel->maps.gpu_thread_slots));
	f->slot_free = bpftel_fd_dup(bpf_program__fd(skel->progs.gpu_slot_free));
	f->inflight_max = bpf_map__max_entries(skel->maps.gpu_inflight);
	f->threads_max = bpf_map__max_entries(skel->maps.gpu_threads);
	f->inflight_value = bpf_map__value_size(skel->maps.gpu_inflight);
	f->threads_value = bpf_map__value_size(skel->maps.gpu_threads);
}

/* Walk what was duplicated (a table whose fd could not be is the next sweep's), and
 * close it. How many entries of the calls in flight and the threads' state it deleted,
 * which the programs do not see (their owners' counts are the recount's); the slots
 * it frees, gpu_slot_free gives back. */
static int drop_gone_all(struct gpu_thread_fds *f)
{
	int dropped = 0;

	if (f->inflight >= 0)
		dropped += drop_gone_threads(f->inflight, sizeof(struct gpu_call_key),
					     f->inflight_value, f->inflight_max);
	if (f->threads >= 0)
		dropped += drop_gone_threads(f->threads, sizeof(__u64), f->threads_value,
					     f->threads_max);
	if (f->slots >= 0 && f->slot_free >= 0)
		drop_gone_thread_slots(f->slots, f->slot_free);
	bpftel_fd_close(&f->inflight);
	bpftel_fd_close(&f->threads);
	bpftel_fd_close(&f->slots);
	bpftel_fd_close(&f->slot_free);
	return dropped;
}

static void gpu_housekeeping(struct bpftel_module *m)
{
	struct bpftel_gpu *g = bpftel_module__priv(m);
	bool dropped = bpftel_gpu__sweep(g) > 0;

	/* Processes dropped, or threads' entries: their owners' counts are recounted. */
	dropped |= __atomic_exchange_n(&g->threads_dropped, false, __ATOMIC_RELAXED);
	gpu_shares_housekeeping(g, dropped);
}

static int cmp_start(const void *a, const void *b)
{
	__u32 x = ((const struct proc_start *)a)->pid, y = ((const struct proc_start *)b)->pid;

	return x < y ? -1 : x > y;
}

#define SWEEP_MAX_DEAD 64 /* processes dropped per sweep at most: the rest at the next */
#define SWEEP_LAST_READ_TRIES 3 /* sweeps that try to read the dead's last counts */

/* A process dropped for good: its pid's start time is forgotten, so that a new process
 * given the pid is recorded as itself at the next sweep, not taken for the dead one
 * again and dropped at every sweep. With the sweep lock. */
static void start_forget(struct bpftel_gpu *g, __u32 pid)
{
	struct proc_start key = {.pid = pid}, *was;

	was = g->nstarts ? bsearch(&key, g->starts, g->nstarts, sizeof(*g->starts), cmp_start)
			 : NULL;
	if (was)
		was->start = 0;
}

/*
 * A pid whose process is not the one a sweep saw (another start time) whose row was
 * made after the process now holding it started: the old process's row went at the
 * new one's exec (gpu_exec_body), and the new one made this one since, between two
 * sweeps. Its start is recorded (*start) and the row kept: dropped, it would take the
 * new process's live allocations with it. A row older than the process (a fork that
 * called CUDA without exec, or a row read before its stamp) is the old one's. Both on
 * the boot clock: the start in clock ticks since boot, born_ns bpf_ktime_get_boot_ns
 * (a suspend in between moves neither); the start rounded down to its tick, so a row
 * made in the process's first tick is the process's.
 */
static bool reborn_since(int procs_fd, int procfd, __u32 pid, __u64 *start)
{
	struct gpu_proc_stats st;
	long hz = sysconf(_SC_CLK_TCK);
	__u64 fresh = 0;

	if (procs_fd < 0 || hz <= 0 || !bpftel_gpu_proc_alive(procfd, pid, &fresh) || !fresh ||
	    bpf_map_lookup_elem(procs_fd, &pid, &st) || !st.born_ns ||
	    st.born_ns < fresh * (1000000000ull / (__u64)hz))
		return false;
	*start = fresh;
	return true;
}

/*
 * The processes in gpu_procs are listed under the lock, looked up in /proc without it
 * (reads of other processes' files), and the dead dropped under it again, if the BPF
 * object is still the one listed. starts (the start time each process had when first
 * seen) follows gpu_procs: a pid no longer there is forgotten.
 */
int bpftel_gpu__sweep(struct bpftel_gpu *g)
{
	struct proc_start *now = NULL, *was;
	__u32 key, next, *prev = NULL, dead[SWEEP_MAX_DEAD];
	struct gpu_thread_fds threads = {-1, -1, -1, -1, 0, 0, 0, 0};
	struct dead_keys dk[DEAD_MAPS] = {};
	struct bpf_map *maps[DEAD_MAPS];
	size_t n = 0, cap = 0, i, j, k, steps;
	int fd, procs_fd, ndead = 0, dropped = 0;
	bool partial = false, all, same, unread;
	__u64 opens;

	pthread_mutex_lock(&g->sweep_lock); /* one at a time: starts is the sweep's */
	pthread_mutex_lock(&g->lock);
	if (!g->loaded) {
		pthread_mutex_unlock(&g->lock);
		pthread_mutex_unlock(&g->sweep_lock);
		return 0;
	}
	opens = g->opens;
	if (g->starts_maps != g->maps_gen) {
		/* Recorded against maps gone: a pid's process may have exited and another
		 * taken its pid while the module was stopped. */
		free(g->starts);
		g->starts = NULL;
		g->nstarts = 0;
		g->starts_maps = g->maps_gen;
	}
	fd = bpf_map__fd(g->skel->maps.gpu_procs);
	/* A sweep deletes from gpu_procs under the lock, and an exec from BPF
	 * (gpu_exec_body): a walk that restarts lists a process twice (made once below),
	 * and is bounded (those not reached are swept later). */
	steps = 2 * (size_t)bpf_map__max_entries(g->skel->maps.gpu_procs) + 1;
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		if (!steps--) {
			partial = true; /* those listed are swept; the rest later */
			break;
		}
		key = next;
		prev = &key;
		if (n == cap) {
			struct proc_start *grown;

			cap = cap ? cap * 2 : 64;
			grown = realloc(now, cap * sizeof(*now));
			if (!grown) {
				partial = true; /* those listed are swept; the rest later */
				break;
			}
			now = grown;
		}
		now[n++] = (struct proc_start){.pid = key};
	}
	procs_fd = bpftel_fd_dup(fd); /* rows read without the lock: reborn_since */
	pthread_mutex_unlock(&g->lock);
	if (n)
		qsort(now, n, sizeof(*now), cmp_start);
	for (i = j = 0; i < n; i++) /* once each: a walk that restarted lists some twice */
		if (!j || now[j - 1].pid != now[i].pid)
			now[j++] = now[i];
	n = j;
	for (i = 0; i < n; i++) {
		was = g->nstarts ? bsearch(&now[i], g->starts, g->nstarts, sizeof(*g->starts),
					   cmp_start)
				 : NULL;
		now[i].start = was ? was->start : 0;
		if (!bpftel_gpu_proc_alive(g->procfd, now[i].pid, &now[i].start) &&
		    !(was && reborn_since(procs_fd, g->procfd, now[i].pid, &now[i].start)) &&
		    ndead < SWEEP_MAX_DEAD)
			dead[ndead++] = now[i].pid;
	}
	bpftel_fd_close(&procs_fd);
	if (!partial) {
		free(g->starts);
		g->starts = now;
		g->nstarts = n;
	} else { /* what was known is kept; those first seen now are recorded later */
		free(now);
	}
	/* Not while a report runs: one that read the process before it is forgotten
	 * would remember it again (a report naming kernels meanwhile reads again: the
	 * generation below). The housekeeping thread does not wait for a report; the
	 * dead are dropped next time. */
	if (pthread_mutex_trylock(&g->report_lock)) {
		pthread_mutex_unlock(&g->sweep_lock);
		return 0;
	}
	qsort(dead, ndead, sizeof(*dead), cmp_pid);
	/* Their last counts unread (the maps changed under the read: execs in a loop can
	 * keep that up): the next sweeps look again, a few; then they go all the same,
	 * counted, or a user could keep every process's dead rows in the tables. */
	unread = ndead && !report_last(g, dead, (size_t)ndead);
	if (unread && ++g->last_reads_failed < SWEEP_LAST_READ_TRIES)
		ndead = 0;
	else if (ndead) /* read, or let go unread: the next dead get their tries */
		g->last_reads_failed = 0;
	pthread_mutex_lock(&g->lock);
	same = g->loaded && g->opens == opens;
	if (!same)
		ndead = 0; /* restarted meanwhile: the next sweep looks again */
	/* Their keys first: the processes stay listed (and are swept again) until none
	 * is left, so that none outlives its process to be counted as a new process's of
	 * the same pid. */
	/* All of them found, then deleted: a process whose kernels' rows went while its
	 * row stayed (a map not read whole) would be reported with its launches, summed
	 * from those rows, gone down. None when the module stopped meanwhile (no object:
	 * ndead is 0 then). */
	all = true;
	if (ndead) {
		maps[0] = g->skel->maps.gpu_allocs;
		maps[1] = g->skel->maps.gpu_errors;
		maps[2] = g->skel->maps.gpu_ctxs;
		maps[3] = g->skel->maps.gpu_kernels;
		maps[4] = g->skel->maps.gpu_knames;
		maps[5] = g->skel->maps.gpu_khosts;
		for (i = 0; all && i < DEAD_MAPS; i++) {
			dk[i] = (struct dead_keys){.dead = dead, .ndead = ndead};
			all = dead_keys_of(maps[i], &dk[i]);
		}
		for (i = 0; i < DEAD_MAPS; i++) {
			for (k = 0; all && k < dk[i].n; k++)
				bpf_map_delete_elem(bpf_map__fd(maps[i]),
						    dk[i].keys + k * dk[i].key_size);
			free(dk[i].keys);
		}
	}
	if (same) /* not an object being loaded, nor one that failed to */
		thread_fds_dup(g->skel, &threads);
	for (i = 0; all && i < (size_t)ndead; i++) {
		bpf_map_delete_elem(fd, &dead[i]);
		bpftel_gpu_kernels__forget(g->kernels, dead[i]);
		bpftel_gpu_errors__forget(g->errors, dead[i]);
		start_forget(g, dead[i]);
		dropped++;
	}
	if (dropped) /* a report that read them before must read again */
		g->state_gen++;
	if (unread) /* forgotten without their last counts */
		__atomic_add_fetch(&g->exits_unread, (__u64)dropped, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&g->lock);
	pthread_mutex_unlock(&g->report_lock);
	/* Threads gone unseen, whatever process they were of: no row is touched. Their
	 * entries leave their owners' shares at the next recount, at once. */
	if (same && drop_gone_all(&threads) > 0)
		__atomic_store_n(&g->threads_dropped, true, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&g->sweep_lock);
	return dropped;
}
