/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Allocations of every kind (enum gpu_mem_kind), runtime and driver alike: all of them
 * are (where the pointer goes, size) calls, and all frees are (pointer) calls. An
 * allocation is tracked in gpu_allocs with its kind and device, so that whichever call
 * frees it (cudaFree frees managed and stream-ordered memory too) takes its bytes off
 * the right kind and device.
 *
 * Include after bpf/lib/gpu_state.h.
 */
#ifndef BPFTEL_LIB_GPU_MEMORY_H
#define BPFTEL_LIB_GPU_MEMORY_H

/* The kind of memory an allocating call makes; GPU_MEM__COUNT for other calls. */
static __always_inline __u32 gpu_alloc_kind(enum gpu_func func)
{
	switch (func) {
	case GPU_FN_MALLOC:
	case GPU_FN_CU_MEM_ALLOC:
		return GPU_MEM_DEVICE;
	case GPU_FN_MALLOC_ASYNC:
		return GPU_MEM_ASYNC;
	case GPU_FN_MALLOC_MANAGED:
	case GPU_FN_CU_MEM_ALLOC_MANAGED:
		return GPU_MEM_MANAGED;
	case GPU_FN_MALLOC_HOST:
	case GPU_FN_HOST_ALLOC:
	case GPU_FN_CU_MEM_ALLOC_HOST:
		return GPU_MEM_HOST;
	default:
		return GPU_MEM__COUNT;
	}
}

static __always_inline bool gpu_is_free(enum gpu_func func)
{
	return func == GPU_FN_FREE || func == GPU_FN_FREE_ASYNC || func == GPU_FN_FREE_HOST ||
	       func == GPU_FN_CU_MEM_FREE || func == GPU_FN_CU_MEM_FREE_HOST;
}

/* Take a slot of the process's share of gpu_allocs; false when it holds its share. */
static __always_inline bool gpu_alloc_slot_take(struct gpu_proc_stats *st)
{
	if (__sync_fetch_and_add(&st->allocs_tracked, 1) < gpu_allocs_per_proc)
		return true;
	__sync_fetch_and_add(&st->allocs_tracked, -1);
	__sync_fetch_and_add(&st->allocs_over_cap, 1);
	return false;
}

/* A successful allocation of kind: call->arg0 is where the pointer was stored,
 * call->arg1 the size. */
static __always_inline void gpu_account_alloc(TLM_PARAM, struct gpu_proc_stats *st, __u64 pid_tgid,
					      enum gpu_func func, const struct gpu_call *call,
					      __u64 now, __u32 kind)
{
	struct gpu_alloc_key key = {.tgid = pid_tgid >> 32};
	struct gpu_alloc alloc = {.size = call->arg1, .ktime_ns = now};
	struct gpu_mem_stats *m;
	__s64 out, peak;
	__u64 dev;

	if (kind >= GPU_MEM__COUNT)
		return;
	m = &st->mem[kind];
	dev = gpu_dev_idx(gpu_dev_slot(pid_tgid, func));
	alloc.kind = kind;
	alloc.dev = dev;
	__sync_fetch_and_add(&m->allocs, 1);
	__sync_fetch_and_add(&m->alloc_bytes, call->arg1);
	__sync_fetch_and_add(&st->dev[dev].allocs, 1);
	/* The pointer the library stored through its first argument. */
	if (tlm_probe_read_user(&key.ptr, sizeof(key.ptr), (void *)call->arg0)) {
		__sync_fetch_and_add(&st->allocs_untracked, 1);
		return;
	}
	if (!gpu_alloc_slot_take(st)) {
		__sync_fetch_and_add(&st->allocs_untracked, 1);
		return;
	}
	if (tlm_map_update(gpu_allocs, &key, &alloc, BPF_ANY)) {
		__sync_fetch_and_add(&st->allocs_tracked, -1);
		__sync_fetch_and_add(&st->allocs_untracked, 1);
		return;
	}
	__sync_fetch_and_add(&st->dev[dev].outstanding_bytes, (__s64)call->arg1);
	out = __sync_add_and_fetch(&m->outstanding_bytes, (__s64)call->arg1);
	peak = m->peak_bytes;
	/* A racing thread may raise it between the read and the write: the peak is a
	 * lower bound by at most one concurrent allocation. */
	if (out > peak)
		m->peak_bytes = out;
}

/* A successful free of call->arg0: off the kind and device it was allocated as. */
static __always_inline void gpu_account_free(TLM_PARAM, struct gpu_proc_stats *st, __u32 tgid,
					     const struct gpu_call *call)
{
	struct gpu_alloc_key key = {.tgid = tgid, .ptr = call->arg0};
	struct gpu_alloc *alloc;
	struct gpu_mem_stats *m;
	__u64 size, dev;
	__u32 kind;

	if (!call->arg0)
		return; /* freeing NULL is a no-op that succeeds */
	alloc = bpf_map_lookup_elem(&gpu_allocs, &key);
	if (!alloc) {
		__sync_fetch_and_add(&st->frees_unknown, 1);
		return;
	}
	size = alloc->size;
	kind = alloc->kind;
	dev = gpu_dev_idx(alloc->dev);
	if (tlm_map_delete(gpu_allocs, &key))
		return; /* a racing free of the same pointer took it */
	__sync_fetch_and_add(&st->allocs_tracked, -1);
	if (kind >= GPU_MEM__COUNT)
		return;
	m = &st->mem[kind];
	__sync_fetch_and_add(&m->frees, 1);
	__sync_fetch_and_add(&m->freed_bytes, size);
	__sync_fetch_and_add(&m->outstanding_bytes, -(__s64)size);
	__sync_fetch_and_add(&st->dev[dev].outstanding_bytes, -(__s64)size);
}

#endif /* BPFTEL_LIB_GPU_MEMORY_H */
