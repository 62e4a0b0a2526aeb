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

static void consider(struct bpftel_elf_addr_req *r, struct best *b, const GElf_Sym *sym,
		     GElf_Addr v, const char *name)
{
	bool exact = v == sym->st_value, global = GELF_ST_BIND(sym->st_info) != STB_LOCAL;
	__uint64_t size = sym->st_size ? sym->st_size : 1;
	size_t len;

	if (v < sym->st_value || v - sym->st_value >= size)
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
		GElf_Addr *vaddr, bool *mapped, char *err, size_t errlen)
{
	struct bpftel_elfck ck = {};
	const struct bpftel_elfck_table *t;
	Elf_Data *d, *names;
	size_t nsym, i, j;
	GElf_Sym sym;
	const char *name;
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
	for (j = 0; j < n; j++)
		mapped[j] = offset_vaddr(ck.elf, ck.phnum, reqs[j].offset, &vaddr[j]);
	nsym = d->d_size / ck.symsz;
	for (i = 1; i < nsym && i <= INT_MAX; i++) {
		if (!gelf_getsym(d, (int)i, &sym))
			break;
		if ((GELF_ST_TYPE(sym.st_info) != STT_FUNC &&
		     GELF_ST_TYPE(sym.st_info) != STT_GNU_IFUNC) ||
		    sym.st_shndx == SHN_UNDEF || !sym.st_value || sym.st_name >= names->d_size)
			continue;
		name = (const char *)names->d_buf + sym.st_name;
		if (!*name)
			continue;
		for (j = 0; j < n; j++)
			if (mapped[j])
				consider(&reqs[j], &best[j], &sym, vaddr[j], name);
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
