// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * BPF_PROG_TEST_RUN harness for the USM module's BPF code (bpf/lib/usm_*.h: the same maps
 * and bodies as bpf/usm.bpf.c): the socket filter's body, which the test runs on
 * crafted packets, and a syscall program that runs one TLS probe on a synthetic
 * register set, as thread pid_tgid at time now. A syscall program runs in the test's
 * own process, so the buffers in the registers point into the test's memory.
 */
#define BPF_NO_PRESERVE_ACCESS_INDEX
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>
#include "usm.h"
#include "lib/usm_classify.h"
#include "telemetry/telemetry.bpf.h"
#include "lib/usm_common.h"
#include "lib/usm_tls.h"
#include "lib/usm_go.h"
#include "lib/usm_socket.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

TLM_PROG_KEY(usm_http_socket);

SEC("socket")
int usm_http_socket(struct __sk_buff *skb)
{
	TLM_PROG(usm_http_socket);

	return usm_socket_body(TLM_ARG, skb, bpf_ktime_get_ns());
}

#define USM_TEST_ENTER 0 /* + 2 * probe index + 0: entry, + 1: return */

/* probe: (op, source, ex) per index: 0 SSL_write, 1 SSL_read, 2 SSL_write_ex,
 * 3 SSL_read_ex, 4 gnutls_record_send, 5 gnutls_record_recv. */
struct usm_test_call {
	struct pt_regs regs;
	__u64 pid_tgid;
	__u64 now;
	__u32 probe; /* index * 2 + is_return */
	__u32 flags; /* the cookie's flags: UPROBE_TYPED_READ */
};

SEC("syscall")
int usm_test_tls(struct usm_test_call *ctx)
{
	__u32 __tlm_prog = 0, fn = ctx->probe / 2;

	if (fn >= USM_TLS_FN__COUNT)
		return -1;
	fn |= ctx->flags;
	if (ctx->probe & 1)
		return usm_tls_ret(TLM_ARG, &ctx->regs, ctx->pid_tgid, ctx->now, fn);
	return usm_tls_enter(TLM_ARG, &ctx->regs, ctx->pid_tgid, ctx->now, fn);
}

/* recvfrom(2) on fd by thread pid_tgid at user stack pointer sp (bpf/usm.bpf.c's
 * sys_enter_recvfrom program, its arguments given). */
struct usm_test_recv {
	__u64 pid_tgid;
	__s64 fd;
	__u64 sp;
};

SEC("syscall")
int usm_test_recv(struct usm_test_recv *ctx)
{
	struct usm_tls_call *c;
	__u32 __tlm_prog = 0;

	c = usm_tls_slot(TLM_ARG, false);
	return c ? usm_tls_recv_fd(c, ctx->pid_tgid, ctx->fd, ctx->sp) : 0;
}

/* A Go probe (enum usm_go_fn in probe) on a synthetic register set: the buffers and
 * the *tls.Conn chain in the registers point into the test's memory. */
SEC("syscall")
int usm_test_go(struct usm_test_call *ctx)
{
	__u32 __tlm_prog = 0;

	if ((ctx->probe & ~UPROBE_GO_STACK_CHECK) >= USM_GO_FN__COUNT)
		return -1;
	return usm_go_probe(TLM_ARG, &ctx->regs, ctx->pid_tgid, ctx->now, ctx->probe);
}
