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
 * So the entry of SSL_get_error(ssl, ret <= 0), when the thread's last TLS call was a
 * write on ssl (its task storage says so: a read's entry clears it), marks the session
 * with that write's (buffer, size). The session's next write takes the mark away, and
 * when it has the same buffer and size it is the retry: counted (tls_write_retries),
 * not looked at again. The mark is by session, not thread: an event loop interleaves
 * its sessions, and a scheduler of tasks (tokio) may retry on another thread. A session
 * freed (SSL_free) or given another socket (SSL_set_fd) loses its mark; userspace
 * deletes those of processes gone (user/modules/usm/tls_retry.c).
 *
 * Cost when nothing failed: the thread's last write kept in its task storage, and one
 * load of usm_tls_retry_marks per write; the session's lookup only while marks exist.
 *
 * Not covered: GnuTLS, whose failures are only in the return value (GNUTLS_E_AGAIN:
 * that costs a return probe per write); applications that retry without asking
 * SSL_get_error; partial writes (SSL_MODE_ENABLE_PARTIAL_WRITE: the rest is a write of
 * other bytes, seen as such). A failure of a call not probed (SSL_peek, SSL_shutdown)
 * right after a write on the session marks that write, and a later write of the same
 * buffer and size is then taken for its retry.
 *
 * Include from lib/usm_tls.h, after the thread's task storage and struct usm_fd_key.
 */
#ifndef BPFTEL_LIB_USM_TLS_RETRY_H
#define BPFTEL_LIB_USM_TLS_RETRY_H

struct usm_tls_retry_mark {
	__u64 buf, len; /* the write that failed */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, USM_TLS_RETRY_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct usm_fd_key);
	__type(value, struct usm_tls_retry_mark);
} usm_tls_retry SEC(".maps");

TLM_MAP_KEY(usm_tls_retry);

/* How many marks usm_tls_retry holds (inserted, less deleted, also by userspace): a
 * write looks its session up there only while there are some. */
__u64 usm_tls_retry_marks;

/* The session's mark goes, if it has one. */
static __always_inline void usm_tls_retry_unmark(TLM_PARAM, const struct usm_fd_key *key)
{
	if (!usm_tls_retry_marks || !bpf_map_lookup_elem(&usm_tls_retry, key))
		return;
	if (!tlm_map_delete(usm_tls_retry, key))
		__sync_fetch_and_sub(&usm_tls_retry_marks, 1);
}

/*
 * The entry of a write of len bytes from buf on conn: true when it retries the write
 * that failed on conn (it is not to be looked at again). Either way it becomes the
 * thread's last TLS call.
 */
static __always_inline bool usm_tls_write_retried(TLM_PARAM, __u64 conn, __u64 buf, __u64 len,
						  __u64 pid_tgid)
{
	struct usm_fd_key key = {.conn = conn, .tgid = pid_tgid >> 32};
	struct usm_tls_call *c = usm_tls_slot(TLM_ARG, true);
	struct usm_tls_retry_mark *m;
	bool retry;

	if (c) {
		c->w_conn = conn;
		c->w_buf = buf;
		c->w_len = len;
		c->w_pid_tgid = pid_tgid;
	}
	if (!usm_tls_retry_marks)
		return false;
	m = bpf_map_lookup_elem(&usm_tls_retry, &key);
	if (!m)
		return false;
	retry = m->buf == buf && m->len == len;
	if (!tlm_map_delete(usm_tls_retry, &key))
		__sync_fetch_and_sub(&usm_tls_retry_marks, 1);
	if (retry)
		usm_count(USM_CNT_TLS_RETRIES);
	return retry;
}

/*
 * SSL_get_error(ssl, ret): with ret <= 0 (a failure) just after a write on ssl, the
 * thread's last TLS call, that write failed; if it is retried, its retry is the
 * session's next write.
 */
static __always_inline int usm_tls_get_error(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid)
{
	struct usm_fd_key key = {.conn = PT_REGS_PARM1(regs), .tgid = pid_tgid >> 32};
	struct usm_tls_retry_mark m;
	struct usm_tls_call *c;
	long r;

	if ((int)PT_REGS_PARM2(regs) > 0 || !key.conn)
		return 0;
	c = usm_tls_slot(TLM_ARG, false);
	if (!c || c->w_conn != key.conn || c->w_pid_tgid != pid_tgid)
		return 0;
	m.buf = c->w_buf;
	m.len = c->w_len;
	c->w_conn = 0; /* asked twice: one mark */
	r = tlm_map_insert(usm_tls_retry, &key, &m); /* full (E2BIG): counted */
	if (!r)
		__sync_fetch_and_add(&usm_tls_retry_marks, 1);
	else if (r == -EEXIST)
		tlm_map_update(usm_tls_retry, &key, &m, BPF_EXIST);
	return 0;
}

#endif /* BPFTEL_LIB_USM_TLS_RETRY_H */
