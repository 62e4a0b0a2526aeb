/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * USM module: the types that cross the kernel/user boundary.
 *
 * Included by the BPF programs (after vmlinux.h) and by userspace (after
 * <linux/types.h>). Kernel -> user: struct usm_event through the ring buffer
 * `usm_events`, one per HTTP message start (a request line or a status line) seen in
 * TLS plaintext (uprobes) or in a TCP segment (socket filter). Nothing else leaves the
 * kernel: bytes that do not start an HTTP/1.x message are counted and dropped there.
 * The prefix is parsed and discarded in userspace; payloads are never stored.
 */
#ifndef BPFTEL_USM_H
#define BPFTEL_USM_H

/* Plaintext bytes copied per message: a request line or a status line. */
#define USM_PREFIX 160

enum usm_source {
	USM_SRC_OPENSSL = 0,
	USM_SRC_GNUTLS = 1,
	USM_SRC_SOCKET = 2, /* plaintext, from packets */
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
	USM_TLS_FN__COUNT,
};

/* Which way the bytes went for the process that the probe saw. */
enum usm_dir {
	USM_DIR_WRITE = 0,
	USM_DIR_READ = 1,
};

enum usm_kind {
	USM_KIND_REQUEST = 0,
	USM_KIND_RESPONSE = 1,
};

/* Counters in the per-CPU array `usm_counters`. */
enum usm_counter {
	USM_CNT_TLS_CALLS = 0,	  /* TLS writes asked to move bytes, reads that moved some */
	USM_CNT_TLS_HTTP = 1,	  /* ... that started an HTTP message: event emitted */
	USM_CNT_PACKETS = 2,	  /* TCP segments with payload looked at */
	USM_CNT_PACKETS_HTTP = 3, /* ... that started an HTTP message: event emitted */
	USM_CNT_LOST = 4,	  /* ring buffer full */
	USM_CNT_TRUNCATED = 5,	  /* headers shorter than their own length fields */
	USM_CNT__COUNT,
};

struct usm_event {
	__u64 ktime_ns; /* the message's first byte: write entry, read return, packet */
	__u64 conn;	/* TLS: the SSL* / gnutls session; socket: 0 */
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

#endif /* BPFTEL_USM_H */
