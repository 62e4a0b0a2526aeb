// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The `http` control command: the USM module's endpoints and counters as JSON. */
#include <stdlib.h>
#include <jansson.h>

#include "agent.h"
#include "user/manager/manager.h"
#include "user/modules/usm/usm.h"

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
	return json_pack("{s:o, s:s, s:s, s:s, s:s, s:i, s:I, s:f, s:f, s:f, s:f, s:o}", "pid", pid,
			 "process",
			 r->pid == USM_PID_NONE	    ? "(packets)"
			 : r->pid == USM_PID_EXITED ? "(exited)"
						    : "live",
			 "protocol", r->proto == USM_PROTO_HTTPS ? "https" : "http", "method",
			 r->method, "path", r->path, "status", r->status, "count",
			 (json_int_t)h->count, "latency_sum_seconds", h->sum_ns / 1e9,
			 "p50_seconds", usm_hist_quantile_ns(h, 0.5) / 1e9, "p99_seconds",
			 usm_hist_quantile_ns(h, 0.99) / 1e9, "mean_seconds",
			 h->count ? h->sum_ns / 1e9 / h->count : 0.0, "buckets", buckets);
}

json_t *bpftel_agent_http_json(struct bpftel_agent *agent)
{
	struct bpftel_usm_counters c;
	struct usm_endpoint_row *rows;
	json_t *arr = json_array(), *cnt = json_object();
	size_t n, i;

	if (!agent->usm)
		return json_pack("{s:s, s:o}", "state", "absent", "endpoints", arr);
	n = bpftel_usm__rows(agent->usm, &rows);
	for (i = 0; i < n; i++)
		json_array_append_new(arr, row_json(&rows[i]));
	free(rows);
	bpftel_usm__counters(agent->usm, &c);
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
	return json_pack(
		"{s:s, s:o, s:o}", "state",
		bpftel_module_state_name(bpftel_module__state(bpftel_usm__module(agent->usm))),
		"endpoints", arr, "counters", cnt);
}
