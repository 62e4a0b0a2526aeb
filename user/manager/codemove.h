/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Probes moved by what a function's code says (prologue.h: a shared callee;
 * tailread.h: typed tail reads), read from the file someone else may have crafted.
 *
 * A call's or jump's displacement is between addresses. A probe is placed by file
 * offset, and a file offset moves as the address does only inside one loadable
 * segment (the same p_vaddr - p_offset): a library with code in two segments (a
 * post-link optimizer's, or a crafted one) would put a displacement's file offset in
 * some other function. So every function read and every place moved to must lie in
 * the executable segment that holds the symbol, [lo, hi) in the file (elfsym.h's
 * code_lo, code_hi), and the code is read only up to its end. An empty segment moves
 * nothing.
 *
 * API:
 *
 *	long bpftel_shared_callee_fd(int fd, long off, long other, long lo, long hi);
 *		The file offset of the callee that the function at off reaches through a
 *		prologue and a call (bpftel_prologue_callee(), 4 arguments kept), when it
 *		starts with an instruction the kernel emulates and the function at other
 *		calls it too (bpftel_code_calls()); -1 otherwise.
 *
 *	int bpftel_tail_reads_fd(int fd, long at, long lo, long hi, unsigned int type,
 *				 long *targets, size_t max, bool *pays);
 *		bpftel_tail_reads() of the function at at, its targets as file offsets; -1
 *		when refused or when one lies outside [lo, hi). *pays: one of them starts
 *		with an emulated instruction.
 */
#ifndef BPFTEL_MANAGER_CODEMOVE_H
#define BPFTEL_MANAGER_CODEMOVE_H

#include <stdbool.h>
#include <stddef.h>

long bpftel_shared_callee_fd(int fd, long off, long other, long lo, long hi);
int bpftel_tail_reads_fd(int fd, long at, long lo, long hi, unsigned int type, long *targets,
			 size_t max, bool *pays);

#endif /* BPFTEL_MANAGER_CODEMOVE_H */
