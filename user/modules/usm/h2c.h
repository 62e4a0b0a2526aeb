/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * USM's cleartext HTTP/2 with prior knowledge (h2c), from packets: the socket filter
 * sends a client's segment that begins with the connection preface, the client's next
 * two and the server's first four segments of that connection (bpf/lib/usm_socket.h),
 * each as a prefix of USM_PREFIX bytes. A decoder per connection (http2.h) takes them
 * in the order they were seen, the rest of each segment as a gap, and yields the
 * connection's first request and its response (timed to the response's HEADERS, as
 * HTTP/1's first byte).
 *
 * The request is handed on together with its response, not when it is decoded: a
 * client sends it right after connecting, often before the server accepted the
 * connection, and the server's side of it (the socket's owner) is known only then. A
 * first request that never gets its response is counted as expired, not as a message.
 *
 * Nothing later on a connection can be decoded without the HPACK state of every header
 * block before it: only the first request of each connection is counted, and a first
 * request whose HEADERS do not fit in a segment's prefix (or come later than the
 * segments sent) is counted as undecodable with its reason (lost_bytes).
 *
 * Bounded: USM_H2C_CONNS_MAX connections being decoded (the oldest goes, counted);
 * a connection is freed once its first response is known, or after USM_H2C_IDLE_NS.
 * Thread-safe; the sink is called without the table's lock.
 */
#ifndef BPFTEL_USM_H2C_H
#define BPFTEL_USM_H2C_H

#include <stdint.h>
#include <linux/types.h>

#include "bpf/usm.h"
#include "http.h"
#include "http2.h"

#define USM_H2C_CONNS_MAX 256
#define USM_H2C_IDLE_NS	  (60ull * 1000000000ull)

struct usm_h2c_stats {
	uint64_t segments;			 /* taken */
	uint64_t connections;			 /* decoders started */
	uint64_t requests, responses;		 /* first requests and their responses */
	uint64_t undecodable[USM_H2_REASON_MAX]; /* connections, by the decoder's reason */
	uint64_t evicted; /* given up undone for a new one: the oldest (table full), or its
			   * 4-tuple's (a second preface: the port used again) */
	uint64_t expired;			 /* idle before their first response */
	uint64_t unanswered; /* first requests whose connection's decoding ended before
			      * their response (counted in undecodable): not handed on */
	uint64_t unmatched; /* server segments of no connection being decoded */
	uint64_t upgraded;  /* connections upgraded from HTTP/1.1 (Upgrade: h2c): their
			     * first request is HTTP/1's row (status 101), not decoded
			     * again */
	uint64_t rejected_status; /* first responses whose :status is outside 100-599:
				   * neither it nor its request handed on (the module
				   * counts them with HTTP/1's, rejected.status) */
};

/* A message of an h2c connection: ev is the segment that completed it (addresses
 * client first), msg its request or response (version 20). */
typedef void (*usm_h2c_sink)(const struct usm_event *ev, const struct usm_http_start *msg,
			     void *ctx);

struct usm_h2c;

struct usm_h2c *usm_h2c_new(usm_h2c_sink sink, void *ctx);

/* Optional: fn(ev, ctx), without the table's lock, when a connection's first request
 * is decoded (ev: the segment that completed it), before it is handed on with its
 * response: the module notes the request's NAT copies in the order they were seen. */
void usm_h2c_on_request(struct usm_h2c *h, void (*fn)(const struct usm_event *ev, void *ctx));
void usm_h2c_free(struct usm_h2c *h);

/* One segment (ev->kind USM_KIND_H2C_CLIENT or USM_KIND_H2C_SERVER). */
void usm_h2c_segment(struct usm_h2c *h, const struct usm_event *ev);

/* Free the connections idle since before now_ns - USM_H2C_IDLE_NS (ktime clock). */
void usm_h2c_sweep(struct usm_h2c *h, uint64_t now_ns);

void usm_h2c_stats(struct usm_h2c *h, struct usm_h2c_stats *out);

#endif /* BPFTEL_USM_H2C_H */
