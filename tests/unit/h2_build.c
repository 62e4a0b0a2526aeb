// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <stdlib.h>
#include <string.h>

#include "h2_build.h"

void h2b_put(struct h2b_buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
}

void h2b_free(struct h2b_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

void h2b_preface(struct h2b_buf *b)
{
	h2b_put(b, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

void h2b_frame(struct h2b_buf *b, uint8_t type, uint8_t flags, uint32_t stream, const void *payload,
	       size_t len)
{
	uint8_t h[9] = {len >> 16, len >> 8, len, type, flags};

	put32(h + 5, stream);
	h2b_put(b, h, sizeof(h));
	h2b_put(b, payload, len);
}

void h2b_settings(struct h2b_buf *b, const uint32_t *pairs, size_t n)
{
	uint8_t p[6 * 8];
	size_t i;

	if (n > 8)
		abort();
	for (i = 0; i < n; i++) {
		p[6 * i] = pairs[2 * i] >> 8;
		p[6 * i + 1] = pairs[2 * i];
		put32(p + 6 * i + 2, pairs[2 * i + 1]);
	}
	h2b_frame(b, NGHTTP2_SETTINGS, 0, 0, p, 6 * n);
}

void h2b_settings_ack(struct h2b_buf *b)
{
	h2b_frame(b, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0, NULL, 0);
}

void h2b_data(struct h2b_buf *b, uint32_t stream, uint8_t flags, size_t len)
{
	uint8_t *zero = calloc(1, len + 1);

	if (!zero)
		abort();
	h2b_frame(b, NGHTTP2_DATA, flags, stream, zero, len);
	free(zero);
}

void h2b_rst(struct h2b_buf *b, uint32_t stream, uint32_t code)
{
	uint8_t p[4];

	put32(p, code);
	h2b_frame(b, NGHTTP2_RST_STREAM, 0, stream, p, sizeof(p));
}

void h2b_goaway(struct h2b_buf *b, uint32_t last_stream, uint32_t code, const char *debug)
{
	uint8_t p[8 + 64];
	size_t n = strlen(debug);

	if (n > 64)
		abort();
	put32(p, last_stream);
	put32(p + 4, code);
	memcpy(p + 8, debug, n);
	h2b_frame(b, NGHTTP2_GOAWAY, 0, 0, p, 8 + n);
}

size_t h2b_block(nghttp2_hd_deflater *def, const char *const *nv, uint8_t *out, size_t cap)
{
	nghttp2_nv nva[64];
	size_t n;
	ssize_t rv;

	for (n = 0; nv[2 * n]; n++) {
		if (n == 64)
			abort();
		nva[n] = (nghttp2_nv){(uint8_t *)nv[2 * n], (uint8_t *)nv[2 * n + 1],
				      strlen(nv[2 * n]), strlen(nv[2 * n + 1]),
				      NGHTTP2_NV_FLAG_NONE};
	}
	rv = nghttp2_hd_deflate_hd(def, out, cap, nva, n);
	if (rv < 0)
		abort();
	return rv;
}

void h2b_headers(struct h2b_buf *b, nghttp2_hd_deflater *def, uint32_t stream, uint8_t flags,
		 const char *const *nv)
{
	uint8_t block[16384];
	size_t n = h2b_block(def, nv, block, sizeof(block));

	h2b_frame(b, NGHTTP2_HEADERS, flags | NGHTTP2_FLAG_END_HEADERS, stream, block, n);
}

void h2b_fuzz_chunks(struct h2b_buf *out, int dir, const uint8_t *data, size_t len, size_t max)
{
	uint8_t h;
	size_t n;

	while (len) {
		n = len < max ? len : max;
		h = (dir ? 0x80 : 0) | n;
		h2b_put(out, &h, 1);
		h2b_put(out, data, n);
		data += n;
		len -= n;
	}
}
