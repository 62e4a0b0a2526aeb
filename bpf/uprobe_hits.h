/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Calls per library file, counted by the uprobe programs the registry attaches
 * (user/sharedlibs/uprobes.h), so that the self-overhead budget knows which file of a
 * module is hot: run counts are per program, and a program runs for every file. An
 * attachment's cookie carries the slot of its (file, kind) in the module's
 * `uprobe_hits` array in its high 32 bits, and what the program does (the function)
 * in its low 32 bits. The kinds: returns, entries on an instruction the kernel
 * emulates, entries on one it single-steps (a trap costs more there: what a program
 * with both kinds costs is weighted by these counts). Slot 0 counts nothing: a cookie
 * without a slot (test harnesses, or a module whose object has no such map).
 *
 * Shared by BPF (bpf/lib/file_hits.h) and userspace.
 */
#ifndef BPFTEL_UPROBE_HITS_H
#define BPFTEL_UPROBE_HITS_H

#define UPROBE_HITS_FILES 1024 /* the registry's files (MAX_FILES) */
#define UPROBE_HITS_KINDS 3
#define UPROBE_HITS_SLOTS (UPROBE_HITS_KINDS * (UPROBE_HITS_FILES + 1))

enum uprobe_hit_kind {
	UPROBE_HIT_ENTRY = 0,	/* an entry probe on an instruction the kernel emulates */
	UPROBE_HIT_RETURN = 1,	/* a return probe */
	UPROBE_HIT_STEPPED = 2, /* an entry probe on an instruction it single-steps */
};

/* The slot of a file's probes of one kind. */
#define UPROBE_HITS_SLOT(file, kind) (UPROBE_HITS_KINDS * (1 + (file)) + (kind))
#define UPROBE_HITS_COOKIE(slot, what) (((__u64)(slot) << 32) | (__u32)(what))

/*
 * In the low half, with the function: this probe sits on the JBE of a Go function's
 * stack check (user/manager/goret.c), not on its entry. The compare before it left
 * its flags in EFLAGS: below or equal (CF or ZF set) means the branch to grow the
 * stack is taken and the function restarts from its entry, to pass here again.
 */
#define UPROBE_GO_STACK_CHECK (1u << 31)

/*
 * In the low half, with a read function: this probe sits on an internal read that the
 * function hands its reads to (user/manager/tailread.h: GnuTLS's _gnutls_recv_int),
 * whose first four arguments are (session, record type, data, size). Other callers
 * reach it too, with other record types: the program keeps the type it reads.
 */
#define UPROBE_TYPED_READ (1u << 30)

#endif /* BPFTEL_UPROBE_HITS_H */
