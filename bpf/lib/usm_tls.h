/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * USM, TLS side: the bodies of the uprobes and uretprobes on OpenSSL (SSL_write,
 * SSL_read and their _ex forms, 1.1.1 and 3) and GnuTLS (gnutls_record_send/recv);
 * Go's crypto/tls feeds the same usm_tls_emit() from lib/usm_go.h.
 *
 * A write is captured at its entry, with no return probe: the bytes are in its buffer
 * before the call, and its size argument says how many it was asked to write. What
 * the return would add is only how many went out, which parsing the message's start
 * does not need, and a uretprobe costs a second trap per call (~13 us here, against
 * ~0.3 us of BPF): the write side's traps are halved. What that costs in accuracy: a
 * write that fails is seen as if it succeeded. A request that never left is counted
 * (bpftel http: requests) and, with no response, unanswered; a response that never
 * left is still paired with its request; a write retried after SSL_ERROR_WANT_WRITE
 * or GNUTLS_E_AGAIN with the same bytes (OpenSSL requires the same arguments) is seen
 * twice: a request's first try counts as unanswered and the retry is paired, timed
 * from the retry; a response's retry finds no request (orphan). GnuTLS's other retry
 * form, (NULL, 0), is no message at all.
 *
 * A read's bytes exist only once it returns: its entry remembers (session, buffer)
 * per thread, its return peeks at the first 8 bytes it really moved; if they start an
 * HTTP/1.x message, it emits its first USM_PREFIX bytes with the session as connection
 * key. Reads nest: TLS through an HTTPS proxy (curl -x https://...) reads the proxy's
 * session from inside the read of the end-to-end one, on the same thread. A return is
 * paired with its entry by the stack pointer (8 bytes above the entry's: the return
 * address popped), in a slot per read in flight.
 *
 * Timing is the message's first byte as the process sees it: a write's entry (the
 * process hands the bytes over), a read's return (the bytes have arrived).
 *
 * Include after lib/usm_common.h.
 */
#ifndef BPFTEL_LIB_USM_TLS_H
#define BPFTEL_LIB_USM_TLS_H

#include "uprobe_hits.h"
#include "usm_go_conn.h"
#include "fair_share.h"

/*
 * The reads in flight, per thread: what their returns need. In the thread's task
 * storage: no map-wide lock, nothing to delete at the return (the LRU hash this
 * replaces cost ~0.5 us per read: update at entry, lookup and delete at return), and a
 * thread that dies inside a call takes its slots with it.
 */
#define USM_TLS_NEST 4 /* reads in flight on one thread, one inside the other */

struct usm_tls_read {
	__u64 conn;	/* SSL* / gnutls_session_t */
	__u64 buf;	/* user buffer */
	__u64 size_ptr; /* SSL_read_ex: where the byte count is written; 0 otherwise */
	__u64 pid_tgid; /* of the entry: a return of another id is not this call's */
	/* The stack pointer at entry: the return finds it 8 bytes higher. A call nested
	 * in this one (another read, or a typed read's call of another type, kept out at
	 * entry) returns first, lower on the stack. */
	__u64 sp;
	__u32 source;  /* enum usm_source */
	__u32 pending; /* entered, not yet returned */
	/* The fd of the first recvfrom(2) made inside it (usm_tls_recv_fd), -1: none; its
	 * session's at its return, if the session has none. */
	__s32 recv_fd;
	__u32 __pad;
};

struct usm_tls_call {
	struct usm_tls_read r[USM_TLS_NEST];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct usm_tls_call);
} usm_tls_inflight SEC(".maps");

TLM_MAP_KEY(usm_tls_inflight);

#ifndef ENOMEM
#define ENOMEM 12
#endif
#ifndef E2BIG
#define E2BIG 7
#endif

/* The thread's slots; created when asked (its only failure, ENOMEM, counted as a
 * failed lookup-or-init of usm_tls_inflight). */
static __always_inline struct usm_tls_call *usm_tls_slot(TLM_PARAM, bool create)
{
	struct usm_tls_call *c;

	c = bpf_task_storage_get(&usm_tls_inflight, bpf_get_current_task_btf(), NULL,
				 create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (!c && create)
		tlm_count_map_error(TLM_ARG, tlm_key_map_usm_tls_inflight, TLM_OP_LOOKUP_INIT,
				    -ENOMEM);
	return c;
}

/* Per process, what is known of a TLS session (struct usm_tls_sess, keyed by struct
 * usm_fd_key: usm.h): the fd it runs on (SSL_set_fd, gnutls_transport_set_int2, or for
 * a session with its own BIO the recvfrom(2) inside a read of it: usm_tls_recv_fd) and
 * whether it carried an HTTP/1 message (any session's first, SSL_set_fd or not). Gone
 * with the session (SSL_free, gnutls_deinit, Go's Close), reset by SSL_set_fd; LRU for
 * sessions whose end is not seen. */

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, USM_TLS_FDS_MAX); /* sessions with an fd, and with HTTP/1 */
	__type(key, struct usm_fd_key);
	__type(value, struct usm_tls_sess);
} usm_tls_fds SEC(".maps");

TLM_MAP_KEY(usm_tls_fds);

/* A session's first entry: refused, and counted, past its user's share. Each user but
 * root holds a quarter of usm_tls_fds at most by default (lib/fair_share.h,
 * usm_share_cap): any user can make sessions without end (SSL_set_fd takes any
 * number), and would evict the others' live ones, their sockets and HTTP/1 marks. */
static __always_inline void usm_tls_sess_insert(TLM_PARAM, const struct usm_fd_key *key,
						struct usm_tls_sess *init)
{
	init->uid = fair_share_owner();
	if (!fair_share_take(TLM_ARG, USM_SHARE_TLS_FDS, init->uid,
			     usm_share_cap[USM_SHARE_TLS_FDS])) {
		usm_count(USM_CNT_TLS_SESS_OVER_SHARE);
		return;
	}
	if (tlm_map_insert(usm_tls_fds, key, init)) /* full, or another CPU's */
		fair_share_give(USM_SHARE_TLS_FDS, init->uid);
}

/* A session's entry goes (it ended, or its connection did), its share with it. */
static __always_inline void usm_tls_sess_delete(TLM_PARAM, const struct usm_fd_key *key)
{
	struct usm_tls_sess *s = bpf_map_lookup_elem(&usm_tls_fds, key);
	__u32 uid;

	if (!s)
		return;
	uid = s->uid;
	if (!tlm_map_take(usm_tls_fds, key))
		fair_share_give(USM_SHARE_TLS_FDS, uid);
}

/* The session's socket: remembered from SSL_set_fd & co., or for Go read from its
 * Conn (lib/usm_go_conn.h). Asked only when something is emitted. */
static __always_inline __s32 usm_tls_fd_of(TLM_PARAM, __u64 conn, __u64 pid_tgid, __u32 source)
{
	struct usm_fd_key key = {.conn = conn, .tgid = pid_tgid >> 32};
	struct usm_tls_sess *s;

	if (source == USM_SRC_GO)
		return usm_go_conn_fd(TLM_ARG, conn);
	s = bpf_map_lookup_elem(&usm_tls_fds, &key);
	return s ? s->fd : -1;
}

/*
 * An HTTP/1 message starts on the session: mark it, so that a body of it that
 * begins like an HTTP/2 preface or SETTINGS frame (anyone's upload) does not turn it
 * into an HTTP/2 session, hiding its next messages (usm_h2_tls). Returns its socket as
 * usm_tls_fd_of does. The lookup is the one the fd took; a session without SSL_set_fd
 * (curl's own BIO, Go) is inserted once.
 */
static __always_inline __s32 usm_tls_http1_seen(TLM_PARAM, __u64 conn, __u64 pid_tgid,
						__u32 source)
{
	struct usm_fd_key key = {.conn = conn, .tgid = pid_tgid >> 32};
	struct usm_tls_sess *s = bpf_map_lookup_elem(&usm_tls_fds, &key);
	struct usm_tls_sess init = {.fd = -1, .http1 = 1};

	if (!s)
		usm_tls_sess_insert(TLM_ARG, &key, &init);
	else if (!s->http1)
		s->http1 = 1;
	if (source == USM_SRC_GO)
		return usm_go_conn_fd(TLM_ARG, conn);
	return s ? s->fd : -1;
}

/*
 * The time the programs pass for "read the clock when a message is emitted": a clock
 * read costs ~70 ns on these VMs (BPF run stats), as much as the rest of a call that
 * emits nothing, so only the calls that emit pay it. The test harness passes times.
 */
#define USM_TLS_NOW 0

/* HTTP/2 sessions: their state and frame walk use the fd map and USM_TLS_NOW above. */
#include "usm_h2.h"
/* Writes retried after SSL_get_error said so. */
#include "usm_tls_retry.h"

/* SSL_set_fd(ssl, fd), gnutls_transport_set_int2(session, recv_fd, send_fd): remember
 * the socket's fd (the receive one for GnuTLS: the connection is the same), and
 * forget the session's HTTP/2 state: it is being set up for a new connection. */
static __always_inline int usm_tls_set_fd(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
					  __u32 source)
{
	struct usm_fd_key key = {.conn = PT_REGS_PARM1(regs), .tgid = pid_tgid >> 32};
	struct usm_tls_sess init = {.fd = (__s32)PT_REGS_PARM2(regs)};
	struct usm_tls_sess *s = bpf_map_lookup_elem(&usm_tls_fds, &key);

	if (s) { /* a new connection on the session: no HTTP/1 on it yet; its share stays */
		s->fd = init.fd;
		s->http1 = 0;
	} else {
		usm_tls_sess_insert(TLM_ARG, &key, &init);
	}
	usm_h2_forget(TLM_ARG, key.conn, pid_tgid, source);
	usm_tls_retry_unmark(TLM_ARG, &key);
	usm_tls_last_write_clear(pid_tgid); /* a write on the new connection is no rest */
	return 0;
}

/*
 * SSL_free(ssl), gnutls_deinit(session): the session is gone, and its address may be
 * the next session's. What is kept by it goes now: its fd, its HTTP/2 state, its
 * mid-stream mark. Else only the LRU maps' evictions take them, and a map full of dead
 * sessions makes every new one evict the least recently used, a live idle one (a gRPC
 * channel) among them.
 */
static __always_inline int usm_tls_free(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
					__u32 source)
{
	struct usm_fd_key key = {.conn = PT_REGS_PARM1(regs), .tgid = pid_tgid >> 32};

	if (!key.conn)
		return 0;
	usm_h2_session_end(TLM_ARG, &key, pid_tgid, source);
	usm_tls_retry_unmark(TLM_ARG, &key);
	usm_tls_last_write_clear(pid_tgid); /* nor one on a session given its address */
	return 0;
}

/*
 * A TLS message's record whose prefix (n bytes of a call of len) is in place: the
 * session, the process, the call's way, the session's socket fd (usm_tls_http1_seen()),
 * no packet addresses; stamped ktime_ns (USM_TLS_NOW: the clock now) and submitted.
 */
static __always_inline void usm_tls_event_submit(TLM_PARAM, struct usm_event *ev, __u64 conn,
						 __u32 source, enum usm_dir dir, __u64 ktime_ns,
						 __u64 pid_tgid, int kind, __u64 len, __u32 n,
						 __s32 fd)
{
	ev->conn = conn;
	ev->pid = pid_tgid >> 32;
	ev->tid = (__u32)pid_tgid;
	ev->source = source;
	ev->family = 0;
	ev->dir = dir;
	ev->fd = fd;
	ev->__pad3 = 0;
	ev->client_port = ev->server_port = 0;
	__builtin_memset(ev->client_addr, 0, sizeof(ev->client_addr));
	__builtin_memset(ev->server_addr, 0, sizeof(ev->server_addr));
	usm_event_submit(ev, ktime_ns == USM_TLS_NOW ? bpf_ktime_get_ns() : ktime_ns, kind, len, n,
			 USM_CNT_TLS_HTTP);
}

/*
 * len bytes moved through conn's buffer buf: on an HTTP/2 session (or one that starts
 * being it here), walk them (lib/usm_h2.h); else if they start an HTTP/1.x message,
 * emit it, stamped ktime_ns (USM_TLS_NOW: read the clock now). Counts the call
 * (tls_calls) and the message (tls_http). Every call looks its session up in the
 * HTTP/2 map, an HTTP/1 start too: a DATA payload can begin with "GET /" at a call's
 * first byte.
 */
static __always_inline void usm_tls_emit(TLM_PARAM, __u64 conn, __u64 buf, __u64 len, __u32 source,
					 enum usm_dir dir, __u64 ktime_ns, __u64 pid_tgid)
{
	char peek[USM_PEEK] = {};
	struct usm_event *ev;
	bool peeked;
	__s32 fd;
	__u64 n;
	int kind;

	usm_count(USM_CNT_TLS_CALLS);
	peeked = len >= USM_PEEK && !tlm_probe_read_user(peek, sizeof(peek), (void *)buf);
	if (usm_h2_tls(TLM_ARG, conn, buf, len, source, dir, ktime_ns, pid_tgid, peek, peeked) ||
	    !peeked)
		return;
	kind = usm_classify(peek);
	if (kind < 0)
		return;
	/* Marked before the record is reserved: a message lost to a full ring buffer
	 * still makes its session HTTP/1. */
	fd = usm_tls_http1_seen(TLM_ARG, conn, pid_tgid, source);
	ev = usm_event_reserve(TLM_ARG);
	if (!ev)
		return;
	n = len < USM_PREFIX ? len : USM_PREFIX;
	if (tlm_probe_read_user(ev->prefix, n, (void *)buf)) {
		usm_event_discard(ev);
		return;
	}
	usm_tls_event_submit(TLM_ARG, ev, conn, source, dir, ktime_ns, pid_tgid, kind, len, n, fd);
}

/*
 * Entry of a write: (session, buffer, size) are its first three arguments, the size
 * an int for SSL_write, a size_t for SSL_write_ex and gnutls_record_send.
 */
static __always_inline int usm_tls_write_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
					      __u64 now, enum usm_source src, bool int_size)
{
	__u64 conn = PT_REGS_PARM1(regs), buf = PT_REGS_PARM2(regs), len = PT_REGS_PARM3(regs);
	bool rest;

	if (int_size)
		len = (int)len > 0 ? (__u64)(int)len : 0;
	if (!len) {
		/* Nothing to write (GnuTLS's retry form: NULL, 0). Still the thread's last
		 * call: a failure asked of it is not the previous write's. */
		if (src == USM_SRC_OPENSSL)
			usm_tls_last_write_clear(pid_tgid);
		return 0;
	}
	rest = usm_tls_write_rest(conn, buf, len, pid_tgid);
	if (src == USM_SRC_OPENSSL &&
	    usm_tls_write_retried(TLM_ARG, conn, buf, len, pid_tgid)) {
		usm_count(USM_CNT_TLS_CALLS);
		return 0; /* its bytes were looked at when it first failed */
	}
	if (rest) {
		usm_count(USM_CNT_TLS_CALLS);
		usm_count(USM_CNT_TLS_WRITE_RESTS);
		return 0;
	}
	usm_tls_emit(TLM_ARG, conn, buf, len, src, USM_DIR_WRITE, now, pid_tgid);
	return 0;
}

/* Entry of a read: (session, buffer) are its first two arguments; for a typed read
 * (UPROBE_TYPED_READ) (session, type, buffer), kept only for application data. */
static __always_inline int usm_tls_read_enter_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
						   enum usm_source src, bool ex, bool typed)
{
	__u64 arg2 = PT_REGS_PARM2(regs), arg3 = PT_REGS_PARM3(regs), sp = PT_REGS_SP(regs);
	struct usm_tls_read *r, *slot = NULL;
	struct usm_tls_call *c;
	int i;

	/* Both loaded as such: the verifier refuses a context offset chosen at run time. */
	barrier_var(arg2);
	barrier_var(arg3);
	if (typed && (__u32)arg2 != USM_GNUTLS_APP_DATA)
		return 0; /* another record type: an alert, change cipher spec, heartbeat */
	usm_tls_last_write_clear(pid_tgid); /* the thread's last TLS call is not a write */
	c = usm_tls_slot(TLM_ARG, true);
	if (!c)
		return 0;
	for (i = 0; i < USM_TLS_NEST; i++) {
		r = &c->r[i];
		/* A read whose frame was at or below this one's has returned unseen (the
		 * module stopped in between, a longjmp; or it is another stack's, a
		 * stackful coroutine's, whose return would have come): its slot is free,
		 * and what it read is not seen (counted). */
		if (r->pending && (r->sp <= sp || r->pid_tgid != pid_tgid)) {
			r->pending = 0;
			usm_count(USM_CNT_TLS_READS_UNSEEN);
		}
		if (!r->pending && !slot)
			slot = r;
	}
	if (!slot) {
		/* Deeper than USM_TLS_NEST reads in one another: this one is not seen. */
		tlm_count_map_error(TLM_ARG, tlm_key_map_usm_tls_inflight, TLM_OP_INSERT, -E2BIG);
		return 0;
	}
	slot->conn = PT_REGS_PARM1(regs);
	slot->buf = typed ? arg3 : arg2;
	slot->sp = sp;
	slot->size_ptr = ex ? PT_REGS_PARM4(regs) : 0;
	slot->pid_tgid = pid_tgid;
	slot->source = src;
	slot->recv_fd = -1;
	slot->pending = 1;
	return 0;
}

/*
 * recvfrom(2) on fd by thread pid_tgid, its user stack pointer at user_sp. A session set
 * up without SSL_set_fd (curl's own BIO; GnuTLS with a pull function of its own that
 * calls recv(2)) shows the probes no fd: its messages had no connection. Such a BIO
 * reads the socket with recv(2) from inside the read in flight on the thread, and the
 * innermost one (the lowest frame: through an HTTPS proxy, the proxy's session moves
 * the bytes) is the one whose session it serves. A recvfrom made above that read's
 * frame is not inside it: its slot was left pending by a return never seen. The read
 * keeps the first fd; its return gives it to the session (usm_tls_recv_commit), so a
 * slot that never returns gives nothing. c: the thread's reads (usm_tls_slot), looked
 * up by the caller first: a thread that never made one, nearly every caller, costs
 * only that.
 */
static __always_inline int usm_tls_recv_fd(struct usm_tls_call *c, __u64 pid_tgid, long fd,
					   __u64 user_sp)
{
	struct usm_tls_read *r = NULL;
	int i;

	if (fd < 0 || fd > 0x7fffffff)
		return 0;
	for (i = 0; i < USM_TLS_NEST; i++) {
		if (c->r[i].pending && c->r[i].pid_tgid == pid_tgid && c->r[i].sp > user_sp &&
		    (!r || c->r[i].sp < r->sp))
			r = &c->r[i];
	}
	if (r && r->recv_fd < 0)
		r->recv_fd = (__s32)fd;
	return 0;
}

/* A read returned that made a recvfrom on fd: the fd is its session's, unless the
 * session has one (SSL_set_fd's stays). */
static __always_inline void usm_tls_recv_commit(TLM_PARAM, __u64 conn, __u64 pid_tgid, __s32 fd)
{
	struct usm_fd_key key = {.conn = conn, .tgid = pid_tgid >> 32};
	struct usm_tls_sess init = {.fd = fd}, *s;

	s = bpf_map_lookup_elem(&usm_tls_fds, &key);
	if (!s)
		usm_tls_sess_insert(TLM_ARG, &key, &init);
	else if (s->fd < 0)
		s->fd = fd;
}

/*
 * Return of a read. rc: bytes moved (SSL_read, gnutls: > 0), or for SSL_read_ex 1 on
 * success with the count at *size_ptr.
 */
static __always_inline int usm_tls_read_ret_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
						 __u64 now)
{
	struct usm_tls_call *c = usm_tls_slot(TLM_ARG, false);
	__u64 len = 0, sp = PT_REGS_SP(regs);
	long rc = PT_REGS_RC(regs);
	struct usm_tls_read call;
	int i;

	if (!c)
		return 0; /* attached mid-call */
	for (i = 0; i < USM_TLS_NEST; i++) {
		if (c->r[i].pending && c->r[i].sp + 8 == sp && c->r[i].pid_tgid == pid_tgid)
			break;
	}
	if (i >= USM_TLS_NEST)
		return 0; /* attached mid-call, or a typed read's call of another type */
	call = c->r[i];
	c->r[i].pending = 0;
	if (call.recv_fd >= 0)
		usm_tls_recv_commit(TLM_ARG, call.conn, pid_tgid, call.recv_fd);
	if (call.size_ptr) {
		if ((int)rc != 1 || tlm_probe_read_user(&len, sizeof(len), (void *)call.size_ptr))
			return 0;
	} else {
		/* OpenSSL's reads return int, and so does GnuTLS's kTLS read
		 * (_gnutls_ktls_recv_int: an error leaves rax's upper half zero); its
		 * others return ssize_t, but no TLS read returns more than a record (16 KiB):
		 * every read's count fits an int. */
		rc = (int)rc;
		if (rc <= 0)
			return 0;
		len = rc;
	}
	usm_tls_emit(TLM_ARG, call.conn, call.buf, len, call.source, USM_DIR_READ, now, pid_tgid);
	return 0;
}

/*
 * Every TLS probe, by function: the uprobe programs run these with the function their
 * attachment's cookie names (enum usm_tls_fn), the test harness with the one it tests.
 */
static __always_inline int usm_tls_enter(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid, __u64 now,
					 __u64 fn)
{
	bool typed = fn & UPROBE_TYPED_READ;
	enum usm_source src;

	fn &= ~(__u64)UPROBE_TYPED_READ;
	src = fn >= USM_TLS_GNUTLS_SEND ? USM_SRC_GNUTLS : USM_SRC_OPENSSL;
	if (fn == USM_TLS_SSL_SET_FD || fn == USM_TLS_GNUTLS_SET_INT2)
		return usm_tls_set_fd(TLM_ARG, regs, pid_tgid,
				      fn == USM_TLS_SSL_SET_FD ? USM_SRC_OPENSSL : USM_SRC_GNUTLS);
	if (fn == USM_TLS_SSL_GET_ERROR)
		return usm_tls_get_error(TLM_ARG, regs, pid_tgid);
	if (fn == USM_TLS_SSL_FREE || fn == USM_TLS_GNUTLS_DEINIT)
		return usm_tls_free(TLM_ARG, regs, pid_tgid,
				    fn == USM_TLS_SSL_FREE ? USM_SRC_OPENSSL : USM_SRC_GNUTLS);
	if (fn >= USM_TLS_IO__COUNT)
		return 0; /* a cookie we did not set */
	if (fn & 1)
		return usm_tls_read_enter_body(TLM_ARG, regs, pid_tgid, src,
					       fn == USM_TLS_SSL_READ_EX, typed);
	return usm_tls_write_body(TLM_ARG, regs, pid_tgid, now, src, fn == USM_TLS_SSL_WRITE);
}

/* Only reads have return probes (see the top of this file). */
static __always_inline int usm_tls_ret(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid, __u64 now,
				       __u64 fn)
{
	fn &= ~(__u64)UPROBE_TYPED_READ;
	if (fn >= USM_TLS_IO__COUNT || !(fn & 1))
		return 0;
	return usm_tls_read_ret_body(TLM_ARG, regs, pid_tgid, now);
}

#endif /* BPFTEL_LIB_USM_TLS_H */
