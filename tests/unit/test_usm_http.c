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

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static enum usm_http_kind parse(const char *s, struct usm_http_start *out)
{
	return usm_http_parse(s, strlen(s), out);
}

static const struct {
	const char *line, *method, *path;
	int version;
	bool truncated;
} requests[] = {
	{"GET /items/42?x=1 HTTP/1.1\r\nHost: a\r\n", "GET", "/items/*", 11, false},
	{"POST /api/v1/users HTTP/1.0\r\n", "POST", "/api/v1/users", 10, false},
	{"DELETE /o/550e8400-e29b-41d4-a716-446655440000/x HTTP/1.1\r\n", "DELETE", "/o/*/x", 11,
	 false},
	{"GET http://example.com:8080/a/7#frag HTTP/1.1\r\n", "GET", "/a/*", 11, false},
	{"OPTIONS * HTTP/1.1\r\n", "OPTIONS", "*", 11, false},
	{"CONNECT example.com:443 HTTP/1.1\r\n", "CONNECT", "/", 11, false},
	{"PATCH /a HTTP/1.1\n", "PATCH", "/a", 11, false},
	/* The prefix ended inside the target: the last, incomplete segment is '*'... */
	{"GET /very/long/target/segm", "GET", "/very/long/target/*", 11, true},
	/* ...but not when the cut falls in the query, which is dropped anyway. */
	{"GET /search?q=aaaaaaaaaaaa", "GET", "/search", 11, true},
	/* Cut after the target: complete, its version unknown yet. */
	{"GET /a HTTP/", "GET", "/a", 11, false},
	{"GET /a HTTP/1.0", "GET", "/a", 10, false},
	{"GET /a ", "GET", "/a", 11, false},
	{"OPTIONS *", "OPTIONS", "*", 11, false},
	/* Methods outside the standard set: one name for them all. */
	{"BREW /pot HTTP/1.1\r\n", USM_METHOD_OTHER, "/pot", 11, false},
	{"PROPFIND /dav HTTP/1.1\r\n", USM_METHOD_OTHER, "/dav", 11, false},
	{"GETX / HTTP/1.1\r\n", USM_METHOD_OTHER, "/", 11, false},
	{"M-SEARCH * HTTP/1.1\r\n", USM_METHOD_OTHER, "*", 11, false},
	{"VERSION_CONTROL /a HTTP/1.1\r\n", USM_METHOD_OTHER, "/a", 11, false},
	{"ABCDEFGHIJKLMNOPQRST / HTTP/1.1\r\n", USM_METHOD_OTHER, "/", 11, false},
	/* Bytes >= 0x80 stay: outputs escape them. */
	{"GET /caf\xe9/x HTTP/1.1\r\n", "GET", "/caf\xe9/x", 11, false},
	{"GET /\xd0\xbc\xd0\xb8\xd1\x80 HTTP/1.1\r\n", "GET", "/\xd0\xbc\xd0\xb8\xd1\x80", 11,
	 false},
};

static void test_request_lines(void **state)
{
	struct usm_http_start m;
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(requests); i++) {
		if (parse(requests[i].line, &m) != USM_HTTP_REQUEST)
			fail_msg("not a request: '%s'", requests[i].line);
		assert_int_equal(m.kind, USM_HTTP_REQUEST);
		assert_string_equal(m.method, requests[i].method);
		assert_string_equal(m.path, requests[i].path);
		assert_int_equal(m.version, requests[i].version);
		assert_int_equal(m.truncated, requests[i].truncated);
		assert_int_equal(m.reject, USM_HTTP_REJECT_NONE);
	}
}

/* Not an HTTP/1.x start; with reject saying whether it looked like one. */
static const struct {
	const char *line;
	enum usm_http_reject reject;
} not_starts[] = {
	{"", USM_HTTP_REJECT_NONE},
	{"G", USM_HTTP_REJECT_NONE},
	{"GET", USM_HTTP_REJECT_NONE},
	{"get / HTTP/1.1", USM_HTTP_REJECT_NONE},
	{"GET/ HTTP/1.1", USM_HTTP_REJECT_NONE},
	{"ABCDEFGHIJKLMNOPQRSTU / HTTP/1.1", USM_HTTP_REJECT_NONE}, /* 21: not a method */
	{"G3T / HTTP/1.1", USM_HTTP_REJECT_NONE},
	{"\x16\x03\x01\x02\x00\x01\x00\x01", USM_HTTP_REJECT_NONE},
	{"{\"json\": 1}", USM_HTTP_REJECT_NONE},
	{"HTTP", USM_HTTP_REJECT_NONE},
	{"http/1.1 200 OK", USM_HTTP_REJECT_NONE},
	{"GET ", USM_HTTP_REJECT_SYNTAX},
	{"GET  / HTTP/1.1", USM_HTTP_REJECT_SYNTAX},
	{"GET / HTTP/2.0\r\n", USM_HTTP_REJECT_SYNTAX},
	{"GET / HTTP/1.2\r\n", USM_HTTP_REJECT_SYNTAX},
	{"GET / HTTP/1.1x\r\n", USM_HTTP_REJECT_SYNTAX},
	{"GET / FTP/1.0", USM_HTTP_REJECT_SYNTAX},
	{"GET /\r\n", USM_HTTP_REJECT_SYNTAX}, /* HTTP/0.9 */
	{"GET /a\x01"
	 "b HTTP/1.1",
	 USM_HTTP_REJECT_SYNTAX},
	{"GET /a\tb HTTP/1.1", USM_HTTP_REJECT_SYNTAX},
	{"GET /a\x7f HTTP/1.1", USM_HTTP_REJECT_SYNTAX},
	{"GET /cut\x1b", USM_HTTP_REJECT_SYNTAX},
	{"GET *x HTTP/1.1", USM_HTTP_REJECT_SYNTAX},
	{"GET %2F HTTP/1.1", USM_HTTP_REJECT_SYNTAX},
	{"HTTP/1.1 20", USM_HTTP_REJECT_SYNTAX},
	{"HTTP/1.1 2x0 OK", USM_HTTP_REJECT_SYNTAX},
	{"HTTP/1.1 2000", USM_HTTP_REJECT_SYNTAX},
	{"HTTP/1.2 200 OK", USM_HTTP_REJECT_SYNTAX},
	{"HTTP/2 200", USM_HTTP_REJECT_SYNTAX},
	{"HTTP/1.1  200 OK", USM_HTTP_REJECT_SYNTAX},
	{"HTTP/1.1 099 x", USM_HTTP_REJECT_STATUS},
	{"HTTP/1.1 600 x", USM_HTTP_REJECT_STATUS},
	{"HTTP/1.0 000\r\n", USM_HTTP_REJECT_STATUS},
	{"HTTP/1.1 999", USM_HTTP_REJECT_STATUS},
};

static void test_not_starts(void **state)
{
	struct usm_http_start m;
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(not_starts); i++) {
		if (parse(not_starts[i].line, &m) != USM_HTTP_NONE)
			fail_msg("parsed as HTTP: '%s'", not_starts[i].line);
		assert_int_equal(m.kind, USM_HTTP_NONE);
		if (m.reject != not_starts[i].reject)
			fail_msg("'%s': reject %d, not %d", not_starts[i].line, m.reject,
				 not_starts[i].reject);
	}
}

static const struct {
	const char *line;
	int status, version;
} statuses[] = {
	{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", 200, 11},
	{"HTTP/1.0 404 Not Found\r\n", 404, 10},
	{"HTTP/1.1 503", 503, 11},
	{"HTTP/1.1 100\r\n", 100, 11},
	{"HTTP/1.1 599\n", 599, 11},
};

static void test_status_lines(void **state)
{
	struct usm_http_start m;
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(statuses); i++) {
		assert_int_equal(parse(statuses[i].line, &m), USM_HTTP_RESPONSE);
		assert_int_equal(m.status, statuses[i].status);
		assert_int_equal(m.version, statuses[i].version);
		assert_int_equal(m.reject, USM_HTTP_REJECT_NONE);
	}
}

static const struct {
	const char *in;
	bool truncated;
	const char *want;
} paths[] = {
	{"/", false, "/"},
	{"", false, "/"},
	{"*", false, "*"},
	/* Numbers, UUIDs and hex ids. */
	{"/users/12345/orders/9", false, "/users/*/orders/*"},
	{"/o/550E8400-E29B-41D4-A716-446655440000", false, "/o/*"},
	{"/o/550e8400-e29b-41d4-a716-44665544000", false, "/o/550e8400-e29b-41d4-a716-44665544000"},
	{"/blob/deadbeef12/raw", false, "/blob/*/raw"},
	{"/commit/0123456789abcdef0123456789abcdef01234567", false, "/commit/*"},
	{"/blob/deadbeef/raw", false, "/blob/deadbeef/raw"}, /* a word */
	{"/cafe/abc123", false, "/cafe/abc123"},	     /* short hex */
	/* Query, fragment, path parameters. */
	{"/v2/items?id=7&x=y", false, "/v2/items"},
	{"/doc#section-2", false, "/doc"},
	{"/reset;jsessionid=S3cr3t", false, "/reset"},
	{"/reset/Zm9vYmFyYmF6cXV4;jsessionid=S3cr3t", false, "/reset/*"},
	{"/a;x=1/b;y=2/c", false, "/a/b/c"},
	{"/a/;x", false, "/a/"},
	/* Absolute- and authority-form. */
	{"https://user@example.com:8443/api/v1/users/7?x", false, "/api/v1/users/*"},
	{"http://example.com", false, "/"},
	{"example.com:443", false, "/"},
	/* Secrets and high-entropy tokens. */
	{"/t/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9",
	 false, "/t/*"},
	{"/u/john.smith@example.com/inbox", false, "/u/*/inbox"},
	{"/u/jane%40example.org", false, "/u/*"},
	{"/u/x@y.z", false, "/u/*"},
	{"/k/a1b2c3d4e5f6g7h8j9", false, "/k/*"},
	{"/k/sk_live_4eC39HqLyjWDarjtT1zdp7dc", false, "/k/*"},
	{"/d/aGVsbG8-d29ybGRf_Q2xpZW50", false, "/d/*"},
	{"/share/Xk9fQ2pLm7Rt1Zw4", false, "/share/*"},
	/* Words and names stay. */
	{"/api/v1/orders", false, "/api/v1/orders"},
	{"/static/app.min.js", false, "/static/app.min.js"},
	{"/users/johnsmith", false, "/users/johnsmith"},
	{"/healthz", false, "/healthz"},
	{"/v2", false, "/v2"},
	{"/en-US/docs", false, "/en-US/docs"},
	{"/api/getUserPreferences", false, "/api/getUserPreferences"},
	{"/api/getUser2FAStatus", false, "/api/getUser2FAStatus"},
	{"/how-to-install-the-agent", false, "/how-to-install-the-agent"},
	{"/Content-Security-Policy-Report", false, "/Content-Security-Policy-Report"},
	{"/img/logo@2x.png", false, "/img/logo@2x.png"},
	{"/@johnsmith", false, "/@johnsmith"},
	{"/js/jquery-3.6.0.min.js", false, "/js/jquery-3.6.0.min.js"},
	/* Truncated: the last segment is incomplete. */
	{"/a/b", true, "/a/*"},
	{"/a/b/", true, "/a/b/"},
	{"/a/b;jsessionid=S3", true, "/a/b"},
	{"http://host", true, "/"},
	/* Raw bytes, empty segments and dot-segments stay as they are. */
	{"/caf\xe9/x", false, "/caf\xe9/x"},
	{"/a//b/", false, "/a//b/"},
	{"/a/../b/./c", false, "/a/../b/./c"},
};

static void test_path_normalize(void **state)
{
	char out[USM_PATH_MAX];
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(paths); i++) {
		usm_path_normalize(paths[i].in, strlen(paths[i].in), paths[i].truncated, out,
				   sizeof(out));
		if (strcmp(out, paths[i].want))
			fail_msg("'%s' -> '%s', not '%s'", paths[i].in, out, paths[i].want);
	}
}

static void test_path_too_long(void **state)
{
	char longp[400], out[USM_PATH_MAX];

	(void)state;
	/* Too long for the name: cut, and the cut marked. */
	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	usm_path_normalize(longp, strlen(longp), false, out, 17);
	assert_string_equal(out, "/aaaaaaaaaaa/...");
	usm_path_normalize(longp, strlen(longp), false, out, sizeof(out));
	assert_int_equal(strlen(out), sizeof(out) - 1);
	assert_string_equal(out + sizeof(out) - 5, "/...");
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
		cmocka_unit_test(test_request_lines), cmocka_unit_test(test_not_starts),
		cmocka_unit_test(test_status_lines),  cmocka_unit_test(test_path_normalize),
		cmocka_unit_test(test_path_too_long), cmocka_unit_test(test_histogram),
	};

	return cmocka_run_group_tests_name("usm_http", tests, NULL, NULL);
}
