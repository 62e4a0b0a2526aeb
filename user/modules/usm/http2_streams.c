// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * HTTP/2 streams: what each open stream's request said, and the events. A stream is kept
 * from its request headers until both halves ended, one side reset it, or the server's
 * GOAWAY said it would not be processed; at most USM_H2_STREAMS_MAX at once (the oldest
 * goes). The table is a small array searched linearly: a hundred entries at most, and a
 * few in the common case.
 */
#include <string.h>

#include "http2_priv.h"

#define STREAMS_INITIAL 4

static void info_init(struct usm_h2_stream_info *info, uint32_t id)
{
	memset(info, 0, sizeof(*info));
	info->id = id;
	info->grpc_status = -1;
}

static struct h2_stream *find(struct usm_h2_conn *c, uint32_t id)
{
	size_t i;

	for (i = 0; i < c->nstreams; i++) {
		if (c->streams[i].info.id == id)
			return &c->streams[i];
	}
	return NULL;
}

static void drop(struct usm_h2_conn *c, struct h2_stream *st)
{
	*st = c->streams[--c->nstreams];
}

static void emit(struct usm_h2_conn *c, enum usm_h2_event_kind kind, enum usm_h2_dir dir,
		 const struct usm_h2_stream_info *info, uint32_t code)
{
	struct usm_h2_event ev = {
		.kind = kind,
		.dir = dir,
		.ktime_ns = c->now,
		.stream = *info,
		.error_code = code,
	};

	/* An exchange is over: the server finished its answer, or either side gave up. */
	if (info->request_seen && c->now >= info->request_ns &&
	    ((kind == USM_H2_EV_END_STREAM && dir == USM_H2_SERVER_TO_CLIENT) ||
	     kind == USM_H2_EV_RESET))
		ev.latency_ns = c->now - info->request_ns;
	if (c->cb && c->cb->event)
		c->cb->event(&ev, c->ctx);
}

static struct h2_stream *add(struct usm_h2_conn *c, uint32_t id)
{
	struct h2_stream *st, *oldest;
	size_t cap;

	if (c->nstreams == USM_H2_STREAMS_MAX) {
		/* The oldest the server has answered whole goes first, unsaid: its exchange
		 * is over, whatever its client still sends (a gRPC client stream). Only
		 * when none is does a request still waiting give way. */
		oldest = NULL;
		for (st = c->streams; st < c->streams + c->nstreams; st++) {
			if (st->info.server_ended && (!oldest || st->seq < oldest->seq))
				oldest = st;
		}
		if (oldest) {
			drop(c, oldest);
		} else {
			oldest = &c->streams[0];
			for (st = c->streams; st < c->streams + c->nstreams; st++) {
				if (st->seq < oldest->seq)
					oldest = st;
			}
			/* Said, so that whoever holds its request knows no answer will
			 * name it. */
			emit(c, USM_H2_EV_DROPPED, USM_H2_CLIENT_TO_SERVER, &oldest->info, 0);
			drop(c, oldest);
			c->st.count[USM_H2_TOO_MANY_STREAMS]++;
		}
	}
	if (c->nstreams == c->cap) {
		cap = c->cap ? 2 * c->cap : STREAMS_INITIAL;
		cap = cap < USM_H2_STREAMS_MAX ? cap : USM_H2_STREAMS_MAX;
		st = h2_realloc(c, c->streams, cap * sizeof(*st));
		if (!st)
			return NULL;
		c->streams = st;
		c->cap = cap;
	}
	st = &c->streams[c->nstreams++];
	info_init(&st->info, id);
	st->seq = c->seq++;
	st->final_seen = false;
	return st;
}

void h2_streams_abandon(struct usm_h2_conn *c)
{
	size_t i;

	for (i = 0; i < c->nstreams; i++) {
		if (c->streams[i].info.request_seen && !c->streams[i].info.server_ended)
			emit(c, USM_H2_EV_DROPPED, USM_H2_CLIENT_TO_SERVER, &c->streams[i].info, 0);
	}
	h2_streams_free(c);
}

void h2_streams_free(struct usm_h2_conn *c)
{
	h2_free(c, c->streams);
	c->streams = NULL;
	c->nstreams = c->cap = 0;
}

/* Has dir ended the stream st tracks? Then what it sends there is a stream error. */
static bool dir_ended(const struct h2_stream *st, enum usm_h2_dir dir)
{
	return st && (dir == USM_H2_CLIENT_TO_SERVER ? st->info.client_ended
						     : st->info.server_ended);
}

static int stream_error(struct usm_h2_conn *c)
{
	c->st.count[USM_H2_STREAM_ERROR]++;
	return 0;
}

/* END_STREAM from dir on a stream, tracked (st) or not (info only). */
static void ended(struct usm_h2_conn *c, enum usm_h2_dir dir, struct h2_stream *st,
		  struct usm_h2_stream_info *info)
{
	if (dir == USM_H2_CLIENT_TO_SERVER)
		info->client_ended = true;
	else
		info->server_ended = true;
	emit(c, USM_H2_EV_END_STREAM, dir, info, 0);
	if (st && info->client_ended && info->server_ended)
		drop(c, st);
}

/*
 * A complete header block from dir. From the client, one with a :method is a request
 * (a new stream), one without is trailers. From the server, one with a :status is the
 * response (1xx ones are interim and not reported), one without is trailers.
 */
int h2_stream_headers(struct usm_h2_conn *c, enum usm_h2_dir dir, uint32_t id,
		      const struct h2_fields *f, uint64_t start_ns, bool end_stream)
{
	struct h2_stream *st = find(c, id);
	struct usm_h2_stream_info tmp, *info;

	if (dir_ended(st, dir))
		return stream_error(c);
	if (dir == USM_H2_CLIENT_TO_SERVER && f->method[0]) {
		if (st && st->info.request_seen)
			return stream_error(c); /* a second request on the stream */
		/* A client opens odd ids, each above the last (RFC 9113 5.1.1): a request
		 * on an id used before (its stream over and forgotten) or an even one is a
		 * connection error the server refuses, not a request it will answer. */
		if (!st && (!(id & 1) || id <= c->client_id_max))
			return stream_error(c);
		if (!st) {
			c->client_id_max = id;
			st = add(c, id);
			if (!st)
				return h2_fail(c, USM_H2_NO_MEMORY);
		}
		info = &st->info;
		h2_info_request(info, f);
		info->request_seen = true;
		info->request_ns = start_ns;
		emit(c, USM_H2_EV_REQUEST, dir, info, 0);
	} else {
		info = st ? &st->info : &tmp;
		if (!st)
			info_init(info, id);
		if (dir == USM_H2_SERVER_TO_CLIENT && f->has_status) {
			if (f->status >= 100 && f->status < 200)
				return 0; /* interim: the final response follows */
			/* A second final response, also after one whose :status was
			 * invalid (0: rejected, its request withdrawn): one exchange is
			 * one request and one response. */
			if (st && st->final_seen) {
				/* Its END_STREAM still ends the exchange the first answered. */
				if (end_stream)
					ended(c, dir, st, &st->info);
				return stream_error(c);
			}
			if (st)
				st->final_seen = true;
			info->status = f->status;
			/* gRPC or not is the request's claim, which its row and series take
			 * (endpoints.c): a response's content-type does not make an HTTP
			 * exchange a gRPC one in counters.http2.grpc_responses either. */
		}
		/* The server's: a client's trailers may carry one too, not its status. */
		if (dir == USM_H2_SERVER_TO_CLIENT && f->grpc_status >= 0)
			info->grpc_status = f->grpc_status;
		info->server_ending = dir == USM_H2_SERVER_TO_CLIENT && end_stream;
		emit(c, f->has_status ? USM_H2_EV_RESPONSE : USM_H2_EV_TRAILERS, dir, info, 0);
	}
	if (end_stream)
		ended(c, dir, st, info);
	return 0;
}

void h2_stream_end(struct usm_h2_conn *c, enum usm_h2_dir dir, uint32_t id)
{
	struct h2_stream *st = find(c, id);
	struct usm_h2_stream_info tmp;

	if (dir_ended(st, dir)) {
		stream_error(c);
		return;
	}
	if (!st)
		info_init(&tmp, id);
	ended(c, dir, st, st ? &st->info : &tmp);
}

void h2_stream_reset(struct usm_h2_conn *c, enum usm_h2_dir dir, uint32_t id, uint32_t code)
{
	struct h2_stream *st = find(c, id);
	struct usm_h2_stream_info tmp;

	if (!st)
		info_init(&tmp, id);
	emit(c, USM_H2_EV_RESET, dir, st ? &st->info : &tmp, code);
	if (st)
		drop(c, st);
}

void h2_goaway(struct usm_h2_conn *c, enum usm_h2_dir dir, uint32_t last_id, uint32_t code)
{
	struct usm_h2_stream_info none;
	struct usm_h2_event ev = {
		.kind = USM_H2_EV_GOAWAY,
		.dir = dir,
		.ktime_ns = c->now,
		.error_code = code,
		.last_stream_id = last_id,
	};
	size_t i;

	info_init(&none, 0);
	ev.stream = none;
	if (c->cb && c->cb->event)
		c->cb->event(&ev, c->ctx);
	/* The server will not answer the client's streams above last_id; a client's
	 * GOAWAY names the server's (pushed) streams, which are not tracked. */
	if (dir != USM_H2_SERVER_TO_CLIENT)
		return;
	for (i = 0; i < c->nstreams;) {
		/* One the server has answered was not refused, whatever it says now. */
		if (c->streams[i].info.id <= last_id || c->streams[i].final_seen ||
		    c->streams[i].info.server_ended) {
			i++;
			continue;
		}
		emit(c, USM_H2_EV_REFUSED, dir, &c->streams[i].info, code);
		drop(c, &c->streams[i]); /* the last one moved here: look at i again */
	}
}
