// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Run counts and times from sampled windows (runstats.h): pure arithmetic. */
#include <string.h>

#include "runstats.h"

void bpftel_rs_init(struct bpftel_rs_est *e, __u64 load_ns)
{
	memset(e, 0, sizeof(*e));
	e->load_ns = load_ns;
}

void bpftel_rs_open(struct bpftel_rs_est *e, const struct bpftel_rs_count *c, __u64 now)
{
	e->open = true;
	e->open_ns = now > e->load_ns ? now : e->load_ns;
	e->at_open = *c;
}

/* Counted since base. The kernel never resets a program's counters, nor gives its id
 * to another: a reading below base was taken before base was (a reader that raced the
 * sampler for the locks), and says nothing. */
static __u64 since(__u64 cur, __u64 base)
{
	return cur >= base ? cur - base : 0;
}

/* Is c older than the reading the window opened with? */
static bool stale(const struct bpftel_rs_est *e, const struct bpftel_rs_count *c)
{
	return c->cnt < e->at_open.cnt || c->ns < e->at_open.ns;
}

/* d * period / window, rounded to nearest, without overflow: 128-bit intermediate. */
static __u64 scale(__u64 d, __u64 period, __u64 window)
{
	unsigned __int128 v = (unsigned __int128)d * period + window / 2;

	v /= window;
	return v > (unsigned __int128)~0ULL ? ~0ULL : (__u64)v;
}

static __u64 add_sat(__u64 a, __u64 b)
{
	return a + b < a ? ~0ULL : a + b;
}

bool bpftel_rs_close(struct bpftel_rs_est *e, const struct bpftel_rs_count *c, __u64 win_open,
		     __u64 now)
{
	__u64 from, window, period;
	struct bpftel_rs_count d;

	/* Loaded inside the window: its counters started at zero, at its load. */
	if (!e->open && e->load_ns >= win_open)
		bpftel_rs_open(e, &(struct bpftel_rs_count){0, 0}, e->load_ns);
	/*
	 * Loaded before but not seen at this window's open (the reading then failed or
	 * skipped it), its counters at the open are unknown: counted from zero, every run
	 * since its load was added again, scaled up; counted from an earlier window's open,
	 * the stretch with stats off between was taken for window. The window is not used
	 * for it; the next one it is seen open in covers the time.
	 */
	if (!e->open || e->open_ns < win_open)
		return false;
	if (now <= e->open_ns || stale(e, c))
		return false; /* nothing yet, or an older reading: stays open */
	window = now - e->open_ns;
	from = e->covered_to ? e->covered_to : e->load_ns;
	if (from > e->open_ns)
		from = e->open_ns; /* a window never stands for less than itself */
	period = now - from;
	/* Scaled up, a very short window would stand for much on little: it stays open. */
	if (period > window && window < BPFTEL_RS_MIN_WINDOW_NS)
		return false;
	d.cnt = since(c->cnt, e->at_open.cnt);
	d.ns = since(c->ns, e->at_open.ns);

	e->cnt = add_sat(e->cnt, scale(d.cnt, period, window));
	e->ns = add_sat(e->ns, scale(d.ns, period, window));
	e->sampled_ns += window;
	e->covered_to = now;
	e->last = d;
	e->last_len_ns = window;
	e->last_end_ns = now;
	e->open = false;
	return true;
}

void bpftel_rs_peek(const struct bpftel_rs_est *e, const struct bpftel_rs_count *c,
		    struct bpftel_rs_count *out)
{
	out->cnt = e->cnt;
	out->ns = e->ns;
	if (e->open) {
		out->cnt = add_sat(out->cnt, since(c->cnt, e->at_open.cnt));
		out->ns = add_sat(out->ns, since(c->ns, e->at_open.ns));
	}
}

void bpftel_rs_cover(struct bpftel_rs_est *e, __u64 now, bool at_last_rate)
{
	__u64 from = e->covered_to ? e->covered_to : e->load_ns;

	if (now <= from)
		return;
	if (at_last_rate) {
		/* No window yet: no rate to go on. Covering the stretch would count it as no
		 * runs for good; left uncovered, the next window stands for it too. */
		if (!e->last_len_ns)
			return;
		e->cnt = add_sat(e->cnt, scale(e->last.cnt, now - from, e->last_len_ns));
		e->ns = add_sat(e->ns, scale(e->last.ns, now - from, e->last_len_ns));
	}
	e->covered_to = now;
}

bool bpftel_rs_fold(struct bpftel_rs_est *e, const struct bpftel_rs_count *c, __u64 now,
		    __u64 min_ns)
{
	/* Not while the window has a stretch before it to stand for (a switch from sampled:
	 * covered_to before it opened): folded at once, that is estimated once, and what is
	 * read from then on is exact. */
	if (e->open && e->covered_to >= e->open_ns && now - e->open_ns < min_ns)
		return false;
	if (!e->open) {
		if (e->covered_to) {
			/* Lost track (a reading missed it): its counters at covered_to are not
			 * known, so from now on; the next window stands for the gap too. */
			bpftel_rs_open(e, c, now);
			return false;
		}
		/* First seen: its counters started at zero at its load, so the window from
		 * its load holds every run it had, scaled by 1 (exact; a lower bound where
		 * stats were not on all along). Opened at the last fold instead, its runs
		 * since load would be scaled up by the time before that fold. */
		bpftel_rs_open(e, &(struct bpftel_rs_count){0, 0}, e->load_ns);
	}
	if (!bpftel_rs_close(e, c, e->open_ns, now))
		return false;
	bpftel_rs_open(e, c, now);
	return true;
}

void bpftel_rs_end(struct bpftel_rs_est *e)
{
	e->open = false;
}

__u64 bpftel_rs_next_open(__u64 win_open, __u64 period_ns, __u64 on_ns, __u64 rnd)
{
	__u64 j = (period_ns > on_ns ? period_ns - on_ns : 0) / 2;

	return win_open + period_ns - j + rnd % (2 * j + 1);
}

static __u64 covered(const struct bpftel_rs_est *e)
{
	return e->covered_to > e->load_ns ? e->covered_to - e->load_ns : 0;
}

double bpftel_rs_fraction(const struct bpftel_rs_est *e)
{
	__u64 span = covered(e);
	double f = span ? (double)e->sampled_ns / span : 0;

	return f > 1 ? 1 : f;
}

double bpftel_rs_cpu(const struct bpftel_rs_est *e)
{
	__u64 span = covered(e);

	return span ? (double)e->ns / span : 0;
}

double bpftel_rs_last_runs_per_s(const struct bpftel_rs_est *e)
{
	return e->last_len_ns ? e->last.cnt * 1e9 / e->last_len_ns : 0;
}

double bpftel_rs_last_ns_per_s(const struct bpftel_rs_est *e)
{
	return e->last_len_ns ? e->last.ns * 1e9 / e->last_len_ns : 0;
}
