/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The GPU module's BPF code: its maps and every probe body, for the programs of
 * bpf/gpu.bpf.c and for the BPF_PROG_TEST_RUN harness (tests/bpf/progs/gpu_harness.bpf.c),
 * which runs the same bodies on synthetic registers.
 *
 * Entry probes count the call and remember its arguments per thread (all but
 * cudaLaunchKernel, whose return needs only its code); return probes pair with them,
 * count cudaError_t codes, and account allocations, copies and waits. Everything is
 * aggregated in maps here: a kernel launch costs a map lookup and a few atomic adds,
 * never a ring-buffer record. Every body is an inline function of (regs, pid_tgid,
 * now, function).
 *
 * Include after vmlinux.h, the libbpf headers, gpu.h and telemetry/telemetry.bpf.h.
 */
#ifndef BPFTEL_LIB_GPU_PROBES_H
#define BPFTEL_LIB_GPU_PROBES_H

#define GPU_MAX_PROCS	 4096
#define GPU_MAX_ALLOCS	 16384
#define GPU_MAX_ERRORS	 4096
#define GPU_MAX_INFLIGHT 8192

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GPU_MAX_PROCS);
	__type(key, __u32); /* tgid */
	__type(value, struct gpu_proc_stats);
} gpu_procs SEC(".maps");

/* Not preallocated: its memory follows the allocations live, not the cap. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GPU_MAX_ALLOCS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct gpu_alloc_key);
	__type(value, struct gpu_alloc);
} gpu_allocs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GPU_MAX_ERRORS);
	__type(key, struct gpu_err_key);
	__type(value, __u64);
} gpu_errors SEC(".maps");

/* A call between its entry and its return, per thread and function. LRU: a return we
 * never see (thread killed inside the call) cannot pin a slot. */
struct gpu_call_key {
	__u64 pid_tgid;
	__u32 func;
	__u32 __pad;
};

struct gpu_call {
	__u64 ktime_ns;
	__u64 arg0; /* cudaMalloc: devPtr (user address); cudaFree: ptr; memcpy: count */
	__u64 arg1; /* cudaMalloc: size; memcpy: kind; cudaSetDevice: device */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, GPU_MAX_INFLIGHT);
	__type(key, struct gpu_call_key);
	__type(value, struct gpu_call);
} gpu_inflight SEC(".maps");

/* Initial value of a process's stats (too large for the BPF stack). */
struct gpu_proc_stats gpu_proc_init = {.device = -1};

TLM_MAP_KEY(gpu_procs);
TLM_MAP_KEY(gpu_allocs);
TLM_MAP_KEY(gpu_errors);
TLM_MAP_KEY(gpu_inflight);

static __always_inline struct gpu_proc_stats *gpu_proc(TLM_PARAM, __u32 tgid)
{
	return tlm_map_lookup_or_init(gpu_procs, &tgid, &gpu_proc_init);
}

_Static_assert((GPU_FN__COUNT & (GPU_FN__COUNT - 1)) == 0, "GPU_FN__COUNT masks indexes");

/* func as an index the verifier can bound: the barrier keeps the compiler from dropping
 * the mask where it knows the range (the verifier may not, after a spill). */
static __always_inline __u32 gpu_fn_idx(enum gpu_func func)
{
	__u32 idx = func;

	barrier_var(idx);
	return idx & (GPU_FN__COUNT - 1);
}

/* Count a call at its entry. Returns the process's stats, or NULL (map full: counted). */
static __always_inline struct gpu_proc_stats *gpu_call_count(TLM_PARAM, __u64 pid_tgid,
							     enum gpu_func func)
{
	struct gpu_proc_stats *st = gpu_proc(TLM_ARG, pid_tgid >> 32);

	if (st)
		__sync_fetch_and_add(&st->calls[gpu_fn_idx(func)], 1);
	return st;
}

/* Count a call and remember its arguments until its return. */
static __always_inline void gpu_call_begin(TLM_PARAM, __u64 pid_tgid, enum gpu_func func, __u64 now,
					   __u64 arg0, __u64 arg1)
{
	struct gpu_call_key key = {.pid_tgid = pid_tgid, .func = func};
	struct gpu_call call = {.ktime_ns = now, .arg0 = arg0, .arg1 = arg1};

	gpu_call_count(TLM_ARG, pid_tgid, func);
	tlm_map_update(gpu_inflight, &key, &call, BPF_ANY);
}

/* Take the call's arguments back at its return. False if its entry was not seen. */
static __always_inline bool gpu_call_end(TLM_PARAM, __u64 pid_tgid, enum gpu_func func,
					 struct gpu_call *out)
{
	struct gpu_call_key key = {.pid_tgid = pid_tgid, .func = func};
	struct gpu_call *call;

	call = bpf_map_lookup_elem(&gpu_inflight, &key);
	if (!call)
		return false; /* attached mid-call, or evicted */
	*out = *call;
	tlm_map_delete(gpu_inflight, &key);
	return true;
}

static __always_inline void gpu_count_error(TLM_PARAM, struct gpu_proc_stats *st, __u32 tgid,
					    enum gpu_func func, int error)
{
	struct gpu_err_key key = {.tgid = tgid, .func = func, .error = error};
	__u64 one = 1, *cnt;

	__sync_fetch_and_add(&st->failed[gpu_fn_idx(func)], 1);
	cnt = bpf_map_lookup_elem(&gpu_errors, &key);
	if (cnt) {
		__sync_fetch_and_add(cnt, 1);
		return;
	}
	/* -EEXIST: another CPU inserted this key since our lookup, a benign race. */
	if (tlm_map_insert(gpu_errors, &key, &one) == -EEXIST) {
		cnt = bpf_map_lookup_elem(&gpu_errors, &key);
		if (cnt)
			__sync_fetch_and_add(cnt, 1);
	}
}

/* floor(log2(v)) for v > 0, in a bounded number of steps. */
static __always_inline __u32 gpu_log2(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) {
		v >>= 32;
		r += 32;
	}
	if (v >> 16) {
		v >>= 16;
		r += 16;
	}
	if (v >> 8) {
		v >>= 8;
		r += 8;
	}
	if (v >> 4) {
		v >>= 4;
		r += 4;
	}
	if (v >> 2) {
		v >>= 2;
		r += 2;
	}
	if (v >> 1)
		r += 1;
	return r;
}

/*
 * cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t sharedMem,
 *                  cudaStream_t stream). x86-64 passes each 12-byte dim3 in two registers
 * (x | y << 32, then z): grid in rsi, rdx; block in rcx, r8; args in r9; sharedMem is
 * the first stack argument, at sp + 8 on entry (sp points at the return address).
 */
static __always_inline int gpu_launch_enter_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
						 __u64 now)
{
	__u64 grid_xy = PT_REGS_PARM2(regs), grid_z = (__u32)PT_REGS_PARM3(regs);
	__u64 block_xy = PT_REGS_PARM4(regs), block_z = (__u32)PT_REGS_PARM5(regs);
	__u64 grid, block, threads, shared = 0;
	struct gpu_proc_stats *st;
	__u32 bucket;

	/* The hot call: no in-flight entry, its return needs only the return code. */
	st = gpu_call_count(TLM_ARG, pid_tgid, GPU_FN_LAUNCH);
	if (!st)
		return 0;
	grid = (__u64)(__u32)grid_xy * (grid_xy >> 32) * grid_z;
	block = (__u64)(__u32)block_xy * (block_xy >> 32) * block_z;
	threads = grid * block;
	__sync_fetch_and_add(&st->threads, threads);
	if (threads) {
		bucket = gpu_log2(threads);
		if (bucket >= GPU_LAUNCH_BUCKETS)
			bucket = GPU_LAUNCH_BUCKETS - 1;
		__sync_fetch_and_add(&st->launch_threads[bucket], 1);
	}
	if (!tlm_probe_read_user(&shared, sizeof(shared), (void *)(PT_REGS_SP(regs) + 8)))
		__sync_fetch_and_add(&st->shared_mem_bytes, shared);
	return 0;
}

/* cudaMalloc(void **devPtr, size_t size) */
static __always_inline int gpu_malloc_enter_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
						 __u64 now)
{
	gpu_call_begin(TLM_ARG, pid_tgid, GPU_FN_MALLOC, now, PT_REGS_PARM1(regs),
		       PT_REGS_PARM2(regs));
	return 0;
}

/* cudaFree(void *devPtr) */
static __always_inline int gpu_free_enter_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
					       __u64 now)
{
	gpu_call_begin(TLM_ARG, pid_tgid, GPU_FN_FREE, now, PT_REGS_PARM1(regs), 0);
	return 0;
}

/* cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind), and
 * cudaMemcpyAsync with a stream after kind. */
static __always_inline int gpu_memcpy_enter_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
						 __u64 now, enum gpu_func func)
{
	gpu_call_begin(TLM_ARG, pid_tgid, func, now, PT_REGS_PARM3(regs),
		       (__u32)PT_REGS_PARM4(regs));
	return 0;
}

/* cudaStreamSynchronize(stream), cudaDeviceSynchronize(void), cudaSetDevice(int device) */
static __always_inline int gpu_simple_enter_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
						 __u64 now, enum gpu_func func)
{
	gpu_call_begin(TLM_ARG, pid_tgid, func, now, 0, (__s32)PT_REGS_PARM1(regs));
	return 0;
}

/*
 * Every entry probe, by function: the one uprobe program runs this with the function
 * its attachment's cookie names (enum gpu_func), and the test harness with the one it
 * tests. A function it does not know costs nothing.
 */
static __always_inline int gpu_enter_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
					  __u64 now, __u64 func)
{
	switch (func) {
	case GPU_FN_LAUNCH:
		return gpu_launch_enter_body(TLM_ARG, regs, pid_tgid, now);
	case GPU_FN_MALLOC:
		return gpu_malloc_enter_body(TLM_ARG, regs, pid_tgid, now);
	case GPU_FN_FREE:
		return gpu_free_enter_body(TLM_ARG, regs, pid_tgid, now);
	case GPU_FN_MEMCPY:
	case GPU_FN_MEMCPY_ASYNC:
		return gpu_memcpy_enter_body(TLM_ARG, regs, pid_tgid, now, func);
	case GPU_FN_STREAM_SYNC:
	case GPU_FN_DEVICE_SYNC:
	case GPU_FN_SET_DEVICE:
		return gpu_simple_enter_body(TLM_ARG, regs, pid_tgid, now, func);
	}
	return 0;
}

static __always_inline void gpu_account_malloc(TLM_PARAM, struct gpu_proc_stats *st, __u32 tgid,
					       const struct gpu_call *call, __u64 now)
{
	struct gpu_alloc_key key = {.tgid = tgid};
	struct gpu_alloc alloc = {.size = call->arg1, .ktime_ns = now};
	__s64 out, peak;

	__sync_fetch_and_add(&st->allocs, 1);
	__sync_fetch_and_add(&st->alloc_bytes, call->arg1);
	/* The pointer the runtime stored through devPtr. */
	if (tlm_probe_read_user(&key.ptr, sizeof(key.ptr), (void *)call->arg0) ||
	    tlm_map_update(gpu_allocs, &key, &alloc, BPF_ANY)) {
		__sync_fetch_and_add(&st->allocs_untracked, 1);
		return;
	}
	out = __sync_add_and_fetch(&st->outstanding_bytes, (__s64)call->arg1);
	peak = st->peak_bytes;
	/* A racing thread may raise it between the read and the write: the peak is a
	 * lower bound by at most one concurrent allocation. */
	if (out > peak)
		st->peak_bytes = out;
}

static __always_inline void gpu_account_free(TLM_PARAM, struct gpu_proc_stats *st, __u32 tgid,
					     const struct gpu_call *call)
{
	struct gpu_alloc_key key = {.tgid = tgid, .ptr = call->arg0};
	struct gpu_alloc *alloc;
	__u64 size;

	if (!call->arg0)
		return; /* cudaFree(NULL) is a no-op that succeeds */
	alloc = bpf_map_lookup_elem(&gpu_allocs, &key);
	if (!alloc) {
		__sync_fetch_and_add(&st->frees_unknown, 1);
		return;
	}
	size = alloc->size;
	if (tlm_map_delete(gpu_allocs, &key))
		return; /* a racing cudaFree of the same pointer took it */
	__sync_fetch_and_add(&st->frees, 1);
	__sync_fetch_and_add(&st->freed_bytes, size);
	__sync_fetch_and_add(&st->outstanding_bytes, -(__s64)size);
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
	__u32 kind;

	if (fn >= GPU_FN__COUNT)
		return 0; /* a cookie we did not set */
	if (func != GPU_FN_LAUNCH && !gpu_call_end(TLM_ARG, pid_tgid, func, &call))
		return 0;
	st = bpf_map_lookup_elem(&gpu_procs, &tgid);
	if (!st)
		return 0;
	if (rc) {
		gpu_count_error(TLM_ARG, st, tgid, func, rc);
		return 0;
	}
	switch (func) {
	case GPU_FN_MALLOC:
		gpu_account_malloc(TLM_ARG, st, tgid, &call, now);
		break;
	case GPU_FN_FREE:
		gpu_account_free(TLM_ARG, st, tgid, &call);
		break;
	case GPU_FN_MEMCPY:
	case GPU_FN_MEMCPY_ASYNC:
		kind = call.arg1 < GPU_MEMCPY__COUNT ? call.arg1 : GPU_MEMCPY_DEFAULT;
		__sync_fetch_and_add(&st->memcpy_bytes[kind], call.arg0);
		if (func == GPU_FN_MEMCPY)
			__sync_fetch_and_add(&st->memcpy_ns, now - call.ktime_ns);
		break;
	case GPU_FN_STREAM_SYNC:
	case GPU_FN_DEVICE_SYNC:
		__sync_fetch_and_add(&st->sync_ns, now - call.ktime_ns);
		break;
	case GPU_FN_SET_DEVICE:
		st->device = (__s32)call.arg1;
		break;
	default:
		break;
	}
	return 0;
}

/* A thread that dies inside a call leaves its entry behind: drop it. Only threads of
 * processes that used the runtime get past the first lookup. */
static __always_inline int gpu_task_exit_body(TLM_PARAM, __u64 pid_tgid)
{
	struct gpu_call_key key = {.pid_tgid = pid_tgid};
	__u32 tgid = pid_tgid >> 32, f;

	if (!bpf_map_lookup_elem(&gpu_procs, &tgid))
		return 0;
	for (f = 0; f < GPU_FN__COUNT; f++) {
		key.func = f;
		if (bpf_map_lookup_elem(&gpu_inflight, &key))
			tlm_map_delete(gpu_inflight, &key);
	}
	return 0;
}

#endif /* BPFTEL_LIB_GPU_PROBES_H */
