/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The traps each uprobe program's runs paid, added up run by run (overhead.c). A
 * program's trap per run can change while it runs: a "mixed" entry program's weighs
 * the emulated and single-stepped costs by the calls counted on the files attached
 * now, and a file's release takes its calls out of the mix. Priced at each reading
 * as runs x today's trap, its overhead would go down, a counter reset to Prometheus
 * (a spike in rate()). Here only the runs since the last reading take the trap of
 * now: the total only grows. Kept by program id (a new instance starts its own), for
 * the programs of the last few readings.
 */
#ifndef BPFTEL_AGENT_TRAP_LEDGER_H
#define BPFTEL_AGENT_TRAP_LEDGER_H

#include <pthread.h>
#include <stddef.h>
#include <linux/types.h>

#define BPFTEL_TRAP_LEDGER_MAX 64

struct bpftel_trap_ledger {
	pthread_mutex_t lock; /* zeroed or PTHREAD_MUTEX_INITIALIZER */
	size_t n;
	__u64 gen; /* readings added */
	struct {
		__u32 id;
		__u64 runs;
		double ns;
		__u64 seen; /* the reading (gen) it was last in */
	} e[BPFTEL_TRAP_LEDGER_MAX];
};

/* One program of a reading: its id, runs so far and trap per run now (< 0: unknown);
 * total_ns is set to the traps its runs paid so far (< 0: unknown). */
struct bpftel_trap_reading {
	__u32 id;
	__u64 runs;
	double trap_ns;
	double total_ns;
};

/* Add a reading of n programs (the uprobe programs running now); those missing from
 * the last few readings are forgotten (not from one: another thread's reading, taken
 * before a module restarted, may come after a newer one). Any thread. */
void bpftel_trap_ledger_update(struct bpftel_trap_ledger *l, struct bpftel_trap_reading *r,
			       size_t n);

#endif /* BPFTEL_AGENT_TRAP_LEDGER_H */
