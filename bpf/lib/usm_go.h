/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * USM, Go: the bodies of the probes on Go's crypto/tls, (*Conn).Write and (*Conn).Read,
 * in Go executables (user/manager/goexe.h finds them, stripped binaries included).
 * Their bytes go through usm_tls_emit() like OpenSSL's: HTTP/1 starts as events,
 * HTTP/2 sessions walked frame by frame; the session key is the *tls.Conn.
 *
 * Go >= 1.17's register ABI on x86-64 (src/cmd/compile/abi-internal.md): integer
 * arguments in RAX, RBX, RCX, RDI, RSI, R8-R11, results in the same; R14 holds the
 * running goroutine's g. A method's receiver comes first, a slice takes three words:
 *
 *	func (c *Conn) Write(b []byte) (int, error)   c: RAX, b: RBX (ptr), RCX (len)
 *	func (c *Conn) Read(b []byte) (int, error)    the same; returns n in RAX
 *
 * Entry probes sit past the function's stack check (goret.c): an entry probe fires
 * again when the goroutine's stack grows and the function restarts. There are no
 * uretprobes: a uretprobe rewrites the return address on the stack, and Go copies
 * goroutine stacks elsewhere when they grow. Read's returns are plain uprobes on each
 * of its RET instructions.
 *
 * A Read's entry and its return are paired per goroutine, by its g (R14), not per
 * thread: a Read that blocks parks its goroutine, and the goroutine resumes on any
 * thread. The g's address is the goroutine's for its life (a g is reused only after
 * its goroutine exited), so no version-dependent offset (g.goid) is needed.
 *
 * Include after lib/usm_tls.h.
 */
#ifndef BPFTEL_LIB_USM_GO_H
#define BPFTEL_LIB_USM_GO_H

struct usm_go_read_key {
	__u64 g;
	__u32 tgid;
	__u32 __pad;
};

struct usm_go_read {
	__u64 conn;
	__u64 buf;
};

/* Reads in flight, by goroutine. LRU: a goroutine parked in Read when its process is
 * killed never returns; beyond 16384 reads in flight at once, the oldest lose their
 * return (counted as go_read_unpaired when it comes). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct usm_go_read_key);
	__type(value, struct usm_go_read);
} usm_go_reads SEC(".maps");

TLM_MAP_KEY(usm_go_reads);

static __always_inline int usm_go_write_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
					     __u64 now)
{
	__s64 len = (__s64)regs->cx;

	if (len <= 0)
		return 0;
	usm_tls_emit(TLM_ARG, regs->ax, regs->bx, (__u64)len, USM_SRC_GO, USM_DIR_WRITE, now,
		     pid_tgid);
	return 0;
}

static __always_inline int usm_go_read_enter_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid)
{
	struct usm_go_read_key key = {.g = regs->r14, .tgid = pid_tgid >> 32};
	struct usm_go_read r = {.conn = regs->ax, .buf = regs->bx};

	if (!key.g || (__s64)regs->cx <= 0)
		return 0; /* no goroutine (not Go code), or nothing to read into */
	tlm_map_update(usm_go_reads, &key, &r, BPF_ANY);
	return 0;
}

static __always_inline int usm_go_read_ret_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
						__u64 now)
{
	struct usm_go_read_key key = {.g = regs->r14, .tgid = pid_tgid >> 32};
	struct usm_go_read *r, call;
	__s64 n = (__s64)regs->ax;

	r = bpf_map_lookup_elem(&usm_go_reads, &key);
	if (!r) {
		usm_count(USM_CNT_GO_UNPAIRED); /* entered before the probes were attached */
		return 0;
	}
	call = *r;
	tlm_map_delete(usm_go_reads, &key);
	if (n > 0)
		usm_tls_emit(TLM_ARG, call.conn, call.buf, (__u64)n, USM_SRC_GO, USM_DIR_READ, now,
			     pid_tgid);
	return 0;
}

/* Every Go probe, by the function its attachment's cookie names (enum usm_go_fn). */
static __always_inline int usm_go_probe(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid, __u64 now,
					__u64 fn)
{
	switch (fn) {
	case USM_GO_WRITE:
		return usm_go_write_body(TLM_ARG, regs, pid_tgid, now);
	case USM_GO_READ:
		return usm_go_read_enter_body(TLM_ARG, regs, pid_tgid);
	case USM_GO_READ_RET:
		return usm_go_read_ret_body(TLM_ARG, regs, pid_tgid, now);
	default:
		return 0; /* a cookie we did not set */
	}
}

#endif /* BPFTEL_LIB_USM_GO_H */
