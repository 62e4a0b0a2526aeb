/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * USM, Go: the bodies of the probes on Go's crypto/tls, (*Conn).Write, (*Conn).Read and
 * (*Conn).Close,
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
 * Entry probes sit on the JBE of the function's stack check (goret.c): emulated by the
 * kernel (one trap, no single-step), and the pass that goes to grow the stack, after
 * which the function restarts from its entry, is told apart by the compare's flags. There are no
 * uretprobes: a uretprobe rewrites the return address on the stack, and Go copies
 * goroutine stacks elsewhere when they grow. Read's returns are plain uprobes on each
 * of its RET instructions.
 *
 * A Read's entry and its return are paired per goroutine, by its g (R14), not per
 * thread: a Read that blocks parks its goroutine, and the goroutine resumes on any
 * thread. The g's address is the goroutine's for its life (a g is reused only after
 * its goroutine exited), so no version-dependent offset (g.goid) is needed; and by
 * how deep in the goroutine's stack it runs (usm_go_depth), for a Read inside a Read.
 *
 * Include after lib/usm_tls.h.
 */
#ifndef BPFTEL_LIB_USM_GO_H
#define BPFTEL_LIB_USM_GO_H

#include "uprobe_hits.h"

/* struct usm_go_read_key, struct usm_go_read: bpf/usm.h (userspace recounts their owners). */

/*
 * How deep in its goroutine's stack a Read runs: the top of the stack (g.stack.hi, at
 * offset 8 of a g in every Go release: g.stack is its first field, {lo, hi}) less RSP.
 * A Read can run inside another Read on the same goroutine: TLS inside TLS, as
 * net/http's Transport does through an https:// proxy, the outer Conn reading its
 * records through the inner one. The goroutine alone would pair the inner Read's
 * return with the outer Read's entry, overwritten. RSP at the stack check (the entry
 * probe, before the frame is made) is RSP at each RET (the frame gone, the return
 * address on top); and when Go moves the stack to grow or shrink it (the GC shrinks
 * the stacks of parked goroutines: a blocked Read's), hi and RSP move together.
 */
struct usm_go_stack {
	__u64 lo, hi; /* g.stack, the first field of a g */
};

static __always_inline __u32 usm_go_depth(TLM_PARAM, struct pt_regs *regs, struct usm_go_stack *st)
{
	if (tlm_probe_read_user(st, sizeof(*st), (void *)regs->r14) || st->hi < regs->sp ||
	    st->hi - regs->sp > 0xffffffffull) {
		st->lo = st->hi = 0; /* not known: no buffer is taken as on the stack */
		return 0;
	}
	return (__u32)(st->hi - regs->sp);
}

/*
 * A Read's buffer on its goroutine's stack ([]byte of a local array that does not
 * escape) moves with the stack: the GC shrinks a parked goroutine's, as it shrinks a
 * blocked Read's. Kept as its distance from the top, which moves with it (as RSP does:
 * usm_go_depth), and found again at the return from the top then. 0: not on the stack
 * (or its bounds not known), the address kept as is. Go stacks are at most 1 GiB.
 */
static __always_inline __u32 usm_go_stack_off(const struct usm_go_stack *st, __u64 buf)
{
	return buf >= st->lo && buf < st->hi && st->hi - buf <= 0xffffffffull ? (__u32)(st->hi - buf)
									     : 0;
}

/* Reads in flight, by goroutine. LRU: a goroutine parked in Read when its process is
 * killed never returns; beyond 16384 reads in flight at once, the oldest lose their
 * return (counted as go_read_unpaired when it comes). Each entry is in the share of its
 * owner (lib/fair_share.h), so that one user's goroutines parked in Read (a server
 * holding thousands of idle connections, or a program made to) cannot push the
 * others' out: past it, a Read is not kept (go_reads_over_share). The count is taken
 * at each Read, not once per session: an owner but root pays two hash lookups at a
 * Read's entry and one at its return, root a call (fair_share_owner) and a compare. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, USM_GO_READS_MAX);
	__type(key, struct usm_go_read_key);
	__type(value, struct usm_go_read);
} usm_go_reads SEC(".maps");

TLM_MAP_KEY(usm_go_reads);

/*
 * Go's net/http server reads one byte in the background while a handler runs
 * (connReader.backgroundRead: is the client still there?). When the client's next
 * request arrives meanwhile, its first byte comes out of that 1-byte Read and the
 * rest out of the next one, which then starts with "ET /". A 1-byte read on a session
 * that is not HTTP/2 is kept here, per Conn, and put back in front of the next read.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct usm_fd_key);
	__type(value, __u8);
} usm_go_byte SEC(".maps");

TLM_MAP_KEY(usm_go_byte);

/* n bytes read at buf after the byte first: if together they start an HTTP/1.x
 * message, emit it (as usm_tls_emit would, one byte longer) and return true. */
static __always_inline bool usm_go_emit_joined(TLM_PARAM, __u64 conn, __u64 buf, __u64 n,
					       __u8 first, __u64 now, __u64 pid_tgid)
{
	char peek[USM_PEEK] = {};
	struct usm_event *ev;
	__s32 fd;
	__u64 m;
	int kind;

	peek[0] = first;
	if (n < USM_PEEK - 1 || tlm_probe_read_user(peek + 1, USM_PEEK - 1, (void *)buf))
		return false;
	kind = usm_classify(peek);
	if (kind < 0)
		return false;
	usm_count(USM_CNT_TLS_CALLS);
	fd = usm_tls_http1_seen(TLM_ARG, conn, pid_tgid, USM_SRC_GO);
	ev = usm_event_reserve(TLM_ARG);
	if (!ev)
		return true;
	m = n < USM_PREFIX - 1 ? n : USM_PREFIX - 1;
	ev->prefix[0] = first;
	if (tlm_probe_read_user(ev->prefix + 1, m, (void *)buf)) {
		usm_event_discard(ev);
		return true;
	}
	usm_tls_event_submit(TLM_ARG, ev, conn, USM_SRC_GO, USM_DIR_READ, now, pid_tgid, kind,
			     n + 1, m + 1, fd);
	return true;
}

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
	struct usm_go_read r = {.conn = regs->ax, .buf = regs->bx}, *stale;
	struct usm_go_stack st;
	__u32 uid;
	long err;

	if (!key.g)
		return 0; /* no goroutine (not Go code) */
	key.depth = usm_go_depth(TLM_ARG, regs, &st);
	r.stack_off = usm_go_stack_off(&st, r.buf);
	if ((__s64)regs->cx <= 0) {
		/* Nothing to read into: Read(nil), for the handshake's sake. A stale entry at
		 * its key (a Read whose return went unseen) goes, or this call's return
		 * would take its buffer for the bytes of another. */
		stale = bpf_map_lookup_elem(&usm_go_reads, &key);
		if (stale) {
			uid = stale->uid; /* the owner whose count it holds */
			if (!tlm_map_take(usm_go_reads, &key))
				fair_share_give(USM_SHARE_GO_READS, uid);
		}
		return 0;
	}
	r.uid = fair_share_owner();
	if (!fair_share_take(TLM_ARG, USM_SHARE_GO_READS, r.uid,
			     usm_share_cap[USM_SHARE_GO_READS])) {
		/* At its share, an entry of the same Read whose return went unseen is
		 * replaced all the same (the table does not grow): left, this Read's return
		 * would read the old one's buffer. It keeps the count its owner took. */
		stale = bpf_map_lookup_elem(&usm_go_reads, &key);
		if (stale) {
			r.uid = stale->uid;
			if (!tlm_map_replace(usm_go_reads, &key, &r))
				return 0;
		}
		usm_count(USM_CNT_GO_READS_OVER_SHARE);
		return 0;
	}
	err = tlm_map_insert(usm_go_reads, &key, &r);
	if (!err)
		return 0;
	/* Such an entry, replaced, holds the count this Read took, and the count it held
	 * goes back to its owner (another, if the process changed its uid since); no
	 * room: none made, this Read's count back. */
	stale = err == -EEXIST ? bpf_map_lookup_elem(&usm_go_reads, &key) : NULL;
	uid = stale ? stale->uid : r.uid;
	if (stale && tlm_map_replace(usm_go_reads, &key, &r))
		uid = r.uid; /* gone meanwhile (the LRU): none holds this Read's count */
	fair_share_give(USM_SHARE_GO_READS, uid);
	return 0;
}

static __always_inline int usm_go_read_ret_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid,
						__u64 now)
{
	struct usm_go_read_key key = {.g = regs->r14, .tgid = pid_tgid >> 32};
	struct usm_fd_key sess = {.tgid = pid_tgid >> 32};
	struct usm_go_read *r, call;
	__s64 n = (__s64)regs->ax;
	struct usm_go_stack st;
	__u8 first, *kept;

	key.depth = usm_go_depth(TLM_ARG, regs, &st);
	r = bpf_map_lookup_elem(&usm_go_reads, &key);
	if (!r) {
		/* Entered before the probes were attached (its bytes unseen), or a Read of
		 * nothing (Read(nil)), which lost nothing. */
		if (n > 0)
			usm_count(USM_CNT_GO_UNPAIRED);
		return 0;
	}
	call = *r;
	if (!tlm_map_take(usm_go_reads, &key))
		fair_share_give(USM_SHARE_GO_READS, call.uid);
	if (call.stack_off && st.hi > call.stack_off)
		call.buf = st.hi - call.stack_off; /* where the stack is now */
	sess.conn = call.conn;
	if (n <= 0) {
		/* Nothing read: EOF, an error, or a deadline passed, which the connection
		 * outlives (net/http's background read ends so at every request). A byte
		 * kept goes, or it could begin the first message of the next connection
		 * given this Conn's address. The session's HTTP/1 mark (lib/usm_h2.h) stays
		 * for Close to take: a mark taken and made again at every request would cost
		 * its map and its owner's share each time, and leave the live session
		 * unmarked in between. */
		if (bpf_map_lookup_elem(&usm_go_byte, &sess))
			tlm_map_take(usm_go_byte, &sess);
		return 0;
	}
	if (n == 1 && !bpf_map_lookup_elem(&usm_h2_conns, &sess)) {
		usm_count(USM_CNT_TLS_CALLS);
		if (!tlm_probe_read_user(&first, 1, (void *)call.buf))
			tlm_map_update(usm_go_byte, &sess, &first, BPF_ANY);
		return 0;
	}
	kept = bpf_map_lookup_elem(&usm_go_byte, &sess);
	if (kept) {
		first = *kept;
		tlm_map_take(usm_go_byte, &sess);
		if (usm_go_emit_joined(TLM_ARG, call.conn, call.buf, (__u64)n, first, now,
				       pid_tgid))
			return 0;
	}
	usm_tls_emit(TLM_ARG, call.conn, call.buf, (__u64)n, USM_SRC_GO, USM_DIR_READ, now,
		     pid_tgid);
	return 0;
}

/* (*Conn).Close(): the connection ends, and what the kernel keeps by its *Conn goes
 * with it (its HTTP/2 place, a kept byte, its mid-way mark), as for OpenSSL's SSL_free:
 * the next Conn allocated at that address is another connection, and a closed one
 * would otherwise hold its LRU entries until newer sessions push out live ones. */
static __always_inline int usm_go_close_body(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid)
{
	struct usm_fd_key key = {.conn = regs->ax, .tgid = pid_tgid >> 32};

	if (!key.conn)
		return 0;
	if (bpf_map_lookup_elem(&usm_go_byte, &key))
		tlm_map_take(usm_go_byte, &key);
	usm_h2_session_end(TLM_ARG, &key, pid_tgid, USM_SRC_GO);
	return 0;
}

#define USM_X86_EFLAGS_CF 0x001
#define USM_X86_EFLAGS_ZF 0x040

/* Every Go probe, by the function its attachment's cookie names (enum usm_go_fn). An
 * entry probe on the stack check's JBE (UPROBE_GO_STACK_CHECK) ignores the pass that
 * goes to grow the stack: the function restarts and passes here again. */
static __always_inline int usm_go_probe(TLM_PARAM, struct pt_regs *regs, __u64 pid_tgid, __u64 now,
					__u64 fn)
{
	if (fn & UPROBE_GO_STACK_CHECK) {
		if (regs->flags & (USM_X86_EFLAGS_CF | USM_X86_EFLAGS_ZF))
			return 0;
		fn &= ~(__u64)UPROBE_GO_STACK_CHECK;
	}
	switch (fn) {
	case USM_GO_WRITE:
		return usm_go_write_body(TLM_ARG, regs, pid_tgid, now);
	case USM_GO_READ:
		return usm_go_read_enter_body(TLM_ARG, regs, pid_tgid);
	case USM_GO_READ_RET:
		return usm_go_read_ret_body(TLM_ARG, regs, pid_tgid, now);
	case USM_GO_CLOSE:
		return usm_go_close_body(TLM_ARG, regs, pid_tgid);
	default:
		return 0; /* a cookie we did not set */
	}
}

#endif /* BPFTEL_LIB_USM_GO_H */
