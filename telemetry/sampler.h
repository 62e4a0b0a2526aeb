/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Run stats on a duty cycle (the arithmetic is in runstats.h). The sampler holds
 * BPF_ENABLE_STATS always (exact counts), during the on-windows of a cycle (sampled),
 * or never (off), and keeps one estimate per program id from the counters its owner's
 * read function returns. It runs on a thread of its own, so that a window lasts what
 * it should whatever the agent's other periodic work costs: a window held open for
 * longer costs every BPF program on the host its two clock reads per run for longer.
 *
 * Locking: s->lock guards the mode, the window and the estimates. It is held across
 * the read function (a few bpf(2) calls; it takes the owner's lock, so the order is
 * s->lock, then the owner's) and BPF_ENABLE_STATS, never across anything slower.
 */
#ifndef BPFTEL_TELEMETRY_SAMPLER_H
#define BPFTEL_TELEMETRY_SAMPLER_H

#include <stddef.h>
#include <linux/types.h>

#include "runstats.h"
#include "telemetry.h"

struct bpftel_sampler;

/* A program's counters, read at `now` (CLOCK_BOOTTIME ns). */
struct bpftel_rs_reading {
	__u32 id;
	__u64 load_ns;
	struct bpftel_rs_count c;
};

/* Read every reported program's counters: a malloc'd array in *out, the count
 * returned (or a negative errno), and the time of the reading in *now. */
typedef int (*bpftel_rs_read_fn)(void *ctx, struct bpftel_rs_reading **out, __u64 *now);

/* Starts in off mode, with its thread running. */
int bpftel_sampler__new(bpftel_rs_read_fn read, void *ctx, struct bpftel_sampler **out);
/* Joins the thread, lets go of BPF_ENABLE_STATS. NULL is a no-op. */
void bpftel_sampler__free(struct bpftel_sampler *s);

/* Switch mode or duty cycle; what was counted so far is kept (estimates never go
 * down). -errno when BPF_ENABLE_STATS is refused for `always` (then off). */
int bpftel_sampler__set(struct bpftel_sampler *s, const struct bpftel_run_stats_cfg *cfg);
void bpftel_sampler__info(struct bpftel_sampler *s, struct bpftel_run_stats_info *info);
/* Is BPF_ENABLE_STATS held right now? */
bool bpftel_sampler__stats_on(struct bpftel_sampler *s);

/*
 * The estimate of each program of r[n] (read at now), into est[n], and the counts to
 * report into cur[n]: in always mode brought up to now (exact), in sampled mode as of
 * the last window. A program the sampler has not met yet starts from nothing (in
 * sampled mode its first window will count it).
 */
void bpftel_sampler__estimates(struct bpftel_sampler *s, const struct bpftel_rs_reading *r,
			       size_t n, __u64 now, struct bpftel_rs_est *est,
			       struct bpftel_rs_count *cur);

#endif /* BPFTEL_TELEMETRY_SAMPLER_H */
