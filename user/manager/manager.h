/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Manager: owns modules and drives their lifecycle. No module-specific code lives
 * here: a module is a struct bpftel_module_ops plus what its open() declares (BPF
 * object, probes with attach candidates, ring buffers with callbacks).
 *
 * Lifecycle of a module (states in capitals, steps in lower case):
 *
 *   CLOSED --open--> OPENED --load--> LOADED --start--> RUNNING
 *      ^                                                   |
 *      +------------------------ stop ---------------------+  (also from OPENED, LOADED)
 *
 *   open:  ops->open (declares object, probes, ring buffers), then before_init hooks
 *          (set .rodata, resize maps, reuse shared maps)
 *   load:  feature-detect every attach candidate, autoload only viable programs, load
 *          the object, then after_init hooks
 *   start: before_start hooks, attach each probe (first viable candidate wins, falling
 *          back on attach failure), start the consumers (an event pipeline: consumer
 *          and worker threads, user/events), then after_start hooks; returns once
 *          they ran
 *   stop:  before_stop hooks, stop consumers (no callback runs after), detach,
 *          ops->close, after_stop hooks; back to CLOSED. Idempotent.
 *
 * Hooks: a component registers them on a module for itself, with its own context. Each
 * kind has its own function type, so a hook of the wrong kind does not compile.
 * init/start hooks run in registration order, stop hooks in reverse. A failing
 * before_init/after_init/before_start/after_start hook fails that step (and the caller
 * stops the module); stop-hook errors are collected (bpftel_module__stop_errors) and
 * stop still completes.
 *
 * Ints returned are 0 or a negative errno; illegal transitions return -EINVAL and
 * change nothing. Errors are reported through bpftel_log().
 */
#ifndef BPFTEL_MANAGER_H
#define BPFTEL_MANAGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/types.h>
#include <bpf/libbpf.h>

struct bpftel_manager;
struct bpftel_module;

enum bpftel_module_state {
	BPFTEL_MOD_CLOSED = 0,
	BPFTEL_MOD_OPENED,
	BPFTEL_MOD_LOADED,
	BPFTEL_MOD_RUNNING,
};

const char *bpftel_module_state_name(enum bpftel_module_state state);

/* ---- hooks ---- */

struct bpftel_hook_before_init {
	struct bpftel_module *module;
	struct bpf_object *obj; /* opened, not loaded */
};
struct bpftel_hook_after_init {
	struct bpftel_module *module;
	struct bpf_object *obj; /* loaded */
};
struct bpftel_hook_before_start {
	struct bpftel_module *module;
	struct bpf_object *obj;
};
struct bpftel_hook_after_start {
	struct bpftel_module *module;
	struct bpf_object *obj; /* its probes attached, its consumers running */
};
struct bpftel_hook_before_stop {
	struct bpftel_module *module;
	struct bpf_object *obj; /* NULL if the module never opened */
	enum bpftel_module_state from;
};
struct bpftel_hook_after_stop {
	struct bpftel_module *module;
};

typedef int (*bpftel_before_init_fn)(const struct bpftel_hook_before_init *h, void *ctx);
typedef int (*bpftel_after_init_fn)(const struct bpftel_hook_after_init *h, void *ctx);
typedef int (*bpftel_before_start_fn)(const struct bpftel_hook_before_start *h, void *ctx);
typedef int (*bpftel_after_start_fn)(const struct bpftel_hook_after_start *h, void *ctx);
typedef int (*bpftel_before_stop_fn)(const struct bpftel_hook_before_stop *h, void *ctx);
typedef int (*bpftel_after_stop_fn)(const struct bpftel_hook_after_stop *h, void *ctx);

#define BPFTEL_MAX_HOOKS 16
#define BPFTEL_MAX_KEPT_MAPS 16

int bpftel_module__add_before_init(struct bpftel_module *m, bpftel_before_init_fn fn, void *ctx);
int bpftel_module__add_after_init(struct bpftel_module *m, bpftel_after_init_fn fn, void *ctx);
int bpftel_module__add_before_start(struct bpftel_module *m, bpftel_before_start_fn fn, void *ctx);
int bpftel_module__add_after_start(struct bpftel_module *m, bpftel_after_start_fn fn, void *ctx);
int bpftel_module__add_before_stop(struct bpftel_module *m, bpftel_before_stop_fn fn, void *ctx);
int bpftel_module__add_after_stop(struct bpftel_module *m, bpftel_after_stop_fn fn, void *ctx);

/* ---- probes ---- */

enum bpftel_attach_type {
	BPFTEL_ATTACH_FENTRY = 0,
	BPFTEL_ATTACH_FEXIT,
	BPFTEL_ATTACH_KPROBE,
	BPFTEL_ATTACH_KRETPROBE,
	BPFTEL_ATTACH_TRACEPOINT,
	BPFTEL_ATTACH_RAW_TRACEPOINT,
	BPFTEL_ATTACH_UPROBE,
	BPFTEL_ATTACH_URETPROBE,
	/* A socket program on an AF_PACKET socket of all protocols (ETH_P_ALL) bound to
	 * every interface (target "any") or to the interface named by target. The manager
	 * owns the socket; detach closes it. */
	BPFTEL_ATTACH_SOCKET_FILTER,
};

const char *bpftel_attach_type_name(enum bpftel_attach_type type);

struct bpftel_attach_candidate {
	enum bpftel_attach_type type;
	const char *prog;   /* program name in the module's object */
	const char *target; /* kernel function, "category/name", raw tp, or binary path */
	const char *symbol; /* uprobes: symbol, versioned allowed ("SSL_write@@OPENSSL_3.0.0") */
	pid_t pid;	    /* uprobes: process filter, 0 or -1 = all processes */
};

enum bpftel_probe_policy {
	BPFTEL_PROBE_REQUIRED = 0, /* no candidate attached: start fails */
	BPFTEL_PROBE_BEST_EFFORT,  /* no candidate attached: noted, start goes on */
	BPFTEL_PROBE_ONE_OF_GROUP, /* start fails unless a probe of `group` attached */
};

const char *bpftel_probe_policy_name(enum bpftel_probe_policy policy);

#define BPFTEL_PROBE_MAX_CAND 4

struct bpftel_probe_spec {
	const char *name;
	enum bpftel_probe_policy policy;
	const char *group;
	size_t ncand;
	struct bpftel_attach_candidate cand[BPFTEL_PROBE_MAX_CAND];
	/*
	 * Optional: skip this probe when the earlier probe named covered_by attached with
	 * its candidate covered_by_cand, which already sees what this one would (an fexit
	 * on a function that three syscalls reach makes their three tracepoints
	 * redundant). Its candidates then read BPFTEL_CAND_COVERED.
	 */
	const char *covered_by;
	int covered_by_cand;
};

/* Declare a probe; from ops->open (or before load). Strings must outlive the module. */
int bpftel_module__add_probe(struct bpftel_module *m, const struct bpftel_probe_spec *spec);

/* What happened to each candidate of a probe at the last load/start. */
enum bpftel_cand_result {
	BPFTEL_CAND_UNTRIED = 0,  /* an earlier candidate won */
	BPFTEL_CAND_REJECTED = 1, /* feature detection or attach failed: see err, reason */
	BPFTEL_CAND_ATTACHED = 2,
	BPFTEL_CAND_VIABLE = 3,	 /* passed detection, not attached yet */
	BPFTEL_CAND_COVERED = 4, /* not needed: spec.covered_by attached what covers it */
};

struct bpftel_probe_status {
	const char *name;
	enum bpftel_probe_policy policy;
	const char *group;
	const char *covered_by; /* set when skipped because that probe covers it */
	int winner;		/* candidate index, -1 if none attached */
	__u32 prog_id;		/* kernel id of the winner's program */
	char attached_to[64];	/* what the winner holds, when not implied: "socket:[1234]" */
	size_t ncand;
	struct {
		struct bpftel_attach_candidate cand;
		enum bpftel_cand_result result;
		int err; /* negative errno when rejected */
		char reason[160];
	} cand[BPFTEL_PROBE_MAX_CAND];
};

/* Copy of every probe's status, under the module's lock. Returns the count. */
size_t bpftel_module__probes(struct bpftel_module *m, struct bpftel_probe_status *out, size_t max);

/* ---- ring buffers ---- */

/* The largest record a module's ring buffer may send (bytes, header excluded): a
 * larger one is dropped as too_big. Modules assert their records fit. */
#define BPFTEL_RINGBUF_MAX_RECORD 4352

/* Consume ring buffer map `map` with cb on the module's consumer thread. From ops->open. */
int bpftel_module__add_ringbuf(struct bpftel_module *m, const char *map, ring_buffer_sample_fn cb,
			       void *ctx);

/* ---- modules ---- */

struct json_t;
struct bpftel_prom;

struct bpftel_module_ops {
	const char *name;
	/* Open the BPF object (not load it) and declare probes and ring buffers with
	 * bpftel_module__set_object/add_probe/add_ringbuf. */
	int (*open)(struct bpftel_module *m);
	/* Load the object. Optional: bpf_object__load() by default; a skeleton-based module
	 * passes its X__load() so that the skeleton's global data gets mmaped. */
	int (*load)(struct bpftel_module *m);
	/* Destroy what open created (links are gone by then). Optional. */
	void (*close)(struct bpftel_module *m);
	/* Maps a restart hands on, by name, NULL-ended (up to BPFTEL_MAX_KEPT_MAPS;
	 * optional): the instance it runs reuses the one it stopped had, as long as its
	 * definition is the same, and finds what the old programs left there (state that
	 * outlives a call: sessions, allocations). A stop then a start begins afresh. */
	const char *const *restart_keeps;
	/* (Its load can tell: bpftel_module__reused_maps.) */
	/* Shared components only: apply the union of subscribers' masks (a config-map
	 * write, no reload). Called with the module LOADED or RUNNING. */
	int (*set_subscriptions)(struct bpftel_module *m, __u64 mask);
	/* Shared components are started by their first subscriber, stopped by the last. */
	bool shared;

	/*
	 * What the module reports, and its housekeeping; each optional. The manager never
	 * calls these: the agent does, from its control-socket, metrics and housekeeping
	 * threads, at any time, also while a lifecycle step of this module runs. So they
	 * read the module's own state under its own short locks (or snapshots), never a
	 * lock held across slow work, and do no slow work themselves except housekeeping.
	 */
	const char *command; /* the control command `report` answers: "gpu" */
	/* The command's answer (a new JSON object); req is the request, may be NULL. */
	struct json_t *(*report)(struct bpftel_module *m, struct json_t *req);
	/* Members merged into the agent's `stats` answer ("events", "libraries"). */
	struct json_t *(*stats)(struct bpftel_module *m);
	/* The module's own Prometheus families, through the agent's writer (prom.h). */
	void (*metrics)(struct bpftel_module *m, struct bpftel_prom *w);
	/* Periodic work (sweeps, rescans): on the agent's housekeeping thread, every
	 * housekeeping_ms (0: BPFTEL_HOUSEKEEPING_MS), whatever the module's state. May do
	 * slow work; must not hold a lock the reporting functions take while it does. */
	void (*housekeeping)(struct bpftel_module *m);
	unsigned int housekeeping_ms;
};

#define BPFTEL_HOUSEKEEPING_MS 1000

const struct bpftel_module_ops *bpftel_module__ops(const struct bpftel_module *m);

void bpftel_module__set_object(struct bpftel_module *m, struct bpf_object *obj);
struct bpf_object *bpftel_module__object(const struct bpftel_module *m);
const char *bpftel_module__name(const struct bpftel_module *m);
void *bpftel_module__priv(const struct bpftel_module *m);
enum bpftel_module_state bpftel_module__state(struct bpftel_module *m);
__u64 bpftel_module__restarts(struct bpftel_module *m);

/* Single steps, for tests and fine control. */
int bpftel_module__open(struct bpftel_module *m);
int bpftel_module__load(struct bpftel_module *m);
int bpftel_module__start(struct bpftel_module *m);
/* From any state; 0 when CLOSED already. May be called from another thread while a
 * start is in progress: the start then returns -ECANCELED and leaves nothing behind. */
int bpftel_module__stop(struct bpftel_module *m);
/* open + load + start; on failure or cancellation everything is undone. */
int bpftel_module__run(struct bpftel_module *m);
/*
 * Stop, then run, keeping the module's subscriptions to shared components
 * (bpftel_manager__bind_shared) across: what a shared component records for it goes
 * on recording (the watcher's sockets: a connection made before the restart is still
 * known after); and the maps of ops.restart_keeps. The stop's error, which does not keep the run from happening, in
 * *stop_err; returns the run's. A run that fails drops the subscriptions.
 */
int bpftel_module__restart(struct bpftel_module *m, int *stop_err);
/* Whether the object of the module's last open reuses the maps a restart kept
 * (ops.restart_keeps): for its load, on the lifecycle step's thread, to know that its
 * tables hold the old instance's state. */
bool bpftel_module__reused_maps(const struct bpftel_module *m);
/* Whether the module's stop in progress is a restart's (its maps and subscriptions are
 * then kept): for its before_stop hooks, e.g. to note what the new instance will need
 * to know of the gap in which no program of the module runs. */
bool bpftel_module__restarting(const struct bpftel_module *m);

/* Records from the module's ring buffers: processed, and dropped by stage (userspace
 * queue full, larger than the pipeline's slots, rejected by the callback as
 * malformed). Cumulative over restarts. */
struct bpftel_module_event_stats {
	__u64 processed, lost_queue_full, lost_too_big, lost_parse;
};
void bpftel_module__event_stats(struct bpftel_module *m, struct bpftel_module_event_stats *out);

/*
 * Why the module is not running when a start failed: the step that failed ("open",
 * "load", "start") in *step and its negative errno as the return value; 0 (and *step
 * NULL) when the last start succeeded or none failed. *failures: failed starts so far,
 * cancelled ones not included. Either pointer may be NULL.
 */
int bpftel_module__last_failure(struct bpftel_module *m, const char **step, __u64 *failures);

/*
 * Fault injection, for tests of what the agent does when a module cannot start: the
 * next `count` times the module reaches `step` ("open", "load" or "start"), that step
 * fails with err (a negative errno) and unwinds as a real failure would. count 0
 * removes the fault. -EINVAL for an unknown step or a non-negative err.
 */
int bpftel_module__inject_fault(struct bpftel_module *m, const char *step, int err,
				unsigned int count);

/*
 * Fault injection at the attach-candidate level, for tests of the fallback chain on any
 * kernel: the next `count` loads of the module reject candidate `cand` (its index) of
 * the probe named `probe` with err (a negative errno) before feature detection asks the
 * kernel: its program is not loaded (a kernel that would take it, fentry or a kprobe,
 * does not get it either), the next candidate is tried, and the probe's status records
 * err with the reason "injected fault". count 0 removes the fault. -EINVAL for a
 * candidate index out of range or a non-negative err, -ENOSPC past
 * BPFTEL_MAX_CAND_FAULTS faults at once.
 */
#define BPFTEL_MAX_CAND_FAULTS 4
int bpftel_module__inject_candidate_fault(struct bpftel_module *m, const char *probe, int cand,
					  int err, unsigned int count);

/*
 * For tests of event loss: hold (or release) the consumer of the running module's ring
 * buffers (bpftel_events__hold_consumer): held, it reads nothing, so the kernel's ring
 * buffers fill and their programs count what no longer fits. Returns once the consumer
 * has stopped reading; -ENOENT when the module consumes nothing (not running).
 */
int bpftel_module__hold_consumer(struct bpftel_module *m, bool hold);

/* Errors of the last stop's hooks (negative errnos), count returned. */
size_t bpftel_module__stop_errors(struct bpftel_module *m, int *errs, size_t max);

/* ---- manager ---- */

struct bpftel_manager *bpftel_manager__new(void);
/* Stops every module (shared components last) and frees everything. */
void bpftel_manager__free(struct bpftel_manager *mgr);
/*
 * The program is stopping: from now on every bpftel_module__run() returns -ECANCELED at
 * once, and one in progress (on another thread) unwinds at its next step, so that an
 * exit never waits for more than the BPF load already under way. Any thread.
 */
void bpftel_manager__shutdown(struct bpftel_manager *mgr);

int bpftel_manager__register(struct bpftel_manager *mgr, const struct bpftel_module_ops *ops,
			     void *priv, struct bpftel_module **out);
struct bpftel_module *bpftel_manager__find(struct bpftel_manager *mgr, const char *name);
size_t bpftel_manager__modules(struct bpftel_manager *mgr, struct bpftel_module **out, size_t max);

/*
 * Shared components. subscriber names who subscribes (one subscription per name).
 * The first subscription starts the component, each change re-applies the union of
 * masks through ops->set_subscriptions, the last unsubscribe stops it.
 * Unsubscribing a name that is not subscribed is a no-op.
 */
int bpftel_manager__subscribe(struct bpftel_manager *mgr, const char *shared,
			      const char *subscriber, __u64 mask);
int bpftel_manager__unsubscribe(struct bpftel_manager *mgr, const char *shared,
				const char *subscriber);
/*
 * Event pipeline and ring buffer sizes for every module, applied at each module's next
 * start (a running module keeps what it started with). 0 keeps the default: one
 * worker, 1024-record queues, the ring buffer size the module's object declares.
 */
struct bpftel_pipeline_settings {
	unsigned int workers;	    /* 1..64 */
	unsigned int queue_len;	    /* records per worker queue */
	unsigned int ringbuf_bytes; /* a power of two, a multiple of the page size */
};
void bpftel_manager__set_pipeline(struct bpftel_manager *mgr,
				  const struct bpftel_pipeline_settings *s);

/* Number of subscribers of a shared component. */
size_t bpftel_manager__subscribers(struct bpftel_manager *mgr, const char *shared);

/*
 * Make `module` subscribe to `shared` with mask while it runs: registers a
 * before_start hook (subscribe) and a before_stop hook (unsubscribe) on module.
 */
int bpftel_manager__bind_shared(struct bpftel_manager *mgr, struct bpftel_module *module,
				const char *shared, __u64 mask);

/* ---- background link teardown (reaper.c) ---- */

/*
 * Destroying a uprobe link waits for the kernel (~45 ms a multi-uprobe link, ~80 ms a
 * perf-event one, on 6.18), so links whose programs no longer matter are handed to a
 * pool of reaper threads, which destroy them in parallel (their grace periods overlap).
 * A stopping module closes its object's stop gate (bpf/lib/stop_gate.h) first, so that
 * its programs are inert meanwhile. bpftel_stop_gate_close returns 0, or -ENOENT when
 * obj has no gate (or is not loaded): then destroy its links in place.
 */
#define BPFTEL_STOP_GATE_SEC ".data.stop_gate"
int bpftel_stop_gate_close(struct bpf_object *obj);

/* Called on a reaper thread once the link is destroyed. */
typedef void (*bpftel_release_done_fn)(void *ctx);
/*
 * Destroy link (a libbpf link), or when it is NULL close fd (a link created with raw
 * bpf(2), see uprobe_multi.h), on a reaper thread; then call done(ctx) if set. Never
 * blocks; if no thread can start, it destroys in place. Nothing to destroy: done runs
 * at once.
 */
void bpftel_release(struct bpf_link *link, int fd, bpftel_release_done_fn done, void *ctx);
/* The same, ahead of the links already queued (a uprobe whose saved instruction is no
 * longer the file's: uprobes.h): it waits only for the one being destroyed. */
void bpftel_release_first(struct bpf_link *link, int fd, bpftel_release_done_fn done, void *ctx);
/* bpftel_release(link, -1, NULL, NULL); NULL is a no-op. */
void bpftel_link_release(struct bpf_link *link);
/* Links released and not destroyed yet. */
size_t bpftel_links_pending(void);
/* Links released since the process started: a count that only grows, for tests that
 * check a stop handed its links over (bpftel_links_pending() may be 0 again by then). */
uint64_t bpftel_links_released(void);
/* Wait until every released link is destroyed. bpftel_manager__free does. The
 * reaper's threads may still be exiting when it returns. */
void bpftel_links_settle(void);
/* The reaper threads' name (comm): short-lived threads, left out by whoever counts a
 * component's own threads. */
#define BPFTEL_REAPER_THREAD_NAME "bpftel-reaper"

/* ---- helpers ---- */

/*
 * out[k] = the sum over CPUs of slot k of a per-CPU array of __u64 counters, for
 * k < nkeys; last[k] (the caller's, zeroed with a new map) the sum last read: a slot
 * that cannot be read (out of memory) gives it again, so that a counter made of it
 * never goes down, which a scraper would take for a reset (a rate's spike). 0, or the
 * last negative errno of a slot not read.
 */
int bpftel_percpu_counters_read(int map_fd, __u32 nkeys, __u64 *out, __u64 *last);

#endif /* BPFTEL_MANAGER_H */
