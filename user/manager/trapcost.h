/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What a uprobe costs the probed process on this host, calibrated once at start: the
 * breakpoint trap, the kernel's uprobe handling and an empty BPF program, per call.
 * Run counts alone hide it: on 6.18 here an entry and return probe pair costs ~13 us
 * per call while our programs run for ~0.3 us of it (DESIGN.md, BENCHMARKS.md).
 *
 * How: an empty program is linked, as a uprobe, to one function of the agent's own
 * binary, as a uretprobe to another, and as both to a third (noipa, used: never
 * inlined, merged or dropped; their file offsets come from /proc/self/maps,
 * pid-filtered to this process), each called in batches and timed against a fourth
 * function without probe; the cost is the difference of the medians over the batches.
 * The pair matters: a uretprobe arms itself with a trap at the function's entry, which
 * an entry probe on the same function shares, so a return probe next to an entry probe
 * costs pair - uprobe, not uretprobe. And the instruction under the probe matters as
 * much as the probe (user/manager/prologue.h): the entry probe's function starts with
 * one the kernel single-steps (`lea`), a fifth starts with `push %rbp`, which it
 * emulates; entry probes on such instructions are charged that (uprobe_emulated_ns).
 * Multi-uprobe links where
 * the kernel has them (bpftel_uprobe_multi_detect), else perf-event uprobes. The links
 * go to the reaper (user/manager/manager.h) rather than being destroyed in place (a
 * detach waits ~45-80 ms for the kernel), so the start is not held up; nothing stays
 * once the reaper is done: no link, no program, no fd.
 */
#ifndef BPFTEL_MANAGER_TRAPCOST_H
#define BPFTEL_MANAGER_TRAPCOST_H

#include <stdbool.h>

#define BPFTEL_TRAP_CALLS   100 /* per batch */
#define BPFTEL_TRAP_BATCHES 5

struct bpftel_trap_cost {
	bool known;	     /* false: the calibration failed, error says why */
	double uprobe_ns;    /* per call: entry trap + empty program */
	double uprobe_emulated_ns; /* the same on an instruction the kernel emulates; < 0
				      where that came out at 0 or below (not seen) */
	double uretprobe_ns; /* per call: entry trap to arm the return + return trap + program */
	double pair_ns;	     /* per call: a uprobe and a uretprobe on the same function */
	double call_ns;	     /* the same call without a probe */
	unsigned int calls;  /* timed per kind */
	double took_ms;	     /* the whole calibration, attach included */
	const char *link;    /* "multi" or "perf_event" */
	char error[160];
};

/* Calibrate into *out (always filled; out->known says whether it worked). 0 or -errno. */
int bpftel_trap_cost_calibrate(struct bpftel_trap_cost *out);

#endif /* BPFTEL_MANAGER_TRAPCOST_H */
