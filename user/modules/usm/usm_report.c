// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What the USM module reports: the `http` command (endpoints and counters as JSON) and
 * its Prometheus families, from the endpoint table (endpoints.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "usm.h"
#include "user/common/ctl.h"
#include "user/common/prom.h"
#include "user/manager/manager.h"

static json_t *row_json(const struct usm_endpoint_row *r)
{
	json_t *buckets = json_array();
	const struct usm_hist *h = &r->latency;
	json_t *pid;
	int b;

	for (b = 0; b < USM_HIST_BUCKETS; b++) {
		if (h->buckets[b])
			json_array_append_new(buckets,
					      json_pack("{s:f, s:I}", "le_seconds",
							b == USM_HIST_BUCKETS - 1
								? -1.0 /* +Inf */
								: usm_hist_upper_ns(b) / 1e9,
							"count", (json_int_t)h->buckets[b]));
	}
	/* pid: a number, or null for packets (no process) and for exited processes. */
	pid = r->pid == USM_PID_NONE || r->pid == USM_PID_EXITED ? json_null()
								 : json_integer(r->pid);
	return json_pack("{s:o, s:s, s:s, s:o, s:o, s:i, s:I, s:f, s:f, s:f, s:f, s:o}", "pid", pid,
			 "process",
			 r->pid == USM_PID_NONE	    ? "(packets)"
			 : r->pid == USM_PID_EXITED ? "(exited)"
						    : "live",
			 "protocol", r->proto == USM_PROTO_HTTPS ? "https" : "http", "method",
			 bpftel_json_str(r->method), "path", bpftel_json_str(r->path), "status",
			 r->status, "count",
			 (json_int_t)h->count, "latency_sum_seconds", h->sum_ns / 1e9,
			 "p50_seconds", usm_hist_quantile_ns(h, 0.5) / 1e9, "p99_seconds",
			 usm_hist_quantile_ns(h, 0.99) / 1e9, "mean_seconds",
			 h->count ? h->sum_ns / 1e9 / h->count : 0.0, "buckets", buckets);
}

json_t *usm_report(struct bpftel_module *m, json_t *req)
{
	struct bpftel_usm *usm = bpftel_module__priv(m);
	struct bpftel_usm_counters c;
	struct usm_endpoint_row *rows;
	json_t *arr = json_array(), *cnt = json_object();
	size_t n, i;

	(void)req;
	n = bpftel_usm__rows(usm, &rows);
	for (i = 0; i < n; i++)
		json_array_append_new(arr, row_json(&rows[i]));
	free(rows);
	bpftel_usm__counters(usm, &c);
	for (i = 0; i < USM_CNT__COUNT; i++)
		json_object_set_new(cnt, bpftel_usm_counter_name(i), json_integer(c.kernel[i]));
	json_object_set_new(cnt, "unparsed", json_integer(c.unparsed));
	json_object_set_new(cnt, "malformed", json_integer(c.malformed));
	json_object_set_new(cnt, "pairing",
			    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "requests",
				      (json_int_t)c.endpoints.requests, "responses",
				      (json_int_t)c.endpoints.responses, "paired",
				      (json_int_t)c.endpoints.paired, "unanswered",
				      (json_int_t)c.endpoints.unanswered, "orphan_responses",
				      (json_int_t)c.endpoints.orphan_responses, "evicted",
				      (json_int_t)c.endpoints.evicted, "path_overflow",
				      (json_int_t)c.endpoints.path_overflow, "row_overflow",
				      (json_int_t)c.endpoints.row_overflow, "pending",
				      (json_int_t)c.endpoints.pending));
	return json_pack("{s:s, s:o, s:o}", "state",
			 bpftel_module_state_name(bpftel_module__state(m)), "endpoints", arr,
			 "counters", cnt);
}

/* Latency buckets exported for bpftel_http_request_duration_seconds (seconds). */
static const double http_le[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
				 0.1,	 0.25,	0.5,	1,     2.5,  5,	    10};
#define NLE (sizeof(http_le) / sizeof(http_le[0]))

/* One series of the exposition: rows of every process with these labels, summed. */
struct series {
	const struct usm_endpoint_row *row; /* the first: its labels */
	__u64 count;
	double sum;
	__u64 le[NLE + 1];
};

static bool same_labels(const struct usm_endpoint_row *a, const struct usm_endpoint_row *b)
{
	return a->proto == b->proto && a->status == b->status && !strcmp(a->method, b->method) &&
	       !strcmp(a->path, b->path);
}

/* Each fine bucket goes to the first exported bound that holds it whole. */
static void add_row(struct series *s, const struct usm_endpoint_row *r)
{
	const struct usm_hist *h = &r->latency;
	double ub;
	size_t b, l;

	s->count += h->count;
	s->sum += h->sum_ns / 1e9;
	for (b = 0; b < USM_HIST_BUCKETS; b++) {
		if (!h->buckets[b])
			continue;
		ub = b == USM_HIST_BUCKETS - 1 ? -1.0 : usm_hist_upper_ns(b) / 1e9;
		for (l = 0; l < NLE && (ub < 0 || ub > http_le[l]); l++)
			;
		s->le[l] += h->buckets[b];
	}
}

static void labels_of(const struct usm_endpoint_row *r, struct bpftel_prom_label *l, char *status)
{
	snprintf(status, 8, "%d", r->status);
	l[0] = (struct bpftel_prom_label){"protocol", r->proto == USM_PROTO_HTTPS ? "https" : "http"};
	l[1] = (struct bpftel_prom_label){"method", r->method};
	l[2] = (struct bpftel_prom_label){"path", r->path};
	l[3] = (struct bpftel_prom_label){"status", status};
}

/* HTTP endpoints summed over processes (bounded by the endpoint table): counters that
 * only grow. */
void usm_metrics(struct bpftel_module *m, struct bpftel_prom *w)
{
	struct usm_endpoint_row *rows;
	struct series *ser;
	struct bpftel_prom_label l[5];
	char status[8];
	size_t n, ns = 0, i, j;

	n = bpftel_usm__rows(bpftel_module__priv(m), &rows);
	ser = calloc(n + 1, sizeof(*ser));
	for (i = 0; ser && i < n; i++) {
		for (j = 0; j < ns && !same_labels(ser[j].row, &rows[i]); j++)
			;
		if (j == ns)
			ser[ns++].row = &rows[i];
		add_row(&ser[j], &rows[i]);
	}
	bpftel_prom_family(w, "bpftel_http_requests_total", "counter",
			   "HTTP requests answered, by protocol, method, normalized path and "
			   "status.");
	for (j = 0; j < ns; j++) {
		labels_of(ser[j].row, l, status);
		bpftel_prom_sample_u64(w, "", l, 4, ser[j].count);
	}
	bpftel_prom_family(w, "bpftel_http_request_duration_seconds", "histogram",
			   "First byte of request to first byte of response, as the process sees "
			   "it.");
	for (j = 0; j < ns; j++) {
		labels_of(ser[j].row, l, status);
		bpftel_prom_histogram(w, l, 4, http_le, ser[j].le, NLE, ser[j].sum);
	}
	free(ser);
	free(rows);
}
