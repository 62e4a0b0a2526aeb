/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Kernel names (gpu_kernels.c): a launched kernel's key (bpf/gpu.h) to a demangled name.
 * May open and parse the process's files: call without the module's lock.
 */
#ifndef BPFTEL_GPU_KERNELS_H
#define BPFTEL_GPU_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

#include "gpu.h"

/* A launched kernel as read from the module's maps. */
struct bpftel_gpu_kernel_seen {
	struct gpu_kernel_key key;
	struct gpu_kernel k;
	char driver_name[GPU_KNAME_LEN]; /* from gpu_knames, "" none */
	char name[BPFTEL_GPU_KERNEL_NAME];
};

/* Name every kernel of ks (may parse files: without the module's lock), then give each
 * row its top kernels by launches, kernels of the same name merged. Reorders ks. */
void bpftel_gpu_kernels__fill(struct bpftel_gpu_proc *rows, size_t n,
			      struct bpftel_gpu_kernel_seen *ks, size_t nks);

/* The name of key's kernel in process pid, into name ("" when it has none we can tell,
 * or when it would take a parse and *budget is spent; a parse takes one from it).
 * driver_name: what cuModuleGetFunction was given for a driver kernel, or NULL. */
void bpftel_gpu_kernels__name(__u32 pid, const struct gpu_kernel_key *key, const char *driver_name,
			      char *name, size_t size, int *budget);
/* Forget what was learnt of pid (it exited). */
void bpftel_gpu_kernels__forget(__u32 pid);
/* in demangled when it is an Itanium C++ ABI name that demangles, else copied. */
void bpftel_gpu_demangle(const char *in, char *out, size_t size);

#endif /* BPFTEL_GPU_KERNELS_H */
