/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * HTTP/2 (and gRPC over it) for USM, decoded from the bytes each side of one connection
 * sends: TLS plaintext from the SSL uprobes, or cleartext h2c with prior knowledge. The
 * caller feeds each direction's bytes in order, in whatever chunks they arrive (one TLS
 * read or write each); the decoder reports request and response headers, trailers, the
 * end of each half of a stream, resets and GOAWAY through a callback. Pure logic: no BPF,
 * no printing, no threads (one connection is fed by one thread at a time).
 *
 * Header blocks are decoded with libnghttp2's HPACK inflater, one per direction. Block
 * fragments go to the inflater as they arrive, so nothing of a header block is buffered
 * here, and DATA payloads are skipped, never copied: what a connection holds is its frame
 * header in progress (9 bytes), the handful of fields kept per stream, and the inflaters'
 * dynamic tables. All of it, nghttp2's allocations included, is counted against
 * USM_H2_MEM_MAX.
 *
 * Honest about missed state. HPACK is stateful: a header block can only be decoded with
 * every earlier block of its direction. A connection whose client side does not begin
 * with the connection preface, or whose server side does not begin with a SETTINGS frame,
 * was joined mid-way (or is not HTTP/2); it is undecodable from the start and reports
 * nothing. Any later error (HPACK, framing, memory, bytes lost) makes it undecodable for
 * good: it then reports nothing more, frees its tables, and says why (usm_h2_conn_stats).
 *
 * Latency: each event carries the ktime_ns of the chunk that completed it, and a stream
 * remembers when its request began (the chunk holding the first byte of its HEADERS
 * frame). The server's END_STREAM and a RST_STREAM carry latency_ns, request start to
 * that chunk: chunk granularity, which is what the probes see anyway.
 *
 * Order: each direction's chunks in the order they were sent, and the two directions in
 * the order things happened where one answers the other: a SETTINGS takes effect when
 * the peer's ACK is fed (that is when the peer's encoder applies it), and an ACK fed
 * with no SETTINGS of the other side pending is ignored (not taken for a later one):
 * each side's chunks are fed in the order sent, so a peer's ACK follows what it read.
 *
 * Callbacks run inside usm_h2_feed() and must not feed or free the same connection.
 */
#ifndef BPFTEL_USM_HTTP2_H
#define BPFTEL_USM_HTTP2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"

/* "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n": the first bytes a client sends. */
#define USM_H2_PREFACE_LEN 24

/*
 * Streams tracked per connection. Real clients open a few to a few hundred at once
 * (SETTINGS_MAX_CONCURRENT_STREAMS is commonly 100 or 128); a stream costs ~180 bytes.
 * Beyond this the oldest is dropped (counted as USM_H2_TOO_MANY_STREAMS, reported as
 * USM_H2_EV_DROPPED), so its later frames report a stream with no known request.
 */
#define USM_H2_STREAMS_MAX 128

/*
 * Every byte a connection allocates, nghttp2's included. Measured with nghttp2 1.52: a
 * fresh connection ~5 KiB; default 4 KiB tables full of small entries and 128 open
 * streams ~90 KiB; two 64 KiB tables (what browsers offer) of 100-byte entries ~450 KiB,
 * of the tiniest entries ~1 MB (nghttp2 spends ~7 bytes per table byte on those). A peer
 * that needs more makes the connection undecodable (USM_H2_NO_MEMORY) rather than making
 * the agent grow.
 */
#define USM_H2_MEM_MAX (1024 * 1024)

/*
 * A header block's size (HEADERS or PUSH_PROMISE and its CONTINUATIONs, compressed).
 * Not for memory (fragments are inflated as they come, nothing is buffered), but no
 * peer sends this much: nghttp2 refuses any one field over 64 KiB, servers cap a whole
 * header list near there or below (nginx 32 KiB, Envoy 60 KiB by default). A block past
 * it is hostile or a capture gone wrong; the connection is dropped as
 * USM_H2_HEADERS_TOO_LARGE rather than decoded at any length.
 */
#define USM_H2_HEADER_BLOCK_MAX (64 * 1024)

/* The protocol's largest frame payload (24-bit length; SETTINGS_MAX_FRAME_SIZE may not
 * exceed it), and the size every peer accepts until it says otherwise. */
#define USM_H2_FRAME_SIZE_MAX	  ((1u << 24) - 1)
#define USM_H2_FRAME_SIZE_DEFAULT (1u << 14)

/* Bytes of a :path read (http2_block.c's set_path() says why); 512 > USM_PREFIX, what
 * HTTP/1 paths are seen up to. */
#define USM_H2_PATH_SCAN 512

#define USM_H2_SCHEME_MAX 8 /* "https" + NUL; anything else is "other" */

enum usm_h2_dir {
	USM_H2_CLIENT_TO_SERVER = 0,
	USM_H2_SERVER_TO_CLIENT = 1,
};

/*
 * Why a connection (or part of it) could not be decoded. All but
 * USM_H2_TOO_MANY_STREAMS are fatal: the connection stays undecodable. usm_h2_feed()
 * returns the errno in brackets.
 */
enum usm_h2_reason {
	USM_H2_OK = 0,
	USM_H2_MIDSTREAM,   /* no preface / first SETTINGS: joined mid-way, or not h2 [ENODATA] */
	USM_H2_HPACK_ERROR, /* nghttp2 refused a block, or a field over its 64 KiB [EBADMSG] */
	USM_H2_PROTOCOL_ERROR,	  /* a frame HTTP/2 forbids: bad length, stream, order [EPROTO] */
	USM_H2_HEADERS_TOO_LARGE, /* a header block over USM_H2_HEADER_BLOCK_MAX [EMSGSIZE] */
	USM_H2_NO_MEMORY,	  /* over USM_H2_MEM_MAX (or malloc failed) [ENOMEM] */
	USM_H2_LOST_BYTES,	  /* usm_h2_feed_gap() over bytes that mattered [ESPIPE] */
	USM_H2_TOO_MANY_STREAMS,  /* not fatal: a stream dropped, oldest first */
	/* Not fatal: a header block or END_STREAM on a stream its sender had ended, or a
	 * second request or final response on one stream. HTTP/2 makes these a stream
	 * error (RFC 9113 5.1, 8.1): ignored, so that one exchange is reported once. */
	USM_H2_STREAM_ERROR,
	USM_H2_REASON_MAX,
};

struct usm_h2_stats {
	enum usm_h2_reason undecodable;	   /* USM_H2_OK while the connection decodes */
	uint64_t count[USM_H2_REASON_MAX]; /* times each happened; a fatal one at most once */
	uint64_t bytes[2];		   /* per enum usm_h2_dir, gaps included */
	uint64_t frames[2];
	uint64_t header_blocks[2];
	size_t streams;	      /* tracked now */
	size_t mem, mem_peak; /* bytes allocated now and at most, USM_H2_MEM_MAX bounds both */
};

/* What is known of a stream. Strings are NUL-terminated and "" when not seen. */
struct usm_h2_stream_info {
	uint32_t id;
	bool request_seen; /* its request headers were decoded on this connection */
	bool grpc;	   /* content-type application/grpc, +proto, +json, ;params */
	bool client_ended; /* END_STREAM seen in each direction */
	bool server_ended;
	bool server_ending; /* at the response's event: its headers end the stream too */
	char method[USM_METHOD_MAX];	/* GET..PATCH as in http.h, else "_OTHER" */
	char path[USM_PATH_MAX];	/* normalized (usm_path_normalize); gRPC: the route
					 * "/package.Service/Method" as sent, when it fits;
					 * "(invalid)" for control bytes or no leading '/' */
	char scheme[USM_H2_SCHEME_MAX]; /* "http", "https" or "other" */
	int status;			/* the final response's :status, 0 until then */
	int grpc_status;		/* grpc-status of the response, -1 until seen */
	uint64_t request_ns;		/* ktime of the request's first HEADERS byte */
};

enum usm_h2_event_kind {
	USM_H2_EV_REQUEST = 1, /* the client's headers of a new stream are complete */
	USM_H2_EV_RESPONSE,    /* the server's headers with a final :status (1xx are not
				* reported); grpc_status set if it is a trailers-only one */
	USM_H2_EV_TRAILERS,    /* a later header block on a stream, from dir */
	USM_H2_EV_END_STREAM,  /* dir closed its half of the stream (END_STREAM flag) */
	USM_H2_EV_RESET,       /* dir sent RST_STREAM; the stream is gone */
	USM_H2_EV_GOAWAY,      /* dir sent GOAWAY */
	USM_H2_EV_DROPPED,     /* a stream dropped for a new one past USM_H2_STREAMS_MAX,
				* as it was (dir: the client's, whose request did it); or,
				* its request unanswered, when the connection is abandoned
				* (usm_h2_conn_abandon) or can no longer be decoded */
	USM_H2_EV_REFUSED,     /* a stream above the last_stream_id of the server's
				* GOAWAY, after that event: not processed (RFC 9113 6.8),
				* no answer comes; the stream is gone (dir: the server's) */
};

struct usm_h2_event {
	enum usm_h2_event_kind kind;
	enum usm_h2_dir dir;		  /* who sent what the event is about */
	uint64_t ktime_ns;		  /* of the chunk that completed the event */
	struct usm_h2_stream_info stream; /* as of this event; id 0 for GOAWAY */
	uint64_t latency_ns;		  /* server END_STREAM, RESET: ktime_ns - request_ns
					   * when the request was seen, else 0 */
	uint32_t error_code;		  /* RESET, GOAWAY: the HTTP/2 error code */
	uint32_t last_stream_id;	  /* GOAWAY */
};

struct usm_h2_callbacks {
	void (*event)(const struct usm_h2_event *ev, void *ctx);
};

struct usm_h2_conn;

/* A connection's decoder, both directions; NULL with errno set on failure. */
struct usm_h2_conn *usm_h2_conn_new(void);
void usm_h2_conn_free(struct usm_h2_conn *c);

/*
 * Feed len bytes that dir sent, seen at ktime_ns; cb->event (cb may be NULL) is called
 * for each event, in order. Returns 0, -EINVAL for bad arguments, or the negative errno
 * of the connection's enum usm_h2_reason once it cannot be decoded any more (then on
 * every later call too).
 */
int usm_h2_feed(struct usm_h2_conn *c, enum usm_h2_dir dir, uint64_t ktime_ns, const void *buf,
		size_t len, const struct usm_h2_callbacks *cb, void *ctx);

/*
 * dir sent len bytes that the caller did not capture (a probe keeps only a prefix of a
 * large write). Fine inside what the decoder skips anyway (DATA payloads, padding,
 * frames it ignores), including up to the end of such a frame (a DATA frame's
 * END_STREAM is then reported); anything else makes the connection undecodable
 * (USM_H2_LOST_BYTES). Same returns as usm_h2_feed().
 */
int usm_h2_feed_gap(struct usm_h2_conn *c, enum usm_h2_dir dir, uint64_t ktime_ns, size_t len,
		    const struct usm_h2_callbacks *cb, void *ctx);

void usm_h2_conn_stats(const struct usm_h2_conn *c, struct usm_h2_stats *out);

/* The connection ends (its session freed, or the caller drops it): each stream whose
 * request waits for an answer is reported USM_H2_EV_DROPPED at ktime_ns, then the
 * streams go. Decoding the connection's bytes after this starts no stream of before. */
void usm_h2_conn_abandon(struct usm_h2_conn *c, uint64_t ktime_ns,
			 const struct usm_h2_callbacks *cb, void *ctx);

/* Does buf begin with the client connection preface? (Detection: false if len < 24.) */
bool usm_h2_is_preface(const void *buf, size_t len);

/* A short name for a reason, for metrics labels: "midstream", "hpack_error", ... */
const char *usm_h2_reason_str(enum usm_h2_reason r);

enum usm_h2_first {
	USM_H2_FIRST_REQUEST = 0, /* the first request's headers, complete */
	USM_H2_FIRST_PARTIAL,	  /* buf ended inside its header block: the fields decoded
				   * before the cut are in out (pseudo-headers come first) */
	USM_H2_FIRST_TRUNCATED,	  /* buf ended before its header block began */
	USM_H2_FIRST_NEEDS_STATE, /* no preface: a later packet of the connection (or not
				   * h2), decoding needs the HPACK state before it */
	USM_H2_FIRST_MALFORMED,	  /* invalid frames or header block */
	USM_H2_FIRST_NO_MEMORY,	  /* malloc failed */
};

/*
 * The socket filter's case: buf is a prefix of the first packet a client sent on a
 * connection (preface, SETTINGS, maybe WINDOW_UPDATE/PRIORITY, then the first HEADERS
 * with a fresh dynamic table). Decodes that request's headers into out (stream id,
 * method, path, scheme, grpc; request_ns 0), as far as they are there.
 */
enum usm_h2_first usm_h2_decode_first_request(const void *buf, size_t len,
					      struct usm_h2_stream_info *out);

#endif /* BPFTEL_USM_HTTP2_H */
