// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* `bpftel http`: HTTP endpoints by process, most requested first. */
#include <stdio.h>
#include <stdlib.h>

#include "user/common/cli_section.h"
#include "user/common/jsonfmt.h"
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

static void print_http(json_t *resp)
{
	static const char *const hdr[] = {"PID",   "PROTO", "METHOD", "PATH", "STATUS",
					  "COUNT", "MEAN",  "P50",    "P99"};
	json_t *eps = json_object_get(resp, "endpoints"), **rows, *c, *pairing;
	char pid[24], status[8], count[24], mean[24], p50[24], p99[24];
	size_t i, n = json_array_size(eps);
	struct table *t;

	printf("USM module: %s\n", jstr(resp, "state"));
	if (!n) {
		printf("No HTTP request seen yet.\n");
	} else if ((rows = calloc(n, sizeof(*rows)))) {
		for (i = 0; i < n; i++)
			rows[i] = json_array_get(eps, i);
		qsort(rows, n, sizeof(*rows), cmp_count);
		t = table_new(9, hdr);
		for (i = 0; i < n; i++) {
			if (json_is_integer(json_object_get(rows[i], "pid")))
				snprintf(pid, sizeof(pid), "%lld", jint(rows[i], "pid"));
			else
				snprintf(pid, sizeof(pid), "%s", jstr(rows[i], "process"));
			snprintf(status, sizeof(status), "%lld", jint(rows[i], "status"));
			snprintf(count, sizeof(count), "%lld", jint(rows[i], "count"));
			fmt_latency(mean, sizeof(mean), jnum(rows[i], "mean_seconds"));
			fmt_latency(p50, sizeof(p50), jnum(rows[i], "p50_seconds"));
			fmt_latency(p99, sizeof(p99), jnum(rows[i], "p99_seconds"));
			table_add(t, (const char *const[]){pid, jstr(rows[i], "protocol"),
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
	printf("\nTLS calls %lld (HTTP %lld), packets %lld (HTTP %lld), lost %lld, truncated %lld; "
	       "requests %lld, responses %lld, paired %lld, unanswered %lld, orphan responses "
	       "%lld, evicted %lld, paths over the cap %lld\n",
	       jint(c, "tls_calls"), jint(c, "tls_http"), jint(c, "packets"),
	       jint(c, "packets_http"), jint(c, "lost"), jint(c, "truncated"),
	       jint(pairing, "requests"), jint(pairing, "responses"), jint(pairing, "paired"),
	       jint(pairing, "unanswered"), jint(pairing, "orphan_responses"),
	       jint(pairing, "evicted"), jint(pairing, "path_overflow"));
}

const struct bpftel_cli_section bpftel_usm_cli = {
	.command = "http",
	.help = "            HTTP endpoints (method, normalized path, status) per process, from\n"
		"            TLS (OpenSSL, GnuTLS) and plaintext packets: count, mean, p50, p99\n",
	.print = print_http,
};
