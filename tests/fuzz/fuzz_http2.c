// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libFuzzer target: the HTTP/2 decoder fed both directions of a connection in chunks the
 * input chooses. Input: chunks, each a byte h then its bytes; h & 0x80 is the direction
 * (set: server to client), h & 0x7f the length, 0x7f meaning a gap of (next byte + 1) * 64
 * bytes not captured (tests/unit/h2_build.h writes this format; the seeds in
 * tests/fuzz/corpus/http2 are real exchanges). Every event must be well-formed, memory
 * must stay under USM_H2_MEM_MAX, and an undecodable connection must stay silent.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "user/modules/usm/http2.h"

struct run {
	uint64_t now;
	bool silent; /* undecodable: no event may come */
};

static void check_string(const char *s, size_t size)
{
	const char *end = memchr(s, '\0', size);

	if (!end)
		abort();
	for (; s < end; s++) {
		if ((unsigned char)*s <= ' ' || *s == 0x7f)
			abort();
	}
}

static void check_info(const struct usm_h2_stream_info *si)
{
	check_string(si->method, sizeof(si->method));
	check_string(si->path, sizeof(si->path));
	check_string(si->scheme, sizeof(si->scheme));
	if (si->id > 0x7fffffff || si->grpc_status < -1 || si->grpc_status > 999)
		abort();
	if (si->status && (si->status < 200 || si->status > 599))
		abort(); /* a final status, or none */
	if (si->method[0] && strcmp(si->method, USM_METHOD_OTHER) &&
	    !usm_http_method(si->method, strlen(si->method)))
		abort();
	if (si->path[0] && si->path[0] != '/' && strcmp(si->path, "*") &&
	    strcmp(si->path, "(invalid)"))
		abort();
}

static void on_event(const struct usm_h2_event *ev, void *ctx)
{
	struct run *r = ctx;

	if (r->silent || ev->kind < USM_H2_EV_REQUEST || ev->kind > USM_H2_EV_REFUSED ||
	    (ev->dir != USM_H2_CLIENT_TO_SERVER && ev->dir != USM_H2_SERVER_TO_CLIENT))
		abort();
	if (ev->ktime_ns != r->now || ev->latency_ns > ev->ktime_ns)
		abort();
	if (ev->kind == USM_H2_EV_GOAWAY && ev->stream.id)
		abort();
	if (ev->kind == USM_H2_EV_REQUEST && !ev->stream.request_seen)
		abort();
	check_info(&ev->stream);
}

static void first_request(const uint8_t *data, size_t size)
{
	struct usm_h2_stream_info si;
	enum usm_h2_first f = usm_h2_decode_first_request(data, size, &si);

	if (f > USM_H2_FIRST_NO_MEMORY)
		abort();
	check_info(&si);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct usm_h2_callbacks cb = {.event = on_event};
	struct usm_h2_conn *c = usm_h2_conn_new();
	struct run r = {0};
	struct usm_h2_stats st;
	size_t i = 0, n;
	int rc, dir;

	if (!c)
		return 0;
	while (i < size) {
		dir = data[i] & 0x80 ? USM_H2_SERVER_TO_CLIENT : USM_H2_CLIENT_TO_SERVER;
		n = data[i++] & 0x7f;
		r.now += 1000;
		if (n == 0x7f) {
			n = i < size ? (data[i++] + 1) * 64u : 64;
			rc = usm_h2_feed_gap(c, dir, r.now, n, &cb, &r);
		} else {
			n = n < size - i ? n : size - i;
			rc = usm_h2_feed(c, dir, r.now, data + i, n, &cb, &r);
			i += n;
		}
		usm_h2_conn_stats(c, &st);
		if (st.mem > USM_H2_MEM_MAX || st.mem_peak > USM_H2_MEM_MAX ||
		    st.streams > USM_H2_STREAMS_MAX || (rc != 0) != (st.undecodable != USM_H2_OK))
			abort();
		r.silent = st.undecodable != USM_H2_OK;
	}
	usm_h2_conn_free(c);
	first_request(data, size < 512 ? size : 512);
	return 0;
}
