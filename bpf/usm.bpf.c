// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The USM module's BPF programs: one uprobe and one uretprobe program for every TLS
 * function of OpenSSL and GnuTLS, one uprobe program for Go's crypto/tls (its entries
 * and its RETs), attached per file by the uprobe registry with
 * the function in each attachment's cookie (enum usm_tls_fn, and the slot that counts
 * its file's calls: bpf/uprobe_hits.h), a tracepoint on recvfrom(2) that gives a
 * session with its own BIO its socket, and the plaintext socket filter, a manager
 * probe on a packet socket. The code is in bpf/lib/usm_*.h.
 */
/*
 * No CO-RE here, on purpose: this object reads only layouts that are ABI (the x86-64
 * user register frame in struct pt_regs, struct iphdr, ipv6hdr, tcphdr and the
 * __sk_buff context), so it needs no kernel BTF at load. That saves libbpf reading and searching the kernel's 5 MiB of
 * BTF on every start: ~45 ms of a module restart. test_unit_core_free checks that the
 * object carries no CO-RE relocation. The task pointer that keys a thread's read in
 * flight (bpf_get_current_task_btf) is only handed to helpers (bpf_task_storage_get,
 * bpf_task_pt_regs), never read: the kernel checks it against its own BTF, libbpf
 * needs none.
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
#include "lib/file_hits.h"
#include "lib/stop_gate.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

TLM_PROG_KEY(usm_tls_uprobe);
TLM_PROG_KEY(usm_tls_uretprobe);
TLM_PROG_KEY(usm_go_uprobe);
TLM_PROG_KEY(usm_http_socket);
TLM_PROG_KEY(usm_tls_recv);

SEC("uprobe")
int usm_tls_uprobe(struct pt_regs *ctx)
{
	TLM_PROG(usm_tls_uprobe);
	BPFTEL_STOP_GATE();

	return usm_tls_enter(TLM_ARG, ctx, bpf_get_current_pid_tgid(), USM_TLS_NOW,
			     uprobe_file_hit(bpf_get_attach_cookie(ctx)));
}

SEC("uretprobe")
int usm_tls_uretprobe(struct pt_regs *ctx)
{
	TLM_PROG(usm_tls_uretprobe);
	BPFTEL_STOP_GATE();

	return usm_tls_ret(TLM_ARG, ctx, bpf_get_current_pid_tgid(), USM_TLS_NOW,
			   uprobe_file_hit(bpf_get_attach_cookie(ctx)));
}

/* Go's crypto/tls: entries and RETs alike are plain uprobes (lib/usm_go.h). */
SEC("uprobe")
int usm_go_uprobe(struct pt_regs *ctx)
{
	TLM_PROG(usm_go_uprobe);
	BPFTEL_STOP_GATE();

	return usm_go_probe(TLM_ARG, ctx, bpf_get_current_pid_tgid(), USM_TLS_NOW,
			    uprobe_file_hit(bpf_get_attach_cookie(ctx)));
}

/* recv(2) inside a TLS read: the socket of a session set up with a BIO of its own
 * (lib/usm_tls.h, usm_tls_recv_fd). The syscall's user stack pointer is in the task's
 * saved user registers (x86-64 ABI layout, no CO-RE). */
SEC("tracepoint/syscalls/sys_enter_recvfrom")
int usm_tls_recv(struct trace_event_raw_sys_enter *ctx)
{
	struct usm_tls_call *c;
	struct pt_regs *user;

	TLM_PROG(usm_tls_recv);
	BPFTEL_STOP_GATE();

	c = usm_tls_slot(TLM_ARG, false);
	if (!c)
		return 0;
	user = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	return usm_tls_recv_fd(c, bpf_get_current_pid_tgid(), (long)ctx->args[0],
			       user ? PT_REGS_SP(user) : 0);
}

SEC("socket")
int usm_http_socket(struct __sk_buff *skb)
{
	TLM_PROG(usm_http_socket);

	return usm_socket_body(TLM_ARG, skb, bpf_ktime_get_ns());
}
