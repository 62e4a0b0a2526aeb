// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * USM's h2c connections (user/modules/usm/h2c.c) fed with segment prefixes as the
 * socket filter sends them: the first request and its response in either arrival
 * order of the server's SETTINGS, a request cut by the prefix (undecodable), the
 * server's bytes past the prefix as a gap, segments of unknown connections, the table
 * bound and the sweep.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <linux/types.h>

#include "tests/unit/h2_build.h"
#include "user/modules/usm/h2c.h"

struct t {
	struct usm_h2c *h;
	nghttp2_hd_deflater *def[2];
	struct usm_http_start msg[8];
	struct usm_event ev[8];
	size_t n;
	uint64_t noted_ns[4]; /* on_request's segments' times */
	size_t noted, noted_when; /* how many; t->n when the last one came */
};

/* The hook's call: it comes once a first request is decoded, before it is handed on. */
static void on_request(const struct usm_event *ev, void *ctx)
{
	struct t *t = ctx;

	if (t->noted < 4)
		t->noted_ns[t->noted++] = ev->ktime_ns;
	t->noted_when = t->n;
}

static void sink(const struct usm_event *ev, const struct usm_http_start *msg, void *ctx)
{
	struct t *t = ctx;

	if (t->n < 8) {
		t->ev[t->n] = *ev;
		t->msg[t->n++] = *msg;
	}
}

static int setup(void **state)
{
	struct t *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	t->h = usm_h2c_new(sink, t);
	assert_non_null(t->h);
	usm_h2c_on_request(t->h, on_request);
	assert_int_equal(nghttp2_hd_deflate_new(&t->def[0], 4096), 0);
	assert_int_equal(nghttp2_hd_deflate_new(&t->def[1], 4096), 0);
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct t *t = *state;

	usm_h2c_free(t->h);
	nghttp2_hd_deflate_del(t->def[0]);
	nghttp2_hd_deflate_del(t->def[1]);
	free(t);
	return 0;
}

/* A segment of connection port (client port), kind, its first USM_PREFIX bytes. */
static void segment(struct t *t, uint16_t port, int kind, const struct h2b_buf *b, uint64_t ns)
{
	struct usm_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.ktime_ns = ns;
	ev.source = USM_SRC_SOCKET;
	ev.kind = (uint8_t)kind;
	ev.family = 4;
	ev.client_port = port;
	ev.server_port = 8080;
	memcpy(ev.client_addr, "\x7f\x00\x00\x01", 4);
	memcpy(ev.server_addr, "\x7f\x00\x00\x01", 4);
	ev.fd = -1;
	ev.len = (uint32_t)b->len;
	ev.prefix_len = (uint16_t)(b->len < USM_PREFIX ? b->len : USM_PREFIX);
	memcpy(ev.prefix, b->p, ev.prefix_len);
	usm_h2c_segment(t->h, &ev);
}

static struct usm_h2c_stats stats(struct t *t)
{
	struct usm_h2c_stats st;

	usm_h2c_stats(t->h, &st);
	return st;
}

static void client_first(struct t *t, struct h2b_buf *b, const char *path)
{
	h2b_preface(b);
	h2b_settings(b, (const uint32_t[]){3, 100}, 1);
	h2b_headers(b, t->def[0], 1, 0x1,
		    H2B_NV(":method", "GET", ":scheme", "http", ":path", path, ":authority",
			   "127.0.0.1:8080"));
}

/* The server's SETTINGS before the preface, then its ACK and the response (a body
 * longer than the prefix): the request and the response, each timed by its segment. */
static void test_first_exchange(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};

	h2b_settings(&b, (const uint32_t[]){3, 128}, 1);
	segment(t, 40000, USM_KIND_H2C_SERVER, &b, 10);
	h2b_free(&b);
	client_first(t, &b, "/items/7?x=1");
	segment(t, 40000, USM_KIND_H2C_CLIENT, &b, 20);
	h2b_free(&b);
	/* Decoded, kept until its response; the hook told at once, with its segment. */
	assert_int_equal(stats(t).requests, 1);
	assert_int_equal(t->n, 0);
	assert_int_equal(t->noted, 1);
	assert_int_equal(t->noted_ns[0], 20);
	assert_int_equal(t->noted_when, 0);
	h2b_settings_ack(&b);
	segment(t, 40000, USM_KIND_H2C_SERVER, &b, 30);
	h2b_free(&b);
	h2b_headers(&b, t->def[1], 1, 0x4, H2B_NV(":status", "404"));
	h2b_data(&b, 1, 0x1, 3000);
	segment(t, 40000, USM_KIND_H2C_SERVER, &b, 40);
	h2b_free(&b);
	assert_int_equal(t->n, 2);
	assert_int_equal(t->msg[0].kind, USM_HTTP_REQUEST);
	assert_int_equal(t->msg[0].version, 20);
	assert_string_equal(t->msg[0].method, "GET");
	assert_string_equal(t->msg[0].path, "/items/*");
	assert_int_equal(t->ev[0].ktime_ns, 20); /* its own segment's time */
	assert_int_equal(t->msg[1].kind, USM_HTTP_RESPONSE);
	assert_int_equal(t->msg[1].status, 404);
	assert_int_equal(t->ev[1].ktime_ns, 40);
	assert_int_equal(stats(t).requests, 1);
	assert_int_equal(stats(t).responses, 1);
	assert_int_equal(stats(t).connections, 1);
	assert_int_equal(t->noted, 1); /* once per first request, not at its hand-on */
	/* Done with: a later segment of it is ignored, not a new connection. */
	h2b_headers(&b, t->def[1], 3, 0x5, H2B_NV(":status", "200"));
	segment(t, 40000, USM_KIND_H2C_SERVER, &b, 50);
	h2b_free(&b);
	assert_int_equal(t->n, 2);
	assert_int_equal(stats(t).connections, 1);
	assert_int_equal(stats(t).unmatched, 0);
}

/* A gRPC call over h2c is an HTTP/2 exchange like any other here (its path, its
 * :status): its grpc-status is in trailers the prefix does not hold. */
static void test_grpc_as_http(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};

	h2b_preface(&b);
	h2b_settings(&b, NULL, 0);
	h2b_headers(&b, t->def[0], 1, 0x4,
		    H2B_NV(":method", "POST", ":scheme", "http", ":path", "/pkg.Echo/Ok",
			   ":authority", "a", "content-type", "application/grpc", "te", "trailers"));
	segment(t, 40001, USM_KIND_H2C_CLIENT, &b, 10);
	h2b_free(&b);
	h2b_settings(&b, NULL, 0);
	h2b_headers(&b, t->def[1], 1, 0x4,
		    H2B_NV(":status", "200", "content-type", "application/grpc"));
	segment(t, 40001, USM_KIND_H2C_SERVER, &b, 20);
	h2b_free(&b);
	assert_int_equal(t->n, 2);
	assert_int_equal(t->msg[0].kind, USM_HTTP_REQUEST);
	assert_string_equal(t->msg[0].method, "POST");
	assert_false(t->msg[0].grpc);
	assert_int_equal(t->msg[1].status, 200);
	assert_false(t->msg[1].grpc);
	assert_int_equal(t->msg[1].grpc_status, -1);
}

/* A new connection on the 4-tuple of one done with (a client port used again within
 * the idle time): decoded as new, its exchange counted; one given up unanswered is
 * counted as evicted. */
static void test_port_reused(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};
	int round;

	for (round = 0; round < 3; round++) {
		/* Each a new connection: fresh encoders. */
		nghttp2_hd_deflate_del(t->def[0]);
		nghttp2_hd_deflate_del(t->def[1]);
		assert_int_equal(nghttp2_hd_deflate_new(&t->def[0], 4096), 0);
		assert_int_equal(nghttp2_hd_deflate_new(&t->def[1], 4096), 0);
		client_first(t, &b, "/again");
		segment(t, 40000, USM_KIND_H2C_CLIENT, &b, 100 * (uint64_t)round + 10);
		h2b_free(&b);
		if (round == 1)
			continue; /* never answered: the next connection replaces it */
		h2b_settings(&b, NULL, 0);
		h2b_headers(&b, t->def[1], 1, 0x5, H2B_NV(":status", "200"));
		segment(t, 40000, USM_KIND_H2C_SERVER, &b, 100 * (uint64_t)round + 20);
		h2b_free(&b);
	}
	assert_int_equal(stats(t).connections, 3);
	assert_int_equal(stats(t).requests, 3);
	assert_int_equal(stats(t).responses, 2);
	assert_int_equal(stats(t).evicted, 1);
	assert_int_equal(t->n, 4);
}

/* The preface first, the server's SETTINGS after: the same. */
static void test_preface_first(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};

	client_first(t, &b, "/a");
	segment(t, 40001, USM_KIND_H2C_CLIENT, &b, 1);
	h2b_free(&b);
	h2b_settings(&b, NULL, 0);
	h2b_settings_ack(&b);
	h2b_headers(&b, t->def[1], 1, 0x5, H2B_NV(":status", "200"));
	segment(t, 40001, USM_KIND_H2C_SERVER, &b, 2);
	h2b_free(&b);
	assert_int_equal(t->n, 2);
	assert_int_equal(t->msg[1].status, 200);
	assert_string_equal(t->msg[0].path, "/a");
}

/* curl --http2 http://: the request goes as HTTP/1.1 with Upgrade: h2c (its row, with
 * the 101), then the client's preface and SETTINGS alone, and the server answers it on
 * stream 1, after the preface or before it. Counted as upgraded: no request decoded,
 * no loss. An answer on another stream to no request decoded is still a loss. */
static void test_upgraded(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};

	h2b_preface(&b);
	h2b_settings(&b, (const uint32_t[]){3, 100}, 1);
	segment(t, 40002, USM_KIND_H2C_CLIENT, &b, 1);
	h2b_free(&b);
	h2b_settings(&b, NULL, 0);
	h2b_headers(&b, t->def[1], 1, 0x5, H2B_NV(":status", "200"));
	segment(t, 40002, USM_KIND_H2C_SERVER, &b, 2);
	h2b_free(&b);
	assert_int_equal(stats(t).upgraded, 1);
	assert_int_equal(stats(t).undecodable[USM_H2_LOST_BYTES], 0);
	assert_int_equal(stats(t).requests, 0);
	assert_int_equal(t->n, 0);
	/* The server first: its SETTINGS and the answer in one segment, then the
	 * client's preface. */
	h2b_settings(&b, NULL, 0);
	h2b_headers(&b, t->def[1], 1, 0x5, H2B_NV(":status", "200"));
	segment(t, 40003, USM_KIND_H2C_SERVER, &b, 3);
	h2b_free(&b);
	h2b_preface(&b);
	h2b_settings(&b, (const uint32_t[]){3, 100}, 1);
	segment(t, 40003, USM_KIND_H2C_CLIENT, &b, 4);
	h2b_free(&b);
	assert_int_equal(stats(t).upgraded, 2);
	assert_int_equal(stats(t).undecodable[USM_H2_LOST_BYTES], 0);
	/* An answer on stream 3 to no request decoded: a loss. */
	h2b_settings(&b, NULL, 0);
	h2b_headers(&b, t->def[1], 3, 0x5, H2B_NV(":status", "200"));
	segment(t, 40004, USM_KIND_H2C_SERVER, &b, 5);
	h2b_free(&b);
	assert_int_equal(stats(t).upgraded, 2);
	assert_int_equal(stats(t).undecodable[USM_H2_LOST_BYTES], 1);
}

/* A path of n - 1 bytes ("/qqq..."), longer than the prefix holds with its frame. */
static void long_path(char *path, size_t n)
{
	memset(path, 'q', n - 1);
	path[0] = '/';
	path[n - 1] = '\0';
}

/* A first request whose HEADERS do not fit in the prefix: undecodable, counted; the
 * server's answer then finds nothing to pair. */
static void test_request_cut(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};
	char big[300];

	long_path(big, sizeof(big));
	client_first(t, &b, big);
	assert_true(b.len > USM_PREFIX);
	segment(t, 40002, USM_KIND_H2C_CLIENT, &b, 1);
	h2b_free(&b);
	assert_int_equal(t->n, 0);
	assert_int_equal(stats(t).undecodable[USM_H2_LOST_BYTES], 1);
	h2b_settings(&b, NULL, 0);
	h2b_headers(&b, t->def[1], 1, 0x5, H2B_NV(":status", "200"));
	segment(t, 40002, USM_KIND_H2C_SERVER, &b, 2);
	h2b_free(&b);
	assert_int_equal(t->n, 0);
	assert_int_equal(stats(t).responses, 0);
}

/* The first request in, then its response's HEADERS cut by the prefix (a long header
 * of the answer): the connection is undecodable, and its request, never to be answered,
 * is counted unanswered, once: not later as expired, which counts those still decoding.
 * So requests = responses + unanswered + expired + evicted + rejected. */
static void test_answer_cut(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};
	char path[301];

	long_path(path, sizeof(path));
	client_first(t, &b, "/a");
	segment(t, 40007, USM_KIND_H2C_CLIENT, &b, 1);
	h2b_free(&b);
	assert_int_equal(stats(t).requests, 1);
	h2b_settings(&b, NULL, 0);
	h2b_headers(&b, t->def[1], 1, 0x5, H2B_NV(":status", "200", "x-long", path));
	assert_true(b.len > USM_PREFIX);
	segment(t, 40007, USM_KIND_H2C_SERVER, &b, 2);
	h2b_free(&b);
	assert_int_equal(t->n, 0);
	assert_int_equal(stats(t).responses, 0);
	assert_int_equal(stats(t).undecodable[USM_H2_LOST_BYTES], 1);
	assert_int_equal(stats(t).unanswered, 1);
	usm_h2c_sweep(t->h, 2 + USM_H2C_IDLE_NS + 1);
	assert_int_equal(stats(t).expired, 0);
	assert_int_equal(stats(t).evicted, 0);
	assert_int_equal(stats(t).unanswered, 1);
}

/* Two requests in the client's first segment: only the first is counted, and only its
 * own response pairs with it, whichever the server answers first. */
static void test_first_stream_only(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};

	client_first(t, &b, "/a");
	h2b_headers(&b, t->def[0], 3, 0x5, H2B_NV(":method", "GET", ":path", "/b"));
	segment(t, 40004, USM_KIND_H2C_CLIENT, &b, 1);
	h2b_free(&b);
	assert_int_equal(t->n, 0);
	assert_int_equal(stats(t).requests, 1);
	h2b_settings(&b, NULL, 0);
	h2b_headers(&b, t->def[1], 3, 0x5, H2B_NV(":status", "500"));
	h2b_headers(&b, t->def[1], 1, 0x5, H2B_NV(":status", "201"));
	segment(t, 40004, USM_KIND_H2C_SERVER, &b, 2);
	h2b_free(&b);
	assert_int_equal(t->n, 2);
	assert_string_equal(t->msg[0].path, "/a");
	assert_int_equal(t->msg[1].status, 201);
	assert_int_equal(stats(t).requests, 1);
	assert_int_equal(stats(t).responses, 1);
}

/* The first request in the prefix, a second one cut by its end, and the same of the
 * answers: the first exchange is counted, and no byte the design never needs (past the
 * first of each side) is counted as lost. */
static void test_cut_after_first(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};
	char path[401];

	long_path(path, sizeof(path));
	client_first(t, &b, "/a");
	h2b_headers(&b, t->def[0], 3, 0x5, H2B_NV(":method", "GET", ":path", path));
	assert_true(b.len > USM_PREFIX + 100);
	segment(t, 40006, USM_KIND_H2C_CLIENT, &b, 1);
	h2b_free(&b);
	assert_int_equal(stats(t).requests, 1);
	h2b_settings(&b, NULL, 0);
	h2b_headers(&b, t->def[1], 1, 0x5, H2B_NV(":status", "201"));
	h2b_headers(&b, t->def[1], 3, 0x5, H2B_NV(":status", "200", "x-long", path));
	assert_true(b.len > USM_PREFIX + 100);
	segment(t, 40006, USM_KIND_H2C_SERVER, &b, 2);
	h2b_free(&b);
	assert_int_equal(t->n, 2);
	assert_string_equal(t->msg[0].path, "/a");
	assert_int_equal(t->msg[1].status, 201);
	assert_int_equal(stats(t).responses, 1);
	assert_int_equal(stats(t).undecodable[USM_H2_LOST_BYTES], 0);
	usm_h2c_sweep(t->h, 2 + USM_H2C_IDLE_NS + 1);
	assert_int_equal(stats(t).expired, 0);
}

/* A first response whose :status is outside 100-599: rejected, counted, not handed
 * on (no row with an empty status), nor its request; the connection is done with. */
static void test_status_rejected(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};

	client_first(t, &b, "/odd");
	segment(t, 40005, USM_KIND_H2C_CLIENT, &b, 1);
	h2b_free(&b);
	h2b_settings(&b, NULL, 0);
	h2b_headers(&b, t->def[1], 1, 0x5, H2B_NV(":status", "999"));
	segment(t, 40005, USM_KIND_H2C_SERVER, &b, 2);
	h2b_free(&b);
	assert_int_equal(t->n, 0);
	assert_int_equal(stats(t).requests, 1);
	assert_int_equal(stats(t).responses, 0);
	assert_int_equal(stats(t).rejected_status, 1);
	usm_h2c_sweep(t->h, 2 + USM_H2C_IDLE_NS + 1);
	assert_int_equal(stats(t).expired, 0); /* counted once, as rejected */
}

/* Server segments of no connection being decoded, that do not start one: counted. */
static void test_unmatched(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};

	h2b_settings_ack(&b);
	segment(t, 40003, USM_KIND_H2C_SERVER, &b, 1);
	h2b_free(&b);
	assert_int_equal(stats(t).unmatched, 1);
	assert_int_equal(stats(t).connections, 0);
}

/* More connections than the table holds: the oldest being decoded goes, counted; the
 * sweep frees idle ones, counting those that never got their response. */
static void test_bound_and_sweep(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};
	int i;

	h2b_settings(&b, NULL, 0);
	for (i = 0; i < USM_H2C_CONNS_MAX + 2; i++)
		segment(t, (uint16_t)(1000 + i), USM_KIND_H2C_SERVER, &b, 100 + (uint64_t)i);
	h2b_free(&b);
	assert_int_equal(stats(t).connections, USM_H2C_CONNS_MAX + 2);
	assert_int_equal(stats(t).evicted, 2);
	usm_h2c_sweep(t->h, 100 + USM_H2C_IDLE_NS + 2 + 10);
	assert_int_equal(stats(t).expired, 10); /* last seen 102..111 */
	usm_h2c_sweep(t->h, 100 + USM_H2C_IDLE_NS + USM_H2C_CONNS_MAX + 2);
	assert_int_equal(stats(t).expired, USM_H2C_CONNS_MAX);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_first_exchange), T(test_preface_first),	 T(test_request_cut),
		T(test_unmatched),	T(test_bound_and_sweep), T(test_first_stream_only),
		T(test_status_rejected), T(test_port_reused), T(test_grpc_as_http),
		T(test_cut_after_first), T(test_upgraded),	 T(test_answer_cut),
	};

	return cmocka_run_group_tests_name("usm_h2c", tests, NULL, NULL);
}
