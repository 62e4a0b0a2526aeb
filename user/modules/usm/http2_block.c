// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * HTTP/2 header blocks: each fragment goes to the direction's nghttp2 inflater as it
 * arrives (HPACK, Huffman and the dynamic table are nghttp2's), and the few fields that
 * matter are kept as they come out. The block's end hands them to the streams.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http2_priv.h"

#define GRPC_CONTENT_TYPE "application/grpc"

int h2_inflater(struct usm_h2_conn *c, struct h2_side *s, nghttp2_hd_inflater **out)
{
	if (!s->hd && nghttp2_hd_inflate_new2(&s->hd, &c->mem))
		return h2_fail(c, USM_H2_NO_MEMORY);
	*out = s->hd;
	return 0;
}

static bool name_is(const nghttp2_nv *nv, const char *name)
{
	size_t n = strlen(name);

	return nv->namelen == n && !memcmp(nv->name, name, n);
}

/* Up to 3 decimal digits, as :status and grpc-status are; -1 otherwise. */
static int small_number(const uint8_t *v, size_t n)
{
	int x = 0;
	size_t i;

	if (!n || n > 3)
		return -1;
	for (i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (v[i] - '0');
	}
	return x;
}

static void set_method(struct h2_fields *f, const uint8_t *v, size_t n)
{
	usm_http_method_set(f->method, (const char *)v, n);
}

/*
 * :path, read as far as USM_H2_PATH_SCAN: HPACK lets a 2-byte field repeat a 64 KiB
 * value from the dynamic table in every request, and each byte read costs ~8 passes
 * here; HTTP/1 paths are seen up to USM_PREFIX bytes. A longer one is normalized as
 * cut: its last (incomplete) segment becomes '*'.
 */
static void set_path(struct h2_fields *f, const uint8_t *v, size_t n)
{
	bool ok = n && (v[0] == '/' || (n == 1 && v[0] == '*')), cut = n > USM_H2_PATH_SCAN;
	size_t i;

	if (cut)
		n = USM_H2_PATH_SCAN;
	for (i = 0; i < n && ok; i++)
		ok = v[i] > ' ' && v[i] != 0x7f;
	if (!ok) {
		snprintf(f->path, sizeof(f->path), "(invalid)");
		return;
	}
	usm_path_normalize((const char *)v, n, cut, f->path, sizeof(f->path));
	/* gRPC names its route in the path, "/package.Service/Method": kept as sent, but
	 * only when it is one (a request need only claim to be gRPC). */
	if (n < sizeof(f->route) && usm_grpc_route_ok((const char *)v, n)) {
		memcpy(f->route, v, n);
		f->route[n] = '\0';
	}
}

/* "application/grpc", alone or with a +subtype or parameters; not grpc-web, whose status
 * travels in the body. */
static bool is_grpc(const uint8_t *v, size_t n)
{
	size_t k = sizeof(GRPC_CONTENT_TYPE) - 1;

	return n >= k && !strncasecmp((const char *)v, GRPC_CONTENT_TYPE, k) &&
	       (n == k || v[k] == '+' || v[k] == ';');
}

/* A decoded header: keep it if it matters. The first of a repeated one wins. */
static void field(struct h2_fields *f, const nghttp2_nv *nv)
{
	const uint8_t *v = nv->value;
	size_t n = nv->valuelen;

	if (name_is(nv, ":method") && !f->method[0]) {
		set_method(f, v, n);
	} else if (name_is(nv, ":path") && !f->path[0]) {
		set_path(f, v, n);
	} else if (name_is(nv, ":scheme") && !f->scheme[0]) {
		/* Every request has one: a copy, not a formatted print (~4 % of the agent's
		 * CPU under h2load). */
		_Static_assert(sizeof(f->scheme) > 5, "scheme holds \"https\" and \"other\"");
		if ((n == 4 && !memcmp(v, "http", 4)) || (n == 5 && !memcmp(v, "https", 5)))
			memcpy(f->scheme, v, n);
		else
			memcpy(f->scheme, "other", 5);
	} else if (name_is(nv, ":status") && !f->has_status) {
		f->has_status = true;
		f->status = small_number(v, n);
		if (f->status < 100 || f->status > 599)
			f->status = 0;
	} else if (name_is(nv, "content-type")) {
		f->grpc = f->grpc || is_grpc(v, n);
	} else if (name_is(nv, "grpc-status") && f->grpc_status < 0) {
		f->grpc_status = small_number(v, n);
	}
}

/* nghttp2 says NOMEM when USM_H2_MEM_MAX is reached; a field over its 64 KiB limit is
 * refused at its length prefix, as HEADER_COMP like any other bad block. */
static enum usm_h2_reason inflate_reason(ssize_t rv)
{
	return rv == NGHTTP2_ERR_NOMEM ? USM_H2_NO_MEMORY : USM_H2_HPACK_ERROR;
}

static int inflate(struct usm_h2_conn *c, enum usm_h2_dir dir, const uint8_t *p, size_t n,
		   bool final)
{
	struct h2_side *s = &c->side[dir];
	nghttp2_nv nv;
	ssize_t rv;
	int flags;

	for (;;) {
		flags = 0;
		rv = nghttp2_hd_inflate_hd2(s->hd, &nv, &flags, p, n, final);
		if (rv < 0)
			return h2_fail(c, inflate_reason(rv));
		p += rv;
		n -= rv;
		if (flags & NGHTTP2_HD_INFLATE_EMIT)
			field(&s->fields, &nv);
		if (flags & NGHTTP2_HD_INFLATE_FINAL) {
			nghttp2_hd_inflate_end_headers(s->hd);
			return 0;
		}
		if (!(flags & NGHTTP2_HD_INFLATE_EMIT) && !n)
			return 0;
	}
}

int h2_block_begin(struct usm_h2_conn *c, enum usm_h2_dir dir)
{
	struct h2_side *s = &c->side[dir];
	nghttp2_hd_inflater *hd;

	s->in_block = true;
	s->block_type = s->type;
	s->block_stream = s->stream;
	s->block_end_stream = s->type == H2_HEADERS && (s->flags & H2_FLAG_END_STREAM);
	s->block_ns = s->frame_ns;
	s->block_len = 0;
	memset(&s->fields, 0, sizeof(s->fields));
	s->fields.grpc_status = -1;
	return h2_inflater(c, s, &hd);
}

int h2_block_data(struct usm_h2_conn *c, enum usm_h2_dir dir, const uint8_t *p, size_t n)
{
	struct h2_side *s = &c->side[dir];

	if (n > USM_H2_HEADER_BLOCK_MAX - s->block_len)
		return h2_fail(c, USM_H2_HEADERS_TOO_LARGE);
	s->block_len += n;
	return inflate(c, dir, p, n, false);
}

int h2_block_end(struct usm_h2_conn *c, enum usm_h2_dir dir)
{
	static const uint8_t none; /* nghttp2 steps over its input: no NULL, even empty */
	struct h2_side *s = &c->side[dir];
	int err;

	err = inflate(c, dir, &none, 0, true);
	if (err)
		return err;
	s->in_block = false;
	c->st.header_blocks[dir]++;
	/* A promised request: decoded for the dynamic table's sake; pushes are not tracked. */
	if (s->block_type == H2_PUSH_PROMISE)
		return 0;
	return h2_stream_headers(c, dir, s->block_stream, &s->fields, s->block_ns,
				 s->block_end_stream);
}

void h2_info_request(struct usm_h2_stream_info *info, const struct h2_fields *f)
{
	info->grpc = f->grpc;
	memcpy(info->method, f->method, sizeof(info->method));
	memcpy(info->scheme, f->scheme, sizeof(info->scheme));
	memcpy(info->path, f->grpc && f->route[0] ? f->route : f->path, sizeof(info->path));
	/* No :path: a CONNECT (RFC 9113 8.5), whose target is its :authority. HTTP/1's
	 * authority-form target normalizes to "/": the same route whichever version. */
	if (!info->path[0] && !strcmp(info->method, "CONNECT"))
		memcpy(info->path, "/", 2);
}
