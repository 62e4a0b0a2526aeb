// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* HTTP message starts, path normalization and latency histograms of the USM module. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "user/modules/usm/histogram.h"
#include "user/modules/usm/http.h"

static enum usm_http_kind parse(const char *s, struct usm_http_start *out)
{
	return usm_http_parse(s, strlen(s), out);
}

static void test_request_lines(void **state)
{
	struct usm_http_start m;

	(void)state;
	assert_int_equal(parse("GET /items/42?x=1 HTTP/1.1\r\nHost: a\r\n", &m), USM_HTTP_REQUEST);
	assert_string_equal(m.method, "GET");
	assert_string_equal(m.path, "/items/*");
	assert_false(m.truncated);
	assert_int_equal(parse("POST /api/v1/users HTTP/1.0\r\n", &m), USM_HTTP_REQUEST);
	assert_string_equal(m.method, "POST");
	assert_string_equal(m.path, "/api/v1/users");
	assert_int_equal(parse("DELETE /o/550e8400-e29b-41d4-a716-446655440000/x HTTP/1.1\r\n", &m),
			 USM_HTTP_REQUEST);
	assert_string_equal(m.path, "/o/*/x");
	assert_int_equal(parse("GET http://example.com:8080/a/7#frag HTTP/1.1\r\n", &m),
			 USM_HTTP_REQUEST);
	assert_string_equal(m.path, "/a/*");
	assert_int_equal(parse("OPTIONS * HTTP/1.1\r\n", &m), USM_HTTP_REQUEST);
	assert_string_equal(m.path, "*");
	/* The prefix ended inside the target: the last, incomplete segment is '*'. */
	assert_int_equal(parse("GET /very/long/target/segm", &m), USM_HTTP_REQUEST);
	assert_true(m.truncated);
	assert_string_equal(m.path, "/very/long/target/*");
	/* ...but not when the cut falls in the query, which is dropped anyway. */
	assert_int_equal(parse("GET /search?q=aaaaaaaaaaaa", &m), USM_HTTP_REQUEST);
	assert_string_equal(m.path, "/search");
	/* Ended right after the target's space: still a request. */
	assert_int_equal(parse("GET /a HTTP/", &m), USM_HTTP_REQUEST);
	assert_string_equal(m.path, "/a");
}

static void test_not_requests(void **state)
{
	static const char *const bad[] = {
		"",
		"G",
		"GET",
		"GET ",
		"GET  / HTTP/1.1",
		"get / HTTP/1.1",
		"GETX / HTTP/1.1",
		"GET / HTTP/2.0\r\n",
		"GET / FTP/1.0",
		"GET /\r\n",
		"BREW /pot HTTP/1.1",
		"\x16\x03\x01\x02\x00\x01\x00\x01",
		"GET /a\x01b HTTP/1.1",
		"{\"json\": 1}",
	};
	struct usm_http_start m;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i], &m) != USM_HTTP_NONE)
			fail_msg("parsed as HTTP: '%s'", bad[i]);
	}
}

static void test_status_lines(void **state)
{
	static const char *const bad[] = {"HTTP/1.1 20",     "HTTP/1.1 099 x",	"HTTP/1.1 600 x",
					  "HTTP/1.2 200 OK", "HTTP/1.1 2x0 OK", "HTTP/1.1 2000",
					  "HTTP/2 200",	     "http/1.1 200 OK"};
	struct usm_http_start m;
	size_t i;

	(void)state;
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", &m), USM_HTTP_RESPONSE);
	assert_int_equal(m.status, 200);
	assert_int_equal(parse("HTTP/1.0 404 Not Found\r\n", &m), USM_HTTP_RESPONSE);
	assert_int_equal(m.status, 404);
	assert_int_equal(parse("HTTP/1.1 503", &m), USM_HTTP_RESPONSE);
	assert_int_equal(m.status, 503);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i], &m) != USM_HTTP_NONE)
			fail_msg("parsed as a status line: '%s'", bad[i]);
	}
}

static void norm(const char *in, bool truncated, const char *want, size_t size)
{
	char out[USM_PATH_MAX];

	usm_path_normalize(in, strlen(in), truncated, out, size);
	assert_string_equal(out, want);
}

static void test_path_normalize(void **state)
{
	char longp[400];

	(void)state;
	norm("/", false, "/", USM_PATH_MAX);
	norm("", false, "/", USM_PATH_MAX);
	norm("/users/12345/orders/9", false, "/users/*/orders/*", USM_PATH_MAX);
	norm("/blob/deadbeef12/raw", false, "/blob/*/raw", USM_PATH_MAX);
	norm("/blob/deadbeef/raw", false, "/blob/deadbeef/raw", USM_PATH_MAX); /* a word */
	norm("/cafe/abc123", false, "/cafe/abc123", USM_PATH_MAX);	       /* short hex */
	norm("/v2/items?id=7&x=y", false, "/v2/items", USM_PATH_MAX);
	norm("/a//b/", false, "/a//b/", USM_PATH_MAX);
	norm("/a/b", true, "/a/*", USM_PATH_MAX);
	/* Too long for the name: cut, and the cut marked. */
	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	norm(longp, false, "/aaaaaaaaaaa/...", 17);
}

static void test_histogram(void **state)
{
	struct usm_hist h = {0}, g = {0};
	uint64_t v, ub;
	int i, b;

	(void)state;
	/* Bounds grow, and every value lands in a bucket whose bound holds it, at most
	 * 25 % above it. */
	for (b = 1; b < USM_HIST_BUCKETS; b++)
		assert_true(usm_hist_upper_ns(b) > usm_hist_upper_ns(b - 1));
	for (v = 1025; v < (1ull << 39); v = v * 7 / 5 + 3) {
		struct usm_hist one = {0};

		usm_hist_add(&one, v);
		ub = usm_hist_quantile_ns(&one, 1.0);
		assert_true(ub >= v);
		assert_true(ub <= v + v / 4 + 1);
	}
	for (i = 1; i <= 100; i++)
		usm_hist_add(&h, (uint64_t)i * 1000000); /* 1..100 ms */
	assert_int_equal(h.count, 100);
	assert_int_equal(h.sum_ns, 5050ull * 1000000);
	ub = usm_hist_quantile_ns(&h, 0.5);
	assert_true(ub >= 50000000 && ub <= 62500000);
	ub = usm_hist_quantile_ns(&h, 0.99);
	assert_true(ub >= 99000000 && ub <= 125000000);
	usm_hist_merge(&g, &h);
	usm_hist_merge(&g, &h);
	assert_int_equal(g.count, 200);
	assert_int_equal(usm_hist_quantile_ns(&g, 0.5), usm_hist_quantile_ns(&h, 0.5));
	assert_int_equal(usm_hist_quantile_ns(&(struct usm_hist){0}, 0.5), 0);
	usm_hist_add(&g, 0);
	assert_int_equal(g.buckets[0], 1);
	usm_hist_add(&g, UINT64_MAX);
	assert_int_equal(g.buckets[USM_HIST_BUCKETS - 1], 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_lines), cmocka_unit_test(test_not_requests),
		cmocka_unit_test(test_status_lines),  cmocka_unit_test(test_path_normalize),
		cmocka_unit_test(test_histogram),
	};

	return cmocka_run_group_tests_name("usm_http", tests, NULL, NULL);
}
