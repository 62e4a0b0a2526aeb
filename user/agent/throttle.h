/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The self-overhead budget's driver (the decisions are budget.h's). On the housekeeping
 * thread, every `max_cpu_window` seconds, for each module with a `max_cpu_percent`:
 *
 *   measure  the module's load over the window: for each library file it probes, the
 *            calls counted there (bpf/uprobe_hits.h, exact, whatever the run stats
 *            mode) x (trap cost + average run time of the entry or return program);
 *            plus its other programs' run time (their last run-stats window); over
 *            the window's wall time. For each file, its processes' CPU over the
 *            window (/proc/PID/stat): what a shed file could add back at most.
 *   decide   bpftel_budget_step
 *   act      shed: bpftel_uprobes__shed of the hottest file; recover:
 *            bpftel_uprobes__unshed of every file shed
 *
 * A module that stops or restarts starts afresh (its new instance attaches every
 * file). Readers (`bpftel modules`, /metrics) copy the status under t->lock; the
 * measuring and acting happen under no lock a reader takes.
 */
#ifndef BPFTEL_AGENT_THROTTLE_H
#define BPFTEL_AGENT_THROTTLE_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>
#include <linux/types.h>

struct bpftel_agent;
struct bpftel_throttle;

int bpftel_throttle__new(struct bpftel_agent *a, struct bpftel_throttle **out);
/* After the housekeeping thread is joined. NULL is a no-op. */
void bpftel_throttle__free(struct bpftel_throttle *t);
/* The housekeeping thread's call, every second or so: acts when a window is over. */
void bpftel_throttle__tick(void *t);

#define BPFTEL_THROTTLE_SHOWN 4 /* shed files listed in the status */

struct bpftel_throttle_status {
	bool budget;	      /* the module has a max_cpu_percent */
	double limit_percent; /* of one CPU */
	double load_percent;  /* the last window's, < 0 before the first */
	bool throttled;
	time_t since;	  /* when the episode began */
	char reason[320]; /* why it shed, the files and their load */
	__u64 episodes;	  /* so far */
	size_t nshed;
	char shed[BPFTEL_THROTTLE_SHOWN][256]; /* paths */
};

/* A copy of module's status; all zero when it has none. Any thread. */
void bpftel_throttle__status(struct bpftel_throttle *t, const char *module,
			     struct bpftel_throttle_status *out);

#endif /* BPFTEL_AGENT_THROTTLE_H */
