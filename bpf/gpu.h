/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * GPU module: the types that cross the kernel/user boundary.
 *
 * Included by bpf/gpu.bpf.c (after vmlinux.h) and by userspace (after <linux/types.h>).
 * The BPF side aggregates in maps; userspace reads them (no per-call events):
 *   gpu_procs   tgid -> struct gpu_proc_stats        per-process counters
 *   gpu_allocs  struct gpu_alloc_key -> gpu_alloc     outstanding device allocations
 *   gpu_errors  struct gpu_err_key -> __u64           failed calls per (function, error)
 */
#ifndef BPFTEL_GPU_H
#define BPFTEL_GPU_H

/* The CUDA runtime calls probed. Values are stable: they index arrays and keys. */
enum gpu_func {
	GPU_FN_LAUNCH = 0,	 /* cudaLaunchKernel */
	GPU_FN_MALLOC = 1,	 /* cudaMalloc */
	GPU_FN_FREE = 2,	 /* cudaFree */
	GPU_FN_MEMCPY = 3,	 /* cudaMemcpy */
	GPU_FN_MEMCPY_ASYNC = 4, /* cudaMemcpyAsync */
	GPU_FN_STREAM_SYNC = 5,	 /* cudaStreamSynchronize */
	GPU_FN_DEVICE_SYNC = 6,	 /* cudaDeviceSynchronize */
	GPU_FN_SET_DEVICE = 7,	 /* cudaSetDevice */
	GPU_FN__COUNT,
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

/* Launch sizes: bucket i counts launches of [2^i, 2^(i+1)) threads (grid x block). */
#define GPU_LAUNCH_BUCKETS 40

struct gpu_proc_stats {
	__u64 calls[GPU_FN__COUNT];  /* entries seen */
	__u64 failed[GPU_FN__COUNT]; /* returns other than cudaSuccess */
	__u64 threads;		     /* sum over launches of grid x block */
	__u64 shared_mem_bytes;	     /* sum over launches of dynamic shared memory */
	__u64 launch_threads[GPU_LAUNCH_BUCKETS];
	__u64 allocs; /* successful cudaMalloc */
	__u64 alloc_bytes;
	__u64 frees; /* successful cudaFree of a pointer we saw allocated */
	__u64 freed_bytes;
	__u64 frees_unknown;	/* cudaFree of a pointer allocated before we watched */
	__u64 allocs_untracked; /* allocation map full: not in outstanding bytes */
	__s64 outstanding_bytes;
	__s64 peak_bytes;
	__u64 memcpy_bytes[GPU_MEMCPY__COUNT]; /* successful copies, by kind */
	__u64 memcpy_ns;		       /* time inside synchronous cudaMemcpy */
	__u64 sync_ns;			       /* time inside cudaStream/DeviceSynchronize */
	__s32 device;			       /* last cudaSetDevice that succeeded, -1 none */
	__u32 __pad;
};

struct gpu_alloc_key {
	__u32 tgid;
	__u32 __pad;
	__u64 ptr; /* device pointer cudaMalloc returned */
};

struct gpu_alloc {
	__u64 size;
	__u64 ktime_ns; /* when cudaMalloc returned (CLOCK_MONOTONIC) */
};

struct gpu_err_key {
	__u32 tgid;
	__u16 func; /* enum gpu_func */
	__u16 __pad;
	__s32 error; /* cudaError_t */
	__u32 __pad2;
};

_Static_assert(sizeof(struct gpu_proc_stats) == 8 * (2 * GPU_FN__COUNT + 2 + GPU_LAUNCH_BUCKETS +
						     8 + GPU_MEMCPY__COUNT + 2 + 1),
	       "gpu_proc_stats layout");
_Static_assert(sizeof(struct gpu_alloc_key) == 16, "gpu_alloc_key layout");
_Static_assert(sizeof(struct gpu_err_key) == 16, "gpu_err_key layout");

#endif /* BPFTEL_GPU_H */
