/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * USM's HTTP/2 sessions: the kernel's records of TLS calls on HTTP/2 sessions (struct
 * usm_h2_record, bpf/usm.h) turned into requests and responses. One decoder (http2.h)
 * per (process, TLS session); a record's copied runs are fed to it and its skipped
 * bytes as gaps, in the direction the session's start says (the side that sent the
 * preface is the client), and a jump in a direction's byte offset (a record the ring
 * buffer had no room for) as a gap too: the decoder decides whether what was lost
 * mattered. What comes out is handed to the caller as HTTP messages, version 20, one
 * pending request per stream, and the streams whose request will get no response it
 * can be paired with, to withdraw (usm_endpoints_withdraw).
 *
 * Bounded: USM_H2_SESSIONS_MAX sessions, each decoder within USM_H2_MEM_MAX, all of
 * them within USM_H2_SESSIONS_MEM. Sessions of processes that are gone are freed by
 * usm_h2_sessions_sweep(). An idle session is kept: a gRPC channel or a pooled
 * connection may sit idle for hours, and its next request decodes only with every
 * header block since its start. Room is made when needed: for a new session beyond
 * USM_H2_SESSIONS_MAX the least recently used goes (the process's own least recently
 * used when it holds USM_H2_SESSIONS_PER_PROC; of an owner, not root, holding more
 * than USM_H2_SESSIONS_PER_USER before anyone's), and a session that takes the
 * decoders over USM_H2_SESSIONS_MEM first frees the least recently used of those idle
 * for USM_H2_SESSION_IDLE_NS, then of an owner (not root) whose decoders hold more
 * than a quarter of it, or is dropped itself if that is not enough. A session
 * idle that long when it goes is counted as reclaimed (most are connections closed
 * without a probe to say so); one less idle, as dropped (evicted, memory). Its later
 * records, if any, count as unknown_session. Thread-safe; the sink is called without the table's lock
 * held (it may read /proc), in the order the messages happened, before
 * usm_h2_sessions_record() returns.
 */
#ifndef BPFTEL_USM_H2_SESSIONS_H
#define BPFTEL_USM_H2_SESSIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>

#include "bpf/usm.h"
#include "endpoints.h"
#include "http2.h"

#define USM_H2_SESSIONS_MAX    1024
#define USM_H2_SESSIONS_MEM    (64u * 1024 * 1024)
/* One process's sessions at most: a quarter of the table, so that a process opening
 * sessions without end (a local user's, on memory BIOs) makes room with its own, not
 * with every other process's. */
#define USM_H2_SESSIONS_PER_PROC (USM_H2_SESSIONS_MAX / 4)
/* One owner's share (a user's, bpf/lib/fair_share.h; root has none): when the table is
 * full, an owner holding this many makes room with its own, and one holding more is
 * made room from before anyone else, so that a user cannot get round its processes'
 * share by forking. While there is room, an owner may hold more. */
#define USM_H2_SESSIONS_PER_USER (USM_H2_SESSIONS_MAX / 4)
#define USM_H2_SESSION_IDLE_NS (600ull * 1000000000ull)

/* Why a session's traffic was not (or no longer) decoded, beside the decoder's own
 * reasons (enum usm_h2_reason). */
enum usm_h2_drop {
	USM_H2_DROP_UNKNOWN = 0, /* records of a session whose start was not seen here */
	USM_H2_DROP_UNFRAMED,	 /* the kernel lost a direction's framing */
	USM_H2_DROP_EVICTED,	 /* the least recently used, for a new session: table full */
	USM_H2_DROP_MEMORY,	 /* all sessions' decoders over USM_H2_SESSIONS_MEM: an idle
				  * one, one of an owner over a quarter, or the one grown */
	USM_H2_DROP_DIRECTION,	 /* both directions claim the client's preface */
	USM_H2_DROP_REORDERED,	 /* a record older than one already fed: only with more
				  * than one pipeline worker (`workers`), which can run a
				  * session's records out of order */
	USM_H2_DROP_PROCESS_CAP, /* the process's least recently used, for its new session:
				  * it held USM_H2_SESSIONS_PER_PROC */
	USM_H2_DROP_USER_CAP,	 /* the table full, the least recently used of an owner at
				  * or over USM_H2_SESSIONS_PER_USER: for its own new
				  * session, or another's (root: no share) */
	USM_H2_DROP__COUNT,
};

struct usm_h2_sessions_stats {
	uint64_t records;     /* records taken */
	uint64_t sessions;    /* sessions started */
	uint64_t merged; /* a direction's start on a session its other end started (.c) */
	uint64_t lost_bytes;  /* bytes of records lost (offset jumps), fed as gaps */
	uint64_t cut_records; /* records with frame bytes past the kernel's cap */
	uint64_t undecodable[USM_H2_REASON_MAX];    /* sessions, by the decoder's reason;
						     * USM_H2_TOO_MANY_STREAMS: streams */
	uint64_t dropped[USM_H2_DROP__COUNT];	    /* records or sessions, by reason */
	uint64_t requests, responses, grpc; /* events turned into messages (grpc: responses
					     * to requests that claimed gRPC) */
	uint64_t resets; /* RST_STREAM frames, any stream's: a withdrawal where unanswered */
	uint64_t refused;	  /* streams above the server's GOAWAY last_stream_id, tracked */
	uint64_t rejected_status; /* responses whose :status is outside 100-599 (the
				   * module counts them with HTTP/1's, rejected.status) */
	uint64_t reclaimed; /* sessions idle USM_H2_SESSION_IDLE_NS or more freed for room */
	uint64_t closed;    /* sessions their process ended (USM_H2_F_CLOSED): freed */
	size_t live;				    /* sessions now */
	size_t mem;				    /* their decoders' bytes now */
};

/* What one message is, for the sink: the connection key (pid, source, session, side,
 * stream), the time (request: its HEADERS' first byte; response: the server's
 * END_STREAM), the message (version 20), and the session's fd in pid (or -1). A
 * message of kind USM_HTTP_NONE says that the stream's request will get no response
 * that can be paired with it (the decoder dropped the stream past USM_H2_STREAMS_MAX,
 * its response's :status was rejected, it was reset, or the server's GOAWAY refused
 * it): withdraw it. */
struct usm_h2_message {
	struct usm_conn_key key;
	uint64_t t_ns;
	struct usm_http_start msg; /* grpc and grpc_status set for gRPC calls */
	int32_t fd;
	bool addr_known;	   /* addr is the session's, as usm_h2_sessions_set_addr() said */
	struct usm_conn_addr addr;
};

typedef void (*usm_h2_sink)(const struct usm_h2_message *m, void *ctx);

struct usm_h2_sessions;

struct usm_h2_sessions *usm_h2_sessions_new(usm_h2_sink sink, void *ctx);
void usm_h2_sessions_free(struct usm_h2_sessions *s);

/*
 * One record of size bytes from the ring buffer. Returns 0, or -EINVAL for a record
 * that is not one (sizes, runs and lengths that do not add up): nothing of it is used.
 */
int usm_h2_sessions_record(struct usm_h2_sessions *s, const void *data, size_t size);

/* Free the sessions of processes for which alive(pid, ctx) is false. Returns how
 * many went. */
size_t usm_h2_sessions_sweep(struct usm_h2_sessions *s, bool (*alive)(uint32_t pid, void *ctx),
			     void *ctx);

/* Tests: the decoders' memory budget (USM_H2_SESSIONS_MEM by default). */
void usm_h2_sessions_set_mem_budget(struct usm_h2_sessions *s, size_t bytes);

void usm_h2_sessions_stats(struct usm_h2_sessions *s, struct usm_h2_sessions_stats *out);

/* The sink found the connection's addresses of the session a message named: later
 * messages of that session carry them (addr_known), so that it looks them up once. */
void usm_h2_sessions_set_addr(struct usm_h2_sessions *s, const struct usm_conn_key *key,
			      const struct usm_conn_addr *addr);

const char *usm_h2_drop_str(enum usm_h2_drop d);

#endif /* BPFTEL_USM_H2_SESSIONS_H */
