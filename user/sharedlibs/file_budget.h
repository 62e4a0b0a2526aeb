/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * How many library files new to the registry one user's processes may bring in a
 * minute. Each such file costs the agent an ELF parse and, for a file with the probed
 * symbols, the attach of its uprobes: milliseconds. Any user can make files named like
 * libssl (a copy, or a few KiB of crafted ELF each) and open them in a loop; without a
 * budget that user sets the agent's pace. A file over its owner's budget is refused as
 * `over_budget` once opened and known to be new, before it is parsed; a mapped one is
 * found again by a /proc rescan a minute later (scan_pace.h), when the budget has room.
 *
 * A token bucket per owner (proc.h's bpftel_proc_owner(): the accountable user, or a
 * user namespace root made): per_min files at once, refilled continuously at per_min a
 * minute.
 * Times are given, not read (unit-tested without waiting).
 */
#ifndef BPFTEL_SHAREDLIBS_FILE_BUDGET_H
#define BPFTEL_SHAREDLIBS_FILE_BUDGET_H

#include <stdbool.h>
#include <linux/types.h>

#define BPFTEL_FILE_BUDGET_DEFAULT 256 /* files per owner per minute */
#define BPFTEL_FILE_BUDGET_MAX	   100000
/* Owners tracked at once. One more takes the entry of one whose budget is whole again
 * (which says nothing), else of the one seen longest ago. */
#define BPFTEL_FILE_BUDGET_OWNERS 64

struct bpftel_file_budget_owner {
	__u64 owner;
	__u64 left;		/* files left, in 60000ths: a minute's ms refill per_min each */
	long long last_ms;	/* when left was last brought up to date */
	long long last_seen_ms; /* when the owner last asked */
	bool used;
};

struct bpftel_file_budget {
	unsigned int per_min; /* 0: no budget */
	struct bpftel_file_budget_owner o[BPFTEL_FILE_BUDGET_OWNERS];
};

/* A new budget; owners keep what they have left, up to it. */
void bpftel_file_budget_set(struct bpftel_file_budget *b, unsigned int per_min);

/* May owner bring one more file at now (CLOCK_MONOTONIC ms)? Takes it if so. */
bool bpftel_file_budget_take(struct bpftel_file_budget *b, __u64 owner, long long now_ms);

/* How long until owner may bring one more (ms; 0: now), as its budget stands at now. */
long long bpftel_file_budget_wait_ms(struct bpftel_file_budget *b, __u64 owner, long long now_ms);

#endif /* BPFTEL_SHAREDLIBS_FILE_BUDGET_H */
