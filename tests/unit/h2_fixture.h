/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A cmocka fixture for the HTTP/2 decoder: one connection, each side's HPACK encoder
 * (nghttp2's deflater), what each side sent and not yet fed, and every event seen.
 * Helpers assert on their own failures.
 */
#ifndef BPFTEL_TESTS_H2_FIXTURE_H
#define BPFTEL_TESTS_H2_FIXTURE_H

#include "tests/unit/h2_build.h"
#include "user/modules/usm/http2.h"

#define C2S USM_H2_CLIENT_TO_SERVER
#define S2C USM_H2_SERVER_TO_CLIENT

struct h2t {
	struct usm_h2_conn *c;
	nghttp2_hd_deflater *def[2]; /* each side's encoder */
	struct h2b_buf out[2];	     /* what each side sent, not fed yet */
	struct usm_h2_event ev[512];
	size_t nev;
	uint64_t now;
};

extern const struct usm_h2_callbacks h2t_cbs; /* records into the struct h2t given as ctx */

int h2t_setup(void **state);
int h2t_teardown(void **state);

/* Feed what dir sent so far at t->now, chunk bytes at a time (0: all at once). */
int h2t_send_chunked(struct h2t *t, int dir, size_t chunk);
int h2t_send(struct h2t *t, int dir);

/* Preface and SETTINGS both ways, each acknowledged after the other side's arrived; the
 * client's SETTINGS holds n (id, value) pairs. */
void h2t_handshake_with(struct h2t *t, const uint32_t *client_settings, size_t n);
void h2t_handshake(struct h2t *t);

void h2t_request(struct h2t *t, uint32_t id, const char *method, const char *path, uint8_t flags);
void h2t_response(struct h2t *t, uint32_t id, const char *status, uint8_t flags);
/* Stream 1: a plain GET; stream 3: a gRPC call answered with grpc_status in trailers. */
void h2t_grpc_exchange(struct h2t *t, const char *grpc_status);
/* A curl-like first packet: preface, SETTINGS, WINDOW_UPDATE, HEADERS of stream 1. */
void h2t_first_packet(struct h2b_buf *b, nghttp2_hd_deflater *def);

/* The nth event of kind on a stream (id ~0u: any stream), or NULL. */
const struct usm_h2_event *h2t_find_nth(struct h2t *t, enum usm_h2_event_kind kind, uint32_t id,
					int nth);
const struct usm_h2_event *h2t_find(struct h2t *t, enum usm_h2_event_kind kind, uint32_t id);
struct usm_h2_stats h2t_stats(struct h2t *t);

#endif /* BPFTEL_TESTS_H2_FIXTURE_H */
