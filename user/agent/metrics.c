// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Prometheus endpoint: GET /metrics in the text exposition format (0.0.4), served by
 * libmicrohttpd on its own thread. The numbers come from the same JSON documents the
 * control socket answers (stats, errors, modules, gpu, http), produced under the
 * agent's lock, so the two views never disagree.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <microhttpd.h>

#include "agent.h"
#include "metrics.h"
#include "user/common/log.h"

struct bpftel_metrics {
	struct MHD_Daemon *daemon;
	struct bpftel_agent *agent;
	char addr[INET6_ADDRSTRLEN + 16];
};

/* Latency buckets exported for bpftel_http_request_duration_seconds (seconds). */
static const double http_le[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
				 0.1,	 0.25,	0.5,	1,     2.5,  5,	    10};
#define NLE (sizeof(http_le) / sizeof(http_le[0]))

/* Label values: backslash, double quote and newline escaped (exposition format). */
static void put_label(FILE *f, const char *name, const char *val, bool first)
{
	fprintf(f, "%s%s=\"", first ? "" : ",", name);
	for (; val && *val; val++) {
		if (*val == '\\' || *val == '"')
			fprintf(f, "\\%c", *val);
		else if (*val == '\n')
			fputs("\\n", f);
		else
			fputc(*val, f);
	}
	fputc('"', f);
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static const char *js(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "";
}

static double jnum(json_t *o, const char *key)
{
	return json_number_value(json_object_get(o, key));
}

/* A counter family with one sample per module: field key of its modules entry. */
static void module_counter(FILE *f, json_t *mods, const char *name, const char *help,
			   const char *key)
{
	json_t *m;
	size_t i;

	family(f, name, "counter", help);
	json_array_foreach (mods, i, m) {
		fprintf(f, "%s{", name);
		put_label(f, "module", js(m, "name"), true);
		fprintf(f, "} %.0f\n", jnum(m, key));
	}
}

static void modules(FILE *f, json_t *mods)
{
	json_t *m;
	size_t i;

	family(f, "bpftel_module_up", "gauge", "1 if the module is running.");
	json_array_foreach (mods, i, m) {
		fputs("bpftel_module_up{", f);
		put_label(f, "module", js(m, "name"), true);
		fprintf(f, "} %d\n", !strcmp(js(m, "state"), "running"));
	}
	module_counter(f, mods, "bpftel_module_restarts_total",
		       "Times the module was started again after a stop.", "restarts");
	module_counter(f, mods, "bpftel_module_start_failures_total",
		       "Starts of the module that failed (the others kept running).",
		       "start_failures");
}

static void programs(FILE *f, json_t *progs)
{
	json_t *p;
	size_t i;

	family(f, "bpftel_ebpf_program_runs_total", "counter",
	       "Runs of the eBPF program since it was loaded (BPF_ENABLE_STATS).");
	json_array_foreach (progs, i, p) {
		fputs("bpftel_ebpf_program_runs_total{", f);
		put_label(f, "module", js(p, "component"), true);
		put_label(f, "program", js(p, "name"), false);
		fprintf(f, "} %.0f\n", jnum(p, "run_cnt"));
	}
	family(f, "bpftel_ebpf_program_run_seconds_total", "counter",
	       "Time spent running the eBPF program since it was loaded.");
	json_array_foreach (progs, i, p) {
		fputs("bpftel_ebpf_program_run_seconds_total{", f);
		put_label(f, "module", js(p, "component"), true);
		put_label(f, "program", js(p, "name"), false);
		fprintf(f, "} %.9f\n", jnum(p, "run_time_ns") / 1e9);
	}
}

static void maps(FILE *f, json_t *arr)
{
	json_t *m;
	size_t i;

	family(f, "bpftel_ebpf_map_entries", "gauge",
	       "Entries in the map (hash maps; arrays are full by construction).");
	json_array_foreach (arr, i, m) {
		if (!json_is_integer(json_object_get(m, "entries")))
			continue; /* ring buffers: no entries */
		fputs("bpftel_ebpf_map_entries{", f);
		put_label(f, "module", js(m, "module"), true);
		put_label(f, "map", js(m, "map"), false);
		fprintf(f, "} %.0f\n", jnum(m, "entries"));
	}
	family(f, "bpftel_ebpf_map_capacity", "gauge",
	       "Maximum entries of the map (bytes for ring buffers).");
	json_array_foreach (arr, i, m) {
		fputs("bpftel_ebpf_map_capacity{", f);
		put_label(f, "module", js(m, "module"), true);
		put_label(f, "map", js(m, "map"), false);
		fprintf(f, "} %.0f\n", jnum(m, "capacity"));
	}
}

static void errors(FILE *f, json_t *errs)
{
	json_t *e;
	size_t i;

	family(f, "bpftel_ebpf_map_errors_total", "counter",
	       "Failed map operations in the agent's eBPF code, by errno.");
	json_array_foreach (errs, i, e) {
		if (strcmp(js(e, "kind"), "map"))
			continue;
		fputs("bpftel_ebpf_map_errors_total{", f);
		put_label(f, "module", js(e, "module"), true);
		put_label(f, "program", js(e, "program"), false);
		put_label(f, "map", js(e, "map"), false);
		put_label(f, "op", js(e, "op"), false);
		put_label(f, "errno", js(e, "errno_name"), false);
		fprintf(f, "} %.0f\n", jnum(e, "count"));
	}
	family(f, "bpftel_ebpf_helper_errors_total", "counter",
	       "Failed helper calls in the agent's eBPF code, by errno.");
	json_array_foreach (errs, i, e) {
		if (strcmp(js(e, "kind"), "helper"))
			continue;
		fputs("bpftel_ebpf_helper_errors_total{", f);
		put_label(f, "module", js(e, "module"), true);
		put_label(f, "program", js(e, "program"), false);
		put_label(f, "helper", js(e, "helper"), false);
		put_label(f, "errno", js(e, "errno_name"), false);
		fprintf(f, "} %.0f\n", jnum(e, "count"));
	}
}

static void losses(FILE *f, json_t *arr)
{
	static const char *const stages[] = {"kernel", "queue_full", "too_big", "parse"};
	json_t *l;
	size_t i, s;

	family(f, "bpftel_events_lost_total", "counter",
	       "Events lost, by module and stage: kernel (ring buffer full), queue_full, "
	       "too_big, parse (malformed).");
	json_array_foreach (arr, i, l) {
		for (s = 0; s < sizeof(stages) / sizeof(stages[0]); s++) {
			fputs("bpftel_events_lost_total{", f);
			put_label(f, "module", js(l, "module"), true);
			put_label(f, "stage", stages[s], false);
			fprintf(f, "} %.0f\n", jnum(l, stages[s]));
		}
	}
}

static void detected(FILE *f, json_t *det)
{
	const char *k;
	json_t *v;

	family(f, "bpftel_sharedlibs_detected_total", "counter",
	       "Processes seen opening a watched library, by libset.");
	json_object_foreach (det, k, v) {
		fputs("bpftel_sharedlibs_detected_total{", f);
		put_label(f, "libset", k, true);
		fprintf(f, "} %.0f\n", json_number_value(v));
	}
}

static void gpu_proc_labels(FILE *f, json_t *p)
{
	char pid[16];

	snprintf(pid, sizeof(pid), "%.0f", jnum(p, "pid"));
	put_label(f, "pid", pid, true);
	put_label(f, "comm", js(p, "comm"), false);
}

static void gpu(FILE *f, json_t *procs)
{
	const char *k;
	json_t *p, *v, *e;
	size_t i, j;

	family(f, "bpftel_gpu_kernel_launches_total", "counter",
	       "cudaLaunchKernel calls, per live process.");
	json_array_foreach (procs, i, p) {
		fputs("bpftel_gpu_kernel_launches_total{", f);
		gpu_proc_labels(f, p);
		fprintf(f, "} %.0f\n", jnum(p, "launches"));
	}
	family(f, "bpftel_gpu_threads_launched_total", "counter",
	       "Threads launched (grid x block), per live process.");
	json_array_foreach (procs, i, p) {
		fputs("bpftel_gpu_threads_launched_total{", f);
		gpu_proc_labels(f, p);
		fprintf(f, "} %.0f\n", jnum(p, "threads"));
	}
	family(f, "bpftel_gpu_memory_outstanding_bytes", "gauge",
	       "Device memory allocated with cudaMalloc and not freed, per live process.");
	json_array_foreach (procs, i, p) {
		fputs("bpftel_gpu_memory_outstanding_bytes{", f);
		gpu_proc_labels(f, p);
		fprintf(f, "} %.0f\n", jnum(json_object_get(p, "memory"), "outstanding_bytes"));
	}
	family(f, "bpftel_gpu_memory_peak_bytes", "gauge",
	       "Highest outstanding device memory, per live process.");
	json_array_foreach (procs, i, p) {
		fputs("bpftel_gpu_memory_peak_bytes{", f);
		gpu_proc_labels(f, p);
		fprintf(f, "} %.0f\n", jnum(json_object_get(p, "memory"), "peak_bytes"));
	}
	family(f, "bpftel_gpu_memcpy_bytes_total", "counter",
	       "Bytes copied by cudaMemcpy(Async), by direction, per live process.");
	json_array_foreach (procs, i, p) {
		json_object_foreach (json_object_get(p, "memcpy_bytes"), k, v) {
			fputs("bpftel_gpu_memcpy_bytes_total{", f);
			gpu_proc_labels(f, p);
			put_label(f, "direction", k, false);
			fprintf(f, "} %.0f\n", json_number_value(v));
		}
	}
	family(f, "bpftel_gpu_sync_wait_seconds_total", "counter",
	       "Time inside cudaStreamSynchronize and cudaDeviceSynchronize, per live process.");
	json_array_foreach (procs, i, p) {
		fputs("bpftel_gpu_sync_wait_seconds_total{", f);
		gpu_proc_labels(f, p);
		fprintf(f, "} %.9f\n", jnum(p, "sync_wait_seconds"));
	}
	family(f, "bpftel_gpu_cuda_errors_total", "counter",
	       "CUDA runtime calls that failed, by function and cudaError_t, per live process.");
	json_array_foreach (procs, i, p) {
		json_array_foreach (json_object_get(p, "errors"), j, e) {
			fputs("bpftel_gpu_cuda_errors_total{", f);
			gpu_proc_labels(f, p);
			put_label(f, "function", js(e, "function"), false);
			put_label(f, "error", js(e, "name")[0] ? js(e, "name") : "unknown", false);
			fprintf(f, "} %.0f\n", jnum(e, "count"));
		}
	}
}

/* HTTP endpoints summed over processes: counters that only grow. */
static void http(FILE *f, json_t *eps)
{
	json_t *agg = json_object(), *r, *a, *b;
	char key[512], status[8];
	const char *k;
	size_t i, j, l;

	json_array_foreach (eps, i, r) {
		snprintf(key, sizeof(key), "%s\x1f%s\x1f%s\x1f%.0f", js(r, "protocol"),
			 js(r, "method"), js(r, "path"), jnum(r, "status"));
		a = json_object_get(agg, key);
		if (!a) {
			a = json_pack("{s:o, s:f, s:f, s:o}", "row", json_incref(r), "count", 0.0,
				      "sum", 0.0, "le", json_array());
			for (l = 0; l <= NLE; l++)
				json_array_append_new(json_object_get(a, "le"), json_real(0));
			json_object_set_new(agg, key, a);
		}
		json_object_set_new(a, "count", json_real(jnum(a, "count") + jnum(r, "count")));
		json_object_set_new(a, "sum",
				    json_real(jnum(a, "sum") + jnum(r, "latency_sum_seconds")));
		/* Each fine bucket goes to the first exported bound that holds it whole. */
		json_array_foreach (json_object_get(r, "buckets"), j, b) {
			double ub = jnum(b, "le_seconds");

			for (l = 0; l < NLE && (ub < 0 || ub > http_le[l]); l++)
				;
			json_array_set_new(json_object_get(a, "le"), l,
					   json_real(json_number_value(json_array_get(
							     json_object_get(a, "le"), l)) +
						     jnum(b, "count")));
		}
	}
	family(f, "bpftel_http_requests_total", "counter",
	       "HTTP requests answered, by protocol, method, normalized path and status.");
	json_object_foreach (agg, k, a) {
		r = json_object_get(a, "row");
		snprintf(status, sizeof(status), "%.0f", jnum(r, "status"));
		fputs("bpftel_http_requests_total{", f);
		put_label(f, "protocol", js(r, "protocol"), true);
		put_label(f, "method", js(r, "method"), false);
		put_label(f, "path", js(r, "path"), false);
		put_label(f, "status", status, false);
		fprintf(f, "} %.0f\n", jnum(a, "count"));
	}
	family(f, "bpftel_http_request_duration_seconds", "histogram",
	       "First byte of request to first byte of response, as the process sees it.");
	json_object_foreach (agg, k, a) {
		double cum = 0;

		r = json_object_get(a, "row");
		snprintf(status, sizeof(status), "%.0f", jnum(r, "status"));
		for (l = 0; l <= NLE; l++) {
			char le[32];

			cum += json_number_value(json_array_get(json_object_get(a, "le"), l));
			if (l < NLE)
				snprintf(le, sizeof(le), "%g", http_le[l]);
			else
				snprintf(le, sizeof(le), "+Inf");
			fputs("bpftel_http_request_duration_seconds_bucket{", f);
			put_label(f, "protocol", js(r, "protocol"), true);
			put_label(f, "method", js(r, "method"), false);
			put_label(f, "path", js(r, "path"), false);
			put_label(f, "status", status, false);
			put_label(f, "le", le, false);
			fprintf(f, "} %.0f\n", cum);
		}
		fputs("bpftel_http_request_duration_seconds_sum{", f);
		put_label(f, "protocol", js(r, "protocol"), true);
		put_label(f, "method", js(r, "method"), false);
		put_label(f, "path", js(r, "path"), false);
		put_label(f, "status", status, false);
		fprintf(f, "} %.9f\n", jnum(a, "sum"));
		fputs("bpftel_http_request_duration_seconds_count{", f);
		put_label(f, "protocol", js(r, "protocol"), true);
		put_label(f, "method", js(r, "method"), false);
		put_label(f, "path", js(r, "path"), false);
		put_label(f, "status", status, false);
		fprintf(f, "} %.0f\n", jnum(a, "count"));
	}
	json_decref(agg);
}

char *bpftel_metrics_render(struct bpftel_agent *agent, size_t *len)
{
	json_t *stats, *errs, *mods, *g, *h;
	char *buf = NULL;
	FILE *f;

	pthread_mutex_lock(&agent->lock);
	stats = bpftel_agent_dispatch(agent, "stats", NULL);
	errs = bpftel_agent_dispatch(agent, "errors", NULL);
	mods = bpftel_agent_dispatch(agent, "modules", NULL);
	g = bpftel_agent_dispatch(agent, "gpu", NULL);
	h = bpftel_agent_dispatch(agent, "http", NULL);
	pthread_mutex_unlock(&agent->lock);

	f = open_memstream(&buf, len);
	if (f) {
		family(f, "bpftel_build_info", "gauge", "Always 1; labels say what is running.");
		fprintf(f, "bpftel_build_info{version=\"%s\"} 1\n", BPFTEL_VERSION);
		modules(f, json_object_get(mods, "modules"));
		programs(f, json_object_get(stats, "programs"));
		maps(f, json_object_get(stats, "maps"));
		errors(f, json_object_get(errs, "errors"));
		losses(f, json_object_get(stats, "losses"));
		detected(f, json_object_get(json_object_get(stats, "events"), "detected"));
		gpu(f, json_object_get(g, "processes"));
		http(f, json_object_get(h, "endpoints"));
		if (fclose(f)) {
			free(buf);
			buf = NULL;
		}
	}
	json_decref(stats);
	json_decref(errs);
	json_decref(mods);
	json_decref(g);
	json_decref(h);
	return buf;
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
	/* Its own thread; bounded connections and a timeout: a client that opens a
	 * connection and sends nothing costs one slot for 10 s, not the service. */
	m->daemon = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
			(ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
		0, NULL, NULL, handle, m, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
		MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_CONNECTION_LIMIT, 32u,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024, MHD_OPTION_END);
	if (!m->daemon) {
		free(m);
		return -EADDRINUSE;
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
	free(m);
}
