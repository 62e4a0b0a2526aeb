// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Prometheus endpoint: GET /metrics in the text exposition format (0.0.4), served by
 * libmicrohttpd on its own thread. The agent's own families come from the same answers
 * the control socket gives (stats, errors, modules); each module writes its own
 * families through the writer (user/common/prom.h). Nothing here waits for a module's
 * lifecycle step: every number is read under the owners' short locks.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <microhttpd.h>

#include "agent.h"
#include "metrics.h"
#include "metrics_peers.h"
#include "process_metrics.h"
#include "user/common/log.h"
#include "user/common/prom.h"
#include "user/manager/manager.h"

struct bpftel_metrics {
	struct MHD_Daemon *daemon;
	struct bpftel_agent *agent;
	char addr[INET6_ADDRSTRLEN + 16];
	struct metrics_peers peers; /* libmicrohttpd's thread's */
};

static const char *js(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "";
}

static __u64 ju(json_t *o, const char *key)
{
	return (__u64)json_integer_value(json_object_get(o, key));
}

/* A counter family with one sample per module: field key of its modules entry. */
static void module_counter(struct bpftel_prom *w, json_t *mods, const char *name,
			   const char *help, const char *key)
{
	struct bpftel_prom_label l[1];
	json_t *m;
	size_t i;

	bpftel_prom_family(w, name, "counter", help);
	json_array_foreach (mods, i, m) {
		l[0] = (struct bpftel_prom_label){"module", js(m, "name")};
		bpftel_prom_sample_u64(w, "", l, 1, ju(m, key));
	}
}

static void modules(struct bpftel_prom *w, json_t *mods)
{
	struct bpftel_prom_label l[1];
	json_t *m;
	size_t i;

	bpftel_prom_family(w, "bpftel_module_up", "gauge",
			   "1 if the module is running (throttled included).");
	json_array_foreach (mods, i, m) {
		l[0] = (struct bpftel_prom_label){"module", js(m, "name")};
		bpftel_prom_sample_u64(w, "", l, 1,
				       !strcmp(js(m, "state"), "running") ||
					       !strcmp(js(m, "state"), "throttled"));
	}
	bpftel_prom_family(w, "bpftel_module_throttled", "gauge",
			   "1 while the module sheds load to keep within its max_cpu_percent.");
	json_array_foreach (mods, i, m) {
		l[0] = (struct bpftel_prom_label){"module", js(m, "name")};
		bpftel_prom_sample_u64(w, "", l, 1, json_is_object(json_object_get(m, "throttled")));
	}
	module_counter(w, mods, "bpftel_module_throttle_episodes_total",
		       "Times the module went over its max_cpu_percent and shed load.",
		       "throttle_episodes");
	module_counter(w, mods, "bpftel_module_restarts_total",
		       "Times the module was started again after a stop.", "restarts");
	module_counter(w, mods, "bpftel_module_start_failures_total",
		       "Starts of the module that failed (the others kept running).",
		       "start_failures");
}

/* A family with one sample per program: field key of its stats entry (scaled). */
static void program_family(struct bpftel_prom *w, json_t *progs, const char *name,
			   const char *type, const char *help, const char *key, double scale)
{
	struct bpftel_prom_label l[2];
	json_t *p, *v;
	size_t i;

	bpftel_prom_family(w, name, type, help);
	json_array_foreach (progs, i, p) {
		v = json_object_get(p, key);
		if (!json_is_number(v))
			continue; /* unknown */
		l[0] = (struct bpftel_prom_label){"module", js(p, "component")};
		l[1] = (struct bpftel_prom_label){"program", js(p, "name")};
		if (json_is_integer(v) && scale == 1)
			bpftel_prom_sample_u64(w, "", l, 2, (__u64)json_integer_value(v));
		else
			bpftel_prom_sample(w, "", l, 2, json_number_value(v) * scale);
	}
}

/*
 * Run counts are estimated with run_stats = sampled (the default), and not counted at all
 * with off (a program loaded since reads 0, one loaded before keeps what was counted):
 * the HELP says which, and bpftel_run_stats_mode and _on say what is in force, so that
 * a dashboard does not take zeros for a program that costs nothing.
 */
static void programs(struct bpftel_prom *w, json_t *progs, json_t *agent)
{
	json_t *rs = json_object_get(agent, "run_stats_detail");
	const char *mode = js(agent, "run_stats"), *err = js(rs, "error");
	bool sampled = !strcmp(mode, "sampled"), off = !strcmp(mode, "off");
	struct bpftel_prom_label l[2] = {{"mode", mode}, {"error", err ? err : ""}};

	bpftel_prom_family(w, "bpftel_run_stats_mode", "gauge",
			   "1 for the run-stats mode in force (run_stats: always, sampled, off; "
			   "always refused falls back to off, sampled keeps trying each cycle; "
			   "error: the errno's name of the last refusal, \"\" once stats went on).");
	/* Neither when the stats could not be read (out of memory): no mode made up. */
	if (rs)
		bpftel_prom_sample_u64(w, "", l, 2, 1);
	bpftel_prom_family(w, "bpftel_run_stats_on", "gauge",
			   "1 while the agent holds BPF_ENABLE_STATS (always; sampled: inside a "
			   "window), else 0: run counts move only then.");
	if (rs)
		bpftel_prom_sample_u64(w, "", NULL, 0,
				       json_is_true(json_object_get(rs, "stats_on")));
	program_family(w, progs, "bpftel_ebpf_program_runs_total", "counter",
		       sampled ? "Runs of the eBPF program since it was loaded, estimated from "
				 "sampled BPF_ENABLE_STATS windows (run_stats = sampled)."
		       : off ? "Runs of the eBPF program counted while run stats were on: none "
			       "with run_stats = off (0 for a program loaded since; see "
			       "bpftel_run_stats_mode)."
			     : "Runs of the eBPF program since it was loaded (BPF_ENABLE_STATS).",
		       "run_cnt", 1);
	program_family(w, progs, "bpftel_ebpf_program_run_seconds_total", "counter",
		       sampled ? "Time spent running the eBPF program since it was loaded, "
				 "estimated from sampled BPF_ENABLE_STATS windows."
		       : off ? "Time spent running the eBPF program, counted while run stats were "
			       "on: none with run_stats = off."
			     : "Time spent running the eBPF program since it was loaded.",
		       "run_time_ns", 1e-9);
	program_family(w, progs, "bpftel_ebpf_program_overhead_seconds_total", "counter",
		       sampled ? "What the eBPF program cost the processes it ran in: run time plus, "
				 "for uprobe programs, runs x the uprobe or uretprobe trap cost "
				 "calibrated at start; estimated from sampled windows."
		       : off ? "What the eBPF program cost the processes it ran in, from its runs "
			       "and run time counted while run stats were on: none with "
			       "run_stats = off, whatever it costs."
			     : "What the eBPF program cost the processes it ran in: run time plus, "
			       "for uprobe programs, runs x the uprobe or uretprobe trap cost "
			       "calibrated at start.",
		       "overhead_seconds", 1);
	program_family(w, progs, "bpftel_run_stats_sampled_fraction", "gauge",
		       "Share of the program's life its run counts were measured over (1: exact, "
		       "run_stats = always; below 1: the rest is estimated).",
		       "sampled_fraction", 1);
}

/* The calibration at start; absent when it failed. */
static void traps(struct bpftel_prom *w, json_t *tc)
{
	static const char *const kinds[] = {"uprobe", "uretprobe", "pair"};
	char key[32];
	size_t i;

	bpftel_prom_family(w, "bpftel_uprobe_trap_seconds", "gauge",
			   "What a call costs the probed process on this host with a uprobe, a "
			   "uretprobe, or both on its function (pair), empty programs included "
			   "(calibrated at start).");
	for (i = 0; i < 3 && json_is_true(json_object_get(tc, "known")); i++) {
		snprintf(key, sizeof(key), "%s_ns", kinds[i]);
		bpftel_prom_sample(w, "", &(struct bpftel_prom_label){"kind", kinds[i]}, 1,
				   json_number_value(json_object_get(tc, key)) / 1e9);
	}
}

static void maps(struct bpftel_prom *w, json_t *arr)
{
	struct bpftel_prom_label l[2];
	json_t *m;
	size_t i;

	bpftel_prom_family(w, "bpftel_ebpf_map_entries", "gauge",
			   "Entries in the map (hash maps; arrays are full by construction).");
	json_array_foreach (arr, i, m) {
		if (!json_is_integer(json_object_get(m, "entries")))
			continue; /* ring buffers: no entries */
		l[0] = (struct bpftel_prom_label){"module", js(m, "module")};
		l[1] = (struct bpftel_prom_label){"map", js(m, "map")};
		bpftel_prom_sample_u64(w, "", l, 2, ju(m, "entries"));
	}
	bpftel_prom_family(w, "bpftel_ebpf_map_capacity", "gauge",
			   "Maximum entries of the map (bytes for ring buffers).");
	json_array_foreach (arr, i, m) {
		l[0] = (struct bpftel_prom_label){"module", js(m, "module")};
		l[1] = (struct bpftel_prom_label){"map", js(m, "map")};
		bpftel_prom_sample_u64(w, "", l, 2, ju(m, "capacity"));
	}
	bpftel_prom_family(w, "bpftel_ebpf_map_memory_bytes", "gauge",
			   "Kernel memory the map holds (its memlock charge), bytes: not in the "
			   "agent's resident memory.");
	json_array_foreach (arr, i, m) {
		if (!json_is_integer(json_object_get(m, "memory_bytes")))
			continue;
		l[0] = (struct bpftel_prom_label){"module", js(m, "module")};
		l[1] = (struct bpftel_prom_label){"map", js(m, "map")};
		bpftel_prom_sample_u64(w, "", l, 2, ju(m, "memory_bytes"));
	}
}

static void errors(struct bpftel_prom *w, json_t *errs, json_t *lost)
{
	static const char *const tables[] = {"map_errors", "helper_errors"};
	struct bpftel_prom_label l[5];
	json_t *e;
	size_t i;

	/* Errors of a kind the telemetry maps had no room for: in neither family below, so
	 * that an alert on those does not stay quiet while errors are dropped. */
	bpftel_prom_family(w, "bpftel_ebpf_errors_lost_total", "counter",
			   "Failed map operations (table=\"map_errors\") and helper calls "
			   "(\"helper_errors\") not counted by kind: the telemetry maps were full.");
	/* None when the query failed (out of memory): a 0 would read as a reset, and the
	 * next scrape's count as that many new errors. */
	for (i = 0; i < 2; i++)
		if (json_is_integer(json_object_get(lost, tables[i])))
			bpftel_prom_sample_u64(w, "",
					       &(struct bpftel_prom_label){"table", tables[i]}, 1,
					       ju(lost, tables[i]));

	bpftel_prom_family(w, "bpftel_ebpf_map_errors_total", "counter",
			   "Failed map operations in the agent's eBPF code, by errno.");
	json_array_foreach (errs, i, e) {
		if (strcmp(js(e, "kind"), "map"))
			continue;
		l[0] = (struct bpftel_prom_label){"module", js(e, "module")};
		l[1] = (struct bpftel_prom_label){"program", js(e, "program")};
		l[2] = (struct bpftel_prom_label){"map", js(e, "map")};
		l[3] = (struct bpftel_prom_label){"op", js(e, "op")};
		l[4] = (struct bpftel_prom_label){"errno", js(e, "errno_name")};
		bpftel_prom_sample_u64(w, "", l, 5, ju(e, "count"));
	}
	bpftel_prom_family(w, "bpftel_ebpf_helper_errors_total", "counter",
			   "Failed helper calls in the agent's eBPF code, by errno.");
	json_array_foreach (errs, i, e) {
		if (strcmp(js(e, "kind"), "helper"))
			continue;
		l[0] = (struct bpftel_prom_label){"module", js(e, "module")};
		l[1] = (struct bpftel_prom_label){"program", js(e, "program")};
		l[2] = (struct bpftel_prom_label){"helper", js(e, "helper")};
		l[3] = (struct bpftel_prom_label){"errno", js(e, "errno_name")};
		bpftel_prom_sample_u64(w, "", l, 4, ju(e, "count"));
	}
}

static void losses(struct bpftel_prom *w, json_t *arr)
{
	static const char *const stages[] = {"kernel", "queue_full", "too_big", "parse"};
	struct bpftel_prom_label l[2];
	json_t *e;
	size_t i, s;

	bpftel_prom_family(w, "bpftel_events_lost_total", "counter",
			   "Events lost, by module and stage: kernel (ring buffer full), "
			   "queue_full, too_big, parse (malformed).");
	json_array_foreach (arr, i, e) {
		for (s = 0; s < sizeof(stages) / sizeof(stages[0]); s++) {
			l[0] = (struct bpftel_prom_label){"module", js(e, "module")};
			l[1] = (struct bpftel_prom_label){"stage", stages[s]};
			bpftel_prom_sample_u64(w, "", l, 2, ju(e, stages[s]));
		}
	}
}

/* Each module's own families, through its metrics op. */
static void module_families(struct bpftel_agent *agent, struct bpftel_prom *w)
{
	struct bpftel_module *mods[16];
	const struct bpftel_module_ops *ops;
	size_t n, i;

	n = bpftel_manager__modules(agent->mgr, mods, 16);
	for (i = 0; i < n; i++) {
		ops = bpftel_module__ops(mods[i]);
		if (ops->metrics)
			ops->metrics(mods[i], w);
	}
}

char *bpftel_metrics_render(struct bpftel_agent *agent, size_t *len)
{
	json_t *stats, *errs, *mods;
	struct bpftel_prom *w;
	char *buf = NULL;
	FILE *f;

	/* The agent's own families come from the same answers as the control socket's;
	 * the modules' stats are theirs to write (module_families), not read here. */
	stats = bpftel_agent_stats(agent, false);
	errs = bpftel_agent_query(agent, "errors", NULL);
	mods = bpftel_agent_query(agent, "modules", NULL);
	f = open_memstream(&buf, len);
	w = f ? bpftel_prom_new(f) : NULL;
	if (w) {
		bpftel_prom_family(w, "bpftel_build_info", "gauge",
				   "Always 1; labels say what is running.");
		bpftel_prom_sample_u64(w, "",
				       &(struct bpftel_prom_label){"version", BPFTEL_VERSION}, 1,
				       1);
		modules(w, json_object_get(mods, "modules"));
		programs(w, json_object_get(stats, "programs"), json_object_get(stats, "agent"));
		traps(w, json_object_get(json_object_get(stats, "agent"), "trap_cost"));
		maps(w, json_object_get(stats, "maps"));
		errors(w, json_object_get(errs, "errors"), json_object_get(errs, "telemetry_lost"));
		losses(w, json_object_get(stats, "losses"));
		bpftel_process_metrics(w);
		bpftel_prom_scalar(w, "bpftel_metrics_connections_refused_total", "counter",
				   "Connections to this endpoint closed at once: their owner (a "
				   "local client's uid, else its address) held 8 of the 32 already.",
				   __atomic_load_n(&agent->metrics_refused, __ATOMIC_RELAXED));
		bpftel_prom_scalar(w, "bpftel_metrics_connections", "gauge",
				   "Connections to this endpoint open now (of 32), this one's "
				   "included; the refused not counted.",
				   __atomic_load_n(&agent->metrics_open, __ATOMIC_RELAXED));
		module_families(agent, w);
		bpftel_prom_free(w);
	}
	if (f && fclose(f)) {
		free(buf);
		buf = NULL;
	}
	json_decref(stats);
	json_decref(errs);
	json_decref(mods);
	return w ? buf : (free(buf), NULL);
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned int code, const char *type,
			     char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	ret = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_size, void **req_cls)
{
	static const char index_page[] = "bpftel-agent: metrics at /metrics\n";
	static const char not_found[] = "not found: try /metrics\n";
	static const char bad_method[] = "only GET\n";
	struct bpftel_metrics *m = cls;
	char *body;
	size_t len;

	(void)version;
	(void)upload_data;
	if (!*req_cls) { /* first call: headers only */
		*req_cls = m;
		return MHD_YES;
	}
	if (*upload_size) {
		*upload_size = 0; /* a body is ignored (and rejected below) */
		return MHD_YES;
	}
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", (char *)bad_method,
			     sizeof(bad_method) - 1, MHD_RESPMEM_PERSISTENT);
	if (!strcmp(url, "/"))
		return reply(conn, MHD_HTTP_OK, "text/plain", (char *)index_page,
			     sizeof(index_page) - 1, MHD_RESPMEM_PERSISTENT);
	if (strcmp(url, "/metrics"))
		return reply(conn, MHD_HTTP_NOT_FOUND, "text/plain", (char *)not_found,
			     sizeof(not_found) - 1, MHD_RESPMEM_PERSISTENT);
	body = bpftel_metrics_render(m->agent, &len);
	if (!body)
		return MHD_NO;
	return reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body, len,
		     MHD_RESPMEM_MUST_FREE);
}

/*
 * A connection begins or ends: each owner holds a share of the connections
 * (metrics_peers.h). One past it is shut down at once, before anything is read from
 * it: libmicrohttpd sees it end, and closes it. The slot taken, index + 1, is the
 * connection's context (METRICS_CONNECTIONS + 1: one whose owner could not be told).
 */
static void notify(void *cls, struct MHD_Connection *conn, void **ctx,
		   enum MHD_ConnectionNotificationCode what)
{
	struct bpftel_metrics *m = cls;
	const union MHD_ConnectionInfo *info;
	struct metrics_peer who;
	int idx;

	if (what == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (*ctx)
			__atomic_sub_fetch(&m->agent->metrics_open, 1, __ATOMIC_RELAXED);
		metrics_shares_give(&m->peers, (int)(intptr_t)*ctx - 1);
		*ctx = NULL;
		return;
	}
	info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!info || metrics_peer_of(&m->peers, info->connect_fd, &who))
		idx = METRICS_CONNECTIONS; /* not told: not shared out */
	else
		idx = metrics_shares_take(&m->peers, &who);
	if (idx >= 0) {
		*ctx = (void *)(intptr_t)(idx + 1);
		__atomic_add_fetch(&m->agent->metrics_open, 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_add_fetch(&m->agent->metrics_refused, 1, __ATOMIC_RELAXED);
	shutdown(info->connect_fd, SHUT_RDWR);
}

/* The address as bound: with the port the kernel chose when asked for 0. */
static void set_addr(struct bpftel_metrics *m, const struct sockaddr_storage *ss)
{
	const union MHD_DaemonInfo *info =
		MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_BIND_PORT);
	char host[INET6_ADDRSTRLEN];
	unsigned int port = info ? info->port : 0;

	if (ss->ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, host,
			  sizeof(host));
		snprintf(m->addr, sizeof(m->addr), "[%s]:%u", host, port);
	} else {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, host, sizeof(host));
		snprintf(m->addr, sizeof(m->addr), "%s:%u", host, port);
	}
}

int bpftel_metrics__start(struct bpftel_agent *agent, const char *addr, struct bpftel_metrics **out)
{
	struct sockaddr_storage ss;
	struct bpftel_metrics *m;
	socklen_t sslen;
	int err;

	err = bpftel_metrics_parse_addr(addr, &ss, &sslen);
	if (err)
		return err;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->agent = agent;
	metrics_peers_init(&m->peers);
	errno = 0;
	/* Its own thread; bounded connections and a timeout: a client that opens a
	 * connection and sends nothing costs one slot for 10 s, not the service; and a
	 * share of them per owner (notify): one that keeps its connections alive holds a
	 * quarter at most. */
	m->daemon = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
			(ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
		0, NULL, NULL, handle, m, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
		MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_CONNECTION_LIMIT, METRICS_CONNECTIONS,
		MHD_OPTION_NOTIFY_CONNECTION, notify, m,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024, MHD_OPTION_END);
	if (!m->daemon) {
		/* What bind() or listen() said (libmicrohttpd keeps it), or a failure of its
		 * own: not always "in use". */
		err = errno ? -errno : -EIO;
		metrics_peers_fini(&m->peers);
		free(m);
		return err;
	}
	set_addr(m, &ss);
	*out = m;
	return 0;
}

const char *bpftel_metrics__addr(const struct bpftel_metrics *m)
{
	return m ? m->addr : "";
}

void bpftel_metrics__stop(struct bpftel_metrics *m)
{
	if (!m)
		return;
	MHD_stop_daemon(m->daemon);
	metrics_peers_fini(&m->peers);
	free(m);
}
