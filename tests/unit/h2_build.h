/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Test-side HTTP/2 writer: frames by hand, header blocks with libnghttp2's HPACK
 * deflater, so that the decoder is checked against an encoder it shares nothing with
 * but the library. Failures abort: this is test code.
 */
#ifndef BPFTEL_TESTS_H2_BUILD_H
#define BPFTEL_TESTS_H2_BUILD_H

#include <stddef.h>
#include <stdint.h>
#include <nghttp2/nghttp2.h>

/* A header list: name, value, ..., NULL. */
#define H2B_NV(...) ((const char *const[]){__VA_ARGS__, NULL})

struct h2b_buf {
	uint8_t *p;
	size_t len, cap;
};

void h2b_put(struct h2b_buf *b, const void *p, size_t n);
void h2b_free(struct h2b_buf *b);

void h2b_preface(struct h2b_buf *b);
void h2b_frame(struct h2b_buf *b, uint8_t type, uint8_t flags, uint32_t stream, const void *payload,
	       size_t len);
/* A SETTINGS frame with n (id, value) pairs; n == 0 is an empty one. */
void h2b_settings(struct h2b_buf *b, const uint32_t *pairs, size_t n);
void h2b_settings_ack(struct h2b_buf *b);
void h2b_data(struct h2b_buf *b, uint32_t stream, uint8_t flags, size_t len);
void h2b_rst(struct h2b_buf *b, uint32_t stream, uint32_t code);
void h2b_goaway(struct h2b_buf *b, uint32_t last_stream, uint32_t code, const char *debug);

/* HPACK-encode nv into out; returns its length. */
size_t h2b_block(nghttp2_hd_deflater *def, const char *const *nv, uint8_t *out, size_t cap);
/* One HEADERS frame with END_HEADERS (and flags, e.g. END_STREAM) holding nv's block. */
void h2b_headers(struct h2b_buf *b, nghttp2_hd_deflater *def, uint32_t stream, uint8_t flags,
		 const char *const *nv);

/*
 * The fuzz target's input format (tests/fuzz/fuzz_http2.c): a sequence of chunks, each a
 * byte h then its bytes: h & 0x80 is the direction (set: server to client), h & 0x7f the
 * length; 0x7f means a gap of (next byte + 1) * 64 bytes not captured instead.
 * Appends data as dir's chunks of at most max bytes (1..126).
 */
void h2b_fuzz_chunks(struct h2b_buf *out, int dir, const uint8_t *data, size_t len, size_t max);

#endif /* BPFTEL_TESTS_H2_BUILD_H */
