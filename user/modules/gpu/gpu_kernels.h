/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Kernel names and series (gpu_kernels.c): a launched kernel's key (bpf/gpu.h) to a
 * demangled name, and each process's series of bpftel_gpu_kernel_name_launches_total.
 * Naming may open and parse the process's files: call without the module's lock.
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
	bool driver_cut; /* driver_name is the first bytes of a longer name */
	__u64 host; /* a runtime handle's host function, from gpu_khosts; 0: key.func is it */
	char name[BPFTEL_GPU_KERNEL_NAME];
};

/* What is remembered of kernels from one report to the next: each handle's name (one
 * resolution per handle, kept while its process lives) and the launches read, and the
 * series each process has. Not locked: the caller runs one report at a time, each on
 * maps read after the previous report's (the module's report lock). symbolize is
 * called without it (bpftel_gpu_kernels__symbolize). */
struct bpftel_gpu_kernels;

/* A host function to name: the symbol holding addr in pid's ELF objects, demangled. */
struct bpftel_gpu_sym {
	__u32 pid;
	__u64 addr;
	char name[BPFTEL_GPU_KERNEL_NAME]; /* "" when none */
	bool tried; /* named, or found to have no name; else left for a later report */
	bool failed; /* not tried: its file could not be opened through any process that
		      * maps it (gone, or their owner's opens stalled); asked again at a
		      * later report, BPFTEL_GPU_NAME_TRIES times at most */
};

/* Reports that ask for a host function whose file could not be opened, before its
 * kernel is left unnamed: a file that fails for good costs the budget no more. */
#define BPFTEL_GPU_NAME_TRIES 3

/* Name syms[0..n): the ones of one file in one parse, at most BPFTEL_GPU_NAME_FILES
 * files. */
typedef void bpftel_gpu_symbolize_fn(struct bpftel_gpu_sym *syms, size_t n);

/* How the files are opened: bpftel_procfile_open (user/sharedlibs/procfile.h). */
struct bpftel_procfile_target;
enum bpftel_refusal;
struct stat;
typedef int bpftel_gpu_open_fn(const struct bpftel_procfile_target *t, struct stat *st,
			       enum bpftel_refusal *why);

/* The symbolizer that symbolize NULL below uses, with its opens made by open: a file
 * is opened through the process that launched most of the group that maps it, else,
 * if that open fails (the process exited, or its owner's opens stall), through the
 * next, BPFTEL_GPU_NAME_OPENS processes at most; tests pass an open that fails. */
#define BPFTEL_GPU_NAME_OPENS 3
void bpftel_gpu_symbolize_files(struct bpftel_gpu_sym *syms, size_t n, bpftel_gpu_open_fn *open);

/* symbolize NULL: from the processes' files (the mapping that holds each address, the
 * file through /proc/<pid>/map_files); tests give their own. NULL when out of memory. */
struct bpftel_gpu_kernels *bpftel_gpu_kernels__new(bpftel_gpu_symbolize_fn *symbolize);
void bpftel_gpu_kernels__free(struct bpftel_gpu_kernels *kt);

/*
 * A report in three steps, so that no lock is held while files are parsed: under the
 * caller's report lock, the host functions the kernels of ks want named (at most
 * BPFTEL_GPU_NAME_BUDGET, the most launched first, each process's first
 * BPFTEL_GPU_NAME_PER_PROC before any process's more; into syms, their count returned);
 * without it, symbolize them (the processes' files opened and parsed); under it again,
 * fill_named() with them, ks still as read then (if another report ran in between, read
 * again and fill with the same syms: they are facts of (pid, address)).
 */
size_t bpftel_gpu_kernels__wanted(const struct bpftel_gpu_kernels *kt,
				  const struct bpftel_gpu_kernel_seen *ks, size_t nks,
				  struct bpftel_gpu_sym *syms);
void bpftel_gpu_kernels__symbolize(const struct bpftel_gpu_kernels *kt, struct bpftel_gpu_sym *syms,
				   size_t n);
void bpftel_gpu_kernels__fill_named(struct bpftel_gpu_kernels *kt, struct bpftel_gpu_proc *rows,
				    size_t n, struct bpftel_gpu_kernel_seen *ks, size_t nks,
				    bool all_kernels, const struct bpftel_gpu_sym *named,
				    size_t nnamed);

/*
 * One report, the three steps in one (tests): name the kernels of ks (at most
 * BPFTEL_GPU_NAME_BUDGET parses, most launched first), give each row its top kernels by
 * launches (kernels of one name merged: a snapshot, for JSON), its series (kseries,
 * kseries_other: counters, for /metrics) and its name (comm: as at the process's first report, kept while it lives).
 * rows are every process the module tracks: the state of a process not among them is
 * dropped. all_kernels: ks holds every kernel of those processes (false when the read
 * listed only the most launched, or ran out of memory): a kernel a report does not
 * read has its launches in kernel="other" until it is read again, never in its series
 * too. Reorders ks.
 */
void bpftel_gpu_kernels__fill(struct bpftel_gpu_kernels *kt, struct bpftel_gpu_proc *rows, size_t n,
			      struct bpftel_gpu_kernel_seen *ks, size_t nks, bool all_kernels);
/* The kernel series an owner but root (gpu_proc_stats.owner) may hold at once, of the
 * BPFTEL_GPU_KERNEL_SERIES; 0: no cap. Any thread. */
void bpftel_gpu_kernels__set_per_owner(struct bpftel_gpu_kernels *kt, size_t per_owner);
/* Forget what was learnt of pid (it exited). */
void bpftel_gpu_kernels__forget(struct bpftel_gpu_kernels *kt, __u32 pid);
/* Forget everything (the module restarted: its maps are new). */
void bpftel_gpu_kernels__reset(struct bpftel_gpu_kernels *kt);

#endif /* BPFTEL_GPU_KERNELS_H */
