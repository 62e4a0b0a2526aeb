/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * GPU module: the types that cross the kernel/user boundary.
 *
 * Included by bpf/gpu.bpf.c (after vmlinux.h) and by userspace (after <linux/types.h>).
 * The BPF side aggregates in maps; userspace reads them (no per-call events):
 *   gpu_procs   tgid -> struct gpu_proc_stats        per-process counters
 *   gpu_allocs  struct gpu_alloc_key -> gpu_alloc     outstanding allocations, every kind
 *   gpu_errors  struct gpu_err_key -> __u64           failed calls per (function, error)
 *   gpu_kernels struct gpu_launch_key -> gpu_kernel   launches per (process, kernel,
 *                                                     function, device, size)
 *   gpu_knames  struct gpu_kernel_key -> gpu_kname    driver kernels' names
 *   gpu_khosts  struct gpu_kernel_key -> __u64        runtime handles' host functions
 *   gpu_thread_slots __u32 -> gpu_thread_slot         per-thread state, by thread id
 */
#ifndef BPFTEL_GPU_H
#define BPFTEL_GPU_H

/*
 * The CUDA calls probed: runtime (libcudart) below GPU_FN_CU_FIRST (20-23 spare), driver
 * (libcuda) from it. Values index arrays and keys, and are attachment cookies: both
 * sides of one build agree on them, nothing keeps them across builds.
 * A function's per-thread default stream variant (cudaLaunchKernel_ptsz, cuMemcpyHtoD_v2_ptds,
 * ...: what a program built with --default-stream per-thread calls) is probed with the
 * same value: its calls are the function's.
 */
enum gpu_func {
	GPU_FN_LAUNCH = 0,	    /* cudaLaunchKernel */
	GPU_FN_MALLOC = 1,	    /* cudaMalloc */
	GPU_FN_FREE = 2,	    /* cudaFree */
	GPU_FN_MEMCPY = 3,	    /* cudaMemcpy */
	GPU_FN_MEMCPY_ASYNC = 4,    /* cudaMemcpyAsync */
	GPU_FN_STREAM_SYNC = 5,	    /* cudaStreamSynchronize */
	GPU_FN_DEVICE_SYNC = 6,	    /* cudaDeviceSynchronize */
	GPU_FN_SET_DEVICE = 7,	    /* cudaSetDevice */
	GPU_FN_MALLOC_ASYNC = 8,    /* cudaMallocAsync (stream-ordered) */
	GPU_FN_FREE_ASYNC = 9,	    /* cudaFreeAsync */
	GPU_FN_MALLOC_MANAGED = 10, /* cudaMallocManaged (unified memory) */
	GPU_FN_MALLOC_HOST = 11,    /* cudaMallocHost (pinned host memory) */
	GPU_FN_HOST_ALLOC = 12,	    /* cudaHostAlloc (pinned host memory, with flags) */
	GPU_FN_FREE_HOST = 13,	    /* cudaFreeHost */
	/* __cudaGetKernel(cudaKernel_t *, const void *hostFun): what nvcc 12.8+/13 host
	 * stubs call once per kernel before they launch it by handle; it maps the handle
	 * cudaLaunchKernel is given to the host function the kernel is named by. */
	GPU_FN_GET_KERNEL = 14,
	/* cudaLaunchKernelExC(const cudaLaunchConfig_t *, const void *func, void **args):
	 * what cudaLaunchKernelEx (cuda_runtime.h, CUDA 11.8+: cluster and attribute
	 * launches, CUTLASS's) calls. */
	GPU_FN_LAUNCH_EX = 15,
	GPU_FN_LAUNCH_COOP = 16,  /* cudaLaunchCooperativeKernel: cudaLaunchKernel's arguments */
	/* cudaGraphLaunch(cudaGraphExec_t, cudaStream_t): a whole graph, its kernels inside
	 * the driver, out of our sight; counted as graph launches, not kernel launches. */
	GPU_FN_GRAPH_LAUNCH = 17,
	/* cudaMallocFromPoolAsync(void **, size_t, cudaMemPool_t, cudaStream_t):
	 * stream-ordered, from a pool the program made. */
	GPU_FN_MALLOC_FROM_POOL_ASYNC = 18,
	GPU_FN_EVENT_SYNC = 19, /* cudaEventSynchronize(cudaEvent_t): a wait, as the syncs */
	GPU_FN_CU_FIRST = 24,
	GPU_FN_CU_LAUNCH = 24,		    /* cuLaunchKernel */
	GPU_FN_CU_MEM_ALLOC = 25,	    /* cuMemAlloc_v2 */
	GPU_FN_CU_MEM_FREE = 26,	    /* cuMemFree_v2 */
	GPU_FN_CU_MEMCPY_HTOD = 27,	    /* cuMemcpyHtoD_v2 */
	GPU_FN_CU_MEMCPY_DTOH = 28,	    /* cuMemcpyDtoH_v2 */
	GPU_FN_CU_MEMCPY_HTOD_ASYNC = 29,   /* cuMemcpyHtoDAsync_v2 */
	GPU_FN_CU_MEMCPY_DTOH_ASYNC = 30,   /* cuMemcpyDtoHAsync_v2 */
	GPU_FN_CU_CTX_SYNC = 31,	    /* cuCtxSynchronize, and CUDA 13's cuCtxSynchronize_v2(ctx) */
	GPU_FN_CU_STREAM_SYNC = 32,	    /* cuStreamSynchronize */
	GPU_FN_CU_INIT = 33,		    /* cuInit */
	GPU_FN_CU_CTX_CREATE = 34,	    /* cuCtxCreate_v2 */
	GPU_FN_CU_PRIMARY_CTX_RETAIN = 35,  /* cuDevicePrimaryCtxRetain */
	GPU_FN_CU_CTX_SET_CURRENT = 36,	    /* cuCtxSetCurrent */
	GPU_FN_CU_CTX_PUSH_CURRENT = 37,    /* cuCtxPushCurrent_v2 */
	GPU_FN_CU_MEM_ALLOC_MANAGED = 38,   /* cuMemAllocManaged */
	GPU_FN_CU_MEM_ALLOC_HOST = 39,	    /* cuMemAllocHost_v2 */
	GPU_FN_CU_MEM_FREE_HOST = 40,	    /* cuMemFreeHost */
	GPU_FN_CU_MODULE_GET_FUNCTION = 41, /* cuModuleGetFunction: a kernel's name */
	GPU_FN_CU_LAUNCH_EX = 42,	    /* cuLaunchKernelEx (cuBLAS launches with it) */
	/* A library's kernel by name, and its CUfunction: how CUDA 12+ libraries (cuBLAS)
	 * get the functions they launch, in place of cuModuleGetFunction. */
	GPU_FN_CU_LIBRARY_GET_KERNEL = 43,  /* cuLibraryGetKernel */
	GPU_FN_CU_KERNEL_GET_FUNCTION = 44, /* cuKernelGetFunction */
	GPU_FN_CU_CTX_CREATE_V4 = 45,	    /* cuCtxCreate_v4: CUDA 13's cuCtxCreate */
	GPU_FN_CU_LAUNCH_COOP = 46,	    /* cuLaunchCooperativeKernel: cuLaunchKernel's, less extra */
	GPU_FN_CU_GRAPH_LAUNCH = 47,	    /* cuGraphLaunch(CUgraphExec, CUstream): see cudaGraphLaunch */
	/* Stream-ordered memory of the driver (JAX/XLA's cuda_malloc_async allocator). */
	GPU_FN_CU_MEM_ALLOC_ASYNC = 48,		  /* cuMemAllocAsync(CUdeviceptr *, size_t, CUstream) */
	GPU_FN_CU_MEM_ALLOC_FROM_POOL_ASYNC = 49, /* cuMemAllocFromPoolAsync(.., pool, stream) */
	GPU_FN_CU_MEM_FREE_ASYNC = 50,		  /* cuMemFreeAsync(CUdeviceptr, CUstream) */
	/* More copies of the driver (JAX/XLA's): device to device, and unified addressing
	 * (the direction inferred, as cudaMemcpyDefault). */
	GPU_FN_CU_MEMCPY_DTOD = 51,	  /* cuMemcpyDtoD_v2(dst, src, size_t count) */
	GPU_FN_CU_MEMCPY_DTOD_ASYNC = 52, /* cuMemcpyDtoDAsync_v2(.., CUstream) */
	GPU_FN_CU_MEMCPY = 53,		  /* cuMemcpy(dst, src, size_t count) */
	GPU_FN_CU_MEMCPY_ASYNC = 54,	  /* cuMemcpyAsync(.., CUstream) */
	GPU_FN_CU_EVENT_SYNC = 55,	  /* cuEventSynchronize(CUevent) */
	GPU_FN__USED = 56,		    /* past the last value in use */
	GPU_FN__COUNT = 64,		    /* a power of two: indexes are masked */
};

/* enum cudaMemcpyKind, same values. */
enum gpu_memcpy_kind {
	GPU_MEMCPY_H2H = 0,
	GPU_MEMCPY_H2D = 1,
	GPU_MEMCPY_D2H = 2,
	GPU_MEMCPY_D2D = 3,
	GPU_MEMCPY_DEFAULT = 4, /* direction inferred by the runtime (unified addressing) */
	GPU_MEMCPY__COUNT,
};

/* What an allocation is, by the call that made it; its free is accounted to the same
 * kind whichever call frees it (cudaFree also frees managed and stream-ordered memory). */
enum gpu_mem_kind {
	GPU_MEM_DEVICE = 0,  /* cudaMalloc, cuMemAlloc_v2 */
	GPU_MEM_ASYNC = 1,   /* cudaMallocAsync, cuMemAllocAsync, ..FromPoolAsync: stream-ordered */
	GPU_MEM_MANAGED = 2, /* cudaMallocManaged, cuMemAllocManaged */
	GPU_MEM_HOST = 3,    /* cudaMallocHost, cudaHostAlloc, cuMemAllocHost_v2: pinned */
	GPU_MEM__COUNT,
};

/* Launch sizes: bucket i counts launches of [2^i, 2^(i+1)) threads (grid x block).
 * Every launch count (calls, launches, threads, sizes, per device, per kernel) is of
 * launch calls at their entry, failed ones included: those are counted again as
 * failures (failed, errors). */
#define GPU_LAUNCH_BUCKETS 40

/* Devices 0..GPU_MAX_DEVICES-1 by index; the last slot counts the rest: an index out of
 * range, or a driver call on a thread whose context we never saw made. */
#define GPU_MAX_DEVICES 8
#define GPU_DEV_UNKNOWN GPU_MAX_DEVICES
#define GPU_DEV_SLOTS	(GPU_MAX_DEVICES + 1)

struct gpu_mem_stats {
	__u64 allocs; /* successful allocations */
	__u64 alloc_bytes;
	__u64 frees; /* successful frees of a pointer we saw allocated */
	__u64 freed_bytes;
	__s64 outstanding_bytes; /* tracked allocations only */
	__s64 peak_bytes;
};

struct gpu_dev_stats {
	__u64 launches;
	__u64 threads;
	__u64 errors;		 /* failed calls made while this device was current */
	__u64 allocs;		 /* every kind */
	__s64 outstanding_bytes; /* every kind, tracked allocations only */
};

/* The sizes of the maps shared out by user (bpf/lib/gpu_state.h), which userspace
 * shows with the shares. */
#define GPU_MAX_PROCS	    4096
#define GPU_MAX_ALLOCS	    16384
#define GPU_MAX_ERRORS	    4096
#define GPU_MAX_LAUNCH_ROWS 32768 /* a kernel has a row per function, device and size */
#define GPU_MAX_INFLIGHT    8192
#define GPU_MAX_THREADS	    8192 /* threads whose slot another holds (gpu_threads) */

/*
 * The tables a user but root holds at most a share of (bpf/lib/fair_share.h), beside
 * each process's own share: fair_share_key.table in the GPU object. A process's entries
 * are its owner's: gpu_proc_stats.owner.
 */
enum gpu_share_table {
	GPU_SHARE_PROCS = 0,	   /* gpu_procs: a row per process */
	GPU_SHARE_ALLOCS = 1,	   /* gpu_allocs: allocations tracked */
	GPU_SHARE_KERNEL_ROWS = 2, /* gpu_kernels */
	GPU_SHARE_ERROR_KINDS = 3, /* gpu_errors */
	GPU_SHARE_THREADS = 4,	   /* threads' state: gpu_thread_slots and gpu_threads */
	GPU_SHARE_CALLS_IN_FLIGHT = 5, /* gpu_inflight: calls between entry and return */
	GPU_SHARE__COUNT,
};

/* A process's stats. Its kernel launches are in its rows of gpu_kernels (struct
 * gpu_launch_key), not here, but for those that found no room there: userspace adds
 * them up (calls of the launch functions, threads, launch_threads, dev's launches and
 * threads). */
struct gpu_proc_stats {
	__u64 calls[GPU_FN__COUNT];  /* entries seen (driver calls made by the runtime: not) */
	__u64 failed[GPU_FN__COUNT]; /* returns other than cudaSuccess / CUDA_SUCCESS */
	__u64 threads;		     /* sum over launches of grid x block */
	__u64 shared_mem_bytes;	     /* sum over launches of dynamic shared memory */
	__u64 launch_threads[GPU_LAUNCH_BUCKETS];
	struct gpu_mem_stats mem[GPU_MEM__COUNT];
	__u64 frees_unknown;	/* frees of a pointer allocated before we watched */
	__u64 allocs_untracked; /* not in outstanding bytes: map full, over the cap, unreadable, > 256 TiB */
	__u64 allocs_over_cap;	/* of which: the process held its share of the map */
	__u64 allocs_tracked;	/* entries this process holds in gpu_allocs now */
	__u64 allocs_replaced;	/* an allocation at a tracked address: the old one's free unseen */
	__u64 driver_nested;	/* driver calls made inside a runtime call: not counted */
	__u64 calls_untracked;	/* entries with no room in gpu_inflight: returns not accounted */
	__u64 kernel_rows;	/* rows this process holds in gpu_kernels */
	__u64 kernel_rows_over_cap; /* launches that found none, the process holding its share:
				     * counted here (calls, threads, devices), not per kernel */
	__u64 error_kinds;	    /* rows this process holds in gpu_errors */
	__u64 error_kinds_over_cap; /* failures of a new kind past its share: in failed only */
	__u64 memcpy_bytes[GPU_MEMCPY__COUNT]; /* successful copies, by kind */
	__u64 memcpy_ns;		       /* time inside synchronous copies */
	__u64 sync_ns;			       /* time inside stream/device/context syncs */
	__s32 device;			       /* last device made current, -1 none */
	/* Whose shares the process's entries are in (bpf/lib/fair_share.h: 0 the host's
	 * root), that of the thread whose call made the row (gpu_proc). */
	__u32 owner;
	/* When the row was made (bpf_ktime_get_boot_ns: the clock of /proc's start
	 * times): a process that execs loses its row (gpu_exec_body), and its new
	 * program's first call makes another. */
	__u64 born_ns;
	struct gpu_dev_stats dev[GPU_DEV_SLOTS];
};

struct gpu_alloc_key {
	__u32 tgid;
	__u32 __pad;
	__u64 ptr; /* the pointer the allocation returned */
};

struct gpu_alloc {
	__u64 size;
	__u64 ktime_ns; /* when the allocation returned (CLOCK_MONOTONIC) */
	__u32 kind;	/* enum gpu_mem_kind */
	__u32 dev;	/* device slot (GPU_DEV_UNKNOWN: not known) */
};

/* A call between its entry and its return (gpu_inflight, bpf/lib/gpu_state.h). */
struct gpu_call_key {
	__u64 pid_tgid;
	__u32 func;
	__u32 __pad;
};

struct gpu_call {
	__u64 ktime_ns;
	__u64 arg0; /* allocations: where the pointer goes; frees: the pointer; copies: count */
	__u64 arg1; /* allocations: size; copies: kind; set device: device; contexts: ctx */
	/* Frees: the pointer's record, taken out of gpu_allocs at the entry (gpu_memory.h);
	 * kind GPU_MEM__COUNT when none was tracked. */
	struct gpu_alloc freed;
	__u32 owner; /* whose share of GPU_SHARE_CALLS_IN_FLIGHT the entry is in */
	__u32 __pad;
};

/* What names a kernel: the host function cudaLaunchKernel was given (resolved to a
 * symbol of the process's ELF objects by userspace), or cuLaunchKernel's CUfunction
 * (named where cuModuleGetFunction made it). */
enum gpu_kernel_api {
	GPU_KERNEL_RUNTIME = 0,
	GPU_KERNEL_DRIVER = 1,
};

struct gpu_kernel_key {
	__u32 tgid;
	__u32 api; /* enum gpu_kernel_api */
	__u64 func;
};

/*
 * A row of gpu_kernels: one process's launches of one kernel through one launch
 * function, on one device slot, of one size (bucket: floor(log2(grid x block)), capped
 * at GPU_LAUNCH_BUCKETS - 1; GPU_LAUNCH_NO_BUCKET for a launch of no thread or of
 * sizes unread). Every dimension a launch is reported by is in the key, so a launch
 * adds to this one row and to nothing else: userspace sums a process's rows into its
 * calls, devices and size histogram (bpftel_gpu_add_launches, user/modules/gpu/gpu.h). A row is one kernel
 * of gpu_kernel_key's, whatever fn, dev and bucket.
 */
#define GPU_LAUNCH_NO_BUCKET 0xff

struct gpu_launch_key {
	__u32 tgid;
	__u8 api;    /* enum gpu_kernel_api */
	__u8 fn;     /* enum gpu_func: the launch function */
	__u8 dev;    /* device slot (GPU_DEV_SLOTS) */
	__u8 bucket; /* of launch_threads, or GPU_LAUNCH_NO_BUCKET */
	__u64 func;
};

struct gpu_kernel {
	__u64 launches;
	__u64 threads; /* grid x block, summed */
	__u32 grid[3]; /* of the row's last launch */
	__u32 block[3];
};

/* A kernel label's size (BPFTEL_GPU_KERNEL_NAME): a mangled name longer than this would
 * be cut once demangled too, and the C++ names of templated kernels are often longer
 * than 127 bytes, which no longer demangle once cut. */
#define GPU_KNAME_LEN 256

struct gpu_kname {
	char name[GPU_KNAME_LEN]; /* as the process passed it, NUL-terminated */
	/* Whose it is, as first named: (process, handle the name was given). */
	__u32 tgid;
	__u32 cut; /* the name was longer than name holds: its first bytes only */
	__u64 named;
};

/* Per thread (gpu_thread_slots, or gpu_threads by pid_tgid): see bpf/lib/gpu_state.h. */
struct gpu_thread {
	__s32 device;	 /* current device, -1 not known */
	__u32 rt_depth;	 /* runtime calls this thread is inside */
	__u64 rt_sp;	 /* the stack pointer at the outermost one's entry */
	__s32 rt_device; /* the runtime's, from cudaSetDevice; -1 none chosen */
	__u32 owner;	 /* whose share of GPU_SHARE_THREADS this state is in */
};

/* A thread's slot of gpu_thread_slots: the one its thread id's low bits index (see
 * bpf/lib/gpu_state.h). */
#define GPU_THREAD_SLOTS 8192

struct gpu_thread_slot {
	__u64 owner;	/* pid_tgid of the thread whose state this is; 0: free */
	__u32 spilled;	/* a thread of this slot's index has its state in gpu_threads */
	__u32 __pad;
	struct gpu_thread th;
};

/* gpu_slot_free's argument (BPF_PROG_TEST_RUN's context): free slot idx if owner,
 * a thread gone without an exit, still holds it. */
struct gpu_slot_free_args {
	__u32 idx;
	__u32 __pad;
	__u64 owner;
};

/* gpu_exec_drop's: the process that exec'd unseen (a restart's gap). */
struct gpu_exec_drop_args {
	__u32 tgid;
	__u32 __pad;
};

struct gpu_err_key {
	__u32 tgid;
	__u16 func; /* enum gpu_func: a runtime one gives a cudaError_t, a driver one a CUresult */
	__u16 __pad;
	__s32 error;
	__u32 __pad2;
};

_Static_assert(sizeof(struct gpu_mem_stats) == 6 * 8, "gpu_mem_stats layout");
_Static_assert(sizeof(struct gpu_dev_stats) == 5 * 8, "gpu_dev_stats layout");
_Static_assert(sizeof(struct gpu_proc_stats) ==
		       8 * (2 * GPU_FN__COUNT + 2 + GPU_LAUNCH_BUCKETS + 6 * GPU_MEM__COUNT + 7 + 4 +
			    GPU_MEMCPY__COUNT + 2 + 1 + 1 + 5 * GPU_DEV_SLOTS),
	       "gpu_proc_stats layout");
_Static_assert(sizeof(struct gpu_alloc_key) == 16, "gpu_alloc_key layout");
_Static_assert(sizeof(struct gpu_alloc) == 24, "gpu_alloc layout");
_Static_assert(sizeof(struct gpu_thread) == 24, "gpu_thread layout");
_Static_assert(sizeof(struct gpu_thread_slot) == 40, "gpu_thread_slot layout");
_Static_assert(sizeof(struct gpu_err_key) == 16, "gpu_err_key layout");
_Static_assert(sizeof(struct gpu_kernel_key) == 16, "gpu_kernel_key layout");
_Static_assert(sizeof(struct gpu_launch_key) == 16, "gpu_launch_key layout");
_Static_assert(GPU_LAUNCH_BUCKETS < GPU_LAUNCH_NO_BUCKET, "a bucket fits its byte");
_Static_assert(sizeof(struct gpu_kernel) == 40, "gpu_kernel layout");

#endif /* BPFTEL_GPU_H */
