/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Uprobe registry: attaches each module's uprobes once per library file (identified by
 * device and inode, not path), for all processes; counts the live processes using the
 * file; detaches when none remain (bpftel_uprobes__sweep, called at a bounded
 * interval). An attach failure is recorded (path, module, symbol, errno) and that
 * (file, module) is not retried.
 *
 * Inputs: the shared-libraries watcher's detections (bpftel_uprobes__listener is its
 * listener), and bpftel_uprobes__scan(), which reads /proc/<pid>/maps of every process
 * for libraries loaded before the watcher ran (at start, and after lost events).
 *
 * Modules register the uprobes they want per library; the registry's own hooks load
 * those programs, attach them when the module starts and detach them before it stops.
 * Thread-safe.
 */
#ifndef BPFTEL_UPROBES_H
#define BPFTEL_UPROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <linux/types.h>

#include "sharedlibs.h"

struct bpftel_uprobes;
struct bpftel_module;

struct bpftel_uprobe_spec {
	enum shlib_lib lib; /* attach on files of this library */
	const char *prog;   /* program in the module's object */
	const char *symbol; /* versioned allowed */
	bool retprobe;
};

int bpftel_uprobes__new(struct bpftel_uprobes **out);
/* After the modules are stopped. NULL is a no-op. */
void bpftel_uprobes__free(struct bpftel_uprobes *u);

/* specs must outlive the registry. */
int bpftel_uprobes__add_module(struct bpftel_uprobes *u, struct bpftel_module *m,
			       const struct bpftel_uprobe_spec *specs, size_t n);

/* A process uses a library file: `path` as that process named it. */
int bpftel_uprobes__process_seen(struct bpftel_uprobes *u, __u32 pid, enum shlib_lib lib,
				 const char *path);
/* The watcher saw d->pid open d->path (relative to d->dirfd): attach if the path still
 * leads to the file opened, (d->dev, d->ino); else -ESTALE, counted. */
int bpftel_uprobes__detected(struct bpftel_uprobes *u, const struct bpftel_shlib_detection *d);
/* For bpftel_sharedlibs__set_listener(): bpftel_uprobes__detected. */
void bpftel_uprobes__listener(void *ctx, const struct bpftel_shlib_detection *d);
/* Detections refused with -ESTALE so far: a rise means a /proc scan is due. */
__u64 bpftel_uprobes__stale(struct bpftel_uprobes *u);

/* Forget exited processes; detach files no live process uses. Returns files dropped. */
int bpftel_uprobes__sweep(struct bpftel_uprobes *u);
/* Read /proc/<pid>/maps of every process for libraries; returns processes found. */
int bpftel_uprobes__scan(struct bpftel_uprobes *u);

#define BPFTEL_UPROBE_MAX_FAIL 4

struct bpftel_uprobe_file_info {
	char path[256]; /* first path it was seen under, as that process named it */
	enum shlib_lib lib;
	__u64 dev, ino;
	size_t nprocs;
	__u32 pids[8];	 /* the first min(nprocs, 8) processes */
	char module[64]; /* one row per (file, module) */
	size_t attached; /* links held for this module on this file */
	size_t failed;
	struct {
		char symbol[64];
		int err;
	} fail[BPFTEL_UPROBE_MAX_FAIL];
};

/* One row per (file, module), plus one per file no module wants. Malloc'd. */
int bpftel_uprobes__files(struct bpftel_uprobes *u, struct bpftel_uprobe_file_info **out);

/* Is path's basename a library of a known stem? Returns enum shlib_lib or -1. The same
 * rules as the BPF matcher (bpf/lib/shlib_match.h), for /proc/<pid>/maps lines. */
int bpftel_shlib_match_name(const char *path);

#endif /* BPFTEL_UPROBES_H */
