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
	case GPU_FN_MALLOC_FROM_POOL_ASYNC:
	case GPU_FN_CU_MEM_ALLOC_ASYNC:
	case GPU_FN_CU_MEM_ALLOC_FROM_POOL_ASYNC:
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
	       func == GPU_FN_CU_MEM_FREE || func == GPU_FN_CU_MEM_FREE_HOST ||
	       func == GPU_FN_CU_MEM_FREE_ASYNC;
}

/* Take a slot of gpu_allocs, in the process's share and its owner's; false when
 * either holds its share. */
static __always_inline bool gpu_alloc_slot_take(TLM_PARAM, struct gpu_proc_stats *st)
{
	if (gpu_share_take(TLM_ARG, st, GPU_SHARE_ALLOCS, &st->allocs_tracked,
			   gpu_allocs_per_proc))
		return true;
	__sync_fetch_and_add(&st->allocs_over_cap, 1);
	return false;
}

/* A slot of gpu_allocs goes back (an allocation freed, or not tracked after all). */
static __always_inline void gpu_alloc_slot_give(struct gpu_proc_stats *st)
{
	gpu_share_give(st, GPU_SHARE_ALLOCS, &st->allocs_tracked);
}

#ifndef ENOENT
#define ENOENT 2
#endif

/* Raise *peak to out if below. A compare-and-swap, so that a thread writing an older,
 * lower value cannot lower it. Each try lost means another thread raised it meanwhile,
 * maybe to less than out: 16 tries (4 left the highest of 5 racing threads' sums out
 * for good). A global function, verified once per program (its 16 tries' branches
 * were the largest part of the return program's verification), called where an
 * allocation is tracked. */
__noinline int gpu_peak_raise(__s64 *peak, __s64 out)
{
	__s64 cur;
	int i;

	if (!peak)
		return 0;
	for (i = 0; i < 16; i++) {
		cur = *peak;
		if (out <= cur || __sync_val_compare_and_swap(peak, cur, out) == cur)
			return 0;
	}
	return 0;
}

/* The bytes of a tracked allocation leave the outstanding sums of its kind and device. */
static __always_inline void gpu_alloc_retire(struct gpu_proc_stats *st, const struct gpu_alloc *a)
{
	__u64 kind = a->kind;

	/* Checked in the register it indexes with (a 64-bit one: see gpu_dev_idx). */
	barrier_var(kind);
	if (kind >= GPU_MEM__COUNT)
		return;
	__sync_fetch_and_add(&st->mem[kind].outstanding_bytes, -(__s64)a->size);
	__sync_fetch_and_add(&st->dev[gpu_dev_idx(a->dev)].outstanding_bytes, -(__s64)a->size);
}

/*
 * An allocation returned an address gpu_allocs still tracks: that one's free went
 * unseen (a call the probes missed, cudaDeviceReset, an API not probed). Its record is
 * replaced, its bytes retired and counted (allocs_replaced); the entry is the same, so
 * the slot the caller took goes back. 0, or -errno: not tracked.
 */
static __always_inline long gpu_alloc_replace(TLM_PARAM, struct gpu_proc_stats *st,
					      const struct gpu_alloc_key *key,
					      const struct gpu_alloc *alloc)
{
	struct gpu_alloc *cur = bpf_map_lookup_elem(&gpu_allocs, key), old;
	long err;

	if (!cur)
		return -ENOENT;
	old = *cur;
	err = tlm_map_replace(gpu_allocs, key, alloc);
	if (err == -ENOENT) /* a free took the old record meanwhile, and accounts it */
		return tlm_map_insert(gpu_allocs, key, alloc);
	if (err)
		return err;
	gpu_alloc_slot_give(st);
	__sync_fetch_and_add(&st->allocs_replaced, 1);
	gpu_alloc_retire(st, &old);
	return 0;
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
	__s64 out;
	__u64 dev;
	long err;

	if (kind >= GPU_MEM__COUNT)
		return;
	m = &st->mem[kind];
	dev = gpu_dev_idx(gpu_dev_slot(pid_tgid, func));
	alloc.kind = kind;
	alloc.dev = dev;
	__sync_fetch_and_add(&m->allocs, 1);
	gpu_add_sat(&m->alloc_bytes, call->arg1);
	__sync_fetch_and_add(&st->dev[dev].allocs, 1);
	if (call->arg1 > GPU_ALLOC_TRACKED_MAX) {
		__sync_fetch_and_add(&st->allocs_untracked, 1);
		return;
	}
	/* The pointer the library stored through its first argument. */
	if (tlm_probe_read_user(&key.ptr, sizeof(key.ptr), (void *)call->arg0)) {
		__sync_fetch_and_add(&st->allocs_untracked, 1);
		return;
	}
	if (!key.ptr) {
		/* Nothing to track (a 0-byte allocation succeeds with NULL); a NULL for
		 * bytes asked is a library's oddity, not followed. */
		if (call->arg1)
			__sync_fetch_and_add(&st->allocs_untracked, 1);
		return;
	}
	if (!gpu_alloc_slot_take(TLM_ARG, st)) {
		__sync_fetch_and_add(&st->allocs_untracked, 1);
		return;
	}
	err = tlm_map_insert(gpu_allocs, &key, &alloc);
	if (err == -EEXIST)
		err = gpu_alloc_replace(TLM_ARG, st, &key, &alloc);
	if (err) {
		gpu_alloc_slot_give(st);
		__sync_fetch_and_add(&st->allocs_untracked, 1);
		return;
	}
	__sync_fetch_and_add(&st->dev[dev].outstanding_bytes, (__s64)call->arg1);
	out = __sync_add_and_fetch(&m->outstanding_bytes, (__s64)call->arg1);
	gpu_peak_raise(&m->peak_bytes, out);
}

/* cudaErrorInvalidValue and CUDA_ERROR_INVALID_VALUE (both 1), cudaErrorInvalidDevicePointer
 * (17): the pointer is no allocation of the process's (any more). */
static __always_inline bool gpu_free_invalid(int rc)
{
	return rc == 1 || rc == 17;
}

/* Does func free memory of kind? Pinned host memory has frees of its own; cudaFree
 * takes device, stream-ordered and managed memory alike. */
static __always_inline bool gpu_free_fits(enum gpu_func func, __u32 kind)
{
	bool host = func == GPU_FN_FREE_HOST || func == GPU_FN_CU_MEM_FREE_HOST;

	return host == (kind == GPU_MEM_HOST);
}

/* A failed free of func (rc; 0: its call could not be kept): the allocation is still
 * there; its record goes back (the address is still the process's, so nothing else can
 * hold it). If the map has no room for it any more, it is untracked from now on. Unless
 * the library says the pointer is none of the process's, by the free that fits its
 * kind: another thread freed it meanwhile (its free, which found the record taken,
 * counted as of an unknown pointer), and its bytes are retired, not put back
 * outstanding for good. The wrong free (cudaFree of pinned host memory, a common bug)
 * fails so too, and the allocation is still there: its record goes back. */
static __always_inline void gpu_free_failed(TLM_PARAM, struct gpu_proc_stats *st, __u32 tgid,
					    enum gpu_func func, const struct gpu_call *call, int rc)
{
	struct gpu_alloc_key key = {.tgid = tgid, .ptr = call->arg0};

	if (call->freed.kind >= GPU_MEM__COUNT)
		return;
	if (gpu_free_invalid(rc) && gpu_free_fits(func, call->freed.kind)) {
		gpu_alloc_slot_give(st);
		gpu_alloc_retire(st, &call->freed);
		return;
	}
	if (!tlm_map_insert(gpu_allocs, &key, &call->freed))
		return;
	gpu_alloc_slot_give(st);
	__sync_fetch_and_add(&st->allocs_untracked, 1);
	gpu_alloc_retire(st, &call->freed);
}

/*
 * A free's entry: the pointer's record leaves gpu_allocs now, into the call's in-flight
 * entry. Once the library has freed the address, another thread may be given it by an
 * allocation whose return comes before this free's: that one must find the address
 * free, and this free must not take that one's record. The return accounts the
 * record, or puts it back if the free failed (gpu_free_failed). With no room to keep
 * the call (counted), the record goes back at once, as for a free that failed: the
 * allocation stays outstanding rather than its bytes being lost with the record.
 */
static __always_inline void gpu_free_begin(TLM_PARAM, __u64 pid_tgid, enum gpu_func func,
					   __u64 now, __u64 ptr)
{
	struct gpu_alloc_key key = {.tgid = pid_tgid >> 32, .ptr = ptr};
	struct gpu_call call = {.ktime_ns = now, .arg0 = ptr, .freed.kind = GPU_MEM__COUNT};
	struct gpu_proc_stats *st = gpu_call_count(TLM_ARG, pid_tgid, func);
	struct gpu_call_key ck = {.pid_tgid = pid_tgid, .func = func};
	struct gpu_call *prev, old;
	struct gpu_alloc *a;

	if (!st)
		return; /* no stats: the process has nothing tracked, and its return reads none */
	/* The thread's last free of this function whose return went unseen (its return
	 * probe detached mid-call): its record would be overwritten below, and with it the
	 * allocation it took, tracked for good in the process's share and its owner's.
	 * It goes back, as for a free that failed. */
	prev = bpf_map_lookup_elem(&gpu_inflight, &ck);
	if (prev && prev->freed.kind < GPU_MEM__COUNT) {
		old = *prev;
		if (!tlm_map_delete(gpu_inflight, &ck)) {
			fair_share_give(GPU_SHARE_CALLS_IN_FLIGHT, old.owner);
			gpu_free_failed(TLM_ARG, st, key.tgid, func, &old, 0);
		}
	}
	a = ptr ? bpf_map_lookup_elem(&gpu_allocs, &key) : NULL;
	if (a) {
		call.freed = *a;
		/* A racing free of the same pointer took it first: this one has none. */
		if (tlm_map_take(gpu_allocs, &key))
			call.freed.kind = GPU_MEM__COUNT;
	}
	if (!gpu_call_store(TLM_ARG, st, pid_tgid, func, &call))
		gpu_free_failed(TLM_ARG, st, key.tgid, func, &call, 0);
}

/* A successful free: off the kind and device the record it took was allocated as. */
static __always_inline void gpu_account_free(TLM_PARAM, struct gpu_proc_stats *st,
					     const struct gpu_call *call)
{
	const struct gpu_alloc *a = &call->freed;
	struct gpu_mem_stats *m;
	__u64 kind = a->kind;

	if (!call->arg0)
		return; /* freeing NULL is a no-op that succeeds */
	barrier_var(kind);
	if (kind >= GPU_MEM__COUNT) {
		__sync_fetch_and_add(&st->frees_unknown, 1);
		return;
	}
	gpu_alloc_slot_give(st);
	m = &st->mem[kind];
	__sync_fetch_and_add(&m->frees, 1);
	gpu_add_sat(&m->freed_bytes, a->size);
	gpu_alloc_retire(st, a);
}

#endif /* BPFTEL_LIB_GPU_MEMORY_H */
