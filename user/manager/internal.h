/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Manager internals shared by module.c, probe.c, consumer.c and manager.c.
 *
 * Locking:
 *  - mgr->lock guards the module list. Modules are never freed before the manager, so
 *    a module pointer found under it stays valid.
 *  - m->lock serializes every lifecycle step of one module (slow work: BPF load and
 *    verification, attach, detach) and guards its hooks. Steps of different modules
 *    run in parallel.
 *  - m->report_lock guards what readers copy out while a step may be running: the
 *    probes' published status, the last failure, stop errors and the consumer pipeline
 *    pointer. It is held for copies only, never across slow work, so `bpftel stats`
 *    and /metrics never wait for a module to load. The step (holding m->lock) writes
 *    these under it; lock order m->lock, then m->report_lock.
 *  - m->stop_gen is bumped (atomically, without m->lock) by every stop before it takes
 *    m->lock. A start notes it when it begins and checks it between steps; a change
 *    means a stop is waiting, so the start unwinds and returns -ECANCELED. That is how
 *    stop wins over a start in progress without the two sharing unlocked state.
 *  - sub->lock (one per shared component) serializes subscribe/unsubscribe of that
 *    component, including the start/stop they cause. Lock order: a module's m->lock
 *    may be held while taking a shared component's sub->lock (a before_start hook
 *    subscribes), and sub->lock is held while taking the shared module's own m->lock.
 *    A shared module never subscribes to anything, so there is no cycle.
 *  - The consumer pipeline's threads touch only the pipeline; start/stop create and
 *    join them under m->lock, so no callback runs after stop returns.
 */
#ifndef BPFTEL_MANAGER_INTERNAL_H
#define BPFTEL_MANAGER_INTERNAL_H

#include <pthread.h>

#include "manager.h"

#define BPFTEL_MAX_PROBES   32
#define BPFTEL_MAX_RINGBUFS 4
#define BPFTEL_MAX_MODULES  16
#define BPFTEL_MAX_SUBS	    16

struct hook {
	union {
		bpftel_before_init_fn before_init;
		bpftel_after_init_fn after_init;
		bpftel_before_start_fn before_start;
		bpftel_after_start_fn after_start;
		bpftel_before_stop_fn before_stop;
		bpftel_after_stop_fn after_stop;
	};
	void *ctx;
};

struct hook_list {
	size_t n;
	struct hook h[BPFTEL_MAX_HOOKS];
};

struct probe {
	struct bpftel_probe_spec spec;
	struct bpftel_probe_status status; /* written under m->report_lock */
	long uprobe_offset[BPFTEL_PROBE_MAX_CAND];
	struct bpf_link *link;
	int sock; /* a socket filter's socket, or -1 */
};

/* Is anything of p attached (a link, or a socket carrying its filter)? */
static inline bool probe_attached(const struct probe *p)
{
	return p->link || p->sock >= 0;
}

struct ringbuf_sub {
	const char *map;
	ring_buffer_sample_fn cb;
	void *ctx;
};

struct bpftel_events;

struct consumer {
	struct bpftel_events *ev; /* while started */
	/* Totals of earlier runs. */
	__u64 processed, lost_queue_full, lost_too_big, lost_parse;
};

struct shared_sub {
	char name[64];
	__u64 mask;
};

struct bpftel_module {
	struct bpftel_manager *mgr;
	const struct bpftel_module_ops *ops;
	void *priv;
	pthread_mutex_t lock;
	pthread_mutex_t report_lock;
	unsigned int stop_gen;
	enum bpftel_module_state state;
	struct bpf_object *obj;
	__u64 starts;

	struct hook_list before_init, after_init, before_start, after_start, before_stop, after_stop;

	size_t nprobes;
	struct probe probes[BPFTEL_MAX_PROBES];
	size_t nringbufs;
	struct ringbuf_sub ringbufs[BPFTEL_MAX_RINGBUFS];
	struct consumer consumer;

	/* Set by bpftel_module__restart across its stop: the bindings keep their
	 * subscriptions (binding_unsubscribe), the maps of ops.restart_keeps are kept. */
	bool keep_shared;
	/* Descriptors of ops.restart_keeps' maps, by index, from a restart's stop to its
	 * run's open (-1: none; kept_maps.c). */
	int kept[BPFTEL_MAX_KEPT_MAPS];
	/* The last open's object reuses them (bpftel_module__reused_maps). */
	bool reused_maps;

	/* Allocations made for this module by others (bindings), freed with it. */
	size_t nowned;
	void *owned[BPFTEL_MAX_HOOKS];

	size_t nstop_errs;
	int stop_errs[BPFTEL_MAX_HOOKS];

	/* The last start that failed (cleared by one that succeeds), and how many did. */
	const char *fail_step;
	int fail_err;
	__u64 failures;
	/* An injected fault (bpftel_module__inject_fault): step, errno, starts left. */
	const char *fault_step;
	int fault_err;
	unsigned int fault_left;
	/* Injected candidate faults (bpftel_module__inject_candidate_fault), under m->lock. */
	struct cand_fault {
		char probe[64];
		int cand, err;
		unsigned int left; /* 0: a free slot */
	} cand_faults[BPFTEL_MAX_CAND_FAULTS];

	/* Shared components only. */
	pthread_mutex_t sub_lock;
	size_t nsubs;
	size_t nsubs_pub; /* nsubs, for readers that must not wait for sub_lock (atomic) */
	struct shared_sub subs[BPFTEL_MAX_SUBS];
};

struct bpftel_manager {
	pthread_mutex_t lock;
	size_t nmodules;
	struct bpftel_module *modules[BPFTEL_MAX_MODULES];
	/* Feature probes are costly and their answers do not change: cached. */
	pthread_mutex_t feat_lock;
	int fentry_ok; /* 0 unknown, 1 yes, negative errno */
	int kprobe_ok;
	int shutdown; /* bpftel_manager__shutdown was called (atomic) */
	/* Read with atomic loads by starting modules (no lock: a start holds its
	 * module's lock, and the order is module, then manager). */
	struct bpftel_pipeline_settings pipeline;
};

/* probe.c */
void probe_status_init(struct probe *p);
void probes_close_sockets(struct bpftel_module *m);
/* With m->lock: probes_detect, rejecting what bpftel_module__inject_candidate_fault
 * armed (module.c: cand_injected). */
void probes_detect(struct bpftel_module *m);
int cand_injected(struct bpftel_module *m, const char *probe, size_t cand);
int probes_attach(struct bpftel_module *m);
/* in_background: the object's stop gate is closed, the reaper may destroy the links. */
void probes_detach(struct bpftel_module *m, bool in_background);
/* Publish a probe's status for readers (m->report_lock). */
void probe_publish(struct bpftel_module *m, struct probe *p, const struct bpftel_probe_status *st);

/* consumer.c */
int consumer_start(struct bpftel_module *m);
void consumer_stop(struct bpftel_module *m);

/* kept_maps.c: the maps a restart hands on (ops.restart_keeps). */
int kept_maps_init(struct bpftel_module *m);
void keep_maps(struct bpftel_module *m);
int reuse_kept(struct bpftel_module *m);
void drop_kept(struct bpftel_module *m);

#endif /* BPFTEL_MANAGER_INTERNAL_H */
