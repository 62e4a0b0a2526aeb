/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Typed tail reads (x86-64): where a read's entry and return probes go when its
 * function only checks its session and hands the read to an internal function.
 *
 * GnuTLS 3.7's gnutls_record_recv(session, data, size) starts with `sub $8,%rsp`,
 * which the kernel single-steps (~10 us a trap on these VMs: prologue.h), and ends in
 * `jmp _gnutls_recv_int` with (session, 23, data, size, NULL, timeout): 23 is
 * GNUTLS_APPLICATION_DATA, the record type asked for. With kTLS on it calls
 * _gnutls_ktls_recv_int(session, 23, data, size) instead and returns what that
 * returns. _gnutls_recv_int starts with `push %r15`, which the kernel emulates; both
 * internal functions return the bytes read, as gnutls_record_recv does. Probes on
 * their entries (and returns), keeping only calls of type 23, see every read
 * gnutls_record_recv makes at one trap each, and gnutls_record_recv_seq's too (it
 * jumps to the same place). The internal functions are not exported: they are found
 * as the targets of gnutls_record_recv's own calls.
 *
 * bpftel_tail_reads() proves that from the function's code, decoded with capstone
 * along every path from its entry: each register is followed as the function's first
 * argument (the session), its second (the data pointer), a small constant, or
 * unknown; and the stack pointer's depth from the entry's, through pushes, pops and
 * constant adds and subs. A call or a jump out of the function with the session in
 * rdi, the type in esi and the data pointer in rdx is a typed read, and its target is
 * returned: a jump only at the entry's depth, where the return address is on top as
 * its uretprobe needs (refused elsewhere, or where the depth is not followed). It
 * refuses (-1) when the data pointer could reach the caller's data any other way:
 * stored to memory, written through, or in a register at any other call or jump out;
 * and when the code has an indirect branch, an instruction capstone cannot decode,
 * or a path that leaves the bytes given. Targets are offsets from code[0].
 */
#ifndef BPFTEL_MANAGER_TAILREAD_H
#define BPFTEL_MANAGER_TAILREAD_H

#include <stddef.h>

/* Bytes of a function decoded (its paths must stay within them). */
#define BPFTEL_TAIL_SCAN_MAX 256
#define BPFTEL_TAIL_READS_MAX 4

/* The distinct targets of the function's typed reads of record type `type`, at most
 * max, in targets[]: their number (0: none), or -1 (refused, see above). */
int bpftel_tail_reads(const unsigned char *code, size_t n, unsigned int type, long *targets,
		      size_t max);

#endif /* BPFTEL_MANAGER_TAILREAD_H */
