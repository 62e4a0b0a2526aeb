/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The GPU module's BPF code: its maps and every probe body, for the programs of
 * bpf/gpu.bpf.c and for the BPF_PROG_TEST_RUN harness (tests/bpf/progs/gpu_harness.bpf.c),
 * which runs the same bodies on synthetic registers.
 *
 * Entry probes count the call and remember its arguments per thread (all but the
 * launches, whose return needs only its code); return probes pair with them, count
 * error codes (cudaError_t for the runtime, CUresult for the driver), and account
 * allocations, copies, waits and devices. Everything is aggregated in maps here: a
 * kernel launch costs a few map lookups and atomic adds, never a ring-buffer record.
 * Every body is an inline function of (regs, pid_tgid, now, function); what the verifier
 * would walk again at each call site is a global function (gpu_exit_call, and in
 * gpu_state.h and gpu_memory.h the retries of gpu_add_sat and gpu_peak_raise). The maps and
 * shared steps are in gpu_state.h, memory in gpu_memory.h, the driver's own bodies in
 * gpu_driver.h.
 *
 * Include after vmlinux.h, the libbpf headers, gpu.h and telemetry/telemetry.bpf.h.
 */
#ifndef BPFTEL_LIB_GPU_PROBES_H
#define BPFTEL_LIB_GPU_PROBES_H

#include "gpu_state.h"
#include "gpu_memory.h"
#include "gpu_driver.h"

/*
 * cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t sharedMem,
 *                  cudaStream_t stream), and cudaLaunchCooperativeKernel with the same
 * arguments. x86-64 passes each 12-byte dim3 in two registers
 * (x | y << 32, then z): grid in rsi, rdx; block in rcx, r8; args in r9; sharedMem is
 * the first stack argument, at sp + 8 on entry (sp points at the return address).
 */
static __always_inline int gpu_launch_enter_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
						 enum gpu_func func, __u32 dev)
{
	__u64 grid_xy = PT_REGS_PARM2(regs), grid_z = (__u32)PT_REGS_PARM3(regs);
	__u64 block_xy = PT_REGS_PARM4(regs), block_z = (__u32)PT_REGS_PARM5(regs);
	__u32 g[3] = {grid_xy, grid_xy >> 32, grid_z}, b[3] = {block_xy, block_xy >> 32, block_z};
	__u64 shared = 0, sp = PT_REGS_SP(regs);

	/* Read now: a context pointer kept across the calls below may be spilled as
	 * ctx + offset, which the verifier refuses to dereference. */
	barrier_var(sp);

	/* The hot call: no in-flight entry, its return needs only the return code. */
	gpu_count_launch(TLM_ARG, pid_tgid, func, GPU_KERNEL_RUNTIME, PT_REGS_PARM1(regs), dev, g,
			 b);
	if (gpu_launch_shared_mem &&
	    !tlm_probe_read_user(&shared, sizeof(shared), (void *)(sp + 8)))
		gpu_count_shared_mem(TLM_ARG, pid_tgid, shared);
	return 0;
}

/*
 * cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
 * and cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args):
 * the sizes are in the config, read from the caller's memory. Both configs begin alike
 * (cuda.h and driver_types.h, ABI since CUDA 12.0 and 11.8): grid x, y, z and block x,
 * y, z as 32-bit words, then the dynamic shared memory, a 32-bit word in the driver's
 * and a size_t in the runtime's, whose low half (little-endian) is the same word. An
 * unreadable config: the launch counts, its threads do not. api: which kind of
 * function handle the second argument is (enum gpu_kernel_api).
 */
struct gpu_launch_config {
	__u32 grid[3];
	__u32 block[3];
	__u32 shared_mem_bytes;
};

static __always_inline int gpu_launch_config_enter_body(TLM_PARAM, struct pt_regs *regs,
							__u64 pid_tgid, enum gpu_func func,
							__u32 api, __u32 dev)
{
	struct gpu_launch_config c = {};
	bool read = !tlm_probe_read_user(&c, sizeof(c), (void *)PT_REGS_PARM1(regs));

	if (!read) /* zeros: no thread counted, no size */
		__builtin_memset(&c, 0, sizeof(c));
	gpu_count_launch(TLM_ARG, pid_tgid, func, api, PT_REGS_PARM2(regs), dev, c.grid, c.block);
	if (gpu_launch_shared_mem && read)
		gpu_count_shared_mem(TLM_ARG, pid_tgid, c.shared_mem_bytes);
	return 0;
}

/* Calls that make a handle from another: where the new one goes, and what it is made
 * from. __cudaGetKernel(cudaKernel_t *handle, const void *hostFun) and
 * cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel). */
static __always_inline int gpu_handle_enter_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
						 __u64 now, enum gpu_func func)
{
	gpu_call_begin(TLM_ARG, pid_tgid, func, now, PT_REGS_PARM1(regs), PT_REGS_PARM2(regs));
	return 0;
}

/* It succeeded: cudaLaunchKernel calls given this handle launch that host function's
 * kernel, named by its symbol (user/modules/gpu/gpu_kernels.c). */
static __always_inline void gpu_kernel_handle(TLM_PARAM, __u64 pid_tgid, const struct gpu_call *call)
{
	struct gpu_kernel_key key = {.tgid = pid_tgid >> 32, .api = GPU_KERNEL_RUNTIME};
	__u64 host = call->arg1;

	if (tlm_probe_read_user(&key.func, sizeof(key.func), (void *)call->arg0) || !key.func)
		return;
	tlm_map_update(gpu_khosts, &key, &host, BPF_ANY);
}

/* Every allocation: (where the pointer goes, size, ...). cudaMalloc(void **devPtr,
 * size_t), cudaMallocAsync(.., cudaStream_t), cudaMallocFromPoolAsync(.., pool, stream),
 * cudaMallocManaged(.., unsigned flags), cudaMallocHost(void **ptr, size_t),
 * cudaHostAlloc(.., unsigned flags), cuMemAlloc_v2(CUdeviceptr *, size_t),
 * cuMemAllocAsync(.., CUstream), cuMemAllocFromPoolAsync(.., pool, stream),
 * cuMemAllocManaged(.., unsigned flags), cuMemAllocHost_v2(void **, size_t). */
static __always_inline int gpu_alloc_enter_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
						__u64 now, enum gpu_func func)
{
	gpu_call_begin(TLM_ARG, pid_tgid, func, now, PT_REGS_PARM1(regs), PT_REGS_PARM2(regs));
	return 0;
}

/* Every free: (pointer, ...). cudaFree, cudaFreeAsync(.., stream), cudaFreeHost,
 * cuMemFree_v2, cuMemFreeAsync(.., stream), cuMemFreeHost. */
static __always_inline int gpu_free_enter_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
					       __u64 now, enum gpu_func func)
{
	gpu_free_begin(TLM_ARG, pid_tgid, func, now, PT_REGS_PARM1(regs));
	return 0;
}

/* cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind), and
 * cudaMemcpyAsync with a stream after kind; cuMemcpyHtoD_v2(dst, src, size_t count)
 * and the other driver copies, whose direction is in their name (and a stream after
 * count for the Async ones), cuMemcpy(Async)'s inferred from unified addresses. */
static __always_inline int gpu_memcpy_enter_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
						 __u64 now, enum gpu_func func)
{
	__u64 kind;

	switch (func) {
	case GPU_FN_CU_MEMCPY_HTOD:
	case GPU_FN_CU_MEMCPY_HTOD_ASYNC:
		kind = GPU_MEMCPY_H2D;
		break;
	case GPU_FN_CU_MEMCPY_DTOH:
	case GPU_FN_CU_MEMCPY_DTOH_ASYNC:
		kind = GPU_MEMCPY_D2H;
		break;
	case GPU_FN_CU_MEMCPY_DTOD:
	case GPU_FN_CU_MEMCPY_DTOD_ASYNC:
		kind = GPU_MEMCPY_D2D;
		break;
	case GPU_FN_CU_MEMCPY:
	case GPU_FN_CU_MEMCPY_ASYNC:
		kind = GPU_MEMCPY_DEFAULT;
		break;
	default:
		kind = (__u32)PT_REGS_PARM4(regs);
		break;
	}
	gpu_call_begin(TLM_ARG, pid_tgid, func, now, PT_REGS_PARM3(regs), kind);
	return 0;
}

/* Calls whose return needs their entry time and at most their first argument:
 * cudaStreamSynchronize(stream), cudaDeviceSynchronize(void), cudaEventSynchronize(event),
 * cudaSetDevice(int), cuCtxSynchronize(void), cuCtxSynchronize_v2(ctx),
 * cuStreamSynchronize(stream), cuEventSynchronize(event), cuInit(flags),
 * cuCtxSetCurrent(ctx), cuCtxPushCurrent_v2(ctx). */
static __always_inline int gpu_simple_enter_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
						 __u64 now, enum gpu_func func)
{
	__u64 arg0 = PT_REGS_PARM1(regs);

	gpu_call_begin(TLM_ARG, pid_tgid, func, now, arg0, (__s32)arg0);
	return 0;
}

/* The synchronous copies (not the Async ones), whose time inside the call is counted. */
static __always_inline bool gpu_memcpy_sync(enum gpu_func func)
{
	return func == GPU_FN_MEMCPY || func == GPU_FN_CU_MEMCPY_HTOD ||
	       func == GPU_FN_CU_MEMCPY_DTOH || func == GPU_FN_CU_MEMCPY_DTOD ||
	       func == GPU_FN_CU_MEMCPY;
}

/*
 * Every entry probe, by function: the one uprobe program runs this with the function
 * its attachment's cookie names (enum gpu_func), and the test harness with the one it
 * tests. A function it does not know costs nothing. A runtime entry raises the thread's
 * runtime depth; a driver entry at a raised depth, below the runtime call's frame, is
 * the runtime's own and is skipped (gpu_state.h).
 */
static __always_inline int gpu_enter_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
					  __u64 now, __u64 fn)
{
	enum gpu_func func = (enum gpu_func)fn;
	__u64 sp = PT_REGS_SP(regs);
	struct gpu_proc_stats *st;
	struct gpu_thread *th;
	__u32 tgid = pid_tgid >> 32;

	if (fn >= GPU_FN__COUNT)
		return 0;
	/* The thread's state, looked up once: the depth, and the device launches go to. */
	th = gpu_thread_find(pid_tgid);
	if (gpu_fn_driver(fn)) {
		if (gpu_thread_in_runtime(th, sp)) {
			st = bpf_map_lookup_elem(&gpu_procs, &tgid);
			if (!st)
				return 0;
			__sync_fetch_and_add(&st->driver_nested, 1);
			if (func == GPU_FN_CU_PRIMARY_CTX_RETAIN)
				gpu_ctx_nested_begin(TLM_ARG, st, regs, pid_tgid, now);
			return 0;
		}
	} else {
		if (!th)
			th = gpu_thread_get(TLM_ARG, pid_tgid);
		if (th)
			gpu_runtime_enter(th, sp);
	}
	if (gpu_alloc_kind(func) < GPU_MEM__COUNT)
		return gpu_alloc_enter_body(TLM_ARG, regs, pid_tgid, now, func);
	if (gpu_is_free(func))
		return gpu_free_enter_body(TLM_ARG, regs, pid_tgid, now, func);
	if (gpu_fn_memcpy(func))
		return gpu_memcpy_enter_body(TLM_ARG, regs, pid_tgid, now, func);
	switch (func) {
	case GPU_FN_LAUNCH:
	case GPU_FN_LAUNCH_COOP:
		return gpu_launch_enter_body(TLM_ARG, regs, pid_tgid, func,
					     gpu_thread_dev_slot(th, fn));
	case GPU_FN_CU_LAUNCH:
	case GPU_FN_CU_LAUNCH_COOP:
		return gpu_cu_launch_enter_body(TLM_ARG, regs, pid_tgid, func,
						gpu_thread_dev_slot(th, fn));
	case GPU_FN_LAUNCH_EX:
		return gpu_launch_config_enter_body(TLM_ARG, regs, pid_tgid, func,
						    GPU_KERNEL_RUNTIME, gpu_thread_dev_slot(th, fn));
	case GPU_FN_CU_LAUNCH_EX:
		return gpu_launch_config_enter_body(TLM_ARG, regs, pid_tgid, func,
						    GPU_KERNEL_DRIVER, gpu_thread_dev_slot(th, fn));
	case GPU_FN_GRAPH_LAUNCH:
	case GPU_FN_CU_GRAPH_LAUNCH:
		/* Counted; the graph's kernels are launched inside the driver, unseen. */
		gpu_call_count(TLM_ARG, pid_tgid, func);
		return 0;
	case GPU_FN_GET_KERNEL:
	case GPU_FN_CU_KERNEL_GET_FUNCTION:
		return gpu_handle_enter_body(TLM_ARG, regs, pid_tgid, now, func);
	case GPU_FN_CU_CTX_CREATE:
	case GPU_FN_CU_CTX_CREATE_V4:
	case GPU_FN_CU_PRIMARY_CTX_RETAIN:
		return gpu_ctx_make_enter_body(TLM_ARG, regs, pid_tgid, now, func);
	case GPU_FN_CU_MODULE_GET_FUNCTION:
	case GPU_FN_CU_LIBRARY_GET_KERNEL:
		return gpu_get_function_enter_body(TLM_ARG, regs, pid_tgid, now, func);
	default:
		return gpu_simple_enter_body(TLM_ARG, regs, pid_tgid, now, func);
	}
}

/* A runtime call returns: the thread leaves it (a return whose entry we did not see,
 * attached mid-call, finds depth 0 and leaves it so). */
static __always_inline void gpu_runtime_leave(__u64 pid_tgid)
{
	struct gpu_thread *th = gpu_thread_find(pid_tgid);

	if (th && th->rt_depth)
		th->rt_depth--;
}

/* What a successful call did, by function. */
static __always_inline void gpu_account(TLM_PARAM, struct gpu_proc_stats *st, __u64 pid_tgid,
					enum gpu_func func, const struct gpu_call *call, __u64 now)
{
	__u32 kind = gpu_alloc_kind(func);

	if (kind < GPU_MEM__COUNT) {
		gpu_account_alloc(TLM_ARG, st, pid_tgid, func, call, now, kind);
		return;
	}
	if (gpu_is_free(func)) {
		gpu_account_free(TLM_ARG, st, call);
		return;
	}
	if (gpu_fn_memcpy(func)) {
		kind = call->arg1 < GPU_MEMCPY__COUNT ? call->arg1 : GPU_MEMCPY_DEFAULT;
		gpu_add_sat(&st->memcpy_bytes[kind], call->arg0);
		if (gpu_memcpy_sync(func))
			__sync_fetch_and_add(&st->memcpy_ns, now - call->ktime_ns);
		return;
	}
	switch (func) {
	case GPU_FN_STREAM_SYNC:
	case GPU_FN_DEVICE_SYNC:
	case GPU_FN_EVENT_SYNC:
	case GPU_FN_CU_CTX_SYNC:
	case GPU_FN_CU_STREAM_SYNC:
	case GPU_FN_CU_EVENT_SYNC:
		__sync_fetch_and_add(&st->sync_ns, now - call->ktime_ns);
		break;
	case GPU_FN_SET_DEVICE:
		gpu_thread_set_device(TLM_ARG, st, pid_tgid, (__s32)call->arg1, true);
		break;
	case GPU_FN_CU_CTX_CREATE:
	case GPU_FN_CU_CTX_CREATE_V4:
	case GPU_FN_CU_PRIMARY_CTX_RETAIN:
		gpu_ctx_made(TLM_ARG, st, pid_tgid, func, call);
		break;
	case GPU_FN_CU_CTX_SET_CURRENT:
	case GPU_FN_CU_CTX_PUSH_CURRENT:
		gpu_ctx_current(TLM_ARG, st, pid_tgid, call);
		break;
	case GPU_FN_CU_MODULE_GET_FUNCTION:
	case GPU_FN_CU_LIBRARY_GET_KERNEL:
		gpu_kernel_named(TLM_ARG, pid_tgid, call);
		break;
	case GPU_FN_CU_KERNEL_GET_FUNCTION:
		gpu_kernel_function(TLM_ARG, pid_tgid, call);
		break;
	case GPU_FN_GET_KERNEL:
		gpu_kernel_handle(TLM_ARG, pid_tgid, call);
		break;
	default:
		break;
	}
}

/* Every return probe: pair with the entry, count the error, account what succeeded. */
static __always_inline int gpu_ret_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid, __u64 now,
					__u64 fn)
{
	enum gpu_func func = (enum gpu_func)fn;
	int rc = (int)PT_REGS_RC(regs);
	struct gpu_proc_stats *st;
	struct gpu_call call = {};
	__u32 tgid = pid_tgid >> 32;

	if (fn >= GPU_FN__COUNT)
		return 0; /* a cookie we did not set */
	if (!gpu_fn_driver(fn))
		gpu_runtime_leave(pid_tgid);
	else if (gpu_in_runtime(pid_tgid, PT_REGS_SP(regs) - 8)) {
		/* The runtime's own call (its entry's sp: 8 below, the return address
		 * popped): its entry was skipped too, but for its context's device. */
		if (func == GPU_FN_CU_PRIMARY_CTX_RETAIN)
			gpu_ctx_nested_end(TLM_ARG, pid_tgid, rc);
		return 0;
	}
	if (gpu_fn_entry_only(func) && !rc)
		return 0; /* the hot path: a launch that succeeded was counted at its entry */
	if (!gpu_fn_entry_only(func) && !gpu_call_end(TLM_ARG, pid_tgid, func, &call)) {
		/* No record (no room at its entry: calls_untracked; or it began before the
		 * probe): nothing to account, but a failure is still one. */
		st = rc ? bpf_map_lookup_elem(&gpu_procs, &tgid) : NULL;
		if (st)
			gpu_count_error(TLM_ARG, st, pid_tgid, func, rc);
		return 0;
	}
	st = bpf_map_lookup_elem(&gpu_procs, &tgid);
	if (!st)
		return 0;
	if (rc) {
		if (gpu_is_free(func))
			gpu_free_failed(TLM_ARG, st, tgid, func, &call, rc);
		gpu_count_error(TLM_ARG, st, pid_tgid, func, rc);
		return 0;
	}
	gpu_account(TLM_ARG, st, pid_tgid, func, &call, now);
	return 0;
}

/* The thread's call of f in flight, if any, dropped (gpu_task_exit_body). A global
 * function, verified once per program: inlined, the loop below had the verifier walk
 * its body 56 times. */
__noinline int gpu_exit_call(__u32 __tlm_prog, __u64 pid_tgid, __u32 f)
{
	struct gpu_call_key key = {.pid_tgid = pid_tgid, .func = f};
	__u32 tgid = pid_tgid >> 32;
	struct gpu_proc_stats *st;
	struct gpu_call *c, call;

	c = bpf_map_lookup_elem(&gpu_inflight, &key);
	if (!c)
		return 0;
	call = *c;
	if (tlm_map_delete(gpu_inflight, &key))
		return 0;
	fair_share_give(GPU_SHARE_CALLS_IN_FLIGHT, call.owner);
	st = gpu_is_free(f) ? bpf_map_lookup_elem(&gpu_procs, &tgid) : NULL;
	if (st)
		gpu_free_failed(TLM_ARG, st, tgid, (enum gpu_func)f, &call, 0);
	return 0;
}

/* A thread that dies inside a call leaves its entries behind: drop them, and the
 * thread's state. A free it died in took its allocation's record: the record goes back,
 * as for a failed free (whether the library freed it is not known: outstanding rather
 * than lost, and freed by a later free of the pointer). Only threads of processes that
 * used CUDA get past gpu_procs' lookup. */
static __always_inline int gpu_task_exit_body(TLM_PARAM, __u64 pid_tgid)
{
	__u32 tgid = pid_tgid >> 32, f;

	/* Its slot first, whatever gpu_procs holds (a process it had no room for still has
	 * threads' state): an array lookup, on every thread's exit on the host. */
	gpu_thread_drop(TLM_ARG, pid_tgid);
	if (!bpf_map_lookup_elem(&gpu_procs, &tgid))
		return 0;
	for (f = 0; f < GPU_FN__USED; f++)
		gpu_exit_call(TLM_ARG, pid_tgid, f);
	return 0;
}

/* What gpu_exec_body's callbacks share: the process, and the program a failed delete
 * is counted under. */
struct gpu_exec_ctx {
	__u32 tgid;
	__u32 prog;
};

/* A bpf_for_each_map_elem callback for map, whose keys begin with the process's tgid
 * (__u32), or its pid_tgid (__u64) when by_thread: drop the process's entries. Each
 * entry of the threads' state and of the calls in flight goes back to the share of its
 * owner, which it names (owner_of(value), read before the delete frees it); those of
 * the other maps are given back by the process's counts (gpu_exec_body). */
#define GPU_DROP_CB(map, by_thread, table, owner_of)                                      \
	static long gpu_drop_##map(struct bpf_map *m, const void *key, void *value,       \
				   struct gpu_exec_ctx *c)                                \
	{                                                                                 \
		__u32 __tlm_prog = c->prog;                                               \
		__u32 tgid = by_thread ? *(const __u64 *)key >> 32 : *(const __u32 *)key; \
		__u32 owner;                                                              \
                                                                                          \
		(void)m;                                                                  \
		if (tgid != c->tgid)                                                      \
			return 0;                                                         \
		owner = owner_of(value);                                                  \
		if (!tlm_map_take(map, key)) /* -ENOENT: a free or sweep took it first */ \
			fair_share_give(table, owner);                                    \
		return 0;                                                                 \
	}

#define GPU_NO_OWNER(value)	  0 /* fair_share_give: nothing for owner 0 */
#define GPU_CALL_OWNER(value)	  (((const struct gpu_call *)(value))->owner)
#define GPU_THREAD_OWNER(value) (((const struct gpu_thread *)(value))->owner)

GPU_DROP_CB(gpu_allocs, false, GPU_SHARE_ALLOCS, GPU_NO_OWNER)
GPU_DROP_CB(gpu_errors, false, GPU_SHARE_ERROR_KINDS, GPU_NO_OWNER)
GPU_DROP_CB(gpu_ctxs, false, 0, GPU_NO_OWNER)
GPU_DROP_CB(gpu_kernels, false, GPU_SHARE_KERNEL_ROWS, GPU_NO_OWNER)
GPU_DROP_CB(gpu_knames, false, 0, GPU_NO_OWNER)
GPU_DROP_CB(gpu_khosts, false, 0, GPU_NO_OWNER)
GPU_DROP_CB(gpu_inflight, true, GPU_SHARE_CALLS_IN_FLIGHT, GPU_CALL_OWNER)
GPU_DROP_CB(gpu_threads, true, GPU_SHARE_THREADS, GPU_THREAD_OWNER)

static long gpu_drop_thread_slot(struct bpf_map *m, const __u32 *idx,
				 struct gpu_thread_slot *s, struct gpu_exec_ctx *c)
{
	__u64 owner = s->owner;

	(void)m;
	(void)idx;
	if (owner && owner >> 32 == c->tgid)
		gpu_thread_slot_release(s, owner);
	return 0;
}

/*
 * A process that used CUDA runs a new program (sched_process_exec): what it had is the
 * old program's. Its allocations, kernels (an address names another function in the
 * new program), names, errors, contexts, calls in flight and threads' state are dropped
 * here, before the new program runs. Its row of gpu_procs goes first: a report that read
 * the row before and its kernels while they go finds the row gone when it looks again,
 * and leaves the process out (gpu.c: drop_reborn) rather than show it without its
 * launches. No call can make the row again meanwhile: the exec left the process one
 * thread, this one. The new program's first call makes a new one, born then (born_ns),
 * which tells userspace that the process's counts begin again. A walk of each map,
 * once per exec of such a process only.
 */
static __always_inline int gpu_exec_body(TLM_PARAM, __u64 pid_tgid)
{
	struct gpu_exec_ctx c = {.tgid = pid_tgid >> 32, .prog = TLM_ARG};
	struct gpu_proc_stats *st = bpf_map_lookup_elem(&gpu_procs, &c.tgid);
	__u64 allocs, kernel_rows, error_kinds;
	__u32 owner;

	if (!st)
		return 0;
	/* Its owner's shares of what goes (lib/fair_share.h) go back with it: the process
	 * has this thread only, nothing else of it makes or deletes entries meanwhile. */
	owner = st->owner;
	allocs = st->allocs_tracked;
	kernel_rows = st->kernel_rows;
	error_kinds = st->error_kinds;
	if (!tlm_map_delete(gpu_procs, &c.tgid)) {
		fair_share_give_n(GPU_SHARE_PROCS, owner, 1);
		fair_share_give_n(GPU_SHARE_ALLOCS, owner, allocs);
		fair_share_give_n(GPU_SHARE_KERNEL_ROWS, owner, kernel_rows);
		fair_share_give_n(GPU_SHARE_ERROR_KINDS, owner, error_kinds);
	}
	bpf_for_each_map_elem(&gpu_allocs, gpu_drop_gpu_allocs, &c, 0);
	bpf_for_each_map_elem(&gpu_errors, gpu_drop_gpu_errors, &c, 0);
	bpf_for_each_map_elem(&gpu_ctxs, gpu_drop_gpu_ctxs, &c, 0);
	bpf_for_each_map_elem(&gpu_kernels, gpu_drop_gpu_kernels, &c, 0);
	bpf_for_each_map_elem(&gpu_knames, gpu_drop_gpu_knames, &c, 0);
	bpf_for_each_map_elem(&gpu_khosts, gpu_drop_gpu_khosts, &c, 0);
	bpf_for_each_map_elem(&gpu_inflight, gpu_drop_gpu_inflight, &c, 0);
	bpf_for_each_map_elem(&gpu_threads, gpu_drop_gpu_threads, &c, 0);
	bpf_for_each_map_elem(&gpu_thread_slots, gpu_drop_thread_slot, &c, 0);
	return 0;
}

#endif /* BPFTEL_LIB_GPU_PROBES_H */
