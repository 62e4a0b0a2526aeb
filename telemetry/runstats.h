/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Run counts and times from sampled windows: pure arithmetic, no I/O. telemetry.c reads
 * the kernel's counters and calls these; tests/unit/test_runstats.c checks them.
 *
 * The kernel counts a program's runs and run time only while someone holds
 * BPF_ENABLE_STATS, and that costs two clock reads per run of every BPF program on the
 * host. In sampled mode the telemetry owner holds it for on-windows only (1 s of every
 * 10 s by default) and reads each program's counters when a window opens and when it
 * closes. At the close, the window's counts are scaled by
 *
 *         (now - the program's previous update, or its load) / (window length)
 *
 * and added to the program's estimate: a window stands for the whole stretch of time
 * since the previous one closed. Hence:
 *   - an estimate only ever grows (a window adds a count >= 0), also across counter
 *     resets (a count below the one at the open is taken as counted since the reset);
 *   - at a steady rate it is unbiased; the time since the last close is not in it yet
 *     (it lags by at most one cycle), and `covered_to` says how far it reaches;
 *   - with windows back to back (stats always on), each is scaled by exactly 1: the
 *     estimate is the kernel's count, so exact mode is the same arithmetic.
 * A window shorter than BPFTEL_RS_MIN_WINDOW_NS that would be scaled up stands for
 * nothing: it stays open (bpftel_rs_close returns false), and a sampled window that
 * must end anyway is dropped with bpftel_rs_end; the stretch then carries over to the
 * next window. A window scaled by 1 counts however short it is.
 *
 * Times are CLOCK_BOOTTIME ns, the clock of the kernel's load_time.
 */
#ifndef BPFTEL_TELEMETRY_RUNSTATS_H
#define BPFTEL_TELEMETRY_RUNSTATS_H

#include <stdbool.h>
#include <linux/types.h>

#define BPFTEL_RS_MIN_WINDOW_NS 10000000ULL /* 10 ms */

/* A program's counters as the kernel reports them (bpf_prog_info). */
struct bpftel_rs_count {
	__u64 cnt, ns;
};

struct bpftel_rs_est {
	__u64 load_ns;	  /* the program's load time */
	__u64 cnt, ns;	  /* estimated runs and run time over [load_ns, covered_to] */
	__u64 covered_to; /* 0: nothing covered yet */
	__u64 sampled_ns; /* time of [load_ns, covered_to] inside counted windows */
	/* The window in progress for this program: where it starts, counters then. */
	bool open;
	__u64 open_ns;
	struct bpftel_rs_count at_open;
	/* The last window counted: what it saw, how long, when it closed (0: none yet). */
	struct bpftel_rs_count last;
	__u64 last_len_ns, last_end_ns;
};

void bpftel_rs_init(struct bpftel_rs_est *e, __u64 load_ns);

/* A window opens at now; c: the program's counters at that moment. */
void bpftel_rs_open(struct bpftel_rs_est *e, const struct bpftel_rs_count *c, __u64 now);

/*
 * The window that opened at win_open closes at now, the program's counters being c.
 * A program not seen at the open but loaded inside the window is counted from zero
 * since its load. Returns true when the window was counted (and ended); false when it
 * is shorter than BPFTEL_RS_MIN_WINDOW_NS (it stays open), or when the program, loaded
 * before win_open, was not seen at this window's open (not open, or open since before
 * win_open): its counters then are unknown, so the window counts nothing for it and the
 * next one it is seen open in covers the time.
 */
bool bpftel_rs_close(struct bpftel_rs_est *e, const struct bpftel_rs_count *c, __u64 win_open,
		     __u64 now);

/*
 * Always mode: close the window at now and open the next at once (true when counted).
 * A program first seen here is counted from zero at its load, scaled by 1; one seen
 * before but not open (a reading missed it) opens now. An open window shorter than
 * min_ns stays open (false): every reader folds (a scrape, `bpftel top`, the budget's
 * tick), and the last window, which the budget and `top` take as the current load,
 * would otherwise stand for whatever moment since the last reader, a burst or a lull
 * read as a rate. (A window with a stretch before it to stand for folds at once.)
 */
bool bpftel_rs_fold(struct bpftel_rs_est *e, const struct bpftel_rs_count *c, __u64 now,
		    __u64 min_ns);

/*
 * The estimate with the open window's counts added as they are, unscaled: what exact
 * mode reads between closes. A lower bound of what the close will add, so a reader
 * never sees a value go down.
 */
void bpftel_rs_peek(const struct bpftel_rs_est *e, const struct bpftel_rs_count *c,
		    struct bpftel_rs_count *out);

/*
 * Bring the estimate to now without a window (a mode switch): the time since its last
 * update at the last window's rate (sampled until now), or as no runs (stats were off:
 * counts stay where they were). Then the next window stands for itself alone. With no
 * window counted yet there is no rate: at_last_rate leaves the estimate as it is, and
 * the next window stands for the time since its last update, this stretch included.
 */
void bpftel_rs_cover(struct bpftel_rs_est *e, __u64 now, bool at_last_rate);

/* End the window without counting it (the stats go off after a too-short window). */
void bpftel_rs_end(struct bpftel_rs_est *e);

/*
 * When the next sampled window opens, the last having opened at win_open: a period
 * later on average, moved either way by up to half the time between windows (period -
 * on), rnd (random bits) choosing where, uniformly. Windows at a fixed phase would
 * sample a load as periodic as they are (a job every 10 s, every minute) at the same
 * point of its cycle each time: always inside its bursts, or never, and the estimate
 * off by the load's own duty, for good. Moved at random, the windows' phase wanders
 * over every point of such a cycle within a few windows, and the duty is the same on
 * average. The estimate is then unbiased, with the spread any sample has.
 */
__u64 bpftel_rs_next_open(__u64 win_open, __u64 period_ns, __u64 on_ns, __u64 rnd);

/* Derived values; 0 when nothing is covered yet. */
/* Share of the covered time that was inside counted windows (1 in exact mode). */
double bpftel_rs_fraction(const struct bpftel_rs_est *e);
/* Run time over covered time: CPU share of one CPU, 0..1 per CPU. */
double bpftel_rs_cpu(const struct bpftel_rs_est *e);
/* The last counted window, per second of it. */
double bpftel_rs_last_runs_per_s(const struct bpftel_rs_est *e);
double bpftel_rs_last_ns_per_s(const struct bpftel_rs_est *e);

#endif /* BPFTEL_TELEMETRY_RUNSTATS_H */
