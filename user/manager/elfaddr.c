// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * File offsets to function names (elfaddr.h): one pass per symbol table, each over a
 * file checked by elfcheck.c, so the caps of the symbol resolver hold for this reader.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gelf.h>

#include "user/manager/elfaddr.h"
#include "user/manager/elfcheck.h"

struct best {
	bool exact, global, found;
	bool pending;	  /* chosen in this pass: its name to read */
	GElf_Word name; /* its offset in the pass's string table */
};

/*
 * The virtual address of a request's file offset, through the first PT_LOAD whose file
 * bytes hold it: once per request and pass, so that a symbol costs a comparison per
 * request, not a walk of up to BPFTEL_ELF_MAX_PHDRS program headers (~26 s a table at
 * the caps, per kernel name).
 */
static bool offset_vaddr(Elf *elf, size_t phnum, long off, GElf_Addr *v)
{
	GElf_Phdr ph;
	size_t i;

	for (i = 0; off >= 0 && i < phnum; i++) {
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    (GElf_Off)off < ph.p_offset || (GElf_Off)off - ph.p_offset >= ph.p_filesz)
			continue;
		*v = ph.p_vaddr + ((GElf_Off)off - ph.p_offset);
		return true;
	}
	return false;
}

static void consider(struct best *b, const GElf_Sym *sym, GElf_Addr v)
{
	bool exact = v == sym->st_value, global = GELF_ST_BIND(sym->st_info) != STB_LOCAL;
	__uint64_t size = sym->st_size ? sym->st_size : 1;

	if (v < sym->st_value || v - sym->st_value >= size)
		return;
	if (b->found && (b->exact > exact || (b->exact == exact && b->global >= global)))
		return;
	*b = (struct best){exact, global, true, true, sym->st_name};
}

/* The chosen symbol's name, from the string table at [off, off + size) of the file, up
 * to its "@version", into r: kept as it was (an earlier table's name, or "") where the
 * name is empty, or does not end inside the table. */
static void read_name(int fd, GElf_Off off, GElf_Xword size, GElf_Word at,
		      struct bpftel_elf_addr_req *r)
{
	char name[sizeof(r->name)];
	size_t want = sizeof(name) - 1, len;
	ssize_t got;

	if (at >= size)
		return;
	if (want > size - at)
		want = size - at;
	got = bpftel_elfck_pread(fd, name, want, off + at);
	if (got <= 0)
		return;
	len = strnlen(name, (size_t)got);
	if (len == (size_t)got && (size_t)got == size - at)
		return; /* runs past the table's end: malformed */
	name[len] = '\0'; /* a name longer than the buffer: cut, as any */
	name[strcspn(name, "@")] = '\0';
	if (name[0])
		memcpy(r->name, name, strlen(name) + 1);
}

/* One pass over the table of this kind (.dynsym or .symtab) in a fresh checked handle. */
static int scan(int fd, bool dynsym, struct bpftel_elf_addr_req *reqs, struct best *best, size_t n,
		GElf_Addr *vaddr, bool *mapped, char *err, size_t errlen)
{
	struct bpftel_elfck ck = {};
	const struct bpftel_elfck_table *t;
	GElf_Shdr names;
	size_t nsym, i, j;
	GElf_Sym sym;
	Elf_Data *d;
	int ret;

	ret = bpftel_elfck__begin_flags(&ck, fd, BPFTEL_ELFCK_NAMES_PREAD);
	if (ret) {
		snprintf(err, errlen, "%s", ck.msg);
		goto out;
	}
	t = dynsym ? &ck.dynsym : &ck.symtab;
	if (!t->ndx)
		goto out;
	d = elf_getdata(elf_getscn(ck.elf, t->ndx), NULL);
	if (!d || !gelf_getshdr(elf_getscn(ck.elf, t->sh.sh_link), &names)) {
		snprintf(err, errlen, "malformed ELF: symbol or string table");
		ret = -ENOEXEC;
		goto out;
	}
	for (j = 0; j < n; j++) {
		mapped[j] = offset_vaddr(ck.elf, ck.phnum, reqs[j].offset, &vaddr[j]);
		best[j].pending = false;
	}
	nsym = d->d_size / ck.symsz;
	for (i = 1; i < nsym && i <= INT_MAX; i++) {
		if (!gelf_getsym(d, (int)i, &sym))
			break;
		/* st_name 0: no name (the table's first byte is its empty string). */
		if ((GELF_ST_TYPE(sym.st_info) != STT_FUNC &&
		     GELF_ST_TYPE(sym.st_info) != STT_GNU_IFUNC) ||
		    sym.st_shndx == SHN_UNDEF || !sym.st_value || !sym.st_name ||
		    sym.st_name >= names.sh_size)
			continue;
		for (j = 0; j < n; j++)
			if (mapped[j])
				consider(&best[j], &sym, vaddr[j]);
	}
	for (j = 0; j < n; j++)
		if (best[j].pending)
			read_name(fd, names.sh_offset, names.sh_size, best[j].name, &reqs[j]);
out:
	bpftel_elfck__end(&ck);
	return ret;
}

int bpftel_elf_symbolize_fd(int fd, const char *label, struct bpftel_elf_addr_req *reqs, size_t n,
			    char *err, size_t errlen)
{
	char msg[200] = "";
	struct best *best;
	GElf_Addr *vaddr;
	bool *mapped;
	size_t i;
	int ret;

	if (!reqs || !n)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOEXEC;
	best = calloc(n, sizeof(*best));
	vaddr = calloc(n, sizeof(*vaddr));
	mapped = calloc(n, sizeof(*mapped));
	ret = best && vaddr && mapped ? 0 : -ENOMEM;
	for (i = 0; !ret && i < n; i++)
		reqs[i].name[0] = '\0';
	if (!ret)
		ret = scan(fd, true, reqs, best, n, vaddr, mapped, msg, sizeof(msg));
	if (!ret)
		ret = scan(fd, false, reqs, best, n, vaddr, mapped, msg, sizeof(msg));
	free(best);
	free(vaddr);
	free(mapped);
	if (ret && err && errlen)
		snprintf(err, errlen, "%s: %s", label ? label : "ELF", msg);
	return ret;
}
