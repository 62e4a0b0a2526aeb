/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A module's self-overhead budget (`max_cpu_percent`), as a pure state machine: a
 * sample in each window, a decision out. The driver (throttle.c) measures and acts;
 * tests/unit/test_budget.c feeds samples by hand.
 *
 * A sample: the module's load over the window (its estimated overhead, in CPUs: run
 * time of its programs plus trap cost x calls of its uprobes, over the window's wall
 * time) and, per library file it probes, that file's share of it; for a file it shed,
 * what the file could add back: its processes' CPU over the window, an upper bound,
 * since traps and programs run in the process that trips them and are charged to it.
 *
 *   running    over the budget two windows in a row, or over twice the budget once:
 *              shed the hottest attached file -> throttled (one episode)
 *   throttled  still over the budget: shed the next hottest;
 *              load + what the shed files could add below half the budget for a
 *              window: recover (re-attach them all) -> running;
 *              else after `hold` windows: recover anyway, a trial -> running. hold
 *              starts at hold_min and doubles for each episode that follows the last
 *              recovery within `calm` windows, up to hold_max
 * Hysteresis (shed above the budget, recover below half of it), two windows to shed
 * and the growing hold are what keep noise from making it flap.
 */
#ifndef BPFTEL_AGENT_BUDGET_H
#define BPFTEL_AGENT_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

struct bpftel_budget_cfg {
	double limit;	       /* CPUs (max_cpu_percent / 100) */
	unsigned int hold_min; /* windows throttled before a trial recovery */
	unsigned int hold_max;
	unsigned int calm; /* windows running after which an episode starts afresh */
};

#define BPFTEL_BUDGET_HOLD_MIN 15
#define BPFTEL_BUDGET_HOLD_MAX 300
#define BPFTEL_BUDGET_CALM     300

struct bpftel_budget_file {
	double load;	  /* attached: CPUs it cost over the window */
	double potential; /* shed: CPUs its processes used over the window (INFINITY:
			   * not known, more processes than measured) */
	bool shed;
};

enum bpftel_budget_action {
	BPFTEL_BUDGET_NONE = 0,
	BPFTEL_BUDGET_SHED,    /* shed files[file] */
	BPFTEL_BUDGET_RECOVER, /* re-attach every shed file */
};

enum bpftel_budget_why {
	BPFTEL_BUDGET_WHY_NONE = 0,
	BPFTEL_BUDGET_OVER,	       /* shed: over the budget (2 windows, or twice it once) */
	BPFTEL_BUDGET_STILL_OVER,      /* shed: throttled and still over */
	BPFTEL_BUDGET_BELOW_HALF,      /* recover: what could come back is below half */
	BPFTEL_BUDGET_TRIAL,	       /* recover: the hold is over */
	BPFTEL_BUDGET_NOTHING_TO_SHED, /* none: over, and shedding every attached file
					* would still leave it over */
};

struct bpftel_budget_decision {
	enum bpftel_budget_action action;
	size_t file; /* BPFTEL_BUDGET_SHED: index in the sample's files */
	enum bpftel_budget_why why;
};

struct bpftel_budget {
	bool throttled;
	unsigned int over;	    /* running: windows over the budget in a row */
	unsigned int windows;	    /* throttled: windows so far in this episode */
	unsigned int hold;	    /* throttled: windows before a trial recovery */
	unsigned int streak;	    /* episodes each within `calm` windows of the last */
	unsigned int since_recover; /* running: windows since the last recovery */
	__u64 episodes;		    /* throttle episodes so far */
};

void bpftel_budget_init(struct bpftel_budget *b);
void bpftel_budget_step(struct bpftel_budget *b, const struct bpftel_budget_cfg *cfg, double load,
			const struct bpftel_budget_file *files, size_t n,
			struct bpftel_budget_decision *out);
const char *bpftel_budget_why_text(enum bpftel_budget_why why);

#endif /* BPFTEL_AGENT_BUDGET_H */
