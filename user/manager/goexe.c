// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Go executables, at the file level: is it one (.go.buildinfo), which Go built it, and
 * where are the functions asked for (.gopclntab, gopclntab.c) and their RETs (goret.c).
 * goexe.h has the API and the reasons. The ELF header and section table are checked by
 * elfcheck.c before libelf reads anything; the two sections read here are read with
 * our own pread, under caps, and checked to lie inside the file.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <gelf.h>

#include "user/common/escape.h"
#include "user/manager/elfcheck.h"
#include "user/manager/goexe.h"

/* "\xff Go buildinf:": the start of .go.buildinfo (src/debug/buildinfo). */
static const char buildinfo_magic[14] = "\xff Go buildinf:";
#define BUILDINFO_HDR	 32
#define BUILDINFO_INLINE 0x2 /* flags: the version string follows the header (Go 1.18+) */
#define BUILDINFO_READ	 512 /* enough for the header and an inline version */

struct go_ctx {
	int fd;
	const char *label;
	char *err;
	size_t errlen;
	struct bpftel_elfck ck;
};

__attribute__((format(printf, 3, 4))) static int fail(struct go_ctx *c, int ret, const char *fmt,
						      ...)
{
	char msg[200];
	va_list ap;

	if (c->err && c->errlen) {
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		bpftel_labeled(c->err, c->errlen, c->label, msg);
	}
	return ret;
}

/* Exactly len bytes at off: a short read means the file shrank under us. */
static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t got = bpftel_elfck_pread(fd, buf, len, off);

	return got < 0 ? (int)got : (size_t)got < len ? -EIO : 0;
}

/* The file offset of [vaddr, vaddr + len), from the loadable segments; -ENOENT if no
 * segment holds it all, or the one that does lies outside the file: its offset and size,
 * another user's to write, are checked before they are added (an offset near 2^64
 * would wrap to bytes before the code it claims). */
static long vaddr_offset(struct go_ctx *c, uint64_t vaddr, uint64_t len)
{
	GElf_Phdr ph;
	size_t i;

	for (i = 0; i < c->ck.phnum; i++) {
		if (!gelf_getphdr(c->ck.elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr < ph.p_vaddr || vaddr - ph.p_vaddr > ph.p_filesz ||
		    ph.p_filesz - (vaddr - ph.p_vaddr) < len)
			continue;
		/* In the file, so offset + len <= p_offset + p_filesz <= fsize. */
		if (ph.p_offset > c->ck.fsize || ph.p_filesz > c->ck.fsize - ph.p_offset)
			return -ENOENT;
		return (long)(ph.p_offset + (vaddr - ph.p_vaddr));
	}
	return -ENOENT;
}

/* The section called name, checked to lie inside the file; 0 if there is none. */
static int find_section(struct go_ctx *c, const char *name, GElf_Shdr *out)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	const char *s;

	if (elf_getshdrstrndx(c->ck.elf, &shstrndx))
		return fail(c, -EINVAL, "no section name table");
	while ((scn = elf_nextscn(c->ck.elf, scn))) {
		if (!gelf_getshdr(scn, out) ||
		    !(s = elf_strptr(c->ck.elf, shstrndx, out->sh_name)) || strcmp(s, name))
			continue;
		if (out->sh_type != SHT_PROGBITS || out->sh_offset > c->ck.fsize ||
		    out->sh_size > c->ck.fsize - out->sh_offset)
			return fail(c, -EINVAL, "%s lies outside the file", name);
		return 1;
	}
	return 0;
}

/* Go 1.17 and before: the header holds a pointer to the version's string header. */
static int version_by_pointer(struct go_ctx *c, const uint8_t *hdr, unsigned int ptr, char *out,
			      size_t outlen)
{
	uint8_t sh[16];
	uint64_t sptr, slen;
	long off;

	off = vaddr_offset(c, bpftel_go_le(hdr + 16, ptr), 2 * ptr);
	if (off < 0 || pread_all(c->fd, sh, 2 * ptr, off))
		return fail(c, -EINVAL, ".go.buildinfo: version pointer outside the file");
	sptr = bpftel_go_le(sh, ptr);
	slen = bpftel_go_le(sh + ptr, ptr);
	if (!slen || slen >= outlen || (off = vaddr_offset(c, sptr, slen)) < 0 ||
	    pread_all(c->fd, out, slen, off))
		return fail(c, -EINVAL, ".go.buildinfo: version string outside the file");
	out[slen] = '\0';
	return 0;
}

static int read_version(struct go_ctx *c, struct bpftel_go_exe *exe)
{
	uint8_t b[BUILDINFO_READ];
	GElf_Shdr sh;
	unsigned int ptr;
	uint64_t len = 0;
	size_t n, i, shift = 0;
	bool ended = false;
	int ret;

	ret = find_section(c, ".go.buildinfo", &sh);
	if (ret <= 0)
		return ret ?: fail(c, -ENOEXEC, "not a Go executable (no .go.buildinfo)");
	n = sh.sh_size < sizeof(b) ? sh.sh_size : sizeof(b);
	if (n < BUILDINFO_HDR)
		return fail(c, -EINVAL, ".go.buildinfo: %zu bytes", n);
	ret = pread_all(c->fd, b, n, sh.sh_offset);
	if (ret) /* short: the file shrank since it was checked */
		return fail(c, ret, ".go.buildinfo: read failed");
	if (memcmp(b, buildinfo_magic, sizeof(buildinfo_magic)))
		return fail(c, -ENOEXEC, "not a Go executable (.go.buildinfo without its magic)");
	ptr = b[14];
	if (ptr != 8)
		return fail(c, -ENOTSUP, "a %u-bit Go executable: only x86-64 is probed", ptr * 8);
	if (!(b[15] & BUILDINFO_INLINE))
		return version_by_pointer(c, b, ptr, exe->version, sizeof(exe->version));
	/* A varint length, then the bytes. One that does not end within 10 bytes (or
	 * what was read) is malformed, as Go's binary.Uvarint says. */
	for (i = BUILDINFO_HDR; i < n && shift < 64; i++, shift += 7) {
		len |= (uint64_t)(b[i] & 0x7f) << shift;
		if (!(b[i] & 0x80)) {
			ended = true;
			break;
		}
	}
	i++;
	if (!ended)
		return fail(c, -EINVAL, ".go.buildinfo: a version length without its end");
	if (i > n || !len || len >= sizeof(exe->version) || len > n - i)
		return fail(c, -EINVAL, ".go.buildinfo: version of %llu bytes",
			    (unsigned long long)len);
	memcpy(exe->version, b + i, len);
	exe->version[len] = '\0';
	return 0;
}

bool bpftel_go_version_parse(const char *v, unsigned int *major, unsigned int *minor)
{
	unsigned long ma, mi;
	const char *x;
	char *end;

	*major = *minor = 0;
	/* A toolchain built from source: "devel go1.23-abcdef ..." names the release it
	 * leads to; an older one ("devel +abcdef <date>", before Go 1.18) does not, and may
	 * predate the register ABI. */
	if (!strncmp(v, "devel ", 6))
		v += 6;
	/* Experiments not on by default are listed after the version ("go1.17.13
	 * X:noregabi"): without the register ABI the arguments are on the stack. */
	x = strstr(v, " X:");
	if (x && strstr(x, "noregabi"))
		return false;
	/* Digits only: strtoul would also take spaces and a sign ("go1.-5"). */
	if (strncmp(v, "go", 2) || !isdigit((unsigned char)v[2]))
		return false;
	ma = strtoul(v + 2, &end, 10);
	if (*end != '.' || !isdigit((unsigned char)end[1]) || ma > 100)
		return false;
	mi = strtoul(end + 1, &end, 10);
	if (mi > 1000)
		return false;
	*major = (unsigned int)ma;
	*minor = (unsigned int)mi;
	return ma > 1 || (ma == 1 && mi >= 17);
}

/* The pclntab magic Go major.minor writes (runtime/symtab.go): 1.16's layout until
 * 1.18, 1.18's until 1.20, 1.20's since. */
static uint32_t pclntab_magic_of(unsigned int major, unsigned int minor)
{
	if (major == 1 && minor < 18)
		return 0xfffffffaU;
	if (major == 1 && minor < 20)
		return 0xfffffff0U;
	return 0xfffffff1U;
}

static int find_funcs(struct go_ctx *c, struct bpftel_go_exe *exe, struct bpftel_go_func *funcs,
		      size_t n)
{
	char msg[160] = "";
	uint8_t *tab, *code;
	GElf_Shdr sh;
	size_t i;
	int ret;

	/* Go's linker names it .data.rel.ro.gopclntab where it makes a relro segment
	 * (-buildmode=pie, as distributions build); an external link (cgo) merges that
	 * into .data.rel.ro, where no section says where the table starts. */
	ret = find_section(c, ".gopclntab", &sh);
	if (!ret)
		ret = find_section(c, ".data.rel.ro.gopclntab", &sh);
	if (ret <= 0)
		return ret ?: fail(c, -ENOTSUP,
				   "a Go executable without .gopclntab (linked externally, as PIE?)");
	if (sh.sh_size > BPFTEL_GO_MAX_PCLNTAB)
		return fail(c, -EFBIG, ".gopclntab of %llu bytes (cap %llu)",
			    (unsigned long long)sh.sh_size, BPFTEL_GO_MAX_PCLNTAB);
	tab = malloc(sh.sh_size ?: 1);
	if (!tab)
		return fail(c, -ENOMEM, ".gopclntab: out of memory");
	ret = pread_all(c->fd, tab, sh.sh_size, sh.sh_offset);
	if (!ret)
		ret = bpftel_go_pclntab_find(tab, sh.sh_size, &exe->pclntab_magic, funcs, n, msg,
					     sizeof(msg));
	/* The table must be the one the claimed version writes, for 64-bit pointers: the
	 * probes read registers by that version's ABI, and a crafted binary claiming a
	 * newer Go over an older layout would have them read what is not there. */
	if (!ret && tab[7] != 8) {
		snprintf(msg, sizeof(msg), "pclntab: %u-byte pointers", tab[7]);
		ret = -EINVAL;
	} else if (!ret && exe->pclntab_magic != pclntab_magic_of(exe->major, exe->minor)) {
		snprintf(msg, sizeof(msg), "pclntab layout %#x is not %s's (%#x)",
			 exe->pclntab_magic, exe->version, pclntab_magic_of(exe->major, exe->minor));
		ret = -EINVAL;
	}
	free(tab);
	if (ret)
		return msg[0] ? fail(c, ret, "%s", msg) : fail(c, ret, ".gopclntab: read failed");
	code = malloc(BPFTEL_GO_MAX_FUNC_BYTES);
	if (!code)
		return fail(c, -ENOMEM, "out of memory");
	for (i = 0; i < n && !ret; i++) {
		struct bpftel_go_func *f = &funcs[i];
		uint64_t size = f->end - f->addr;

		f->nrets = 0;
		f->offset = -ENOENT;
		f->check = -1;
		if (!f->addr)
			continue;
		/* Code that cannot be analysed is unsupported (-ENOTSUP), as README says:
		 * not a file too large, nor tables over their caps. */
		if (size > BPFTEL_GO_MAX_FUNC_BYTES) {
			ret = fail(c, -ENOTSUP, "%s: %llu bytes (cap %u)", f->name,
				   (unsigned long long)size, BPFTEL_GO_MAX_FUNC_BYTES);
			break;
		}
		f->offset = vaddr_offset(c, f->addr, size);
		if (f->offset < 0) {
			ret = fail(c, -EINVAL, "%s lies outside the file", f->name);
			break;
		}
		ret = pread_all(c->fd, code, size, f->offset);
		if (ret) { /* short: the file shrank since it was checked */
			ret = fail(c, ret, "%s: read failed", f->name);
			break;
		}
		ret = bpftel_go_find_rets(code, size, f->offset, f->rets, BPFTEL_GO_MAX_RETS,
					  &f->check);
		if (ret == -EILSEQ || ret == -E2BIG) {
			ret = fail(c, -ENOTSUP, "%s: %s", f->name,
				   ret == -E2BIG ? "more RET instructions than probed"
						 : "an instruction the disassembler cannot decode");
			break;
		}
		if (ret < 0)
			break;
		f->nrets = (size_t)ret;
		ret = 0;
	}
	free(code);
	return ret;
}

static pthread_once_t elf_once = PTHREAD_ONCE_INIT;

static void elf_init(void)
{
	elf_version(EV_CURRENT);
}

int bpftel_go_inspect_fd(int fd, const char *label, struct bpftel_go_exe *exe,
			 struct bpftel_go_func *funcs, size_t n, char *err, size_t errlen)
{
	struct go_ctx c = {.fd = fd, .label = label ?: "?", .err = err, .errlen = errlen};
	GElf_Ehdr eh;
	int ret;

	memset(exe, 0, sizeof(*exe));
	pthread_once(&elf_once, elf_init);
	/* Functions come from .gopclntab: the symbol tables are never read. */
	ret = bpftel_elfck__begin_flags(&c.ck, fd, BPFTEL_ELFCK_NO_SYMBOLS);
	if (ret) {
		ret = fail(&c, ret, "%s", c.ck.msg);
		goto out;
	}
	exe->has_symtab = c.ck.symtab.ndx != 0;
	ret = read_version(&c, exe);
	if (ret)
		goto out;
	if (!gelf_getehdr(c.ck.elf, &eh) || eh.e_machine != EM_X86_64) {
		ret = fail(&c, -ENOTSUP, "%s for another architecture: only x86-64 is probed",
			   exe->version);
		goto out;
	}
	if (!bpftel_go_version_parse(exe->version, &exe->major, &exe->minor)) {
		ret = fail(&c, -ENOTSUP,
			   "%s: Go before 1.17 (or built with GOEXPERIMENT=noregabi) passes "
			   "arguments on the stack",
			   exe->version);
		goto out;
	}
	if (n)
		ret = find_funcs(&c, exe, funcs, n);
out:
	bpftel_elfck__end(&c.ck);
	return ret;
}
