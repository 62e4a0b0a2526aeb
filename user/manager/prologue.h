/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Where to put an entry uprobe so that it costs one trap, not two (x86-64).
 *
 * A uprobe replaces an instruction with int3. On the trap the kernel runs the BPF
 * programs and then must execute the instruction it replaced: a branch (call, jmp,
 * jcc) it emulates, anything else it single-steps out of line, a second exception.
 * On these VMs that second exception is most of a uprobe's price: an empty uprobe on
 * SSL_write_ex (first instruction `sub $8,%rsp`) costs ~12 us per call, the same on
 * its `call` 4 bytes further ~0.5 us (BENCHMARKS.md, tls_write_loop).
 *
 * bpftel_prologue_skip() walks a function's first bytes through the few instructions
 * compilers put first that touch no argument register and do not branch (endbr64,
 * stack adjustment, push, the stack protector's load and store, zeroing a scratch
 * register, test), and returns the offset of the first emulated branch reached that
 * way: there every call still passes, once, with its first nargs integer arguments
 * (rdi, rsi, rdx, rcx, r8, r9) as the caller set them. 0 when it meets anything else
 * first: the function entry, single-stepped as before.
 *
 * Only for programs that read arguments at entry: a return probe must sit on the
 * entry itself, where the return address is on top of the stack. And only where
 * nothing jumps back to that branch from inside the function (a loop whose head is
 * the prologue's first branch would be seen once per iteration): the functions bpftel
 * asks for are checked in tests/unit/test_prologue.c against the real libraries' code.
 */
#ifndef BPFTEL_MANAGER_PROLOGUE_H
#define BPFTEL_MANAGER_PROLOGUE_H

#include <stdbool.h>
#include <stddef.h>

/* Bytes read from a function's start; a prologue longer than this is not skipped. */
#define BPFTEL_PROLOGUE_MAX 32
/* Bytes of a function searched for a call (bpftel_code_calls). */
#define BPFTEL_CALL_SCAN_MAX 256

size_t bpftel_prologue_skip(const unsigned char *code, size_t n, unsigned int nargs);

/*
 * Return probes. A return probe needs the return address on top of the stack, so it
 * sits on a function's entry, and the entry of a read (OpenSSL's SSL_read_ex starts
 * with `sub $8,%rsp`) is single-stepped. But a wrapper like SSL_read_ex is a prologue
 * and a call: its callee (ssl_read_internal) is entered with the same arguments and
 * the wrapper returns what it returns (clamped at 0), and that callee starts with
 * `push %r13`, which the kernel emulates. Both probes go there: one trap on entry, and
 * the return's own cheap exit. These three find such a callee; the caller decides
 * when the move is safe (user/sharedlibs/uprobe_attach.c: only where SSL_read calls
 * it too, so it is the one read both public functions funnel into).
 */

/* The callee of a function's first branch, when that branch is a direct call reached
 * through a prologue that keeps the first nargs arguments: true, and its offset from
 * code[0] in *callee (negative: before it). */
bool bpftel_prologue_callee(const unsigned char *code, size_t n, unsigned int nargs,
			    long *callee);
/* Does code[0..n), decoded from its first instruction (capstone), make a direct call
 * to target (an offset from code[0])? */
bool bpftel_code_calls(const unsigned char *code, size_t n, long target);
/* Does the kernel emulate the instruction at code (a push of a register, a direct
 * branch), so that a uprobe there costs one trap and no single-step? */
bool bpftel_insn_emulated(const unsigned char *code, size_t n);

#endif /* BPFTEL_MANAGER_PROLOGUE_H */
