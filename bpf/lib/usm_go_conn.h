/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * USM, Go: the socket under a crypto/tls.Conn, read through the layouts of Go's own
 * types on x86-64. They have been these since Go 1.9 and are the same in 1.17 to 1.23
 * (src/crypto/tls/conn.go, src/net/net.go, src/net/fd_posix.go, src/internal/poll):
 *
 *	tls.Conn	{ conn net.Conn; ... }	     an interface: (itab, data) at 0 and 8
 *	net.TCPConn	{ conn }		     data points at it; so do UnixConn, UDPConn
 *	net.conn	{ fd *netFD }		     at 0
 *	net.netFD	{ pfd poll.FD; ... }	     at 0
 *	poll.FD		{ fdmu fdMutex; Sysfd int }  fdMutex: u64 + 2 x u32, so Sysfd at 16
 *
 * A tls.Conn over another net.Conn (a wrapper of the program's own) has no such chain:
 * the number read is then not its socket. Userspace only takes it as one when it names
 * a socket that process holds; otherwise the message has no addresses (tls_no_conn),
 * and the process and side, which come from the probe itself, still hold.
 *
 * Read at every call, never cached: Go's garbage collector frees a Conn and may put
 * the next one at the same address, with another socket.
 *
 * Include after lib/usm_common.h (tlm_probe_read_user).
 */
#ifndef BPFTEL_LIB_USM_GO_CONN_H
#define BPFTEL_LIB_USM_GO_CONN_H

#define USM_GO_TLSCONN_DATA 8  /* tls.Conn.conn's data word */
#define USM_GO_CONN_FD	    0  /* net.conn.fd */
#define USM_GO_NETFD_SYSFD  16 /* netFD.pfd.Sysfd */

static __always_inline __s32 usm_go_conn_fd(TLM_PARAM, __u64 conn)
{
	__u64 data = 0, netfd = 0;
	__s64 sysfd = -1;

	if (tlm_probe_read_user(&data, sizeof(data), (void *)(conn + USM_GO_TLSCONN_DATA)) ||
	    !data || tlm_probe_read_user(&netfd, sizeof(netfd), (void *)(data + USM_GO_CONN_FD)) ||
	    !netfd ||
	    tlm_probe_read_user(&sysfd, sizeof(sysfd), (void *)(netfd + USM_GO_NETFD_SYSFD)))
		return -1;
	return sysfd >= 0 && sysfd <= 0x7fffffff ? (__s32)sysfd : -1;
}

#endif /* BPFTEL_LIB_USM_GO_CONN_H */
