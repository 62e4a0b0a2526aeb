// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The first request of an HTTP/2 connection from a prefix of its first packet, for the
 * socket filter, which sees packets, not streams. Only header blocks fill a dynamic
 * table, so the client's first block starts from an empty one and decodes on its own
 * (unless it grows its table past the 4 KiB default, which it may only do once the
 * server's SETTINGS allowed it: then it is reported malformed, not decoded wrong). This
 * runs the connection decoder on the client side alone and reports as much of that
 * block as the prefix holds.
 */
#include <string.h>

#include "http2_priv.h"

struct first {
	struct usm_h2_stream_info *out;
	bool done;
};

static void first_event(const struct usm_h2_event *ev, void *ctx)
{
	struct first *fr = ctx;

	if (ev->kind == USM_H2_EV_REQUEST && !fr->done) {
		*fr->out = ev->stream;
		fr->out->request_ns = 0;
		fr->done = true;
	}
}

enum usm_h2_first usm_h2_decode_first_request(const void *buf, size_t len,
					      struct usm_h2_stream_info *out)
{
	static const struct usm_h2_callbacks cb = {.event = first_event};
	struct first fr = {.out = out};
	enum usm_h2_first ret = USM_H2_FIRST_TRUNCATED;
	struct usm_h2_conn *c;
	struct h2_side *s;

	memset(out, 0, sizeof(*out));
	out->grpc_status = -1;
	if (!len)
		return USM_H2_FIRST_TRUNCATED;
	if (len < USM_H2_PREFACE_LEN) {
		/* Too short to tell: a piece of the preface is still a connection start. */
		return memcmp(buf, h2_preface, len) ? USM_H2_FIRST_NEEDS_STATE
						    : USM_H2_FIRST_TRUNCATED;
	}
	if (!usm_h2_is_preface(buf, len))
		return USM_H2_FIRST_NEEDS_STATE;
	c = usm_h2_conn_new();
	if (!c)
		return USM_H2_FIRST_NO_MEMORY;
	usm_h2_feed(c, USM_H2_CLIENT_TO_SERVER, 0, buf, len, &cb, &fr);
	s = &c->side[USM_H2_CLIENT_TO_SERVER];
	if (fr.done) {
		ret = USM_H2_FIRST_REQUEST;
	} else if (c->st.undecodable == USM_H2_NO_MEMORY) {
		ret = USM_H2_FIRST_NO_MEMORY;
	} else if (c->st.undecodable) {
		ret = USM_H2_FIRST_MALFORMED;
	} else if (s->in_block && s->block_type == H2_HEADERS) {
		/* Cut inside the block: what was decoded came from a fresh table, it holds. */
		out->id = s->block_stream;
		h2_info_request(out, &s->fields);
		ret = USM_H2_FIRST_PARTIAL;
	}
	usm_h2_conn_free(c);
	return ret;
}
