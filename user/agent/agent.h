/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * bpftel-agent's state, and its threading model.
 *
 * Threads, and what each may do:
 *
 *   main          epoll over the signalfd and the control socket. Answers the agent's
 *                 read-only commands itself (stats, modules, probes, errors), which copy
 *                 state under short locks; never does slow work. Hands module
 *                 start/stop/restart and SIGHUP's reload to the lifecycle thread, the
 *                 modules' own commands (libs, gpu, http: a report may read other
 *                 processes' files) to the reports thread, and sends their answers when
 *                 they come back (control.h's deferred answers).
 *   reports       (a second lifecycle.c queue) runs those reports one at a time.
 *   lifecycle     (lifecycle.c) runs those jobs one at a time, in order: BPF load and
 *                 verification, attach, detach, the reaper's settling for `stop`. Each
 *                 module's lifecycle steps serialize on that module's own lock (the
 *                 manager's), which nothing on the main or metrics thread takes.
 *   housekeeping  (housekeeping.c) every second, each module's housekeeping op: sweeps of
 *                 exited processes, idle library files, rescans of /proc; then the
 *                 self-overhead budget (throttle.c: measure, shed, take back). Slow
 *                 work, under no lock a reader needs.
 *   run stats     telemetry's sampler thread (telemetry/sampler.h): turns
 *                 BPF_ENABLE_STATS on and off on its duty cycle, reads counters.
 *   metrics       libmicrohttpd's thread: renders /metrics from the same report ops.
 *   module threads the manager's per-module consumers and workers (user/events), the
 *                 uprobe registry's callers, and the reaper's pool (user/manager/reaper.c).
 *
 * Who owns what, and which lock guards it:
 *   agent->cfg, agent->metrics,  agent->cfg_lock (short: copies and pointer swaps). Only
 *   agent->metrics_addr          the lifecycle thread writes them after start.
 *   the module table's privs     written at start, read-only after, freed at exit.
 *   each module's state          that module, under its own locks (see each module's
 *                                header and user/manager/internal.h: m->report_lock).
 *
 * Stop is bounded: SIGTERM cancels a start in progress (bpftel_module__cancel), joins the
 * lifecycle and housekeeping threads, stops every module (a gated module's uprobes go to
 * the reaper, which destroys them in parallel) and waits for the reaper.
 */
#ifndef BPFTEL_AGENT_H
#define BPFTEL_AGENT_H

#include <pthread.h>
#include <time.h>
#include <jansson.h>
#include <linux/types.h>

#include "config.h"
#include "module_table.h"
#include "trap_ledger.h"
#include "user/manager/trapcost.h"

struct bpftel_manager;
struct bpftel_ctl_server;
struct bpftel_ctl_request;
struct bpftel_telemetry;
struct bpftel_uprobes;
struct bpftel_metrics;
struct bpftel_lifecycle;
struct bpftel_housekeeping;
struct bpftel_throttle;

/* The agent's own subscription to the shared-libraries watcher: it keeps an inventory
 * of every library of every libset, whichever modules run. */
#define BPFTEL_AGENT_SUBSCRIBER "agent-inventory"

struct bpftel_agent {
	struct bpftel_manager *mgr;
	struct bpftel_telemetry *tlm;
	struct bpftel_uprobes *uprobes;
	void *priv[BPFTEL_CFG_MAX_MODULES]; /* by module table index; NULL: not registered */
	struct bpftel_ctl_server *ctl;
	struct bpftel_lifecycle *lc;
	struct bpftel_lifecycle *reports; /* answers the modules' commands (lifecycle.h) */
	struct bpftel_housekeeping *hk;
	struct bpftel_throttle *throttle; /* the self-overhead budget (throttle.h) */
	pthread_mutex_t cfg_lock;
	struct bpftel_metrics *metrics; /* NULL: no metrics endpoint */
	char metrics_addr[80];		/* where it listens ("" when off), for stats */
	/* Connections to /metrics closed at once, their owner holding its share
	 * (metrics_peers.h); atomic, across the endpoint's restarts by a reload. */
	__u64 metrics_refused;
	__u64 metrics_open; /* connections to /metrics open now, the refused not counted */
	struct bpftel_config cfg;	/* in force */
	/* Modules the configuration wants whose last start by it failed: the next reload
	 * that wants them tries again, changed or not (apply.c; the lifecycle thread). */
	bool start_failed[BPFTEL_CFG_MAX_MODULES];
	struct bpftel_trap_cost trap;	/* calibrated at start, read-only after */
	struct bpftel_trap_ledger traps; /* uprobe programs' traps so far (overhead.c) */
	time_t started;			/* wall clock, for display */
	struct timespec mono_start;	/* for uptime */
};

/*
 * Apply a configuration (apply.c): from nothing when starting (modules registered, not
 * running), else from agent->cfg. On the lifecycle thread after start. Returns an error
 * only when starting and the watcher or the metrics endpoint cannot start; on reload
 * what fails is logged and the rest applied.
 */
int bpftel_agent_apply(struct bpftel_agent *agent, const struct bpftel_config *next, bool starting);

/* A read-only command's answer (commands.c), or NULL if cmd is not one: any thread. */
json_t *bpftel_agent_query(struct bpftel_agent *agent, const char *cmd, json_t *req);
/* The stats command's answer; without the modules' parts (the watcher's libraries,
 * a JSON string per path: megabytes on a busy host) unless modules. */
json_t *bpftel_agent_stats(struct bpftel_agent *agent, bool modules);
/* A module start/stop/restart, run by the lifecycle thread (commands.c). */
json_t *bpftel_agent_module_action(struct bpftel_agent *agent, json_t *req);

/* Control command dispatcher (bpftel_ctl_handler_fn); ctx is the agent. */
json_t *bpftel_agent_command(struct bpftel_ctl_request *r, void *ctx);

#endif /* BPFTEL_AGENT_H */
