/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* bpftel-agent's state, shared by its main loop and its control commands. */
#ifndef BPFTEL_AGENT_H
#define BPFTEL_AGENT_H

#include <pthread.h>
#include <time.h>
#include <jansson.h>
#include <linux/types.h>

#include "config.h"

/* How often the uprobe registry forgets exited processes and detaches unused files. */
#define BPFTEL_SWEEP_INTERVAL_MS 1000

struct bpftel_manager;
struct bpftel_sharedlibs;
struct bpftel_ctl_server;
struct bpftel_ctl_request;
struct bpftel_telemetry;
struct bpftel_uprobes;
struct bpftel_gpu;
struct bpftel_usm;
struct bpftel_metrics;

/* The agent's own subscription to the shared-libraries watcher: it keeps an inventory
 * of every library of every libset, whichever modules run. */
#define BPFTEL_AGENT_SUBSCRIBER "agent-inventory"

struct bpftel_agent {
	/* Serializes the main loop's commands and ticks with the metrics thread. */
	pthread_mutex_t lock;
	struct bpftel_manager *mgr;
	struct bpftel_sharedlibs *sharedlibs;
	struct bpftel_telemetry *tlm;
	struct bpftel_uprobes *uprobes;
	struct bpftel_gpu *gpu; /* NULL if it could not be registered */
	struct bpftel_usm *usm; /* likewise */
	__u64 lost_seen;	/* watcher losses already answered by a rescan */
	long long last_sweep_ms;
	struct bpftel_ctl_server *ctl;
	struct bpftel_metrics *metrics; /* NULL: no metrics endpoint */
	struct bpftel_config cfg;	/* in force */
	time_t started;			/* wall clock, for display */
	struct timespec mono_start;	/* for uptime */
};

/* Periodic work of the main loop: sweep, and rescan /proc after lost events. */
void bpftel_agent_tick(struct bpftel_agent *agent);

/*
 * Apply a configuration (apply.c): from nothing when starting (modules registered,
 * not running), else from agent->cfg. Returns an error only when starting and the
 * watcher or the metrics endpoint cannot start; on reload what fails is logged and
 * the rest applied.
 */
int bpftel_agent_apply(struct bpftel_agent *agent, const struct bpftel_config *next, bool starting);

/* The `gpu` and `http` commands' answers (gpu_json.c, http_json.c). */
json_t *bpftel_agent_gpu_json(struct bpftel_agent *agent);
json_t *bpftel_agent_http_json(struct bpftel_agent *agent);

/* A command's answer, caller holding agent->lock (req may be NULL). */
json_t *bpftel_agent_dispatch(struct bpftel_agent *agent, const char *cmd, json_t *req);

/* Control command dispatcher (bpftel_ctl_handler_fn); ctx is the agent. */
json_t *bpftel_agent_command(struct bpftel_ctl_request *r, void *ctx);

#endif /* BPFTEL_AGENT_H */
