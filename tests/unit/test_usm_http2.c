// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The USM HTTP/2 decoder: byte streams built with a frame writer and libnghttp2's HPACK
 * deflater (h2_build.h), fed whole, in pieces and byte by byte, checked event by event.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/unit/h2_fixture.h"

static void test_preface(void **state)
{
	struct h2b_buf b = {0};

	(void)state;
	h2b_preface(&b);
	assert_true(usm_h2_is_preface(b.p, b.len));
	assert_false(usm_h2_is_preface(b.p, b.len - 1));
	h2b_settings(&b, NULL, 0);
	assert_true(usm_h2_is_preface(b.p, b.len));
	assert_false(usm_h2_is_preface("GET / HTTP/1.1\r\nHost: a\r\n\r\n", 27));
	assert_false(usm_h2_is_preface("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\r", 24));
	h2b_free(&b);
}

static void test_get_exchange(void **state)
{
	struct h2t *t = *state;
	const struct usm_h2_event *ev;

	h2t_handshake(t);
	t->now = 100;
	h2t_request(t, 1, "GET", "/users/42?x=1", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, C2S), 0);
	t->now = 250;
	h2t_response(t, 1, "200", 0);
	h2b_data(&t->out[S2C], 1, NGHTTP2_FLAG_END_STREAM, 10);
	assert_int_equal(h2t_send(t, S2C), 0);

	assert_int_equal(t->nev, 4);
	ev = &t->ev[0];
	assert_int_equal(ev->kind, USM_H2_EV_REQUEST);
	assert_int_equal(ev->dir, C2S);
	assert_int_equal(ev->stream.id, 1);
	assert_string_equal(ev->stream.method, "GET");
	assert_string_equal(ev->stream.path, "/users/*");
	assert_string_equal(ev->stream.scheme, "https");
	assert_false(ev->stream.grpc);
	assert_int_equal(ev->stream.request_ns, 100);
	assert_int_equal(t->ev[1].kind, USM_H2_EV_END_STREAM);
	assert_int_equal(t->ev[1].dir, C2S);
	assert_int_equal(t->ev[2].kind, USM_H2_EV_RESPONSE);
	assert_int_equal(t->ev[2].stream.status, 200);
	ev = &t->ev[3];
	assert_int_equal(ev->kind, USM_H2_EV_END_STREAM);
	assert_int_equal(ev->dir, S2C);
	assert_string_equal(ev->stream.path, "/users/*");
	assert_int_equal(ev->stream.status, 200);
	assert_int_equal(ev->latency_ns, 150);
	assert_int_equal(h2t_stats(t).streams, 0);
	assert_int_equal(h2t_stats(t).header_blocks[C2S], 1);
	assert_int_equal(h2t_stats(t).undecodable, USM_H2_OK);
}

static void test_huffman(void **state)
{
	struct h2t *t = *state;
	uint8_t block[256];
	size_t n;

	h2t_handshake(t);
	n = h2b_block(t->def[C2S],
		      H2B_NV(":method", "GET", ":scheme", "https", ":path",
			     "/api/v1/profile/settings", ":authority", "www.example.com"),
		      block, sizeof(block));
	/* nghttp2 Huffman-codes literals when that is shorter: the path is not in clear. */
	assert_null(memmem(block, n, "profile", 7));
	assert_null(memmem(block, n, "example", 7));
	h2b_frame(&t->out[C2S], NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1, block, n);
	assert_int_equal(h2t_send(t, C2S), 0);
	assert_non_null(h2t_find(t, USM_H2_EV_REQUEST, 1));
	assert_string_equal(t->ev[0].stream.path, "/api/v1/profile/settings");
}

/* Dynamically indexed methods and content types, pushed out of a small table by large
 * distinct headers all the time: every request must still decode to what was sent. */
static void test_dynamic_table_eviction(void **state)
{
	static const char *const methods[] = {"PATCH", "DELETE", "PUT", "OPTIONS"};
	static const uint32_t small[] = {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 512};
	struct h2t *t = *state;
	char pad[160], path[32];
	uint32_t i;

	h2t_handshake(t);
	h2b_settings(&t->out[S2C], small, 1);
	assert_int_equal(h2t_send(t, S2C), 0);
	h2b_settings_ack(&t->out[C2S]);
	assert_int_equal(nghttp2_hd_deflate_change_table_size(t->def[C2S], 512), 0);
	for (i = 0; i < 30; i++) {
		memset(pad, 'a' + i % 26, sizeof(pad) - 1);
		pad[sizeof(pad) - 1] = '\0';
		snprintf(pad, 8, "%07u", i); /* distinct: never found, always inserted */
		pad[7] = 'x';
		snprintf(path, sizeof(path), "/r/%c", 'a' + i % 26);
		h2b_headers(&t->out[C2S], t->def[C2S], 2 * i + 1, NGHTTP2_FLAG_END_STREAM,
			    H2B_NV(":method", methods[i % 4], ":scheme", "http", ":path", path,
				   "content-type", i % 3 ? "application/grpc" : "application/json",
				   "x-pad", pad));
	}
	assert_int_equal(h2t_send(t, C2S), 0);
	for (i = 0; i < 30; i++) {
		const struct usm_h2_event *ev = h2t_find(t, USM_H2_EV_REQUEST, 2 * i + 1);

		assert_non_null(ev);
		assert_string_equal(ev->stream.method, methods[i % 4]);
		assert_int_equal(ev->stream.grpc, i % 3 != 0);
	}
}

/* The server offers a larger table: the client's encoder may then use it. The setting
 * binds the inflater of the client-to-server direction; the other would refuse. */
static void test_table_size_larger(void **state)
{
	static const uint32_t big[] = {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 8192};
	struct h2t *t = *state;

	nghttp2_hd_deflate_del(t->def[C2S]);
	assert_int_equal(nghttp2_hd_deflate_new(&t->def[C2S], 8192), 0);
	h2t_handshake(t);
	h2b_settings(&t->out[S2C], big, 1);
	assert_int_equal(h2t_send(t, S2C), 0);
	h2b_settings_ack(&t->out[C2S]);
	assert_int_equal(nghttp2_hd_deflate_change_table_size(t->def[C2S], 8192), 0);
	h2t_request(t, 1, "GET", "/a", NGHTTP2_FLAG_END_STREAM);
	h2t_request(t, 3, "PUT", "/b", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, C2S), 0);
	assert_string_equal(h2t_find(t, USM_H2_EV_REQUEST, 3)->stream.method, "PUT");
}

/* The server's second SETTINGS (a larger table) arrives in two pieces, and the
 * client's ACK of its first comes between them: the second's first entry must not be
 * lost to the ACK's shift of the pending ones. The client then acknowledges it and
 * its encoder grows to 8192, which the inflater of its direction must accept. */
static void test_settings_split_around_ack(void **state)
{
	static const uint32_t big[] = {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 8192,
				       NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100};
	struct h2t *t = *state;
	struct h2b_buf second = {0};

	nghttp2_hd_deflate_del(t->def[C2S]);
	assert_int_equal(nghttp2_hd_deflate_new(&t->def[C2S], 8192), 0);
	h2b_preface(&t->out[C2S]);
	h2b_settings(&t->out[C2S], NULL, 0);
	assert_int_equal(h2t_send(t, C2S), 0);
	h2b_settings(&t->out[S2C], NULL, 0); /* the server's first, pending */
	h2b_settings_ack(&t->out[S2C]);
	assert_int_equal(h2t_send(t, S2C), 0);
	h2b_settings(&second, big, 2);
	assert_int_equal(second.len, 9 + 12);
	/* Its header and first entry (the table size)... */
	assert_int_equal(usm_h2_feed(t->c, S2C, 1, second.p, 9 + 6, &h2t_cbs, t), 0);
	/* ... the client's ACK of the server's first SETTINGS ... */
	h2b_settings_ack(&t->out[C2S]);
	assert_int_equal(h2t_send(t, C2S), 0);
	/* ... and its second entry. */
	assert_int_equal(usm_h2_feed(t->c, S2C, 2, second.p + 15, 6, &h2t_cbs, t), 0);
	h2b_free(&second);
	h2b_settings_ack(&t->out[C2S]);
	assert_int_equal(nghttp2_hd_deflate_change_table_size(t->def[C2S], 8192), 0);
	h2t_request(t, 1, "GET", "/a", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, C2S), 0);
	assert_non_null(h2t_find(t, USM_H2_EV_REQUEST, 1));
	assert_int_equal(h2t_stats(t).undecodable, USM_H2_OK);
}

/* A smaller table counts from the ACK: a block sent before it carries no size update,
 * the first one after it must. */
static void test_table_size_update_at_ack(void **state)
{
	static const uint32_t none[] = {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 0};
	struct h2t *t = *state;

	h2t_handshake(t);
	h2b_settings(&t->out[S2C], none, 1);
	assert_int_equal(h2t_send(t, S2C), 0);
	h2t_request(t, 1, "PUT", "/before", NGHTTP2_FLAG_END_STREAM);
	h2b_settings_ack(&t->out[C2S]);
	assert_int_equal(nghttp2_hd_deflate_change_table_size(t->def[C2S], 0), 0);
	h2t_request(t, 3, "PUT", "/after", NGHTTP2_FLAG_END_STREAM);
	h2t_request(t, 5, "PUT", "/again", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, C2S), 0);
	assert_string_equal(h2t_find(t, USM_H2_EV_REQUEST, 1)->stream.path, "/before");
	assert_string_equal(h2t_find(t, USM_H2_EV_REQUEST, 3)->stream.path, "/after");
	assert_string_equal(h2t_find(t, USM_H2_EV_REQUEST, 5)->stream.method, "PUT");
}

/* An encoder that ignores the smaller table is caught, not decoded wrong. */
static void test_table_size_update_missing(void **state)
{
	static const uint32_t none[] = {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 0};
	struct h2t *t = *state;

	h2t_handshake(t);
	h2b_settings(&t->out[S2C], none, 1);
	assert_int_equal(h2t_send(t, S2C), 0);
	h2b_settings_ack(&t->out[C2S]);
	h2t_request(t, 1, "PUT", "/x", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, C2S), -EBADMSG);
	assert_int_equal(h2t_stats(t).undecodable, USM_H2_HPACK_ERROR);
	assert_int_equal(t->nev, 0);
}

static void test_continuation(void **state)
{
	struct h2t *t = *state;
	uint8_t block[256];
	size_t n;

	h2t_handshake(t);
	n = h2b_block(t->def[C2S],
		      H2B_NV(":method", "POST", ":scheme", "https", ":path", "/upload/7",
			     ":authority", "example.com", "user-agent", "test/1.0"),
		      block, sizeof(block));
	assert_true(n > 10);
	h2b_frame(&t->out[C2S], NGHTTP2_HEADERS, NGHTTP2_FLAG_END_STREAM, 1, block, 4);
	h2b_frame(&t->out[C2S], NGHTTP2_CONTINUATION, 0, 1, block + 4, 5);
	h2b_frame(&t->out[C2S], NGHTTP2_CONTINUATION, NGHTTP2_FLAG_END_HEADERS, 1, block + 9,
		  n - 9);
	assert_int_equal(h2t_send(t, C2S), 0);
	assert_int_equal(t->nev, 2);
	assert_string_equal(t->ev[0].stream.method, "POST");
	assert_string_equal(t->ev[0].stream.path, "/upload/*");
	assert_int_equal(t->ev[1].kind, USM_H2_EV_END_STREAM); /* HEADERS' END_STREAM */
}

static void test_padding_and_priority(void **state)
{
	struct h2t *t = *state;
	uint8_t block[128], p[256];
	size_t n;

	h2t_handshake(t);
	/* PADDED: pad length 10, block, 10 bytes of padding. */
	n = h2b_block(t->def[C2S], H2B_NV(":method", "GET", ":path", "/padded"), block, 128);
	p[0] = 10;
	memcpy(p + 1, block, n);
	memset(p + 1 + n, 0, 10);
	h2b_frame(&t->out[C2S], NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_PADDED, 1,
		  p, n + 11);
	/* PRIORITY: dependency (exclusive, stream 1) and weight first. */
	n = h2b_block(t->def[C2S], H2B_NV(":method", "GET", ":path", "/prio"), block, 128);
	memcpy(p, "\x80\x00\x00\x01\x0f", 5);
	memcpy(p + 5, block, n);
	h2b_frame(&t->out[C2S], NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_PRIORITY,
		  3, p, n + 5);
	/* Both, and zero padding. */
	n = h2b_block(t->def[C2S], H2B_NV(":method", "GET", ":path", "/both"), block, 128);
	memcpy(p, "\x00\x00\x00\x00\x03\x10", 6);
	memcpy(p + 6, block, n);
	h2b_frame(&t->out[C2S], NGHTTP2_HEADERS,
		  NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_PADDED | NGHTTP2_FLAG_PRIORITY, 5, p,
		  n + 6);
	assert_int_equal(h2t_send(t, C2S), 0);
	/* A padded DATA frame ends the first stream's response. */
	h2t_response(t, 1, "204", 0);
	memcpy(p,
	       "\x05"
	       "0123456789"
	       "\0\0\0\0\0",
	       16);
	h2b_frame(&t->out[S2C], NGHTTP2_DATA, NGHTTP2_FLAG_PADDED | NGHTTP2_FLAG_END_STREAM, 1, p,
		  16);
	assert_int_equal(h2t_send(t, S2C), 0);
	assert_string_equal(h2t_find(t, USM_H2_EV_REQUEST, 1)->stream.path, "/padded");
	assert_string_equal(h2t_find(t, USM_H2_EV_REQUEST, 3)->stream.path, "/prio");
	assert_string_equal(h2t_find(t, USM_H2_EV_REQUEST, 5)->stream.path, "/both");
	assert_int_equal(h2t_find_nth(t, USM_H2_EV_END_STREAM, 1, 0)->stream.status, 204);
}

static void test_interleaved_streams(void **state)
{
	struct h2t *t = *state;
	const struct usm_h2_event *ev;

	h2t_handshake(t);
	h2t_request(t, 1, "GET", "/a", NGHTTP2_FLAG_END_STREAM);
	h2t_request(t, 3, "POST", "/b", 0);
	h2t_request(t, 5, "DELETE", "/c", NGHTTP2_FLAG_END_STREAM);
	h2b_data(&t->out[C2S], 3, NGHTTP2_FLAG_END_STREAM, 100);
	assert_int_equal(h2t_send(t, C2S), 0);
	assert_int_equal(h2t_stats(t).streams, 3);
	h2t_response(t, 5, "404", NGHTTP2_FLAG_END_STREAM);
	h2t_response(t, 1, "200", 0);
	h2t_response(t, 3, "500", 0);
	h2b_data(&t->out[S2C], 3, NGHTTP2_FLAG_END_STREAM, 5);
	h2b_data(&t->out[S2C], 1, NGHTTP2_FLAG_END_STREAM, 5);
	assert_int_equal(h2t_send(t, S2C), 0);
	ev = h2t_find_nth(t, USM_H2_EV_END_STREAM, 5, 1);
	assert_string_equal(ev->stream.path, "/c");
	assert_int_equal(ev->stream.status, 404);
	ev = h2t_find_nth(t, USM_H2_EV_END_STREAM, 1, 1);
	assert_string_equal(ev->stream.method, "GET");
	assert_int_equal(ev->stream.status, 200);
	ev = h2t_find_nth(t, USM_H2_EV_END_STREAM, 3, 1);
	assert_string_equal(ev->stream.method, "POST");
	assert_int_equal(ev->stream.status, 500);
	assert_int_equal(h2t_stats(t).streams, 0);
}

static void test_grpc_ok(void **state)
{
	struct h2t *t = *state;
	const struct usm_h2_event *ev;

	h2t_handshake(t);
	h2t_grpc_exchange(t, "0");
	assert_int_equal(h2t_send(t, C2S), 0);
	assert_int_equal(h2t_send(t, S2C), 0);
	ev = h2t_find(t, USM_H2_EV_REQUEST, 3);
	assert_true(ev->stream.grpc);
	/* The route as sent; the same path outside gRPC looks like a token (a.b.c). */
	assert_string_equal(ev->stream.path, "/acmecorp.Objectstore.v1beta22/Get");
	assert_false(h2t_find(t, USM_H2_EV_REQUEST, 1)->stream.grpc);
	assert_int_equal(h2t_find(t, USM_H2_EV_RESPONSE, 3)->stream.grpc_status, -1);
	ev = h2t_find(t, USM_H2_EV_TRAILERS, 3);
	assert_int_equal(ev->dir, S2C);
	assert_int_equal(ev->stream.grpc_status, 0);
	ev = h2t_find_nth(t, USM_H2_EV_END_STREAM, 3, 1);
	assert_int_equal(ev->dir, S2C);
	assert_int_equal(ev->stream.status, 200);
	assert_int_equal(ev->stream.grpc_status, 0);
}

/* A request need only claim to be gRPC: a path that is no gRPC route, or one whose
 * names are shaped like ids or secrets, is normalized like any other (its ids would
 * otherwise become rpc_service and rpc_method values). */
static void test_grpc_claimed(void **state)
{
	static const struct {
		const char *path, *want;
	} cases[] = {
		{"/users/550e8400-e29b-41d4-a716-446655440000/token/x1", "/users/*/token/x1"},
		{"/cache.Store/Deadbeef01", "/cache.Store/*"},
		{"/pkg.Svc/0123456789", "/pkg.Svc/*"},
		{"/pkg.Svc/Get?id=7", "/pkg.Svc/Get"},
		{"/pkg..Svc/Get", "/pkg..Svc/Get"}, /* not a route: normalized, the same */
		{"/pkg.Svc/Get/More", "/pkg.Svc/Get/More"},
	};
	struct h2t *t = *state;
	const struct usm_h2_event *ev;
	uint32_t id;
	size_t i;

	h2t_handshake(t);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		id = 1 + 2 * (uint32_t)i;
		h2b_headers(&t->out[C2S], t->def[C2S], id, NGHTTP2_FLAG_END_STREAM,
			    H2B_NV(":method", "POST", ":scheme", "https", ":path", cases[i].path,
				   ":authority", "a", "content-type", "application/grpc"));
		assert_int_equal(h2t_send(t, C2S), 0);
		ev = h2t_find(t, USM_H2_EV_REQUEST, id);
		assert_non_null(ev);
		assert_true(ev->stream.grpc);
		assert_string_equal(ev->stream.path, cases[i].want);
	}
}

/* A :path is read up to USM_H2_PATH_SCAN bytes (a 2-byte HPACK field can repeat a
 * 64 KiB one): past that it is cut, its last segment '*'. */
/* CONNECT has no :path (RFC 9113 8.5): its route is "/", as HTTP/1's
 * "CONNECT example.com:443" normalizes to. */
static void test_connect_route(void **state)
{
	struct h2t *t = *state;
	const struct usm_h2_event *ev;

	h2t_handshake(t);
	h2b_headers(&t->out[C2S], t->def[C2S], 1, 0,
		    H2B_NV(":method", "CONNECT", ":authority", "example.com:443"));
	assert_int_equal(h2t_send(t, C2S), 0);
	ev = h2t_find(t, USM_H2_EV_REQUEST, 1);
	assert_non_null(ev);
	assert_string_equal(ev->stream.method, "CONNECT");
	assert_string_equal(ev->stream.path, "/");
}

static void test_long_path_cut(void **state)
{
	struct h2t *t = *state;
	char path[USM_H2_PATH_SCAN + 100];
	const struct usm_h2_event *ev;

	memset(path, 'x', sizeof(path) - 1);
	memcpy(path, "/api/", 5);
	path[sizeof(path) - 1] = '\0';
	h2t_handshake(t);
	h2t_request(t, 1, "GET", path, NGHTTP2_FLAG_END_STREAM);
	path[USM_H2_PATH_SCAN] = '\0'; /* the same, shorter than the scan: kept */
	h2t_request(t, 3, "GET", path, NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, C2S), 0);
	ev = h2t_find(t, USM_H2_EV_REQUEST, 1);
	assert_string_equal(ev->stream.path, "/api/*");
	ev = h2t_find(t, USM_H2_EV_REQUEST, 3);
	assert_int_equal(strncmp(ev->stream.path, "/api/xxx", 8), 0);
}

static void test_grpc_error(void **state)
{
	struct h2t *t = *state;

	h2t_handshake(t);
	h2t_grpc_exchange(t, "14");
	assert_int_equal(h2t_send(t, C2S), 0);
	assert_int_equal(h2t_send(t, S2C), 0);
	assert_int_equal(h2t_find(t, USM_H2_EV_TRAILERS, 3)->stream.grpc_status, 14);
	assert_int_equal(h2t_find_nth(t, USM_H2_EV_END_STREAM, 3, 1)->stream.grpc_status, 14);
}

/* A response that says it is gRPC to a request that did not: an HTTP exchange, as its
 * row is (the request's claim decides), not a gRPC response. */
static void test_grpc_response_only(void **state)
{
	struct h2t *t = *state;

	h2t_handshake(t);
	h2b_headers(&t->out[C2S], t->def[C2S], 1, NGHTTP2_FLAG_END_STREAM,
		    H2B_NV(":method", "POST", ":scheme", "https", ":path", "/pkg.Svc/Get"));
	h2b_headers(&t->out[S2C], t->def[S2C], 1, NGHTTP2_FLAG_END_STREAM,
		    H2B_NV(":status", "200", "content-type", "application/grpc", "grpc-status",
			   "0"));
	assert_int_equal(h2t_send(t, C2S), 0);
	assert_int_equal(h2t_send(t, S2C), 0);
	assert_false(h2t_find(t, USM_H2_EV_REQUEST, 1)->stream.grpc);
	assert_false(h2t_find(t, USM_H2_EV_RESPONSE, 1)->stream.grpc);
	assert_false(h2t_find_nth(t, USM_H2_EV_END_STREAM, 1, 1)->stream.grpc);
}

static void test_grpc_trailers_only(void **state)
{
	struct h2t *t = *state;
	const struct usm_h2_event *ev;

	h2t_handshake(t);
	h2b_headers(&t->out[C2S], t->def[C2S], 1, NGHTTP2_FLAG_END_STREAM,
		    H2B_NV(":method", "POST", ":scheme", "https", ":path", "/pkg.Svc/Get",
			   "content-type", "application/grpc"));
	h2b_headers(&t->out[S2C], t->def[S2C], 1, NGHTTP2_FLAG_END_STREAM,
		    H2B_NV(":status", "200", "content-type", "application/grpc", "grpc-status",
			   "12", "grpc-message", "unimplemented"));
	assert_int_equal(h2t_send(t, C2S), 0);
	assert_int_equal(h2t_send(t, S2C), 0);
	ev = h2t_find(t, USM_H2_EV_RESPONSE, 1);
	assert_int_equal(ev->stream.grpc_status, 12);
	assert_null(h2t_find(t, USM_H2_EV_TRAILERS, 1));
	ev = h2t_find_nth(t, USM_H2_EV_END_STREAM, 1, 1);
	assert_string_equal(ev->stream.path, "/pkg.Svc/Get");
	assert_int_equal(ev->stream.grpc_status, 12);
}

/* The same exchange whole, byte by byte and in odd chunks: the same events. */
static void test_chunking(void **state)
{
	static const size_t chunks[] = {1, 2, 3, 7, 9, 10, 64};
	struct h2t *t = *state, *u;
	struct h2b_buf saved[2] = {0};
	size_t i, j, k;

	h2t_handshake(t);
	h2t_grpc_exchange(t, "3");
	for (k = 0; k < 2; k++)
		h2b_put(&saved[k], t->out[k].p, t->out[k].len);
	assert_int_equal(h2t_send(t, C2S), 0);
	assert_int_equal(h2t_send(t, S2C), 0);
	for (i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
		assert_int_equal(h2t_setup((void **)&u), 0);
		h2t_handshake(u);
		for (k = 0; k < 2; k++) {
			h2b_put(&u->out[k], saved[k].p, saved[k].len);
			assert_int_equal(h2t_send_chunked(u, k, chunks[i]), 0);
		}
		assert_int_equal(u->nev, t->nev);
		for (j = 0; j < t->nev; j++) {
			assert_int_equal(u->ev[j].kind, t->ev[j].kind);
			assert_int_equal(u->ev[j].stream.id, t->ev[j].stream.id);
			assert_string_equal(u->ev[j].stream.path, t->ev[j].stream.path);
			assert_int_equal(u->ev[j].stream.grpc_status, t->ev[j].stream.grpc_status);
		}
		h2t_teardown((void **)&u);
	}
	h2b_free(&saved[0]);
	h2b_free(&saved[1]);
}

/* Preface, SETTINGS, WINDOW_UPDATE, PRIORITY, three requests and a PING in one feed. */
static void test_many_frames_one_feed(void **state)
{
	struct h2t *t = *state;
	struct h2b_buf *b = &t->out[C2S];

	h2b_preface(b);
	h2b_settings(b, NULL, 0);
	h2b_frame(b, NGHTTP2_WINDOW_UPDATE, 0, 0, "\x00\x0f\x00\x01", 4);
	h2b_frame(b, NGHTTP2_PRIORITY, 0, 3, "\x00\x00\x00\x00\x20", 5);
	h2t_request(t, 1, "GET", "/one", NGHTTP2_FLAG_END_STREAM);
	h2t_request(t, 3, "GET", "/two", NGHTTP2_FLAG_END_STREAM);
	h2t_request(t, 5, "HEAD", "/three", NGHTTP2_FLAG_END_STREAM);
	h2b_frame(b, NGHTTP2_PING, 0, 0, "12345678", 8);
	assert_int_equal(h2t_send(t, C2S), 0);
	assert_int_equal(t->nev, 6);
	assert_string_equal(h2t_find(t, USM_H2_EV_REQUEST, 5)->stream.method, "HEAD");
	assert_int_equal(h2t_stats(t).frames[C2S], 7);
}

/* 1 MiB of DATA in one frame, fed 1000 bytes at a time: nothing of it is kept. */
static void test_data_not_buffered(void **state)
{
	static const uint32_t max_frame[] = {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, 16777215};
	struct h2t *t = *state;
	size_t peak;

	h2t_handshake_with(t, max_frame, 1);
	h2t_request(t, 1, "GET", "/big", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, C2S), 0);
	h2t_response(t, 1, "200", 0);
	assert_int_equal(h2t_send(t, S2C), 0);
	peak = h2t_stats(t).mem_peak;
	h2b_data(&t->out[S2C], 1, NGHTTP2_FLAG_END_STREAM, 1 << 20);
	assert_int_equal(h2t_send_chunked(t, S2C, 1000), 0);
	assert_int_equal(h2t_stats(t).mem_peak, peak);
	assert_true(peak < 32 * 1024);
	assert_non_null(h2t_find_nth(t, USM_H2_EV_END_STREAM, 1, 1));
	assert_int_equal(h2t_stats(t).bytes[S2C] > (1 << 20), 1);
}

static void test_rst_stream(void **state)
{
	struct h2t *t = *state;
	const struct usm_h2_event *ev;

	h2t_handshake(t);
	t->now = 1000;
	h2t_request(t, 1, "GET", "/slow", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, C2S), 0);
	t->now = 5000;
	h2b_rst(&t->out[C2S], 1, NGHTTP2_CANCEL);
	assert_int_equal(h2t_send(t, C2S), 0);
	ev = h2t_find(t, USM_H2_EV_RESET, 1);
	assert_non_null(ev);
	assert_int_equal(ev->dir, C2S);
	assert_int_equal(ev->error_code, NGHTTP2_CANCEL);
	assert_string_equal(ev->stream.path, "/slow");
	assert_int_equal(ev->latency_ns, 4000);
	assert_int_equal(h2t_stats(t).streams, 0);
	/* What still arrives on it belongs to no known request. */
	h2b_data(&t->out[S2C], 1, NGHTTP2_FLAG_END_STREAM, 3);
	assert_int_equal(h2t_send(t, S2C), 0);
	assert_false(h2t_find_nth(t, USM_H2_EV_END_STREAM, 1, 1)->stream.request_seen);
}

/* GOAWAY, and the client's streams above the server's last_stream_id: refused, each
 * said after the GOAWAY with its request, and gone. A client's GOAWAY names the
 * server's streams: the client's stay. */
static void test_goaway(void **state)
{
	struct h2t *t = *state;
	const struct usm_h2_event *ev;
	uint32_t id;

	h2t_handshake(t);
	for (id = 1; id <= 7; id += 2)
		h2t_request(t, id, "GET", "/g", NGHTTP2_FLAG_END_STREAM);
	h2b_goaway(&t->out[C2S], 0, NGHTTP2_NO_ERROR, "");
	assert_int_equal(h2t_send(t, C2S), 0);
	assert_null(h2t_find(t, USM_H2_EV_REFUSED, ~0u));
	assert_int_equal(h2t_stats(t).streams, 4);
	h2b_goaway(&t->out[S2C], 3, NGHTTP2_ENHANCE_YOUR_CALM, "too many requests");
	assert_int_equal(h2t_send(t, S2C), 0);
	ev = h2t_find_nth(t, USM_H2_EV_GOAWAY, ~0u, 1); /* the client's came first */
	assert_non_null(ev);
	assert_int_equal(ev->dir, S2C);
	assert_int_equal(ev->last_stream_id, 3);
	assert_int_equal(ev->error_code, NGHTTP2_ENHANCE_YOUR_CALM);
	assert_int_equal(ev->stream.id, 0);
	assert_null(h2t_find(t, USM_H2_EV_REFUSED, 1));
	assert_null(h2t_find(t, USM_H2_EV_REFUSED, 3));
	for (id = 5; id <= 7; id += 2) {
		ev = h2t_find(t, USM_H2_EV_REFUSED, id);
		assert_non_null(ev);
		assert_true(ev > h2t_find_nth(t, USM_H2_EV_GOAWAY, ~0u, 1));
		assert_true(ev->stream.request_seen);
		assert_string_equal(ev->stream.path, "/g");
		assert_int_equal(ev->dir, S2C);
	}
	assert_int_equal(h2t_stats(t).streams, 2);
}

/* Frames cut anywhere: nothing is reported before the block is whole. */
static void test_truncated_then_rest(void **state)
{
	struct h2t *t = *state;
	struct h2b_buf *b = &t->out[C2S];
	uint8_t all[256];
	size_t n;

	h2t_handshake(t);
	h2t_request(t, 1, "GET", "/split/here", NGHTTP2_FLAG_END_STREAM);
	n = b->len;
	memcpy(all, b->p, n);
	assert_int_equal(usm_h2_feed(t->c, C2S, 0, all, 5, &h2t_cbs, t), 0); /* header, cut */
	assert_int_equal(usm_h2_feed(t->c, C2S, 0, all + 5, 4 + 3, &h2t_cbs, t), 0);
	assert_int_equal(t->nev, 0);
	assert_int_equal(usm_h2_feed(t->c, C2S, 0, all + 12, n - 13, &h2t_cbs, t), 0);
	assert_int_equal(t->nev, 0);
	assert_int_equal(usm_h2_feed(t->c, C2S, 0, all + n - 1, 1, &h2t_cbs, t), 0);
	assert_int_equal(t->nev, 2);
	assert_string_equal(t->ev[0].stream.path, "/split/here");
	b->len = 0;
}

static void test_request_fields(void **state)
{
	struct h2t *t = *state;
	char longp[300];

	h2t_handshake(t);
	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	h2b_headers(&t->out[C2S], t->def[C2S], 1, 0,
		    H2B_NV(":method", "PROPFIND", ":scheme", "ftp", ":path", "/dav/1"));
	h2t_request(t, 3, "GET",
		    "/a\x01"
		    "b",
		    0);
	h2t_request(t, 5, "OPTIONS", "*", 0);
	h2t_request(t, 7, "GET", longp, 0);
	h2t_request(t, 9, "GET", "relative", 0);
	assert_int_equal(h2t_send(t, C2S), 0);
	assert_string_equal(h2t_find(t, USM_H2_EV_REQUEST, 1)->stream.method, USM_METHOD_OTHER);
	assert_string_equal(h2t_find(t, USM_H2_EV_REQUEST, 1)->stream.scheme, "other");
	assert_string_equal(h2t_find(t, USM_H2_EV_REQUEST, 3)->stream.path, "(invalid)");
	assert_string_equal(h2t_find(t, USM_H2_EV_REQUEST, 5)->stream.path, "*");
	assert_int_equal(strlen(h2t_find(t, USM_H2_EV_REQUEST, 7)->stream.path), USM_PATH_MAX - 1);
	assert_string_equal(h2t_find(t, USM_H2_EV_REQUEST, 9)->stream.path, "(invalid)");
}

static void test_interim_response(void **state)
{
	struct h2t *t = *state;

	h2t_handshake(t);
	h2t_request(t, 1, "POST", "/upload", 0);
	assert_int_equal(h2t_send(t, C2S), 0);
	h2t_response(t, 1, "100", 0);
	h2t_response(t, 1, "201", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, S2C), 0);
	assert_null(h2t_find_nth(t, USM_H2_EV_RESPONSE, 1, 1));
	assert_int_equal(h2t_find(t, USM_H2_EV_RESPONSE, 1)->stream.status, 201);
}

/* A promised request is decoded for the table's sake: the response after it refers to
 * the entry the promise inserted. */
static void test_push_promise(void **state)
{
	struct h2t *t = *state;
	uint8_t p[256];
	size_t n;

	h2t_handshake(t);
	h2t_request(t, 1, "GET", "/page", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, C2S), 0);
	memcpy(p, "\x00\x00\x00\x02", 4); /* promised stream 2 */
	n = h2b_block(
		t->def[S2C],
		H2B_NV(":method", "GET", ":path", "/style.css", "grpc-status", "7"), p + 4,
		sizeof(p) - 4);
	h2b_frame(&t->out[S2C], NGHTTP2_PUSH_PROMISE, NGHTTP2_FLAG_END_HEADERS, 1, p, n + 4);
	h2b_headers(&t->out[S2C], t->def[S2C], 1, NGHTTP2_FLAG_END_STREAM,
		    H2B_NV(":status", "200", "grpc-status", "7"));
	assert_int_equal(h2t_send(t, S2C), 0);
	assert_int_equal(h2t_find(t, USM_H2_EV_RESPONSE, 1)->stream.grpc_status, 7);
	assert_int_equal(h2t_stats(t).header_blocks[S2C], 2);
}

static void test_max_frame_size_setting(void **state)
{
	static const uint32_t max_frame[] = {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, 32768};
	struct h2t *t = *state;

	h2t_handshake_with(t, max_frame, 1);
	h2t_request(t, 1, "GET", "/", NGHTTP2_FLAG_END_STREAM);
	h2t_response(t, 1, "200", 0);
	h2b_data(&t->out[S2C], 1, 0, 32768);
	assert_int_equal(h2t_send(t, C2S), 0);
	assert_int_equal(h2t_send(t, S2C), 0);
	/* The client itself still may not send more than the server's default. */
	h2b_data(&t->out[C2S], 3, 0, 16385);
	assert_int_equal(h2t_send(t, C2S), -EPROTO);
}

/* A frame HTTP/2 forbids, after a good start; a second one where it takes two. */
struct bad_case {
	const char *name;
	int dir;
	uint8_t type, flags;
	uint32_t stream;
	const char *payload; /* NULL: len zero bytes */
	size_t len;
	uint8_t type2, flags2;
	uint32_t stream2;
	const char *payload2; /* NULL: no second frame */
	size_t len2;
};

#define EH NGHTTP2_FLAG_END_HEADERS

static const struct bad_case bad_cases[] = {
	{"RST_STREAM of 3 bytes", C2S, NGHTTP2_RST_STREAM, 0, 1, "\0\0\0", 3},
	{"PING of 7 bytes", S2C, NGHTTP2_PING, 0, 0, "1234567", 7},
	{"SETTINGS of 5 bytes", C2S, NGHTTP2_SETTINGS, 0, 0, "\0\x01\0\0\0", 5},
	{"SETTINGS ACK with a payload", S2C, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0, NULL, 6},
	{"WINDOW_UPDATE of 3 bytes", C2S, NGHTTP2_WINDOW_UPDATE, 0, 0, "\0\0\x01", 3},
	{"PRIORITY of 4 bytes", C2S, NGHTTP2_PRIORITY, 0, 1, NULL, 4},
	{"GOAWAY of 7 bytes", S2C, NGHTTP2_GOAWAY, 0, 0, NULL, 7},
	{"CONTINUATION without HEADERS", C2S, NGHTTP2_CONTINUATION, EH, 1, "\x82", 1},
	{"HEADERS on stream 0", C2S, NGHTTP2_HEADERS, EH, 0, "\x82\x84", 2},
	{"DATA on stream 0", S2C, NGHTTP2_DATA, 0, 0, NULL, 4},
	{"frame over the max size", C2S, NGHTTP2_DATA, 0, 1, NULL, 16385},
	{"padding longer than the payload", C2S, NGHTTP2_HEADERS, EH | NGHTTP2_FLAG_PADDED, 1,
	 "\x05\x82\x84", 3},
	{"PING inside a header block", C2S, NGHTTP2_HEADERS, 0, 1, "\x82", 1, NGHTTP2_PING, 0, 0,
	 "12345678", 8},
	{"CONTINUATION of another stream", C2S, NGHTTP2_HEADERS, 0, 1, "\x82", 1,
	 NGHTTP2_CONTINUATION, EH, 3, "\x84", 1},
	{"PUSH_PROMISE from the client", C2S, NGHTTP2_PUSH_PROMISE, EH, 1, "\0\0\0\x02\x82", 5},
	{"SETTINGS_MAX_FRAME_SIZE 1000", S2C, NGHTTP2_SETTINGS, 0, 0, "\0\x05\0\0\x03\xe8", 6},
};

static void bad_frame(struct h2b_buf *b, uint8_t type, uint8_t flags, uint32_t stream,
		      const char *payload, size_t len)
{
	uint8_t *zero = calloc(1, len + 1);

	assert_non_null(zero);
	h2b_frame(b, type, flags, stream, payload ? (const void *)payload : zero, len);
	free(zero);
}

static void test_malformed(void **state)
{
	const struct bad_case *bc;
	struct h2t *t;

	(void)state;
	for (bc = bad_cases; bc < bad_cases + sizeof(bad_cases) / sizeof(bad_cases[0]); bc++) {
		assert_int_equal(h2t_setup((void **)&t), 0);
		h2t_handshake(t);
		bad_frame(&t->out[bc->dir], bc->type, bc->flags, bc->stream, bc->payload, bc->len);
		if (bc->payload2)
			bad_frame(&t->out[bc->dir], bc->type2, bc->flags2, bc->stream2,
				  bc->payload2, bc->len2);
		if (h2t_send(t, bc->dir) != -EPROTO)
			fail_msg("%s: not a protocol error", bc->name);
		assert_int_equal(h2t_stats(t).undecodable, USM_H2_PROTOCOL_ERROR);
		/* It stays so: a valid request later is not decoded. */
		h2t_request(t, 101, "GET", "/later", NGHTTP2_FLAG_END_STREAM);
		assert_int_equal(h2t_send(t, C2S), -EPROTO);
		if (t->nev)
			fail_msg("%s: %zu events", bc->name, t->nev);
		h2t_teardown((void **)&t);
	}
}

/* Joined mid-way: the client's bytes start with a HEADERS frame. Nothing is reported,
 * even though the frames after are valid and some of them would decode. */
static void test_midstream_client(void **state)
{
	struct h2t *t = *state, *u;
	struct h2b_buf saved = {0};

	h2t_handshake(t);
	h2t_request(t, 1, "PATCH", "/first", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, C2S), 0);
	/* The next requests use the dynamic table the first one filled. */
	h2t_request(t, 3, "PATCH", "/second", NGHTTP2_FLAG_END_STREAM);
	h2t_request(t, 5, "GET", "/third", NGHTTP2_FLAG_END_STREAM);
	h2b_put(&saved, t->out[C2S].p, t->out[C2S].len);
	assert_int_equal(h2t_setup((void **)&u), 0);
	h2b_put(&u->out[C2S], saved.p, saved.len);
	assert_int_equal(h2t_send(u, C2S), -ENODATA);
	assert_int_equal(h2t_stats(u).undecodable, USM_H2_MIDSTREAM);
	assert_int_equal(h2t_stats(u).count[USM_H2_MIDSTREAM], 1);
	h2t_request(u, 7, "GET", "/fourth", 0);
	assert_int_equal(h2t_send(u, C2S), -ENODATA);
	assert_int_equal(u->nev, 0);
	h2t_teardown((void **)&u);
	h2b_free(&saved);
}

static void test_midstream_server(void **state)
{
	struct h2t *t = *state, *u;

	h2t_response(t, 1, "200", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, S2C), -ENODATA);
	assert_int_equal(h2t_stats(t).undecodable, USM_H2_MIDSTREAM);
	assert_int_equal(t->nev, 0);
	/* HTTP/1.1 fed to it is not HTTP/2 either. */
	assert_int_equal(h2t_setup((void **)&u), 0);
	assert_int_equal(usm_h2_feed(u->c, C2S, 0, "GET / HTTP/1.1\r\n", 16, &h2t_cbs, u),
			 -ENODATA);
	h2t_teardown((void **)&u);
}

static void test_hpack_error(void **state)
{
	static const uint8_t garbage[][4] = {
		{0x80},			  /* index 0 */
		{0xc6},			  /* index 70: the dynamic table is empty */
		{0x40, 0x85, 0xff, 0xff}, /* a Huffman name cut short */
	};
	struct h2t *t;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
		assert_int_equal(h2t_setup((void **)&t), 0);
		h2t_handshake(t);
		h2b_frame(&t->out[C2S], NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1, garbage[i],
			  garbage[i][0] == 0x40 ? 4 : 1);
		assert_int_equal(h2t_send(t, C2S), -EBADMSG);
		assert_int_equal(h2t_stats(t).undecodable, USM_H2_HPACK_ERROR);
		assert_int_equal(t->nev, 0);
		assert_int_equal(h2t_stats(t).streams, 0);
		h2t_teardown((void **)&t);
	}
}

/* A header block over USM_H2_HEADER_BLOCK_MAX, in CONTINUATIONs; every field in it
 * would fit nghttp2's own 64 KiB limit. */
static void test_headers_too_large(void **state)
{
	struct h2t *t = *state;
	size_t n, off, k;
	uint8_t *block;
	char *big;

	h2t_handshake(t);
	big = malloc(40000);
	block = malloc(80000);
	assert_non_null(big);
	assert_non_null(block);
	memset(big, 'x', 39999);
	big[39999] = '\0';
	n = h2b_block(t->def[C2S],
		      H2B_NV(":method", "GET", ":path", "/", "cookie", big, "x-more", big), block,
		      80000);
	assert_true(n > USM_H2_HEADER_BLOCK_MAX);
	h2b_frame(&t->out[C2S], NGHTTP2_HEADERS, 0, 1, block, 16384);
	for (off = 16384; off < n; off += k) {
		k = n - off < 16384 ? n - off : 16384;
		h2b_frame(&t->out[C2S], NGHTTP2_CONTINUATION,
			  off + k == n ? NGHTTP2_FLAG_END_HEADERS : 0, 1, block + off, k);
	}
	assert_int_equal(h2t_send(t, C2S), -EMSGSIZE);
	assert_int_equal(h2t_stats(t).undecodable, USM_H2_HEADERS_TOO_LARGE);
	assert_int_equal(t->nev, 0);
	free(big);
	free(block);
}

static void test_too_many_streams(void **state)
{
	struct h2t *t = *state;
	const struct usm_h2_event *ev;
	struct usm_h2_stats st;
	uint32_t i;

	h2t_handshake(t);
	for (i = 0; i < USM_H2_STREAMS_MAX + 2; i++)
		h2t_request(t, 2 * i + 1, "GET", "/wait", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, C2S), 0);
	st = h2t_stats(t);
	assert_int_equal(st.streams, USM_H2_STREAMS_MAX);
	assert_int_equal(st.count[USM_H2_TOO_MANY_STREAMS], 2);
	assert_int_equal(st.undecodable, USM_H2_OK);
	/* Each dropped stream is said, as it was, before the request that pushed it out. */
	ev = h2t_find(t, USM_H2_EV_DROPPED, 1);
	assert_non_null(ev);
	assert_true(ev->stream.request_seen);
	assert_string_equal(ev->stream.path, "/wait");
	assert_true(ev < h2t_find(t, USM_H2_EV_REQUEST, 2 * USM_H2_STREAMS_MAX + 1));
	assert_non_null(h2t_find(t, USM_H2_EV_DROPPED, 3));
	assert_null(h2t_find(t, USM_H2_EV_DROPPED, 5));
	h2t_response(t, 1, "200", NGHTTP2_FLAG_END_STREAM); /* the oldest: dropped */
	h2t_response(t, 5, "200", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, S2C), 0);
	assert_false(h2t_find(t, USM_H2_EV_RESPONSE, 1)->stream.request_seen);
	assert_true(h2t_find(t, USM_H2_EV_RESPONSE, 5)->stream.request_seen);
	assert_string_equal(h2t_find(t, USM_H2_EV_RESPONSE, 5)->stream.path, "/wait");
}

/* A client's trailers carry a grpc-status (a crafted or confused client): the stream's
 * status is the server's alone, and a server that gave none (a proxy's 503) leaves it
 * unset. */
static void test_grpc_status_client_trailers(void **state)
{
	struct h2t *t = *state;
	const struct usm_h2_event *ev;

	h2t_handshake(t);
	h2b_headers(&t->out[C2S], t->def[C2S], 1, 0,
		    H2B_NV(":method", "POST", ":scheme", "https", ":path", "/pkg.Svc/Put",
			   "content-type", "application/grpc"));
	h2b_data(&t->out[C2S], 1, 0, 5);
	h2b_headers(&t->out[C2S], t->def[C2S], 1, NGHTTP2_FLAG_END_STREAM,
		    H2B_NV("grpc-status", "0"));
	h2t_response(t, 1, "503", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, C2S), 0);
	assert_int_equal(h2t_send(t, S2C), 0);
	ev = h2t_find_nth(t, USM_H2_EV_END_STREAM, 1, 1);
	assert_non_null(ev);
	assert_int_equal(ev->dir, S2C);
	assert_int_equal(ev->stream.status, 503);
	assert_int_equal(ev->stream.grpc_status, -1);
}

/* A second final response (a stream error) that ends the stream still ends it: the
 * exchange the first answered completes, timed, and the stream is not kept. */
static void test_second_final_response_ends(void **state)
{
	struct h2t *t = *state;
	const struct usm_h2_event *ev;

	h2t_handshake(t);
	t->now = 100;
	h2t_request(t, 1, "GET", "/twice", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, C2S), 0);
	t->now = 300;
	h2t_response(t, 1, "200", 0);
	h2t_response(t, 1, "500", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, S2C), 0);
	assert_int_equal(h2t_stats(t).count[USM_H2_STREAM_ERROR], 1);
	ev = h2t_find_nth(t, USM_H2_EV_END_STREAM, 1, 1);
	assert_non_null(ev);
	assert_int_equal(ev->dir, S2C);
	assert_int_equal(ev->stream.status, 200);
	assert_int_equal(ev->latency_ns, 200);
	assert_int_equal(h2t_stats(t).streams, 0);
}

/* Streams the server answered whole, their clients still sending (gRPC client streams),
 * fill the table: a new stream pushes the oldest of them out unsaid, not a request
 * still waiting, and nothing is counted as dropped. */
static void test_too_many_streams_answered_first(void **state)
{
	struct h2t *t = *state;
	struct usm_h2_stats st;
	uint32_t i;

	h2t_handshake(t);
	h2t_request(t, 1, "GET", "/wait", NGHTTP2_FLAG_END_STREAM); /* the oldest, waiting */
	for (i = 1; i < USM_H2_STREAMS_MAX; i++)
		h2t_request(t, 2 * i + 1, "POST", "/up", 0);
	assert_int_equal(h2t_send(t, C2S), 0);
	for (i = 1; i < USM_H2_STREAMS_MAX; i++)
		h2t_response(t, 2 * i + 1, "200", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, S2C), 0);
	assert_int_equal(h2t_stats(t).streams, USM_H2_STREAMS_MAX);
	h2t_request(t, 2 * USM_H2_STREAMS_MAX + 1, "GET", "/new", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, C2S), 0);
	st = h2t_stats(t);
	assert_int_equal(st.streams, USM_H2_STREAMS_MAX);
	assert_int_equal(st.count[USM_H2_TOO_MANY_STREAMS], 0);
	assert_null(h2t_find(t, USM_H2_EV_DROPPED, ~0u));
	/* The waiting request is still paired with its answer. */
	h2t_response(t, 1, "200", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, S2C), 0);
	assert_true(h2t_find(t, USM_H2_EV_RESPONSE, 1)->stream.request_seen);
	assert_string_equal(h2t_find(t, USM_H2_EV_RESPONSE, 1)->stream.path, "/wait");
}

/* A request on a stream id used before (its exchange over and forgotten), on an even
 * id, or below the last a client opened: stream errors, no request; the next odd id
 * above is one. */
static void test_client_stream_ids(void **state)
{
	struct h2t *t = *state;

	h2t_handshake(t);
	h2t_request(t, 5, "GET", "/a", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, C2S), 0);
	h2t_response(t, 5, "200", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, S2C), 0);
	assert_int_equal(h2t_stats(t).streams, 0);
	h2t_request(t, 5, "GET", "/again", NGHTTP2_FLAG_END_STREAM);
	h2t_request(t, 6, "GET", "/even", NGHTTP2_FLAG_END_STREAM);
	h2t_request(t, 3, "GET", "/below", NGHTTP2_FLAG_END_STREAM);
	h2t_request(t, 7, "GET", "/next", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, C2S), 0);
	assert_null(h2t_find_nth(t, USM_H2_EV_REQUEST, 5, 1));
	assert_null(h2t_find(t, USM_H2_EV_REQUEST, 6));
	assert_null(h2t_find(t, USM_H2_EV_REQUEST, 3));
	assert_string_equal(h2t_find(t, USM_H2_EV_REQUEST, 7)->stream.path, "/next");
	assert_int_equal(h2t_stats(t).count[USM_H2_STREAM_ERROR], 3);
	assert_int_equal(h2t_stats(t).streams, 1);
}

/* A server's GOAWAY below streams it has already answered: those were not refused. */
static void test_goaway_after_answers(void **state)
{
	struct h2t *t = *state;

	h2t_handshake(t);
	h2t_request(t, 1, "POST", "/a", 0);
	h2t_request(t, 3, "POST", "/b", 0);
	assert_int_equal(h2t_send(t, C2S), 0);
	h2t_response(t, 3, "200", 0); /* answered, its body still coming */
	h2b_goaway(&t->out[S2C], 0, NGHTTP2_NO_ERROR, "");
	assert_int_equal(h2t_send(t, S2C), 0);
	assert_non_null(h2t_find(t, USM_H2_EV_REFUSED, 1));
	assert_null(h2t_find(t, USM_H2_EV_REFUSED, 3));
	assert_int_equal(h2t_stats(t).streams, 1);
}

/* A peer whose table needs more than USM_H2_MEM_MAX: undecodable, memory given back. */
static void test_memory_bound(void **state)
{
	static const uint32_t huge[] = {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 4 << 20};
	struct h2t *t = *state;
	char name[16], value[1001];
	struct usm_h2_stats st;
	int i, rc = 0;

	nghttp2_hd_deflate_del(t->def[S2C]);
	assert_int_equal(nghttp2_hd_deflate_new(&t->def[S2C], 4 << 20), 0);
	h2t_handshake_with(t, huge, 1);
	assert_int_equal(nghttp2_hd_deflate_change_table_size(t->def[S2C], 4 << 20), 0);
	for (i = 0; i < 4000 && !rc; i++) {
		snprintf(name, sizeof(name), "x-h%d", i);
		memset(value, 'A' + i % 26, 1000);
		snprintf(value, 10, "%09d", i);
		value[9] = '-';
		value[1000] = '\0';
		h2b_headers(&t->out[S2C], t->def[S2C], 1, 0, H2B_NV(":status", "200", name, value));
		rc = h2t_send(t, S2C);
	}
	st = h2t_stats(t);
	assert_int_equal(rc, -ENOMEM);
	assert_int_equal(st.undecodable, USM_H2_NO_MEMORY);
	assert_true(st.mem_peak <= USM_H2_MEM_MAX);
	assert_true(st.mem < 4096); /* the tables went with the decoding */
}

/* Bytes the probe did not capture: fine inside DATA, fatal inside a header block. */
static void test_gap(void **state)
{
	struct h2t *t = *state;
	struct h2b_buf *b = &t->out[S2C];

	h2t_handshake(t);
	h2t_request(t, 1, "GET", "/file", NGHTTP2_FLAG_END_STREAM);
	assert_int_equal(h2t_send(t, C2S), 0);
	h2t_response(t, 1, "200", 0);
	h2b_data(b, 1, NGHTTP2_FLAG_END_STREAM, 10000);
	b->len -= 9900; /* the probe kept the frame header and 100 bytes */
	assert_int_equal(h2t_send(t, S2C), 0);
	assert_null(h2t_find_nth(t, USM_H2_EV_END_STREAM, 1, 1));
	assert_int_equal(usm_h2_feed_gap(t->c, S2C, 0, 9900, &h2t_cbs, t), 0);
	assert_non_null(h2t_find_nth(t, USM_H2_EV_END_STREAM, 1, 1));
	/* A gap over the next frame's header loses it. */
	assert_int_equal(usm_h2_feed_gap(t->c, S2C, 0, 3, &h2t_cbs, t), -ESPIPE);
	assert_int_equal(h2t_stats(t).undecodable, USM_H2_LOST_BYTES);
}

static void test_first_request(void **state)
{
	struct h2t *t = *state;
	struct usm_h2_stream_info r;
	struct h2b_buf *b = &t->out[C2S];

	h2t_first_packet(b, t->def[C2S]);
	assert_int_equal(usm_h2_decode_first_request(b->p, b->len, &r), USM_H2_FIRST_REQUEST);
	assert_int_equal(r.id, 1);
	assert_true(r.request_seen);
	assert_string_equal(r.method, "GET");
	assert_string_equal(r.path, "/v1/orders/*");
	assert_string_equal(r.scheme, "https");
	assert_int_equal(r.grpc_status, -1);
	/* Whatever follows in the packet does not matter. */
	h2b_put(b, "\xff\xff\xff\xff", 4);
	assert_int_equal(usm_h2_decode_first_request(b->p, b->len, &r), USM_H2_FIRST_REQUEST);
}

static void test_first_request_cut(void **state)
{
	struct h2t *t = *state;
	struct usm_h2_stream_info r;
	struct h2b_buf *b = &t->out[C2S];
	size_t headers_at = 24 + 9 + 18 + 9 + 4, cut;
	bool path_seen = false;

	h2t_first_packet(b, t->def[C2S]);
	assert_int_equal(usm_h2_decode_first_request(b->p, 10, &r), USM_H2_FIRST_TRUNCATED);
	assert_int_equal(usm_h2_decode_first_request(b->p, 30, &r), USM_H2_FIRST_TRUNCATED);
	assert_int_equal(usm_h2_decode_first_request(b->p, headers_at + 5, &r),
			 USM_H2_FIRST_TRUNCATED);
	/* Cut anywhere in the block: what is there holds. :method and :path come first,
	 * so there is a cut with both and no :scheme yet. */
	for (cut = headers_at + 9; cut < b->len; cut++) {
		assert_int_equal(usm_h2_decode_first_request(b->p, cut, &r), USM_H2_FIRST_PARTIAL);
		assert_int_equal(r.id, 1);
		assert_false(r.request_seen);
		if (r.path[0] && !path_seen) {
			path_seen = true;
			assert_string_equal(r.method, "GET");
			assert_string_equal(r.path, "/v1/orders/*");
			assert_string_equal(r.scheme, "");
		}
	}
	assert_true(path_seen);
	/* Not a connection start. */
	assert_int_equal(usm_h2_decode_first_request(b->p + headers_at, b->len - headers_at, &r),
			 USM_H2_FIRST_NEEDS_STATE);
	assert_int_equal(usm_h2_decode_first_request("GET / HTTP/1.1\r\n\r\n", 18, &r),
			 USM_H2_FIRST_NEEDS_STATE);
	assert_int_equal(usm_h2_decode_first_request("PRX", 3, &r), USM_H2_FIRST_NEEDS_STATE);
	/* A broken block. */
	b->p[headers_at + 9] = 0x80;
	assert_int_equal(usm_h2_decode_first_request(b->p, b->len, &r), USM_H2_FIRST_MALFORMED);
}

static void test_api_edges(void **state)
{
	struct h2t *t = *state;
	int r, s;

	assert_int_equal(usm_h2_feed(NULL, C2S, 0, "x", 1, NULL, NULL), -EINVAL);
	assert_int_equal(usm_h2_feed(t->c, 2, 0, "x", 1, NULL, NULL), -EINVAL);
	assert_int_equal(usm_h2_feed(t->c, C2S, 0, NULL, 1, NULL, NULL), -EINVAL);
	assert_int_equal(usm_h2_feed(t->c, C2S, 0, NULL, 0, NULL, NULL), 0);
	usm_h2_conn_free(NULL);
	/* No callbacks: decoded all the same. */
	h2t_handshake(t);
	h2t_request(t, 1, "GET", "/", 0);
	assert_int_equal(usm_h2_feed(t->c, C2S, 0, t->out[C2S].p, t->out[C2S].len, NULL, NULL), 0);
	assert_int_equal(h2t_stats(t).streams, 1);
	t->out[C2S].len = 0;
	for (r = 0; r < USM_H2_REASON_MAX; r++) {
		assert_string_not_equal(usm_h2_reason_str(r), "unknown");
		for (s = 0; s < r; s++)
			assert_string_not_equal(usm_h2_reason_str(r), usm_h2_reason_str(s));
	}
}

static void write_seed(const char *dir, const char *name, struct h2b_buf *b)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b->p, 1, b->len, f), b->len);
	fclose(f);
}

static void seed_of(struct h2t *t, struct h2b_buf *seed, size_t max)
{
	h2b_fuzz_chunks(seed, C2S, t->out[C2S].p, t->out[C2S].len, max);
	h2b_fuzz_chunks(seed, S2C, t->out[S2C].p, t->out[S2C].len, max);
	t->out[C2S].len = t->out[S2C].len = 0;
}

/* `test_usm_http2 --write-corpus DIR`: the fuzz target's seeds (tests/fuzz/corpus/http2),
 * real exchanges in its input format. */
static int write_corpus(const char *dir)
{
	struct h2b_buf seed = {0};
	struct h2t *t;

	h2t_setup((void **)&t);
	h2b_preface(&t->out[C2S]);
	h2b_settings(&t->out[C2S], NULL, 0);
	h2b_settings(&t->out[S2C], NULL, 0);
	h2b_settings_ack(&t->out[S2C]);
	h2b_settings_ack(&t->out[C2S]);
	seed_of(t, &seed, 126);
	h2t_request(t, 1, "GET", "/index.html", NGHTTP2_FLAG_END_STREAM);
	h2t_response(t, 1, "200", 0);
	h2b_data(&t->out[S2C], 1, NGHTTP2_FLAG_END_STREAM | NGHTTP2_FLAG_PADDED, 40);
	h2b_rst(&t->out[C2S], 3, NGHTTP2_CANCEL);
	seed_of(t, &seed, 50);
	write_seed(dir, "get", &seed);
	h2t_grpc_exchange(t, "13");
	h2b_goaway(&t->out[S2C], 3, 0, "bye");
	seed_of(t, &seed, 17);
	write_seed(dir, "grpc", &seed);
	seed.len = 0;
	h2t_first_packet(&t->out[C2S], t->def[C2S]);
	seed_of(t, &seed, 126);
	write_seed(dir, "first_packet", &seed);
	h2b_free(&seed);
	return h2t_teardown((void **)&t);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_preface, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_get_exchange, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_huffman, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_dynamic_table_eviction, h2t_setup,
						h2t_teardown),
		cmocka_unit_test_setup_teardown(test_settings_split_around_ack, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_table_size_larger, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_table_size_update_at_ack, h2t_setup,
						h2t_teardown),
		cmocka_unit_test_setup_teardown(test_table_size_update_missing, h2t_setup,
						h2t_teardown),
		cmocka_unit_test_setup_teardown(test_continuation, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_padding_and_priority, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_interleaved_streams, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_grpc_ok, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_grpc_error, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_grpc_trailers_only, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_grpc_response_only, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_chunking, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_many_frames_one_feed, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_data_not_buffered, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_rst_stream, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_goaway, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_truncated_then_rest, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_request_fields, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_interim_response, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_push_promise, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_max_frame_size_setting, h2t_setup,
						h2t_teardown),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test_setup_teardown(test_midstream_client, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_midstream_server, h2t_setup, h2t_teardown),
		cmocka_unit_test(test_hpack_error),
		cmocka_unit_test_setup_teardown(test_headers_too_large, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_too_many_streams, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_grpc_status_client_trailers, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_second_final_response_ends, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_too_many_streams_answered_first, h2t_setup,
						h2t_teardown),
		cmocka_unit_test_setup_teardown(test_goaway_after_answers, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_client_stream_ids, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_grpc_claimed, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_connect_route, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_long_path_cut, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_memory_bound, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_gap, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_first_request, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_first_request_cut, h2t_setup, h2t_teardown),
		cmocka_unit_test_setup_teardown(test_api_edges, h2t_setup, h2t_teardown),
	};

	if (argc == 3 && !strcmp(argv[1], "--write-corpus"))
		return write_corpus(argv[2]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
