/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * USM module: the types that cross the kernel/user boundary.
 *
 * Included by the BPF programs (after vmlinux.h) and by userspace (after
 * <linux/types.h>). Kernel -> user: struct usm_event through the ring buffer
 * `usm_events`, one per HTTP message start (a request line or a status line) seen in
 * TLS plaintext (uprobes) or in a TCP segment (socket filter); and struct
 * usm_h2_record through `usm_h2_events`, one per TLS call on an HTTP/2 session (its
 * frames without DATA payloads, see below). Nothing else leaves the kernel: other
 * bytes are counted and dropped there. Prefixes and frames are parsed and discarded in
 * userspace; payloads are never stored.
 */
#ifndef BPFTEL_USM_H
#define BPFTEL_USM_H

/* Plaintext bytes copied per message: a request line or a status line; for h2c, a
 * segment's first frames (a client's first segment: preface, SETTINGS, WINDOW_UPDATE
 * and a small first request's HEADERS fit). */
#define USM_PREFIX 160

enum usm_source {
	USM_SRC_OPENSSL = 0,
	USM_SRC_GNUTLS = 1,
	USM_SRC_SOCKET = 2, /* plaintext, from packets */
	USM_SRC_GO = 3,	    /* Go's crypto/tls, uprobes on the executable (lib/usm_go.h) */
	USM_SRC__COUNT,
};

/* The TLS functions probed, as the cookie of each uprobe attachment: bit 0 is the
 * direction (read), so a function and its pair differ there. */
enum usm_tls_fn {
	USM_TLS_SSL_WRITE = 0,
	USM_TLS_SSL_READ = 1,
	USM_TLS_SSL_WRITE_EX = 2,
	USM_TLS_SSL_READ_EX = 3,
	USM_TLS_GNUTLS_SEND = 4,
	USM_TLS_GNUTLS_RECV = 5,
	USM_TLS_IO__COUNT, /* the functions above move data; those below name a socket */
	USM_TLS_SSL_SET_FD = USM_TLS_IO__COUNT, /* SSL_set_fd(ssl, fd) */
	USM_TLS_GNUTLS_SET_INT2 = 7,		 /* gnutls_transport_set_int2(s, rfd, wfd) */
	USM_TLS_SSL_FREE = 8,			 /* SSL_free(ssl): the session is gone */
	USM_TLS_GNUTLS_DEINIT = 9,		 /* gnutls_deinit(session): likewise */
	USM_TLS_SSL_GET_ERROR = 10, /* SSL_get_error(ssl, ret): a write to be retried */
	USM_TLS_FN__COUNT,
};

/* GnuTLS's record type of application data (GNUTLS_APPLICATION_DATA): what
 * gnutls_record_recv asks its internal reads for (UPROBE_TYPED_READ). */
#define USM_GNUTLS_APP_DATA 23

/* Go's crypto/tls probes (lib/usm_go.h), as the cookie of each attachment of
 * usm_go_uprobe: all are plain uprobes, on the executable. */
enum usm_go_fn {
	USM_GO_WRITE = 0,    /* (*Conn).Write, on its stack check's JBE */
	USM_GO_READ = 1,     /* (*Conn).Read, on its stack check's JBE */
	USM_GO_READ_RET = 2, /* (*Conn).Read, on each of its RET instructions */
	USM_GO_CLOSE = 3,    /* (*Conn).Close, on its stack check's JBE */
	USM_GO_FN__COUNT,
};

/* Which way the bytes went for the process that the probe saw. */
enum usm_dir {
	USM_DIR_WRITE = 0,
	USM_DIR_READ = 1,
};

enum usm_kind {
	USM_KIND_REQUEST = 0,
	USM_KIND_RESPONSE = 1,
	/* Cleartext HTTP/2 with prior knowledge (h2c), packets only: a client's segment
	 * that begins with the connection preface, and the server's first segments of
	 * such a connection (addresses client first, as for HTTP/1). */
	USM_KIND_H2C_CLIENT = 2,
	USM_KIND_H2C_SERVER = 3,
};

/* A TLS session of a process: the key of the session's fd (usm_tls_fds) and of its
 * write to be retried (usm_tls_retry, at most USM_TLS_RETRY_MAX: lib/usm_tls_retry.h). */
struct usm_fd_key {
	__u64 conn; /* SSL* / gnutls_session_t */
	__u32 tgid;
	__u32 __pad;
};

/* What usm_tls_fds keeps of a session: its socket, and whether it has carried an
 * HTTP/1 message, after which its bytes never start HTTP/2 (lib/usm_h2.h). */
struct usm_tls_sess {
	__s32 fd;	/* -1: not known (no SSL_set_fd seen, or Go's, read from its Conn) */
	__u8 http1;	/* an HTTP/1 message was emitted on it */
	__u8 __pad[3];
	__u32 uid;	/* whose share it is in (lib/fair_share.h) */
};

#define USM_TLS_FDS_MAX 32768

/* The tables of the USM object whose entries each user but root holds a share of
 * (bpf/lib/fair_share.h): fair_share_key.table. */
enum usm_share_table {
	USM_SHARE_H2_CONNS = 0, /* usm_h2_conns: HTTP/2 sessions over TLS */
	USM_SHARE_TLS_FDS = 1,	/* usm_tls_fds: TLS sessions' sockets and HTTP/1 marks */
	USM_SHARE_TLS_RETRY = 2, /* usm_tls_retry: OpenSSL writes to be retried */
	USM_SHARE_GO_READS = 3,	 /* usm_go_reads: Go crypto/tls Reads in flight */
	USM_SHARE__COUNT,
};

/* Go crypto/tls Reads in flight, by goroutine (lib/usm_go.h): a goroutine parked in
 * Read (a server's idle keep-alive connection) holds its entry until Read returns. */
#define USM_GO_READS_MAX 16384

struct usm_go_read_key {
	__u64 g;
	__u32 tgid;
	__u32 depth; /* g.stack.hi - RSP: which Read of the goroutine (usm_go_depth) */
};

struct usm_go_read {
	__u64 conn;
	__u64 buf;
	__u32 uid; /* whose share of USM_SHARE_GO_READS it is in (lib/fair_share.h) */
	__u32 stack_off; /* buf on the goroutine's stack: g.stack.hi - buf; else 0 */
};

#define USM_H2_CONNS_MAX 8192

/* One direction's place in an HTTP/2 session's frame stream (lib/usm_h2.h). */
struct usm_h2_dir_state {
	__u64 offset; /* bytes of this direction so far */
	__u32 skip;   /* DATA payload left to skip */
	__u32 copy;   /* payload of another frame left to copy */
	__u8 have;    /* bytes of the next frame header already seen (in hdr) */
	__u8 unframed;
	__u8 hdr[14]; /* 9 used; the rest lets the verifier see a read at have < 9 */
};

/* usm_h2_conns' value, by struct usm_fd_key. */
struct usm_h2_state {
	struct usm_h2_dir_state d[2]; /* by enum usm_dir */
	__u32 uid; /* whose share it is in (lib/fair_share.h) */
	__u32 __pad;
};

/* usm_tls_retry's value (lib/usm_tls_retry.h), by struct usm_fd_key. */
#define USM_TLS_RETRY_END 32

struct usm_tls_retry_mark {
	__u64 buf, len; /* the write that failed */
	__u64 at_ns;	/* when SSL_get_error said so (userspace ages marks out) */
	__u32 uid;	/* whose share it is in (lib/fair_share.h) */
	/* The write's first and last ends_len bytes (min(len, USM_TLS_RETRY_END); 0:
	 * unreadable): a retry from another buffer (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER)
	 * has them, where two HTTP/1 messages of one size mostly differ (a request line
	 * and its last header or body; a status line and its Date). */
	__u32 ends_len;
	/* As words, the bytes past ends_len zero: compared a word at a time, which the
	 * verifier walks in a few steps (a byte loop bounded by ends_len took it past 80k
	 * instructions on usm_tls_uprobe). */
	__u64 ends[2][USM_TLS_RETRY_END / 8];
};

#define USM_TLS_RETRY_MAX 4096
#define USM_TLS_RETRY_MAX_AGE_NS (10ull * 1000000000ull)

/* Counters in the per-CPU array `usm_counters`. */
enum usm_counter {
	USM_CNT_TLS_CALLS = 0,	  /* TLS writes asked to move bytes, reads that moved some */
	USM_CNT_TLS_HTTP = 1,	  /* ... that started an HTTP message: event emitted */
	USM_CNT_PACKETS = 2,	  /* TCP segments with payload looked at */
	USM_CNT_PACKETS_HTTP = 3, /* ... that started an HTTP message: event emitted */
	USM_CNT_LOST = 4,	  /* ring buffer full */
	USM_CNT_TRUNCATED = 5,	  /* headers shorter than their own length fields */
	USM_CNT_H2_CALLS = 6,	  /* TLS calls on HTTP/2 connections: records (below) */
	USM_CNT_H2_TRUNCATED = 7, /* ... whose frames did not fit in USM_H2_CAP (cut) */
	USM_CNT_H2_UNFRAMED = 8,  /* ... past USM_H2_RUNS or USM_H2_STEPS: framing lost */
	USM_CNT_H2_LOST = 9,	  /* records the ring buffer had no room for */
	USM_CNT_H2_MIDSTREAM = 10, /* sessions that look HTTP/2 but whose start was missed */
	USM_CNT_H2C_PACKETS = 11,  /* h2c segments emitted (USM_KIND_H2C_*) */
	USM_CNT_GO_UNPAIRED = 12,  /* Go reads seen returning, not entering (lib/usm_go.h) */
	USM_CNT_PACKETS_DUPLICATE = 13, /* message segments seen again: not emitted */
	USM_CNT_H2_RECORDS = 14, /* HTTP/2 records made: one per call, more for a call that
				  * fills one, one per session seen to end (sent, or lost:
				  * USM_CNT_H2_LOST) */
	USM_CNT_TLS_RETRIES = 15, /* TLS writes that retried one SSL_get_error said failed:
				   * counted in USM_CNT_TLS_CALLS, not looked at again */
	USM_CNT_PACKETS_IP6_DEEP = 16, /* IPv6 packets with more extension headers than
					* walked (USM_IP6_EXT_MAX): not looked at */
	USM_CNT_H2_NESTED = 17, /* HTTP/2 calls that found their CPU's walk scratch held by
				 * a walk they preempted: framing lost (lib/usm_h2.h) */
	USM_CNT_H2_START_REFUSED = 18, /* TLS calls that began like an HTTP/2 preface or
					* SETTINGS on a session that had carried HTTP/1:
					* a body, not a start (lib/usm_h2.h) */
	USM_CNT_H2_OVER_SHARE = 19, /* TLS calls that would have started an HTTP/2
				     * session of a user holding its share of
				     * usm_h2_conns already (lib/fair_share.h) */
	USM_CNT_TLS_SESS_OVER_SHARE = 20, /* entries of TLS sessions (their socket, their
					   * HTTP/1 mark) refused in usm_tls_fds, their
					   * user holding its share: at SSL_set_fd, and at
					   * each HTTP/1 message of a session kept without */
	USM_CNT_TLS_RETRY_OVER_SHARE = 21, /* failed writes not marked to be retried
					    * (usm_tls_retry): their owner held its share of
					    * the marks; a retry of them is a new message */
	USM_CNT_GO_READS_OVER_SHARE = 22, /* Go Reads not kept until their return
					   * (usm_go_reads): their owner held its share;
					   * their returns count in go_read_unpaired too */
	USM_CNT_PACKETS_UNREAD = 23, /* TCP packets not looked into: an IP length of 0 (a
				      * packet over 64 KiB, BIG TCP) or a link header the
				      * network header was not found past (VLAN in band) */
	USM_CNT_TLS_WRITE_RESTS = 24, /* TLS writes of the rest of the thread's last one on
				       * the session (GnuTLS sends a record a call): counted
				       * in USM_CNT_TLS_CALLS, not looked at again */
	USM_CNT_TLS_READS_UNSEEN = 25, /* TLS reads whose return went unseen: a later read
					* of the thread at or above their frame took their
					* slot (the module stopped in between, a longjmp, a
					* stackful coroutine's switch): not looked at */
	USM_CNT__COUNT,
};

struct usm_event {
	__u64 ktime_ns; /* the message's first byte: write entry, read return, packet */
	__u64 conn;	/* TLS: the SSL* / gnutls session; socket: the segment's TCP sequence
			 * number (high half) and acknowledgment number */
	__u32 pid;	/* tgid; 0 for packets (no process context) */
	__u32 tid;
	__u8 source; /* enum usm_source */
	__u8 kind;   /* enum usm_kind */
	__u8 family; /* packets: 4 or 6 */
	__u8 dir;    /* TLS: enum usm_dir, the process's call; packets: 0 */
	__u16 client_port; /* packets: the connection, client side first */
	__u16 server_port;
	__u8 client_addr[16]; /* IPv4 in the first 4 bytes */
	__u8 server_addr[16];
	__u32 len;	  /* bytes the call or segment carried */
	__u16 prefix_len; /* bytes in prefix */
	__u16 __pad2;
	__s32 fd;	  /* TLS: the socket's fd in pid (SSL_set_fd & co.), or -1 */
	__u32 __pad3;
	char prefix[USM_PREFIX];
};

#define USM_EVENT_HDR_SIZE 80 /* offsetof(struct usm_event, prefix) */

_Static_assert(__builtin_offsetof(struct usm_event, client_addr) == 32, "usm_event layout");
_Static_assert(__builtin_offsetof(struct usm_event, prefix) == USM_EVENT_HDR_SIZE,
	       "usm_event layout");
_Static_assert(sizeof(struct usm_event) == USM_EVENT_HDR_SIZE + USM_PREFIX, "usm_event layout");

/*
 * HTTP/2 over TLS. A connection becomes HTTP/2 for the kernel when a TLS call's bytes
 * begin with the client connection preface or with a SETTINGS frame (the first thing
 * each side sends); from then on every call on it, in either direction, is walked
 * frame by frame (bpf/lib/usm_h2.h) and sent to userspace as records on the ring
 * buffer `usm_h2_events` (one per call, more for a call that fills one): the bytes of
 * frame headers and of every frame but DATA, up to USM_H2_CAP per record, and the
 * length of what was skipped between them. DATA payloads are never copied, only their
 * 9-byte frame headers; userspace feeds the copies to its HPACK decoder and the
 * skipped lengths as gaps.
 *
 * The record is a sequence of runs: copied bytes (from data, in order), then skipped
 * bytes. It stands for len bytes of the call from offset; the runs cover the first
 * `walked`, and flags say why the rest (len - walked) was not walked.
 */
#define USM_H2_CAP   2048 /* bytes copied per record: a request's first HEADERS fit */
#define USM_H2_RUNS  32	  /* copy/skip runs per record: DATA frames interleaved */
/* A call whose frames fill a record's copy or runs goes on in another record, as if it
 * were the next call (its offset where the last one ended), up to this many records
 * per call; the last one copies to its cap and skips the rest (cut). */
#define USM_H2_RECORDS 8
#define USM_H2_STEPS   1280 /* frame pieces walked per call */

enum usm_h2_flags {
	USM_H2_F_PREFACE = 1 << 0,  /* this call began with the client's preface */
	USM_H2_F_SETTINGS = 1 << 1, /* ... with a SETTINGS frame that started the session */
	USM_H2_F_NEW = 1 << 2,	    /* the kernel (re)started the session's state here: offsets
				     * of both directions count from 0 again */
	USM_H2_F_CUT = 1 << 3,	    /* frame bytes were skipped, not copied: past USM_H2_CAP
				     * in a call's last record, or unreadable */
	USM_H2_F_UNFRAMED = 1 << 4, /* records, runs or steps ran out: the kernel lost the
				     * framing of this direction; it sends nothing more of it */
	USM_H2_F_CLOSED = 1 << 5,   /* no bytes: the session ended (freed, closed, or set up
				     * for a new connection): its decoder and pending
				     * requests go */
};

struct usm_h2_run {
	__u32 copied; /* bytes, next in data */
	__u32 skipped;
};

struct usm_h2_record {
	__u64 ktime_ns;
	__u64 conn;   /* SSL* / gnutls session */
	__u64 offset; /* bytes of this direction before this record: a jump is a loss */
	__u32 pid;
	__u32 tid;
	__u32 len;    /* bytes of the call this record stands for */
	__u32 walked; /* of which the runs cover this many */
	__s32 fd;     /* as in struct usm_event */
	__u8 source;  /* enum usm_source */
	__u8 dir;     /* enum usm_dir */
	__u8 flags;   /* enum usm_h2_flags */
	__u8 nruns;
	__u32 data_len;
	__u32 uid; /* the session's user (struct usm_h2_state), for userspace's shares */
	struct usm_h2_run runs[USM_H2_RUNS];
	__u8 data[USM_H2_CAP]; /* a record is sent up to data + data_len */
};

#define USM_H2_RECORD_HDR 312 /* offsetof(struct usm_h2_record, data) */
_Static_assert(__builtin_offsetof(struct usm_h2_record, runs) == 56, "usm_h2_record layout");
_Static_assert(__builtin_offsetof(struct usm_h2_record, data) == USM_H2_RECORD_HDR,
	       "usm_h2_record layout");

#endif /* BPFTEL_USM_H */
