// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What the USM module reports: the `http` command (endpoint rows, with their process,
 * side, connection and container, and every counter) and its Prometheus families.
 *
 * /metrics follows the OpenTelemetry HTTP semantic conventions mapped to Prometheus:
 * bpftel_http_server_request_duration_seconds and ..._client_..., histograms labelled
 * http_request_method, http_route, http_response_status_code, network_protocol_version
 * (and container_id with `metrics_labels = container`), summed over processes; gRPC
 * calls in the RPC families instead. The series are the module's, counted as responses
 * pair and never lowered (series.h); families.c writes them.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "usm.h"
#include "bpf/fair_share_defs.h"
#include "bpf/usm.h"
#include "fair_share.h"
#include "families.h"
#include "user/manager/subuid.h"
#include "user/common/ctl.h"
#include "user/common/prom.h"
#include "user/manager/manager.h"

static const char *const side_names[USM_SIDE__COUNT] = {
	[USM_SIDE_SERVER] = "server",
	[USM_SIDE_CLIENT] = "client",
	[USM_SIDE_UNKNOWN] = "unknown",
};

/* "192.0.2.1:443", "[2001:db8::1]:443", or NULL when unknown. */
static json_t *addr_json(uint8_t family, const uint8_t *addr, uint16_t port)
{
	char ip[INET6_ADDRSTRLEN], buf[INET6_ADDRSTRLEN + 8];

	if (family != 4 && family != 6)
		return json_null();
	inet_ntop(family == 4 ? AF_INET : AF_INET6, addr, ip, sizeof(ip));
	snprintf(buf, sizeof(buf), family == 4 ? "%s:%u" : "[%s]:%u", ip, port);
	return json_string(buf);
}

static json_t *buckets_json(const struct usm_hist *h)
{
	json_t *buckets = json_array();
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
	return buckets;
}

static const char *process_kind(uint32_t pid)
{
	switch (pid) {
	case USM_PID_NONE:
		return "(unattributed)";
	case USM_PID_EXITED:
		return "(exited)";
	case USM_PID_OVERFLOW:
		return "(overflow)";
	}
	return "live";
}

/* The process's name, cgroup and container, where known. */
static void add_process(struct bpftel_usm *usm, json_t *o, uint32_t pid)
{
	struct usm_proc p;
	bool known = pid != USM_PID_NONE && pid != USM_PID_EXITED && pid != USM_PID_OVERFLOW &&
		     bpftel_usm__proc(usm, pid, &p);

	json_object_set_new(o, "comm", known ? bpftel_json_str(p.comm) : json_null());
	json_object_set_new(o, "cgroup", known ? bpftel_json_str(p.cgroup.path) : json_null());
	json_object_set_new(o, "cgroup_id",
			    known ? json_integer((json_int_t)p.cgroup.cgroup_id) : json_null());
	json_object_set_new(o, "container_id", known && p.cgroup.container_id[0]
						       ? json_string(p.cgroup.container_id)
						       : json_null());
	json_object_set_new(o, "container_runtime", known && p.cgroup.runtime[0]
							    ? json_string(p.cgroup.runtime)
							    : json_null());
	json_object_set_new(o, "container_owner_uid",
			    known && p.cgroup.container_user_owned
				    ? json_integer(p.cgroup.container_owner_uid)
				    : json_null());
}

/* A gRPC row's call, as its metrics label it; null for other rows. */
static json_t *rpc_json(const struct usm_endpoint_row *r)
{
	char service[USM_PATH_MAX];
	const char *method;

	if (!r->grpc)
		return json_null();
	usm_rpc_names(r->path, service, sizeof(service), &method);
	return json_pack("{s:s, s:o, s:o, s:o}", "system", "grpc", "service",
			 bpftel_json_str(service), "method", bpftel_json_str(method),
			 "grpc_status_code",
			 r->grpc_status >= 0 ? json_integer(r->grpc_status) : json_null());
}

static json_t *row_json(struct bpftel_usm *usm, const struct usm_endpoint_row *r)
{
	const struct usm_hist *h = &r->latency;
	json_t *o, *pid;

	pid = r->pid == USM_PID_NONE || r->pid == USM_PID_EXITED || r->pid == USM_PID_OVERFLOW
		      ? json_null()
		      : json_integer(r->pid);
	o = json_pack("{s:o, s:s, s:s, s:s, s:s, s:o, s:o, s:i, s:I, s:f, s:f, s:f, s:f, s:o, "
		      "s:{s:o, s:o}}",
		      "pid", pid, "process", process_kind(r->pid), "side", side_names[r->side],
		      "protocol", r->proto == USM_PROTO_HTTPS ? "https" : "http", "version",
		      usm_version_name(r->version), "method", bpftel_json_str(r->method), "path",
		      bpftel_json_str(r->path), "status", r->status, "count", (json_int_t)h->count,
		      "latency_sum_seconds", h->sum_ns / 1e9, "p50_seconds",
		      usm_hist_quantile_ns(h, 0.5) / 1e9, "p99_seconds",
		      usm_hist_quantile_ns(h, 0.99) / 1e9, "mean_seconds",
		      h->count ? h->sum_ns / 1e9 / h->count : 0.0, "buckets", buckets_json(h),
		      "connection", "client",
		      addr_json(r->conn.family, r->conn.client_addr, r->conn.client_port), "server",
		      addr_json(r->conn.family, r->conn.server_addr, r->conn.server_port));
	if (o)
		json_object_set_new(o, "rpc", rpc_json(r));
	if (o)
		add_process(usm, o, r->pid);
	return o;
}

/* The decoder's reasons (enum usm_h2_reason) and their counts, USM_H2_OK aside. */
static json_t *reasons_json(const uint64_t *counts)
{
	json_t *o = json_object();
	int i;

	for (i = 1; i < USM_H2_REASON_MAX; i++)
		json_object_set_new(o, usm_h2_reason_str(i), json_integer(counts[i]));
	return o;
}

/* HTTP/2 sessions: what was decoded, and every session or byte that was not, why. */
static json_t *http2_json(const struct usm_h2_sessions_stats *h)
{
	json_t *und = reasons_json(h->undecodable), *drop = json_object();
	int i;

	for (i = 0; i < USM_H2_DROP__COUNT; i++)
		json_object_set_new(drop, usm_h2_drop_str(i), json_integer(h->dropped[i]));
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, "
			 "s:o}",
			 "records", (json_int_t)h->records, "sessions", (json_int_t)h->sessions,
			 "live", (json_int_t)h->live, "reclaimed_idle", (json_int_t)h->reclaimed,
			 "closed", (json_int_t)h->closed,
			 "memory_bytes", (json_int_t)h->mem, "requests",
			 (json_int_t)h->requests, "responses", (json_int_t)h->responses, "resets",
			 (json_int_t)h->resets, "refused", (json_int_t)h->refused,
			 "grpc_responses", (json_int_t)h->grpc,
			 "lost_bytes", (json_int_t)h->lost_bytes, "cut_records",
			 (json_int_t)h->cut_records, "undecodable", und, "dropped", drop);
}

/* Cleartext HTTP/2: first requests decoded, and the connections that could not be. */
static json_t *h2c_json(const struct usm_h2c_stats *h)
{
	json_t *und = reasons_json(h->undecodable);

	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "segments",
			 (json_int_t)h->segments, "connections", (json_int_t)h->connections,
			 "requests", (json_int_t)h->requests, "responses",
			 (json_int_t)h->responses, "evicted", (json_int_t)h->evicted, "expired",
			 (json_int_t)h->expired, "unanswered", (json_int_t)h->unanswered,
			 "unmatched", (json_int_t)h->unmatched,
			 "upgraded", (json_int_t)h->upgraded, "undecodable", und);
}

static json_t *counters_json(const struct bpftel_usm_counters *c)
{
	json_t *cnt = json_object(), *rej;
	size_t i;

	for (i = 0; i < USM_CNT__COUNT; i++)
		json_object_set_new(cnt, bpftel_usm_counter_name(i), json_integer(c->kernel[i]));
	json_object_set_new(cnt, "unparsed", json_integer(c->unparsed));
	json_object_set_new(cnt, "malformed", json_integer(c->malformed));
	json_object_set_new(cnt, "unattributed", json_integer(c->unattributed));
	json_object_set_new(cnt, "nat_copies", json_integer(c->nat_copies));
	json_object_set_new(cnt, "nat_copies_forgotten", json_integer(c->nat_copies_forgotten));
	json_object_set_new(cnt, "tls_connection_unknown", json_integer(c->tls_no_conn));
	json_object_set_new(cnt, "tls_connection_reused", json_integer(c->tls_conn_reused));
	json_object_set_new(cnt, "own_exchanges", json_integer(c->own));
	json_object_set_new(cnt, "ends_reversed", json_integer(c->ends_reversed));
	json_object_set_new(cnt, "processes_not_described", json_integer(c->procs_dropped));
	rej = json_pack("{s:I, s:I}", "syntax", (json_int_t)c->rejected[USM_HTTP_REJECT_SYNTAX],
			"status", (json_int_t)c->rejected[USM_HTTP_REJECT_STATUS]);
	json_object_set_new(cnt, "rejected", rej);
	json_object_set_new(
		cnt, "pairing",
		json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			  "requests", (json_int_t)c->endpoints.requests, "responses",
			  (json_int_t)c->endpoints.responses, "paired",
			  (json_int_t)c->endpoints.paired, "unanswered",
			  (json_int_t)c->endpoints.unanswered, "orphan_responses",
			  (json_int_t)c->endpoints.orphan_responses, "interim",
			  (json_int_t)c->endpoints.interim, "evicted",
			  (json_int_t)c->endpoints.evicted, "process_overflow",
			  (json_int_t)c->endpoints.proc_overflow, "table_overflow",
			  (json_int_t)c->endpoints.table_overflow, "exited_folded",
			  (json_int_t)c->endpoints.exited_folded, "expired",
			  (json_int_t)c->endpoints.expired, "pending",
			  (json_int_t)c->endpoints.pending, "rows", (json_int_t)c->endpoints.rows));
	json_object_set_new(cnt, "http2", http2_json(&c->h2));
	json_object_set_new(cnt, "h2c", h2c_json(&c->h2c));
	return cnt;
}

/* Each table shared out by user: its size, the share (null: no bound), who holds the
 * most of it and who was refused the most, at the last correction. */
static json_t *shares_json(struct bpftel_usm *usm, unsigned int percent)
{
	struct fair_share_refusers r[USM_SHARE__COUNT];
	struct fair_share_holders h[USM_SHARE__COUNT];
	json_t *o = json_object();
	unsigned int ranges, skipped;
	int t, err;

	bpftel_usm__ranges(usm, &ranges, &skipped, &err);
	json_object_set_new(o, "subuid", fair_share_subuid_json(ranges, skipped, err));
	bpftel_usm__shares(usm, h, r);
	for (t = 0; t < USM_SHARE__COUNT; t++)
		json_object_set_new(o, usm_share_tables[t].key,
				    fair_share_table_json(usm_share_tables[t].max_entries,
							  usm_fair_share_cap(&usm_share_tables[t],
									     percent),
							  &h[t], &r[t]));
	return o;
}

json_t *usm_report(struct bpftel_module *m, json_t *req)
{
	struct bpftel_usm *usm = bpftel_module__priv(m);
	struct bpftel_usm_settings set;
	struct bpftel_usm_counters c;
	struct usm_endpoint_row *rows;
	json_t *arr = json_array(), *o;
	size_t n, i;

	(void)req;
	n = bpftel_usm__rows(usm, &rows);
	for (i = 0; i < n; i++) {
		o = row_json(usm, &rows[i]);
		if (o)
			json_array_append_new(arr, o);
	}
	free(rows);
	bpftel_usm__counters(usm, &c);
	bpftel_usm__settings(usm, &set);
	return json_pack("{s:s, s:o, s:o, s:b, s:I, s:o}", "state",
			 bpftel_module_state_name(bpftel_module__state(m)), "endpoints", arr,
			 "counters", counters_json(&c), "tls_recv_fd", bpftel_usm__recv_fd(usm),
			 "user_share_percent", (json_int_t)set.user_share_percent, "shares",
			 shares_json(usm, set.user_share_percent));
}

/* ---- /metrics ---- */

_Static_assert(USM_H2_CAP == 2048, "bpftel_http2_cut_calls_total's help names the cap");
_Static_assert(USM_H2_STREAMS_MAX == 128, "too_many_streams' help names the cap");

/* One sample per decoder reason, as JSON's undecodable (too_many_streams: streams). */
static void undecodable_samples(struct bpftel_prom *w, const uint64_t *counts)
{
	struct bpftel_prom_label l[1];
	int i;

	for (i = 1; i < USM_H2_REASON_MAX; i++) {
		l[0] = (struct bpftel_prom_label){"reason", usm_h2_reason_str(i)};
		bpftel_prom_sample_u64(w, "", l, 1, counts[i]);
	}
}

/* The kernel's counters shown as they are, one series each. */
static const struct {
	const char *name, *help;
	enum usm_counter counter;
} kernel_scalars[] = {
	{"bpftel_go_tls_reads_unpaired_total",
	 "Returns of Go's crypto/tls (*Conn).Read with bytes, seen without their entry "
	 "(entered before the probes were attached, or more reads in flight at once than the "
	 "kernel keeps: 16384): their bytes are not looked at.",
	 USM_CNT_GO_UNPAIRED},
	{"bpftel_http_packets_duplicate_total",
	 "Plaintext segments that began an HTTP message seen again, on another network device "
	 "the packet crossed (bond, VLAN, bridge) or sent again (a TCP retransmission): "
	 "counted once.",
	 USM_CNT_PACKETS_DUPLICATE},
	{"bpftel_http_tls_write_retries_total",
	 "OpenSSL writes that retried one SSL_get_error reported failed (a non-blocking "
	 "socket): their bytes were looked at on the first try, not again.",
	 USM_CNT_TLS_RETRIES},
	{"bpftel_http_tls_write_rests_total",
	 "TLS writes of the rest of the thread's last write on the session (GnuTLS sends one "
	 "record a call and the application writes the rest): their bytes were looked at "
	 "with the first, not again.",
	 USM_CNT_TLS_WRITE_RESTS},
	{"bpftel_http_tls_reads_unseen_total",
	 "TLS reads whose return the probes never saw: a later read of the thread, at or "
	 "above their stack frame, took their slot (the module stopped in between, a "
	 "longjmp, a stackful coroutine's switch): what they read is not seen.",
	 USM_CNT_TLS_READS_UNSEEN},
	{"bpftel_http_packets_ipv6_deep_total",
	 "IPv6 packets with more extension headers before their transport header than the "
	 "socket filter walks (4): not looked at.",
	 USM_CNT_PACKETS_IP6_DEEP},
	{"bpftel_http_packets_unread_total",
	 "TCP packets the socket filter could not look into: an IP length field of 0 (a "
	 "packet over 64 KiB, BIG TCP) or a link header it found no network header past (a "
	 "VLAN tag in band): their messages are not seen.",
	 USM_CNT_PACKETS_UNREAD},
	{"bpftel_http2_calls_preempted_total",
	 "TLS calls on HTTP/2 sessions whose frame walk found every slot of its CPU's "
	 "scratch (4) held by walks it had preempted (preemptible kernels only): not "
	 "walked; that direction's "
	 "framing is lost and its session no longer decoded (dropped as unframed).",
	 USM_CNT_H2_NESTED},
	{"bpftel_http2_starts_refused_total",
	 "TLS calls whose bytes began like an HTTP/2 connection preface or SETTINGS frame on "
	 "a session that had carried HTTP/1 messages (a body that looks like one): not taken "
	 "as the start of an HTTP/2 session; the session stays HTTP/1.",
	 USM_CNT_H2_START_REFUSED},
	{"bpftel_http2_starts_over_share_total",
	 "TLS calls that would have started an HTTP/2 session (a preface or a SETTINGS "
	 "frame) of an owner (a user or a container's root, not the host's) whose sessions "
	 "already fill its share of the kernel's session table (user_share_percent, a "
	 "quarter by default): refused, that session not decoded, so that one user cannot "
	 "evict the others' live sessions.",
	 USM_CNT_H2_OVER_SHARE},
	{"bpftel_http_tls_sessions_over_share_total",
	 "Times the kernel did not keep a TLS session (its socket, to name its connection, "
	 "and whether it carried HTTP/1) because its owner (a user or a container's root, "
	 "not the host's) held its share of that table already (user_share_percent, a "
	 "quarter by default): at its SSL_set_fd, at each of its HTTP/1 messages, and with "
	 "tls_recv_fd on at each read that names its socket. Its messages have no "
	 "connection (Go's keep theirs).",
	 USM_CNT_TLS_SESS_OVER_SHARE},
	{"bpftel_http_tls_retry_marks_over_share_total",
	 "OpenSSL writes that failed (SSL_get_error) and were not marked to be retried, "
	 "their owner (a user or a container's root, not the host's) holding its share of "
	 "the kernel's marks already (user_share_percent, a quarter by default): a retry of "
	 "one is seen as a new message.",
	 USM_CNT_TLS_RETRY_OVER_SHARE},
	{"bpftel_http_go_reads_over_share_total",
	 "Go crypto/tls Reads not kept until their return, their owner (a user or a "
	 "container's root, not the host's) holding its share of the kernel's Reads in "
	 "flight already (user_share_percent, a quarter by default): what they read is not "
	 "seen; their returns count in go_read_unpaired too.",
	 USM_CNT_GO_READS_OVER_SHARE},
};

/* HTTP/2 sessions and what could not be decoded: bounded labels (fixed reasons); and
 * the kernel's plain counters. */
static void http2_metrics(struct bpftel_prom *w, const struct bpftel_usm_counters *c)
{
	struct bpftel_prom_label l[1];
	size_t i;

	bpftel_prom_scalar(w, "bpftel_http2_sessions_total", "counter",
			   "HTTP/2 sessions over TLS whose start the agent saw (preface or first "
			   "SETTINGS).",
			   c->h2.sessions);
	bpftel_prom_family(w, "bpftel_http2_undecodable_sessions_total", "counter",
			   "HTTP/2 sessions that stopped being decoded, by the decoder's reason: "
			   "their later requests are not counted; too_many_streams counts streams "
			   "dropped past 128 open in a session, their requests unanswered; "
			   "stream_error counts header blocks and END_STREAMs ignored as HTTP/2 "
			   "stream errors (after their sender ended the stream, a second request "
			   "or final response).");
	undecodable_samples(w, c->h2.undecodable);
	bpftel_prom_family(w, "bpftel_http2_dropped_total", "counter",
			   "HTTP/2 sessions (or records of them) not decoded, by reason: "
			   "unknown_session (started before the agent saw it), unframed (the "
			   "kernel lost a direction's framing), evicted, memory, direction, "
			   "reordered, process_cap (a process's least recently used session, for "
			   "its new one past its cap) and user_cap (the table full, a user's "
			   "least recently used session, for its own new one at its share or "
			   "another's while it holds more).");
	for (i = 0; i < USM_H2_DROP__COUNT; i++) {
		l[0] = (struct bpftel_prom_label){"reason", usm_h2_drop_str(i)};
		bpftel_prom_sample_u64(w, "", l, 1, c->h2.dropped[i]);
	}
	bpftel_prom_scalar(w, "bpftel_http2_reclaimed_sessions_total", "counter",
			   "HTTP/2 sessions idle 10 minutes or more freed to make room for others "
			   "(1024 sessions, 64 MiB of decoders): mostly connections closed unseen; "
			   "a later record of one counts as dropped, unknown_session.",
			   c->h2.reclaimed);
	bpftel_prom_scalar(w, "bpftel_http2_closed_sessions_total", "counter",
			   "HTTP/2 sessions the kernel saw end (SSL_free, gnutls_deinit, Go's "
			   "Close, or a session set up for a new connection): their decoders "
			   "freed, their requests still waiting for an answer counted unanswered.",
			   c->h2.closed);
	bpftel_prom_scalar(w, "bpftel_http2_lost_bytes_total", "counter",
			   "Bytes of HTTP/2 sessions lost between the kernel and the decoder (ring "
			   "buffer or queue full), fed to it as gaps.",
			   c->h2.lost_bytes);
	bpftel_prom_scalar(w, "bpftel_http2_cut_calls_total", "counter",
			   "TLS calls on HTTP/2 sessions whose frames did not fit in the kernel's "
			   "copy (8 records of 2048 bytes a call: USM_H2_RECORDS, USM_H2_CAP).",
			   c->kernel[USM_CNT_H2_TRUNCATED]);
	bpftel_prom_family(w, "bpftel_h2c_undecodable_connections_total", "counter",
			   "Cleartext HTTP/2 (prior knowledge) connections whose first request "
			   "could not be decoded from the packets' prefixes, by reason (lost_bytes: "
			   "its HEADERS did not fit).");
	undecodable_samples(w, c->h2c.undecodable);
	for (i = 0; i < sizeof(kernel_scalars) / sizeof(kernel_scalars[0]); i++)
		bpftel_prom_scalar(w, kernel_scalars[i].name, "counter", kernel_scalars[i].help,
				   c->kernel[kernel_scalars[i].counter]);
}

/* Per table shared out by user (label table, three values): the share, and what the
 * owner holding the most of it held at the last correction. */
static void share_metrics(struct bpftel_prom *w, struct bpftel_usm *usm)
{
	__u64 share[USM_SHARE__COUNT], top[USM_SHARE__COUNT];
	struct fair_share_holders h[USM_SHARE__COUNT];
	const char *keys[USM_SHARE__COUNT];
	struct bpftel_usm_settings set;
	__s64 cap;
	int t;

	bpftel_usm__shares(usm, h, NULL);
	bpftel_usm__settings(usm, &set);
	for (t = 0; t < USM_SHARE__COUNT; t++) {
		keys[t] = usm_share_tables[t].key;
		cap = usm_fair_share_cap(&usm_share_tables[t], set.user_share_percent);
		share[t] = cap ? (__u64)cap : usm_share_tables[t].max_entries;
		top[t] = h[t].n ? h[t].v[0].held : 0;
	}
	bpftel_prom_keyed(w, "bpftel_http_user_share_entries", "gauge",
			  "Entries of a kernel table shared out by user (http2_sessions, "
			  "tls_sessions, tls_retry_marks) that one user but root, or one "
			  "container's root, may hold (user_share_percent); the table's size "
			  "when there is no bound.",
			  "table", keys, share, USM_SHARE__COUNT);
	bpftel_prom_keyed(w, "bpftel_http_user_share_top_holder_entries", "gauge",
			  "Entries of that table held by the user but root (or container's root) "
			  "holding the most, as counted every 10 s; 0 when only root holds some. "
			  "At the share, its new entries are refused (*_over_share_total).",
			  "table", keys, top, USM_SHARE__COUNT);
}

void usm_metrics(struct bpftel_module *m, struct bpftel_prom *w)
{
	struct bpftel_usm *usm = bpftel_module__priv(m);
	struct usm_overflow_counts over = {0};
	struct bpftel_usm_counters c;
	struct bpftel_prom_label l[1];
	struct usm_series *ser;
	bool containers;
	size_t ns;

	bpftel_usm__counters(usm, &c);
	ns = bpftel_usm__series(usm, &ser, &containers, &over.series_budget);
	over.process_rows = c.endpoints.proc_overflow;
	over.table_full = c.endpoints.table_overflow;
	usm_families_write(w, ser, ns, containers, &over);
	bpftel_prom_scalar(w, "bpftel_http_unattributed_requests_total", "counter",
			   "Plaintext HTTP requests whose sockets' owners the agent does not know "
			   "(connected before it ran): in `bpftel http`, not in the histograms.",
			   c.unattributed);
	bpftel_prom_scalar(w, "bpftel_http_nat_copies_total", "counter",
			   "Plaintext HTTP exchanges, and interim responses, seen again under other "
			   "addresses (NAT on the way: a container's, a published port's) and "
			   "recorded once, where their ends are known: not counted again.",
			   c.nat_copies);
	bpftel_prom_scalar(w, "bpftel_http_ends_reversed_total", "counter",
			   "Plaintext HTTP exchanges whose way (read from the messages' first "
			   "bytes) an end's socket contradicts: requests sent from an accepted "
			   "socket or read on a connected one (a body that begins like a request, "
			   "a reverse tunnel). Not recorded as that end's process's.",
			   c.ends_reversed);
	bpftel_prom_scalar(w, "bpftel_http_own_exchanges_total", "counter",
			   "Plaintext HTTP exchanges with the agent's own sockets (its /metrics "
			   "server): the other end is recorded, the agent's is not.",
			   c.own);
	bpftel_prom_family(w, "bpftel_http_rejected_messages_total", "counter",
			   "Messages that looked like HTTP and were not, by reason: syntax "
			   "(HTTP/1.x), status (outside 100-599; HTTP/1.x and HTTP/2).");
	l[0] = (struct bpftel_prom_label){"reason", "syntax"};
	bpftel_prom_sample_u64(w, "", l, 1, c.rejected[USM_HTTP_REJECT_SYNTAX]);
	l[0] = (struct bpftel_prom_label){"reason", "status"};
	bpftel_prom_sample_u64(w, "", l, 1, c.rejected[USM_HTTP_REJECT_STATUS]);
	/* What pairing lost, as `counters.pairing` counts it: each request once. */
	bpftel_prom_family(w, "bpftel_http_requests_unpaired_total", "counter",
			   "HTTP requests no response was paired with, so in no histogram, by "
			   "reason: unanswered (replaced by the next on their connection, "
			   "pending past http_row_expiry, of a process that exited, or "
			   "withdrawn), evicted (pushed out of the 4096 pending by newer ones). "
			   "Each request once, whatever its NAT copies.");
	l[0] = (struct bpftel_prom_label){"reason", "unanswered"};
	bpftel_prom_sample_u64(w, "", l, 1, c.endpoints.unanswered);
	l[0] = (struct bpftel_prom_label){"reason", "evicted"};
	bpftel_prom_sample_u64(w, "", l, 1, c.endpoints.evicted);
	bpftel_prom_scalar(w, "bpftel_http_orphan_responses_total", "counter",
			   "HTTP responses with no request pending that they could answer (the "
			   "request before the agent watched, or lost): in no histogram.",
			   c.endpoints.orphan_responses);
	http2_metrics(w, &c);
	share_metrics(w, usm);
	free(ser);
}
