// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Checks of a possibly hostile ELF file before libelf reads anything by its sizes.
 * See elfcheck.h; the caps are in elfsym.h.
 *
 * elf_begin() allocates one descriptor per section as soon as it has read the header, so
 * the counts are checked first on our own pread of the header; everything later (section
 * headers, tables) is checked on libelf's own copy, which is what it will read by.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "user/manager/elfcheck.h"
#include "user/manager/elfsym.h"

/* What the ELF header says, extended numbering applied as libelf applies it. */
struct raw_hdr {
	uint64_t phoff, shoff;
	uint64_t phnum, shnum;
	uint64_t phentsize, shentsize;
	bool is64;
};

__attribute__((format(printf, 3, 4))) static int fail(struct bpftel_elfck *ck, int ret,
						      const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ck->msg, sizeof(ck->msg), fmt, ap);
	va_end(ap);
	return ret;
}

static const char *elf_msg(void)
{
	const char *m = elf_errmsg(-1);

	return m ? m : "unknown libelf error";
}

/* A regular file, neither empty nor over the file cap. */
static int check_file(struct bpftel_elfck *ck, int fd)
{
	struct stat st;
	int ret;

	if (fstat(fd, &st)) {
		ret = -errno;
		return fail(ck, ret, "fstat: %s", strerror(-ret));
	}
	if (S_ISDIR(st.st_mode))
		return fail(ck, -EISDIR, "is a directory");
	if (!S_ISREG(st.st_mode))
		return fail(ck, -ENOEXEC, "not a regular file");
	if (!st.st_size)
		return fail(ck, -ENOEXEC, "empty file, not an ELF file");
	if ((uint64_t)st.st_size > BPFTEL_ELF_MAX_FILE_BYTES)
		return fail(ck, -EFBIG, "too large: %lld bytes, cap %llu", (long long)st.st_size,
			    BPFTEL_ELF_MAX_FILE_BYTES);
	ck->fsize = (uint64_t)st.st_size;
	return 0;
}

ssize_t bpftel_elfck_pread(int fd, void *buf, size_t len, uint64_t off)
{
	size_t got = 0;
	ssize_t r;

	while (got < len) {
		r = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (!r)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* Exactly len bytes at off, or a failure: a short read means the file is cut. */
static int read_at(struct bpftel_elfck *ck, int fd, void *buf, size_t len, uint64_t off,
		   const char *what)
{
	ssize_t got = bpftel_elfck_pread(fd, buf, len, off);

	if (got < 0)
		return fail(ck, (int)got, "read: %s", strerror((int)-got));
	if ((size_t)got < len)
		return fail(ck, -ENOEXEC, "truncated ELF: %s past the end of the file", what);
	return 0;
}

static uint64_t rd_uint(const unsigned char *p, size_t n, bool msb)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < n; i++)
		v = v << 8 | p[msb ? i : n - 1 - i];
	return v;
}

#define RAW(buf, type, field, msb) \
	rd_uint((buf) + offsetof(type, field), sizeof(((type *)0)->field), (msb))
#define RAW_EH(buf, is64, field, msb) \
	((is64) ? RAW(buf, Elf64_Ehdr, field, msb) : RAW(buf, Elf32_Ehdr, field, msb))
#define RAW_SH(buf, is64, field, msb) \
	((is64) ? RAW(buf, Elf64_Shdr, field, msb) : RAW(buf, Elf32_Shdr, field, msb))

/* Section 0 holds the counts that do not fit the header (extended numbering). */
static int read_raw_sh0(struct bpftel_elfck *ck, int fd, struct raw_hdr *h, bool msb)
{
	unsigned char sh0[sizeof(Elf64_Shdr)];
	size_t shsz = h->is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
	int ret;

	if (h->shoff > ck->fsize)
		return fail(ck, -ENOEXEC,
			    "truncated ELF: section headers past the end of the file");
	ret = read_at(ck, fd, sh0, shsz, h->shoff, "section headers");
	if (ret)
		return ret;
	/* As libelf reads them: section 0 holds phnum only when there are sections. */
	if (!h->shnum)
		h->shnum = RAW_SH(sh0, h->is64, sh_size, msb);
	if (h->phnum == PN_XNUM && h->shnum)
		h->phnum = RAW_SH(sh0, h->is64, sh_info, msb);
	return 0;
}

static int read_raw_hdr(struct bpftel_elfck *ck, int fd, struct raw_hdr *h)
{
	unsigned char eh[sizeof(Elf64_Ehdr)];
	ssize_t got;
	bool msb;

	got = bpftel_elfck_pread(fd, eh, sizeof(eh), 0);
	if (got < 0)
		return fail(ck, (int)got, "read: %s", strerror((int)-got));
	if (got < EI_NIDENT || memcmp(eh, ELFMAG, SELFMAG) ||
	    (eh[EI_CLASS] != ELFCLASS32 && eh[EI_CLASS] != ELFCLASS64) ||
	    (eh[EI_DATA] != ELFDATA2LSB && eh[EI_DATA] != ELFDATA2MSB))
		return fail(ck, -ENOEXEC, "not an ELF file");
	h->is64 = eh[EI_CLASS] == ELFCLASS64;
	msb = eh[EI_DATA] == ELFDATA2MSB;
	if ((size_t)got < (h->is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr)))
		return fail(ck, -ENOEXEC, "truncated ELF: header past the end of the file");
	h->phoff = RAW_EH(eh, h->is64, e_phoff, msb);
	h->shoff = RAW_EH(eh, h->is64, e_shoff, msb);
	h->phnum = RAW_EH(eh, h->is64, e_phnum, msb);
	h->shnum = RAW_EH(eh, h->is64, e_shnum, msb);
	h->phentsize = RAW_EH(eh, h->is64, e_phentsize, msb);
	h->shentsize = RAW_EH(eh, h->is64, e_shentsize, msb);
	if (h->shoff && (!h->shnum || h->phnum == PN_XNUM))
		return read_raw_sh0(ck, fd, h, msb);
	return 0;
}

/* Header tables inside the file (else it is cut) and under their caps. */
static int check_raw_hdr(struct bpftel_elfck *ck, const struct raw_hdr *h)
{
	size_t shsz = h->is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
	size_t phsz = h->is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);

	if ((h->shnum && (!h->shoff || h->shentsize != shsz)) ||
	    (h->phnum && (!h->phoff || h->phentsize != phsz)))
		return fail(ck, -ENOEXEC,
			    "malformed ELF header: header table offset or entry size");
	if (h->phnum && (h->phoff > ck->fsize || h->phnum > (ck->fsize - h->phoff) / phsz))
		return fail(ck, -ENOEXEC,
			    "truncated ELF: program headers past the end of the file");
	if (h->shnum && (h->shoff > ck->fsize || h->shnum > (ck->fsize - h->shoff) / shsz))
		return fail(ck, -ENOEXEC,
			    "truncated ELF: section headers past the end of the file");
	if (h->shnum > BPFTEL_ELF_MAX_SECTIONS)
		return fail(ck, -E2BIG, "too many sections: %llu, cap %d",
			    (unsigned long long)h->shnum, BPFTEL_ELF_MAX_SECTIONS);
	if (h->phnum > BPFTEL_ELF_MAX_PHDRS)
		return fail(ck, -E2BIG, "too many program headers: %llu, cap %d",
			    (unsigned long long)h->phnum, BPFTEL_ELF_MAX_PHDRS);
	return 0;
}

/* libelf must have read the header we checked: the file may have changed in between. */
static int check_ehdr(struct bpftel_elfck *ck, const struct raw_hdr *h)
{
	GElf_Ehdr eh;

	if (elf_kind(ck->elf) != ELF_K_ELF)
		return fail(ck, -ENOEXEC, "not an ELF file");
	if (!gelf_getehdr(ck->elf, &eh))
		return fail(ck, -ENOEXEC, "malformed ELF header: %s", elf_msg());
	if (eh.e_type != ET_DYN && eh.e_type != ET_EXEC)
		return fail(ck, -ENOEXEC, "ELF type %u is neither ET_DYN nor ET_EXEC",
			    (unsigned int)eh.e_type);
	if (gelf_getclass(ck->elf) != (h->is64 ? ELFCLASS64 : ELFCLASS32) ||
	    eh.e_shoff != h->shoff || eh.e_phoff != h->phoff ||
	    elf_getshdrnum(ck->elf, &ck->shnum) || ck->shnum != h->shnum ||
	    elf_getphdrnum(ck->elf, &ck->phnum) || ck->phnum != h->phnum)
		return fail(ck, -ENOEXEC, "malformed ELF: header changed while being read");
	ck->symsz = gelf_fsize(ck->elf, ELF_T_SYM, 1, EV_CURRENT);
	if (!ck->symsz)
		return fail(ck, -ENOEXEC, "malformed ELF header: %s", elf_msg());
	return 0;
}

/* A table is read whole by elf_getdata(): it must lie inside the file and under the cap. */
static int check_section(struct bpftel_elfck *ck, const GElf_Shdr *sh, const char *what)
{
	if (sh->sh_offset > ck->fsize || sh->sh_size > ck->fsize - sh->sh_offset)
		return fail(
			ck, -ENOEXEC,
			"malformed ELF: %s: %llu bytes at offset %llu, past the end of the file",
			what, (unsigned long long)sh->sh_size, (unsigned long long)sh->sh_offset);
	if (sh->sh_size > BPFTEL_ELF_MAX_TABLE_BYTES)
		return fail(ck, -E2BIG, "%s too large: %llu bytes, cap %llu", what,
			    (unsigned long long)sh->sh_size, BPFTEL_ELF_MAX_TABLE_BYTES);
	return 0;
}

/* A linked string table: inside the file, and under the cap where it is read whole. */
static int check_strtab(struct bpftel_elfck *ck, size_t link, const char *what, bool whole)
{
	Elf_Scn *scn = link && link < ck->shnum ? elf_getscn(ck->elf, link) : NULL;
	char name[64];
	GElf_Shdr sh;

	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_STRTAB)
		return fail(ck, -ENOEXEC, "malformed ELF: %s: no string table", what);
	snprintf(name, sizeof(name), "string table of %s", what);
	if (!whole && (sh.sh_offset > ck->fsize || sh.sh_size > ck->fsize - sh.sh_offset))
		return fail(ck, -ENOEXEC, "malformed ELF: %s outside the file", name);
	return whole ? check_section(ck, &sh, name) : 0;
}

static int check_symtab(struct bpftel_elfck *ck, const struct bpftel_elfck_table *t,
			const char *what, unsigned int flags)
{
	int ret = check_section(ck, &t->sh, what);

	if (!ret && t->sh.sh_entsize != ck->symsz)
		ret = fail(ck, -ENOEXEC, "malformed ELF: %s: entry size %llu, not %zu", what,
			   (unsigned long long)t->sh.sh_entsize, ck->symsz);
	return ret ? ret
		   : check_strtab(ck, t->sh.sh_link, what, !(flags & BPFTEL_ELFCK_NAMES_PREAD));
}

/* .gnu.version and .gnu.version_d are read only as the pair of .dynsym; else dropped. */
static int check_versions(struct bpftel_elfck *ck)
{
	int ret;

	if (!ck->dynsym.ndx || !ck->versym.ndx || !ck->verdef.ndx ||
	    ck->versym.sh.sh_link != ck->dynsym.ndx) {
		ck->versym.ndx = ck->verdef.ndx = 0;
		return 0;
	}
	ret = check_section(ck, &ck->versym.sh, ".gnu.version");
	/* One entry per .dynsym symbol: more would only be memory nobody reads. */
	if (!ret && ck->versym.sh.sh_size / sizeof(GElf_Versym) > ck->dynsym.sh.sh_size / ck->symsz)
		ret = fail(ck, -ENOEXEC, "malformed ELF: .gnu.version: more entries than .dynsym");
	if (!ret)
		ret = check_section(ck, &ck->verdef.sh, ".gnu.version_d");
	return ret ? ret : check_strtab(ck, ck->verdef.sh.sh_link, ".gnu.version_d", true);
}

static struct bpftel_elfck_table *table_slot(struct bpftel_elfck *ck, GElf_Word type)
{
	switch (type) {
	case SHT_DYNSYM:
		return &ck->dynsym;
	case SHT_SYMTAB:
		return &ck->symtab;
	case SHT_GNU_versym:
		return &ck->versym;
	case SHT_GNU_verdef:
		return &ck->verdef;
	}
	return NULL;
}

/*
 * The section names, where there are any: goexe.c finds sections by name with
 * elf_strptr(), and libelf then reads the whole table, whatever size its header
 * claims (a crafted one made it allocate and read ~1 GiB). A real one is a few hundred
 * bytes.
 */
static int check_shstrtab(struct bpftel_elfck *ck)
{
	size_t ndx;
	Elf_Scn *scn;
	GElf_Shdr sh;
	int ret;

	if (elf_getshdrstrndx(ck->elf, &ndx) || !ndx)
		return 0; /* no names: nobody looks a section up by name */
	scn = ndx < ck->shnum ? elf_getscn(ck->elf, ndx) : NULL;
	if (!scn || !gelf_getshdr(scn, &sh))
		return fail(ck, -ENOEXEC, "malformed ELF: section names: no section %zu", ndx);
	ret = check_section(ck, &sh, "section names");
	if (!ret && sh.sh_size > BPFTEL_ELF_MAX_SHSTRTAB_BYTES)
		ret = fail(ck, -E2BIG, "section names too large: %llu bytes, cap %u",
			   (unsigned long long)sh.sh_size, BPFTEL_ELF_MAX_SHSTRTAB_BYTES);
	return ret;
}

/* The first section of each type; then the header of everything that may be read
 * (with BPFTEL_ELFCK_NO_SYMBOLS, no symbol table is: found, not checked). */
static int find_tables(struct bpftel_elfck *ck, unsigned int flags)
{
	struct bpftel_elfck_table *slot;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	int ret = 0;

	while ((scn = elf_nextscn(ck->elf, scn))) {
		if (!gelf_getshdr(scn, &sh))
			return fail(ck, -ENOEXEC, "malformed ELF: section header: %s", elf_msg());
		slot = table_slot(ck, sh.sh_type);
		if (slot && !slot->ndx) {
			slot->ndx = elf_ndxscn(scn);
			slot->sh = sh;
		}
	}
	ret = check_shstrtab(ck);
	if (ret || (flags & BPFTEL_ELFCK_NO_SYMBOLS))
		return ret;
	if (ck->dynsym.ndx)
		ret = check_symtab(ck, &ck->dynsym, ".dynsym", flags);
	if (!ret && ck->symtab.ndx)
		ret = check_symtab(ck, &ck->symtab, ".symtab", flags);
	if (!ret && (flags & BPFTEL_ELFCK_NAMES_PREAD)) {
		/* Its reader needs no versions, whose names are .dynsym's string table. */
		ck->versym.ndx = ck->verdef.ndx = 0;
		return 0;
	}
	return ret ? ret : check_versions(ck);
}

int bpftel_elfck__begin(struct bpftel_elfck *ck, int fd)
{
	return bpftel_elfck__begin_flags(ck, fd, 0);
}

int bpftel_elfck__begin_flags(struct bpftel_elfck *ck, int fd, unsigned int flags)
{
	struct raw_hdr h = {};
	int ret;

	memset(ck, 0, sizeof(*ck));
	ret = check_file(ck, fd);
	if (!ret)
		ret = read_raw_hdr(ck, fd, &h);
	if (!ret)
		ret = check_raw_hdr(ck, &h);
	if (ret)
		return ret;
	/* ELF_C_READ: pread on demand, no mmap, so a file cut under us cannot SIGBUS. */
	ck->elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!ck->elf)
		return fail(ck, -ENOEXEC, "not an ELF file: %s", elf_msg());
	ret = check_ehdr(ck, &h);
	return ret ? ret : find_tables(ck, flags);
}

void bpftel_elfck__end(struct bpftel_elfck *ck)
{
	if (ck->elf)
		elf_end(ck->elf);
	ck->elf = NULL;
}
