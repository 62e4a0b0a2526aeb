/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * OpenSSL writes retried after SSL_ERROR_WANT_WRITE (or WANT_READ), seen once.
 *
 * A write on a non-blocking socket that cannot go on returns <= 0, and the application
 * asks SSL_get_error(ssl, ret) why. On SSL_ERROR_WANT_* it must call the write again
 * with the same arguments (the same size, and the same buffer unless it set
 * SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER), and no other write on that session may come
 * first: OpenSSL refuses it ("bad write retry"). Writes are captured at their entry
 * (lib/usm_tls.h): without this, the retry is a second message. An HTTP/1 request
 * counted twice, the first unanswered; an HTTP/2 session's frames walked twice, its
 * framing lost. A Python client writing a large request on a non-blocking socket does
 * this (tests/integration/test_usm.py).
 *
 * So each write leaves (thread, session, buffer, size) in its CPU's slot, and a read's
 * entry clears the slot of its thread. The entry of SSL_get_error(ssl, ret <= 0), when
 * its CPU's slot holds a write of the same thread on ssl (its last TLS call), marks the
 * session with that write's buffer, size and first and last 32 bytes. The session's
 * next write takes the mark away, and when it has the same size, and the same buffer or
 * (from another buffer: CPython, Ruby and others set SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER,
 * and may hand the same bytes from a new object) the same first and last bytes, it is
 * the retry:
 * counted (tls_write_retries), not looked at again. The mark is by session, not thread: an
 * event loop interleaves its sessions, and a scheduler of tasks (tokio) may retry on
 * another thread. A session freed (SSL_free) or given another socket (SSL_set_fd)
 * loses its mark; userspace deletes those of processes gone, and those older than
 * 10 s (user/modules/usm/tls_retry.c): a retry comes when the socket can take more,
 * and a mark left by what was no write's failure (below) must not wait for a write of
 * the same bytes for ever.
 *
 * Why a CPU's slot and not the thread's task storage: a write costs ~40 ns more with a
 * task-storage lookup (tools/bench/bench.py tls_write_loop, BENCHMARKS.md), ~5 % of its
 * BPF time, for what a CPU's slot answers but when the thread moved to another CPU
 * between its write and SSL_get_error (then the retry is seen twice, as before).
 *
 * Cost when nothing failed: the CPU's slot written, and one load of
 * usm_tls_retry_marks per write; the session's lookup only while marks exist, and reads
 * of 64 bytes of the write only when its session is marked and it moved.
 *
 * Not covered: GnuTLS, whose failures are only in the return value (GNUTLS_E_AGAIN:
 * that costs a return probe per write); applications that retry without asking
 * SSL_get_error. Partial writes (GnuTLS's, SSL_MODE_ENABLE_PARTIAL_WRITE) are
 * usm_tls_write_rest's. A failure of a call not probed (SSL_peek, SSL_shutdown)
 * right after a write on the session, or one asked after a read on another CPU and a
 * move back, marks that write, and a later write of the same buffer and size is then
 * taken for its retry.
 *
 * Include from lib/usm_tls.h.
 */
#ifndef BPFTEL_LIB_USM_TLS_RETRY_H
#define BPFTEL_LIB_USM_TLS_RETRY_H

struct usm_tls_write {
	__u64 pid_tgid; /* 0: the slot's thread made a read since */
	__u64 conn, buf, len;
};

/* The last write made on each CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct usm_tls_write);
} usm_tls_last_write SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, USM_TLS_RETRY_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct usm_fd_key);
	__type(value, struct usm_tls_retry_mark);
} usm_tls_retry SEC(".maps");

TLM_MAP_KEY(usm_tls_retry);

/* How many marks usm_tls_retry holds (inserted, less deleted, also by userspace: those
 * of processes gone, and those older than USM_TLS_RETRY_MAX_AGE_NS, whose write was not
 * retried or whose failure was not a write's): a write looks its session up there only
 * while there are some. */
__u64 usm_tls_retry_marks;

static __always_inline struct usm_tls_write *usm_tls_last_write_slot(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&usm_tls_last_write, &zero);
}

/* A read's entry: its thread's last TLS call is no longer the write in the slot. */
static __always_inline void usm_tls_last_write_clear(__u64 pid_tgid)
{
	struct usm_tls_write *lw = usm_tls_last_write_slot();

	if (lw && lw->pid_tgid == pid_tgid)
		lw->pid_tgid = 0;
}

/* The mark m of session key is taken away: the marks' count and its owner's share. */
static __always_inline void usm_tls_retry_delete(TLM_PARAM, const struct usm_fd_key *key,
						 struct usm_tls_retry_mark *m)
{
	__u32 uid = m->uid;

	if (tlm_map_take(usm_tls_retry, key))
		return; /* taken meanwhile, and counted by whoever took it */
	__sync_fetch_and_sub(&usm_tls_retry_marks, 1);
	fair_share_give(USM_SHARE_TLS_RETRY, uid);
}

/* The session's mark goes, if it has one. */
static __always_inline void usm_tls_retry_unmark(TLM_PARAM, const struct usm_fd_key *key)
{
	struct usm_tls_retry_mark *m;

	if (!usm_tls_retry_marks)
		return;
	m = bpf_map_lookup_elem(&usm_tls_retry, key);
	if (m)
		usm_tls_retry_delete(TLM_ARG, key, m);
}

/*
 * The entry of a write of len bytes from buf on conn, which becomes the CPU's last
 * write: true when it writes the rest of the thread's last write on conn, its bytes
 * from within that one's to where that one's ended (not to be looked at again: they
 * were, at that write's entry). GnuTLS sends one record a call, 16 KiB at most (less
 * when the peer limits the record size), and returns what it sent: the application
 * writes the rest so, and OpenSSL's partial-write mode has it do the same. Without
 * this, an HTTP/2 session's frames would be walked from the middle of one (its framing
 * lost), and a body's bytes that begin like a request would be taken for one. Known by
 * the CPU's slot, as a failed write is: a thread moved to another CPU between its two
 * calls (or preempted by another thread's write) has the rest looked at, as before.
 */
static __always_inline bool usm_tls_write_rest(__u64 conn, __u64 buf, __u64 len, __u64 pid_tgid)
{
	struct usm_tls_write *lw = usm_tls_last_write_slot();
	bool rest;

	if (!lw)
		return false;
	/* At least one record in (RFC 8449's smallest, 64 bytes): a new write from inside an
	 * end-aligned scratch buffer is not taken for a rest so easily. */
	rest = lw->pid_tgid == pid_tgid && lw->conn == conn && buf >= lw->buf + 64 &&
	       buf - lw->buf < lw->len && buf + len == lw->buf + lw->len;
	lw->pid_tgid = pid_tgid;
	lw->conn = conn;
	lw->buf = buf;
	lw->len = len;
	return rest;
}

/* The first and the last min(len, USM_TLS_RETRY_END) bytes of the write of len bytes at
 * buf, in ends (zeroed by the caller: the bytes past them stay 0): how many each (0:
 * unreadable). */
static __always_inline __u32 usm_tls_write_ends(TLM_PARAM, __u64 buf, __u64 len,
						__u64 ends[2][USM_TLS_RETRY_END / 8])
{
	__u32 n = len < USM_TLS_RETRY_END ? (__u32)len : USM_TLS_RETRY_END;

	if (!n || n > USM_TLS_RETRY_END ||
	    tlm_probe_read_user(ends[0], n, (const void *)(unsigned long)buf) ||
	    tlm_probe_read_user(ends[1], n, (const void *)(unsigned long)(buf + len - n)))
		return 0;
	return n;
}

/* Does the write at buf, as long as the one m holds, begin and end with m's bytes? Read
 * from the process only then: its session is marked, and the buffer moved. */
static __always_inline bool usm_tls_retry_same_ends(TLM_PARAM, const struct usm_tls_retry_mark *m,
						    __u64 buf)
{
	__u64 cur[2][USM_TLS_RETRY_END / 8] = {};
	__u32 n, i;

	n = usm_tls_write_ends(TLM_ARG, buf, m->len, cur);
	if (!n || n != m->ends_len)
		return false;
	for (i = 0; i < USM_TLS_RETRY_END / 8; i++) {
		if (cur[0][i] != m->ends[0][i] || cur[1][i] != m->ends[1][i])
			return false;
	}
	return true;
}

/*
 * The entry of a write of len bytes from buf on conn, the CPU's last write now
 * (usm_tls_write_rest): true when it retries the write that failed on conn (it is not
 * to be looked at again).
 */
static __always_inline bool usm_tls_write_retried(TLM_PARAM, __u64 conn, __u64 buf, __u64 len,
						  __u64 pid_tgid)
{
	struct usm_fd_key key = {.conn = conn, .tgid = pid_tgid >> 32};
	struct usm_tls_retry_mark *m;
	bool retry;

	if (!usm_tls_retry_marks)
		return false;
	m = bpf_map_lookup_elem(&usm_tls_retry, &key);
	if (!m)
		return false;
	retry = m->len == len && (m->buf == buf || usm_tls_retry_same_ends(TLM_ARG, m, buf));
	usm_tls_retry_delete(TLM_ARG, &key, m);
	if (retry)
		usm_count(USM_CNT_TLS_RETRIES);
	return retry;
}

/* The mark at key, if there is one, takes the failed write m and keeps its owner, whose
 * count it holds: true when it did (false: none, or taken meanwhile; m unchanged). */
static __always_inline bool usm_tls_retry_replace(TLM_PARAM, const struct usm_fd_key *key,
						  struct usm_tls_retry_mark *m)
{
	struct usm_tls_retry_mark *old = bpf_map_lookup_elem(&usm_tls_retry, key);
	__u32 uid = m->uid;

	if (!old)
		return false;
	m->uid = old->uid;
	if (!tlm_map_replace(usm_tls_retry, key, m))
		return true;
	m->uid = uid;
	return false;
}

/*
 * SSL_get_error(ssl, ret): with ret <= 0 (a failure) just after a write on ssl, the
 * thread's last TLS call, that write failed; if it is retried, its retry is the
 * session's next write.
 */
static __always_inline int usm_tls_get_error(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid)
{
	struct usm_fd_key key = {.conn = PT_REGS_PARM1(regs), .tgid = pid_tgid >> 32};
	struct usm_tls_retry_mark m = {};
	struct usm_tls_write *lw;
	long r;

	if ((int)PT_REGS_PARM2(regs) > 0 || !key.conn)
		return 0;
	lw = usm_tls_last_write_slot();
	if (!lw || lw->pid_tgid != pid_tgid || lw->conn != key.conn)
		return 0;
	m.buf = lw->buf;
	m.len = lw->len;
	m.at_ns = bpf_ktime_get_ns(); /* a failure's path: the clock's cost is no matter */
	m.uid = fair_share_owner();
	m.ends_len = usm_tls_write_ends(TLM_ARG, m.buf, m.len, m.ends);
	lw->pid_tgid = 0; /* asked twice: one mark */
	/* A mark there already (the session's write failed, and another before its
	 * retry): this write takes its place, and the mark keeps the owner whose count it
	 * holds (another uid, if the process changed its uid since). The table does not
	 * grow: no share is asked, and a user at its share is marked all the same. */
	if (usm_tls_retry_replace(TLM_ARG, &key, &m))
		return 0;
	/* Each owner but root holds a quarter of the marks at most by default
	 * (lib/fair_share.h): a user's sessions over memory fail every write, and would
	 * fill the map, so that another process's retry, not marked, would be a second
	 * message. */
	if (!fair_share_take(TLM_ARG, USM_SHARE_TLS_RETRY, m.uid,
			     usm_share_cap[USM_SHARE_TLS_RETRY])) {
		usm_count(USM_CNT_TLS_RETRY_OVER_SHARE);
		return 0;
	}
	r = tlm_map_insert(usm_tls_retry, &key, &m); /* full (E2BIG): counted */
	if (!r) {
		__sync_fetch_and_add(&usm_tls_retry_marks, 1);
		return 0;
	}
	/* Not a new mark: the share taken goes back; one another CPU made meanwhile (of
	 * the same session) takes the new write's place, as above. */
	fair_share_give(USM_SHARE_TLS_RETRY, m.uid);
	if (r == -EEXIST)
		usm_tls_retry_replace(TLM_ARG, &key, &m);
	return 0;
}

#endif /* BPFTEL_LIB_USM_TLS_RETRY_H */
