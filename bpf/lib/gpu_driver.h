/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Bodies for the CUDA driver API (libcuda.so.1) that its runtime counterparts do not
 * share: cuLaunchKernel's arguments, and contexts (which device a thread's calls go to).
 * Every driver body runs only at runtime depth 0 (bpf/lib/gpu_state.h): a driver call
 * the runtime makes is the runtime call's, already counted.
 *
 * Include after bpf/lib/gpu_state.h.
 */
#ifndef BPFTEL_LIB_GPU_DRIVER_H
#define BPFTEL_LIB_GPU_DRIVER_H

/*
 * cuLaunchKernel(CUfunction f, unsigned gridX, gridY, gridZ, blockX, blockY, blockZ,
 *                unsigned sharedMemBytes, CUstream, void **params, void **extra), and
 * cuLaunchCooperativeKernel with the same arguments less extra.
 * x86-64: f in rdi, the grid in rsi, rdx, rcx, blockX in r8, blockY in r9; blockZ and
 * sharedMemBytes are the first two stack arguments, 8 bytes each, from sp + 8 (sp
 * points at the return address). libbpf 1.1 has no PT_REGS_PARM6: r9 is read by name
 * (this object is x86-64 only, as its register frame says).
 */
static __always_inline int gpu_cu_launch_enter_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
						    enum gpu_func func, __u32 dev)
{
	__u32 g[3] = {PT_REGS_PARM2(regs), PT_REGS_PARM3(regs), PT_REGS_PARM4(regs)};
	__u32 b[3] = {PT_REGS_PARM5(regs), regs->r9, 1};
	__u64 stack[2];

	if (tlm_probe_read_user(stack, sizeof(stack), (void *)(PT_REGS_SP(regs) + 8))) {
		/* blockZ unknown: the launch counts, its threads do not. */
		b[2] = 0;
		gpu_count_launch(TLM_ARG, pid_tgid, func, GPU_KERNEL_DRIVER, PT_REGS_PARM1(regs),
				 dev, g, b);
		return 0;
	}
	b[2] = (__u32)stack[0];
	gpu_count_launch(TLM_ARG, pid_tgid, func, GPU_KERNEL_DRIVER, PT_REGS_PARM1(regs), dev, g, b);
	if (gpu_launch_shared_mem)
		gpu_count_shared_mem(TLM_ARG, pid_tgid, (__u32)stack[1]);
	return 0;
}

/* cuCtxCreate_v2(CUcontext *pctx, unsigned flags, CUdevice dev),
 * cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned flags, CUdevice dev)
 * and cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev): remember pctx and dev. */
static __always_inline int gpu_ctx_make_enter_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
						   __u64 now, enum gpu_func func)
{
	__u64 arg2 = PT_REGS_PARM2(regs), arg3 = PT_REGS_PARM3(regs), arg4 = PT_REGS_PARM4(regs);

	/* All read, then chosen: a choice of register offset would be a variable access
	 * to the context, which the verifier refuses. */
	barrier_var(arg2);
	barrier_var(arg3);
	barrier_var(arg4);
	gpu_call_begin(TLM_ARG, pid_tgid, func, now, PT_REGS_PARM1(regs),
		       (__s32)(func == GPU_FN_CU_CTX_CREATE	 ? arg3
			       : func == GPU_FN_CU_CTX_CREATE_V4 ? arg4
								 : arg2));
	return 0;
}

/*
 * The runtime retains its device's primary context (cuDevicePrimaryCtxRetain) inside
 * one of its calls: the call is the runtime's, not counted again (driver_nested), but
 * the context's device is learnt at its return (gpu_ctx_nested_end), or a program that
 * makes that context current itself (cuCtxSetCurrent, cuCtxPushCurrent_v2, as a
 * library on top of the runtime does) would have its calls on a device not known.
 * Kept as a call in flight, its count not raised.
 */
static __always_inline void gpu_ctx_nested_begin(TLM_PARAM, struct gpu_proc_stats *st,
						 struct pt_regs *regs, __u64 pid_tgid, __u64 now)
{
	struct gpu_call call = {.ktime_ns = now, .arg0 = PT_REGS_PARM1(regs),
				.arg1 = (__s32)PT_REGS_PARM2(regs), .freed.kind = GPU_MEM__COUNT};

	gpu_call_store(TLM_ARG, st, pid_tgid, GPU_FN_CU_PRIMARY_CTX_RETAIN, &call);
}

static __always_inline void gpu_ctx_made(TLM_PARAM, struct gpu_proc_stats *st, __u64 pid_tgid,
					 enum gpu_func func, const struct gpu_call *call);

/* Its return: rc 0, the context's device learnt. */
static __always_inline void gpu_ctx_nested_end(TLM_PARAM, __u64 pid_tgid, int rc)
{
	struct gpu_proc_stats *st;
	struct gpu_call call;
	__u32 tgid = pid_tgid >> 32;

	if (!gpu_call_end(TLM_ARG, pid_tgid, GPU_FN_CU_PRIMARY_CTX_RETAIN, &call) || rc)
		return;
	st = bpf_map_lookup_elem(&gpu_procs, &tgid);
	if (st)
		gpu_ctx_made(TLM_ARG, st, pid_tgid, GPU_FN_CU_PRIMARY_CTX_RETAIN, &call);
}

/* The thread's current device is dev; the runtime's own too where runtime (cudaSetDevice),
 * which it binds again after a driver call unbinds its context. */
static __always_inline void gpu_thread_set_device(TLM_PARAM, struct gpu_proc_stats *st,
						  __u64 pid_tgid, __s32 dev, bool runtime)
{
	struct gpu_thread *th = gpu_thread_get(TLM_ARG, pid_tgid);

	if (th) {
		th->device = dev;
		if (runtime)
			th->rt_device = dev;
	}
	if (dev >= 0)
		st->device = dev;
}

/* A context made: learn its device. cuCtxCreate also makes it current. */
static __always_inline void gpu_ctx_made(TLM_PARAM, struct gpu_proc_stats *st, __u64 pid_tgid,
					 enum gpu_func func, const struct gpu_call *call)
{
	struct gpu_ctx_key key = {.tgid = pid_tgid >> 32};
	__s32 dev = (__s32)call->arg1;

	if (tlm_probe_read_user(&key.ctx, sizeof(key.ctx), (void *)call->arg0))
		return;
	tlm_map_update(gpu_ctxs, &key, &dev, BPF_ANY);
	if (func == GPU_FN_CU_CTX_CREATE || func == GPU_FN_CU_CTX_CREATE_V4)
		gpu_thread_set_device(TLM_ARG, st, pid_tgid, dev, false);
}

/* cuCtxSetCurrent(ctx) / cuCtxPushCurrent_v2(ctx) succeeded: the thread's device is the
 * context's, or not known (a context made before we watched); NULL unbinds (the
 * runtime's next call binds its own device's again: gpu_runtime_enter()). */
static __always_inline void gpu_ctx_current(TLM_PARAM, struct gpu_proc_stats *st, __u64 pid_tgid,
					    const struct gpu_call *call)
{
	struct gpu_ctx_key key = {.tgid = pid_tgid >> 32, .ctx = call->arg0};
	__s32 *dev = call->arg0 ? bpf_map_lookup_elem(&gpu_ctxs, &key) : NULL;

	gpu_thread_set_device(TLM_ARG, st, pid_tgid,
			      dev	    ? *dev
			      : call->arg0 ? GPU_THREAD_DEV_UNKNOWN
					   : GPU_THREAD_DEV_UNBOUND,
			      false);
}

/* cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) and
 * cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name): where the
 * handle goes, and the name. */
static __always_inline int gpu_get_function_enter_body(TLM_PARAM, struct pt_regs *regs,
						       __u64 pid_tgid, __u64 now,
						       enum gpu_func func)
{
	gpu_call_begin(TLM_ARG, pid_tgid, func, now, PT_REGS_PARM1(regs), PT_REGS_PARM3(regs));
	return 0;
}

/* It succeeded: the function has its kernel's name, where the kernel was named. The
 * name is copied from the LRU map's own entry, which another process's flood of names
 * may take over meanwhile: a copy that is not of this process's kernel is taken back. */
static __always_inline void gpu_kernel_function(TLM_PARAM, __u64 pid_tgid,
						const struct gpu_call *call)
{
	struct gpu_kernel_key key = {.tgid = pid_tgid >> 32, .api = GPU_KERNEL_DRIVER,
				     .func = call->arg1};
	struct gpu_kname *kn = bpf_map_lookup_elem(&gpu_knames, &key);

	if (!kn || tlm_probe_read_user(&key.func, sizeof(key.func), (void *)call->arg0))
		return;
	tlm_map_update(gpu_knames, &key, kn, BPF_ANY);
	kn = bpf_map_lookup_elem(&gpu_knames, &key);
	if (kn && (kn->tgid != key.tgid || kn->named != call->arg1))
		tlm_map_take(gpu_knames, &key); /* the LRU may have taken it first */
}

/* An empty entry of gpu_knames, to make one with: too big for the return probe's
 * stack, with what the rest of it holds. */
static const struct gpu_kname gpu_kname_empty = {};

/* It succeeded: the kernel behind the handle (a CUfunction, or a CUkernel, which
 * cuLaunchKernel also takes) has that name. The entry is made empty, then the name
 * read into it in place: no buffer another program's run could take meanwhile (a
 * per-CPU one is shared with a run that preempts this one). A report that reads the
 * entry half written names the kernel again at the next (rename_handle). */
static __always_inline void gpu_kernel_named(TLM_PARAM, __u64 pid_tgid, const struct gpu_call *call)
{
	struct gpu_kernel_key key = {.tgid = pid_tgid >> 32, .api = GPU_KERNEL_DRIVER};
	struct gpu_kname *kn;
	char next = 0;
	long n;

	if (tlm_probe_read_user(&key.func, sizeof(key.func), (void *)call->arg0) ||
	    tlm_map_update(gpu_knames, &key, &gpu_kname_empty, BPF_ANY))
		return;
	kn = bpf_map_lookup_elem(&gpu_knames, &key);
	if (!kn)
		return; /* taken back at once by another process's names (LRU) */
	n = tlm_probe_read_user_str(kn->name, sizeof(kn->name), (void *)call->arg1);
	if (n < 0) {
		tlm_map_take(gpu_knames, &key); /* the LRU may have taken it first */
		return;
	}
	/* Full: its last byte is the name's own NUL, or one put where the name was cut;
	 * the process's byte there says which (unreadable: taken as cut). */
	if (n == sizeof(kn->name))
		kn->cut = tlm_probe_read_user(&next, 1, (void *)(call->arg1 + sizeof(kn->name) - 1)) ||
			  next;
	kn->tgid = key.tgid;
	kn->named = key.func;
}

#endif /* BPFTEL_LIB_GPU_DRIVER_H */
