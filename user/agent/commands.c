// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Control commands of bpftel-agent: the agent's own (stats, modules, probes, errors), each
 * module's (by its ops' command), and `module`, which the lifecycle thread runs.
 * Read-only answers are built from the manager's and the modules' report functions,
 * which take only short locks: any thread may call them, nothing waits for a load.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "control.h"
#include "lifecycle.h"
#include "overhead.h"
#include "process_metrics.h"
#include "throttle.h"
#include "telemetry/telemetry.h"
#include "user/common/ctl.h"
#include "user/manager/manager.h"

#define MAX_MODULES 16
#define MAX_PROBES  32

static double uptime_s(const struct bpftel_agent *agent)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - agent->mono_start.tv_sec) +
	       (now.tv_nsec - agent->mono_start.tv_nsec) / 1e9;
}

/* "tracepoint:syscalls/sys_exit_openat", "socket_filter:any (socket:[4242])" */
static json_t *attach_string(const struct bpftel_attach_candidate *c, const char *attached_to)
{
	char buf[512];
	int n;

	if (c->symbol)
		n = snprintf(buf, sizeof(buf), "%s:%s:%s", bpftel_attach_type_name(c->type),
			     c->target, c->symbol);
	else
		n = snprintf(buf, sizeof(buf), "%s:%s", bpftel_attach_type_name(c->type), c->target);
	if (attached_to && *attached_to && n > 0 && (size_t)n < sizeof(buf))
		snprintf(buf + n, sizeof(buf) - n, " (%s)", attached_to);
	return bpftel_json_str(buf);
}

/* Every probe of every module, as `bpftel probes` and `stats` show them. */
static void for_each_probe(struct bpftel_agent *agent,
			   void (*fn)(struct bpftel_module *m, const struct bpftel_probe_status *st,
				      json_t *arr),
			   json_t *arr)
{
	struct bpftel_module *mods[MAX_MODULES];
	struct bpftel_probe_status *st = calloc(MAX_PROBES, sizeof(*st));
	size_t nm, np, i, j;

	if (!st)
		return;
	nm = bpftel_manager__modules(agent->mgr, mods, MAX_MODULES);
	for (i = 0; i < nm; i++) {
		np = bpftel_module__probes(mods[i], st, MAX_PROBES);
		for (j = 0; j < np; j++)
			fn(mods[i], &st[j], arr);
	}
	free(st);
}

static void add_program(struct bpftel_module *m, const struct bpftel_probe_status *st, json_t *arr)
{
	const struct bpftel_attach_candidate *c;
	bool running = bpftel_module__state(m) == BPFTEL_MOD_RUNNING;

	if (!running || st->winner < 0)
		return;
	c = &st->cand[st->winner].cand;
	json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:I, s:o}", "name", c->prog,
					     "component", bpftel_module__name(m), "probe", st->name,
					     "id", (json_int_t)st->prog_id, "attach",
					     attach_string(c, st->attached_to)));
}

static const char *const cand_results[] = {
	[BPFTEL_CAND_UNTRIED] = "untried",   [BPFTEL_CAND_REJECTED] = "rejected",
	[BPFTEL_CAND_ATTACHED] = "attached", [BPFTEL_CAND_VIABLE] = "viable",
	[BPFTEL_CAND_COVERED] = "covered",
};

static void add_probe(struct bpftel_module *m, const struct bpftel_probe_status *st, json_t *arr)
{
	bool running = bpftel_module__state(m) == BPFTEL_MOD_RUNNING;
	json_t *cands = json_array(), *c;
	const char *ename;
	size_t i;

	for (i = 0; i < st->ncand; i++) {
		c = json_pack("{s:o, s:s, s:s}", "attach", attach_string(&st->cand[i].cand, NULL), "prog",
			      st->cand[i].cand.prog, "result", cand_results[st->cand[i].result]);
		if (st->cand[i].result == BPFTEL_CAND_ATTACHED && st->attached_to[0])
			json_object_set_new(c, "attached_to", bpftel_json_str(st->attached_to));
		if (st->cand[i].result == BPFTEL_CAND_REJECTED) {
			ename = strerrorname_np(-st->cand[i].err);
			json_object_set_new(c, "errno", json_integer(-st->cand[i].err));
			json_object_set_new(c, "errno_name", json_string(ename ? ename : "?"));
			json_object_set_new(c, "reason", bpftel_json_str(st->cand[i].reason));
		}
		json_array_append_new(cands, c);
	}
	json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s?, s:s*, s:b, s:o, s:o}", "module",
					     bpftel_module__name(m), "probe", st->name, "policy",
					     bpftel_probe_policy_name(st->policy), "group",
					     st->group, "covered_by", st->covered_by, "attached",
					     running && st->winner >= 0, "winner",
					     running && st->winner >= 0
						     ? attach_string(&st->cand[st->winner].cand,
								     st->attached_to)
						     : json_null(),
					     "candidates", cands));
}

/*
 * Runs, run time, average and CPU share (of one CPU, over the time they cover) of a
 * program: exact with run_stats = always, estimated from the on-windows with sampled
 * ("sampled": true, and the share of the time they were on), frozen with off. "window":
 * the last window counted, per second of it (what `bpftel top` shows when sampled).
 */
static void set_run_stats(json_t *p, const struct bpftel_tlm_prog *tp, bool sampled)
{
	json_t *w = json_null();
	double runs = tp->window_runs_per_s, ns = tp->window_ns_per_s;

	json_object_set_new(p, "run_cnt", json_integer(tp->run_cnt));
	json_object_set_new(p, "run_time_ns", json_integer(tp->run_time_ns));
	json_object_set_new(p, "avg_ns",
			    json_real(tp->run_cnt ? (double)tp->run_time_ns / tp->run_cnt : 0));
	json_object_set_new(p, "cpu_percent",
			    json_real(tp->covered_ns ? 100.0 * tp->run_time_ns / tp->covered_ns
						     : 0));
	json_object_set_new(p, "covered_s", json_real(tp->covered_ns / 1e9));
	json_object_set_new(p, "sampled", json_boolean(sampled));
	json_object_set_new(p, "sampled_fraction", json_real(tp->sampled_fraction));
	if (tp->window_ns)
		w = json_pack("{s:f, s:f, s:f, s:f, s:f}", "runs_per_s", runs, "avg_ns",
			      runs > 0 ? ns / runs : 0.0, "cpu_percent", ns / 1e7, "seconds",
			      tp->window_ns / 1e9, "age_s", tp->window_age_ns / 1e9);
	json_object_set_new(p, "window", w);
}

static json_t *real_or_null(double v)
{
	return v < 0 ? json_null() : json_real(v);
}

/*
 * What the program costs the processes it runs in: its run time, and for a uprobe
 * program the trap each run pays ("trap": "uprobe" or "uretprobe", as the registry
 * attaches it). Null where the trap cost is unknown (the calibration failed).
 */
static void set_overhead(json_t *p, const struct bpftel_prog_overhead *o)
{
	double total = bpftel_overhead_seconds(o), rate = bpftel_overhead_window_ns_per_s(o);
	json_t *w = json_object_get(p, "window");

	json_object_set_new(p, "trap", o->trap ? json_string(o->trap) : json_null());
	json_object_set_new(p, "trap_cost_ns", o->trap ? real_or_null(o->trap_ns) : json_null());
	json_object_set_new(p, "trap_paired", json_boolean(o->paired));
	json_object_set_new(p, "trap_entry_instructions",
			    o->entry_insn ? json_string(o->entry_insn) : json_null());
	json_object_set_new(p, "trap_overhead_seconds",
			    real_or_null(o->trap_ns < 0 || o->trap_total_ns < 0
					     ? -1
					     : o->trap_total_ns / 1e9));
	json_object_set_new(p, "overhead_seconds", real_or_null(total));
	json_object_set_new(p, "overhead_percent",
			    total < 0	       ? json_null()
			    : o->p.covered_ns ? json_real(100 * total / (o->p.covered_ns / 1e9))
					       : json_real(0));
	if (json_is_object(w))
		json_object_set_new(w, "overhead_percent", real_or_null(rate < 0 ? -1 : rate / 1e7));
}

/*
 * Run counts and times, and overhead, for each program; programs no probe names
 * (uprobes the registry attaches per library file) are added.
 */
static void add_run_stats(struct bpftel_agent *agent, json_t *progs, bool sampled)
{
	struct bpftel_prog_overhead *o;
	bool listed;
	json_t *p;
	size_t i;
	int n, j;

	n = bpftel_agent_overheads(agent, &o);
	for (j = 0; j < n; j++) {
		const struct bpftel_tlm_prog *tp = &o[j].p;

		listed = false;
		json_array_foreach (progs, i, p) {
			if (tp->id == json_integer_value(json_object_get(p, "id"))) {
				set_run_stats(p, tp, sampled);
				set_overhead(p, &o[j]);
				listed = true;
			}
		}
		if (listed || !tp->id)
			continue;
		p = json_pack("{s:s, s:s, s:n, s:I, s:s}", "name", tp->program, "component",
			      tp->module, "probe", "id", (json_int_t)tp->id, "attach",
			      "uprobes, per library file (bpftel libs)");
		set_run_stats(p, tp, sampled);
		set_overhead(p, &o[j]);
		json_array_append_new(progs, p);
	}
	free(o);
}

/* The calibration of uprobe traps at start (user/manager/trapcost.h). */
static json_t *trap_cost(const struct bpftel_trap_cost *tc)
{
	return json_pack("{s:b, s:o, s:o, s:o, s:o, s:f, s:i, s:f, s:s, s:s?}", "known", tc->known,
			 "uprobe_ns", tc->known ? json_real(tc->uprobe_ns) : json_null(),
			 "uprobe_emulated_ns",
			 tc->known && tc->uprobe_emulated_ns > 0 ? json_real(tc->uprobe_emulated_ns)
								 : json_null(),
			 "uretprobe_ns", tc->known ? json_real(tc->uretprobe_ns) : json_null(),
			 "pair_ns", tc->known ? json_real(tc->pair_ns) : json_null(),
			 "call_ns", tc->call_ns, "calls", (int)tc->calls, "took_ms", tc->took_ms,
			 "link", tc->link ? tc->link : "none", "error",
			 tc->known ? NULL : tc->error);
}

/* How run stats are held: "always", "sampled" (on_s of every period_s) or "off". */
static json_t *run_stats_info(const struct bpftel_run_stats_info *rs)
{
	const char *ename = rs->error ? strerrorname_np(-rs->error) : NULL;

	return json_pack("{s:s, s:f, s:f, s:b, s:I, s:f, s:s?}", "mode",
			 bpftel_run_stats_mode_name(rs->cfg.mode), "on_s", rs->cfg.on_ms / 1e3,
			 "period_s", rs->cfg.period_ms / 1e3, "stats_on", rs->stats_on, "windows",
			 (json_int_t)rs->windows, "on_fraction", rs->on_fraction, "error", ename);
}

static json_t *stats_maps(struct bpftel_agent *agent)
{
	struct bpftel_tlm_map *m;
	json_t *arr = json_array();
	int n, i;

	n = bpftel_telemetry__maps(agent->tlm, &m);
	for (i = 0; i < n; i++) {
		json_array_append_new(
			arr,
			json_pack("{s:s, s:s, s:s, s:I, s:o, s:o}", "module", m[i].module, "map",
				  m[i].map, "type", m[i].type, "capacity",
				  (json_int_t)m[i].capacity, "entries",
				  m[i].entries < 0 ? json_null() : json_integer(m[i].entries),
				  "memory_bytes",
				  m[i].memory ? json_integer((json_int_t)m[i].memory) : json_null()));
	}
	free(m);
	return arr;
}

/*
 * Event loss by stage, per module: kernel (ring-buffer reserve/output failures, from
 * errors telemetry, those its stops swept included), queue_full and too_big (the module's event pipeline), parse
 * (records its callback rejected as malformed).
 */
static json_t *stats_losses(struct bpftel_agent *agent)
{
	struct bpftel_module *mods[MAX_MODULES];
	struct bpftel_module_event_stats es;
	json_t *arr = json_array();
	__u64 kernel;
	size_t nm, i;

	nm = bpftel_manager__modules(agent->mgr, mods, MAX_MODULES);
	for (i = 0; i < nm; i++) {
		const char *name = bpftel_module__name(mods[i]);

		kernel = bpftel_telemetry__ringbuf_failures(agent->tlm, name);
		bpftel_module__event_stats(mods[i], &es);
		json_array_append_new(arr, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "module",
						     name, "processed", (json_int_t)es.processed,
						     "kernel", (json_int_t)kernel, "queue_full",
						     (json_int_t)es.lost_queue_full, "too_big",
						     (json_int_t)es.lost_too_big, "parse",
						     (json_int_t)es.lost_parse));
	}
	return arr;
}

/* What each module adds to stats ("events", "libraries": the watcher's). */
static void add_module_stats(struct bpftel_agent *agent, json_t *resp)
{
	struct bpftel_module *mods[MAX_MODULES];
	const struct bpftel_module_ops *ops;
	size_t n, i;
	json_t *part;

	n = bpftel_manager__modules(agent->mgr, mods, MAX_MODULES);
	for (i = 0; i < n; i++) {
		ops = bpftel_module__ops(mods[i]);
		part = ops->stats ? ops->stats(mods[i]) : NULL;
		if (part)
			json_object_update_missing(resp, part);
		json_decref(part);
	}
}

json_t *bpftel_agent_stats(struct bpftel_agent *agent, bool modules)
{
	json_t *progs = json_array(), *resp;
	char metrics_addr[sizeof(agent->metrics_addr)];
	struct bpftel_run_stats_info rs;
	double cpu_s;
	__u64 rss;

	bpftel_telemetry__run_stats(agent->tlm, &rs);
	for_each_probe(agent, add_program, progs);
	add_run_stats(agent, progs, rs.cfg.mode == BPFTEL_RUN_STATS_SAMPLED);
	pthread_mutex_lock(&agent->cfg_lock);
	memcpy(metrics_addr, agent->metrics_addr, sizeof(metrics_addr));
	pthread_mutex_unlock(&agent->cfg_lock);
	resp = json_pack("{s:{s:s, s:i, s:f, s:I, s:s, s:o, s:s?}, s:o}", "agent", "version",
			 BPFTEL_VERSION, "pid", (int)getpid(), "uptime_s", uptime_s(agent),
			 "started", (json_int_t)agent->started, "run_stats",
			 bpftel_run_stats_mode_name(rs.cfg.mode), "run_stats_detail",
			 run_stats_info(&rs), "metrics_addr",
			 metrics_addr[0] ? metrics_addr : NULL, "programs", progs);
	json_object_set_new(resp, "maps", stats_maps(agent));
	json_object_set_new(resp, "losses", stats_losses(agent));
	json_object_set_new(json_object_get(resp, "agent"), "trap_cost", trap_cost(&agent->trap));
	/* Uprobe links of stopped module instances the reaper has yet to destroy. */
	json_object_set_new(json_object_get(resp, "agent"), "links_releasing",
			    json_integer((json_int_t)bpftel_links_pending()));
	/* Its own process's cost (its maps' kernel memory: "maps"). */
	if (!bpftel_process_usage(&cpu_s, &rss)) {
		json_object_set_new(json_object_get(resp, "agent"), "cpu_seconds",
				    json_real(cpu_s));
		json_object_set_new(json_object_get(resp, "agent"), "rss_bytes",
				    json_integer((json_int_t)rss));
	}
	if (modules)
		add_module_stats(agent, resp);
	return resp;
}

static json_t *cmd_errors(struct bpftel_agent *agent)
{
	struct bpftel_tlm_error *e;
	json_t *arr = json_array(), *o;
	const char *ename;
	int n, i;

	n = bpftel_telemetry__errors(agent->tlm, &e);
	if (n < 0) {
		json_decref(arr);
		return bpftel_ctl_error("errors: cannot read the telemetry's counters: %s",
					strerror(-n));
	}
	for (i = 0; i < n; i++) {
		ename = e[i].err == TLM_ERRNO_OTHER ? "other" : strerrorname_np(e[i].err);
		o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:I}", "module", e[i].module,
			      "program", e[i].program, "kind", e[i].is_map ? "map" : "helper",
			      e[i].is_map ? "map" : "helper", e[i].resource, "op", e[i].op, "errno",
			      e[i].err, "errno_name", ename ? ename : "?", "count",
			      (json_int_t)e[i].count);
		if (o)
			json_array_append_new(arr, o);
	}
	free(e);
	return json_pack("{s:o, s:{s:I, s:I}}", "errors", arr, "telemetry_lost", "map_errors",
			 (json_int_t)bpftel_telemetry__lost(agent->tlm, TLM_LOST_MAP_ERRORS),
			 "helper_errors",
			 (json_int_t)bpftel_telemetry__lost(agent->tlm, TLM_LOST_HELPER_ERRORS));
}

static json_t *cmd_probes(struct bpftel_agent *agent)
{
	json_t *probes = json_array();

	for_each_probe(agent, add_probe, probes);
	return json_pack("{s:o}", "probes", probes);
}

/*
 * A module's self-overhead budget: {max_cpu_percent, cpu_percent (the last window's
 * estimate), throttle_episodes} or null without one; and while it sheds load,
 * throttled {since, reason, files}, else null.
 */
static void add_budget(struct bpftel_agent *agent, const char *name, bool running, json_t *o)
{
	struct bpftel_throttle_status st;
	json_t *files = json_array();
	size_t i;

	bpftel_throttle__status(agent->throttle, name, &st);
	json_object_set_new(o, "budget",
			    st.budget ? json_pack("{s:f, s:o}", "max_cpu_percent", st.limit_percent,
						  "cpu_percent",
						  st.load_percent < 0 ? json_null()
								      : json_real(st.load_percent))
				      : json_null());
	json_object_set_new(o, "throttle_episodes", json_integer((json_int_t)st.episodes));
	for (i = 0; i < st.nshed; i++)
		json_array_append_new(files, bpftel_json_str(st.shed[i]));
	if (st.throttled && running) {
		json_object_set_new(o, "state", json_string("throttled"));
		json_object_set_new(o, "throttled",
				    json_pack("{s:I, s:o, s:o}", "since", (json_int_t)st.since,
					      "reason", bpftel_json_str(st.reason), "files", files));
	} else {
		json_decref(files);
		json_object_set_new(o, "throttled", json_null());
	}
}

static json_t *cmd_modules(struct bpftel_agent *agent)
{
	struct bpftel_module *mods[MAX_MODULES];
	json_t *arr = json_array(), *o;
	size_t i, n;

	int err, errs[BPFTEL_MAX_HOOKS + 1];
	size_t nerrs, k;
	const char *step;
	json_t *last, *se;
	__u64 failures;

	n = bpftel_manager__modules(agent->mgr, mods, MAX_MODULES);
	for (i = 0; i < n; i++) {
		/* The last stop's hook errors: it completed, but something of the module's
		 * may be left (a map's entries, a subscription). */
		nerrs = bpftel_module__stop_errors(mods[i], errs, sizeof(errs) / sizeof(errs[0]));
		se = json_array();
		for (k = 0; k < nerrs; k++)
			json_array_append_new(se, json_string(strerror(-errs[k])));
		err = bpftel_module__last_failure(mods[i], &step, &failures);
		last = err ? json_pack("{s:s, s:i, s:s}", "step", step, "errno", -err, "message",
				       strerror(-err))
			   : json_null();
		o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:o, s:o}", "name",
			      bpftel_module__name(mods[i]), "state",
			      bpftel_module_state_name(bpftel_module__state(mods[i])), "restarts",
			      (json_int_t)bpftel_module__restarts(mods[i]), "subscribers",
			      (json_int_t)bpftel_manager__subscribers(agent->mgr,
								       bpftel_module__name(mods[i])),
			      "start_failures", (json_int_t)failures, "last_error", last,
			      "stop_errors", se);
		/* Running, and shedding load: "throttled". */
		add_budget(agent, bpftel_module__name(mods[i]),
			   bpftel_module__state(mods[i]) == BPFTEL_MOD_RUNNING, o);
		json_array_append_new(arr, o);
	}
	return json_pack("{s:o}", "modules", arr);
}

/* {"cmd": "module", "action": "start"|"stop"|"restart", "name": NAME}: what is wrong
 * with it, or NULL when the lifecycle thread may run it. */
static json_t *module_request_error(struct bpftel_agent *agent, json_t *req)
{
	const char *action = json_string_value(json_object_get(req, "action"));
	const char *name = json_string_value(json_object_get(req, "name"));

	if (!action || !name)
		return bpftel_ctl_error("module: needs \"action\" and \"name\" strings");
	if (strcmp(action, "start") && strcmp(action, "stop") && strcmp(action, "restart"))
		return bpftel_ctl_error("module: unknown action '%.32s' (start, stop, restart)",
					action);
	if (!bpftel_manager__find(agent->mgr, name))
		return bpftel_ctl_error("module: no module '%.64s' (see bpftel modules)", name);
	if (bpftel_agent_module_index(name) < 0)
		return bpftel_ctl_error("module: '%.64s' is a shared component: it runs while a "
					"module needs it",
					name);
	return NULL;
}

/* On the lifecycle thread: the request was checked by module_request_error. */
json_t *bpftel_agent_module_action(struct bpftel_agent *agent, json_t *req)
{
	const char *action = json_string_value(json_object_get(req, "action"));
	const char *name = json_string_value(json_object_get(req, "name"));
	struct bpftel_module *m = bpftel_manager__find(agent->mgr, name);
	int idx = bpftel_agent_module_index(name), err = 0, stop_err = 0;

	if (!m)
		return bpftel_ctl_error("module: no module '%.64s'", name);
	/* A stop answers once its uprobes are gone from the kernel; a restart does not
	 * wait for the old instance's (its programs are inert: bpf/lib/stop_gate.h). */
	if (!strcmp(action, "stop")) {
		stop_err = bpftel_module__stop(m);
		bpftel_links_settle();
		err = stop_err;
	} else if (!strcmp(action, "restart")) {
		/* A stop hook's error does not keep it from starting: the stop completed,
		 * the error is in `bpftel modules`. */
		err = bpftel_module__restart(m, &stop_err);
	} else {
		err = bpftel_module__run(m);
		if (err == -EALREADY)
			err = 0; /* already running: nothing to do */
	}
	/* The operator has it in hand now: a reload starts it again if the module list
	 * changes (apply.c), or if this start failed, not because an earlier one did. */
	if (idx >= 0)
		agent->start_failed[idx] = err && strcmp(action, "stop");
	if (err)
		return bpftel_ctl_error("module '%.64s': %s failed: %s%s%s", name, action,
					strerror(-err), stop_err && err != stop_err ? "; its stop: " : "",
					stop_err && err != stop_err ? strerror(-stop_err) : "");
	return json_pack("{s:s, s:s, s:s, s:I, s:o}", "module", name, "action", action, "state",
			 bpftel_module_state_name(bpftel_module__state(m)), "restarts",
			 (json_int_t)bpftel_module__restarts(m), "stop_error",
			 stop_err ? json_string(strerror(-stop_err)) : json_null());
}

/* The module whose own command (its ops' `command`) cmd is, or NULL. */
static struct bpftel_module *command_module(struct bpftel_agent *agent, const char *cmd)
{
	struct bpftel_module *mods[MAX_MODULES];
	const struct bpftel_module_ops *ops;
	size_t n, i;

	n = bpftel_manager__modules(agent->mgr, mods, MAX_MODULES);
	for (i = 0; i < n; i++) {
		ops = bpftel_module__ops(mods[i]);
		if (ops->command && ops->report && !strcmp(ops->command, cmd))
			return mods[i];
	}
	return NULL;
}

/* A module's own command's answer, or NULL. */
static json_t *module_command(struct bpftel_agent *agent, const char *cmd, json_t *req)
{
	struct bpftel_module *m = command_module(agent, cmd);

	return m ? bpftel_module__ops(m)->report(m, req) : NULL;
}

json_t *bpftel_agent_query(struct bpftel_agent *agent, const char *cmd, json_t *req)
{
	if (!strcmp(cmd, "stats"))
		return bpftel_agent_stats(agent, true);
	if (!strcmp(cmd, "probes"))
		return cmd_probes(agent);
	if (!strcmp(cmd, "modules"))
		return cmd_modules(agent);
	if (!strcmp(cmd, "errors"))
		return cmd_errors(agent);
	if (!strcmp(cmd, "ping"))
		return json_pack("{s:s}", "version", BPFTEL_VERSION);
	return module_command(agent, cmd, req);
}

json_t *bpftel_agent_command(struct bpftel_ctl_request *r, void *ctx)
{
	struct bpftel_agent *agent = ctx;
	const char *cmd = bpftel_ctl_request__cmd(r);
	json_t *req = bpftel_ctl_request__json(r), *resp;
	int err;

	if (strcmp(cmd, "module") && command_module(agent, cmd)) {
		/* May read other processes' files: answered from the reports thread. */
		err = bpftel_lifecycle__query(agent->reports, req, bpftel_ctl_request__defer(r));
		if (err)
			return bpftel_ctl_error("%s: %s", cmd,
						err == -ESHUTDOWN ? "the agent is stopping"
						: err == -EBUSY	  ? "too many requests waiting; try "
								    "again when they have been answered"
								  : strerror(-err));
		return NULL;
	}
	if (strcmp(cmd, "module")) {
		resp = bpftel_agent_query(agent, cmd, req);
		return resp ? resp : bpftel_ctl_error("unknown command '%.64s'", cmd);
	}
	resp = module_request_error(agent, req);
	if (resp)
		return resp;
	/* Slow (BPF load, attach): answered from the lifecycle thread, while this one
	 * goes on serving the others. */
	err = bpftel_lifecycle__module(agent->lc, req, bpftel_ctl_request__defer(r));
	if (err)
		return bpftel_ctl_error("module: %s",
					err == -ESHUTDOWN ? "the agent is stopping"
					: err == -EBUSY	  ? "too many module requests waiting; try "
							    "again when they have run"
							  : strerror(-err));
	return NULL;
}
