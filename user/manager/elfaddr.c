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
};

/* The file offset of a symbol's value, through the PT_LOAD holding it. */
static int value_offset(Elf *elf, size_t phnum, GElf_Addr v, long *off)
{
	GElf_Phdr ph;
	size_t i;

	for (i = 0; i < phnum; i++) {
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || v < ph.p_vaddr ||
		    v - ph.p_vaddr >= ph.p_filesz)
			continue;
		if (ph.p_offset > LONG_MAX || v - ph.p_vaddr > LONG_MAX - ph.p_offset)
			return -ERANGE;
		*off = (long)(v - ph.p_vaddr + ph.p_offset);
		return 0;
	}
	return -ENOENT;
}

static void consider(struct bpftel_elf_addr_req *r, struct best *b, const GElf_Sym *sym, long start,
		     const char *name)
{
	bool exact = r->offset == start, global = GELF_ST_BIND(sym->st_info) != STB_LOCAL;
	__uint64_t size = sym->st_size ? sym->st_size : 1;
	size_t len;

	if (r->offset < start || (__uint64_t)(r->offset - start) >= size)
		return;
	if (b->found && (b->exact > exact || (b->exact == exact && b->global >= global)))
		return;
	len = strcspn(name, "@");
	if (len >= sizeof(r->name))
		len = sizeof(r->name) - 1;
	memcpy(r->name, name, len);
	r->name[len] = '\0';
	*b = (struct best){exact, global, true};
}

/* One pass over the table of this kind (.dynsym or .symtab) in a fresh checked handle. */
static int scan(int fd, bool dynsym, struct bpftel_elf_addr_req *reqs, struct best *best, size_t n,
		char *err, size_t errlen)
{
	struct bpftel_elfck ck = {};
	const struct bpftel_elfck_table *t;
	Elf_Data *d, *names;
	size_t nsym, i, j;
	GElf_Sym sym;
	const char *name;
	long start;
	int ret;

	ret = bpftel_elfck__begin(&ck, fd);
	if (ret) {
		snprintf(err, errlen, "%s", ck.msg);
		goto out;
	}
	t = dynsym ? &ck.dynsym : &ck.symtab;
	if (!t->ndx)
		goto out;
	d = elf_getdata(elf_getscn(ck.elf, t->ndx), NULL);
	names = elf_getdata(elf_getscn(ck.elf, t->sh.sh_link), NULL);
	/* The string table must end in NUL: then every name in it ends. */
	if (!d || !names ||
	    (names->d_size && (!names->d_buf || ((const char *)names->d_buf)[names->d_size - 1]))) {
		snprintf(err, errlen, "malformed ELF: symbol or string table");
		ret = -ENOEXEC;
		goto out;
	}
	nsym = d->d_size / ck.symsz;
	for (i = 1; i < nsym && i <= INT_MAX; i++) {
		if (!gelf_getsym(d, (int)i, &sym))
			break;
		if ((GELF_ST_TYPE(sym.st_info) != STT_FUNC &&
		     GELF_ST_TYPE(sym.st_info) != STT_GNU_IFUNC) ||
		    sym.st_shndx == SHN_UNDEF || !sym.st_value || sym.st_name >= names->d_size)
			continue;
		name = (const char *)names->d_buf + sym.st_name;
		if (!*name || value_offset(ck.elf, ck.phnum, sym.st_value, &start))
			continue;
		for (j = 0; j < n; j++)
			consider(&reqs[j], &best[j], &sym, start, name);
	}
out:
	bpftel_elfck__end(&ck);
	return ret;
}

int bpftel_elf_symbolize_fd(int fd, const char *label, struct bpftel_elf_addr_req *reqs, size_t n,
			    char *err, size_t errlen)
{
	char msg[200] = "";
	struct best *best;
	size_t i;
	int ret;

	if (!reqs || !n)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOEXEC;
	best = calloc(n, sizeof(*best));
	if (!best)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		reqs[i].name[0] = '\0';
	ret = scan(fd, true, reqs, best, n, msg, sizeof(msg));
	if (!ret)
		ret = scan(fd, false, reqs, best, n, msg, sizeof(msg));
	free(best);
	if (ret && err && errlen)
		snprintf(err, errlen, "%s: %s", label ? label : "ELF", msg);
	return ret;
}
