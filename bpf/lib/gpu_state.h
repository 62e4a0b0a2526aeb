/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The GPU module's BPF state: its maps, and the small steps every probe body takes
 * (count a call, remember its arguments until its return, find the thread's device,
 * count an error). Used by bpf/lib/gpu_memory.h, gpu_driver.h and gpu_probes.h.
 *
 * Per thread (gpu_thread_slots, spilling into gpu_threads): the device current on it and
 * how deep it is in runtime calls. The depth is what keeps a runtime call from being
 * counted twice: libcudart implements cudaMalloc, cudaLaunchKernel, ... by calling
 * libcuda (cuMemAlloc_v2, cuLaunchKernel, ...) on the same thread, so every runtime
 * entry raises the depth and its return lowers it, and a driver probe that finds it
 * raised counts only that it was skipped (driver_nested). A program that calls the
 * driver itself does so at depth 0 and is counted.
 *
 * A runtime return can go unseen: the call began before its return probe was attached
 * (the registry attaches returns first, but a call already running has no return to
 * catch), or its return probe went (the module shed the file) while it ran, in a sync.
 * The depth would then stay raised, and the thread's own driver calls be skipped for
 * good. So the outermost runtime entry also keeps its stack pointer: a call made by
 * the runtime runs below it, deeper on the stack. A driver call at or above it is the
 * program's own, and a runtime entry at or above it means the call it counted has
 * returned: the depth starts again from 0. (A driver call from deeper in the program
 * after a lost return is still taken as the runtime's until the next runtime entry.)
 *
 * Include after vmlinux.h, the libbpf headers, gpu.h and telemetry/telemetry.bpf.h.
 */
#ifndef BPFTEL_LIB_GPU_STATE_H
#define BPFTEL_LIB_GPU_STATE_H

#include "fair_share.h"

/* GPU_MAX_PROCS, GPU_MAX_ALLOCS, GPU_MAX_ERRORS, GPU_MAX_LAUNCH_ROWS, GPU_MAX_INFLIGHT,
 * GPU_MAX_THREADS: bpf/gpu.h */
#define GPU_MAX_CTXS	 1024
#define GPU_MAX_KERNELS	 8192

/* An allocation larger than this (256 TiB, more than any device or host has) is counted
 * (allocs, alloc_bytes) but not tracked (allocs_untracked): only a process that makes
 * up its sizes gets one. It keeps the sums of outstanding bytes, for a kind, a device,
 * a process or all of them, far inside 63 bits: gpu_allocs holds GPU_MAX_ALLOCS (2^14)
 * allocations of at most 2^48 bytes, and frees in flight park at most GPU_MAX_INFLIGHT
 * (2^13) more, under 2^63 in all, where a made-up size of 2^63 twice had wrapped a
 * process's outstanding bytes round to 0. (Not a proof against every drift: userspace
 * sums them saturating all the same.) */
#define GPU_ALLOC_TRACKED_MAX (1ULL << 48)

/* A process holds at most this many entries of gpu_allocs: a quarter of the map, so
 * that one leaking process cannot leave the others untracked. Beyond it, allocations
 * are counted (allocs_over_cap) but not tracked. Set before load to change it. */
const volatile __u32 gpu_allocs_per_proc = GPU_MAX_ALLOCS / 4;

/* Likewise a quarter of gpu_kernels' rows and of gpu_errors' kinds: a process launching
 * ever new functions, sizes or devices, or failing with ever new codes (a crafted
 * library), cannot leave the others' kernels and error kinds without a row. Beyond it,
 * its launches are counted in its stats, its failures in its failed calls
 * (kernel_rows_over_cap, error_kinds_over_cap). Rows go only with the process. */
const volatile __u32 gpu_kernel_rows_per_proc = GPU_MAX_LAUNCH_ROWS / 4;
const volatile __u32 gpu_error_kinds_per_proc = GPU_MAX_ERRORS / 4;

/* A user but root holds at most this many entries of each table (enum
 * gpu_share_table, lib/fair_share.h) over all its processes: a quarter by default.
 * Userspace sets them from user_share_percent before load, and again as the
 * configuration changes (SIGHUP): read where an entry is made, so a change applies to
 * the next one. 0: no bound. */
__s64 gpu_share_cap[GPU_SHARE__COUNT] = {
	[GPU_SHARE_PROCS] = GPU_MAX_PROCS / FAIR_SHARE_DIV,
	[GPU_SHARE_ALLOCS] = GPU_MAX_ALLOCS / FAIR_SHARE_DIV,
	[GPU_SHARE_KERNEL_ROWS] = GPU_MAX_LAUNCH_ROWS / FAIR_SHARE_DIV,
	[GPU_SHARE_ERROR_KINDS] = GPU_MAX_ERRORS / FAIR_SHARE_DIV,
	[GPU_SHARE_THREADS] = (GPU_THREAD_SLOTS + GPU_MAX_THREADS) / FAIR_SHARE_DIV,
	[GPU_SHARE_CALLS_IN_FLIGHT] = GPU_MAX_INFLIGHT / FAIR_SHARE_DIV,
};

/* What an owner at its share was refused, by table: processes' calls that found no row
 * (GPU_SHARE_PROCS: each call of such a process tries again), allocations not tracked,
 * launches without a kernel row, failures of a new kind without a row, threads' calls
 * that found no state (each runtime call of such a thread tries again), calls whose
 * return is not accounted (calls_untracked). Read by userspace (the object's .bss). */
__u64 gpu_share_refused[GPU_SHARE__COUNT];

/* t as an index the verifier can bound (a constant everywhere but after a spill). */
static __always_inline __u32 gpu_share_idx(__u32 t)
{
	barrier_var(t);
	return t < GPU_SHARE__COUNT ? t : 0;
}

/* Sum launches' dynamic shared memory (config gpu_launch_shared_mem). Off by default:
 * cudaLaunchKernel passes it on the stack, and that one bpf_probe_read_user was ~130 ns
 * of the ~300 ns a launch cost us on the bench VM (BENCHMARKS.md). Set before load:
 * when off the verifier drops the read. */
const volatile __u32 gpu_launch_shared_mem = 0;

/* Not preallocated: 4096 entries of ~2 KiB each were 8.4 MiB of kernel memory on every
 * host, most of which run no CUDA process (bpftel_ebpf_map_memory_bytes). An entry is
 * made at a process's first call, so its cost is that of one allocation. (Each takes a
 * 4 KiB slab object, over its ~2.1 KiB: ~16 MiB if all 4096 were in use, which the
 * memlock figure, counting the element's size, does not show.) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GPU_MAX_PROCS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
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

/* A call between its entry and its return, per thread and function. Not LRU: an LRU map
 * makes room by evicting a call in flight, silently (and, its free nodes held per CPU,
 * before it is full), and that call's return then accounts nothing. Here an entry that
 * finds no room, or whose process's owner holds its share of the map (gpu_call_store),
 * is counted (calls_untracked) and nothing else is lost. A record whose
 * return never comes (a return probe detached mid-call) cannot pile up: the thread's
 * next call of the function overwrites it (a free's, after putting back the allocation
 * it took: gpu_free_begin), its owner at its share or not, and its exit drops it
 * (gpu_task_exit_body). */
/* struct gpu_call_key, struct gpu_call: bpf/gpu.h (userspace recounts their owners). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GPU_MAX_INFLIGHT);
	__type(key, struct gpu_call_key);
	__type(value, struct gpu_call);
} gpu_inflight SEC(".maps");

/*
 * A thread's state is in the slot of gpu_thread_slots its thread id indexes (the low
 * bits): an array lookup, which the verifier inlines, where a hash lookup was ~35 ns of
 * a launch's entry and as much of its return (BENCHMARKS.md). The slot names its owner;
 * a thread whose slot another holds keeps its state in gpu_threads instead, and the
 * slot says that one of its index does (spilled), so that the others skip that lookup.
 * sched_process_exit frees a thread's slot or entry, sched_process_exec its process's
 * (gpu_exec_body); the sweep frees those these missed (a process gpu_procs had no room
 * for, whose thread exec'd: gpu_slot_free).
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GPU_THREAD_SLOTS);
	__type(key, __u32);
	__type(value, struct gpu_thread_slot);
} gpu_thread_slots SEC(".maps");

/* The threads whose slot another holds. Not LRU: an LRU map makes room by evicting a
 * live thread's state (and, its free nodes held per CPU, before it is full), and a
 * thread that lost it mid-call counts its runtime's driver calls as its own, and its
 * launches on device 0. sched_process_exit drops a thread's entry, the sweep those it
 * missed; a thread that finds no room is counted (errors telemetry) and goes without, as
 * one whose owner holds its share of the slots and this map (gpu_thread_get). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GPU_MAX_THREADS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64); /* pid_tgid */
	__type(value, struct gpu_thread);
} gpu_threads SEC(".maps");

/* Driver contexts and their device, learnt where they are made (cuCtxCreate_v2,
 * cuCtxCreate_v4, cuDevicePrimaryCtxRetain), for cuCtxSetCurrent / cuCtxPushCurrent_v2. LRU: contexts
 * are destroyed without our seeing it. */
struct gpu_ctx_key {
	__u32 tgid;
	__u32 __pad;
	__u64 ctx;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, GPU_MAX_CTXS);
	__type(key, struct gpu_ctx_key);
	__type(value, __s32); /* device */
} gpu_ctxs SEC(".maps");

/* Launches per (process, kernel, launch function, device, size): the one row a launch
 * adds to (struct gpu_launch_key). Not preallocated; full: counted by errors telemetry,
 * and the launches that find no room are counted in their process's stats. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GPU_MAX_LAUNCH_ROWS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct gpu_launch_key);
	__type(value, struct gpu_kernel);
} gpu_kernels SEC(".maps");

/* Driver kernels' names, by CUfunction. LRU: modules are unloaded without our seeing it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, GPU_MAX_KERNELS);
	__type(key, struct gpu_kernel_key);
	__type(value, struct gpu_kname);
} gpu_knames SEC(".maps");

/* Runtime kernels launched by handle (cudaKernel_t): the host function __cudaGetKernel
 * gave each handle, by (process, handle), for userspace to name the kernel by. Looked
 * up at report time, never on a launch. LRU: handles are not released in our sight. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, GPU_MAX_KERNELS);
	__type(key, struct gpu_kernel_key);
	__type(value, __u64);
} gpu_khosts SEC(".maps");

/* Initial values (a process's stats are too large for the BPF stack). */
struct gpu_proc_stats gpu_proc_init = {.device = -1};
struct gpu_thread gpu_thread_init = {.device = -1, .rt_device = -1};

TLM_MAP_KEY(gpu_procs);
TLM_MAP_KEY(gpu_allocs);
TLM_MAP_KEY(gpu_errors);
TLM_MAP_KEY(gpu_inflight);
TLM_MAP_KEY(gpu_threads);
TLM_MAP_KEY(gpu_ctxs);
TLM_MAP_KEY(gpu_kernels);
TLM_MAP_KEY(gpu_knames);
TLM_MAP_KEY(gpu_khosts);

static __always_inline bool gpu_fn_driver(__u64 func)
{
	return func >= GPU_FN_CU_FIRST;
}

#define GPU_FN_BIT(f) (1ULL << (f))
/* The kernel launches, runtime and driver. */
#define GPU_FN_LAUNCHES                                                                     \
	(GPU_FN_BIT(GPU_FN_LAUNCH) | GPU_FN_BIT(GPU_FN_LAUNCH_EX) |                          \
	 GPU_FN_BIT(GPU_FN_LAUNCH_COOP) | GPU_FN_BIT(GPU_FN_CU_LAUNCH) |                     \
	 GPU_FN_BIT(GPU_FN_CU_LAUNCH_EX) | GPU_FN_BIT(GPU_FN_CU_LAUNCH_COOP))
/* Calls counted at their entry, whose return needs only its code: no in-flight entry,
 * no clock. The launches, kernel and graph ones: the hot calls. */
#define GPU_FN_ENTRY_ONLY \
	(GPU_FN_LAUNCHES | GPU_FN_BIT(GPU_FN_GRAPH_LAUNCH) | GPU_FN_BIT(GPU_FN_CU_GRAPH_LAUNCH))

/* The copies, runtime and driver. */
#define GPU_FN_COPIES                                                                         \
	(GPU_FN_BIT(GPU_FN_MEMCPY) | GPU_FN_BIT(GPU_FN_MEMCPY_ASYNC) |                          \
	 GPU_FN_BIT(GPU_FN_CU_MEMCPY_HTOD) | GPU_FN_BIT(GPU_FN_CU_MEMCPY_DTOH) |                \
	 GPU_FN_BIT(GPU_FN_CU_MEMCPY_HTOD_ASYNC) | GPU_FN_BIT(GPU_FN_CU_MEMCPY_DTOH_ASYNC) |    \
	 GPU_FN_BIT(GPU_FN_CU_MEMCPY_DTOD) | GPU_FN_BIT(GPU_FN_CU_MEMCPY_DTOD_ASYNC) |          \
	 GPU_FN_BIT(GPU_FN_CU_MEMCPY) | GPU_FN_BIT(GPU_FN_CU_MEMCPY_ASYNC))

_Static_assert(GPU_FN__COUNT == 64, "a function is a bit of a 64-bit set");

static __always_inline bool gpu_fn_memcpy(__u64 func)
{
	return (GPU_FN_COPIES >> (func & (GPU_FN__COUNT - 1))) & 1;
}

static __always_inline bool gpu_fn_entry_only(__u64 func)
{
	return (GPU_FN_ENTRY_ONLY >> (func & (GPU_FN__COUNT - 1))) & 1;
}

/*
 * The process's row, made at its first call, in the share of the calling thread's owner
 * (lib/fair_share.h): NULL when the owner holds its share of gpu_procs (counted) or the
 * map is full (errors telemetry). The owner is written once the row is made: an entry
 * another thread of the process makes in between (a window of a few instructions) is
 * taken as root's, uncounted, and later given back as the owner's, leaving the owner's
 * count one low; a row deleted in between (an exec) leaves it one high. Userspace's
 * recount (user/modules/gpu/gpu_shares.c), from the rows, sets both right.
 */
static __always_inline struct gpu_proc_stats *gpu_proc(TLM_PARAM, __u32 tgid)
{
	struct gpu_proc_stats *st = bpf_map_lookup_elem(&gpu_procs, &tgid);
	__u32 owner;
	long err;

	if (st)
		return st;
	owner = fair_share_owner();
	if (!fair_share_take(TLM_ARG, GPU_SHARE_PROCS, owner, gpu_share_cap[GPU_SHARE_PROCS])) {
		__sync_fetch_and_add(&gpu_share_refused[GPU_SHARE_PROCS], 1);
		return NULL;
	}
	err = tlm_map_insert(gpu_procs, &tgid, &gpu_proc_init);
	st = bpf_map_lookup_elem(&gpu_procs, &tgid);
	if (err) { /* -EEXIST: another thread made it, in its owner's share */
		fair_share_give(GPU_SHARE_PROCS, owner);
		return st;
	}
	if (!st)
		return NULL; /* deleted at once (an exec): counted until the recount */
	st->owner = owner;
	/* Stamped once: two threads making the row at once stamp it once. */
	if (!st->born_ns)
		__sync_val_compare_and_swap(&st->born_ns, 0, bpf_ktime_get_boot_ns());
	return st;
}

/*
 * Process st takes an entry of table t: *held, its count of them, within per_proc (its
 * own share of the map), and its owner's count within the owner's share. false when
 * either is full (an owner's refusal counted in gpu_share_refused); the caller counts
 * what goes untracked.
 */
static __always_inline bool gpu_share_take(TLM_PARAM, struct gpu_proc_stats *st, __u32 t,
					   __u64 *held, __u32 per_proc)
{
	t = gpu_share_idx(t);
	if (__sync_fetch_and_add(held, 1) >= per_proc) {
		__sync_fetch_and_add(held, -1);
		return false;
	}
	if (fair_share_take(TLM_ARG, t, st->owner, gpu_share_cap[t]))
		return true;
	__sync_fetch_and_add(held, -1);
	__sync_fetch_and_add(&gpu_share_refused[t], 1);
	return false;
}

/* An entry of table t that process st took (gpu_share_take) is deleted, or not made. */
static __always_inline void gpu_share_give(struct gpu_proc_stats *st, __u32 t, __u64 *held)
{
	__sync_fetch_and_add(held, -1);
	fair_share_give(t, st->owner);
}

_Static_assert((GPU_THREAD_SLOTS & (GPU_THREAD_SLOTS - 1)) == 0, "thread ids index slots");

static __always_inline struct gpu_thread_slot *gpu_thread_slot(__u64 pid_tgid)
{
	__u32 idx = (__u32)pid_tgid & (GPU_THREAD_SLOTS - 1);

	return bpf_map_lookup_elem(&gpu_thread_slots, &idx);
}

/* The thread's state, or NULL: none yet. */
static __always_inline struct gpu_thread *gpu_thread_find(__u64 pid_tgid)
{
	struct gpu_thread_slot *s = gpu_thread_slot(pid_tgid);

	if (!s)
		return NULL;
	if (s->owner == pid_tgid)
		return &s->th;
	return s->spilled ? bpf_map_lookup_elem(&gpu_threads, &pid_tgid) : NULL;
}

/* A thread's state made (gpu_thread_get), once a thread: a subprogram, not inlined,
 * so that the hot calls' programs (a launch's entry), which find the state made,
 * carry none of its code (the owner's range search, the share). */
static __noinline struct gpu_thread *gpu_thread_make(TLM_PARAM, __u64 pid_tgid,
						     struct gpu_thread_slot *s)
{
	struct gpu_thread *th, init;
	__u32 owner;

	owner = fair_share_owner();
	if (!fair_share_take(TLM_ARG, GPU_SHARE_THREADS, owner,
			     gpu_share_cap[GPU_SHARE_THREADS])) {
		__sync_fetch_and_add(&gpu_share_refused[GPU_SHARE_THREADS], 1);
		return NULL;
	}
	/* Taken with a compare-and-swap: another thread of the same index may race us. */
	if (!s->owner && !__sync_val_compare_and_swap(&s->owner, 0, pid_tgid)) {
		s->th = gpu_thread_init;
		s->th.owner = owner;
		return &s->th;
	}
	if (!s->spilled)
		s->spilled = 1;
	init = gpu_thread_init;
	init.owner = owner;
	/* Not there (looked up above, or the slot had not spilled): made, or no room. */
	th = tlm_map_lookup_or_init(gpu_threads, &pid_tgid, &init);
	if (!th)
		fair_share_give(GPU_SHARE_THREADS, owner);
	return th;
}

/*
 * The thread's state, made if it has none: in its slot if free, else in gpu_threads.
 * A thread whose state spilled keeps it there, also once its slot is free again.
 * A new state is in the share of the thread's owner (lib/fair_share.h): one user's
 * threads, each parked after a call, cannot take every slot and the spill map, which
 * would leave the others' threads without a depth, their runtime's driver calls
 * counted twice. NULL past the owner's share (counted: gpu_share_refused), or with no
 * room (errors telemetry); that thread's driver calls made inside its runtime's are
 * then counted as its own, its launches on device 0.
 */
static __always_inline struct gpu_thread *gpu_thread_get(TLM_PARAM, __u64 pid_tgid)
{
	struct gpu_thread_slot *s = gpu_thread_slot(pid_tgid);
	struct gpu_thread *th;

	if (!s)
		return NULL;
	if (s->owner == pid_tgid)
		return &s->th;
	if (s->spilled) {
		th = bpf_map_lookup_elem(&gpu_threads, &pid_tgid);
		if (th)
			return th;
	}
	return gpu_thread_make(TLM_ARG, pid_tgid, s);
}

/* Free slot s if thread pid_tgid holds it: its owner's share goes back. The owner is
 * read first: once free, another thread may take the slot and write its own. True
 * when freed. */
static __always_inline bool gpu_thread_slot_release(struct gpu_thread_slot *s, __u64 pid_tgid)
{
	__u32 owner = s->th.owner;

	if (!pid_tgid || __sync_val_compare_and_swap(&s->owner, pid_tgid, 0) != pid_tgid)
		return false;
	fair_share_give(GPU_SHARE_THREADS, owner);
	return true;
}

/* The thread is gone: its slot is free, or its entry dropped. */
static __always_inline void gpu_thread_drop(TLM_PARAM, __u64 pid_tgid)
{
	struct gpu_thread_slot *s = gpu_thread_slot(pid_tgid);
	struct gpu_thread *th;
	__u32 owner;

	if (!s)
		return;
	if (s->owner == pid_tgid) {
		gpu_thread_slot_release(s, pid_tgid);
		return;
	}
	th = s->spilled ? bpf_map_lookup_elem(&gpu_threads, &pid_tgid) : NULL;
	if (!th)
		return;
	owner = th->owner;
	if (!tlm_map_delete(gpu_threads, &pid_tgid))
		fair_share_give(GPU_SHARE_THREADS, owner);
}

/* Is a driver call whose entry had stack pointer sp the runtime's own, made inside a
 * runtime call on this thread (see the top of this file)? */
static __always_inline bool gpu_thread_in_runtime(const struct gpu_thread *th, __u64 sp)
{
	return th && th->rt_depth && sp < th->rt_sp;
}

static __always_inline bool gpu_in_runtime(__u64 pid_tgid, __u64 sp)
{
	return gpu_thread_in_runtime(gpu_thread_find(pid_tgid), sp);
}

/* A thread's device when it is not a known one: it never chose one, or it made
 * current a driver context made before we watched, or it unbound its context
 * (cuCtxSetCurrent(NULL)) and no runtime call has bound one since. */
#define GPU_THREAD_DEV_NONE    (-1)
#define GPU_THREAD_DEV_UNKNOWN (-2)
#define GPU_THREAD_DEV_UNBOUND (-3)
/* The runtime's: a runtime call bound its device's primary context (no driver call
 * made another current since): the one cudaSetDevice chose, else device 0. */
#define GPU_THREAD_DEV_RUNTIME (-4)

/* A runtime call enters at stack pointer sp: one deeper, or, at or above the outermost
 * one's, the first again (the one before returned unseen). It binds the runtime's
 * device's context where none is current. */
static __always_inline void gpu_runtime_enter(struct gpu_thread *th, __u64 sp)
{
	if (th->rt_depth && sp >= th->rt_sp)
		th->rt_depth = 0;
	if (!th->rt_depth)
		th->rt_sp = sp;
	th->rt_depth++;
	if (th->device == GPU_THREAD_DEV_NONE || th->device == GPU_THREAD_DEV_UNBOUND)
		th->device = GPU_THREAD_DEV_RUNTIME;
}

/* The device slot a call of func is counted under, on a thread whose state is th (NULL:
 * none yet). With no context current that a driver call made, a runtime call uses the
 * device the runtime binds: the one cudaSetDevice chose, also after a driver call
 * unbound it, else device 0 (the runtime's default); so does a driver call once a
 * runtime call bound it (a framework's cuLaunchKernel after its cudaMalloc). A driver
 * call on a thread the runtime never bound, or unbound since, has none we know, and
 * neither has any call in a context whose device is not known. */
static __always_inline __u32 gpu_thread_dev_slot(const struct gpu_thread *th, __u64 func)
{
	__s32 dev = th ? th->device : GPU_THREAD_DEV_NONE;

	if (dev == GPU_THREAD_DEV_RUNTIME ||
	    ((dev == GPU_THREAD_DEV_NONE || dev == GPU_THREAD_DEV_UNBOUND) && !gpu_fn_driver(func)))
		dev = th && th->rt_device >= 0 ? th->rt_device : 0;
	if (dev < 0)
		return GPU_DEV_UNKNOWN;
	return dev < GPU_MAX_DEVICES ? (__u32)dev : GPU_DEV_UNKNOWN;
}

static __always_inline __u32 gpu_dev_slot(__u64 pid_tgid, __u64 func)
{
	return gpu_thread_dev_slot(gpu_thread_find(pid_tgid), func);
}

/* A slot as an index the verifier can bound. 64-bit on purpose: a 32-bit one is
 * zero-extended into another register after the check, which loses the bound. */
static __always_inline __u64 gpu_dev_idx(__u64 slot)
{
	barrier_var(slot);
	if (slot >= GPU_DEV_SLOTS)
		slot = GPU_DEV_UNKNOWN;
	return slot;
}

_Static_assert((GPU_FN__COUNT & (GPU_FN__COUNT - 1)) == 0, "GPU_FN__COUNT masks indexes");
_Static_assert(GPU_FN__USED <= GPU_FN__COUNT, "every function has its slot");

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

/*
 * Keep what a call's return needs, for the process whose stats are st (NULL: none, the
 * map full; its return would find none either, so nothing is kept). False when not
 * kept: with no room in gpu_inflight, the call's return will find nothing to account
 * (an allocation, a free, a wait, a device), so that is counted here, where it is known
 * that the entry ran.
 */
static __always_inline bool gpu_call_store(TLM_PARAM, struct gpu_proc_stats *st, __u64 pid_tgid,
					   enum gpu_func func, struct gpu_call *call)
{
	struct gpu_call_key key = {.pid_tgid = pid_tgid, .func = func};

	long err;

	if (!st)
		return false;
	call->owner = st->owner;
	if (!fair_share_take(TLM_ARG, GPU_SHARE_CALLS_IN_FLIGHT, call->owner,
			     gpu_share_cap[GPU_SHARE_CALLS_IN_FLIGHT])) {
		/* At its share, a record of this call whose return went unseen is replaced
		 * all the same (the table does not grow): left, the return would take it
		 * for this call's. */
		if (bpf_map_lookup_elem(&gpu_inflight, &key) &&
		    !tlm_map_update(gpu_inflight, &key, call, BPF_EXIST))
			return true;
		__sync_fetch_and_add(&gpu_share_refused[GPU_SHARE_CALLS_IN_FLIGHT], 1);
		goto untracked;
	}
	err = tlm_map_insert(gpu_inflight, &key, call);
	if (!err)
		return true;
	/* Such a record, replaced, holds the count this call took; no room: none made. */
	fair_share_give(GPU_SHARE_CALLS_IN_FLIGHT, call->owner);
	if (err == -EEXIST && !tlm_map_update(gpu_inflight, &key, call, BPF_EXIST))
		return true;
untracked:
	__sync_fetch_and_add(&st->calls_untracked, 1);
	return false;
}

/* Count a call and remember its arguments until its return. */
static __always_inline void gpu_call_begin(TLM_PARAM, __u64 pid_tgid, enum gpu_func func, __u64 now,
					   __u64 arg0, __u64 arg1)
{
	struct gpu_call call = {
		.ktime_ns = now, .arg0 = arg0, .arg1 = arg1, .freed.kind = GPU_MEM__COUNT};

	gpu_call_store(TLM_ARG, gpu_call_count(TLM_ARG, pid_tgid, func), pid_tgid, func, &call);
}

/* Take the call's arguments back at its return. False if its entry was not seen
 * (attached mid-call), or had no room to keep them (counted there), or if the record
 * was deleted under this copy: whoever deleted it owns it (a restart's gap drop,
 * gpu_exec_body, walking a process whose threads run; a freed allocation parked in it
 * would else be given back twice, its process's tracked count taken below zero). */
static __always_inline bool gpu_call_end(TLM_PARAM, __u64 pid_tgid, enum gpu_func func,
					 struct gpu_call *out)
{
	struct gpu_call_key key = {.pid_tgid = pid_tgid, .func = func};
	struct gpu_call *call;

	call = bpf_map_lookup_elem(&gpu_inflight, &key);
	if (!call)
		return false;
	*out = *call;
	if (tlm_map_take(gpu_inflight, &key))
		return false;
	fair_share_give(GPU_SHARE_CALLS_IN_FLIGHT, out->owner);
	return true;
}

static __always_inline void gpu_count_error(TLM_PARAM, struct gpu_proc_stats *st, __u64 pid_tgid,
					    enum gpu_func func, int error)
{
	struct gpu_err_key key = {.tgid = pid_tgid >> 32, .func = func, .error = error};
	__u64 one = 1, *cnt;

	__sync_fetch_and_add(&st->failed[gpu_fn_idx(func)], 1);
	__sync_fetch_and_add(&st->dev[gpu_dev_idx(gpu_dev_slot(pid_tgid, func))].errors, 1);
	long err;

	cnt = bpf_map_lookup_elem(&gpu_errors, &key);
	if (cnt) {
		__sync_fetch_and_add(cnt, 1);
		return;
	}
	if (!gpu_share_take(TLM_ARG, st, GPU_SHARE_ERROR_KINDS, &st->error_kinds,
			    gpu_error_kinds_per_proc)) {
		__sync_fetch_and_add(&st->error_kinds_over_cap, 1);
		return;
	}
	err = tlm_map_insert(gpu_errors, &key, &one);
	if (!err)
		return;
	gpu_share_give(st, GPU_SHARE_ERROR_KINDS, &st->error_kinds);
	/* -EEXIST: another CPU inserted this key since our lookup, a benign race. */
	if (err == -EEXIST) {
		cnt = bpf_map_lookup_elem(&gpu_errors, &key);
		if (cnt)
			__sync_fetch_and_add(cnt, 1);
	}
}

/* grid x block threads, saturated: six 32-bit sizes can pass 64 bits (a grid of
 * 2^31-1 x 65535 x 65535 blocks of 1024 is ~2^73, and a failed launch's sizes can be
 * anything: launches are counted at their entry). */
static __always_inline __u64 gpu_mul_sat(__u64 a, __u64 b)
{
	__u64 q;

	if (!a)
		return 0;
	q = ~0ULL / a;
	barrier_var(q); /* else clang makes it an overflow multiply: 128 bits, not BPF */
	return b > q ? ~0ULL : a * b;
}

/*
 * Add v to *p, a counter that never goes down (exported as a Prometheus counter),
 * saturating at 2^64 - 1. A process's calls can claim any size (a launch's sizes are
 * counted at its entry; a crafted library returns success for any copy), and two
 * saturated launches summed would wrap round to a small number: a counter reset, and a
 * spike in every rate() and sum() over it. A compare-and-swap of the sum, as cheap as
 * an atomic add when no other CPU adds at the same time: an add with a check after it
 * would leave the wrapped value there for a moment, for a reader to see, and a plain add
 * racing a saturating one wraps it for good.
 *
 * The retries are a global function, verified once per program: inlined at a dozen
 * call sites, their loop's branches were a fifth of what the verifier walked in the
 * GPU programs (a module restart is mostly their verification). The first try stays
 * inline (gpu_add_sat): no call on the hot path. p is never NULL, an aligned field of a
 * map value (atomics need 8-byte alignment, which a global function's argument is not
 * checked for), but the verifier checks a global function for any caller.
 */
__noinline int gpu_add_sat_retry(__u64 *p, __u64 v)
{
	__u64 old, cur;
	int i;

	if (!p)
		return 0;
	old = *(volatile __u64 *)p;
	for (i = 0; i < 4; i++) {
		cur = __sync_val_compare_and_swap(p, old, old + v < old ? ~0ULL : old + v);
		if (cur == old)
			return 0;
		old = cur;
	}
	/* Lost the race four times (other CPUs adding to this very counter): added all
	 * the same, and put back at the top if that took it past. */
	old = __sync_fetch_and_add(p, v);
	if (old + v < old)
		__sync_lock_test_and_set(p, ~0ULL);
	return 0;
}

static __always_inline void gpu_add_sat(__u64 *p, __u64 v)
{
	__u64 old = *(volatile __u64 *)p;

	if (old + v >= old && __sync_val_compare_and_swap(p, old, old + v) == old)
		return; /* no other CPU added meanwhile, and no wrap */
	gpu_add_sat_retry(p, v);
}

static __always_inline __u64 gpu_threads_of(const __u32 grid[3], const __u32 block[3])
{
	__u64 g = (__u64)grid[0] * grid[1], b = (__u64)block[0] * block[1]; /* both fit */

	/* The launch path: factors under 2^32 multiply without overflow, and without the
	 * divisions the check otherwise takes (BPF has no 128-bit product). */
	if (!((g | b) >> 32)) {
		g *= grid[2];
		b *= block[2];
		if (!((g | b) >> 32))
			return g * b;
		return gpu_mul_sat(g, b);
	}
	return gpu_mul_sat(gpu_mul_sat(g, grid[2]), gpu_mul_sat(b, block[2]));
}

/* floor(log2(v)) for v > 0: the top bit smeared down, then its ones counted (SWAR).
 * No branch: the verifier walked the 64 paths of a branch per bit at each launch's
 * entry, the largest part of the GPU entry program's verification left. */
static __always_inline __u32 gpu_log2(__u64 v)
{
	v |= v >> 1;
	v |= v >> 2;
	v |= v >> 4;
	v |= v >> 8;
	v |= v >> 16;
	v |= v >> 32;
	v -= (v >> 1) & 0x5555555555555555ULL;
	v = (v & 0x3333333333333333ULL) + ((v >> 2) & 0x3333333333333333ULL);
	v = (v + (v >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
	return (__u32)((v * 0x0101010101010101ULL) >> 56) - 1;
}

/* The size bucket of a launch of threads threads (struct gpu_launch_key). */
static __always_inline __u8 gpu_launch_bucket(__u64 threads)
{
	__u32 bucket;

	if (!threads)
		return GPU_LAUNCH_NO_BUCKET;
	bucket = gpu_log2(threads);
	return bucket < GPU_LAUNCH_BUCKETS ? bucket : GPU_LAUNCH_BUCKETS - 1;
}

/* A launch the process's stats st count, its row having no room. */
static __always_inline void gpu_count_launch_stats(struct gpu_proc_stats *st,
						   const struct gpu_launch_key *key, __u64 threads)
{
	__u64 dev = gpu_dev_idx(key->dev);

	__sync_fetch_and_add(&st->calls[gpu_fn_idx(key->fn)], 1);
	__sync_fetch_and_add(&st->dev[dev].launches, 1);
	gpu_add_sat(&st->dev[dev].threads, threads);
	gpu_add_sat(&st->threads, threads);
	if (key->bucket < GPU_LAUNCH_BUCKETS)
		__sync_fetch_and_add(&st->launch_threads[key->bucket], 1);
}

/*
 * Count a launch by fn of one kernel (api, func) on device slot slot (the thread's
 * current one: its state is looked up once per probe, by the caller): grid and block as
 * the call gave them, zeros where unread. Its row of gpu_kernels takes it, and nothing
 * else: the hot path is one lookup and two adds. A row is made at its first launch,
 * after the process's stats (what makes the process known: gpu_procs); with no room
 * for it, the stats count the launch. Nothing is counted when the process has no stats
 * (gpu_procs full: counted by errors telemetry), as for any other call.
 */
static __always_inline void gpu_count_launch(TLM_PARAM, __u64 pid_tgid, enum gpu_func fn, __u32 api,
					     __u64 func, __u32 slot, const __u32 grid[3],
					     const __u32 block[3])
{
	__u64 threads = gpu_threads_of(grid, block);
	struct gpu_launch_key key = {.tgid = pid_tgid >> 32, .api = api, .fn = gpu_fn_idx(fn),
				     .dev = gpu_dev_idx(slot), .func = func};
	struct gpu_kernel k = {.launches = 1, .threads = threads}, *cur;
	struct gpu_proc_stats *st;

	key.bucket = gpu_launch_bucket(threads);
	cur = bpf_map_lookup_elem(&gpu_kernels, &key);
	if (!cur) {
		st = gpu_proc(TLM_ARG, key.tgid);
		if (!st)
			return;
		if (!gpu_share_take(TLM_ARG, st, GPU_SHARE_KERNEL_ROWS, &st->kernel_rows,
				    gpu_kernel_rows_per_proc)) {
			__sync_fetch_and_add(&st->kernel_rows_over_cap, 1);
			gpu_count_launch_stats(st, &key, threads);
			return;
		}
		__builtin_memcpy(k.grid, grid, sizeof(k.grid));
		__builtin_memcpy(k.block, block, sizeof(k.block));
		switch (tlm_map_insert(gpu_kernels, &key, &k)) {
		case 0:
			return;
		case -EEXIST: /* another thread of the process made it since our lookup */
			gpu_share_give(st, GPU_SHARE_KERNEL_ROWS, &st->kernel_rows);
			cur = bpf_map_lookup_elem(&gpu_kernels, &key);
			if (cur)
				break;
			gpu_count_launch_stats(st, &key, threads);
			return;
		default:
			gpu_share_give(st, GPU_SHARE_KERNEL_ROWS, &st->kernel_rows);
			gpu_count_launch_stats(st, &key, threads);
			return;
		}
	}
	__sync_fetch_and_add(&cur->launches, 1);
	gpu_add_sat(&cur->threads, threads);
	/* The last launch's sizes; a racing launch may mix its own in: a display value. */
	__builtin_memcpy(cur->grid, grid, sizeof(k.grid));
	__builtin_memcpy(cur->block, block, sizeof(k.block));
}

/* Launches' dynamic shared memory, when summed (gpu_launch_shared_mem): the process's
 * stats are looked up for it, off the launch's hot path. */
static __always_inline void gpu_count_shared_mem(TLM_PARAM, __u64 pid_tgid, __u64 bytes)
{
	struct gpu_proc_stats *st = gpu_proc(TLM_ARG, pid_tgid >> 32);

	if (st)
		gpu_add_sat(&st->shared_mem_bytes, bytes);
}

#endif /* BPFTEL_LIB_GPU_STATE_H */
