// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * USM's HTTP/2 session table (user/modules/usm/h2_sessions.c) fed with kernel records
 * built here: which side a session is from its start, requests and responses with
 * their streams and times, DATA skipped as gaps, records lost inside a DATA payload
 * (harmless) and inside a header block (undecodable), unknown sessions, restarts,
 * reordering, malformed records, and the sweep. The messages also go to an endpoint
 * table, as the module hands them on, so that what stays pending can be checked.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <linux/types.h>

#include "tests/unit/h2_build.h"
#include "user/modules/usm/h2_sessions.h"

#define PID  700
#define CONN 0x5000ull

struct t {
	struct usm_h2_sessions *s;
	nghttp2_hd_deflater *def[2]; /* client's, server's */
	struct usm_endpoints *ep; /* where the module puts them (usm.c) */
	struct usm_h2_message msg[64];
	size_t n;
	size_t answering; /* USM_HTTP_ANSWERING messages: not in msg[] */
	uint64_t off[2]; /* per enum usm_dir: what the fake kernel sent so far */
	size_t skip[2];	 /* and what is left of the DATA payload it is in */
	uint64_t conn;	 /* the session the fake kernel sends on; 0: CONN */
	uint32_t uid;	 /* its owner's */
};

static void sink(const struct usm_h2_message *m, void *ctx)
{
	struct t *t = ctx;

	if (m->msg.kind == USM_HTTP_ANSWERING) { /* as usm.c's h2_message */
		t->answering++;
		usm_endpoints_answering(t->ep, &m->key);
		return;
	}
	if (t->n < 64)
		t->msg[t->n++] = *m;
	if (m->msg.kind == USM_HTTP_NONE)
		usm_endpoints_withdraw(t->ep, &m->key);
	else
		usm_endpoints_message(t->ep, &m->key, USM_PROTO_HTTPS, m->t_ns, &m->msg, NULL);
}

/*
 * The kernel's walk (bpf/lib/usm_h2.h), for calls that begin at a frame or inside a
 * DATA payload: frame headers and every payload but DATA's copied, DATA payloads
 * skipped. Sends p[0..len) as one record of dir at time ns with flags; returns
 * usm_h2_sessions_record()'s answer.
 */
static int send_bytes(struct t *t, int dir, uint8_t flags, const uint8_t *p, size_t len,
		      uint64_t ns)
{
	static struct usm_h2_record r;
	size_t pos = 0, flen, n;

	memset(&r, 0, sizeof(r));
	r.ktime_ns = ns;
	r.conn = t->conn ? t->conn : CONN;
	r.offset = t->off[dir];
	r.pid = PID;
	r.tid = PID;
	r.uid = t->uid;
	r.len = (uint32_t)len;
	r.fd = -1;
	r.dir = (uint8_t)dir;
	r.flags = flags;
	if (len >= 24 && !memcmp(p, "PRI * HTTP/2.0", 14)) {
		memcpy(r.data, p, 24);
		r.data_len = 24;
		r.runs[0].copied = 24;
		r.nruns = 1;
		pos = 24;
	}
	if (t->skip[dir]) {
		n = t->skip[dir] < len ? t->skip[dir] : len;
		r.runs[0].skipped = (uint32_t)n;
		r.nruns = 1;
		t->skip[dir] -= n;
		pos = n;
	}
	while (pos + 9 <= len) {
		flen = (size_t)p[pos] << 16 | (size_t)p[pos + 1] << 8 | p[pos + 2];
		if (!r.nruns || r.runs[r.nruns - 1].skipped)
			r.nruns++;
		memcpy(r.data + r.data_len, p + pos, 9);
		r.data_len += 9;
		r.runs[r.nruns - 1].copied += 9;
		if (p[pos + 3] == 0) {
			n = len - pos - 9 < flen ? len - pos - 9 : flen;
			r.runs[r.nruns - 1].skipped += (uint32_t)n;
			t->skip[dir] = flen - n;
			pos += 9 + n;
			continue;
		}
		assert_true(pos + 9 + flen <= len);
		memcpy(r.data + r.data_len, p + pos + 9, flen);
		r.data_len += (uint32_t)flen;
		r.runs[r.nruns - 1].copied += (uint32_t)flen;
		pos += 9 + flen;
	}
	assert_int_equal(pos, len);
	r.walked = r.len;
	t->off[dir] += len;
	return usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + r.data_len);
}

static int send_rec(struct t *t, int dir, uint8_t flags, const struct h2b_buf *b, uint64_t ns)
{
	return send_bytes(t, dir, flags, b->p, b->len, ns);
}

/* A record the ring buffer had no room for: the kernel walked it, userspace never saw
 * it. Only DATA payload here (the walk's state moves on as the kernel's does). */
static void lose_payload(struct t *t, int dir, size_t n)
{
	assert_true(t->skip[dir] >= n);
	t->skip[dir] -= n;
	t->off[dir] += n;
}

static int setup(void **state)
{
	struct t *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	t->s = usm_h2_sessions_new(sink, t);
	assert_non_null(t->s);
	t->ep = usm_endpoints_new(NULL);
	assert_non_null(t->ep);
	assert_int_equal(nghttp2_hd_deflate_new(&t->def[0], 4096), 0);
	assert_int_equal(nghttp2_hd_deflate_new(&t->def[1], 4096), 0);
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct t *t = *state;

	usm_h2_sessions_free(t->s);
	usm_endpoints_free(t->ep);
	nghttp2_hd_deflate_del(t->def[0]);
	nghttp2_hd_deflate_del(t->def[1]);
	free(t);
	return 0;
}

static struct usm_h2_sessions_stats stats(struct t *t)
{
	struct usm_h2_sessions_stats st;

	usm_h2_sessions_stats(t->s, &st);
	return st;
}

/* A new connection: fresh encoders, offsets from 0. */
static void new_conn(struct t *t)
{
	int i;

	for (i = 0; i < 2; i++) {
		nghttp2_hd_deflate_del(t->def[i]);
		assert_int_equal(nghttp2_hd_deflate_new(&t->def[i], 4096), 0);
		t->off[i] = 0;
		t->skip[i] = 0;
	}
}

/* The client's first write: preface, SETTINGS, a GET on stream id. */
static void client_start(struct h2b_buf *b, struct t *t, uint32_t id, const char *path)
{
	h2b_preface(b);
	h2b_settings(b, NULL, 0);
	h2b_headers(b, t->def[0], id, 0x1,
		    H2B_NV(":method", "GET", ":scheme", "https", ":path", path, ":authority", "a"));
}

/* The server's answer to stream id: SETTINGS (first), HEADERS, DATA with END_STREAM. */
static void server_answer(struct h2b_buf *b, struct t *t, uint32_t id, const char *status,
			  bool first, size_t body)
{
	if (first) {
		h2b_settings(b, NULL, 0);
		h2b_settings_ack(b);
	}
	h2b_headers(b, t->def[1], id, 0, H2B_NV(":status", status));
	h2b_data(b, id, 0x1, body);
}

/* A watch (Kubernetes', a gRPC server stream): its :status at once, its END_STREAM
 * half an hour later. The request is being answered: not expired meanwhile, and paired
 * at its end, timed to it. A response whose headers end the stream needs no mark. */
static void test_long_response_not_expired(void **state)
{
	struct t *t = *state;
	struct usm_endpoints_stats st;
	struct h2b_buf b = {0};
	const uint64_t s = 1000000000ull;

	usm_endpoints_set_expiry(t->ep, 600 * s);
	client_start(&b, t, 1, "/watch");
	assert_int_equal(send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 1 * s), 0);
	h2b_free(&b);
	h2b_settings(&b, NULL, 0);
	h2b_settings_ack(&b);
	h2b_headers(&b, t->def[1], 1, 0, H2B_NV(":status", "200"));
	assert_int_equal(send_rec(t, USM_DIR_READ, 0, &b, 1 * s + 10000000), 0);
	h2b_free(&b);
	assert_int_equal(t->answering, 1);
	usm_endpoints_expire(t->ep, 700 * s);
	usm_endpoints_expire(t->ep, 1800 * s);
	h2b_data(&b, 1, 0x1, 100);
	assert_int_equal(send_rec(t, USM_DIR_READ, 0, &b, 1900 * s), 0);
	h2b_free(&b);
	usm_endpoints_stats(t->ep, &st);
	assert_int_equal(st.unanswered, 0);
	assert_int_equal(st.orphan_responses, 0);
	assert_int_equal(st.paired, 1);
	/* Headers that end the stream: answered at once, no mark. */
	h2b_headers(&b, t->def[0], 3, 0x1, H2B_NV(":method", "GET", ":path", "/b"));
	assert_int_equal(send_rec(t, USM_DIR_WRITE, 0, &b, 1901 * s), 0);
	h2b_free(&b);
	h2b_headers(&b, t->def[1], 3, 0x1, H2B_NV(":status", "204"));
	assert_int_equal(send_rec(t, USM_DIR_READ, 0, &b, 1902 * s), 0);
	h2b_free(&b);
	assert_int_equal(t->answering, 1);
	usm_endpoints_stats(t->ep, &st);
	assert_int_equal(st.paired, 2);
	/* Its :status and its end in one record (most responses): no mark delivered, the
	 * end takes its place. */
	h2b_headers(&b, t->def[0], 5, 0x1, H2B_NV(":method", "GET", ":path", "/d"));
	assert_int_equal(send_rec(t, USM_DIR_WRITE, 0, &b, 1902 * s + 1), 0);
	h2b_free(&b);
	h2b_headers(&b, t->def[1], 5, 0, H2B_NV(":status", "200"));
	h2b_data(&b, 5, 0x1, 10);
	assert_int_equal(send_rec(t, USM_DIR_READ, 0, &b, 1902 * s + 2), 0);
	h2b_free(&b);
	assert_int_equal(t->answering, 1);
	usm_endpoints_stats(t->ep, &st);
	assert_int_equal(st.paired, 3);
	/* A request whose answer never begins still expires. */
	h2b_headers(&b, t->def[0], 9, 0x1, H2B_NV(":method", "GET", ":path", "/c"));
	assert_int_equal(send_rec(t, USM_DIR_WRITE, 0, &b, 1903 * s), 0);
	h2b_free(&b);
	usm_endpoints_expire(t->ep, 2600 * s);
	usm_endpoints_stats(t->ep, &st);
	assert_int_equal(st.unanswered, 1);
}

/* A process that wrote the preface is the client: its request, then the response it
 * read, on stream 1, version 20, timed request HEADERS to END_STREAM. */
static void test_client_side_exchange(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};

	client_start(&b, t, 1, "/items/42?q=secret");
	assert_int_equal(send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 1000), 0);
	h2b_free(&b);
	assert_int_equal(t->n, 1);
	assert_int_equal(t->msg[0].msg.kind, USM_HTTP_REQUEST);
	assert_int_equal(t->msg[0].key.side, USM_SIDE_CLIENT);
	assert_int_equal(t->msg[0].key.stream, 1);
	assert_int_equal(t->msg[0].key.pid, PID);
	assert_int_equal(t->msg[0].key.conn, CONN);
	assert_int_equal(t->msg[0].msg.version, 20);
	assert_string_equal(t->msg[0].msg.method, "GET");
	assert_string_equal(t->msg[0].msg.path, "/items/*");
	assert_int_equal(t->msg[0].t_ns, 1000);
	server_answer(&b, t, 1, "200", true, 500);
	assert_int_equal(send_rec(t, USM_DIR_READ, 0, &b, 5000), 0);
	h2b_free(&b);
	assert_int_equal(t->n, 2);
	assert_int_equal(t->msg[1].msg.kind, USM_HTTP_RESPONSE);
	assert_int_equal(t->msg[1].msg.status, 200);
	assert_int_equal(t->msg[1].key.stream, 1);
	assert_int_equal(t->msg[1].key.side, USM_SIDE_CLIENT);
	assert_int_equal(t->msg[1].t_ns, 5000);
	assert_int_equal(stats(t).sessions, 1);
	assert_int_equal(stats(t).requests, 1);
	assert_int_equal(stats(t).responses, 1);
	assert_int_equal(stats(t).live, 1);
	assert_true(stats(t).mem > 0);
}

/* A server writes its SETTINGS first: the reads are the client's, the side is server. */
static void test_server_side_from_settings(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};

	h2b_settings(&b, NULL, 0);
	assert_int_equal(send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_SETTINGS, &b, 1), 0);
	h2b_free(&b);
	client_start(&b, t, 1, "/a");
	assert_int_equal(send_rec(t, USM_DIR_READ, USM_H2_F_PREFACE, &b, 2), 0);
	h2b_free(&b);
	assert_int_equal(t->n, 1);
	assert_int_equal(t->msg[0].key.side, USM_SIDE_SERVER);
	h2b_settings_ack(&b);
	h2b_headers(&b, t->def[1], 1, 0, H2B_NV(":status", "404"));
	h2b_data(&b, 1, 0x1, 10);
	assert_int_equal(send_rec(t, USM_DIR_WRITE, 0, &b, 3), 0);
	h2b_free(&b);
	assert_int_equal(t->n, 2);
	assert_int_equal(t->msg[1].msg.status, 404);
	assert_int_equal(t->msg[1].key.side, USM_SIDE_SERVER);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_DIRECTION], 0);
}

/* Both ends start at once on two CPUs (a Go server: SETTINGS written by one goroutine
 * while another reads the preface): the kernel marks both records NEW; the second is
 * the session's other direction, not a new connection. Either order. */
static void test_both_ends_start(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0}, p = {0};
	int order;

	for (order = 0; order < 2; order++) {
		new_conn(t);
		t->n = 0;
		h2b_settings(&b, NULL, 0);
		client_start(&p, t, 1, "/both");
		if (order == 0) {
			assert_int_equal(send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_SETTINGS,
						  &b, 1),
					 0);
			assert_int_equal(send_rec(t, USM_DIR_READ, USM_H2_F_NEW | USM_H2_F_PREFACE,
						  &p, 2),
					 0);
		} else {
			assert_int_equal(send_rec(t, USM_DIR_READ, USM_H2_F_NEW | USM_H2_F_PREFACE,
						  &p, 2),
					 0);
			assert_int_equal(send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_SETTINGS,
						  &b, 1),
					 0);
		}
		h2b_free(&b);
		h2b_free(&p);
		assert_int_equal(t->n, 1);
		assert_int_equal(t->msg[0].key.side, USM_SIDE_SERVER);
		h2b_headers(&b, t->def[1], 1, 0x1, H2B_NV(":status", "200"));
		assert_int_equal(send_rec(t, USM_DIR_WRITE, 0, &b, 3), 0);
		h2b_free(&b);
		assert_int_equal(t->n, 2);
		assert_int_equal(t->msg[1].msg.status, 200);
		assert_int_equal(stats(t).sessions, order + 1);
		assert_int_equal(stats(t).merged, order + 1);
		assert_int_equal(stats(t).live, 1);
	}
	/* A start in a direction the session already saw is a new connection. */
	new_conn(t);
	client_start(&p, t, 1, "/again");
	t->off[USM_DIR_READ] = 0;
	assert_int_equal(send_rec(t, USM_DIR_READ, USM_H2_F_NEW | USM_H2_F_PREFACE, &p, 4), 0);
	h2b_free(&p);
	assert_int_equal(stats(t).sessions, 3);
	assert_int_equal(stats(t).merged, 2);
}

static struct usm_endpoints_stats pairing(struct t *t)
{
	struct usm_endpoints_stats st;

	usm_endpoints_stats(t->ep, &st);
	return st;
}

/* A stream whose client never ends its half: the server's END_STREAM, then DATA frames
 * each with END_STREAM again and a second response. One exchange, one response: the
 * rest are stream errors, counted and ignored (they once counted a response each). */
static void test_one_response_per_stream(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};
	int i;

	h2b_preface(&b);
	h2b_settings(&b, NULL, 0);
	h2b_headers(&b, t->def[0], 1, 0x4, /* END_HEADERS only: the client's half stays open */
		    H2B_NV(":method", "POST", ":scheme", "https", ":path", "/upload",
			   ":authority", "a"));
	assert_int_equal(send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 1000), 0);
	h2b_free(&b);
	server_answer(&b, t, 1, "200", true, 5);
	for (i = 0; i < 100; i++)
		h2b_data(&b, 1, 0x1, 0);
	h2b_headers(&b, t->def[1], 1, 0x1, H2B_NV(":status", "500"));
	assert_int_equal(send_rec(t, USM_DIR_READ, 0, &b, 2000), 0);
	h2b_free(&b);
	assert_int_equal(stats(t).requests, 1);
	assert_int_equal(stats(t).responses, 1);
	assert_int_equal(stats(t).undecodable[USM_H2_STREAM_ERROR], 101);
	assert_int_equal(t->n, 2);
	assert_int_equal(t->msg[1].msg.kind, USM_HTTP_RESPONSE);
	assert_int_equal(t->msg[1].msg.status, 200);
	assert_int_equal(pairing(t).orphan_responses, 0);
}

/* More streams open at once than the decoder keeps (USM_H2_STREAMS_MAX): the oldest
 * is dropped, counted once, and its request withdrawn (unanswered): its answer, when
 * it comes, names no request. Every other stream pairs; nothing is left pending. */
static void test_too_many_streams(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};
	uint32_t i, last = 2 * USM_H2_STREAMS_MAX + 1;
	struct usm_endpoints_stats st;

	client_start(&b, t, 1, "/s");
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 1);
	h2b_free(&b);
	for (i = 3; i <= last; i += 2) {
		h2b_headers(&b, t->def[0], i, 0x1,
			    H2B_NV(":method", "GET", ":scheme", "https", ":path", "/s",
				   ":authority", "a"));
		assert_int_equal(send_rec(t, USM_DIR_WRITE, 0, &b, 1 + i), 0);
		h2b_free(&b);
	}
	assert_int_equal(stats(t).requests, USM_H2_STREAMS_MAX + 1);
	assert_int_equal(stats(t).undecodable[USM_H2_TOO_MANY_STREAMS], 1);
	st = pairing(t);
	assert_int_equal(st.pending, USM_H2_STREAMS_MAX);
	assert_int_equal(st.unanswered, 1);
	server_answer(&b, t, 1, "200", true, 10); /* the dropped one */
	assert_int_equal(send_rec(t, USM_DIR_READ, 0, &b, 1000), 0);
	h2b_free(&b);
	server_answer(&b, t, last, "200", false, 10);
	assert_int_equal(send_rec(t, USM_DIR_READ, 0, &b, 1001), 0);
	h2b_free(&b);
	for (i = 3; i < last; i += 2) {
		server_answer(&b, t, i, "200", false, 10);
		assert_int_equal(send_rec(t, USM_DIR_READ, 0, &b, 1001 + i), 0);
		h2b_free(&b);
	}
	assert_int_equal(stats(t).responses, USM_H2_STREAMS_MAX);
	assert_int_equal(stats(t).undecodable[USM_H2_TOO_MANY_STREAMS], 1);
	st = pairing(t);
	assert_int_equal(st.requests, USM_H2_STREAMS_MAX + 1);
	assert_int_equal(st.paired, USM_H2_STREAMS_MAX);
	assert_int_equal(st.unanswered, 1);
	assert_int_equal(st.orphan_responses, 0);
	assert_int_equal(st.pending, 0);
}

/* A :status outside 100-599 (999, or not a number) is no response: rejected, counted
 * as HTTP/1's are, no row; its request is withdrawn (unanswered), whether the stream
 * ends with the HEADERS or with a DATA frame after them. Nothing stays pending. */
static void test_status_rejected(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};
	struct usm_endpoint_row *rows;

	client_start(&b, t, 1, "/odd");
	h2b_headers(&b, t->def[0], 3, 0x1,
		    H2B_NV(":method", "GET", ":scheme", "https", ":path", "/odd", ":authority",
			   "a"));
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 1);
	h2b_free(&b);
	assert_int_equal(pairing(t).pending, 2);
	h2b_settings(&b, NULL, 0);
	h2b_settings_ack(&b);
	h2b_headers(&b, t->def[1], 1, 0x1, H2B_NV(":status", "999"));
	h2b_headers(&b, t->def[1], 3, 0, H2B_NV(":status", "2x0"));
	h2b_data(&b, 3, 0x1, 5);
	assert_int_equal(send_rec(t, USM_DIR_READ, 0, &b, 2), 0);
	h2b_free(&b);
	assert_int_equal(stats(t).rejected_status, 2);
	assert_int_equal(stats(t).responses, 0);
	assert_int_equal(usm_endpoints_rows(t->ep, &rows), 0);
	free(rows);
	assert_int_equal(pairing(t).requests, 2);
	assert_int_equal(pairing(t).unanswered, 2);
	assert_int_equal(pairing(t).responses, 0);
	assert_int_equal(pairing(t).orphan_responses, 0);
	assert_int_equal(pairing(t).pending, 0);

	/* An invalid :status, then a valid one on the same stream: the second is a second
	 * final response (a stream error), not a response of a request withdrawn. */
	h2b_headers(&b, t->def[0], 5, 0x1,
		    H2B_NV(":method", "GET", ":scheme", "https", ":path", "/odd", ":authority",
			   "a"));
	send_rec(t, USM_DIR_WRITE, 0, &b, 3);
	h2b_free(&b);
	h2b_headers(&b, t->def[1], 5, 0, H2B_NV(":status", "999"));
	h2b_headers(&b, t->def[1], 5, 0, H2B_NV(":status", "200"));
	h2b_data(&b, 5, 0x1, 5);
	assert_int_equal(send_rec(t, USM_DIR_READ, 0, &b, 4), 0);
	h2b_free(&b);
	assert_int_equal(stats(t).rejected_status, 3);
	assert_int_equal(stats(t).responses, 0);
	assert_int_equal(stats(t).undecodable[USM_H2_STREAM_ERROR], 1);
	assert_int_equal(pairing(t).requests, 3);
	assert_int_equal(pairing(t).unanswered, 3);
	assert_int_equal(pairing(t).responses, 0);
	assert_int_equal(pairing(t).orphan_responses, 0);
	assert_int_equal(pairing(t).pending, 0);
}

/* Streams that will get no answer: reset before their response (RST_STREAM), or above
 * the last_stream_id of the server's GOAWAY (not processed). Their requests are
 * withdrawn at once (unanswered), counted by why (resets, refused); a reset after the
 * response changes nothing. Nothing stays pending. */
static void test_reset_and_refused(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};
	struct usm_endpoints_stats st;
	uint32_t id;

	client_start(&b, t, 1, "/r");
	for (id = 3; id <= 7; id += 2)
		h2b_headers(&b, t->def[0], id, 0x1,
			    H2B_NV(":method", "GET", ":scheme", "https", ":path", "/r",
				   ":authority", "a"));
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 1);
	h2b_free(&b);
	assert_int_equal(pairing(t).pending, 4);
	h2b_rst(&b, 1, 8); /* CANCEL, before any answer */
	send_rec(t, USM_DIR_WRITE, 0, &b, 2);
	h2b_free(&b);
	assert_int_equal(pairing(t).pending, 3);
	server_answer(&b, t, 3, "200", true, 4);
	send_rec(t, USM_DIR_READ, 0, &b, 3);
	h2b_free(&b);
	h2b_rst(&b, 3, 8); /* after its answer */
	send_rec(t, USM_DIR_WRITE, 0, &b, 4);
	h2b_free(&b);
	h2b_goaway(&b, 5, 0, "");
	server_answer(&b, t, 5, "200", false, 4);
	send_rec(t, USM_DIR_READ, 0, &b, 5);
	h2b_free(&b);
	assert_int_equal(stats(t).resets, 2);
	assert_int_equal(stats(t).refused, 1);
	assert_int_equal(stats(t).requests, 4);
	assert_int_equal(stats(t).responses, 2);
	st = pairing(t);
	assert_int_equal(st.requests, 4);
	assert_int_equal(st.paired, 2);
	assert_int_equal(st.unanswered, 2);
	assert_int_equal(st.orphan_responses, 0);
	assert_int_equal(st.pending, 0);
}

/* A call whose frames go past the kernel's copy (USM_H2_CAP): the first cap bytes
 * copied, the rest skipped, as one run. */
static int send_cut(struct t *t, int dir, uint8_t flags, const struct h2b_buf *b, uint64_t ns)
{
	static struct usm_h2_record r;

	assert_true(b->len > USM_H2_CAP);
	memset(&r, 0, sizeof(r));
	r.ktime_ns = ns;
	r.conn = t->conn ? t->conn : CONN;
	r.offset = t->off[dir];
	r.pid = PID;
	r.tid = PID;
	r.len = r.walked = (uint32_t)b->len;
	r.fd = -1;
	r.dir = (uint8_t)dir;
	r.flags = flags | USM_H2_F_CUT;
	r.nruns = 1;
	r.runs[0].copied = USM_H2_CAP;
	r.runs[0].skipped = (uint32_t)(b->len - USM_H2_CAP);
	memcpy(r.data, b->p, USM_H2_CAP);
	r.data_len = USM_H2_CAP;
	t->off[dir] += b->len;
	return usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + r.data_len);
}

/* A first request whose header block is larger than the kernel copies kills the
 * session at once (lost_bytes: the block's skipped bytes). The server's first record,
 * NEW in its direction, is that dead session's other end: it stays dead, one session,
 * counted undecodable once; the client's next record is where the kernel says, no
 * bytes lost. */
static void test_dead_session_not_restarted(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};
	char big[4001];
	size_t i;

	for (i = 0; i < sizeof(big) - 1; i++)
		big[i] = (char)('!' + (i * 7919) % 90); /* Huffman cannot shrink it below cap */
	big[sizeof(big) - 1] = '\0';
	h2b_preface(&b);
	h2b_settings(&b, NULL, 0);
	h2b_headers(&b, t->def[0], 1, 0x1,
		    H2B_NV(":method", "GET", ":scheme", "https", ":path", "/big", ":authority",
			   "a", "x-big", big));
	assert_int_equal(send_cut(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 1), 0);
	h2b_free(&b);
	assert_int_equal(stats(t).undecodable[USM_H2_LOST_BYTES], 1);
	h2b_settings(&b, NULL, 0);
	h2b_settings_ack(&b);
	assert_int_equal(send_rec(t, USM_DIR_READ, USM_H2_F_NEW | USM_H2_F_SETTINGS, &b, 2), 0);
	h2b_free(&b);
	h2b_settings_ack(&b);
	h2b_headers(&b, t->def[0], 3, 0x1, H2B_NV(":method", "GET", ":path", "/next"));
	assert_int_equal(send_rec(t, USM_DIR_WRITE, 0, &b, 3), 0);
	h2b_free(&b);
	h2b_headers(&b, t->def[1], 1, 0x1, H2B_NV(":status", "200"));
	assert_int_equal(send_rec(t, USM_DIR_READ, 0, &b, 4), 0);
	h2b_free(&b);
	assert_int_equal(t->n, 0);
	assert_int_equal(stats(t).sessions, 1);
	assert_int_equal(stats(t).merged, 1);
	assert_int_equal(stats(t).live, 1);
	assert_int_equal(stats(t).undecodable[USM_H2_LOST_BYTES], 1);
	for (i = 0; i < USM_H2_REASON_MAX; i++)
		if (i != USM_H2_LOST_BYTES)
			assert_int_equal(stats(t).undecodable[i], 0);
	assert_int_equal(stats(t).lost_bytes, 0);
	assert_int_equal(stats(t).cut_records, 1);
	assert_int_equal(stats(t).mem, 0);
}

/* A record lost inside a DATA payload: a gap the decoder skips; the stream still ends,
 * with the frame's END_STREAM, once the rest of the payload went by. */
static void test_lost_inside_data(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};
	size_t head;

	client_start(&b, t, 1, "/x");
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 1);
	h2b_free(&b);
	h2b_settings(&b, NULL, 0);
	h2b_settings_ack(&b);
	h2b_headers(&b, t->def[1], 1, 0, H2B_NV(":status", "200"));
	head = b.len + 9;
	h2b_data(&b, 1, 0x1, 3000);
	assert_int_equal(send_bytes(t, USM_DIR_READ, 0, b.p, head + 1000, 2), 0);
	lose_payload(t, USM_DIR_READ, 1000);
	assert_int_equal(t->n, 1);
	assert_int_equal(send_bytes(t, USM_DIR_READ, 0, b.p + head + 2000, 1000, 3), 0);
	h2b_free(&b);
	assert_int_equal(stats(t).lost_bytes, 1000);
	assert_int_equal(stats(t).undecodable[USM_H2_LOST_BYTES], 0);
	assert_int_equal(t->n, 2);
	assert_int_equal(t->msg[1].msg.kind, USM_HTTP_RESPONSE);
	assert_int_equal(t->msg[1].msg.status, 200);
	assert_int_equal(t->msg[1].t_ns, 3);
}

/* A record lost over a header block: the session is undecodable, counted, and says
 * nothing more. */
static void test_lost_over_headers(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};

	client_start(&b, t, 1, "/x");
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 1);
	h2b_free(&b);
	t->off[USM_DIR_WRITE] += 40; /* a HEADERS frame of stream 3 never arrived */
	h2b_headers(&b, t->def[0], 5, 0x1, H2B_NV(":method", "GET", ":path", "/y"));
	send_rec(t, USM_DIR_WRITE, 0, &b, 2);
	h2b_free(&b);
	/* Stream 1's request will get no answer that is seen: withdrawn. */
	assert_int_equal(t->n, 2);
	assert_int_equal(t->msg[1].msg.kind, USM_HTTP_NONE);
	assert_int_equal(t->msg[1].key.stream, 1);
	assert_int_equal(stats(t).undecodable[USM_H2_LOST_BYTES], 1);
	h2b_headers(&b, t->def[0], 7, 0x1, H2B_NV(":method", "GET", ":path", "/z"));
	send_rec(t, USM_DIR_WRITE, 0, &b, 3);
	h2b_free(&b);
	assert_int_equal(t->n, 2);
	assert_int_equal(stats(t).undecodable[USM_H2_LOST_BYTES], 1);
	assert_int_equal(stats(t).mem, 0);
}

/* Records of a session whose start was not seen are counted, never decoded. */
static void test_unknown_session(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};

	h2b_headers(&b, t->def[0], 9, 0x1, H2B_NV(":method", "GET", ":path", "/y"));
	assert_int_equal(send_rec(t, USM_DIR_WRITE, 0, &b, 1), 0);
	h2b_free(&b);
	assert_int_equal(t->n, 0);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_UNKNOWN], 1);
	assert_int_equal(stats(t).live, 0);
}

/* A new connection on the same session address starts over: stream 1 again. */
static void test_restart(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};

	client_start(&b, t, 1, "/one");
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 1);
	h2b_free(&b);
	new_conn(t);
	client_start(&b, t, 1, "/two");
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 2);
	h2b_free(&b);
	/* The first connection's request is withdrawn before the second's comes, on the
	 * same key: stream 1 of the session. */
	assert_int_equal(t->n, 3);
	assert_int_equal(t->msg[1].msg.kind, USM_HTTP_NONE);
	assert_int_equal(t->msg[1].key.stream, 1);
	assert_int_equal(t->msg[2].key.stream, 1);
	assert_string_equal(t->msg[2].msg.path, "/two");
	assert_int_equal(stats(t).sessions, 2);
	assert_int_equal(stats(t).live, 1);
}

/* The kernel saw the session end (SSL_free, Close, SSL_set_fd): its decoder goes, its
 * request waiting for an answer is withdrawn (unanswered, not pending until expiry),
 * and it is neither dropped nor evicted; a later record of it is of no session. */
static void test_closed_session(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};
	struct usm_endpoints_stats es;

	client_start(&b, t, 1, "/x");
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 1);
	h2b_free(&b);
	assert_int_equal(stats(t).live, 1);
	assert_true(stats(t).mem > 0);
	assert_int_equal(send_bytes(t, USM_DIR_WRITE, USM_H2_F_CLOSED, NULL, 0, 2), 0);
	assert_int_equal(stats(t).closed, 1);
	assert_int_equal(stats(t).live, 0);
	assert_int_equal(stats(t).mem, 0);
	assert_int_equal(t->n, 2);
	assert_int_equal(t->msg[1].msg.kind, USM_HTTP_NONE);
	assert_int_equal(t->msg[1].key.stream, 1);
	usm_endpoints_stats(t->ep, &es);
	assert_int_equal(es.unanswered, 1);
	assert_int_equal(es.pending, 0);
	h2b_headers(&b, t->def[0], 3, 0x1, H2B_NV(":method", "GET", ":path", "/y"));
	send_rec(t, USM_DIR_WRITE, 0, &b, 3);
	h2b_free(&b);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_UNKNOWN], 1);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_EVICTED], 0);
	assert_int_equal(t->n, 2);
	/* A close of a session not known (never HTTP/2 here): nothing. */
	assert_int_equal(send_bytes(t, USM_DIR_WRITE, USM_H2_F_CLOSED, NULL, 0, 4), 0);
	assert_int_equal(stats(t).closed, 1);
}

/* The kernel lost a direction's framing; an older record than one fed (out of order);
 * both directions claiming the preface: each stops the session, counted by reason. */
static void test_drops(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};
	uint64_t off;

	client_start(&b, t, 1, "/a");
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 1);
	h2b_free(&b);
	h2b_settings_ack(&b);
	send_rec(t, USM_DIR_WRITE, USM_H2_F_UNFRAMED, &b, 2);
	h2b_free(&b);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_UNFRAMED], 1);
	assert_int_equal(stats(t).undecodable[USM_H2_PROTOCOL_ERROR], 0);

	new_conn(t);
	client_start(&b, t, 1, "/b");
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 3);
	h2b_free(&b);
	h2b_settings_ack(&b);
	off = t->off[USM_DIR_WRITE];
	send_rec(t, USM_DIR_WRITE, 0, &b, 4);
	t->off[USM_DIR_WRITE] = off; /* the same bytes again: older than what was fed */
	send_rec(t, USM_DIR_WRITE, 0, &b, 5);
	h2b_free(&b);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_REORDERED], 1);
	assert_int_equal(stats(t).undecodable[USM_H2_HPACK_ERROR], 0);

	new_conn(t);
	client_start(&b, t, 1, "/c");
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 6);
	h2b_free(&b);
	h2b_preface(&b);
	send_rec(t, USM_DIR_READ, USM_H2_F_PREFACE, &b, 7);
	h2b_free(&b);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_DIRECTION], 1);
	assert_int_equal(stats(t).sessions, 3);
	assert_int_equal(stats(t).mem, 0);
}

/* Records whose parts do not add up are refused whole. */
static void test_malformed_records(void **state)
{
	struct t *t = *state;
	static struct usm_h2_record r;

	memset(&r, 0, sizeof(r));
	r.flags = USM_H2_F_NEW | USM_H2_F_PREFACE;
	r.len = 10;
	r.walked = 10;
	r.nruns = 1;
	r.runs[0].copied = 10;
	r.data_len = 10;
	assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 9), -EINVAL);
	assert_int_equal(usm_h2_sessions_record(t->s, &r, 16), -EINVAL);
	r.runs[0].copied = 9;
	assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 10), -EINVAL);
	r.runs[0].copied = 10;
	r.walked = 11;
	assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 10), -EINVAL);
	r.walked = 10;
	r.nruns = USM_H2_RUNS + 1;
	assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 10), -EINVAL);
	r.nruns = 1;
	r.dir = 2;
	assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 10), -EINVAL);
	r.dir = 0;
	r.data_len = USM_H2_CAP + 1;
	assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + USM_H2_CAP + 1),
			 -EINVAL);
	assert_int_equal(stats(t).records, 0);
	assert_int_equal(stats(t).sessions, 0);
}

static bool none_alive(uint32_t pid, void *ctx)
{
	(void)ctx;
	return pid != PID;
}

/* Sessions of processes gone are freed by the sweep; an idle one is kept, and its
 * next request, an hour later, decodes (its HPACK state is still there). */
static void test_sweep(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};
	const uint64_t hour = 3600ull * 1000000000ull;

	client_start(&b, t, 1, "/a");
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 1000);
	h2b_free(&b);
	assert_int_equal(usm_h2_sessions_sweep(t->s, NULL, NULL), 0);
	assert_int_equal(usm_h2_sessions_sweep(t->s, none_alive, NULL), 1);
	assert_int_equal(stats(t).live, 0);
	assert_int_equal(stats(t).mem, 0);
	new_conn(t);
	client_start(&b, t, 1, "/a");
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 1000);
	h2b_free(&b);
	assert_int_equal(usm_h2_sessions_sweep(t->s, NULL, NULL), 0);
	/* The same header again: HPACK sends it as an index into the dynamic table. */
	h2b_headers(&b, t->def[0], 3, 0x1,
		    H2B_NV(":method", "GET", ":scheme", "https", ":path", "/a", ":authority", "a"));
	assert_int_equal(send_rec(t, USM_DIR_WRITE, 0, &b, 1000 + hour), 0);
	h2b_free(&b);
	assert_int_equal(stats(t).requests, 3);
	assert_int_equal(t->msg[t->n - 1].key.stream, 3);
	assert_string_equal(t->msg[t->n - 1].msg.path, "/a");
	assert_int_equal(stats(t).live, 1);
	assert_int_equal(stats(t).reclaimed, 0);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_UNKNOWN], 0);
}

/* A client's first record: the preface alone, a new session of PID (conn and time
 * to set). */
static void preface_record(struct usm_h2_record *r)
{
	memset(r, 0, sizeof(*r));
	memcpy(r->data, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
	r->len = r->walked = r->data_len = 24;
	r->nruns = 1;
	r->runs[0].copied = 24;
	r->flags = USM_H2_F_NEW | USM_H2_F_PREFACE;
	r->pid = PID;
}

/* More sessions than the table holds: the least recently used goes, counted. */
static void test_evicted(void **state)
{
	struct t *t = *state;
	static struct usm_h2_record r;
	int i;

	preface_record(&r);
	for (i = 0; i < USM_H2_SESSIONS_MAX + 3; i++) { /* of 8 processes, under their cap */
		r.pid = PID + (uint32_t)(i % 8);
		r.conn = 0x1000 + (uint64_t)i * 64;
		r.ktime_ns = 10 + (uint64_t)i;
		assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
	}
	assert_int_equal(stats(t).live, USM_H2_SESSIONS_MAX);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_EVICTED], 3);
	/* The oldest went: a record of it is now an unknown session's. */
	r.pid = PID;
	r.conn = 0x1000;
	r.flags = 0;
	r.offset = 24;
	assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_UNKNOWN], 1);
}

/* The table full, one session dead (killed, no longer decoded) but still sent records,
 * which keep it recently used: a new session takes its place, for nothing, not the
 * oldest live one's. */
static void test_dead_session_makes_room_first(void **state)
{
	struct t *t = *state;
	static struct usm_h2_record r;
	int i;

	preface_record(&r);
	for (i = 0; i < USM_H2_SESSIONS_MAX; i++) {
		r.pid = PID + (uint32_t)(i % 8);
		r.conn = 0x1000 + (uint64_t)i * 64;
		r.ktime_ns = 10 + (uint64_t)i;
		assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
	}
	/* Session 5 dies (a record older than one fed: reordered), and goes on. */
	r.pid = PID + 5;
	r.conn = 0x1000 + 5 * 64;
	r.flags = 0;
	r.offset = 0; /* the bytes at 0 again, after 24 were fed */
	r.ktime_ns = 5000;
	assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_REORDERED], 1);
	r.flags = 0;
	r.offset = 24;
	r.ktime_ns = 6000;
	assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
	/* A new session. */
	preface_record(&r);
	r.pid = PID + 9;
	r.conn = 0x900000;
	r.ktime_ns = 7000;
	assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_EVICTED], 0);
	/* The oldest live session is still there: its next record is no unknown one's. */
	r.pid = PID;
	r.conn = 0x1000;
	r.flags = 0;
	r.offset = 24;
	r.ktime_ns = 8000;
	assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_UNKNOWN], 0);
}

/* A user (not root) whose processes open sessions without end, each under its own
 * cap, holds more than its share while there is room; once the table is full, it
 * makes room with its own (user_cap): root's session, older than all of them, stays
 * and decodes. Root's new sessions then take the user's least recently used while it
 * holds more than its share, and only then the least recently used of all. */
static void test_user_cap(void **state)
{
	struct t *t = *state;
	static struct usm_h2_record r;
	struct h2b_buf b = {0};
	int i, procs = 8, users;

	client_start(&b, t, 1, "/root"); /* root's (uid 0), the oldest session */
	t->conn = 0x700000;
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 1);
	h2b_free(&b);
	preface_record(&r);
	r.uid = 1000;
	for (i = 0; i < 2 * USM_H2_SESSIONS_MAX; i++) {
		r.pid = PID + 1 + (uint32_t)(i % procs); /* each far under its process's cap */
		r.conn = 0x1000 + (uint64_t)i * 64;
		r.ktime_ns = 10 + (uint64_t)i;
		assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
		if (i == USM_H2_SESSIONS_MAX - 2) /* the table just full: none dropped yet */
			assert_int_equal(stats(t).dropped[USM_H2_DROP_USER_CAP], 0);
	}
	users = USM_H2_SESSIONS_MAX - 1;
	assert_int_equal(stats(t).live, USM_H2_SESSIONS_MAX);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_USER_CAP], 2 * USM_H2_SESSIONS_MAX - users);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_PROCESS_CAP], 0);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_EVICTED], 0);
	/* Root's session still decodes its next request. */
	h2b_headers(&b, t->def[0], 3, 0x1, H2B_NV(":method", "GET", ":path", "/next"));
	send_rec(t, USM_DIR_WRITE, 0, &b, 5000);
	h2b_free(&b);
	assert_string_equal(t->msg[t->n - 1].msg.path, "/next");
	/* Root's new sessions take the user's, down to its share, then the oldest. */
	r.uid = 0;
	for (i = 0; i < users - USM_H2_SESSIONS_PER_USER + 1; i++) {
		r.pid = PID + 100 + (uint32_t)(i % procs);
		r.conn = 0x100000 + (uint64_t)i * 64;
		r.ktime_ns = 6000 + (uint64_t)i;
		assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
	}
	assert_int_equal(stats(t).dropped[USM_H2_DROP_USER_CAP],
			 2 * USM_H2_SESSIONS_MAX - USM_H2_SESSIONS_PER_USER);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_EVICTED], 1);
	assert_int_equal(stats(t).live, USM_H2_SESSIONS_MAX);
}

/* A full table, a user at exactly its share: its next session makes room with its
 * own, not with root's older ones. */
static void test_user_at_share(void **state)
{
	struct t *t = *state;
	static struct usm_h2_record r;
	int i;

	preface_record(&r);
	for (i = 0; i < USM_H2_SESSIONS_MAX; i++) {
		bool user = i >= USM_H2_SESSIONS_MAX - USM_H2_SESSIONS_PER_USER;

		r.uid = user ? 1000 : 0;
		r.pid = PID + (user ? 50 : 0) + (uint32_t)(i % 8);
		r.conn = 0x1000 + (uint64_t)i * 64;
		r.ktime_ns = 10 + (uint64_t)i;
		assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
	}
	r.uid = 1000;
	r.pid = PID + 50;
	r.conn = 0x900000;
	r.ktime_ns = 5000;
	assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_USER_CAP], 1);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_EVICTED], 0);
	/* Root's oldest is still there: a record of it is not an unknown session's. */
	r.uid = 0;
	r.pid = PID;
	r.conn = 0x1000;
	r.flags = 0;
	r.offset = 24;
	assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_UNKNOWN], 0);
}

/* A process that opens sessions without end makes room with its own: past its cap
 * its least recently used goes (process_cap), and another process's session, older
 * than all of them, stays and decodes. */
static void test_process_cap(void **state)
{
	struct t *t = *state;
	static struct usm_h2_record r;
	struct h2b_buf b = {0};
	int i;

	client_start(&b, t, 1, "/other"); /* another process's, the oldest session */
	t->conn = 0x700000;
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 1);
	h2b_free(&b);
	preface_record(&r);
	r.pid = PID + 1;
	for (i = 0; i < 2 * USM_H2_SESSIONS_MAX; i++) {
		r.conn = 0x1000 + (uint64_t)i * 64;
		r.ktime_ns = 10 + (uint64_t)i;
		assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
	}
	assert_int_equal(stats(t).live, USM_H2_SESSIONS_PER_PROC + 1);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_PROCESS_CAP],
			 2 * USM_H2_SESSIONS_MAX - USM_H2_SESSIONS_PER_PROC);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_EVICTED], 0);
	/* Of the process's sessions, one no longer decoded goes first, before its least
	 * recently used live one. */
	r.conn = 0x1000 + (uint64_t)(2 * USM_H2_SESSIONS_MAX - 1) * 64; /* its newest */
	r.flags = USM_H2_F_UNFRAMED;
	r.offset = 24;
	r.ktime_ns = 3000;
	assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
	assert_int_equal(stats(t).live, USM_H2_SESSIONS_PER_PROC + 1); /* its entry stays */
	r.flags = USM_H2_F_NEW | USM_H2_F_PREFACE;
	r.offset = 0;
	r.conn = 0x900000;
	r.ktime_ns = 3001;
	assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_PROCESS_CAP],
			 2 * USM_H2_SESSIONS_MAX - USM_H2_SESSIONS_PER_PROC);
	r.flags = 0;
	r.offset = 24;
	r.conn = 0x1000 + (uint64_t)USM_H2_SESSIONS_MAX * 64 +
		 (uint64_t)(USM_H2_SESSIONS_MAX - USM_H2_SESSIONS_PER_PROC) * 64; /* its oldest */
	r.ktime_ns = 3002;
	assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_UNKNOWN], 0);
	/* The other process's session still decodes its next request. */
	h2b_headers(&b, t->def[0], 3, 0x1, H2B_NV(":method", "GET", ":path", "/next"));
	send_rec(t, USM_DIR_WRITE, 0, &b, 5000);
	h2b_free(&b);
	assert_string_equal(t->msg[t->n - 1].msg.path, "/next");
}

/* A full table makes room with its least recently used session: one idle for
 * USM_H2_SESSION_IDLE_NS or more is reclaimed, not counted as a drop. */
static void test_reclaimed_when_full(void **state)
{
	struct t *t = *state;
	static struct usm_h2_record r;
	int i;

	preface_record(&r);
	for (i = 0; i < USM_H2_SESSIONS_MAX; i++) { /* of 8 processes, under their cap */
		r.pid = PID + (uint32_t)(i % 8);
		r.conn = 0x1000 + (uint64_t)i * 64;
		r.ktime_ns = 10 + (uint64_t)i;
		assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
	}
	r.pid = PID + 9;
	/* The oldest (t = 10) is idle long enough at this time; the next is not. */
	r.conn = 0x900000;
	r.ktime_ns = 10 + USM_H2_SESSION_IDLE_NS;
	assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
	assert_int_equal(stats(t).reclaimed, 1);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_EVICTED], 0);
	r.conn = 0x900040;
	assert_int_equal(usm_h2_sessions_record(t->s, &r, USM_H2_RECORD_HDR + 24), 0);
	assert_int_equal(stats(t).reclaimed, 1);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_EVICTED], 1);
	assert_int_equal(stats(t).live, USM_H2_SESSIONS_MAX);
}

/* A session that takes the decoders over their memory budget first frees those idle
 * for USM_H2_SESSION_IDLE_NS; with none idle, it is the one dropped. */
static void test_memory_reclaims_idle(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};

	client_start(&b, t, 1, "/a"); /* A, at t = 1000 */
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 1000);
	h2b_free(&b);
	usm_h2_sessions_set_mem_budget(t->s, stats(t).mem + 1);
	/* B, A not idle yet: B goes over the budget and is dropped; A stays. */
	new_conn(t);
	t->conn = CONN + 64;
	client_start(&b, t, 1, "/b");
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 2000);
	h2b_free(&b);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_MEMORY], 1);
	assert_int_equal(stats(t).reclaimed, 0);
	assert_int_equal(stats(t).live, 2); /* B's entry stays, not decoded */
	/* C, once A is idle long enough: A is freed for it, C decodes. */
	new_conn(t);
	t->conn = CONN + 128;
	client_start(&b, t, 1, "/c");
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b,
		 1000 + USM_H2_SESSION_IDLE_NS);
	h2b_free(&b);
	assert_int_equal(stats(t).reclaimed, 1);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_MEMORY], 1);
	/* /a, /b; /b withdrawn when B was dropped; /c; /a withdrawn when A was freed. */
	assert_int_equal(t->n, 5);
	assert_string_equal(t->msg[2].msg.path, "/b");
	assert_int_equal(t->msg[2].msg.kind, USM_HTTP_NONE);
	assert_string_equal(t->msg[3].msg.path, "/c");
	assert_int_equal(t->msg[3].msg.kind, USM_HTTP_REQUEST);
	assert_string_equal(t->msg[4].msg.path, "/a");
	assert_int_equal(t->msg[4].msg.kind, USM_HTTP_NONE);
	/* B's first request was decoded before its decoder crossed the budget. */
	assert_int_equal(stats(t).requests, 3);
	assert_int_equal(stats(t).live, 2);	/* B's and C's */
}

/* One user's sessions hold more than a quarter of the decoders' budget, none idle:
 * another user's session that takes the decoders over the budget frees that user's
 * least recently used, and decodes on; it was the one dropped. */
static void test_memory_user_share(void **state)
{
	struct t *t = *state;
	struct h2b_buf b = {0};
	size_t mem;
	uint64_t i;

	t->uid = 1000;
	for (i = 0; i < 4; i++) {
		new_conn(t);
		t->conn = CONN + 64 * (i + 1);
		client_start(&b, t, 1, "/hog");
		send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 1000 + i);
		h2b_free(&b);
	}
	mem = stats(t).mem;
	usm_h2_sessions_set_mem_budget(t->s, mem + mem / 8); /* four and a half sessions' */
	t->uid = 2000;
	new_conn(t);
	t->conn = CONN + 64 * 10;
	client_start(&b, t, 1, "/other");
	send_rec(t, USM_DIR_WRITE, USM_H2_F_NEW | USM_H2_F_PREFACE, &b, 2000);
	h2b_free(&b);
	assert_int_equal(stats(t).dropped[USM_H2_DROP_MEMORY], 1);
	assert_int_equal(stats(t).live, 4);
	/* Four /hog, /other, then the first /hog withdrawn: its session went. */
	assert_int_equal(t->n, 6);
	assert_string_equal(t->msg[4].msg.path, "/other");
	assert_int_equal(t->msg[4].msg.kind, USM_HTTP_REQUEST);
	assert_string_equal(t->msg[5].msg.path, "/hog");
	assert_int_equal(t->msg[5].msg.kind, USM_HTTP_NONE);
	/* The other user's session still decodes. */
	h2b_headers(&b, t->def[0], 3, 0x1, H2B_NV(":method", "GET", ":path", "/next"));
	send_rec(t, USM_DIR_WRITE, 0, &b, 3000);
	h2b_free(&b);
	assert_string_equal(t->msg[t->n - 1].msg.path, "/next");
	assert_int_equal(t->msg[t->n - 1].msg.kind, USM_HTTP_REQUEST);
}

/* The module's threads at once: a pipeline worker feeding records, housekeeping
 * sweeping, the control socket reading stats (TSan runs this). */
struct racer {
	struct usm_h2_sessions *s;
	int which;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	static __thread struct usm_h2_record rec;
	struct usm_h2_sessions_stats st;
	int i;

	for (i = 0; i < 3000; i++) {
		if (r->which == 0) {
			memset(&rec, 0, sizeof(rec));
			memcpy(rec.data, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
			rec.len = rec.walked = rec.data_len = 24;
			rec.nruns = 1;
			rec.runs[0].copied = 24;
			rec.flags = USM_H2_F_NEW | USM_H2_F_PREFACE;
			rec.pid = PID + (uint32_t)(i % 7);
			rec.conn = 0x1000 + (uint64_t)(i % 100) * 64;
			rec.ktime_ns = (uint64_t)i;
			usm_h2_sessions_record(r->s, &rec, USM_H2_RECORD_HDR + 24);
		} else if (r->which == 1) {
			usm_h2_sessions_sweep(r->s, none_alive, NULL);
		} else {
			usm_h2_sessions_stats(r->s, &st);
			assert_true(st.live <= USM_H2_SESSIONS_MAX);
		}
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct t *t = *state;
	struct racer r[3] = {{t->s, 0}, {t->s, 1}, {t->s, 2}};
	pthread_t th[3];
	int i;

	for (i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
	for (i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(stats(t).sessions, 3000);
	assert_true(stats(t).live <= 100 * 7);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_client_side_exchange),
		T(test_server_side_from_settings),
		T(test_both_ends_start),
		T(test_lost_inside_data),
		T(test_lost_over_headers),
		T(test_dead_session_not_restarted),
		T(test_too_many_streams),
		T(test_one_response_per_stream),
		T(test_status_rejected),
		T(test_reset_and_refused),
		T(test_unknown_session),
		T(test_restart),
		T(test_closed_session),
		T(test_drops),
		T(test_malformed_records),
		T(test_sweep),
		T(test_evicted),
		T(test_process_cap),
		T(test_dead_session_makes_room_first),
		T(test_long_response_not_expired),
		T(test_user_cap),
		T(test_user_at_share),
		T(test_reclaimed_when_full),
		T(test_memory_reclaims_idle),
		T(test_memory_user_share),
		T(test_threads),
	};

	return cmocka_run_group_tests_name("usm_h2_sessions", tests, NULL, NULL);
}
