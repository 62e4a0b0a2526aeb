// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "h2_fixture.h"

static void h2t_on_event(const struct usm_h2_event *ev, void *ctx)
{
	struct h2t *t = ctx;

	assert_true(t->nev < sizeof(t->ev) / sizeof(t->ev[0]));
	t->ev[t->nev++] = *ev;
}

const struct usm_h2_callbacks h2t_cbs = {.event = h2t_on_event};

int h2t_setup(void **state)
{
	struct h2t *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	t->c = usm_h2_conn_new();
	assert_non_null(t->c);
	assert_int_equal(nghttp2_hd_deflate_new(&t->def[C2S], 4096), 0);
	assert_int_equal(nghttp2_hd_deflate_new(&t->def[S2C], 4096), 0);
	*state = t;
	return 0;
}

int h2t_teardown(void **state)
{
	struct h2t *t = *state;

	usm_h2_conn_free(t->c);
	nghttp2_hd_deflate_del(t->def[C2S]);
	nghttp2_hd_deflate_del(t->def[S2C]);
	h2b_free(&t->out[C2S]);
	h2b_free(&t->out[S2C]);
	free(t);
	return 0;
}

/* Feed what dir sent so far, chunk bytes at a time (0: all at once). */
int h2t_send_chunked(struct h2t *t, int dir, size_t chunk)
{
	struct h2b_buf *b = &t->out[dir];
	size_t off, n;
	int rc = 0;

	for (off = 0; off < b->len && !rc; off += n) {
		n = chunk && chunk < b->len - off ? chunk : b->len - off;
		rc = usm_h2_feed(t->c, dir, t->now, b->p + off, n, &h2t_cbs, t);
	}
	b->len = 0;
	return rc;
}

int h2t_send(struct h2t *t, int dir)
{
	return h2t_send_chunked(t, dir, 0);
}

/* Preface and SETTINGS both ways, acknowledged; the client's carries its settings. */
void h2t_handshake_with(struct h2t *t, const uint32_t *client_settings, size_t n)
{
	h2b_preface(&t->out[C2S]);
	h2b_settings(&t->out[C2S], client_settings, n);
	assert_int_equal(h2t_send(t, C2S), 0);
	h2b_settings(&t->out[S2C], NULL, 0);
	h2b_settings_ack(&t->out[S2C]);
	assert_int_equal(h2t_send(t, S2C), 0);
	h2b_settings_ack(&t->out[C2S]);
	assert_int_equal(h2t_send(t, C2S), 0);
}

void h2t_handshake(struct h2t *t)
{
	h2t_handshake_with(t, NULL, 0);
}

void h2t_request(struct h2t *t, uint32_t id, const char *method, const char *path, uint8_t flags)
{
	h2b_headers(&t->out[C2S], t->def[C2S], id, flags,
		    H2B_NV(":method", method, ":scheme", "https", ":authority", "example.com",
			   ":path", path));
}

void h2t_response(struct h2t *t, uint32_t id, const char *status, uint8_t flags)
{
	h2b_headers(&t->out[S2C], t->def[S2C], id, flags,
		    H2B_NV(":status", status, "content-type", "text/plain"));
}

/* The nth event of kind on a stream (id ~0u: any), or NULL. */
const struct usm_h2_event *h2t_find_nth(struct h2t *t, enum usm_h2_event_kind kind, uint32_t id,
					int nth)
{
	size_t i;

	for (i = 0; i < t->nev; i++) {
		if (t->ev[i].kind == kind && (id == ~0u || t->ev[i].stream.id == id) && !nth--)
			return &t->ev[i];
	}
	return NULL;
}

const struct usm_h2_event *h2t_find(struct h2t *t, enum usm_h2_event_kind kind, uint32_t id)
{
	return h2t_find_nth(t, kind, id, 0);
}

struct usm_h2_stats h2t_stats(struct h2t *t)
{
	struct usm_h2_stats st;

	usm_h2_conn_stats(t->c, &st);
	return st;
}

/* A full gRPC exchange, built once and fed whole or in chunks of any size. */
void h2t_grpc_exchange(struct h2t *t, const char *grpc_status)
{
	h2t_request(t, 1, "GET", "/", NGHTTP2_FLAG_END_STREAM);
	h2b_headers(&t->out[C2S], t->def[C2S], 3, 0,
		    H2B_NV(":method", "POST", ":scheme", "http", ":path", "/acmecorp.Objectstore.v1beta22/Get",
			   ":authority", "svc:50051", "content-type", "application/grpc+proto",
			   "te", "trailers"));
	h2b_data(&t->out[C2S], 3, NGHTTP2_FLAG_END_STREAM, 12);
	h2t_response(t, 1, "200", NGHTTP2_FLAG_END_STREAM);
	h2b_headers(&t->out[S2C], t->def[S2C], 3, 0,
		    H2B_NV(":status", "200", "content-type", "application/grpc"));
	h2b_data(&t->out[S2C], 3, 0, 30);
	h2b_headers(&t->out[S2C], t->def[S2C], 3, NGHTTP2_FLAG_END_STREAM,
		    H2B_NV("grpc-status", grpc_status, "grpc-message", "some message"));
}

void h2t_first_packet(struct h2b_buf *b, nghttp2_hd_deflater *def)
{
	static const uint32_t curl[] = {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
					100,
					NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE,
					10485760,
					NGHTTP2_SETTINGS_ENABLE_PUSH,
					0};

	h2b_preface(b);
	h2b_settings(b, curl, 3);
	h2b_frame(b, NGHTTP2_WINDOW_UPDATE, 0, 0, "\x3f\xff\x00\x01", 4);
	h2b_headers(b, def, 1, NGHTTP2_FLAG_END_STREAM,
		    H2B_NV(":method", "GET", ":path", "/v1/orders/12345", ":scheme", "https",
			   ":authority", "api.example.com", "user-agent", "curl/7.88.1", "accept",
			   "*/*"));
}
