/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The watcher's state, shared by sharedlibs.c (the module) and sharedlibs_report.c (what
 * it reports and its housekeeping). */
#ifndef BPFTEL_SHAREDLIBS_INTERNAL_H
#define BPFTEL_SHAREDLIBS_INTERNAL_H

#include <pthread.h>

#include "sharedlibs.h"
#include "scan_pace.h"
#include "user/manager/manager.h"

struct shared_libraries;
struct bpftel_uprobes;

/* The name a Go executable was run under (its process opens no library to be named
 * after: bpftel_sharedlibs__comm_of). */
#define SHLIB_GO_EXECS 256

struct shlib_go_exec {
	__u32 pid;
	__u64 start_ns;
	char comm[SHLIB_COMM_LEN];
};

struct bpftel_sharedlibs {
	struct bpftel_module_ops ops;
	struct bpftel_module *module;
	struct shared_libraries *skel; /* while the module is open */
	/* Its maps are used only once loaded: the load writes their fds (libbpf, without
	 * our lock), while lookups and reports run. */
	bool loaded;

	/* Guards everything below: the consumer thread writes, the control thread reads. */
	pthread_mutex_t lock;
	/* Ring of detections, oldest at head. */
	struct bpftel_shlib_detection *det;
	size_t det_cap, det_head, det_len;
	__u64 received, malformed, evicted;
	__u64 execs, execs_skipped; /* exec events; executables since not reported (not Go) */
	/* The last Go executables run, a ring (next: where the next goes). */
	struct shlib_go_exec go_execs[SHLIB_GO_EXECS];
	size_t go_execs_next;
	__u64 detected[SHLIB_LIBSET__COUNT];
	/* Kernel counters of earlier runs: the maps die with each stop. */
	__u64 retired[SHLIB_CNT__COUNT];
	__u64 live_last[SHLIB_CNT__COUNT]; /* the loaded object's, as last read */

	bpftel_shlib_listener_fn listener;
	void *listener_ctx;

	/* The uprobe registry its detections feed (set_registry), and what it reports
	 * and sweeps; the count of losses already answered by a /proc rescan. */
	struct bpftel_uprobes *registry;
	__u64 lost_seen;
	/* When socket recording last went on (CLOCK_MONOTONIC ns): an fd's entry made
	 * before is from before a stretch it was off, when the fd may have been closed
	 * and its number reused unseen (bpftel_sharedlibs__fd_sock). */
	bool sockets_on;
	__u64 sockets_since_ns;
	/* What the programs report (libsets, and SHLIB_CFG_EXECS), as last set; and when
	 * that last gained something (CLOCK_MONOTONIC ms; 0: no gain a scan has not
	 * answered). Nothing was reported of it while off: the Go programs run since USM
	 * stopped, a libset's libraries opened before its module started. With lock. */
	__u32 reported;
	long long gained_ms;
	/* The rescans: how often they may run (the housekeeping thread's), after losses,
	 * after what is reported gained, and for files refused over budget. */
	struct bpftel_scan_pace scans;
	struct bpftel_budget_pace budget_scans;
};

/* sharedlibs_report.c: the module's report ops (user/manager/manager.h). */
struct json_t *sharedlibs_report(struct bpftel_module *m, struct json_t *req);
struct json_t *sharedlibs_stats(struct bpftel_module *m);
void sharedlibs_metrics(struct bpftel_module *m, struct bpftel_prom *w);
void sharedlibs_housekeeping(struct bpftel_module *m);

#endif /* BPFTEL_SHAREDLIBS_INTERNAL_H */
