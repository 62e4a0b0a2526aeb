// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* A restart's gap: processes that exec'd while no program watched (gpu_gap.h). */
#include <stdlib.h>
#include <time.h>
#include <bpf/bpf.h>

#include "gpu_gap.h"
#include "bpf/gpu.h"
#include "user/common/proc.h"

/* The whole stat line: 52 fields of up to 20 digits, and a 16-byte name. */
#define STAT_BYTES 2048

__u64 gpu_exec_print(int procfd, __u32 pid)
{
	unsigned long long v[10];
	char buf[STAT_BYTES];
	__u64 print;
	int i;

	if (bpftel_proc_stat_text(procfd, pid, buf, sizeof(buf)) <= 0)
		return 0;
	/* startcode, endcode, startstack; start_data, end_data, start_brk, arg_start,
	 * arg_end, env_start, env_end (proc(5)). Where the kernel hides them (a process
	 * the reader may not ptrace) it shows 1, 1 and zeros; a process without memory (a
	 * zombie leader's, a kernel thread's) zeros: unknown, either way. */
	if (!bpftel_proc_stat_parse(buf, 26, 3, v) || !bpftel_proc_stat_parse(buf, 45, 7, v + 3))
		return 0;
	for (i = 3; i < 10 && !v[i]; i++)
		;
	if (i == 10 || v[0] <= 1)
		return 0;
	print = 0xcbf29ce484222325ull; /* FNV-1a, a word at a time */
	for (i = 0; i < 10; i++)
		print = (print ^ v[i]) * 0x100000001b3ull;
	return print | 1; /* never 0, which says unknown */
}

static __u64 boot_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (__u64)ts.tv_sec * 1000000000ull + (__u64)ts.tv_nsec;
}

void gpu_gap_forget(struct gpu_gap *gap)
{
	free(gap->procs);
	gap->procs = NULL;
	gap->n = 0;
}

void gpu_gap_note(struct gpu_gap *gap, int procs_fd, __u32 max, int procfd, __u64 maps_gen)
{
	size_t steps = 2 * (size_t)max + 1;
	__u32 key, next, *prev = NULL;

	gpu_gap_forget(gap);
	gap->maps_gen = maps_gen;
	gap->procs = calloc(max ? max : 1, sizeof(*gap->procs));
	if (!gap->procs)
		return; /* nothing noted: an exec in the gap goes unseen, as before */
	/* Bounded: a walk restarts when the key it stands on goes (an exec, a sweep); a
	 * process listed twice is looked at twice. */
	while (gap->n < max && steps-- && !bpf_map_get_next_key(procs_fd, prev, &next)) {
		key = next;
		prev = &key;
		gap->procs[gap->n].pid = key;
		gap->procs[gap->n].print = gpu_exec_print(procfd, key);
		/* After the read: a row made before this was made by the program read. */
		gap->procs[gap->n].at_ns = boot_ns();
		gap->n++;
	}
}

int gpu_gap_check(struct gpu_gap *gap, int procs_fd, int exec_drop_fd, int procfd, int *left,
		  bool again)
{
	struct gpu_exec_drop_args args = {};
	LIBBPF_OPTS(bpf_test_run_opts, run, .ctx_in = &args, .ctx_size_in = sizeof(args));
	struct gpu_gap_proc p;
	struct gpu_proc_stats st;
	size_t i, kept = 0;
	int dropped = 0;
	__u64 now;

	*left = 0;
	for (i = 0; i < gap->n; i++) {
		p = gap->procs[i];
		if (!p.print)
			continue;
		now = gpu_exec_print(procfd, p.pid);
		if (!now)
			continue; /* gone (the sweep's), or unknown */
		if (now != p.print) {
			/* A row made after the print was read is the new program's: an exec
			 * the old instance saw dropped the old one before. */
			if (!bpf_map_lookup_elem(procs_fd, &p.pid, &st) && st.born_ns <= p.at_ns) {
				/* Each a walk of the module's tables: bounded, so that processes
				 * exec'ing through restarts cannot make a restart's gap last.
				 * One past it is noted as it was: the next check may drop it. */
				if (dropped == GPU_GAP_DROPS_MAX) {
					(*left)++;
					if (again)
						gap->procs[kept++] = p;
					continue;
				}
				args.tgid = p.pid;
				if (!bpf_prog_test_run_opts(exec_drop_fd, &run) && run.retval)
					dropped++; /* its row was there still (a sweep may have
						    * taken it) */
			}
		}
		/* Noted again with the print read now, as of now: an exec after this read
		 * shows at the next check. */
		if (again)
			gap->procs[kept++] = (struct gpu_gap_proc){
				.pid = p.pid, .print = now, .at_ns = boot_ns()};
	}
	if (again)
		gap->n = kept;
	else
		gpu_gap_forget(gap);
	return dropped;
}
