/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Inside the HTTP/2 decoder (http2.h): the connection's layout and what its parts call
 * in each other. http2_conn.c cuts the byte streams into frames, http2_block.c turns
 * header blocks into fields with nghttp2's inflater, http2_streams.c keeps the streams
 * and emits the events, http2_first.c decodes a first packet on its own, http2_mem.c
 * counts every byte.
 */
#ifndef BPFTEL_USM_HTTP2_PRIV_H
#define BPFTEL_USM_HTTP2_PRIV_H

#include <nghttp2/nghttp2.h>

#include "http2.h"

#define H2_FRAME_HEADER_LEN 9

enum h2_frame_type {
	H2_DATA = 0x0,
	H2_HEADERS = 0x1,
	H2_PRIORITY = 0x2,
	H2_RST_STREAM = 0x3,
	H2_SETTINGS = 0x4,
	H2_PUSH_PROMISE = 0x5,
	H2_PING = 0x6,
	H2_GOAWAY = 0x7,
	H2_WINDOW_UPDATE = 0x8,
	H2_CONTINUATION = 0x9,
};

#define H2_FLAG_END_STREAM  0x01
#define H2_FLAG_ACK	    0x01 /* SETTINGS, PING */
#define H2_FLAG_END_HEADERS 0x04
#define H2_FLAG_PADDED	    0x08
#define H2_FLAG_PRIORITY    0x20

#define H2_SETTINGS_HEADER_TABLE_SIZE 0x1
#define H2_SETTINGS_MAX_FRAME_SIZE    0x5
#define H2_SETTING_LEN		      6

/*
 * SETTINGS a side sent that the other has not acknowledged yet. Peers send one or two
 * in a connection's life; past this many unacknowledged ones, the newest are merged into
 * the last slot (their effect then waits for the later ACK).
 */
#define H2_SETTINGS_PENDING 4

/* The fields of a header block that matter, as its headers are decoded. */
struct h2_fields {
	char method[USM_METHOD_MAX];
	char path[USM_PATH_MAX];  /* normalized */
	char route[USM_PATH_MAX]; /* :path as sent, when it fits and is clean: gRPC's route */
	char scheme[USM_H2_SCHEME_MAX];
	int status;	 /* 0: none or invalid */
	int grpc_status; /* -1: none or invalid */
	bool has_status; /* a :status, valid or not: a response, not trailers */
	bool grpc;
};

struct h2_settings {
	bool has_table;
	uint32_t table_min, table_last; /* SETTINGS_HEADER_TABLE_SIZE: smallest and last */
	uint32_t max_frame;		/* SETTINGS_MAX_FRAME_SIZE, 0 if absent */
};

/* One direction: the bytes one side sends. */
struct h2_side {
	nghttp2_hd_inflater *hd; /* created on first use */
	uint8_t preface_pos;	 /* client: preface bytes matched so far */
	bool started;		 /* its first frame, a SETTINGS, was seen */

	/* The frame in progress. */
	uint8_t hdr[H2_FRAME_HEADER_LEN];
	uint8_t hdr_len;
	uint8_t type, flags;
	uint32_t stream, len, off; /* payload length, bytes of it consumed */
	uint32_t frag_start;	   /* block fragment: payload bytes [frag_start, frag_end) */
	uint32_t frag_end;
	uint8_t scratch[8]; /* a SETTINGS entry, RST_STREAM's and GOAWAY's first bytes */
	uint8_t scratch_len;
	uint64_t frame_ns; /* ktime of the frame's first byte */

	/* The header block in progress: HEADERS or PUSH_PROMISE, then CONTINUATIONs. */
	bool in_block;
	uint8_t block_type;
	bool block_end_stream;
	uint32_t block_stream;
	uint32_t block_len; /* fragment bytes so far */
	uint64_t block_ns;
	struct h2_fields fields;

	uint32_t max_frame; /* the largest payload this side may send */
	struct h2_settings cur; /* the SETTINGS frame in progress: its own, until it ends,
				 * since an ACK can come between its pieces */
	struct h2_settings pending[H2_SETTINGS_PENDING];
	uint8_t npending;
};

struct h2_stream {
	struct usm_h2_stream_info info;
	uint64_t seq;	   /* age: the smallest goes first when the table is full */
	bool final_seen;   /* a final (not 1xx) :status came, valid (info.status) or not */
};

struct usm_h2_conn {
	nghttp2_mem mem; /* nghttp2 allocates through the counting allocator below */
	size_t used;
	struct usm_h2_stats st;
	struct h2_side side[2];
	struct h2_stream *streams;
	size_t nstreams, cap;
	uint64_t seq;
	uint32_t client_id_max; /* the highest stream id a client's request opened */

	/* The feed in progress. */
	const struct usm_h2_callbacks *cb;
	void *ctx;
	uint64_t now;
};

/* http2_mem.c: the counting allocator, for nghttp2 (c->mem) and for us. */
void h2_mem_init(struct usm_h2_conn *c);
void *h2_alloc(struct usm_h2_conn *c, size_t size);
void *h2_realloc(struct usm_h2_conn *c, void *ptr, size_t size);
void h2_free(struct usm_h2_conn *c, void *ptr);

/* http2_conn.c */
extern const char h2_preface[USM_H2_PREFACE_LEN]; /* not a string: no NUL */
/* Mark the connection undecodable for r, free its tables; returns r's negative errno. */
int h2_fail(struct usm_h2_conn *c, enum usm_h2_reason r);

/* http2_block.c */
int h2_block_begin(struct usm_h2_conn *c, enum usm_h2_dir dir);
int h2_block_data(struct usm_h2_conn *c, enum usm_h2_dir dir, const uint8_t *p, size_t n);
int h2_block_end(struct usm_h2_conn *c, enum usm_h2_dir dir);
int h2_inflater(struct usm_h2_conn *c, struct h2_side *s, nghttp2_hd_inflater **out);
/* A request's method, path (gRPC: its route) and scheme, from its block's fields. */
void h2_info_request(struct usm_h2_stream_info *info, const struct h2_fields *f);

/* http2_streams.c */
/* Free the streams, each whose request waits for its answer said DROPPED first (to the
 * feed's callbacks, if any): no answer will name it. */
void h2_streams_abandon(struct usm_h2_conn *c);
int h2_stream_headers(struct usm_h2_conn *c, enum usm_h2_dir dir, uint32_t id,
		      const struct h2_fields *f, uint64_t start_ns, bool end_stream);
void h2_stream_end(struct usm_h2_conn *c, enum usm_h2_dir dir, uint32_t id);
void h2_stream_reset(struct usm_h2_conn *c, enum usm_h2_dir dir, uint32_t id, uint32_t code);
void h2_goaway(struct usm_h2_conn *c, enum usm_h2_dir dir, uint32_t last_id, uint32_t code);
void h2_streams_free(struct usm_h2_conn *c);

#endif /* BPFTEL_USM_HTTP2_PRIV_H */
