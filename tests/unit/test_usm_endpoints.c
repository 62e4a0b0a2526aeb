// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Pairing requests with responses per connection, and the bounded endpoint table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "user/modules/usm/endpoints.h"

static struct usm_conn_key tls(uint32_t pid, uint64_t conn)
{
	struct usm_conn_key k;

	memset(&k, 0, sizeof(k));
	k.pid = pid;
	k.conn = conn;
	return k;
}

static void request(struct usm_endpoints *e, struct usm_conn_key k, const char *line, uint64_t t)
{
	struct usm_http_start m;

	assert_int_equal(usm_http_parse(line, strlen(line), &m), USM_HTTP_REQUEST);
	usm_endpoints_message(e, &k, USM_PROTO_HTTPS, t, &m);
}

static void response(struct usm_endpoints *e, struct usm_conn_key k, int status, uint64_t t)
{
	char line[32];
	struct usm_http_start m;

	snprintf(line, sizeof(line), "HTTP/1.1 %d X\r\n", status);
	assert_int_equal(usm_http_parse(line, strlen(line), &m), USM_HTTP_RESPONSE);
	usm_endpoints_message(e, &k, USM_PROTO_HTTPS, t, &m);
}

static struct usm_endpoint_row *find(struct usm_endpoint_row *rows, size_t n, uint32_t pid,
				     const char *path, int status)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (rows[i].pid == pid && !strcmp(rows[i].path, path) && rows[i].status == status)
			return &rows[i];
	}
	return NULL;
}

static void test_pairs_per_connection(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(16, 16, 8);
	struct usm_endpoint_row *rows, *r;
	struct usm_endpoints_stats st;
	size_t n;

	(void)state;
	/* Two connections of one process interleaved, a third of another process. */
	request(e, tls(10, 1), "GET /items/1 HTTP/1.1\r\n", 1000);
	request(e, tls(10, 2), "GET /items/2 HTTP/1.1\r\n", 1500);
	request(e, tls(11, 1), "POST /login HTTP/1.1\r\n", 1600);
	response(e, tls(10, 2), 200, 2500);
	response(e, tls(10, 1), 200, 5000);
	response(e, tls(11, 1), 401, 1700);
	n = usm_endpoints_rows(e, &rows);
	assert_int_equal(n, 2);
	r = find(rows, n, 10, "/items/*", 200);
	assert_non_null(r);
	assert_string_equal(r->method, "GET");
	assert_int_equal(r->latency.count, 2);
	assert_int_equal(r->latency.sum_ns, 4000 + 1000);
	r = find(rows, n, 11, "/login", 401);
	assert_non_null(r);
	assert_int_equal(r->latency.sum_ns, 100);
	free(rows);
	usm_endpoints_stats(e, &st);
	assert_int_equal(st.requests, 3);
	assert_int_equal(st.paired, 3);
	assert_int_equal(st.pending, 0);
	usm_endpoints_free(e);
}

static void test_unanswered_and_orphans(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(16, 16, 8);
	struct usm_endpoint_row *rows;
	struct usm_endpoints_stats st;
	size_t n;

	(void)state;
	response(e, tls(10, 1), 200, 10); /* nothing asked */
	request(e, tls(10, 1), "GET /a HTTP/1.1\r\n", 100);
	request(e, tls(10, 1), "GET /b HTTP/1.1\r\n", 200); /* replaces /a */
	response(e, tls(10, 1), 204, 300);
	response(e, tls(10, 1), 204, 400); /* second response: orphan */
	n = usm_endpoints_rows(e, &rows);
	assert_int_equal(n, 1);
	assert_string_equal(rows[0].path, "/b");
	assert_int_equal(rows[0].latency.sum_ns, 100);
	free(rows);
	usm_endpoints_stats(e, &st);
	assert_int_equal(st.unanswered, 1);
	assert_int_equal(st.orphan_responses, 2);
	usm_endpoints_free(e);
}

static void test_pending_bounded_oldest_evicted(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(4, 16, 8);
	struct usm_endpoints_stats st;
	struct usm_endpoint_row *rows;
	uint64_t c;

	(void)state;
	for (c = 1; c <= 6; c++)
		request(e, tls(10, c), "GET /x HTTP/1.1\r\n", c * 100);
	usm_endpoints_stats(e, &st);
	assert_int_equal(st.pending, 4);
	assert_int_equal(st.evicted, 2);
	response(e, tls(10, 1), 200, 1000); /* evicted: orphan */
	response(e, tls(10, 6), 200, 1000);
	response(e, tls(10, 3), 200, 1000);
	usm_endpoints_stats(e, &st);
	assert_int_equal(st.orphan_responses, 1);
	assert_int_equal(st.paired, 2);
	assert_int_equal(st.pending, 2);
	assert_int_equal(usm_endpoints_rows(e, &rows), 1);
	assert_int_equal(rows[0].latency.count, 2);
	free(rows);
	usm_endpoints_free(e);
}

static void test_paths_and_rows_bounded(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(16, 5, 3);
	struct usm_endpoint_row *rows, *other;
	struct usm_endpoints_stats st;
	char line[64];
	size_t n;
	int i;

	(void)state;
	for (i = 0; i < 6; i++) {
		snprintf(line, sizeof(line), "GET /p%c HTTP/1.1\r\n", 'a' + i);
		request(e, tls(10, 1), line, 1);
		response(e, tls(10, 1), 200, 2);
	}
	n = usm_endpoints_rows(e, &rows);
	assert_int_equal(n, 4); /* 3 paths + (other) */
	other = find(rows, n, 10, "(other)", 200);
	assert_non_null(other);
	assert_int_equal(other->latency.count, 3);
	free(rows);
	/* Another process: one row fits (5 in all), the next has no room. */
	request(e, tls(11, 1), "GET /q HTTP/1.1\r\n", 1);
	response(e, tls(11, 1), 200, 2);
	request(e, tls(12, 1), "GET /r HTTP/1.1\r\n", 1);
	response(e, tls(12, 1), 200, 2);
	usm_endpoints_stats(e, &st);
	assert_int_equal(st.rows, 5);
	assert_int_equal(st.path_overflow, 3);
	assert_int_equal(st.row_overflow, 1);
	usm_endpoints_free(e);
}

static bool only_10_alive(uint32_t pid)
{
	return pid == 10;
}

static void test_sweep_folds_exited(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(16, 16, 8);
	struct usm_endpoint_row *rows, *r;
	struct usm_endpoints_stats st;
	size_t n;

	(void)state;
	request(e, tls(10, 1), "GET /a HTTP/1.1\r\n", 1);
	response(e, tls(10, 1), 200, 2);
	request(e, tls(11, 1), "GET /a HTTP/1.1\r\n", 1);
	response(e, tls(11, 1), 200, 3);
	request(e, tls(12, 1), "GET /a HTTP/1.1\r\n", 1);
	response(e, tls(12, 1), 200, 4);
	request(e, tls(12, 2), "GET /b HTTP/1.1\r\n", 1); /* left pending */
	assert_int_equal(usm_endpoints_sweep(e, only_10_alive), 2);
	n = usm_endpoints_rows(e, &rows);
	assert_int_equal(n, 2);
	assert_non_null(find(rows, n, 10, "/a", 200));
	r = find(rows, n, USM_PID_EXITED, "/a", 200);
	assert_non_null(r);
	assert_int_equal(r->latency.count, 2);
	assert_int_equal(r->latency.sum_ns, 2 + 3);
	free(rows);
	usm_endpoints_stats(e, &st);
	assert_int_equal(st.pending, 0);
	assert_int_equal(usm_endpoints_sweep(e, only_10_alive), 0);
	usm_endpoints_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pairs_per_connection),
		cmocka_unit_test(test_unanswered_and_orphans),
		cmocka_unit_test(test_pending_bounded_oldest_evicted),
		cmocka_unit_test(test_paths_and_rows_bounded),
		cmocka_unit_test(test_sweep_folds_exited),
	};

	return cmocka_run_group_tests_name("usm_endpoints", tests, NULL, NULL);
}
