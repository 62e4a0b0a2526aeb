// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* USM's /metrics as Prometheus reads it: responses paired in the endpoint table, scraped
 * through the families' writer, the text parsed back. Every (metric, label set) is
 * written once, and the histograms count every paired response once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "user/common/prom.h"
#include "user/modules/usm/endpoints.h"
#include "user/modules/usm/families.h"
#include "user/modules/usm/series_rows.h"

#define MAX_SAMPLES 4096

/* One scrape, parsed: each sample's series ("name{labels}") and value. */
struct scrape {
	char *text;
	size_t n;
	char *series[MAX_SAMPLES];
	double value[MAX_SAMPLES];
};

/* A request and its response on (pid, side, stream), dt ns apart, ending at t. */
struct call {
	uint32_t pid;
	enum usm_side side;
	const char *method, *path;
	int version, status;
	bool grpc;
	int grpc_status;
};

static void pair(struct usm_endpoints *e, const struct call *c, uint32_t stream, uint64_t t,
		 uint64_t dt)
{
	struct usm_http_start rq = {.kind = USM_HTTP_REQUEST, .version = c->version,
				    .grpc = c->grpc};
	struct usm_http_start rs = {.kind = USM_HTTP_RESPONSE, .version = c->version,
				    .status = c->status, .grpc = c->grpc,
				    .grpc_status = c->grpc_status};
	struct usm_conn_key k;

	memset(&k, 0, sizeof(k));
	k.pid = c->pid;
	k.conn = 1;
	k.side = c->side;
	k.stream = stream;
	snprintf(rq.method, sizeof(rq.method), "%s", c->method);
	snprintf(rq.path, sizeof(rq.path), "%s", c->path);
	usm_endpoints_message(e, &k, USM_PROTO_HTTPS, t - dt, &rq, NULL);
	usm_endpoints_message(e, &k, USM_PROTO_HTTPS, t, &rs, NULL);
}

static void parse(struct scrape *s)
{
	char *line, *save = NULL, *sp;

	s->n = 0;
	for (line = strtok_r(s->text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (line[0] == '#')
			continue;
		sp = strrchr(line, ' ');
		assert_non_null(sp);
		assert_true(s->n < MAX_SAMPLES);
		*sp = '\0';
		s->series[s->n] = line;
		s->value[s->n++] = strtod(sp + 1, NULL);
	}
}

/* What /metrics writes of USM's series, with series_max = budget. */
static void scrape(struct usm_endpoints *e, unsigned int budget, struct scrape *s)
{
	struct usm_overflow_counts over = {0};
	struct usm_endpoints_stats st;
	struct usm_endpoint_row *rows;
	struct usm_series *ser;
	struct bpftel_prom *w;
	size_t len, n, ns;
	FILE *f;

	memset(s, 0, sizeof(*s));
	f = open_memstream(&s->text, &len);
	assert_non_null(f);
	w = bpftel_prom_new(f);
	assert_non_null(w);
	usm_endpoints_stats(e, &st);
	n = usm_endpoints_rows(e, &rows);
	ns = usm_series_from_rows(rows, n, NULL, NULL, budget, &ser, &over.series_budget);
	over.process_rows = st.proc_overflow;
	over.table_full = st.table_overflow;
	usm_families_write(w, ser, ns, false, &over);
	bpftel_prom_free(w);
	fclose(f);
	free(ser);
	free(rows);
	parse(s);
}

/* The value of series id; fails when it is not there. */
static double value_of(const struct scrape *s, const char *id)
{
	size_t i;

	for (i = 0; i < s->n; i++) {
		if (!strcmp(s->series[i], id))
			return s->value[i];
	}
	fail_msg("no sample %s", id);
	return 0;
}

/* Each series at most once in the exposition. */
static void assert_unique(const struct scrape *s)
{
	size_t i, j;

	for (i = 0; i < s->n; i++) {
		for (j = i + 1; j < s->n; j++) {
			if (!strcmp(s->series[i], s->series[j]))
				fail_msg("written twice: %s", s->series[i]);
		}
	}
}

/* The histograms' _count summed over every series of the four families. */
static double counted(const struct scrape *s)
{
	double sum = 0;
	size_t i;

	for (i = 0; i < s->n; i++) {
		if ((!strncmp(s->series[i], "bpftel_http_", 12) ||
		     !strncmp(s->series[i], "bpftel_rpc_", 11)) &&
		    strstr(s->series[i], "_seconds_count{"))
			sum += s->value[i];
	}
	return sum;
}

/* A gRPC call's labels are service, method and grpc-status: calls that differ in their
 * HTTP method or :status only are one series, written once. */
static void test_grpc_labels_once(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(NULL);
	const struct call calls[] = {
		{7, USM_SIDE_SERVER, "POST", "/pkg.Svc/Call", 20, 200, true, 14},
		{7, USM_SIDE_SERVER, "POST", "/pkg.Svc/Call", 20, 503, true, 14},
		{7, USM_SIDE_SERVER, "GET", "/pkg.Svc/Call", 20, 200, true, 14},
		{8, USM_SIDE_SERVER, "POST", "/pkg.Svc/Call", 20, 200, true, 14},
		{7, USM_SIDE_SERVER, "POST", "/pkg.Svc/Call", 20, 200, true, 0},
	};
	struct usm_endpoints_stats st;
	struct scrape s;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		pair(e, &calls[i], (uint32_t)(2 * i + 1), 1000000 * (i + 1), 1000);
	scrape(e, 100, &s);
	assert_unique(&s);
	assert_float_equal(value_of(&s, "bpftel_rpc_server_duration_seconds_count{"
					"rpc_system=\"grpc\",rpc_service=\"pkg.Svc\","
					"rpc_method=\"Call\",rpc_grpc_status_code=\"14\"}"),
			   4, 0);
	assert_float_equal(value_of(&s, "bpftel_rpc_server_duration_seconds_count{"
					"rpc_system=\"grpc\",rpc_service=\"pkg.Svc\","
					"rpc_method=\"Call\",rpc_grpc_status_code=\"0\"}"),
			   1, 0);
	usm_endpoints_stats(e, &st);
	assert_int_equal(st.paired, 5);
	assert_float_equal(counted(&s), (double)st.paired, 0);
	free(s.text);
	usm_endpoints_free(e);
}

#define OVERFLOW_1_1                                                                       \
	"bpftel_http_server_request_duration_seconds_count{http_request_method=\"_OTHER\","  \
	"http_route=\"(overflow)\",http_response_status_code=\"\","                          \
	"network_protocol_version=\"1.1\"}"

/*
 * A capped process's overflow row has the labels of the overflow series the budget
 * folds the newest series into: once both exist, they are one series, holding both.
 */
static void test_overflow_labels_once(void **state)
{
	struct usm_endpoints_limits lim = {.max_rows_per_proc = 2};
	struct usm_endpoints *e = usm_endpoints_new(&lim);
	const struct call calls[] = {
		{10, USM_SIDE_SERVER, "GET", "/a", 11, 200, false, 0},
		{10, USM_SIDE_SERVER, "GET", "/b", 11, 200, false, 0},
		{10, USM_SIDE_SERVER, "GET", "/c", 11, 200, false, 0}, /* its overflow row */
		{20, USM_SIDE_SERVER, "GET", "/d", 11, 200, false, 0},
		{20, USM_SIDE_SERVER, "GET", "/e", 11, 200, false, 0}, /* past the budget */
	};
	struct usm_endpoints_stats st;
	struct scrape s;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		pair(e, &calls[i], (uint32_t)(2 * i + 1), 1000000 * (i + 1), 1000);
	usm_endpoints_stats(e, &st);
	assert_int_equal(st.proc_overflow, 1);
	/* Series, oldest first: /a, /b, pid 10's overflow row, /d; /e is one too many. */
	scrape(e, 4, &s);
	assert_unique(&s);
	assert_float_equal(value_of(&s, OVERFLOW_1_1), 2, 0);
	assert_float_equal(counted(&s), (double)st.paired, 0);
	assert_int_equal(st.paired, 5);
	free(s.text);
	usm_endpoints_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grpc_labels_once),
		cmocka_unit_test(test_overflow_labels_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
