/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Go executables: what a uprobe on a Go function needs to know, read from the file.
 *
 * Go programs carry their own TLS (crypto/tls) and runtime, and two things make them
 * unlike C libraries for uprobes:
 *
 *  - Symbols. A stripped Go binary (-ldflags=-s -w) has no .symtab, but every Go
 *    binary keeps .gopclntab, the runtime's own function table (the runtime needs it
 *    for stack traces and the garbage collector). Functions are found there, stripped
 *    or not: one code path, and the symbol table is not needed.
 *  - Returns. Goroutine stacks move (they are copied when they grow), so a uretprobe,
 *    which overwrites the return address on the stack, would corrupt a moved stack.
 *    A function's returns are probed instead with plain uprobes on each of its RET
 *    instructions, found by disassembling it (goret.c, with capstone).
 *
 * Versions. Go >= 1.17 on x86-64 passes arguments in registers (the register ABI:
 * RAX, RBX, RCX, RDI, RSI, R8-R11; the current goroutine in R14), which is what the
 * probes read; older Go passes them on the stack and is refused. The pclntab layouts
 * of Go 1.16-1.17 (magic 0xfffffffa), 1.18-1.19 (0xfffffff0) and 1.20 and later
 * (0xfffffff1) are read; anything else is refused with its magic.
 *
 * Everything here reads a file someone else may have crafted: every offset is checked
 * against the bytes read, tables are read under caps, nothing is trusted to end.
 */
#ifndef BPFTEL_MANAGER_GOEXE_H
#define BPFTEL_MANAGER_GOEXE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* .gopclntab is read whole: ~1/4 of a big Go binary (kubelet's is ~30 MiB). */
#define BPFTEL_GO_MAX_PCLNTAB (64ULL << 20)
/* A function longer than this is not disassembled (crypto/tls's are ~1-2 KiB). */
#define BPFTEL_GO_MAX_FUNC_BYTES (64U << 10)
/* RET instructions probed per function; more is refused, not cut short. */
#define BPFTEL_GO_MAX_RETS 16
/* Bytes of a version string kept ("go1.19.8", "devel go1.23-..."). */
#define BPFTEL_GO_VERSION_LEN 48

struct bpftel_go_func {
	const char *name; /* in: as the runtime names it, "crypto/tls.(*Conn).Write" */
	uint64_t addr;	  /* out: entry, virtual address; 0 if not found */
	uint64_t end;	  /* out: the next function's entry */
	long offset;	  /* out: entry as a file offset, or a negative errno */
	long check;	  /* out: the stack check's JBE (goret.c), where the entry probe
			     goes; -1: no stack check, the probe goes on the entry */
	size_t nrets;	  /* out: RET instructions found */
	long rets[BPFTEL_GO_MAX_RETS]; /* out: their file offsets */
};

struct bpftel_go_exe {
	char version[BPFTEL_GO_VERSION_LEN]; /* from .go.buildinfo, "go1.19.8" */
	unsigned int major, minor;	     /* 1, 19; 0, 0 where unparsed ("devel") */
	uint32_t pclntab_magic;
	bool has_symtab; /* not stripped (informational: functions come from pclntab) */
};

/*
 * Is the file at fd (label: for messages) a Go executable, which version, and where
 * are funcs[0..n) with their RETs? n == 0: only the first two, from the headers and
 * .go.buildinfo (cheap: no table is read). Returns 0 when it is a Go executable whose version
 * and layout are supported (a function not in it has offset -ENOENT); else a negative
 * errno with a one-line reason in err:
 *   -ENOEXEC   not a Go executable (no .go.buildinfo), or not ELF; the ELF checks
 *              other codes (elfsym.h: -EISDIR, -E2BIG, -EFBIG) pass through
 *   -ENOTSUP   a Go executable this agent cannot probe: its version (< 1.17, no
 *              register ABI), its architecture (not x86-64) or its pclntab's layout;
 *              or a probed function's code: over BPFTEL_GO_MAX_FUNC_BYTES, an
 *              instruction the disassembler cannot decode, more RETs than probed
 *   -EFBIG     a table over its cap
 *   -EINVAL    a malformed table or header
 *   -EIO etc.  reading the file failed
 */
int bpftel_go_inspect_fd(int fd, const char *label, struct bpftel_go_exe *exe,
			 struct bpftel_go_func *funcs, size_t n, char *err, size_t errlen);

/*
 * The pclntab parser alone (gopclntab.c), on the section's bytes: fills addr and end
 * of each func found (0 where not). 0, or -ENOTSUP (unknown magic: *magic says which)
 * or -EINVAL (a header or table outside tab) with a reason in err.
 */
int bpftel_go_pclntab_find(const uint8_t *tab, size_t len, uint32_t *magic,
			   struct bpftel_go_func *funcs, size_t n, char *err, size_t errlen);

/*
 * The RET instructions of x86-64 code (goret.c): code[0..len) is a function whose
 * first byte is at file offset base. Appends base + the offset of each RET to out (at
 * most max) and returns how many, or -E2BIG (more than max), or -EILSEQ (an
 * instruction capstone cannot decode before len: refusing beats missing a return).
 * Only whole instructions count: a 0xc3 byte inside one is not a RET. *check is base
 * + the offset of the JBE of Go's stack check when the function starts with one,
 * else -1.
 */
int bpftel_go_find_rets(const uint8_t *code, size_t len, long base, long *out, size_t max,
			long *check);

/* The n-byte little-endian value at p (Go's tables on x86-64). */
static inline uint64_t bpftel_go_le(const uint8_t *p, unsigned int n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | p[n];
	return v;
}

/* Does the version read from .go.buildinfo ("go1.19.8") have the register ABI? Fills
 * major and minor. A source build's "devel go1.N-..." is taken as go1.N; an experiment
 * list that turns the register ABI off ("X:noregabi...") refuses it. */
bool bpftel_go_version_parse(const char *v, unsigned int *major, unsigned int *minor);

#endif /* BPFTEL_MANAGER_GOEXE_H */
