/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A restart's gap (bpftel_module__restart): between the old instance's stop and the new
 * one's attach no program of the GPU module runs, the exec tracepoint's included, while
 * the tables are kept. A process that execs then would keep its old program's row,
 * allocations, kernels, errors and contexts, counted on as its new program's. So the
 * stop notes, for each process of gpu_procs, how its program looked (gpu_gap_note: a
 * print of its memory layout), and the new instance, before its probes attach, looks
 * again (gpu_gap_check): a process whose print changed exec'd in between, and what the
 * exec tracepoint would have dropped is dropped (gpu_exec_drop, the same BPF code).
 *
 * The print: the addresses /proc/<pid>/stat gives of the program's code, stack, heap,
 * arguments and environment (fields 26-28 and 45-51), which an exec lays out anew.
 * With address-space randomization on (the kernel's default), a new program gets new
 * ones, even the same executable again; with it off (randomize_va_space=0, or the
 * process's personality), an exec of the same executable lays them out the same, and
 * is not told apart: its row goes on. A process may also move them itself without an
 * exec (prctl PR_SET_MM, with CAP_SYS_RESOURCE; checkpoint/restore): one that does so
 * in the gap loses its own state, no other process's. A process whose layout the agent
 * cannot read (hidden, or no memory: a zombie leader) is not checked. Each drop walks
 * the tables: at most GPU_GAP_DROPS_MAX a restart, the rest logged.
 */
#ifndef BPFTEL_GPU_GAP_H
#define BPFTEL_GPU_GAP_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

#define GPU_GAP_DROPS_MAX 64

struct gpu_gap_proc {
	__u32 pid;
	__u64 print;  /* 0: not known (gone, or the fields hidden) */
	__u64 at_ns;  /* when it was read (CLOCK_BOOTTIME, the clock of rows' born_ns) */
};

struct gpu_gap {
	struct gpu_gap_proc *procs;
	size_t n;
	__u64 maps_gen; /* the maps noted (struct bpftel_gpu's maps_gen) */
};

/* The print of pid's program, read through procfd (a /proc directory); 0 if unknown. */
__u64 gpu_exec_print(int procfd, __u32 pid);

/* Note the processes of gpu_procs (procs_fd, up to max of them) and their prints. */
void gpu_gap_note(struct gpu_gap *gap, int procs_fd, __u32 max, int procfd, __u64 maps_gen);

/* The processes noted whose print changed, their row made before it was read: each is
 * dropped by running exec_drop_fd (gpu_exec_drop) for it, up to GPU_GAP_DROPS_MAX.
 * Returns how many were dropped, those past the bound in *left. The gap is forgotten,
 * or with again, kept for a check to come: each process not dropped noted with the
 * print this check read, as of that read (an exec after it shows then). */
int gpu_gap_check(struct gpu_gap *gap, int procs_fd, int exec_drop_fd, int procfd, int *left,
		  bool again);

void gpu_gap_forget(struct gpu_gap *gap);

#endif /* BPFTEL_GPU_GAP_H */
