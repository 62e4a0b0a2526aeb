/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Errors telemetry, userspace owner.
 *
 * Owns the telemetry maps (created once, reused by fd in every instrumented object)
 * and the registry of keys. bpftel_telemetry__instrument(t, m) registers the owner's
 * own hooks on module m; no other code assigns keys or cleans counters:
 *   before_init  assign keys to m's programs and maps (.rodata tlm_key_*), share maps
 *   after_init   start reporting m (programs, maps, counters)
 *   before_stop  stop reporting m
 *   after_stop   delete every counter of m's keys, once its programs are inert or
 *                detached (not while they run: a program that read the stop gate
 *                open just before it closed may still, for microseconds, module.c)
 * so that a module starts again with no leftover entry, in any order with the others.
 *
 * Also: per-program run count and run time (BPF_ENABLE_STATS, held always, on a duty
 * cycle, or never: sampler.h), map occupancy (exact for hash maps), and telemetry's own
 * losses. Thread-safe: one mutex guards the registry and the reporting state; the
 * sampler has its own (taken first).
 */
#ifndef BPFTEL_TELEMETRY_H
#define BPFTEL_TELEMETRY_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

#include "telemetry_defs.h"

struct bpftel_telemetry;
struct bpftel_module;

int bpftel_telemetry__new(struct bpftel_telemetry **out);
/* After the modules are stopped (bpftel_manager__free). NULL is a no-op. */
void bpftel_telemetry__free(struct bpftel_telemetry *t);

int bpftel_telemetry__instrument(struct bpftel_telemetry *t, struct bpftel_module *m);

/*
 * Run counts and times (BPF_ENABLE_STATS) cost two clock reads per run of every BPF
 * program on the host while anyone holds them on (a static key the kernel flips): ~10 %
 * of an open+close loop here with the watcher attached. So they are held:
 *   always   exact counts, at that cost (the owner's default, and `run_stats = always`)
 *   sampled  for on_ms of every period_ms: estimates scaled from those windows
 *            (runstats.h), at on_ms/period_ms of the cost (the agent's default)
 *   off      never: counts stay where they were
 * Estimates never go down, also when the mode changes. period_ms is also how often
 * always mode brings its counts and per-window rates up to date without a reader.
 */
enum bpftel_run_stats_mode {
	BPFTEL_RUN_STATS_OFF = 0,
	BPFTEL_RUN_STATS_ALWAYS,
	BPFTEL_RUN_STATS_SAMPLED,
};

const char *bpftel_run_stats_mode_name(enum bpftel_run_stats_mode mode); /* "sampled" */

struct bpftel_run_stats_cfg {
	enum bpftel_run_stats_mode mode;
	unsigned int on_ms, period_ms; /* 0 < on_ms < period_ms, unless off */
};

#define BPFTEL_RUN_STATS_ON_MS	   1000
#define BPFTEL_RUN_STATS_PERIOD_MS 10000

struct bpftel_run_stats_info {
	struct bpftel_run_stats_cfg cfg;
	bool stats_on;	    /* BPF_ENABLE_STATS held now */
	__u64 windows;	    /* windows counted so far (always: folds) */
	double on_fraction; /* of the time in this mode, stats were held */
	int error;	    /* the last refusal of BPF_ENABLE_STATS, 0 if none */
};

/* -errno when `always` cannot turn stats on (then off). */
int bpftel_telemetry__set_run_stats_mode(struct bpftel_telemetry *t,
					 const struct bpftel_run_stats_cfg *cfg);
void bpftel_telemetry__run_stats(struct bpftel_telemetry *t, struct bpftel_run_stats_info *out);
/* Is BPF_ENABLE_STATS held right now (run counts and times are being collected)? */
bool bpftel_telemetry__stats_enabled(struct bpftel_telemetry *t);
/* always (on) or off, with the default period. */
int bpftel_telemetry__set_run_stats(struct bpftel_telemetry *t, bool on);

#define BPFTEL_TLM_NAME 64

struct bpftel_tlm_error {
	char module[BPFTEL_TLM_NAME];
	char program[BPFTEL_TLM_NAME];	/* "unassigned" for key 0 */
	char resource[BPFTEL_TLM_NAME]; /* map name, or helper name ("probe_read_user") */
	bool is_map;
	const char *op; /* map errors: "update", "delete", ...; helpers: "call" */
	int err;	/* errno, or TLM_ERRNO_OTHER */
	__u64 count;
};

/* Non-zero counters of instrumented modules, running or stopped, each since the agent
 * started: what the maps count now and what the module's stops took out of them (its
 * restarts do not set it back). Returns the count and a malloc'd array in *out, or a
 * negative errno (*out NULL). */
int bpftel_telemetry__errors(struct bpftel_telemetry *t, struct bpftel_tlm_error **out);

struct bpftel_tlm_prog {
	char module[BPFTEL_TLM_NAME];
	char program[BPFTEL_TLM_NAME];
	__u32 id;
	/* Exact (always) or estimated (sampled) over covered_ns since load; never go down. */
	__u64 run_cnt;
	__u64 run_time_ns;
	__u64 load_time_ns;	 /* CLOCK_BOOTTIME at load */
	__u64 covered_ns;	 /* since load, the time run_cnt and run_time_ns reach */
	double sampled_fraction; /* of covered_ns, the part stats were on for */
	/* The last window counted: per second of it (window_ns 0: none yet). */
	double window_runs_per_s, window_ns_per_s;
	__u64 window_ns, window_age_ns;
};
int bpftel_telemetry__programs(struct bpftel_telemetry *t, struct bpftel_tlm_prog **out);

struct bpftel_tlm_map {
	char module[BPFTEL_TLM_NAME];
	char map[BPFTEL_TLM_NAME];
	const char *type;
	__u32 capacity; /* max_entries */
	long entries;	/* exact for hash maps, capacity for arrays, -1 if not countable */
	/* Kernel memory it holds, bytes: fdinfo's memlock (what the kernel charges the map
	 * since 6.4: its real usage, per-CPU copies included); 0 when not known. */
	__u64 memory;
};
int bpftel_telemetry__maps(struct bpftel_telemetry *t, struct bpftel_tlm_map **out);

/* Counts telemetry itself could not record (its hash maps were full). */
__u64 bpftel_telemetry__lost(struct bpftel_telemetry *t, enum tlm_lost_slot slot);

/* Ring-buffer failures (reserve, output) of module's programs that its stops swept from
 * the errors maps: with what the maps count now, all it ever counted (the event
 * pipeline's kernel stage; its other stages outlive restarts likewise). */
__u64 bpftel_telemetry__retired_ringbuf(struct bpftel_telemetry *t, const char *module);
/* All the ring-buffer failures of module's programs: live and retired, read at once. */
__u64 bpftel_telemetry__ringbuf_failures(struct bpftel_telemetry *t, const char *module);

/* Counters of a module's keys, in the kernel maps: for tests ("no entry of a stopped
 * module"). Returns the number of entries whose prog or map key belongs to module. */
int bpftel_telemetry__module_entries(struct bpftel_telemetry *t, const char *module);

const char *bpftel_tlm_op_name(enum tlm_map_op op);
const char *bpftel_tlm_helper_name(__u32 helper);

#endif /* BPFTEL_TELEMETRY_H */
