// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* A function's entry as far as its first branch (prologue.h says why). */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <capstone/capstone.h>

#include "prologue.h"

/* The integer argument registers by ModRM number (REX.B/R adds 8): rdi 7, rsi 6,
 * rdx 2, rcx 1, r8 8, r9 9. */
static const unsigned char arg_reg[6] = {7, 6, 2, 1, 8, 9};

static bool is_arg(unsigned int reg, unsigned int nargs)
{
	unsigned int i;

	for (i = 0; i < nargs && i < 6; i++) {
		if (arg_reg[i] == reg)
			return true;
	}
	return false;
}

/* The emulated branch at c, if it is one: its length, else 0. */
static size_t branch_len(const unsigned char *c, size_t left)
{
	if (left >= 5 && (c[0] == 0xe8 || c[0] == 0xe9)) /* call, jmp rel32 */
		return 5;
	if (left >= 2 && (c[0] == 0xeb || (c[0] >= 0x70 && c[0] <= 0x7f))) /* jmp, jcc rel8 */
		return 2;
	if (left >= 6 && c[0] == 0x0f && c[1] >= 0x80 && c[1] <= 0x8f) /* jcc rel32 */
		return 6;
	return 0;
}

/* The length of an instruction at c that neither branches nor writes an argument
 * register, else 0. */
static size_t harmless_len(const unsigned char *c, size_t left, unsigned int nargs)
{
	static const unsigned char endbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
	static const unsigned char canary[] = {0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0};

	if (left >= sizeof(endbr64) && !memcmp(c, endbr64, sizeof(endbr64)))
		return sizeof(endbr64);
	if (left >= sizeof(canary) && !memcmp(c, canary, sizeof(canary)))
		return sizeof(canary);	  /* mov %fs:0x28,%rax */
	if (c[0] >= 0x50 && c[0] <= 0x57) /* push reg */
		return 1;
	if (left >= 2 && c[0] == 0x41 && c[1] >= 0x50 && c[1] <= 0x57) /* push r8..r15 */
		return 2;
	if (left >= 4 && c[0] == 0x48 && c[1] == 0x83 && c[2] == 0xec) /* sub $imm8,%rsp */
		return 4;
	if (left >= 7 && c[0] == 0x48 && c[1] == 0x81 && c[2] == 0xec) /* sub $imm32,%rsp */
		return 7;
	if (left >= 5 && c[0] == 0x48 && c[1] == 0x89 && c[2] == 0x44 && c[3] == 0x24)
		return 5; /* mov %rax,disp8(%rsp) */
	/* xor %r32,%r32 (31 /r; 45 31 /r for r8d..r15d): zeroes, and so writes, one. */
	if (left >= 2 && c[0] == 0x31 && (c[1] & 0xc0) == 0xc0 && ((c[1] >> 3) & 7) == (c[1] & 7))
		return is_arg(c[1] & 7, nargs) ? 0 : 2;
	if (left >= 3 && c[0] == 0x45 && c[1] == 0x31 && (c[2] & 0xc0) == 0xc0 &&
	    ((c[2] >> 3) & 7) == (c[2] & 7))
		return is_arg(8 + (c[2] & 7), nargs) ? 0 : 3;
	/* test %r32,%r32 (85 /r) or %r64 (48 85 /r): flags only. */
	if (left >= 2 && c[0] == 0x85 && (c[1] & 0xc0) == 0xc0)
		return 2;
	if (left >= 3 && c[0] == 0x48 && c[1] == 0x85 && (c[2] & 0xc0) == 0xc0)
		return 3;
	return 0;
}

size_t bpftel_prologue_skip(const unsigned char *code, size_t n, unsigned int nargs)
{
	size_t at = 0, len;

	if (n > BPFTEL_PROLOGUE_MAX)
		n = BPFTEL_PROLOGUE_MAX;
	while (at < n) {
		if (branch_len(code + at, n - at))
			return at;
		len = harmless_len(code + at, n - at, nargs);
		if (!len)
			return 0;
		at += len;
	}
	return 0;
}

bool bpftel_prologue_callee(const unsigned char *code, size_t n, unsigned int nargs,
			    long *callee)
{
	size_t at = bpftel_prologue_skip(code, n, nargs);
	int32_t rel;

	if (n < at + 5 || code[at] != 0xe8)
		return false;
	memcpy(&rel, code + at + 1, sizeof(rel)); /* x86-64: little-endian */
	*callee = (long)at + 5 + rel;
	return true;
}

bool bpftel_code_calls(const unsigned char *code, size_t n, long target)
{
	const uint8_t *p = code;
	uint64_t addr = 0;
	bool found = false;
	cs_insn *insn;
	csh cs;

	if (n > BPFTEL_CALL_SCAN_MAX)
		n = BPFTEL_CALL_SCAN_MAX;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return false;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(cs);
	/* Stops at the first instruction it cannot decode: what follows is not known. */
	while (insn && !found && cs_disasm_iter(cs, &p, &n, &addr, insn)) {
		const cs_x86 *x = &insn->detail->x86;

		found = insn->id == X86_INS_CALL && x->op_count == 1 &&
			x->operands[0].type == X86_OP_IMM && x->operands[0].imm == target;
	}
	if (insn)
		cs_free(insn, 1);
	cs_close(&cs);
	return found;
}

bool bpftel_insn_emulated(const unsigned char *code, size_t n)
{
	if (n >= 1 && code[0] >= 0x50 && code[0] <= 0x57) /* push reg */
		return true;
	if (n >= 2 && code[0] == 0x41 && code[1] >= 0x50 && code[1] <= 0x57) /* push r8..r15 */
		return true;
	return branch_len(code, n) != 0;
}
