// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Pairing requests with responses per connection, side and stream, and the bounded
 * endpoint table: per-process and table-wide caps, overflow rows, expiry, sweeping. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "user/modules/usm/endpoints.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static struct usm_conn_key tls(uint32_t pid, uint64_t conn)
{
	struct usm_conn_key k;

	memset(&k, 0, sizeof(k));
	k.pid = pid;
	k.conn = conn;
	k.side = USM_SIDE_CLIENT;
	return k;
}

static struct usm_conn_key sided(uint32_t pid, enum usm_side side, uint64_t conn)
{
	struct usm_conn_key k = tls(pid, conn);

	k.side = side;
	return k;
}

/* A packet-seen connection: 10.0.0.1:40000 -> 10.0.0.2:80. */
static struct usm_conn_key tuple(uint32_t pid, enum usm_side side)
{
	struct usm_conn_key k;

	memset(&k, 0, sizeof(k));
	k.pid = pid;
	k.family = 4;
	k.client_port = 40000;
	k.server_port = 80;
	memcpy(k.client_addr, "\x0a\x00\x00\x01", 4);
	memcpy(k.server_addr, "\x0a\x00\x00\x02", 4);
	k.side = side;
	return k;
}

static void request_on(struct usm_endpoints *e, struct usm_conn_key k, enum usm_proto proto,
		       const char *line, uint64_t t, const struct usm_conn_addr *conn)
{
	struct usm_http_start m;

	assert_int_equal(usm_http_parse(line, strlen(line), &m), USM_HTTP_REQUEST);
	usm_endpoints_message(e, &k, proto, t, &m, conn);
}

static void response_on(struct usm_endpoints *e, struct usm_conn_key k, enum usm_proto proto,
			int status, uint64_t t, const struct usm_conn_addr *conn)
{
	struct usm_http_start m;
	char line[32];

	snprintf(line, sizeof(line), "HTTP/1.1 %d X\r\n", status);
	assert_int_equal(usm_http_parse(line, strlen(line), &m), USM_HTTP_RESPONSE);
	usm_endpoints_message(e, &k, proto, t, &m, conn);
}

static void request(struct usm_endpoints *e, struct usm_conn_key k, const char *line, uint64_t t)
{
	request_on(e, k, USM_PROTO_HTTPS, line, t, NULL);
}

static void response(struct usm_endpoints *e, struct usm_conn_key k, int status, uint64_t t)
{
	response_on(e, k, USM_PROTO_HTTPS, status, t, NULL);
}

/* A request and its response, dt apart, ending at t. */
static void exchange(struct usm_endpoints *e, struct usm_conn_key k, const char *line, int status,
		     uint64_t t, uint64_t dt)
{
	request(e, k, line, t - dt);
	response(e, k, status, t);
}

static struct usm_endpoint_row *find(struct usm_endpoint_row *rows, size_t n, uint32_t pid,
				     enum usm_side side, const char *path, int status)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (rows[i].pid == pid && rows[i].side == side && !strcmp(rows[i].path, path) &&
		    rows[i].status == status)
			return &rows[i];
	}
	return NULL;
}

static uint64_t counted(struct usm_endpoint_row *rows, size_t n)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < n; i++)
		sum += rows[i].latency.count;
	return sum;
}

/* Every counter, exactly; the ones not named are 0. */
#define STATS(...) (&(struct usm_endpoints_stats){__VA_ARGS__})

static void assert_stats(struct usm_endpoints *e, const struct usm_endpoints_stats *want)
{
	struct usm_endpoints_stats st;

	usm_endpoints_stats(e, &st);
	assert_int_equal(st.requests, want->requests);
	assert_int_equal(st.responses, want->responses);
	assert_int_equal(st.paired, want->paired);
	assert_int_equal(st.unanswered, want->unanswered);
	assert_int_equal(st.orphan_responses, want->orphan_responses);
	assert_int_equal(st.interim, want->interim);
	assert_int_equal(st.evicted, want->evicted);
	assert_int_equal(st.proc_overflow, want->proc_overflow);
	assert_int_equal(st.table_overflow, want->table_overflow);
	assert_int_equal(st.exited_folded, want->exited_folded);
	assert_int_equal(st.expired, want->expired);
	assert_int_equal(st.pending, want->pending);
	assert_int_equal(st.rows, want->rows);
}

static void test_pairs_per_connection(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(NULL);
	struct usm_endpoint_row *rows, *r;
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
	r = find(rows, n, 10, USM_SIDE_CLIENT, "/items/*", 200);
	assert_non_null(r);
	assert_string_equal(r->method, "GET");
	assert_int_equal(r->proto, USM_PROTO_HTTPS);
	assert_int_equal(r->latency.count, 2);
	assert_int_equal(r->latency.sum_ns, 4000 + 1000);
	assert_int_equal(r->last_ns, 5000);
	r = find(rows, n, 11, USM_SIDE_CLIENT, "/login", 401);
	assert_non_null(r);
	assert_int_equal(r->latency.sum_ns, 100);
	free(rows);
	assert_stats(e, STATS(.requests = 3, .responses = 3, .paired = 3, .rows = 2));
	usm_endpoints_free(e);
}

/*
 * Churn on a small table (64 pending, 128 slots): requests on random streams of a few
 * connections, answered in random order, some never, against a model of what is
 * pending. Every answer must find its request (latency = its own), every other
 * response be an orphan: the slots' re-seating after removals, across the table's
 * wrap-around, and the pool's reuse of entries, seen from outside.
 */
static void test_pending_churn(void **state)
{
	enum { MAXP = 64, KEYS = 96, ROUNDS = 20000 };
	struct usm_endpoints *e =
		usm_endpoints_new(&(struct usm_endpoints_limits){.max_pending = MAXP});
	uint64_t sent[KEYS] = {0}, paired = 0, orphans = 0, requests = 0, unanswered = 0;
	uint64_t latency = 0, got_latency = 0;
	struct usm_endpoints_stats st;
	struct usm_endpoint_row *rows;
	unsigned int seed = 12345, i, pending = 0;
	size_t n, r;

	(void)state;
	for (i = 0; i < ROUNDS; i++) {
		unsigned int k = (unsigned int)rand_r(&seed) % KEYS;
		struct usm_conn_key key = tls(10 + k % 3, 1 + k % 5);

		key.stream = 1 + 2 * k;
		if (!sent[k] && pending < MAXP && rand_r(&seed) % 2) {
			request(e, key, "GET /x HTTP/1.1\r\n", 1000 + i);
			sent[k] = 1000 + i;
			pending++;
			requests++;
		} else if (sent[k]) {
			response(e, key, 200, 5000 + i);
			latency += 5000 + i - sent[k];
			sent[k] = 0;
			pending--;
			paired++;
		} else {
			response(e, key, 200, 5000 + i);
			orphans++;
		}
	}
	usm_endpoints_stats(e, &st);
	assert_int_equal(st.requests, requests);
	assert_int_equal(st.paired, paired);
	assert_int_equal(st.orphan_responses, orphans);
	assert_int_equal(st.unanswered, unanswered);
	assert_int_equal(st.evicted, 0);
	assert_int_equal(st.pending, pending);
	/* each response paired with its own request: the latencies add up */
	n = usm_endpoints_rows(e, &rows);
	for (r = 0; r < n; r++)
		got_latency += rows[r].latency.sum_ns;
	assert_int_equal(got_latency, latency);
	free(rows);
	usm_endpoints_free(e);
}

static void test_unanswered_and_orphans(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(NULL);
	struct usm_endpoint_row *rows;

	(void)state;
	response(e, tls(10, 1), 200, 10); /* nothing asked */
	request(e, tls(10, 1), "GET /a HTTP/1.1\r\n", 100);
	request(e, tls(10, 1), "GET /b HTTP/1.1\r\n", 200); /* replaces /a */
	response(e, tls(10, 1), 204, 300);
	response(e, tls(10, 1), 204, 400); /* second response: orphan */
	assert_int_equal(usm_endpoints_rows(e, &rows), 1);
	assert_string_equal(rows[0].path, "/b");
	assert_int_equal(rows[0].latency.sum_ns, 100);
	free(rows);
	assert_stats(e, STATS(.requests = 2, .responses = 3, .paired = 1, .unanswered = 1,
			      .orphan_responses = 2, .rows = 1));
	usm_endpoints_free(e);
}

/* "Expect: 100-continue" (curl's large POSTs) and 103 Early Hints: the interim status
 * line is not the answer. The row has the final status and the latency to it; the
 * interim one is counted apart, neither a response nor an orphan. 101 Switching
 * Protocols ends the HTTP/1 exchange: it pairs. */
static void test_interim_responses(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(NULL);
	struct usm_endpoint_row *rows, *r;
	size_t n;

	(void)state;
	request(e, tls(10, 1), "POST /upload HTTP/1.1\r\n", 100);
	response(e, tls(10, 1), 100, 150);
	response(e, tls(10, 1), 201, 400);
	request(e, tls(10, 2), "GET /page HTTP/1.1\r\n", 1000);
	response(e, tls(10, 2), 103, 1010);
	response(e, tls(10, 2), 200, 1050);
	request(e, tls(10, 3), "GET /ws HTTP/1.1\r\n", 2000);
	response(e, tls(10, 3), 101, 2005);
	n = usm_endpoints_rows(e, &rows);
	assert_int_equal(n, 3);
	r = find(rows, n, 10, USM_SIDE_CLIENT, "/upload", 201);
	assert_non_null(r);
	assert_int_equal(r->latency.count, 1);
	assert_int_equal(r->latency.sum_ns, 300);
	r = find(rows, n, 10, USM_SIDE_CLIENT, "/page", 200);
	assert_non_null(r);
	assert_int_equal(r->latency.sum_ns, 50);
	r = find(rows, n, 10, USM_SIDE_CLIENT, "/ws", 101);
	assert_non_null(r);
	assert_int_equal(r->latency.sum_ns, 5);
	free(rows);
	assert_stats(e, STATS(.requests = 3, .responses = 3, .paired = 3, .interim = 2, .rows = 3));
	usm_endpoints_free(e);
}

/* The packet path holds a request unattributed (pid 0) until its response says who
 * owns each end (usm.c): an interim response goes to the held key and leaves the
 * request there, to be taken and attributed at the final one. */
static void test_interim_keeps_held_request(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(NULL);
	struct usm_conn_key held = tuple(USM_PID_NONE, USM_SIDE_UNKNOWN);
	struct usm_conn_key srv = tuple(10, USM_SIDE_SERVER);
	struct usm_conn_addr got;
	struct usm_endpoint_row *rows;
	struct usm_http_start req;
	uint64_t t = 0;

	(void)state;
	request_on(e, held, USM_PROTO_HTTP, "POST /form HTTP/1.1\r\n", 100, NULL);
	response_on(e, held, USM_PROTO_HTTP, 100, 120, NULL);
	assert_true(usm_endpoints_take(e, &held, 0, &t, &req, &got));
	assert_int_equal(t, 100);
	usm_endpoints_message(e, &srv, USM_PROTO_HTTP, t, &req, &got);
	response_on(e, srv, USM_PROTO_HTTP, 201, 180, NULL);
	assert_int_equal(usm_endpoints_rows(e, &rows), 1);
	assert_int_equal(rows[0].status, 201);
	assert_int_equal(rows[0].pid, 10);
	assert_int_equal(rows[0].latency.sum_ns, 80);
	free(rows);
	assert_stats(e, STATS(.requests = 1, .responses = 1, .paired = 1, .interim = 1, .rows = 1));
	usm_endpoints_free(e);
}

static void test_pending_bounded_oldest_evicted(void **state)
{
	struct usm_endpoints *e =
		usm_endpoints_new(&(struct usm_endpoints_limits){.max_pending = 4});
	struct usm_endpoint_row *rows;
	uint64_t c;

	(void)state;
	for (c = 1; c <= 6; c++)
		request(e, tls(10, c), "GET /x HTTP/1.1\r\n", c * 100);
	response(e, tls(10, 1), 200, 1000); /* evicted: orphan */
	response(e, tls(10, 6), 200, 1000);
	response(e, tls(10, 3), 200, 1000);
	assert_stats(e, STATS(.requests = 6, .responses = 3, .paired = 2, .orphan_responses = 1,
			      .evicted = 2, .pending = 2, .rows = 1));
	assert_int_equal(usm_endpoints_rows(e, &rows), 1);
	assert_int_equal(rows[0].latency.count, 2);
	free(rows);
	usm_endpoints_free(e);
}

/* A request on a connection that already had one waiting (its response never came)
 * waits from then on: the next eviction takes the request waiting longest, not it. */
static void test_pending_evicts_longest_waiting(void **state)
{
	struct usm_endpoints *e =
		usm_endpoints_new(&(struct usm_endpoints_limits){.max_pending = 4});
	uint64_t c;

	(void)state;
	for (c = 1; c <= 4; c++)
		request(e, tls(10, c), "GET /x HTTP/1.1\r\n", c * 100);
	request(e, tls(10, 1), "GET /y HTTP/1.1\r\n", 500); /* 1's first: unanswered */
	request(e, tls(10, 5), "GET /x HTTP/1.1\r\n", 600); /* evicts 2 */
	request(e, tls(10, 6), "GET /x HTTP/1.1\r\n", 700); /* evicts 3 */
	response(e, tls(10, 1), 200, 1000);
	response(e, tls(10, 2), 200, 1000); /* evicted: orphan */
	response(e, tls(10, 4), 200, 1000);
	assert_stats(e, STATS(.requests = 7, .responses = 3, .paired = 2, .unanswered = 1,
			      .orphan_responses = 1, .evicted = 2, .pending = 2, .rows = 2));
	usm_endpoints_free(e);
}

/* One connection seen from both ends: by the client and the server process, or both
 * by the unattributed packet path (pid 0): the side keeps the exchanges apart. */
static void test_sides_pair_apart(void **state)
{
	static const uint32_t pids[][2] = {{10, 20}, {USM_PID_NONE, USM_PID_NONE}};
	struct usm_endpoint_row *rows, *c, *s;
	struct usm_endpoints *e;
	size_t i, n;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(pids); i++) {
		struct usm_conn_key ck = tuple(pids[i][0], USM_SIDE_CLIENT);
		struct usm_conn_key sk = tuple(pids[i][1], USM_SIDE_SERVER);

		e = usm_endpoints_new(NULL);
		request_on(e, ck, USM_PROTO_HTTP, "GET /a HTTP/1.1\r\n", 100, NULL);
		request_on(e, sk, USM_PROTO_HTTP, "GET /a HTTP/1.1\r\n", 110, NULL);
		response_on(e, sk, USM_PROTO_HTTP, 200, 150, NULL);
		response_on(e, ck, USM_PROTO_HTTP, 200, 170, NULL);
		n = usm_endpoints_rows(e, &rows);
		assert_int_equal(n, 2);
		c = find(rows, n, pids[i][0], USM_SIDE_CLIENT, "/a", 200);
		s = find(rows, n, pids[i][1], USM_SIDE_SERVER, "/a", 200);
		assert_non_null(c);
		assert_non_null(s);
		assert_int_equal(c->latency.sum_ns, 70);
		assert_int_equal(s->latency.sum_ns, 40);
		assert_int_equal(c->proto, USM_PROTO_HTTP);
		free(rows);
		assert_stats(e, STATS(.requests = 2, .responses = 2, .paired = 2, .rows = 2));
		usm_endpoints_free(e);
	}
}

/* HTTP/2 streams on one connection pair by stream, in any order. */
static void test_streams_apart(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(NULL);
	struct usm_conn_key s1 = tls(10, 7), s3 = tls(10, 7);
	struct usm_endpoint_row *rows, *a, *b;
	struct usm_http_start m = {.kind = USM_HTTP_REQUEST, .method = "GET", .version = 20};
	size_t n;

	(void)state;
	s1.stream = 1;
	s3.stream = 3;
	snprintf(m.path, sizeof(m.path), "/a");
	usm_endpoints_message(e, &s1, USM_PROTO_HTTPS, 0, &m, NULL);
	snprintf(m.path, sizeof(m.path), "/b");
	usm_endpoints_message(e, &s3, USM_PROTO_HTTPS, 10, &m, NULL);
	m = (struct usm_http_start){.kind = USM_HTTP_RESPONSE, .status = 200, .version = 20};
	usm_endpoints_message(e, &s3, USM_PROTO_HTTPS, 20, &m, NULL);
	usm_endpoints_message(e, &s1, USM_PROTO_HTTPS, 100, &m, NULL);
	n = usm_endpoints_rows(e, &rows);
	a = find(rows, n, 10, USM_SIDE_CLIENT, "/a", 200);
	b = find(rows, n, 10, USM_SIDE_CLIENT, "/b", 200);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(a->latency.sum_ns, 100);
	assert_int_equal(b->latency.sum_ns, 10);
	assert_int_equal(a->version, 20);
	free(rows);
	assert_stats(e, STATS(.requests = 2, .responses = 2, .paired = 2, .rows = 2));
	usm_endpoints_free(e);
}

/* A held plaintext request is answered only by a response whose TCP numbers follow its
 * own: one of another connection on the same addresses and ports (the port reused) or
 * a segment TCP would refuse is an orphan, and the request waits for its own. */
static void test_take_by_tcp_numbers(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(NULL);
	struct usm_conn_key held = tuple(USM_PID_NONE, USM_SIDE_UNKNOWN);
	/* The request: the client's sequence 1000, the server's acknowledged up to 5000. */
	struct usm_conn_addr conn = {.family = 4, .client_port = 40000, .server_port = 80,
				     .seg = (uint64_t)1000 << 32 | 5000},
			     stranger = conn, got;
	const uint64_t req = conn.seg;
	struct usm_http_start msg;
	uint64_t t = 0;

	(void)state;
	request_on(e, held, USM_PROTO_HTTP, "GET /a HTTP/1.1\r\n", 100, &conn);
	stranger.seg = (uint64_t)3000000000u << 32 | 777;
	assert_false(usm_endpoints_take(e, &held, stranger.seg, &t, &msg, &got));
	response_on(e, held, USM_PROTO_HTTP, 400, 150, &stranger);
	assert_stats(e, STATS(.requests = 1, .responses = 1, .orphan_responses = 1, .pending = 1));
	/* Its own: from 5000 on, acknowledging the request. */
	assert_true(usm_endpoints_take(e, &held, (uint64_t)5000 << 32 | 1019, &t, &msg, &got));
	assert_int_equal(t, 100);
	assert_string_equal(msg.path, "/a");
	usm_endpoints_free(e);

	/* Acknowledging nothing of the request; beginning before what its client had
	 * acknowledged; past 1 GiB beyond it: not its answer. */
	assert_false(usm_endpoints_seg_answers(req, (uint64_t)5000 << 32 | 1000));
	assert_false(usm_endpoints_seg_answers(req, (uint64_t)5000 << 32 | 999));
	assert_false(usm_endpoints_seg_answers(req, (uint64_t)4999 << 32 | 1019));
	assert_false(usm_endpoints_seg_answers(req, (uint64_t)(5000 + (1u << 30)) << 32 | 1019));
	/* A response after a 1 GiB upload, a 3 GiB one, and one after 100 MB sent before
	 * it. */
	assert_true(usm_endpoints_seg_answers(req, (uint64_t)5000 << 32 | (1000 + (1u << 30))));
	assert_true(usm_endpoints_seg_answers(req, (uint64_t)5000 << 32 | (1000 + 3 * (1u << 30))));
	assert_true(usm_endpoints_seg_answers(req, (uint64_t)(5000 + 100000000) << 32 | 1019));
	/* Both numbers wrapping past 2^32. */
	assert_true(usm_endpoints_seg_answers((uint64_t)0xfffffff0u << 32 | 0xffffff00u,
					      (uint64_t)0x10 << 32 | 0x20));
	/* TLS (no numbers), and a request carried by a SYN (no acknowledgment). */
	assert_true(usm_endpoints_seg_answers(0, stranger.seg));
	assert_true(usm_endpoints_seg_answers((uint64_t)1000 << 32, (uint64_t)123 << 32 | 1019));
	assert_false(usm_endpoints_seg_answers((uint64_t)1000 << 32, (uint64_t)123 << 32 | 1000));
}

/* A pending request can be withdrawn (no longer a request) and given back under other
 * keys: plaintext attributes a request only once its response arrived. */
static void test_take_pending(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(NULL);
	struct usm_conn_key held = tuple(USM_PID_NONE, USM_SIDE_UNKNOWN);
	struct usm_conn_key srv = tuple(10, USM_SIDE_SERVER), cli = tuple(11, USM_SIDE_CLIENT);
	struct usm_conn_addr conn = {.family = 4, .client_port = 40000, .server_port = 80}, got;
	struct usm_endpoint_row *rows, *a, *b;
	struct usm_http_start req;
	uint64_t t = 0;
	size_t n;

	(void)state;
	request_on(e, held, USM_PROTO_HTTP, "GET /t/1 HTTP/1.1\r\n", 100, &conn);
	assert_true(usm_endpoints_take(e, &held, 0, &t, &req, &got));
	assert_int_equal(t, 100);
	assert_int_equal(req.kind, USM_HTTP_REQUEST);
	assert_int_equal(req.version, 11);
	assert_string_equal(req.method, "GET");
	assert_string_equal(req.path, "/t/*");
	assert_int_equal(got.server_port, 80);
	assert_false(usm_endpoints_take(e, &held, 0, &t, &req, &got)); /* gone */
	assert_stats(e, STATS(.requests = 0));
	usm_endpoints_message(e, &srv, USM_PROTO_HTTP, t, &req, &got);
	usm_endpoints_message(e, &cli, USM_PROTO_HTTP, t, &req, &got);
	response_on(e, srv, USM_PROTO_HTTP, 200, 130, NULL);
	response_on(e, cli, USM_PROTO_HTTP, 200, 140, NULL);
	n = usm_endpoints_rows(e, &rows);
	a = find(rows, n, 10, USM_SIDE_SERVER, "/t/*", 200);
	b = find(rows, n, 11, USM_SIDE_CLIENT, "/t/*", 200);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(a->latency.sum_ns, 30);
	assert_int_equal(b->latency.sum_ns, 40);
	assert_int_equal(a->conn.server_port, 80);
	free(rows);
	assert_stats(e, STATS(.requests = 2, .responses = 2, .paired = 2, .rows = 2));
	usm_endpoints_free(e);
}

/* gRPC calls: rows apart by grpc-status (the HTTP status is 200 for all of them), a
 * status outside 0..16 kept as none (-1), a plain HTTP/2 call on the same route apart
 * from them; the gRPC mark comes from the request. */
static void test_grpc_status_apart(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(NULL);
	struct usm_http_start rq = {.kind = USM_HTTP_REQUEST, .method = "POST", .version = 20,
				    .path = "/pkg.Svc/Get", .grpc = true};
	struct usm_http_start rs = {.kind = USM_HTTP_RESPONSE, .status = 200, .version = 20,
				    .grpc = true};
	const int codes[] = {0, 0, 5, 77, -1};
	struct usm_endpoint_row *rows;
	struct usm_conn_key k = tls(10, 7);
	size_t n, i, found = 0;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(codes); i++) {
		k.stream = (uint32_t)(2 * i + 1);
		rs.grpc_status = codes[i];
		usm_endpoints_message(e, &k, USM_PROTO_HTTPS, 0, &rq, NULL);
		usm_endpoints_message(e, &k, USM_PROTO_HTTPS, 10, &rs, NULL);
	}
	rq.grpc = false;
	rs.grpc = false;
	rs.grpc_status = 3; /* not gRPC: ignored */
	k.stream = 99;
	usm_endpoints_message(e, &k, USM_PROTO_HTTPS, 0, &rq, NULL);
	usm_endpoints_message(e, &k, USM_PROTO_HTTPS, 10, &rs, NULL);
	n = usm_endpoints_rows(e, &rows);
	assert_int_equal(n, 4);
	for (i = 0; i < n; i++) {
		assert_string_equal(rows[i].path, "/pkg.Svc/Get");
		assert_int_equal(rows[i].status, 200);
		if (!rows[i].grpc) {
			assert_int_equal(rows[i].grpc_status, 0);
			assert_int_equal(rows[i].latency.count, 1);
		} else if (rows[i].grpc_status == 0) {
			assert_int_equal(rows[i].latency.count, 2);
		} else if (rows[i].grpc_status == 5) {
			assert_int_equal(rows[i].latency.count, 1);
		} else {
			assert_int_equal(rows[i].grpc_status, -1); /* 77 and none */
			assert_int_equal(rows[i].latency.count, 2);
		}
		found++;
	}
	assert_int_equal(found, 4);
	free(rows);
	usm_endpoints_free(e);
}

/* Beyond max_rows_per_proc, a process's new endpoints share its overflow row; its
 * known endpoints and the other processes keep their rows. */
static void test_proc_cap_overflow_row(void **state)
{
	struct usm_endpoints *e =
		usm_endpoints_new(&(struct usm_endpoints_limits){.max_rows_per_proc = 3});
	struct usm_endpoint_row *rows, *o;
	char line[64];
	size_t n;
	int i;

	(void)state;
	for (i = 0; i < 5; i++) {
		snprintf(line, sizeof(line), "GET /p%c HTTP/1.0\r\n", 'a' + i);
		exchange(e, tls(10, 1), line, 200, 100, 10);
	}
	exchange(e, tls(10, 1), "GET /pa HTTP/1.0\r\n", 200, 200, 10); /* a known one */
	exchange(e, sided(10, USM_SIDE_SERVER, 2), "GET /pd HTTP/1.1\r\n", 200, 300, 10);
	exchange(e, tls(11, 1), "GET /pe HTTP/1.1\r\n", 200, 300, 10);
	n = usm_endpoints_rows(e, &rows);
	assert_int_equal(n, 3 + 1 + 1 + 1);
	assert_int_equal(find(rows, n, 10, USM_SIDE_CLIENT, "/pa", 200)->latency.count, 2);
	o = find(rows, n, 10, USM_SIDE_CLIENT, USM_ROUTE_OVERFLOW, 0);
	assert_non_null(o);
	assert_int_equal(o->latency.count, 2);
	assert_string_equal(o->method, USM_METHOD_OTHER);
	assert_int_equal(o->version, 10);
	assert_int_equal(o->proto, USM_PROTO_HTTPS);
	assert_non_null(find(rows, n, 10, USM_SIDE_SERVER, "/pd", 200));
	assert_non_null(find(rows, n, 11, USM_SIDE_CLIENT, "/pe", 200));
	free(rows);
	assert_stats(
		e,
		&(struct usm_endpoints_stats){
			.requests = 8, .responses = 8, .paired = 8, .proc_overflow = 2, .rows = 6});
	usm_endpoints_free(e);
}

/* Beyond max_rows, new endpoints go to the USM_PID_OVERFLOW row of their side. */
static void test_table_cap_pid_overflow(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(&(struct usm_endpoints_limits){.max_rows = 4});
	struct usm_endpoint_row *rows, *c, *s;
	uint32_t pid;
	size_t n;

	(void)state;
	for (pid = 10; pid < 16; pid++)
		exchange(e, tls(pid, 1), "GET /a HTTP/1.1\r\n", 200, 100, 10);
	exchange(e, sided(16, USM_SIDE_SERVER, 1), "PUT /b HTTP/1.1\r\n", 201, 100, 10);
	exchange(e, tls(10, 1), "GET /a HTTP/1.1\r\n", 200, 100, 10); /* has its row */
	n = usm_endpoints_rows(e, &rows);
	assert_int_equal(n, 4 + 2);
	c = find(rows, n, USM_PID_OVERFLOW, USM_SIDE_CLIENT, USM_ROUTE_OVERFLOW, 0);
	s = find(rows, n, USM_PID_OVERFLOW, USM_SIDE_SERVER, USM_ROUTE_OVERFLOW, 0);
	assert_non_null(c);
	assert_non_null(s);
	assert_int_equal(c->latency.count, 2);
	assert_int_equal(s->latency.count, 1);
	assert_string_equal(s->method, USM_METHOD_OTHER);
	assert_int_equal(find(rows, n, 10, USM_SIDE_CLIENT, "/a", 200)->latency.count, 2);
	free(rows);
	assert_stats(e, STATS(.requests = 8, .responses = 8, .paired = 8, .table_overflow = 3,
			      .rows = 6));
	usm_endpoints_free(e);
}

/* After any flood, a new process's new endpoint is counted: in its row, or in an
 * overflow row; every paired response is in some row. */
static const struct {
	struct usm_endpoints_limits lim;
	bool own_row;
	uint64_t proc_overflow, table_overflow;
	size_t rows;
} floods[] = {
	{{0}, true, 2700 - 64, 0, 64 + 1 + 1},
	{{.max_rows = 100, .max_rows_per_proc = 10}, true, 2700 - 10, 0, 10 + 1 + 1},
	{{.max_rows = 1000, .max_rows_per_proc = 100000}, false, 0, 2700 - 1000 + 1, 1000 + 1},
	{{.max_rows = 64, .max_rows_per_proc = 64}, false, 2700 - 64, 1, 64 + 1 + 1},
};

static void test_flood_then_new_endpoint(void **state)
{
	static const char *const methods[] = {"GET",	 "HEAD",    "POST",  "PUT",  "DELETE",
					      "OPTIONS", "CONNECT", "TRACE", "PATCH"};
	struct usm_endpoint_row *rows, *r;
	struct usm_endpoints *e;
	char line[64];
	size_t i, m, n;
	int status;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(floods); i++) {
		e = usm_endpoints_new(&floods[i].lim);
		for (m = 0; m < ARRAY_SIZE(methods); m++) {
			snprintf(line, sizeof(line), "%s /x HTTP/1.1\r\n", methods[m]);
			/* 300 final statuses (1xx but 101 are interim: they pair nothing) */
			for (status = 200; status < 500; status++)
				exchange(e, tls(10, 1), line, status, 1000, 1);
		}
		exchange(e, tls(99, 1), "GET /new HTTP/1.1\r\n", 200, 2000, 5);
		n = usm_endpoints_rows(e, &rows);
		assert_int_equal(counted(rows, n), 2701);
		r = find(rows, n, floods[i].own_row ? 99 : USM_PID_OVERFLOW, USM_SIDE_CLIENT,
			 floods[i].own_row ? "/new" : USM_ROUTE_OVERFLOW,
			 floods[i].own_row ? 200 : 0);
		assert_non_null(r);
		assert_int_equal(r->last_ns, 2000);
		free(rows);
		assert_stats(e, STATS(.requests = 2701, .responses = 2701, .paired = 2701,
				      .proc_overflow = floods[i].proc_overflow,
				      .table_overflow = floods[i].table_overflow,
				      .rows = floods[i].rows));
		usm_endpoints_free(e);
	}
}

/* Process overflow rows are bounded (2 x max_rows / max_rows_per_proc); once they are
 * all taken, a capped process's new endpoint still counts, in USM_PID_OVERFLOW's row. */
static void test_overflow_reserve_exhausted(void **state)
{
	static const struct {
		enum usm_proto proto;
		const char *line;
	} over[] = {
		{USM_PROTO_HTTPS, "GET /b HTTP/1.1\r\n"}, {USM_PROTO_HTTPS, "GET /c HTTP/1.0\r\n"},
		{USM_PROTO_HTTP, "GET /d HTTP/1.1\r\n"},  {USM_PROTO_HTTP, "GET /e HTTP/1.0\r\n"},
		{USM_PROTO_HTTP, "GET /f HTTP/1.0\r\n"}, /* the same overflow row as /e */
	};
	struct usm_endpoints_limits lim = {.max_rows = 2, .max_rows_per_proc = 1};
	struct usm_endpoints *e = usm_endpoints_new(&lim);
	struct usm_conn_key srv = sided(10, USM_SIDE_SERVER, 2);
	struct usm_endpoint_row *rows;
	size_t i, n;

	(void)state;
	exchange(e, tls(10, 1), "GET /a HTTP/1.1\r\n", 200, 100, 1);
	for (i = 0; i < ARRAY_SIZE(over); i++) {
		request_on(e, tls(10, 1), over[i].proto, over[i].line, 100, NULL);
		response_on(e, tls(10, 1), over[i].proto, 200, 101, NULL);
	}
	exchange(e, srv, "GET /g HTTP/1.1\r\n", 200, 100, 1); /* the table's last row */
	exchange(e, srv, "GET /h HTTP/1.1\r\n", 200, 100, 1); /* capped, no reserve left */
	n = usm_endpoints_rows(e, &rows);
	assert_int_equal(n, 2 + 4 + 1);
	assert_non_null(find(rows, n, 10, USM_SIDE_SERVER, "/g", 200));
	assert_non_null(find(rows, n, USM_PID_OVERFLOW, USM_SIDE_SERVER, USM_ROUTE_OVERFLOW, 0));
	assert_int_equal(counted(rows, n), 8);
	free(rows);
	assert_stats(e, STATS(.requests = 8, .responses = 8, .paired = 8, .proc_overflow = 5,
			      .table_overflow = 1, .rows = 7));
	usm_endpoints_free(e);
}

static void test_expiry(void **state)
{
	struct usm_endpoints *e =
		usm_endpoints_new(&(struct usm_endpoints_limits){.expiry_ns = 1000});
	struct usm_endpoints *never = usm_endpoints_new(NULL);
	struct usm_endpoint_row *rows;

	(void)state;
	exchange(e, tls(10, 1), "GET /old HTTP/1.1\r\n", 200, 100, 10);
	exchange(e, tls(10, 1), "GET /recent HTTP/1.1\r\n", 200, 900, 10);
	exchange(never, tls(10, 1), "GET /old HTTP/1.1\r\n", 200, 100, 10);
	assert_int_equal(usm_endpoints_expire(e, 1000), 0);
	assert_int_equal(usm_endpoints_expire(e, 1500), 1); /* idle 1400 > 1000: gone */
	assert_int_equal(usm_endpoints_rows(e, &rows), 1);
	assert_string_equal(rows[0].path, "/recent");
	free(rows);
	exchange(e, tls(10, 1), "GET /recent HTTP/1.1\r\n", 200, 1800, 10); /* updated */
	assert_int_equal(usm_endpoints_expire(e, 2500), 0);
	assert_int_equal(usm_endpoints_expire(never, UINT64_MAX), 0);
	assert_stats(e,
		     &(struct usm_endpoints_stats){
			     .requests = 3, .responses = 3, .paired = 3, .expired = 1, .rows = 1});
	assert_int_equal(usm_endpoints_expire(e, 5000), 1);
	assert_stats(never, STATS(.requests = 1, .responses = 1, .paired = 1, .rows = 1));
	usm_endpoints_free(e);
	usm_endpoints_free(never);
}

/* A request whose response never comes does not hold its slot for ever: it goes with
 * the rows' expiry, counted as unanswered; a response after that is an orphan. Many
 * such requests on colliding slots all go, and a recent one stays. */
static void test_pending_expiry(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(
		&(struct usm_endpoints_limits){.expiry_ns = 1000, .max_pending = 64});
	uint64_t conn;

	(void)state;
	for (conn = 1; conn <= 40; conn++)
		request(e, tls(10, conn), "GET /wait HTTP/1.1\r\n", 100);
	request(e, tls(10, 99), "GET /fresh HTTP/1.1\r\n", 1900);
	assert_stats(e, STATS(.requests = 41, .pending = 41));
	assert_int_equal(usm_endpoints_expire(e, 1050), 0); /* pending 950: kept */
	assert_stats(e, STATS(.requests = 41, .pending = 41));
	assert_int_equal(usm_endpoints_expire(e, 2000), 0); /* no rows: none to expire */
	assert_stats(e, STATS(.requests = 41, .unanswered = 40, .pending = 1));
	response(e, tls(10, 7), 200, 2100);
	response(e, tls(10, 99), 200, 2100);
	assert_stats(e, STATS(.requests = 41, .responses = 2, .paired = 1, .unanswered = 40,
			      .orphan_responses = 1, .rows = 1));
	usm_endpoints_free(e);
}

static bool only_10_alive(uint32_t pid, void *ctx)
{
	(void)ctx;
	return pid == 10;
}

/* The copy hook: connections whose seg is odd are copies; each call is counted. */
static bool odd_seg_copy(const struct usm_conn_addr *conn, void *ctx)
{
	(*(int *)ctx)++;
	return conn->seg & 1;
}

static void http_request(struct usm_endpoints *e, uint32_t pid, uint64_t conn, uint64_t t,
			 const struct usm_conn_addr *addr)
{
	request_on(e, tls(pid, conn), USM_PROTO_HTTP, "GET /a HTTP/1.1\r\n", t, addr);
}

/*
 * A request that leaves without its response, by each way there is (expiry, a request
 * replacing it, withdrawal, its process gone, eviction), is asked about: a copy is
 * neither unanswered nor evicted, and no longer a request; the others count as before.
 */
static void test_copy_hook(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(
		&(struct usm_endpoints_limits){.expiry_ns = 1000, .max_pending = 4});
	struct usm_conn_addr copy = {.family = 4, .seg = 7}, own = {.family = 4, .seg = 8};
	struct usm_conn_key k;
	int asked = 0, i;

	(void)state;
	usm_endpoints_set_copy_hook(e, odd_seg_copy, &asked);
	/* Expired. */
	http_request(e, 10, 1, 100, &copy);
	http_request(e, 10, 2, 100, &own);
	usm_endpoints_expire(e, 2000);
	assert_int_equal(asked, 2);
	assert_stats(e, STATS(.requests = 1, .unanswered = 1));
	/* Replaced by the next request on its connection: a copy, then not one. */
	http_request(e, 10, 3, 2100, &copy);
	http_request(e, 10, 3, 2200, &own);
	http_request(e, 10, 3, 2300, &own);
	assert_int_equal(asked, 4);
	assert_stats(e, STATS(.requests = 3, .unanswered = 2, .pending = 1));
	/* Withdrawn. */
	http_request(e, 10, 4, 2400, &copy);
	k = tls(10, 4);
	assert_true(usm_endpoints_withdraw(e, &k));
	k = tls(10, 3);
	assert_true(usm_endpoints_withdraw(e, &k));
	assert_int_equal(asked, 6);
	assert_stats(e, STATS(.requests = 3, .unanswered = 3));
	/* Its process gone. */
	http_request(e, 11, 5, 2500, &copy);
	http_request(e, 11, 6, 2500, &own);
	assert_int_equal(usm_endpoints_sweep(e, only_10_alive, NULL), 1);
	assert_int_equal(asked, 8);
	assert_stats(e, STATS(.requests = 4, .unanswered = 4));
	/* Evicted, 4 at most pending: the oldest (a copy), then the next (not one). */
	http_request(e, 10, 11, 2600, &copy);
	for (i = 12; i <= 16; i++)
		http_request(e, 10, (uint64_t)i, 2600 + (uint64_t)i, &own);
	assert_int_equal(asked, 10);
	assert_stats(e, STATS(.requests = 9, .unanswered = 4, .evicted = 1, .pending = 4));
	/* A response pairs as always, without asking (its TCP numbers follow own's). */
	response_on(e, tls(10, 13), USM_PROTO_HTTP, 200, 3000,
		    &(struct usm_conn_addr){.family = 4, .seg = (uint64_t)8 << 32 | 1});
	assert_int_equal(asked, 10);
	assert_stats(e, STATS(.requests = 9, .responses = 1, .paired = 1, .unanswered = 4,
			      .evicted = 1, .pending = 3, .rows = 1));
	usm_endpoints_free(e);
}

static void test_sweep_folds_exited(void **state)
{
	struct usm_endpoints *e =
		usm_endpoints_new(&(struct usm_endpoints_limits){.max_rows_per_proc = 1});
	struct usm_endpoint_row *rows, *r;
	size_t n;

	(void)state;
	exchange(e, tls(10, 1), "GET /a HTTP/1.1\r\n", 200, 10, 1);
	exchange(e, tls(11, 1), "GET /a HTTP/1.1\r\n", 200, 20, 2);
	exchange(e, tls(12, 1), "GET /a HTTP/1.1\r\n", 200, 30, 3);
	exchange(e, sided(12, USM_SIDE_SERVER, 2), "GET /a HTTP/1.1\r\n", 200, 40, 4);
	exchange(e, tls(11, 1), "GET /b HTTP/1.1\r\n", 200, 50, 5); /* overflow rows */
	exchange(e, tls(12, 1), "GET /b HTTP/1.1\r\n", 200, 60, 6);
	request(e, tls(12, 2), "GET /c HTTP/1.1\r\n", 1); /* left pending */
	request(e, tls(13, 1), "GET /c HTTP/1.1\r\n", 1); /* pending only */
	assert_int_equal(usm_endpoints_sweep(e, only_10_alive, NULL), 3);
	n = usm_endpoints_rows(e, &rows);
	assert_int_equal(n, 4);
	assert_non_null(find(rows, n, 10, USM_SIDE_CLIENT, "/a", 200));
	r = find(rows, n, USM_PID_EXITED, USM_SIDE_CLIENT, "/a", 200);
	assert_int_equal(r->latency.sum_ns, 2 + 3);
	assert_int_equal(r->last_ns, 30);
	r = find(rows, n, USM_PID_EXITED, USM_SIDE_SERVER, "/a", 200);
	assert_int_equal(r->latency.sum_ns, 4);
	r = find(rows, n, USM_PID_EXITED, USM_SIDE_CLIENT, USM_ROUTE_OVERFLOW, 0);
	assert_int_equal(r->latency.sum_ns, 5 + 6);
	free(rows);
	assert_stats(e, STATS(.requests = 8, .responses = 6, .paired = 6, .unanswered = 2,
			      .proc_overflow = 2, .rows = 4));
	assert_int_equal(usm_endpoints_sweep(e, only_10_alive, NULL), 0);
	usm_endpoints_free(e);
}

/* The table full of exited processes' rows: a live process's new endpoint gets a row
 * of its own, theirs folded into the exited overflow row of their side, counts kept;
 * once no exited row is left, a new endpoint over the table's cap is the overflow
 * row's as before. */
static void test_exited_rows_give_way(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(&(struct usm_endpoints_limits){.max_rows = 4});
	struct usm_endpoint_row *rows, *r;
	struct usm_endpoints_stats st;
	size_t n;

	(void)state;
	exchange(e, tls(11, 1), "GET /a HTTP/1.1\r\n", 200, 10, 1);
	exchange(e, tls(11, 1), "GET /b HTTP/1.1\r\n", 200, 20, 2);
	exchange(e, tls(12, 1), "GET /c HTTP/1.1\r\n", 200, 30, 3);
	exchange(e, sided(12, USM_SIDE_SERVER, 2), "GET /d HTTP/1.1\r\n", 404, 40, 4);
	assert_int_equal(usm_endpoints_sweep(e, only_10_alive, NULL), 2);
	exchange(e, tls(10, 1), "GET /e HTTP/1.1\r\n", 200, 50, 5);
	n = usm_endpoints_rows(e, &rows);
	assert_int_equal(n, 3);
	assert_int_equal(find(rows, n, 10, USM_SIDE_CLIENT, "/e", 200)->latency.count, 1);
	r = find(rows, n, USM_PID_EXITED, USM_SIDE_CLIENT, USM_ROUTE_OVERFLOW, 0);
	assert_non_null(r);
	assert_int_equal(r->latency.count, 3);
	assert_int_equal(r->latency.sum_ns, 1 + 2 + 3);
	assert_string_equal(r->method, USM_METHOD_OTHER);
	r = find(rows, n, USM_PID_EXITED, USM_SIDE_SERVER, USM_ROUTE_OVERFLOW, 0);
	assert_non_null(r);
	assert_int_equal(r->latency.count, 1);
	assert_null(find(rows, n, USM_PID_OVERFLOW, USM_SIDE_CLIENT, USM_ROUTE_OVERFLOW, 0));
	assert_int_equal(counted(rows, n), 5);
	free(rows);
	usm_endpoints_stats(e, &st);
	assert_int_equal(st.exited_folded, 1);
	assert_int_equal(st.table_overflow, 0);

	/* The live process's own rows fill the table: the next is the overflow row's. */
	exchange(e, tls(10, 1), "GET /f HTTP/1.1\r\n", 200, 60, 6);
	exchange(e, tls(10, 1), "GET /g HTTP/1.1\r\n", 200, 70, 7);
	exchange(e, tls(10, 1), "GET /h HTTP/1.1\r\n", 200, 80, 8);
	exchange(e, tls(10, 1), "GET /i HTTP/1.1\r\n", 200, 90, 9);
	n = usm_endpoints_rows(e, &rows);
	assert_int_equal(find(rows, n, USM_PID_OVERFLOW, USM_SIDE_CLIENT, USM_ROUTE_OVERFLOW,
			      0)->latency.count,
			 1);
	assert_int_equal(counted(rows, n), 9);
	free(rows);
	usm_endpoints_stats(e, &st);
	assert_int_equal(st.exited_folded, 1);
	assert_int_equal(st.table_overflow, 1);
	usm_endpoints_free(e);
}

/* Every request is accounted for once: paired, unanswered, evicted or still pending,
 * also when the sweep drops the pending requests of processes that exited (a live
 * one's stay). */
static void test_sweep_accounts_pending(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(NULL);
	struct usm_endpoints_stats st;

	(void)state;
	exchange(e, tls(11, 1), "GET /a HTTP/1.1\r\n", 200, 10, 1);
	request(e, tls(11, 1), "GET /b HTTP/1.1\r\n", 20); /* its answer never came */
	request(e, sided(11, USM_SIDE_SERVER, 2), "GET /c HTTP/1.1\r\n", 30);
	request(e, tls(10, 1), "GET /d HTTP/1.1\r\n", 40); /* a live process's */
	assert_int_equal(usm_endpoints_sweep(e, only_10_alive, NULL), 1);
	usm_endpoints_stats(e, &st);
	assert_int_equal(st.requests, 4);
	assert_int_equal(st.pending, 1);
	assert_int_equal(st.unanswered, 2);
	assert_int_equal(st.requests, st.paired + st.unanswered + st.evicted + st.pending);
	/* A late answer to a dropped request is an orphan, not a pairing. */
	response(e, tls(11, 1), 200, 50);
	response(e, tls(10, 1), 200, 60);
	assert_stats(e, STATS(.requests = 4, .responses = 3, .paired = 2, .unanswered = 2,
			      .orphan_responses = 1, .rows = 2));
	usm_endpoints_free(e);
}

/* Rows come out in creation order, and keep their seq through expiry and folding. */
static void test_seq_order_stable(void **state)
{
	struct usm_endpoints *e =
		usm_endpoints_new(&(struct usm_endpoints_limits){.expiry_ns = 100});
	struct usm_endpoint_row *rows;
	uint64_t seq[4];
	size_t i, n;

	(void)state;
	exchange(e, tls(10, 1), "GET /a HTTP/1.1\r\n", 200, 1000, 1);
	exchange(e, tls(11, 1), "GET /b HTTP/1.1\r\n", 200, 500, 1); /* expires */
	exchange(e, tls(12, 1), "GET /c HTTP/1.1\r\n", 200, 1000, 1);
	exchange(e, tls(10, 1), "GET /d HTTP/1.1\r\n", 200, 1000, 1);
	n = usm_endpoints_rows(e, &rows);
	assert_int_equal(n, 4);
	for (i = 0; i < n; i++) {
		seq[i] = rows[i].seq;
		assert_true(!i || seq[i] > seq[i - 1]);
	}
	assert_string_equal(rows[1].path, "/b");
	free(rows);
	assert_int_equal(usm_endpoints_expire(e, 1050), 1);
	assert_int_equal(usm_endpoints_sweep(e, only_10_alive, NULL), 1); /* 12 exits */
	exchange(e, tls(10, 1), "GET /e HTTP/1.1\r\n", 200, 1100, 1);
	n = usm_endpoints_rows(e, &rows);
	assert_int_equal(n, 4);
	assert_string_equal(rows[0].path, "/a");
	assert_int_equal(rows[0].seq, seq[0]);
	assert_int_equal(rows[1].pid, USM_PID_EXITED);
	assert_int_equal(rows[1].seq, seq[2]);
	assert_int_equal(rows[2].seq, seq[3]);
	assert_string_equal(rows[3].path, "/e");
	assert_true(rows[3].seq > seq[3]);
	free(rows);
	usm_endpoints_free(e);
}

/* The row remembers its last connection: the response's, else the request's. */
static void test_conn_remembered(void **state)
{
	struct usm_conn_addr req = {.family = 4, .client_port = 1111, .server_port = 443};
	struct usm_conn_addr rsp = {.family = 6, .client_port = 2222, .server_port = 8443};
	struct usm_endpoints *e = usm_endpoints_new(NULL);
	struct usm_endpoint_row *rows;
	const struct usm_conn_addr *sent[][2] = {
		{&req, &rsp}, /* the response's */
		{&req, NULL}, /* the request's */
		{NULL, NULL}, /* neither: the last one seen stays */
		{&rsp, &(struct usm_conn_addr){0}},
	};
	const struct usm_conn_addr *want[] = {&rsp, &req, &req, &rsp};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(sent); i++) {
		request_on(e, tls(10, 1), USM_PROTO_HTTPS, "GET /a HTTP/1.1\r\n", 10, sent[i][0]);
		response_on(e, tls(10, 1), USM_PROTO_HTTPS, 200, 20, sent[i][1]);
		assert_int_equal(usm_endpoints_rows(e, &rows), 1);
		assert_int_equal(rows[0].conn.family, want[i]->family);
		assert_int_equal(rows[0].conn.client_port, want[i]->client_port);
		assert_int_equal(rows[0].conn.server_port, want[i]->server_port);
		free(rows);
	}
	usm_endpoints_free(e);
}

/* The request's version is the row's: 1.0 and 1.1 apart, the response's ignored. */
static void test_version_kept(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(NULL);
	struct usm_endpoint_row *rows;
	size_t n;

	(void)state;
	exchange(e, tls(10, 1), "GET /a HTTP/1.0\r\n", 200, 10, 1);
	exchange(e, tls(10, 1), "GET /a HTTP/1.1\r\n", 200, 20, 1);
	exchange(e, tls(10, 1), "GET /a HTTP/1.0\r\n", 200, 30, 1); /* answered in 1.1 */
	n = usm_endpoints_rows(e, &rows);
	assert_int_equal(n, 2);
	assert_int_equal(rows[0].version, 10);
	assert_int_equal(rows[0].latency.count, 2);
	assert_int_equal(rows[1].version, 11);
	assert_int_equal(rows[1].latency.count, 1);
	free(rows);
	usm_endpoints_free(e);
}

/* Values outside the header's sets are clamped, so that reserved rows stay bounded:
 * an unknown version is 0, an unknown side USM_SIDE_UNKNOWN, an unknown proto HTTPS. */
static void test_odd_values_clamped(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(NULL);
	struct usm_http_start m = {.kind = USM_HTTP_REQUEST, .method = "GET", .version = 42};
	struct usm_conn_key k = sided(10, (enum usm_side)9, 1);
	struct usm_endpoint_row *rows;

	(void)state;
	snprintf(m.path, sizeof(m.path), "/a");
	usm_endpoints_message(e, &k, (enum usm_proto)5, 10, &m, NULL);
	m = (struct usm_http_start){.kind = USM_HTTP_RESPONSE, .status = 200, .version = 11};
	usm_endpoints_message(e, &k, (enum usm_proto)5, 20, &m, NULL);
	assert_int_equal(usm_endpoints_rows(e, &rows), 1);
	assert_int_equal(rows[0].version, 0);
	assert_int_equal(rows[0].side, USM_SIDE_UNKNOWN);
	assert_int_equal(rows[0].proto, USM_PROTO_HTTPS);
	assert_int_equal(rows[0].latency.count, 1);
	free(rows);
	usm_endpoints_free(e);
}

/* Odd methods share one name, and raw bytes one row: neither multiplies rows. */
static void test_other_methods_and_raw_bytes(void **state)
{
	static const char *const lines[] = {
		"BREW /pot HTTP/1.1\r\n",
		"PROPFIND /pot HTTP/1.1\r\n",
		"X-CUSTOM_VERB /pot HTTP/1.1\r\n",
	};
	struct usm_endpoints *e = usm_endpoints_new(NULL);
	struct usm_endpoint_row *rows;
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(lines); i++)
		exchange(e, tls(10, 1), lines[i], 418, 100, 1);
	for (i = 0; i < 5; i++)
		exchange(e, tls(10, 1), "GET /caf\xe9/x HTTP/1.1\r\n", 200, 100, 1);
	assert_int_equal(usm_endpoints_rows(e, &rows), 2);
	assert_string_equal(rows[0].method, USM_METHOD_OTHER);
	assert_string_equal(rows[0].path, "/pot");
	assert_int_equal(rows[0].latency.count, 3);
	assert_string_equal(rows[1].path, "/caf\xe9/x");
	assert_int_equal(rows[1].latency.count, 5);
	free(rows);
	usm_endpoints_free(e);
}

struct worker {
	struct usm_endpoints *e;
	uint32_t pid;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t c;

	for (c = 0; c < 2000; c++)
		exchange(w->e, tls(w->pid, c % 7),
			 c % 2 ? "GET /a HTTP/1.1\r\n" : "PUT /b HTTP/1.1\r\n", 200 + c % 3,
			 1000 + c, 1);
	return NULL;
}

/* Several pipeline workers at once: the one lock keeps every count. */
static void test_threads(void **state)
{
	struct usm_endpoints *e = usm_endpoints_new(NULL);
	struct worker w[4];
	pthread_t t[4];
	size_t i;

	(void)state;
	for (i = 0; i < 4; i++) {
		w[i] = (struct worker){e, 10 + (uint32_t)i};
		assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_stats(e, STATS(.requests = 8000, .responses = 8000, .paired = 8000, .rows = 4 * 6));
	usm_endpoints_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pairs_per_connection),
		cmocka_unit_test(test_unanswered_and_orphans),
		cmocka_unit_test(test_interim_responses),
		cmocka_unit_test(test_interim_keeps_held_request),
		cmocka_unit_test(test_pending_bounded_oldest_evicted),
		cmocka_unit_test(test_pending_evicts_longest_waiting),
		cmocka_unit_test(test_sides_pair_apart),
		cmocka_unit_test(test_streams_apart),
		cmocka_unit_test(test_proc_cap_overflow_row),
		cmocka_unit_test(test_table_cap_pid_overflow),
		cmocka_unit_test(test_flood_then_new_endpoint),
		cmocka_unit_test(test_overflow_reserve_exhausted),
		cmocka_unit_test(test_expiry),
		cmocka_unit_test(test_pending_expiry),
		cmocka_unit_test(test_copy_hook),
		cmocka_unit_test(test_sweep_folds_exited),
		cmocka_unit_test(test_exited_rows_give_way),
		cmocka_unit_test(test_sweep_accounts_pending),
		cmocka_unit_test(test_seq_order_stable),
		cmocka_unit_test(test_conn_remembered),
		cmocka_unit_test(test_version_kept),
		cmocka_unit_test(test_grpc_status_apart),
		cmocka_unit_test(test_take_pending),
		cmocka_unit_test(test_take_by_tcp_numbers),
		cmocka_unit_test(test_odd_values_clamped),
		cmocka_unit_test(test_other_methods_and_raw_bytes),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_pending_churn),
	};

	return cmocka_run_group_tests_name("usm_endpoints", tests, NULL, NULL);
}
