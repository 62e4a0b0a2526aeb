/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * USM endpoints: pair each HTTP request with the next response on its connection, and
 * aggregate (process, side, protocol, version, method, normalized route, status, and
 * for gRPC its grpc-status) -> count and latency histogram.
 *
 * Bounded and fair: pending requests (oldest evicted); rows per process
 * (max_rows_per_proc: beyond it, the process's overflow row, route "(overflow)",
 * method "_OTHER", status 0, takes every new endpoint of that process); rows in all
 * (max_rows: beyond it, the overflow row of pid USM_PID_OVERFLOW for that side takes
 * them: a new process's new endpoint is always counted, in its row or in an overflow
 * row, never nowhere); rows idle for expiry_ns go (usm_endpoints_expire). Overflow rows
 * do not count against the caps. Every eviction, overflow and expiry is counted.
 * Thread-safe.
 */
#ifndef BPFTEL_USM_ENDPOINTS_H
#define BPFTEL_USM_ENDPOINTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "histogram.h"
#include "http.h"

#define USM_PID_NONE	 0u	     /* not attributed to a process (plaintext, owner unknown) */
#define USM_PID_EXITED	 0xffffffffu /* rows of processes that exited, folded together */
#define USM_PID_OVERFLOW 0xfffffffeu /* the table was full: counted here, per side */

#define USM_ROUTE_OVERFLOW "(overflow)"

enum usm_proto {
	USM_PROTO_HTTPS = 0,
	USM_PROTO_HTTP = 1,
};

/* Which side of the exchange observed the message. */
enum usm_side {
	USM_SIDE_SERVER = 0,  /* the process read the request, wrote the response */
	USM_SIDE_CLIENT = 1,  /* it wrote the request, read the response */
	USM_SIDE_UNKNOWN = 2, /* plaintext whose sockets' owners are unknown */
	USM_SIDE__COUNT,
};

/* A connection, as the producer names it: TLS by (pid, session pointer), packets by
 * their addresses and ports, client first; and the side that saw it. Compared
 * bytewise: zero unused fields. */
struct usm_conn_key {
	uint32_t pid;
	uint8_t source; /* enum usm_source */
	uint8_t family;
	uint16_t client_port;
	uint64_t conn;
	uint8_t client_addr[16];
	uint8_t server_addr[16];
	uint16_t server_port;
	uint8_t side; /* enum usm_side */
	uint8_t __pad;
	uint32_t stream; /* HTTP/2: the stream; 0 for HTTP/1 */
};

/* The connection a row saw last: family 0 when unknown. */
struct usm_conn_addr {
	uint8_t family; /* 4 or 6 */
	uint16_t client_port, server_port;
	uint8_t client_addr[16];
	uint8_t server_addr[16];
	/* Plaintext: the TCP sequence (high half) and acknowledgment numbers of the
	 * message's segment, which its NAT copies share (nat_copies.h); 0 otherwise. */
	uint64_t seg;
};

struct usm_endpoint_row {
	uint32_t pid;
	enum usm_side side;
	enum usm_proto proto;
	int version;		     /* 10, 11, 20 */
	char method[USM_METHOD_MAX]; /* "_OTHER" in overflow rows */
	char path[USM_PATH_MAX];     /* the normalized route; USM_ROUTE_OVERFLOW */
	int status;		     /* 0 in overflow rows: any */
	bool grpc;		     /* a gRPC method: path is its route "/pkg.Service/Method" */
	int grpc_status;	     /* gRPC: grpc-status 0..16, -1 none; 0 otherwise */
	uint64_t seq;		     /* creation order: older rows first in budgets */
	uint64_t last_ns;	     /* its last message (the caller's clock) */
	struct usm_conn_addr conn;   /* the connection of its last message */
	struct usm_hist latency;
};

struct usm_endpoints_stats {
	uint64_t requests, responses;
	uint64_t paired;	   /* responses matched with their request */
	uint64_t unanswered;	   /* a request replaced by the next before its response,
				    * pending longer than expiry_ns (not once being
				    * answered: usm_endpoints_answering), of a process that
				    * exited (usm_endpoints_sweep), or withdrawn by its
				    * producer (usm_endpoints_withdraw); not a copy of one
				    * counted already (usm_endpoints_set_copy_hook), which
				    * leaves requests too */
	uint64_t orphan_responses; /* a response with no request pending that it can
				    * answer (usm_endpoints_seg_answers) */
	uint64_t interim;	   /* 1xx responses but 101 (usm_http_interim): the request
				    * stays pending for its final response; not in responses */
	uint64_t evicted;	   /* pending requests pushed out by newer connections */
	uint64_t proc_overflow;	   /* paired into a process's overflow row: its cap */
	uint64_t table_overflow;   /* paired into a USM_PID_OVERFLOW row: the table was full */
	uint64_t exited_folded;	   /* the table full of endpoint rows, those of exited
				    * processes folded into their overflow rows for a live
				    * process's new one */
	uint64_t expired;	   /* rows removed after expiry_ns without a message */
	size_t pending, rows;
};

struct usm_endpoints_limits {
	size_t max_pending;	  /* pending requests; 0: 4096 */
	size_t max_rows;	  /* rows, overflow rows aside; 0: 4096 */
	size_t max_rows_per_proc; /* rows of one (pid, side); 0: 64 */
	uint64_t expiry_ns;	  /* idle rows go after this long; 0: never */
};

struct usm_endpoints;

struct usm_endpoints *usm_endpoints_new(const struct usm_endpoints_limits *limits);
void usm_endpoints_free(struct usm_endpoints *e);

/*
 * A message start on a connection, at t_ns (its first byte, monotonic ns). conn (may be
 * NULL) is the connection to remember on the row. A response pairs with the request
 * pending on the same key, but an interim one (usm_http_interim) is only counted: the
 * request waits for its final response. A request's version is the row's.
 */
void usm_endpoints_message(struct usm_endpoints *e, const struct usm_conn_key *key,
			   enum usm_proto proto, uint64_t t_ns, const struct usm_http_start *msg,
			   const struct usm_conn_addr *conn);

/* Where a paired response was counted. */
enum usm_overflow {
	USM_OVERFLOW_NONE,  /* its endpoint's row */
	USM_OVERFLOW_PROC,  /* its process's overflow row: the process's cap */
	USM_OVERFLOW_TABLE, /* a USM_PID_OVERFLOW row: the table was full */
};

/* A response paired with its request: the exchange's endpoint, as its row would key it
 * (side, version and grpc_status clamped), and the row it was counted in. */
struct usm_paired {
	uint32_t pid;
	enum usm_side side;
	int version;
	char method[USM_METHOD_MAX];
	char path[USM_PATH_MAX];
	int status;
	bool grpc;
	int grpc_status;
	enum usm_overflow overflow;
	uint64_t t_ns;	     /* the response's */
	uint64_t latency_ns; /* what the row's histogram got */
};

/* usm_endpoints_message(), and true with *out filled when msg was a response that paired
 * (out may be NULL): what the caller counts beside the table (the /metrics series). */
bool usm_endpoints_pair(struct usm_endpoints *e, const struct usm_conn_key *key,
			enum usm_proto proto, uint64_t t_ns, const struct usm_http_start *msg,
			const struct usm_conn_addr *conn, struct usm_paired *out);

/*
 * Withdraw the request pending on key, if any, that a response whose segment's TCP
 * numbers are seg (0: none) can answer (usm_endpoints_seg_answers): its time, its
 * request (kind, version, method, path, grpc) and connection; it no longer counts as a
 * request. The caller gives it back under other keys (plaintext: once the response
 * tells who owns each end of the connection).
 */
bool usm_endpoints_take(struct usm_endpoints *e, const struct usm_conn_key *key, uint64_t seg,
			uint64_t *t_ns, struct usm_http_start *msg, struct usm_conn_addr *conn);

/*
 * Whether a plaintext response whose segment's TCP numbers are resp (sequence in the
 * high half, acknowledgment in the low) can answer the request whose segment's were
 * req. A request is held by its addresses and ports, which a later connection may
 * reuse (a port reused at once on loopback, or after a reset), and a segment the
 * connection's TCP would refuse (out of its window, spoofed) reaches the socket
 * filter all the same: the response must acknowledge the request's first byte (not
 * stop at it or up to 1 GiB before it; past it by any distance: an upload of any size,
 * modulo the 4 GiB the numbers wrap at), and begin at or past what the client had
 * acknowledged of the server when it sent the request (within 1 GiB: responses
 * pipelined before it). Another connection's numbers pass by chance about once in 5. 0 on
 * either side (TLS: no numbers), or no acknowledgment in the request's (its
 * client's SYN carried it): not checked. A response that fails is an orphan, and the
 * request stays pending for its own.
 */
bool usm_endpoints_seg_answers(uint64_t req, uint64_t resp);

/*
 * The request pending on key will get no response that can be paired with it (an
 * HTTP/2 stream dropped past the decoder's stream cap, reset, refused by a GOAWAY, or
 * answered with a rejected :status): removed, counted as unanswered. Returns whether
 * there was one.
 */
bool usm_endpoints_withdraw(struct usm_endpoints *e, const struct usm_conn_key *key);

/*
 * The request pending on key is being answered: its response began (an HTTP/2 stream's
 * final :status) and ends later (END_STREAM), which may be long after (a watch, a
 * server stream, server-sent events): it waits for it past expiry_ns, until its
 * response, its producer's withdrawal (the stream reset, its session gone) or its
 * eviction for room. Returns whether there was one.
 */
bool usm_endpoints_answering(struct usm_endpoints *e, const struct usm_conn_key *key);

/* Remove the rows whose last message is older than now_ns - expiry_ns (no-op when 0),
 * and the requests pending since before then (counted as unanswered). Returns how many
 * rows went. */
size_t usm_endpoints_expire(struct usm_endpoints *e, uint64_t now_ns);

/* Change expiry_ns (configuration reload); 0: never. */
void usm_endpoints_set_expiry(struct usm_endpoints *e, uint64_t expiry_ns);

/*
 * Asked, with the table's lock held, when a pending request leaves without its
 * response (replaced, evicted, expired, withdrawn, its process gone), with the
 * connection it was given: true when it is a copy of a request whose outcome was
 * counted already (usm.c: NAT copies of a packet). It is then neither unanswered nor
 * evicted, and no longer counts as a request. NULL: none (the default).
 */
typedef bool (*usm_copy_fn)(const struct usm_conn_addr *conn, void *ctx);
void usm_endpoints_set_copy_hook(struct usm_endpoints *e, usm_copy_fn copy, void *ctx);

/* Copy of every row, malloc'd; returns the count. */
size_t usm_endpoints_rows(struct usm_endpoints *e, struct usm_endpoint_row **out);
void usm_endpoints_stats(struct usm_endpoints *e, struct usm_endpoints_stats *out);

/* Fold the rows of processes for which alive(pid, ctx) is false into USM_PID_EXITED,
 * and drop their pending requests (counted as unanswered). Returns the processes
 * folded. alive() is called with the table's lock held. */
int usm_endpoints_sweep(struct usm_endpoints *e, bool (*alive)(uint32_t pid, void *ctx),
			void *ctx);

#endif /* BPFTEL_USM_ENDPOINTS_H */
