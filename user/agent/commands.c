// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Control commands of bpftel-agent: one function per command, dispatched by name. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "control.h"
#include "metrics.h"
#include "user/modules/gpu/gpu.h"
#include "user/modules/usm/usm.h"
#include "user/common/ctl.h"
#include "user/manager/manager.h"
#include "user/sharedlibs/sharedlibs.h"
#include "telemetry/telemetry.h"
#include "user/sharedlibs/uprobes.h"

#define MAX_MODULES 16
#define MAX_PROBES  32

static double uptime_s(const struct bpftel_agent *agent)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - agent->mono_start.tv_sec) +
	       (now.tv_nsec - agent->mono_start.tv_nsec) / 1e9;
}

static bool pid_alive(__u32 pid)
{
	return !kill((pid_t)pid, 0) || errno == EPERM;
}

static json_t *attach_string(const struct bpftel_attach_candidate *c)
{
	char buf[512];

	if (c->symbol)
		snprintf(buf, sizeof(buf), "%s:%s:%s", bpftel_attach_type_name(c->type), c->target,
			 c->symbol);
	else
		snprintf(buf, sizeof(buf), "%s:%s", bpftel_attach_type_name(c->type), c->target);
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
	json_array_append_new(arr,
			      json_pack("{s:s, s:s, s:s, s:I, s:o}", "name", c->prog, "component",
					bpftel_module__name(m), "probe", st->name, "id",
					(json_int_t)st->prog_id, "attach", attach_string(c)));
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
		c = json_pack("{s:o, s:s, s:s}", "attach", attach_string(&st->cand[i].cand), "prog",
			      st->cand[i].cand.prog, "result", cand_results[st->cand[i].result]);
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
						     ? attach_string(&st->cand[st->winner].cand)
						     : json_null(),
					     "candidates", cands));
}

static json_t *stats_events(struct bpftel_sharedlibs *sl)
{
	struct bpftel_sharedlibs_counters cnt;
	json_t *obj = json_object(), *det;
	int i;

	if (bpftel_sharedlibs__counters(sl, &cnt))
		return obj;
	json_object_set_new(obj, "received", json_integer(cnt.received));
	json_object_set_new(obj, "malformed", json_integer(cnt.malformed));
	json_object_set_new(obj, "evicted", json_integer(cnt.evicted));
	for (i = 0; i < SHLIB_CNT__COUNT; i++)
		json_object_set_new(obj, bpftel_shlib_counter_name(i), json_integer(cnt.kernel[i]));
	det = json_object();
	for (i = 0; i < SHLIB_LIBSET__COUNT; i++)
		json_object_set_new(det, bpftel_shlib_libset_name(i),
				    json_integer(cnt.detected[i]));
	json_object_set_new(obj, "detected", det);
	return obj;
}

static json_t *stats_libraries(struct bpftel_sharedlibs *sl)
{
	struct bpftel_shlib_detection *det;
	json_t *arr = json_array(), *o;
	size_t i, n;

	n = bpftel_sharedlibs__detections(sl, &det);
	for (i = 0; i < n; i++) {
		o = json_pack("{s:I, s:o, s:s, s:s, s:o, s:I, s:b, s:I, s:I, s:o}", "pid",
			      (json_int_t)det[i].pid, "comm", bpftel_json_str(det[i].comm), "lib",
			      bpftel_shlib_lib_name(det[i].lib), "libset",
			      bpftel_shlib_libset_name(det[i].libset), "path",
			      bpftel_json_str(det[i].path), "opens", (json_int_t)det[i].opens,
			      "alive", pid_alive(det[i].pid), "first_seen",
			      (json_int_t)det[i].first_seen, "last_seen",
			      (json_int_t)det[i].last_seen, "host_path",
			      det[i].host_path ? bpftel_json_str(det[i].host_path) : json_null());
		if (o)
			json_array_append_new(arr, o);
	}
	bpftel_shlib_detections_free(det, n);
	return arr;
}

static __u64 boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void set_run_stats(json_t *p, const struct bpftel_tlm_prog *tp, __u64 now)
{
	__u64 alive = now > tp->load_time_ns ? now - tp->load_time_ns : 1;

	json_object_set_new(p, "run_cnt", json_integer(tp->run_cnt));
	json_object_set_new(p, "run_time_ns", json_integer(tp->run_time_ns));
	json_object_set_new(p, "avg_ns",
			    json_real(tp->run_cnt ? (double)tp->run_time_ns / tp->run_cnt : 0));
	json_object_set_new(p, "cpu_percent", json_real(100.0 * tp->run_time_ns / alive));
}

/*
 * Run count, time, average and CPU share (of one CPU, since load) for each program;
 * programs no probe names (uprobes the registry attaches per library file) are added.
 */
static void add_run_stats(struct bpftel_agent *agent, json_t *progs)
{
	struct bpftel_tlm_prog *tp;
	__u64 now = boottime_ns();
	bool listed;
	json_t *p;
	size_t i;
	int n, j;

	n = bpftel_telemetry__programs(agent->tlm, &tp);
	for (j = 0; j < n; j++) {
		listed = false;
		json_array_foreach (progs, i, p) {
			if (tp[j].id == json_integer_value(json_object_get(p, "id"))) {
				set_run_stats(p, &tp[j], now);
				listed = true;
			}
		}
		if (listed || !tp[j].id)
			continue;
		p = json_pack("{s:s, s:s, s:n, s:I, s:s}", "name", tp[j].program, "component",
			      tp[j].module, "probe", "id", (json_int_t)tp[j].id, "attach",
			      "uprobes per library file (bpftel libs)");
		set_run_stats(p, &tp[j], now);
		json_array_append_new(progs, p);
	}
	free(tp);
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
			json_pack("{s:s, s:s, s:s, s:I, s:o}", "module", m[i].module, "map",
				  m[i].map, "type", m[i].type, "capacity",
				  (json_int_t)m[i].capacity, "entries",
				  m[i].entries < 0 ? json_null() : json_integer(m[i].entries)));
	}
	free(m);
	return arr;
}

/*
 * Event loss by stage, per module: kernel (ring-buffer reserve/output failures, from
 * errors telemetry), queue_full and too_big (the module's event pipeline), parse
 * (records its callback rejected as malformed).
 */
static json_t *stats_losses(struct bpftel_agent *agent)
{
	struct bpftel_module *mods[MAX_MODULES];
	struct bpftel_module_event_stats es;
	struct bpftel_tlm_error *e;
	json_t *arr = json_array();
	__u64 kernel;
	size_t nm, i;
	int n, j;

	n = bpftel_telemetry__errors(agent->tlm, &e);
	nm = bpftel_manager__modules(agent->mgr, mods, MAX_MODULES);
	for (i = 0; i < nm; i++) {
		const char *name = bpftel_module__name(mods[i]);

		kernel = 0;
		for (j = 0; j < n; j++) {
			if (e[j].is_map && !strcmp(e[j].module, name) &&
			    !strncmp(e[j].op, "ringbuf_", 8))
				kernel += e[j].count;
		}
		bpftel_module__event_stats(mods[i], &es);
		json_array_append_new(arr, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "module",
						     name, "processed", (json_int_t)es.processed,
						     "kernel", (json_int_t)kernel, "queue_full",
						     (json_int_t)es.lost_queue_full, "too_big",
						     (json_int_t)es.lost_too_big, "parse",
						     (json_int_t)es.lost_parse));
	}
	free(e);
	return arr;
}

static json_t *cmd_stats(struct bpftel_agent *agent)
{
	json_t *progs = json_array(), *resp;

	for_each_probe(agent, add_program, progs);
	add_run_stats(agent, progs);
	resp = json_pack("{s:{s:s, s:i, s:f, s:I, s:b, s:s?}, s:o, s:o, s:o}", "agent", "version",
			 BPFTEL_VERSION, "pid", (int)getpid(), "uptime_s", uptime_s(agent),
			 "started", (json_int_t)agent->started, "run_stats",
			 bpftel_telemetry__stats_enabled(agent->tlm), "metrics_addr",
			 agent->metrics ? bpftel_metrics__addr(agent->metrics) : NULL, "programs",
			 progs, "events", stats_events(agent->sharedlibs), "libraries",
			 stats_libraries(agent->sharedlibs));
	json_object_set_new(resp, "maps", stats_maps(agent));
	json_object_set_new(resp, "losses", stats_losses(agent));
	/* Uprobe links of stopped module instances the reaper has yet to destroy. */
	json_object_set_new(json_object_get(resp, "agent"), "links_releasing",
			    json_integer((json_int_t)bpftel_links_pending()));
	return resp;
}

static json_t *cmd_errors(struct bpftel_agent *agent)
{
	struct bpftel_tlm_error *e;
	json_t *arr = json_array(), *o;
	const char *ename;
	int n, i;

	n = bpftel_telemetry__errors(agent->tlm, &e);
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

static json_t *cmd_modules(struct bpftel_agent *agent)
{
	struct bpftel_module *mods[MAX_MODULES];
	json_t *arr = json_array();
	size_t i, n;

	const char *step;
	json_t *last;
	__u64 failures;
	int err;

	n = bpftel_manager__modules(agent->mgr, mods, MAX_MODULES);
	for (i = 0; i < n; i++) {
		err = bpftel_module__last_failure(mods[i], &step, &failures);
		last = err ? json_pack("{s:s, s:i, s:s}", "step", step, "errno", -err, "message",
				       strerror(-err))
			   : json_null();
		json_array_append_new(
			arr, json_pack("{s:s, s:s, s:I, s:I, s:I, s:o}", "name",
				       bpftel_module__name(mods[i]), "state",
				       bpftel_module_state_name(bpftel_module__state(mods[i])),
				       "restarts", (json_int_t)bpftel_module__restarts(mods[i]),
				       "subscribers",
				       (json_int_t)bpftel_manager__subscribers(
					       agent->mgr, bpftel_module__name(mods[i])),
				       "start_failures", (json_int_t)failures, "last_error", last));
	}
	return json_pack("{s:o}", "modules", arr);
}

static void agent_tick_locked(struct bpftel_agent *agent)
{
	struct bpftel_sharedlibs_counters cnt;
	__u64 lost;

	bpftel_uprobes__sweep(agent->uprobes);
	if (agent->gpu)
		bpftel_gpu__sweep(agent->gpu);
	if (agent->usm)
		bpftel_usm__sweep(agent->usm);
	/* A lost event may be a library load we never saw: read /proc instead. */
	if (bpftel_sharedlibs__counters(agent->sharedlibs, &cnt))
		return;
	/* So may a match whose path could not be read or resolved to the file opened. */
	lost = cnt.kernel[SHLIB_CNT_LOST] + cnt.kernel[SHLIB_CNT_NO_PATH] +
	       cnt.kernel[SHLIB_CNT_TOO_LONG] + cnt.malformed +
	       bpftel_uprobes__stale(agent->uprobes);
	if (lost != agent->lost_seen) {
		agent->lost_seen = lost;
		bpftel_uprobes__scan(agent->uprobes);
	}
}

void bpftel_agent_tick(struct bpftel_agent *agent)
{
	long long now = bpftel_mono_ms();

	if (now - agent->last_sweep_ms < BPFTEL_SWEEP_INTERVAL_MS)
		return;
	agent->last_sweep_ms = now;
	pthread_mutex_lock(&agent->lock);
	agent_tick_locked(agent);
	pthread_mutex_unlock(&agent->lock);
}

static json_t *cmd_libs(struct bpftel_agent *agent)
{
	struct bpftel_uprobe_file_info *rows;
	json_t *arr = json_array(), *o, *fails, *pids;
	char id[64];
	int n, i;
	size_t k;

	n = bpftel_uprobes__files(agent->uprobes, &rows);
	for (i = 0; i < n; i++) {
		fails = json_array();
		for (k = 0; k < rows[i].failed && k < BPFTEL_UPROBE_MAX_FAIL; k++)
			json_array_append_new(
				fails,
				json_pack("{s:s, s:i, s:s}", "symbol", rows[i].fail[k].symbol,
					  "errno", -rows[i].fail[k].err, "errno_name",
					  strerrorname_np(-rows[i].fail[k].err) ?: "?"));
		pids = json_array();
		for (k = 0; k < rows[i].nprocs && k < 8; k++)
			json_array_append_new(pids, json_integer(rows[i].pids[k]));
		snprintf(id, sizeof(id), "%llx:%llu", (unsigned long long)rows[i].dev,
			 (unsigned long long)rows[i].ino);
		o = json_pack("{s:o, s:s, s:s, s:I, s:o, s:s?, s:I, s:I, s:o}", "path",
			      bpftel_json_str(rows[i].path), "lib",
			      bpftel_shlib_lib_name(rows[i].lib), "file", id, "processes",
			      (json_int_t)rows[i].nprocs, "pids", pids, "module",
			      rows[i].module[0] ? rows[i].module : NULL, "attached",
			      (json_int_t)rows[i].attached, "failed", (json_int_t)rows[i].failed,
			      "failures", fails);
		if (o)
			json_array_append_new(arr, o);
	}
	free(rows);
	return json_pack("{s:o, s:i}", "libs", arr, "sweep_interval_ms", BPFTEL_SWEEP_INTERVAL_MS);
}

/* {"cmd": "module", "action": "start"|"stop"|"restart", "name": NAME} */
static json_t *cmd_module(struct bpftel_agent *agent, json_t *req)
{
	const char *action = json_string_value(json_object_get(req, "action"));
	const char *name = json_string_value(json_object_get(req, "name"));
	struct bpftel_module *m;
	int err = 0;

	if (!action || !name)
		return bpftel_ctl_error("module: needs \"action\" and \"name\" strings");
	m = bpftel_manager__find(agent->mgr, name);
	if (!m)
		return bpftel_ctl_error("module: no module '%.64s' (see bpftel modules)", name);
	if (bpftel_manager__subscribers(agent->mgr, name) ||
	    !strcmp(name, BPFTEL_SHAREDLIBS_MODULE))
		return bpftel_ctl_error("module: '%.64s' is a shared component: it runs while a "
					"module needs it",
					name);
	if (!strcmp(action, "stop") || !strcmp(action, "restart"))
		err = bpftel_module__stop(m);
	/* A stop answers once its uprobes are gone from the kernel; a restart does not
	 * wait for the old instance's (its programs are inert: bpf/lib/stop_gate.h). */
	if (!strcmp(action, "stop"))
		bpftel_links_settle();
	if (!err && (!strcmp(action, "start") || !strcmp(action, "restart"))) {
		err = bpftel_module__run(m);
		if (err == -EALREADY && !strcmp(action, "start"))
			err = 0; /* already running: nothing to do */
	} else if (strcmp(action, "stop") && strcmp(action, "restart")) {
		return bpftel_ctl_error("module: unknown action '%.32s' (start, stop, restart)",
					action);
	}
	if (err)
		return bpftel_ctl_error("module '%.64s': %s failed: %s", name, action,
					strerror(-err));
	return json_pack("{s:s, s:s, s:s, s:I}", "module", name, "action", action, "state",
			 bpftel_module_state_name(bpftel_module__state(m)), "restarts",
			 (json_int_t)bpftel_module__restarts(m));
}

json_t *bpftel_agent_dispatch(struct bpftel_agent *agent, const char *cmd, json_t *req)
{
	if (!strcmp(cmd, "module"))
		return cmd_module(agent, req);
	if (!strcmp(cmd, "stats"))
		return cmd_stats(agent);
	if (!strcmp(cmd, "probes"))
		return cmd_probes(agent);
	if (!strcmp(cmd, "modules"))
		return cmd_modules(agent);
	if (!strcmp(cmd, "errors"))
		return cmd_errors(agent);
	if (!strcmp(cmd, "libs"))
		return cmd_libs(agent);
	if (!strcmp(cmd, "gpu"))
		return bpftel_agent_gpu_json(agent);
	if (!strcmp(cmd, "http"))
		return bpftel_agent_http_json(agent);
	if (!strcmp(cmd, "ping"))
		return json_pack("{s:s}", "version", BPFTEL_VERSION);
	return bpftel_ctl_error("unknown command '%.64s'", cmd);
}

json_t *bpftel_agent_command(struct bpftel_ctl_request *r, void *ctx)
{
	struct bpftel_agent *agent = ctx;
	json_t *resp;

	pthread_mutex_lock(&agent->lock);
	resp = bpftel_agent_dispatch(agent, bpftel_ctl_request__cmd(r),
				     bpftel_ctl_request__json(r));
	pthread_mutex_unlock(&agent->lock);
	return resp;
}
