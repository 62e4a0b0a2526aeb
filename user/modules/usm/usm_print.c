// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* `bpftel http`: HTTP endpoints by process, most requested first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "user/common/cli_section.h"
#include "user/common/jsonfmt.h"
#include "user/common/share_print.h"
#include "user/common/table.h"

static int cmp_count(const void *a, const void *b)
{
	long long ca = jint(*(json_t *const *)a, "count"), cb = jint(*(json_t *const *)b, "count");

	return ca < cb ? 1 : ca > cb ? -1 : 0;
}

static void fmt_latency(char *buf, size_t size, double secs)
{
	if (secs < 1e-3)
		snprintf(buf, size, "%.0fus", secs * 1e6);
	else
		fmt_duration(buf, size, secs);
}

/* "1234 curl", "(unattributed)", with the container's short id when it has one. */
static void fmt_process(char *buf, size_t size, json_t *r)
{
	const char *ct = jstr(r, "container_id");
	json_t *owner = json_object_get(r, "container_owner_uid");
	char by[24] = "";

	if (json_is_integer(owner)) /* a user's: not to be taken for a root container's */
		snprintf(by, sizeof(by), "@uid%lld", (long long)json_integer_value(owner));
	if (json_is_integer(json_object_get(r, "pid")))
		snprintf(buf, size, "%lld %s%s%.12s%s", jint(r, "pid"), jstr(r, "comm"),
			 *ct != '-' ? " ct:" : "", *ct != '-' ? ct : "", *ct != '-' ? by : "");
	else
		snprintf(buf, size, "%s", jstr(r, "process"));
}

/* One line, and only once HTTP/2 was seen: sessions, and whatever was not decoded
 * (resp: the module's answer; c: its counters). */
static void print_http2(json_t *resp, json_t *c)
{
	json_t *h = json_object_get(c, "http2"), *v;
	long long over = jint(c, "h2_over_share");
	const char *k;

	if (!jint(h, "sessions") && !jint(h, "records") && !over)
		return;
	printf("HTTP/2: sessions %lld (live %lld, %lld bytes), requests %lld, responses %lld, "
	       "resets %lld, refused %lld, lost bytes %lld, cut calls %lld",
	       jint(h, "sessions"), jint(h, "live"), jint(h, "memory_bytes"), jint(h, "requests"),
	       jint(h, "responses"), jint(h, "resets"), jint(h, "refused"), jint(h, "lost_bytes"),
	       jint(h, "cut_records"));
	if (jint(h, "closed"))
		printf(", closed %lld", jint(h, "closed"));
	if (jint(h, "reclaimed_idle"))
		printf(", reclaimed idle %lld", jint(h, "reclaimed_idle"));
	json_object_foreach(json_object_get(h, "undecodable"), k, v)
		if (json_integer_value(v))
			printf(", undecodable %s %lld", k, (long long)json_integer_value(v));
	json_object_foreach(json_object_get(h, "dropped"), k, v)
		if (json_integer_value(v))
			printf(", dropped %s %lld", k, (long long)json_integer_value(v));
	if (over)
		printf(", starts over a user's share %lld (user_share_percent = %lld)", over,
		       jint(resp, "user_share_percent"));
	printf("\n");
}

/* Who holds the most of each kernel table shared out by user, once anyone but root
 * holds some (resp: the module's answer). */
/* The tables shared out by user, as "shares" in the report names them. */
static const struct bpftel_share_label share_tables[] = {
	{"http2_sessions", "HTTP/2 sessions"},
	{"tls_sessions", "TLS sessions"},
	{"tls_retry_marks", "retry marks"},
	{"go_reads", "Go reads in flight"},
};

static void print_http(json_t *resp)
{
	static const char *const hdr[] = {"PROCESS", "SIDE",  "PROTO", "METHOD", "PATH",
					  "STATUS",  "COUNT", "MEAN",  "P50",	 "P99"};
	json_t *eps = json_object_get(resp, "endpoints"), **rows, *c, *pairing;
	char proc[96], proto[16], status[16], count[24], mean[24], p50[24], p99[24];
	json_t *rpc;
	size_t i, n = json_array_size(eps);
	struct table *t;

	printf("USM module: %s\n", jstr(resp, "state"));
	if (!n) {
		printf("No HTTP request seen yet.\n");
	} else if ((rows = calloc(n, sizeof(*rows)))) {
		for (i = 0; i < n; i++)
			rows[i] = json_array_get(eps, i);
		qsort(rows, n, sizeof(*rows), cmp_count);
		t = table_new(10, hdr);
		for (i = 0; i < n; i++) {
			fmt_process(proc, sizeof(proc), rows[i]);
			snprintf(proto, sizeof(proto), "%s/%s", jstr(rows[i], "protocol"),
				 jstr(rows[i], "version"));
			rpc = json_object_get(rows[i], "rpc");
			if (json_is_object(rpc) &&
			    json_is_integer(json_object_get(rpc, "grpc_status_code")))
				/* gRPC: its own status; the HTTP one is 200 */
				snprintf(status, sizeof(status), "grpc %lld",
					 jint(rpc, "grpc_status_code"));
			else if (json_is_object(rpc))
				snprintf(status, sizeof(status), "grpc -");
			else if (jint(rows[i], "status"))
				snprintf(status, sizeof(status), "%lld", jint(rows[i], "status"));
			else
				snprintf(status, sizeof(status), "-");
			snprintf(count, sizeof(count), "%lld", jint(rows[i], "count"));
			fmt_latency(mean, sizeof(mean), jnum(rows[i], "mean_seconds"));
			fmt_latency(p50, sizeof(p50), jnum(rows[i], "p50_seconds"));
			fmt_latency(p99, sizeof(p99), jnum(rows[i], "p99_seconds"));
			table_add(t, (const char *const[]){proc, jstr(rows[i], "side"), proto,
							   jstr(rows[i], "method"),
							   jstr(rows[i], "path"), status, count,
							   mean, p50, p99});
		}
		table_print(t, stdout);
		table_free(t);
		free(rows);
	}
	c = json_object_get(resp, "counters");
	pairing = json_object_get(c, "pairing");
	printf("\nTLS calls %lld (HTTP %lld, retried writes %lld), packets %lld (HTTP %lld), lost "
	       "%lld, truncated %lld; "
	       "requests %lld, responses %lld, paired %lld, unanswered %lld, orphan responses "
	       "%lld, interim %lld, evicted %lld; overflow: per process %lld, table %lld (exited "
	       "processes' rows folded %lld times); expired "
	       "rows %lld; unattributed %lld; NAT copies %lld; the agent's own %lld; rejected: "
	       "syntax %lld, status %lld\n",
	       jint(c, "tls_calls"), jint(c, "tls_http"), jint(c, "tls_write_retries"),
	       jint(c, "packets"),
	       jint(c, "packets_http"), jint(c, "lost"), jint(c, "truncated"),
	       jint(pairing, "requests"), jint(pairing, "responses"), jint(pairing, "paired"),
	       jint(pairing, "unanswered"), jint(pairing, "orphan_responses"),
	       jint(pairing, "interim"), jint(pairing, "evicted"),
	       jint(pairing, "process_overflow"), jint(pairing, "table_overflow"),
	       jint(pairing, "exited_folded"),
	       jint(pairing, "expired"), jint(c, "unattributed"), jint(c, "nat_copies"),
	       jint(c, "own_exchanges"),
	       jint(json_object_get(c, "rejected"), "syntax"),
	       jint(json_object_get(c, "rejected"), "status"));
	if (jint(c, "tls_connection_unknown") || jint(c, "tls_connection_reused")) {
		printf("TLS messages without a connection %lld (their socket's connect or accept "
		       "not seen%s), %lld (their fd reused since)",
		       jint(c, "tls_connection_unknown"),
		       json_is_true(json_object_get(resp, "tls_recv_fd"))
			       ? ""
			       : "; sessions with their own BIO, curl's: tls_recv_fd = on",
		       jint(c, "tls_connection_reused"));
		if (jint(c, "tls_sessions_over_share"))
			printf("; sessions not kept over a user's share: %lld "
			       "(user_share_percent = %lld)",
			       jint(c, "tls_sessions_over_share"), jint(resp, "user_share_percent"));
		printf("\n");
	}
	print_http2(resp, c);
	bpftel_print_shares(resp, share_tables, sizeof(share_tables) / sizeof(share_tables[0]));
}

const struct bpftel_cli_section bpftel_usm_cli = {
	.command = "http",
	.help = "            HTTP endpoints (side, method, normalized route, status; gRPC\n"
		"            methods and grpc-status) per process and container, from TLS\n"
		"            (OpenSSL, GnuTLS, Go's crypto/tls; HTTP/1.x and HTTP/2) and\n"
		"            plaintext packets (HTTP/1.x; h2c, a connection's first request):\n"
		"            count, mean, p50, p99\n",
	.print = print_http,
};
