/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * USM, TLS side: the bodies of the uprobes and uretprobes on OpenSSL (SSL_write,
 * SSL_read and their _ex forms, 1.1.1 and 3) and GnuTLS (gnutls_record_send/recv).
 * Entry: remember (session, buffer) per thread. Return: for the bytes the call really
 * moved, peek at the first 8; if they start an HTTP/1.x message, emit its first
 * USM_PREFIX bytes with the session as connection key.
 *
 * Timing is the message's first byte as the process sees it: a write's entry (the
 * process hands the bytes over), a read's return (the bytes have arrived).
 *
 * Include after lib/usm_common.h.
 */
#ifndef BPFTEL_LIB_USM_TLS_H
#define BPFTEL_LIB_USM_TLS_H

enum usm_tls_op {
	USM_TLS_WRITE = 0,
	USM_TLS_READ = 1,
};

struct usm_tls_key {
	__u64 pid_tgid;
	__u32 op; /* enum usm_tls_op */
	__u32 __pad;
};

struct usm_tls_call {
	__u64 conn;	/* SSL* / gnutls_session_t */
	__u64 buf;	/* user buffer */
	__u64 size_ptr; /* _ex forms: where the byte count is written; 0 otherwise */
	__u64 ktime_ns; /* entry */
	__u32 source;	/* enum usm_source */
	__u32 __pad;
};

/* LRU: a return we never see (thread killed inside the call) cannot pin a slot. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct usm_tls_key);
	__type(value, struct usm_tls_call);
} usm_tls_inflight SEC(".maps");

TLM_MAP_KEY(usm_tls_inflight);

/* Which fd a TLS session runs on, per process: SSL_set_fd, gnutls_transport_set_int2.
 * LRU: sessions are freed without a probe. */
struct usm_fd_key {
	__u64 conn;
	__u32 tgid;
	__u32 __pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct usm_fd_key);
	__type(value, __s32);
} usm_tls_fds SEC(".maps");

TLM_MAP_KEY(usm_tls_fds);

/* SSL_set_fd(ssl, fd), gnutls_transport_set_int2(session, recv_fd, send_fd): remember
 * the socket's fd (the receive one for GnuTLS: the connection is the same). */
static __always_inline int usm_tls_set_fd(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid)
{
	struct usm_fd_key key = {.conn = PT_REGS_PARM1(regs), .tgid = pid_tgid >> 32};
	__s32 fd = (__s32)PT_REGS_PARM2(regs);

	tlm_map_update(usm_tls_fds, &key, &fd, BPF_ANY);
	return 0;
}

static __always_inline __s32 usm_tls_fd_of(__u64 conn, __u64 pid_tgid)
{
	struct usm_fd_key key = {.conn = conn, .tgid = pid_tgid >> 32};
	__s32 *fd = bpf_map_lookup_elem(&usm_tls_fds, &key);

	return fd ? *fd : -1;
}

/* Entry of any TLS read/write: (session, buffer) are the first two arguments. */
static __always_inline int usm_tls_enter_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
					      __u64 now, enum usm_tls_op op, enum usm_source src,
					      bool ex)
{
	struct usm_tls_key key = {.pid_tgid = pid_tgid, .op = op};
	struct usm_tls_call call = {
		.conn = PT_REGS_PARM1(regs),
		.buf = PT_REGS_PARM2(regs),
		.size_ptr = ex ? PT_REGS_PARM4(regs) : 0,
		.ktime_ns = now,
		.source = src,
	};

	tlm_map_update(usm_tls_inflight, &key, &call, BPF_ANY);
	return 0;
}

/*
 * Return of a TLS read/write. rc: bytes moved (SSL_read/write, gnutls: > 0), or for
 * the _ex forms 1 on success with the count at *size_ptr.
 */
static __always_inline int usm_tls_ret_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
					    __u64 now, enum usm_tls_op op)
{
	struct usm_tls_key key = {.pid_tgid = pid_tgid, .op = op};
	long rc = PT_REGS_RC(regs);
	struct usm_tls_call *in, call;
	char peek[USM_PEEK] = {};
	struct usm_event *ev;
	__u64 len = 0, n;
	int kind;

	in = bpf_map_lookup_elem(&usm_tls_inflight, &key);
	if (!in)
		return 0; /* attached mid-call, or evicted */
	call = *in;
	tlm_map_delete(usm_tls_inflight, &key);
	if (call.size_ptr) {
		if ((int)rc != 1 || tlm_probe_read_user(&len, sizeof(len), (void *)call.size_ptr))
			return 0;
	} else {
		if (call.source == USM_SRC_OPENSSL)
			rc = (int)rc; /* int return; gnutls returns ssize_t */
		if (rc <= 0)
			return 0;
		len = rc;
	}
	usm_count(USM_CNT_TLS_CALLS);
	if (len < USM_PEEK || tlm_probe_read_user(peek, sizeof(peek), (void *)call.buf))
		return 0;
	kind = usm_classify(peek);
	if (kind < 0)
		return 0;
	ev = usm_event_reserve(TLM_ARG);
	if (!ev)
		return 0;
	n = len < USM_PREFIX ? len : USM_PREFIX;
	if (tlm_probe_read_user(ev->prefix, n, (void *)call.buf)) {
		tlm_ringbuf_discard(ev, 0);
		return 0;
	}
	ev->conn = call.conn;
	ev->pid = pid_tgid >> 32;
	ev->tid = (__u32)pid_tgid;
	ev->source = call.source;
	ev->family = 0;
	ev->dir = op == USM_TLS_READ ? USM_DIR_READ : USM_DIR_WRITE;
	ev->fd = usm_tls_fd_of(call.conn, pid_tgid);
	ev->__pad3 = 0;
	ev->client_port = ev->server_port = 0;
	__builtin_memset(ev->client_addr, 0, sizeof(ev->client_addr));
	__builtin_memset(ev->server_addr, 0, sizeof(ev->server_addr));
	usm_event_submit(ev, op == USM_TLS_WRITE ? call.ktime_ns : now, kind, len, n,
			 USM_CNT_TLS_HTTP);
	return 0;
}

/*
 * Every TLS probe, by function: the uprobe programs run these with the function their
 * attachment's cookie names (enum usm_tls_fn), the test harness with the one it tests.
 */
static __always_inline int usm_tls_enter(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
					 __u64 now, __u64 fn)
{
	if (fn == USM_TLS_SSL_SET_FD || fn == USM_TLS_GNUTLS_SET_INT2)
		return usm_tls_set_fd(TLM_ARG, regs, pid_tgid);
	if (fn >= USM_TLS_IO__COUNT)
		return 0; /* a cookie we did not set */
	return usm_tls_enter_body(TLM_ARG, regs, pid_tgid, now,
				  fn & 1 ? USM_TLS_READ : USM_TLS_WRITE,
				  fn >= USM_TLS_GNUTLS_SEND ? USM_SRC_GNUTLS : USM_SRC_OPENSSL,
				  fn == USM_TLS_SSL_WRITE_EX || fn == USM_TLS_SSL_READ_EX);
}

static __always_inline int usm_tls_ret(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid, __u64 now,
				       __u64 fn)
{
	if (fn >= USM_TLS_IO__COUNT)
		return 0;
	return usm_tls_ret_body(TLM_ARG, regs, pid_tgid, now,
				fn & 1 ? USM_TLS_READ : USM_TLS_WRITE);
}

#endif /* BPFTEL_LIB_USM_TLS_H */
