// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* A read function's typed tail reads, proved from its code (tailread.h says why). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <capstone/capstone.h>

#include "tailread.h"

/* What a register holds, as far as every path to here agrees. */
enum {
	V_UNKNOWN = 0,
	V_SESSION = 1,	  /* the function's first argument, untouched */
	V_DATA = 2,	  /* its second: the caller's buffer */
	V_MAYBE_DATA = 3, /* the buffer, or derived from it, on some path */
	V_IMM = 0x10000,  /* | a constant below 0x10000 */
};

/* General-purpose registers by hardware number: rax 0, rcx 1, rdx 2, rbx 3, rsp 4,
 * rbp 5, rsi 6, rdi 7, r8..r15. */
#define NGPR 16
#define GPR_RDX 2
#define GPR_RSP 4
#define GPR_RSI 6
#define GPR_RDI 7

struct regs {
	uint32_t v[NGPR];
	/* The stack pointer against the entry's (bytes, <= 0 once anything is pushed), known
	 * while every path agrees and every write of rsp is a push, a pop or an add or sub
	 * of a constant. A jump out is an entry of its target only at depth 0: there the
	 * return address is on top, as a uretprobe needs it; elsewhere a uretprobe would
	 * overwrite the caller's saved registers. */
	int32_t sp;
	bool sp_lost;
	bool seen;
};

/* The register a capstone name is part of, and its width in bytes; -1 if none. */
static int gpr_of(unsigned int r, int *width)
{
	static const struct {
		unsigned int q, d, w, b, h;
	} map[NGPR] = {
		{X86_REG_RAX, X86_REG_EAX, X86_REG_AX, X86_REG_AL, X86_REG_AH},
		{X86_REG_RCX, X86_REG_ECX, X86_REG_CX, X86_REG_CL, X86_REG_CH},
		{X86_REG_RDX, X86_REG_EDX, X86_REG_DX, X86_REG_DL, X86_REG_DH},
		{X86_REG_RBX, X86_REG_EBX, X86_REG_BX, X86_REG_BL, X86_REG_BH},
		{X86_REG_RSP, X86_REG_ESP, X86_REG_SP, X86_REG_SPL, X86_REG_INVALID},
		{X86_REG_RBP, X86_REG_EBP, X86_REG_BP, X86_REG_BPL, X86_REG_INVALID},
		{X86_REG_RSI, X86_REG_ESI, X86_REG_SI, X86_REG_SIL, X86_REG_INVALID},
		{X86_REG_RDI, X86_REG_EDI, X86_REG_DI, X86_REG_DIL, X86_REG_INVALID},
		{X86_REG_R8, X86_REG_R8D, X86_REG_R8W, X86_REG_R8B, X86_REG_INVALID},
		{X86_REG_R9, X86_REG_R9D, X86_REG_R9W, X86_REG_R9B, X86_REG_INVALID},
		{X86_REG_R10, X86_REG_R10D, X86_REG_R10W, X86_REG_R10B, X86_REG_INVALID},
		{X86_REG_R11, X86_REG_R11D, X86_REG_R11W, X86_REG_R11B, X86_REG_INVALID},
		{X86_REG_R12, X86_REG_R12D, X86_REG_R12W, X86_REG_R12B, X86_REG_INVALID},
		{X86_REG_R13, X86_REG_R13D, X86_REG_R13W, X86_REG_R13B, X86_REG_INVALID},
		{X86_REG_R14, X86_REG_R14D, X86_REG_R14W, X86_REG_R14B, X86_REG_INVALID},
		{X86_REG_R15, X86_REG_R15D, X86_REG_R15W, X86_REG_R15B, X86_REG_INVALID},
	};
	int i;

	if (r == X86_REG_INVALID)
		return -1;
	for (i = 0; i < NGPR; i++) {
		*width = r == map[i].q ? 8 : r == map[i].d ? 4 : r == map[i].w ? 2 : 1;
		if (r == map[i].q || r == map[i].d || r == map[i].w || r == map[i].b ||
		    r == map[i].h)
			return i;
	}
	return -1;
}

static bool is_data(uint32_t v)
{
	return v == V_DATA || v == V_MAYBE_DATA;
}

static uint32_t join(uint32_t a, uint32_t b)
{
	if (a == b)
		return a;
	return is_data(a) || is_data(b) ? V_MAYBE_DATA : V_UNKNOWN;
}

/* Merge st into *at; true if that changed it (the instruction is to be walked again). */
static bool merge(struct regs *at, const struct regs *st)
{
	bool changed = !at->seen;
	uint32_t v;
	int i;

	if (!at->seen) {
		*at = *st;
		at->seen = true;
		return true;
	}
	for (i = 0; i < NGPR; i++) {
		v = join(at->v[i], st->v[i]);
		changed |= v != at->v[i];
		at->v[i] = v;
	}
	if (!at->sp_lost && (st->sp_lost || st->sp != at->sp)) {
		at->sp_lost = true;
		changed = true;
	}
	return changed;
}

/* Does any of the first nregs registers of the list (or every one, list NULL) hold
 * the data pointer? */
static bool data_in(const struct regs *st, const int *list, int nregs)
{
	int i;

	for (i = 0; i < (list ? nregs : NGPR); i++) {
		if ((list ? list[i] : i) != GPR_RSP && is_data(st->v[list ? list[i] : i]))
			return true;
	}
	return false;
}

/* Registers read by insn (operands and implicit), as GPR numbers; -1 if capstone
 * cannot tell. */
static int regs_read(csh cs, const cs_insn *insn, int *out)
{
	cs_regs rd, wr;
	uint8_t nrd = 0, nwr = 0, i;
	int n = 0, w, g;

	if (cs_regs_access(cs, insn, rd, &nrd, wr, &nwr) != CS_ERR_OK)
		return -1;
	for (i = 0; i < nrd; i++) {
		g = gpr_of(rd[i], &w);
		if (g >= 0)
			out[n++] = g;
	}
	return n;
}

/*
 * How insn moves rsp, decided by what the instruction is (capstone does not list rsp
 * among what some of them write: a push of a segment register, enter): *d, and true;
 * false when it moves rsp in a way not followed (enter, leave, a pop into rsp, a push
 * or pop of a segment register, any other write of rsp than an add or sub of a
 * constant). writes_rsp: capstone lists rsp among the registers insn writes.
 */
static bool sp_delta(const cs_insn *insn, bool writes_rsp, int64_t *d)
{
	const cs_x86 *x = &insn->detail->x86;
	const cs_x86_op *op = x->operands;
	int g, w = 0;

	*d = 0;
	switch (insn->id) {
	case X86_INS_PUSH:
	case X86_INS_POP:
		/* 0x66 with REX.W: 8 bytes move, whatever capstone says the operand is */
		if (x->op_count != 1 || (x->prefix[2] == 0x66 && (x->rex & 8)))
			return false;
		if (op[0].type == X86_OP_REG) {
			g = gpr_of(op[0].reg, &w);
			if (g < 0 || (insn->id == X86_INS_POP && g == GPR_RSP))
				return false;
		} else if (op[0].type == X86_OP_IMM) {
			w = x->prefix[2] == 0x66 ? 2 : 8; /* pushw: the operand-size override */
		} else {
			w = op[0].size;
		}
		if (w != 8 && w != 2)
			return false;
		*d = insn->id == X86_INS_PUSH ? -w : w;
		return true;
	case X86_INS_PUSHFQ:
		*d = -8;
		return true;
	case X86_INS_POPFQ:
		*d = 8;
		return true;
	case X86_INS_SUB:
	case X86_INS_ADD:
		if (!writes_rsp)
			return true;
		if (x->op_count != 2 || op[0].type != X86_OP_REG || op[0].reg != X86_REG_RSP ||
		    op[1].type != X86_OP_IMM || op[1].imm <= -0x100000 || op[1].imm >= 0x100000)
			return false;
		*d = insn->id == X86_INS_ADD ? op[1].imm : -op[1].imm;
		return true;
	case X86_INS_ENTER:
	case X86_INS_LEAVE:
	case X86_INS_PUSHF:
	case X86_INS_POPF:
		return false;
	default:
		return !writes_rsp;
	}
}

/* rsp after insn (sp_delta()), or lost. */
static void step_sp(const cs_insn *insn, bool writes_rsp, struct regs *st)
{
	int64_t d;

	if (!sp_delta(insn, writes_rsp, &d) || st->sp + d < -0x1000000 || st->sp + d > 0x1000000)
		st->sp_lost = true;
	else
		st->sp += (int32_t)d;
}

/* The registers insn writes get their new values in st. Returns false to refuse: the
 * instruction reads the data pointer other than to copy it, derive from it or test it. */
static bool step(csh cs, const cs_insn *insn, struct regs *st)
{
	const cs_x86 *x = &insn->detail->x86;
	const cs_x86_op *op = x->operands;
	cs_regs rd, wr;
	uint8_t nrd = 0, nwr = 0, i;
	int dst, src, w, ws, reads[64], nreads;
	bool reads_data;

	nreads = regs_read(cs, insn, reads);
	if (nreads < 0 || cs_regs_access(cs, insn, rd, &nrd, wr, &nwr) != CS_ERR_OK)
		return false;
	reads_data = data_in(st, reads, nreads);
	for (i = 0; i < nwr && gpr_of(wr[i], &w) != GPR_RSP; i++)
		;
	step_sp(insn, i < nwr, st);

	/* mov %r64,%r64: a copy */
	if (insn->id == X86_INS_MOV && x->op_count == 2 && op[0].type == X86_OP_REG &&
	    op[1].type == X86_OP_REG) {
		dst = gpr_of(op[0].reg, &w);
		src = gpr_of(op[1].reg, &ws);
		if (dst >= 0 && src >= 0 && w == 8 && ws == 8) {
			st->v[dst] = st->v[src];
			return true;
		}
	}
	/* mov $imm,%r32 or %r64 (a 32-bit write zero-extends) */
	if (insn->id == X86_INS_MOV && x->op_count == 2 && op[0].type == X86_OP_REG &&
	    op[1].type == X86_OP_IMM) {
		dst = gpr_of(op[0].reg, &w);
		if (dst >= 0 && w >= 4) {
			st->v[dst] = op[1].imm >= 0 && op[1].imm < 0x10000
					     ? V_IMM | (uint32_t)op[1].imm
					     : V_UNKNOWN;
			return true;
		}
	}
	/* xor %r32,%r32: zero */
	if (insn->id == X86_INS_XOR && x->op_count == 2 && op[0].type == X86_OP_REG &&
	    op[1].type == X86_OP_REG && op[0].reg == op[1].reg) {
		dst = gpr_of(op[0].reg, &w);
		if (dst >= 0 && w >= 4) {
			st->v[dst] = V_IMM;
			return true;
		}
	}
	if (reads_data) {
		/* lea off(%data),%r64: a pointer into the buffer */
		if (insn->id == X86_INS_LEA && op[0].type == X86_OP_REG) {
			dst = gpr_of(op[0].reg, &w);
			if (dst < 0)
				return false;
			st->v[dst] = V_MAYBE_DATA;
			return true;
		}
		/* test or cmp of registers: flags only */
		if ((insn->id != X86_INS_TEST && insn->id != X86_INS_CMP) ||
		    op[0].type == X86_OP_MEM || op[1].type == X86_OP_MEM)
			return false;
	}
	for (i = 0; i < nwr; i++) {
		dst = gpr_of(wr[i], &w);
		if (dst >= 0 && dst != GPR_RSP)
			st->v[dst] = V_UNKNOWN;
	}
	return true;
}

/* A call or jump out with (session, type, data) in (rdi, esi, rdx)? */
static bool typed(const struct regs *st, unsigned int type)
{
	return st->v[GPR_RDI] == V_SESSION && st->v[GPR_RSI] == (V_IMM | type) &&
	       st->v[GPR_RDX] == V_DATA;
}

static int add_target(long t, long *targets, size_t max, size_t *nt)
{
	size_t i;

	for (i = 0; i < *nt; i++) {
		if (targets[i] == t)
			return 0;
	}
	if (*nt == max)
		return -1;
	targets[(*nt)++] = t;
	return 0;
}

/* Leaving the function at t (a jump out, taken or not): a typed read, or nothing that
 * holds the data pointer. A typed read jumped to with anything still on the stack is
 * not an entry of its target (struct regs): refused. */
static int leave(const struct regs *st, unsigned int type, long t, long *targets, size_t max,
		 size_t *nt)
{
	if (typed(st, type))
		return st->sp_lost || st->sp ? -1 : add_target(t, targets, max, nt);
	return data_in(st, NULL, 0) ? -1 : 0;
}

struct walk {
	const unsigned char *code;
	size_t n;
	unsigned int type;
	struct regs *at; /* per byte offset: the registers on entry to the instruction there */
	size_t *todo, ntodo;
	bool *queued;
	long *targets;
	size_t max, nt;
};

static void queue(struct walk *w, size_t off, const struct regs *st)
{
	if (merge(&w->at[off], st) && !w->queued[off]) {
		w->queued[off] = true;
		w->todo[w->ntodo++] = off;
	}
}

/* Walk the instruction at off with its registers; queue its successors. */
static int visit(csh cs, cs_insn *insn, struct walk *w, size_t off)
{
	static const int call_args[] = {GPR_RDI, GPR_RSI, GPR_RDX, 1, 8, 9};
	static const int clobbered[] = {0, 1, 2, 6, 7, 8, 9, 10, 11};
	const uint8_t *p = w->code + off;
	size_t left = w->n - off, next, i;
	uint64_t addr = off;
	struct regs st = w->at[off];
	const cs_x86 *x;
	long t;

	if (!cs_disasm_iter(cs, &p, &left, &addr, insn))
		return -1; /* undecodable, or cut off by the end of the bytes */
	x = &insn->detail->x86;
	next = off + insn->size;
	if (insn->id == X86_INS_RET || insn->id == X86_INS_UD2 || insn->id == X86_INS_INT3 ||
	    insn->id == X86_INS_HLT)
		return 0;
	if (insn->id == X86_INS_CALL || cs_insn_group(cs, insn, X86_GRP_JUMP)) {
		if (x->op_count != 1 || x->operands[0].type != X86_OP_IMM)
			return -1; /* indirect: where it goes is not known */
		t = (long)x->operands[0].imm;
		if (insn->id == X86_INS_CALL) {
			if (typed(&st, w->type)) {
				if (add_target(t, w->targets, w->max, &w->nt))
					return -1;
			} else if (data_in(&st, call_args, 6)) {
				return -1;
			}
			for (i = 0; i < sizeof(clobbered) / sizeof(clobbered[0]); i++)
				st.v[clobbered[i]] = V_UNKNOWN;
		} else if (t >= 0 && (size_t)t < w->n) {
			queue(w, (size_t)t, &st);
		} else if (leave(&st, w->type, t, w->targets, w->max, &w->nt)) {
			return -1;
		}
		if (insn->id == X86_INS_JMP)
			return 0;
	} else if (cs_insn_group(cs, insn, X86_GRP_INT) || cs_insn_group(cs, insn, X86_GRP_IRET) ||
		   cs_insn_group(cs, insn, X86_GRP_RET) || cs_insn_group(cs, insn, X86_GRP_CALL) ||
		   insn->id == X86_INS_SYSCALL || insn->id == X86_INS_SYSENTER) {
		return -1;
	} else if (!step(cs, insn, &st)) {
		return -1;
	}
	if (next >= w->n)
		return -1; /* falls off the bytes given */
	queue(w, next, &st);
	return 0;
}

int bpftel_tail_reads(const unsigned char *code, size_t n, unsigned int type, long *targets,
		      size_t max)
{
	struct walk w = {.code = code, .n = n, .type = type, .targets = targets, .max = max};
	struct regs start = {.seen = true};
	size_t steps = 0, off;
	cs_insn *insn = NULL;
	int ret = -1;
	csh cs;

	if (n > BPFTEL_TAIL_SCAN_MAX)
		w.n = n = BPFTEL_TAIL_SCAN_MAX;
	if (!n || type >= 0x10000 || cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return -1;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	w.at = calloc(n, sizeof(*w.at));
	w.todo = calloc(n, sizeof(*w.todo));
	w.queued = calloc(n, sizeof(*w.queued));
	insn = cs_malloc(cs);
	if (!w.at || !w.todo || !w.queued || !insn)
		goto out;
	start.v[GPR_RDI] = V_SESSION;
	start.v[GPR_RSI] = V_DATA;
	queue(&w, 0, &start);
	/* Each register's value only widens (to "maybe the data", then unknown): a
	 * bounded number of walks per instruction. */
	while (w.ntodo) {
		off = w.todo[--w.ntodo];
		w.queued[off] = false;
		if (++steps > 64 * n || visit(cs, insn, &w, off))
			goto out;
	}
	ret = (int)w.nt;
out:
	if (insn)
		cs_free(insn, 1);
	cs_close(&cs);
	free(w.at);
	free(w.todo);
	free(w.queued);
	return ret;
}
