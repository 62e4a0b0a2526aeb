/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What each BPF program of the running modules costs the processes it runs in: its run
 * time (telemetry: exact or estimated) plus, for the uprobe programs the registry
 * attaches, the trap each run pays (user/manager/trapcost.h, calibrated at start):
 * entry probes the uprobe cost; return probes the uretprobe cost, or where the module
 * probes the same function's entry too, what a return adds to that entry (pair -
 * uprobe: the entry trap is paid once, by the entry probe), as the registry knows them
 * (bpftel_uprobes__programs), not as their names suggest. Read by `stats`
 * (and so /metrics and `bpftel top`) and by the self-overhead budget.
 */
#ifndef BPFTEL_AGENT_OVERHEAD_H
#define BPFTEL_AGENT_OVERHEAD_H

#include "telemetry/telemetry.h"

struct bpftel_agent;

struct bpftel_prog_overhead {
	struct bpftel_tlm_prog p;
	const char *trap; /* NULL (no trap: not a uprobe program), "uprobe", "uretprobe" */
	bool paired;	  /* uretprobe next to an entry probe: trap_ns is pair - uprobe */
	/* Entry probes: the instructions under them, "emulated" (all: trap_ns is the
	 * calibrated emulated trap), "single-stepped", or "mixed" (trap_ns both costs
	 * weighted by the calls counted on each kind's files); NULL otherwise. */
	const char *entry_insn;
	double trap_ns;	  /* per run: 0 without a trap, < 0 unknown (calibration failed) */
	/* The traps its runs paid so far, each run at the trap of when it was read
	 * (trap_ledger.h): only grows; 0 without a trap, < 0 unknown. */
	double trap_total_ns;
};

/* Every program, a malloc'd array in *out: count, or a negative errno. Any thread. */
int bpftel_agent_overheads(struct bpftel_agent *a, struct bpftel_prog_overhead **out);

/* Seconds of overhead so far (a counter: it only grows for a program), and per second
 * of the last window; < 0: unknown. */
double bpftel_overhead_seconds(const struct bpftel_prog_overhead *o);
double bpftel_overhead_window_ns_per_s(const struct bpftel_prog_overhead *o);
/* A program's run time per second now, for the budget: its last window's, or 0 when
 * that window ended more than max_age_ns ago (run stats turned off since, or refused:
 * its load is not known, counted as none, as with run stats off from the start; not
 * the frozen rate of a burst long gone). */
double bpftel_overhead_recent_run_ns_per_s(const struct bpftel_prog_overhead *o,
					   __u64 max_age_ns);

#endif /* BPFTEL_AGENT_OVERHEAD_H */
