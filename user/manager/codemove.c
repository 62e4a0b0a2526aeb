// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Probes moved by a function's code, inside its executable segment (codemove.h). */
#include <unistd.h>

#include "codemove.h"
#include "prologue.h"
#include "tailread.h"

/* Up to want bytes of the segment [lo, hi) from at: the count read, 0 if none. */
static size_t read_code(int fd, unsigned char *buf, size_t want, long at, long lo, long hi)
{
	ssize_t n;

	if (at < lo || at >= hi)
		return 0;
	if ((unsigned long)(hi - at) < want)
		want = (size_t)(hi - at);
	n = pread(fd, buf, want, at);
	return n > 0 ? (size_t)n : 0;
}

long bpftel_shared_callee_fd(int fd, long off, long other, long lo, long hi)
{
	unsigned char code[BPFTEL_CALL_SCAN_MAX];
	long callee;
	size_t n;

	n = read_code(fd, code, BPFTEL_PROLOGUE_MAX, off, lo, hi);
	if (!n || !bpftel_prologue_callee(code, n, 4, &callee))
		return -1;
	callee += off;
	n = read_code(fd, code, 16, callee, lo, hi);
	if (!n || !bpftel_insn_emulated(code, n))
		return -1;
	n = read_code(fd, code, sizeof(code), other, lo, hi);
	if (!n || !bpftel_code_calls(code, n, callee - other))
		return -1;
	return callee;
}

int bpftel_tail_reads_fd(int fd, long at, long lo, long hi, unsigned int type, long *targets,
			 size_t max, bool *pays)
{
	unsigned char code[BPFTEL_TAIL_SCAN_MAX];
	size_t n = read_code(fd, code, sizeof(code), at, lo, hi);
	int nt = n ? bpftel_tail_reads(code, n, type, targets, max) : -1;
	int k;

	*pays = false;
	for (k = 0; k < nt; k++) {
		targets[k] += at;
		n = read_code(fd, code, 16, targets[k], lo, hi);
		if (!n)
			return -1;
		*pays |= bpftel_insn_emulated(code, n);
	}
	return nt;
}
