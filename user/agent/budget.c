// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* A module's self-overhead budget: the state machine (budget.h). */
#include <string.h>

#include "budget.h"

void bpftel_budget_init(struct bpftel_budget *b)
{
	memset(b, 0, sizeof(*b));
	b->since_recover = ~0u; /* no recovery yet: the first episode starts afresh */
}

/* The attached file carrying the most load, or n when none carries any. */
static size_t hottest(const struct bpftel_budget_file *files, size_t n)
{
	size_t i, best = n;

	for (i = 0; i < n; i++) {
		if (!files[i].shed && files[i].load > 0 &&
		    (best == n || files[i].load > files[best].load))
			best = i;
	}
	return best;
}

static void shed(struct bpftel_budget_decision *out, size_t file, enum bpftel_budget_why why)
{
	out->action = BPFTEL_BUDGET_SHED;
	out->file = file;
	out->why = why;
}

static void start_episode(struct bpftel_budget *b, const struct bpftel_budget_cfg *cfg)
{
	unsigned int hold = cfg->hold_min ? cfg->hold_min : 1, k;

	b->streak = b->since_recover <= cfg->calm ? b->streak + 1 : 1;
	for (k = 1; k < b->streak && hold < cfg->hold_max; k++)
		hold *= 2;
	b->hold = hold < cfg->hold_max ? hold : cfg->hold_max;
	b->throttled = true;
	b->windows = 0;
	b->over = 0;
	b->episodes++;
}

static void recover(struct bpftel_budget *b, struct bpftel_budget_decision *out,
		    enum bpftel_budget_why why)
{
	out->action = BPFTEL_BUDGET_RECOVER;
	out->why = why;
	b->throttled = false;
	b->since_recover = 0;
	b->over = 0;
}

void bpftel_budget_step(struct bpftel_budget *b, const struct bpftel_budget_cfg *cfg, double load,
			const struct bpftel_budget_file *files, size_t n,
			struct bpftel_budget_decision *out)
{
	size_t hot = hottest(files, n), i;
	double back = load, sheddable = 0;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < n; i++)
		sheddable += files[i].shed ? 0 : files[i].load;
	if (!b->throttled) {
		if (b->since_recover != ~0u)
			b->since_recover++;
		b->over = load > cfg->limit ? b->over + 1 : 0;
		if (b->over < 2 && load <= 2 * cfg->limit)
			return;
		/* Shedding every attached file would still leave it over (the load is its
		 * other programs', a socket filter's): shedding costs visibility for nothing. */
		if (hot == n || load - sheddable > cfg->limit) {
			out->why = BPFTEL_BUDGET_NOTHING_TO_SHED;
			return;
		}
		start_episode(b, cfg);
		shed(out, hot, BPFTEL_BUDGET_OVER);
		return;
	}
	b->windows++;
	if (load > cfg->limit && hot < n) {
		if (load - sheddable <= cfg->limit) {
			shed(out, hot, BPFTEL_BUDGET_STILL_OVER);
			return;
		}
		out->why = BPFTEL_BUDGET_NOTHING_TO_SHED; /* as above: no shed that cannot help */
	}
	for (i = 0; i < n; i++)
		back += files[i].shed ? files[i].potential : 0;
	/* At once only in a first episode: a load that comes back as soon as it is let
	 * (busy, idle, busy) waits out the growing hold like a trial. */
	if (back < cfg->limit / 2 && (b->streak <= 1 || b->windows >= b->hold))
		recover(b, out, BPFTEL_BUDGET_BELOW_HALF);
	else if (b->windows >= b->hold)
		recover(b, out, BPFTEL_BUDGET_TRIAL);
}

const char *bpftel_budget_why_text(enum bpftel_budget_why why)
{
	switch (why) {
	case BPFTEL_BUDGET_OVER:
		return "over the budget";
	case BPFTEL_BUDGET_STILL_OVER:
		return "still over the budget";
	case BPFTEL_BUDGET_BELOW_HALF:
		return "what the shed files could add is below half the budget";
	case BPFTEL_BUDGET_TRIAL:
		return "throttled for the hold time: trying again";
	case BPFTEL_BUDGET_NOTHING_TO_SHED:
		return "over the budget, but no attached library file carries the load";
	case BPFTEL_BUDGET_WHY_NONE:
		break;
	}
	return "";
}
