/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * How often the watcher may read every process's maps (bpftel_uprobes__scan) to find
 * what lost library events did not say. Any user can make such losses at will (paths
 * too long, a symlink swapped under an open), and a scan reads every process's maps:
 * scans asked for in a row, each within twice the gap after the last, wait twice as
 * long each time (1 s, 2 s, ... 32 s); a quiet spell (twice the gap with none) brings
 * the gap back to 1 s. A loss seen while a scan waits is answered by the next one.
 */
#ifndef BPFTEL_SHAREDLIBS_SCAN_PACE_H
#define BPFTEL_SHAREDLIBS_SCAN_PACE_H

#include <stdbool.h>
#include <linux/types.h>

#define BPFTEL_SCAN_GAP_MIN_MS 1000
#define BPFTEL_SCAN_GAP_MAX_MS 32000

struct bpftel_scan_pace {
	_Atomic __u64 scans;   /* run so far (read by reports on other threads) */
	long long last_ms;     /* when the last ran (CLOCK_MONOTONIC ms) */
	long long gap_ms;      /* the least time after it before the next */
};

/* A scan is asked for at now: true when it may run now (then counted as run). One
 * thread asks. */
bool bpftel_scan_pace_take(struct bpftel_scan_pace *p, long long now);

/*
 * Scans for libraries refused over their user's budget (file_budget.h): a budget
 * refills within a minute, so a scan sooner would refuse them again. One runs a minute
 * after refusals came that no scan has answered (a scan's own included: a library it
 * found still over budget is looked for again a minute later); none once no refusal
 * comes (a file only opened, not mapped, is not found by a scan, and asks for nothing
 * more).
 */
#define BPFTEL_BUDGET_SCAN_GAP_MS 60000

struct bpftel_budget_pace {
	__u64 seen;	    /* refusals counted when the last scan began */
	long long since_ms; /* when refusals past seen were first noticed */
	bool pending;	    /* there are some */
};

/* refused: the registry's over-budget refusals so far. True when a scan runs now (a
 * scan that fails: put p back as it was before the call, to be asked again). */
bool bpftel_budget_pace_take(struct bpftel_budget_pace *p, __u64 refused, long long now);

#endif /* BPFTEL_SHAREDLIBS_SCAN_PACE_H */
