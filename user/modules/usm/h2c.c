// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * USM's h2c connections (h2c.h): a small table of (4-tuple) -> decoder, fed with the
 * segments the socket filter sends, until each connection's first response.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "h2c.h"

struct h2c_conn {
	bool used;
	uint8_t family;
	uint16_t client_port, server_port;
	uint8_t client[16], server[16];
	struct usm_h2_conn *dec; /* NULL once done */
	bool client_seen;	 /* a client segment came (its preface) */
	bool requested;		 /* its first request was decoded: no more client bytes */
	uint32_t first_stream;	 /* that request's stream */
	/* The request waits for its response to be handed on with it (see h2c.h). */
	struct usm_event req_ev;
	struct usm_http_start req;
	uint64_t last_ns;
};

struct usm_h2c {
	pthread_mutex_t lock;
	usm_h2c_sink sink;
	void (*on_request)(const struct usm_event *ev, void *ctx);
	void *ctx;
	struct h2c_conn c[USM_H2C_CONNS_MAX];
	struct usm_h2c_stats st;
};

struct usm_h2c *usm_h2c_new(usm_h2c_sink sink, void *ctx)
{
	struct usm_h2c *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	pthread_mutex_init(&h->lock, NULL);
	h->sink = sink;
	h->ctx = ctx;
	return h;
}

static void release(struct h2c_conn *c)
{
	usm_h2_conn_free(c->dec);
	memset(c, 0, sizeof(*c));
}

void usm_h2c_free(struct usm_h2c *h)
{
	int i;

	if (!h)
		return;
	for (i = 0; i < USM_H2C_CONNS_MAX; i++)
		usm_h2_conn_free(h->c[i].dec);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

static bool same(const struct h2c_conn *c, const struct usm_event *ev)
{
	return c->used && c->family == ev->family && c->client_port == ev->client_port &&
	       c->server_port == ev->server_port && !memcmp(c->client, ev->client_addr, 16) &&
	       !memcmp(c->server, ev->server_addr, 16);
}

static struct h2c_conn *find(struct usm_h2c *h, const struct usm_event *ev)
{
	int i;

	for (i = 0; i < USM_H2C_CONNS_MAX; i++)
		if (same(&h->c[i], ev))
			return &h->c[i];
	return NULL;
}

/* A free slot, or the oldest connection's (counted). */
static struct h2c_conn *slot(struct usm_h2c *h)
{
	struct h2c_conn *old = NULL;
	int i;

	for (i = 0; i < USM_H2C_CONNS_MAX; i++) {
		if (!h->c[i].used)
			return &h->c[i];
		if (!old || h->c[i].last_ns < old->last_ns)
			old = &h->c[i];
	}
	if (old->dec)
		h->st.evicted++;
	release(old);
	return old;
}

/* What one segment yields: a request (kept) or a response (handed on with its request,
 * after the lock). */
struct seg_ctx {
	struct usm_h2c *h;
	struct usm_http_start msg;
	bool request, response;
	bool missed;   /* a response to a first request that was not decoded */
	bool upgraded; /* a response on stream 1 to a client that sent none: Upgrade */
	bool rejected; /* the first response, its :status outside 100-599 */
	uint32_t *first_stream;
};

static void on_event(const struct usm_h2_event *ev, void *arg)
{
	struct seg_ctx *s = arg;
	const struct usm_h2_stream_info *si = &ev->stream;
	struct usm_http_start *m = &s->msg;

	if (s->request || s->response || s->missed || s->rejected || s->upgraded)
		return;
	if (ev->kind == USM_H2_EV_REQUEST && ev->dir == USM_H2_CLIENT_TO_SERVER &&
	    !*s->first_stream) {
		s->request = true;
		*s->first_stream = si->id;
	} else if (ev->kind == USM_H2_EV_RESPONSE && ev->dir == USM_H2_SERVER_TO_CLIENT) {
		if (!*s->first_stream) {
			/* An answer on stream 1 with no request decoded: the HTTP/1.1 request
			 * that asked to upgrade (Upgrade: h2c, RFC 7540 3.2) is stream 1,
			 * counted as HTTP/1 with its 101; the server answers it as it switches,
			 * before or after the client's preface (which holds no request). With
			 * prior knowledge stream 1's answer cannot come before its request's
			 * segment: one of those lost is counted where it was (the kernel's
			 * ring). Another stream's: a request not captured. */
			if (si->id == 1)
				s->upgraded = true;
			else
				s->missed = true;
			return;
		}
		if (si->id != *s->first_stream)
			return; /* another stream's: its request was not counted */
		if (!si->status) {
			s->rejected = true; /* the decoder keeps a :status out of range as 0 */
			return;
		}
		s->response = true;
	} else {
		return;
	}
	memset(m, 0, sizeof(*m));
	m->kind = s->response ? USM_HTTP_RESPONSE : USM_HTTP_REQUEST;
	m->version = 20;
	memcpy(m->method, si->method, sizeof(m->method));
	memcpy(m->path, si->path, sizeof(m->path));
	m->status = s->response ? si->status : 0;
	/* A gRPC call over h2c goes to the HTTP families, by its path and :status: its
	 * grpc-status comes in trailers, past the captured prefix, and its latency runs to
	 * the response's HEADERS. In the RPC families it would sit beside the TLS calls,
	 * measured to their END_STREAM, under an empty rpc_grpc_status_code. */
	m->grpc = false;
	m->grpc_status = -1;
}

static bool settings_start(const struct usm_event *ev)
{
	const uint8_t *p = (const uint8_t *)ev->prefix;

	return ev->prefix_len >= 9 && p[0] == 0 && p[3] == 4 && p[4] == 0 &&
	       !(p[5] | p[6] | p[7] | p[8]);
}

void usm_h2c_on_request(struct usm_h2c *h, void (*fn)(const struct usm_event *ev, void *ctx))
{
	h->on_request = fn;
}

void usm_h2c_segment(struct usm_h2c *h, const struct usm_event *ev)
{
	const struct usm_h2_callbacks cb = {.event = on_event};
	struct seg_ctx s = {.h = h};
	bool client = ev->kind == USM_KIND_H2C_CLIENT, deliver = false, requested = false;
	struct usm_http_start req;
	struct usm_event req_ev;
	struct usm_h2_stats ds;
	struct h2c_conn *c;
	int err;

	pthread_mutex_lock(&h->lock);
	h->st.segments++;
	c = find(h, ev);
	if (c && client && c->client_seen && usm_h2_is_preface(ev->prefix, ev->prefix_len)) {
		/* A second preface: a new connection on the 4-tuple of one still kept (a
		 * port used again within USM_H2C_IDLE_NS); that one is over, given up if
		 * not done. */
		if (c->dec)
			h->st.evicted++;
		release(c);
		c = NULL;
	}
	if (!c) {
		if (!client && !settings_start(ev)) {
			h->st.unmatched++;
			goto out;
		}
		c = slot(h);
		c->used = true;
		c->family = ev->family;
		c->client_port = ev->client_port;
		c->server_port = ev->server_port;
		memcpy(c->client, ev->client_addr, 16);
		memcpy(c->server, ev->server_addr, 16);
		c->dec = usm_h2_conn_new();
		h->st.connections++;
		if (!c->dec)
			h->st.undecodable[USM_H2_NO_MEMORY]++;
	}
	c->last_ns = ev->ktime_ns;
	c->client_seen |= client;
	s.first_stream = &c->first_stream;
	if (!c->dec || (client && c->requested))
		goto out; /* done with, or no memory; or past the client's first request */
	err = usm_h2_feed(c->dec, client ? USM_H2_CLIENT_TO_SERVER : USM_H2_SERVER_TO_CLIENT,
			  ev->ktime_ns, ev->prefix, ev->prefix_len, &cb, &s);
	/* The bytes past the prefix as a gap: harmless inside a DATA payload, the end of
	 * the decoding inside a header block (a first request too large for the prefix).
	 * Not once this side's first message is in: the client's next streams (a second
	 * request cut by the prefix) are never decoded, and the answer ends the decoding. */
	if (!err && ev->len > ev->prefix_len && !(client ? s.request : s.response))
		err = usm_h2_feed_gap(c->dec,
				      client ? USM_H2_CLIENT_TO_SERVER : USM_H2_SERVER_TO_CLIENT,
				      ev->ktime_ns, ev->len - ev->prefix_len, &cb, &s);
	if (s.upgraded) {
		h->st.upgraded++;
		err = 0;
		usm_h2_conn_free(c->dec); /* its first request was HTTP/1's: done with */
		c->dec = NULL;
	} else if (s.missed) {
		err = -ESPIPE; /* the answer came; its request was never decoded */
	} else if (err < 0) {
		usm_h2_conn_stats(c->dec, &ds);
		err = ds.undecodable;
	}
	if (err) {
		h->st.undecodable[err > 0 && err < USM_H2_REASON_MAX ? err : USM_H2_LOST_BYTES]++;
		usm_h2_conn_free(c->dec);
		c->dec = NULL;
	}
	if (s.request) {
		c->requested = true;
		c->req = s.msg;
		c->req_ev = *ev;
		h->st.requests++;
		requested = true;
	}
	if (s.rejected) {
		/* Not a row with status 0: counted as HTTP/1's rejected status lines are,
		 * and done with the connection (nothing later on it is decoded anyway). */
		h->st.rejected_status++;
		usm_h2_conn_free(c->dec);
		c->dec = NULL;
	}
	if (s.response) {
		h->st.responses++;
		usm_h2_conn_free(c->dec); /* done: later streams need every block before */
		c->dec = NULL;
		req = c->req;
		req_ev = c->req_ev;
		deliver = true;
	} else if (!c->dec && c->requested && !s.rejected) {
		/* Its decoding ended here (this segment's error), the first request in and
		 * never to be answered: no sweep or eviction counts it, as they count only
		 * connections still decoding. */
		h->st.unanswered++;
	}
out:
	pthread_mutex_unlock(&h->lock);
	if (requested && h->on_request)
		h->on_request(ev, h->ctx);
	if (deliver) {
		h->sink(&req_ev, &req, h->ctx);
		h->sink(ev, &s.msg, h->ctx);
	}
}

void usm_h2c_sweep(struct usm_h2c *h, uint64_t now_ns)
{
	int i;

	pthread_mutex_lock(&h->lock);
	for (i = 0; i < USM_H2C_CONNS_MAX; i++) {
		struct h2c_conn *c = &h->c[i];

		if (!c->used || now_ns <= USM_H2C_IDLE_NS || c->last_ns >= now_ns - USM_H2C_IDLE_NS)
			continue;
		if (c->dec)
			h->st.expired++;
		release(c);
	}
	pthread_mutex_unlock(&h->lock);
}

void usm_h2c_stats(struct usm_h2c *h, struct usm_h2c_stats *out)
{
	pthread_mutex_lock(&h->lock);
	*out = h->st;
	pthread_mutex_unlock(&h->lock);
}
