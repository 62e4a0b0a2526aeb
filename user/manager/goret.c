// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The RET instructions of a function, for return probes on Go code (goexe.h says why
 * not uretprobes). Scanning for the byte 0xc3 would find it inside immediates,
 * displacements and ModRM bytes (`mov $0xc3,%eax` is b8 c3 00 00 00); the function
 * has to be decoded instruction by instruction from its entry. capstone (Debian's
 * libcapstone-dev) decodes the whole x86-64 set, AVX-512 included, which Go's runtime
 * and crypto assembly use; zydis would do as well, but capstone is the one packaged
 * with pkg-config on every Debian and Ubuntu release we target, and bcc and bpftrace's
 * users already have it.
 *
 * Go does not put data in the text between instructions (jump tables live in rodata),
 * so the decode is linear. An instruction capstone cannot decode ends the scan with
 * -EILSEQ: a missed RET would leave a probed call never seen to return.
 *
 * The same pass finds where a function's body begins. A Go function with a frame
 * starts with its stack check: compare the stack pointer (or below it, in r12) with
 * g.stackguard0 (0x10(%r14), the goroutine in r14) and JBE to a tail that grows the
 * stack (runtime.morestack) and jumps back to the entry. A probe on the entry fires
 * again after every growth, and fresh goroutines grow their stacks often: the same
 * Write would be seen twice. The probe goes on the JBE itself: a branch, which the
 * kernel emulates (one trap, not a trap and a single-step), with the arguments still
 * in their registers (the check only uses r12), and the compare's flags in EFLAGS
 * saying whether the function runs now (the branch not taken) or restarts after
 * growing its stack (taken: the probe program ignores that pass).
 */
#include <errno.h>
#include <stdbool.h>
#include <capstone/capstone.h>

#include "user/manager/goexe.h"

/* The stack check's prologue is at most this many instructions: lea, cmp, jbe. */
#define STACK_CHECK_INSNS 3
#define G_STACKGUARD0	  0x10

/* cmp with 0x10(%r14), g.stackguard0, as one operand. */
static bool is_stackguard_cmp(const cs_insn *insn)
{
	const cs_x86 *x = &insn->detail->x86;
	int i;

	if (insn->id != X86_INS_CMP)
		return false;
	for (i = 0; i < x->op_count; i++) {
		const cs_x86_op *op = &x->operands[i];

		if (op->type == X86_OP_MEM && op->mem.base == X86_REG_R14 &&
		    op->mem.index == X86_REG_INVALID && op->mem.disp == G_STACKGUARD0)
			return true;
	}
	return false;
}

int bpftel_go_find_rets(const uint8_t *code, size_t len, long base, long *out, size_t max,
			long *check)
{
	const uint8_t *p = code;
	bool checked = false;
	uint64_t addr = 0;
	size_t left = len;
	unsigned int i = 0;
	cs_insn *insn;
	csh cs;
	int n = 0;

	*check = -1;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return -ENOMEM;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(cs);
	if (!insn) {
		cs_close(&cs);
		return -ENOMEM;
	}
	while (left) {
		if (!cs_disasm_iter(cs, &p, &left, &addr, insn)) {
			n = -EILSEQ;
			break;
		}
		if (i++ < STACK_CHECK_INSNS) {
			if (is_stackguard_cmp(insn))
				checked = true;
			else if (checked && insn->id == X86_INS_JBE)
				*check = base + (long)insn->address;
		}
		if (insn->id != X86_INS_RET)
			continue;
		if ((size_t)n == max) {
			n = -E2BIG;
			break;
		}
		out[n++] = base + (long)insn->address;
	}
	cs_free(insn, 1);
	cs_close(&cs);
	return n;
}
