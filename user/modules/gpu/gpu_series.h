/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Which processes have GPU series of their own on /metrics. Every process that uses
 * CUDA has a row (4096 at most, the module's map), and each row is tens of series (its
 * devices, memory kinds, copies, errors): a user who starts thousands of processes that
 * each call cudaMalloc, on a host with the CUDA runtime installed and no GPU at all,
 * would make a scrape hundreds of thousands of series. So at most a budget of processes
 * has series (BPFTEL_GPU_SERIES_PROCS), given at a process's first scrape while there
 * is room and kept while it lives; the others are folded into one row, pid="other",
 * comm="other", whose counters are theirs summed, plus what folded processes that are
 * gone had counted (so that they never go down), and whose gauges are the live ones'.
 * "other"'s counters also hold what a process with series of its own counted after the
 * last scrape that showed them (the highest any scraper saw), once it is gone: summed
 * over every pid, a scraper's counters lose nothing a process counted before it exited
 * (but what another scraper saw last, and what a process counted since the last report
 * before it exec'd: the kernel drops its row then), and count nothing twice.
 * A process folded stays folded while it lives (moving it out would take its counts
 * out of "other"). A process is known by its pid and the time its row was made: one
 * that execs is another process. An owner but root (gpu_proc_stats.owner) has series
 * for at most its share of the budget (user_share_percent, as of the module's tables):
 * one user's idle processes, each made to call cudaSetDevice once, cannot fold every
 * other user's into "other".
 */
#ifndef BPFTEL_GPU_SERIES_H
#define BPFTEL_GPU_SERIES_H

#include <stdbool.h>
#include <stddef.h>

#include "gpu.h"

#define BPFTEL_GPU_SERIES_PROCS 256

struct bpftel_gpu_series;

/* budget: processes with series of their own. NULL when out of memory. */
struct bpftel_gpu_series *bpftel_gpu_series__new(size_t budget);
void bpftel_gpu_series__free(struct bpftel_gpu_series *s);
/* Processes with series of their own an owner but root may have (0: the budget). */
void bpftel_gpu_series__set_per_owner(struct bpftel_gpu_series *s, size_t per_owner);
/* Forget everything (the module restarted: its counts begin again). */
void bpftel_gpu_series__reset(struct bpftel_gpu_series *s);

/*
 * One report's rows[0..n) (every live process, once each, read whole): processes seen
 * for the first time are given series of their own while the budget lasts, else
 * folded (and so is one first seen gone: a process that lived between two scrapes
 * counts in "other", not in series no scrape saw); the folded ones' counters are noted, and those of folded processes no longer
 * among rows kept. Sets each row's `folded`. Under the module's report lock: reports in
 * the order their maps were read. Thread-safe.
 */
void bpftel_gpu_series__update(struct bpftel_gpu_series *s, struct bpftel_gpu_proc *rows, size_t n);

/*
 * For /metrics, rows[0..n) as bpftel_gpu_series__update() marked them: reorder them so
 * that the processes with series of their own come first and return their count m;
 * when any process was ever folded, or one with series exited having counted past
 * them, rows[m] is the "other" row (pid 0; rows must have room for n + 1), its gauges
 * the folded rows', and *other is set. A row whose process a later report found gone
 * (its counts since moved to "other") is left out, neither its own nor "other"'s. Out
 * of memory: 0 rows, *other false.
 */
size_t bpftel_gpu_series__fold(struct bpftel_gpu_series *s, struct bpftel_gpu_proc *rows, size_t n,
			       bool *other);

#endif /* BPFTEL_GPU_SERIES_H */
