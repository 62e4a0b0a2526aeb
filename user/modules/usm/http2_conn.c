// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * HTTP/2 connections: cut each direction's bytes into frames, whatever the chunks, and
 * act on them. Only a frame header in progress and a few bytes of control frames are
 * kept between chunks; header block fragments go straight to the inflater
 * (http2_block.c), DATA payloads are counted down and never copied.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "http2_priv.h"

const char h2_preface[USM_H2_PREFACE_LEN] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static const int reason_errno[USM_H2_REASON_MAX] = {
	[USM_H2_MIDSTREAM] = ENODATA,	  [USM_H2_HPACK_ERROR] = EBADMSG,
	[USM_H2_PROTOCOL_ERROR] = EPROTO, [USM_H2_HEADERS_TOO_LARGE] = EMSGSIZE,
	[USM_H2_NO_MEMORY] = ENOMEM,	  [USM_H2_LOST_BYTES] = ESPIPE,
};

const char *usm_h2_reason_str(enum usm_h2_reason r)
{
	static const char *const names[USM_H2_REASON_MAX] = {
		[USM_H2_OK] = "ok",
		[USM_H2_MIDSTREAM] = "midstream",
		[USM_H2_HPACK_ERROR] = "hpack_error",
		[USM_H2_PROTOCOL_ERROR] = "protocol_error",
		[USM_H2_HEADERS_TOO_LARGE] = "headers_too_large",
		[USM_H2_NO_MEMORY] = "no_memory",
		[USM_H2_LOST_BYTES] = "lost_bytes",
		[USM_H2_TOO_MANY_STREAMS] = "too_many_streams",
		[USM_H2_STREAM_ERROR] = "stream_error",
	};

	return (unsigned)r < USM_H2_REASON_MAX ? names[r] : "unknown";
}

int h2_fail(struct usm_h2_conn *c, enum usm_h2_reason r)
{
	int i;

	if (c->st.undecodable == USM_H2_OK) {
		c->st.undecodable = r;
		c->st.count[r]++;
		/* Nothing more will be decoded: give the memory back now, and the requests
		 * still waiting: no answer of theirs will be seen. */
		for (i = 0; i < 2; i++) {
			if (c->side[i].hd)
				nghttp2_hd_inflate_del(c->side[i].hd);
			c->side[i].hd = NULL;
		}
		h2_streams_abandon(c);
	}
	return -reason_errno[c->st.undecodable];
}

struct usm_h2_conn *usm_h2_conn_new(void)
{
	struct usm_h2_conn *c = calloc(1, sizeof(*c));
	int i;

	if (!c)
		return NULL;
	h2_mem_init(c);
	for (i = 0; i < 2; i++)
		c->side[i].max_frame = USM_H2_FRAME_SIZE_DEFAULT;
	return c;
}

void usm_h2_conn_free(struct usm_h2_conn *c)
{
	int i;

	if (!c)
		return;
	for (i = 0; i < 2; i++) {
		if (c->side[i].hd)
			nghttp2_hd_inflate_del(c->side[i].hd);
	}
	h2_streams_free(c);
	free(c);
}

void usm_h2_conn_stats(const struct usm_h2_conn *c, struct usm_h2_stats *out)
{
	*out = c->st;
	out->streams = c->nstreams;
	out->mem = c->used;
}

bool usm_h2_is_preface(const void *buf, size_t len)
{
	return len >= USM_H2_PREFACE_LEN && !memcmp(buf, h2_preface, USM_H2_PREFACE_LEN);
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Is this frame well-formed, as far as its header tells? (RFC 9113 section 6) */
static bool frame_valid(const struct h2_side *s, enum usm_h2_dir dir)
{
	switch (s->type) {
	case H2_DATA:
		return s->stream && (!(s->flags & H2_FLAG_PADDED) || s->len >= 1);
	case H2_HEADERS:
		return s->stream;
	case H2_PRIORITY:
		return s->stream && s->len == 5;
	case H2_RST_STREAM:
		return s->stream && s->len == 4;
	case H2_SETTINGS:
		return !s->stream && s->len % H2_SETTING_LEN == 0 &&
		       !((s->flags & H2_FLAG_ACK) && s->len);
	case H2_PUSH_PROMISE:
		return s->stream && dir == USM_H2_SERVER_TO_CLIENT;
	case H2_PING:
		return !s->stream && s->len == 8;
	case H2_GOAWAY:
		return !s->stream && s->len >= 8;
	case H2_WINDOW_UPDATE:
		return s->len == 4;
	default:
		return true; /* CONTINUATION: checked by the caller; unknown types: ignored */
	}
}

static int frame_end(struct usm_h2_conn *c, enum usm_h2_dir dir);

/* SETTINGS a side sends bound what the *other* side may send: its frame sizes, and
 * its HPACK encoder's table, whose decoder is our inflater of the other direction. */
static int settings_entry(struct usm_h2_conn *c, enum usm_h2_dir dir, const uint8_t *e)
{
	struct h2_side *s = &c->side[dir], *other = &c->side[!dir];
	struct h2_settings *ns = &s->cur;
	uint32_t value = be32(e + 2);

	switch (e[0] << 8 | e[1]) {
	case H2_SETTINGS_HEADER_TABLE_SIZE:
		ns->table_min = ns->has_table && ns->table_min < value ? ns->table_min : value;
		ns->table_last = value;
		ns->has_table = true;
		break;
	case H2_SETTINGS_MAX_FRAME_SIZE:
		if (value < USM_H2_FRAME_SIZE_DEFAULT || value > USM_H2_FRAME_SIZE_MAX)
			return h2_fail(c, USM_H2_PROTOCOL_ERROR);
		ns->max_frame = value;
		/* The peer may use a larger size as soon as it reads this, before its ACK. */
		if (value > other->max_frame)
			other->max_frame = value;
		break;
	}
	return 0;
}

/* A SETTINGS frame begins: its entries go to their own place (the other side's ACK of
 * an earlier frame may come between two of its pieces, and moves the pending ones). */
static void settings_begin(struct h2_side *s)
{
	memset(&s->cur, 0, sizeof(s->cur));
}

/* It ends: pending, in a new slot, or when every slot is taken, merged into the last.
 * That one then takes effect at the ACK of its first frame, early for the others: a
 * smaller table makes the inflater demand a size update the encoder has not sent yet,
 * an HPACK error, which is undecodable rather than wrong. */
static void settings_end(struct h2_side *s)
{
	struct h2_settings *last;

	if (s->npending < H2_SETTINGS_PENDING) {
		s->pending[s->npending++] = s->cur;
		return;
	}
	last = &s->pending[H2_SETTINGS_PENDING - 1];
	if (s->cur.has_table) {
		last->table_min = last->has_table && last->table_min < s->cur.table_min
					  ? last->table_min
					  : s->cur.table_min;
		last->table_last = s->cur.table_last;
		last->has_table = true;
	}
	if (s->cur.max_frame)
		last->max_frame = s->cur.max_frame;
}

/* dir acknowledged the other side's oldest SETTINGS: from here on dir's frames and
 * header blocks obey it. nghttp2 applies its own settings at the ACK likewise. */
static int settings_acked(struct usm_h2_conn *c, enum usm_h2_dir dir)
{
	struct h2_side *s = &c->side[dir], *other = &c->side[!dir];
	struct h2_settings set;
	nghttp2_hd_inflater *hd;
	int err, rv;

	if (!other->npending)
		return 0; /* an ACK for nothing: not ours to police */
	set = other->pending[0];
	other->npending--;
	memmove(&other->pending[0], &other->pending[1], other->npending * sizeof(set));
	if (set.max_frame)
		s->max_frame = set.max_frame;
	if (!set.has_table)
		return 0;
	err = h2_inflater(c, s, &hd);
	if (err)
		return err;
	/* The smallest size first: the encoder must then shrink to it at least once. */
	rv = nghttp2_hd_inflate_change_table_size(hd, set.table_min);
	if (!rv && set.table_last != set.table_min)
		rv = nghttp2_hd_inflate_change_table_size(hd, set.table_last);
	if (rv)
		return h2_fail(c, rv == NGHTTP2_ERR_NOMEM ? USM_H2_NO_MEMORY : USM_H2_HPACK_ERROR);
	return 0;
}

static int frame_begin(struct usm_h2_conn *c, enum usm_h2_dir dir)
{
	struct h2_side *s = &c->side[dir];
	const uint8_t *h = s->hdr;
	int err;

	s->len = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
	s->type = h[3];
	s->flags = h[4];
	s->stream = be32(h + 5) & 0x7fffffff;
	s->off = 0;
	s->scratch_len = 0;
	c->st.frames[dir]++;
	if (!s->started) {
		/* Each side's first frame is a SETTINGS. Anything else on the server side
		 * means we joined mid-way; the client side already showed its preface. */
		if (s->type != H2_SETTINGS || (s->flags & H2_FLAG_ACK))
			return h2_fail(c, dir == USM_H2_CLIENT_TO_SERVER ? USM_H2_PROTOCOL_ERROR
									 : USM_H2_MIDSTREAM);
		s->started = true;
	}
	if (s->len > s->max_frame || !frame_valid(s, dir))
		return h2_fail(c, USM_H2_PROTOCOL_ERROR);
	/* A header block is one HEADERS/PUSH_PROMISE and its CONTINUATIONs, nothing between. */
	if (s->in_block != (s->type == H2_CONTINUATION) ||
	    (s->in_block && s->stream != s->block_stream))
		return h2_fail(c, USM_H2_PROTOCOL_ERROR);

	switch (s->type) {
	case H2_HEADERS:
	case H2_PUSH_PROMISE:
		s->frag_start = (s->flags & H2_FLAG_PADDED) ? 1 : 0;
		if (s->type == H2_PUSH_PROMISE)
			s->frag_start += 4; /* the promised stream id */
		else if (s->flags & H2_FLAG_PRIORITY)
			s->frag_start += 5; /* dependency and weight */
		s->frag_end = s->len;	    /* less the padding, once its length is read */
		if (s->len < s->frag_start)
			return h2_fail(c, USM_H2_PROTOCOL_ERROR);
		err = h2_block_begin(c, dir);
		if (err)
			return err;
		break;
	case H2_CONTINUATION:
		s->frag_start = 0;
		s->frag_end = s->len;
		break;
	case H2_SETTINGS:
		if (!(s->flags & H2_FLAG_ACK))
			settings_begin(s);
		break;
	}
	return s->len ? 0 : frame_end(c, dir);
}

static int frame_end(struct usm_h2_conn *c, enum usm_h2_dir dir)
{
	struct h2_side *s = &c->side[dir];

	s->hdr_len = 0;
	switch (s->type) {
	case H2_HEADERS:
	case H2_PUSH_PROMISE:
	case H2_CONTINUATION:
		return (s->flags & H2_FLAG_END_HEADERS) ? h2_block_end(c, dir) : 0;
	case H2_DATA:
		if (s->flags & H2_FLAG_END_STREAM)
			h2_stream_end(c, dir, s->stream);
		return 0;
	case H2_RST_STREAM:
		h2_stream_reset(c, dir, s->stream, be32(s->scratch));
		return 0;
	case H2_GOAWAY:
		h2_goaway(c, dir, be32(s->scratch) & 0x7fffffff, be32(s->scratch + 4));
		return 0;
	case H2_SETTINGS:
		if (s->flags & H2_FLAG_ACK)
			return settings_acked(c, dir);
		settings_end(s);
		return 0;
	}
	return 0;
}

/*
 * Payload bytes of a header-block frame: pad length, priority or promised id, the block
 * fragment, padding. *n is cut to the part p begins in. p is NULL for bytes not captured.
 */
static int block_payload(struct usm_h2_conn *c, enum usm_h2_dir dir, const uint8_t *p, size_t *n)
{
	struct h2_side *s = &c->side[dir];

	if (s->off == 0 && s->type != H2_CONTINUATION && (s->flags & H2_FLAG_PADDED)) {
		if (!p)
			return h2_fail(c, USM_H2_LOST_BYTES);
		if (p[0] > s->len - s->frag_start)
			return h2_fail(c, USM_H2_PROTOCOL_ERROR);
		s->frag_end = s->len - p[0];
		*n = 1;
		return 0;
	}
	if (s->off < s->frag_start) {
		if (*n > s->frag_start - s->off)
			*n = s->frag_start - s->off;
		return 0; /* priority, promised stream: not needed */
	}
	if (s->off < s->frag_end) {
		if (*n > s->frag_end - s->off)
			*n = s->frag_end - s->off;
		if (!p)
			return h2_fail(c, USM_H2_LOST_BYTES);
		return h2_block_data(c, dir, p, *n);
	}
	return 0; /* padding */
}

/* Bytes kept from a control frame's payload: a SETTINGS entry at a time, the first 4 of
 * RST_STREAM and 8 of GOAWAY (the rest of which is debug data, skipped). */
static int control_payload(struct usm_h2_conn *c, enum usm_h2_dir dir, const uint8_t *p, size_t *n)
{
	struct h2_side *s = &c->side[dir];
	size_t want = s->type == H2_SETTINGS ? H2_SETTING_LEN : 8;
	int err = 0;

	if (s->scratch_len >= want)
		return 0;
	if (*n > want - s->scratch_len)
		*n = want - s->scratch_len;
	if (!p)
		return h2_fail(c, USM_H2_LOST_BYTES);
	memcpy(s->scratch + s->scratch_len, p, *n);
	s->scratch_len += *n;
	if (s->type == H2_SETTINGS && s->scratch_len == H2_SETTING_LEN) {
		err = settings_entry(c, dir, s->scratch);
		s->scratch_len = 0;
	}
	return err;
}

static int payload(struct usm_h2_conn *c, enum usm_h2_dir dir, const uint8_t *p, size_t len,
		   size_t *used)
{
	struct h2_side *s = &c->side[dir];
	size_t n = len < s->len - s->off ? len : s->len - s->off;
	int err = 0;

	switch (s->type) {
	case H2_HEADERS:
	case H2_PUSH_PROMISE:
	case H2_CONTINUATION:
		err = block_payload(c, dir, p, &n);
		break;
	case H2_SETTINGS:
	case H2_RST_STREAM:
	case H2_GOAWAY:
		err = control_payload(c, dir, p, &n);
		break;
	default:
		break; /* DATA, PING, PRIORITY, WINDOW_UPDATE, unknown: skipped */
	}
	if (err)
		return err;
	s->off += n;
	*used = n;
	return s->off == s->len ? frame_end(c, dir) : 0;
}

/* Consume some of p[0..len) (NULL: bytes not captured); *used says how many. */
static int step(struct usm_h2_conn *c, enum usm_h2_dir dir, const uint8_t *p, size_t len,
		size_t *used)
{
	struct h2_side *s = &c->side[dir];
	size_t n;

	if (dir == USM_H2_CLIENT_TO_SERVER && s->preface_pos < USM_H2_PREFACE_LEN) {
		n = USM_H2_PREFACE_LEN - s->preface_pos;
		n = len < n ? len : n;
		if (!p)
			return h2_fail(c, USM_H2_LOST_BYTES);
		if (memcmp(p, h2_preface + s->preface_pos, n))
			return h2_fail(c, USM_H2_MIDSTREAM);
		s->preface_pos += n;
		*used = n;
		return 0;
	}
	if (s->hdr_len < H2_FRAME_HEADER_LEN) {
		if (!p)
			return h2_fail(c, USM_H2_LOST_BYTES);
		if (!s->hdr_len)
			s->frame_ns = c->now;
		n = H2_FRAME_HEADER_LEN - s->hdr_len;
		n = len < n ? len : n;
		memcpy(s->hdr + s->hdr_len, p, n);
		s->hdr_len += n;
		*used = n;
		return s->hdr_len == H2_FRAME_HEADER_LEN ? frame_begin(c, dir) : 0;
	}
	return payload(c, dir, p, len, used);
}

static int feed(struct usm_h2_conn *c, enum usm_h2_dir dir, uint64_t ktime_ns, const uint8_t *p,
		size_t len, const struct usm_h2_callbacks *cb, void *ctx)
{
	size_t used;
	int err;

	if (!c || (dir != USM_H2_CLIENT_TO_SERVER && dir != USM_H2_SERVER_TO_CLIENT))
		return -EINVAL;
	c->st.bytes[dir] += len;
	if (c->st.undecodable)
		return -reason_errno[c->st.undecodable];
	c->cb = cb;
	c->ctx = ctx;
	c->now = ktime_ns;
	for (err = 0; len && !err; len -= used) {
		used = 0;
		err = step(c, dir, p, len, &used);
		if (p)
			p += used;
	}
	c->cb = NULL;
	c->ctx = NULL;
	return err;
}

void usm_h2_conn_abandon(struct usm_h2_conn *c, uint64_t ktime_ns,
			 const struct usm_h2_callbacks *cb, void *ctx)
{
	if (!c)
		return;
	c->cb = cb;
	c->ctx = ctx;
	c->now = ktime_ns;
	h2_streams_abandon(c);
	c->cb = NULL;
	c->ctx = NULL;
}

int usm_h2_feed(struct usm_h2_conn *c, enum usm_h2_dir dir, uint64_t ktime_ns, const void *buf,
		size_t len, const struct usm_h2_callbacks *cb, void *ctx)
{
	if (!buf && len)
		return -EINVAL;
	return feed(c, dir, ktime_ns, buf, len, cb, ctx);
}

int usm_h2_feed_gap(struct usm_h2_conn *c, enum usm_h2_dir dir, uint64_t ktime_ns, size_t len,
		    const struct usm_h2_callbacks *cb, void *ctx)
{
	return feed(c, dir, ktime_ns, NULL, len, cb, ctx);
}
