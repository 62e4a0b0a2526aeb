// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * BPF_PROG_TEST_RUN harness for bpf/usm.bpf.c. It compiles the real object (same maps,
 * same probe bodies, the real socket filter, which the test runs directly on crafted
 * packets) and adds a syscall program that runs one TLS probe body on a synthetic
 * register set, as thread pid_tgid at time now. A syscall program runs in the test's
 * own process, so the buffers in the registers point into the test's memory.
 */
#include "../../../bpf/usm.bpf.c"

#define USM_TEST_ENTER 0 /* + 2 * probe index + 0: entry, + 1: return */

/* probe: (op, source, ex) per index: 0 SSL_write, 1 SSL_read, 2 SSL_write_ex,
 * 3 SSL_read_ex, 4 gnutls_record_send, 5 gnutls_record_recv. */
struct usm_test_call {
	struct pt_regs regs;
	__u64 pid_tgid;
	__u64 now;
	__u32 probe; /* index * 2 + is_return */
	__u32 __pad;
};

SEC("syscall")
int usm_test_tls(struct usm_test_call *ctx)
{
	__u32 __tlm_prog = 0, idx = ctx->probe / 2, ret = ctx->probe & 1;
	enum usm_tls_op op = idx & 1 ? USM_TLS_READ : USM_TLS_WRITE;
	enum usm_source src = idx >= 4 ? USM_SRC_GNUTLS : USM_SRC_OPENSSL;
	bool ex = idx == 2 || idx == 3;

	if (idx > 5)
		return -1;
	if (ret)
		return usm_tls_ret_body(TLM_ARG, &ctx->regs, ctx->pid_tgid, ctx->now, op);
	return usm_tls_enter_body(TLM_ARG, &ctx->regs, ctx->pid_tgid, ctx->now, op, src, ex);
}
