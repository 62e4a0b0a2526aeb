// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ELF symbol resolver for uprobes: symbol name (optionally versioned) to file offset.
 * See elfsym.h for the API and the matching rules.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <gelf.h>

#include "user/manager/elfsym.h"

#define VERSYM_HIDDEN 0x8000
#define VERSYM_NDX    0x7fff

enum want {
	WANT_PLAIN,   /* "name": default version, or unversioned, or best hidden one */
	WANT_DEFAULT, /* "name@@VER" */
	WANT_ANY,     /* "name@VER" */
};

/* Match quality: a plain request settles for a hidden version only if nothing better. */
enum rank {
	RANK_NONE = 0,
	RANK_HIDDEN,
	RANK_EXACT,
};

struct req_state {
	const char *base; /* the request's name; base is its first baselen bytes */
	size_t baselen;
	const char *ver; /* NUL-terminated version, NULL for WANT_PLAIN */
	enum want want;
	enum rank rank; /* of the best candidate so far */
	unsigned int verndx;
	bool local;
	long offset;
};

struct verdef_name {
	unsigned int ndx;
	const char *name;
};

struct ctx {
	const char *path;
	char *err;
	size_t errlen;
	Elf *elf;
	GElf_Phdr *phdrs;
	size_t phnum;
	struct verdef_name *vers;
	size_t nvers;
	struct req_state *st;
	size_t n;
};

static pthread_once_t elf_once = PTHREAD_ONCE_INIT;
static bool elf_ready;

static void elf_init(void)
{
	elf_ready = elf_version(EV_CURRENT) != EV_NONE;
}

__attribute__((format(printf, 4, 5))) static int set_err(struct ctx *c, int ret, bool with_path,
							 const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	char *p;

	if (!c->err || !c->errlen)
		return ret;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (with_path && c->path)
		snprintf(c->err, c->errlen, "%s: %s", c->path, msg);
	else
		snprintf(c->err, c->errlen, "%s", msg);
	/* One line, whatever the path holds. */
	for (p = c->err; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return ret;
}

static const char *elf_msg(void)
{
	const char *m = elf_errmsg(-1);

	return m ? m : "unknown libelf error";
}

static int parse_req(const char *name, struct req_state *r)
{
	const char *at;

	memset(r, 0, sizeof(*r));
	r->offset = -ENOENT;
	if (!name || !*name)
		return -EINVAL;
	r->base = name;
	at = strchr(name, '@');
	if (!at) {
		r->baselen = strlen(name);
		r->want = WANT_PLAIN;
		return 0;
	}
	r->baselen = at - name;
	if (at[1] == '@') {
		r->want = WANT_DEFAULT;
		r->ver = at + 2;
	} else {
		r->want = WANT_ANY;
		r->ver = at + 1;
	}
	if (!r->baselen || !*r->ver || strchr(r->ver, '@'))
		return -EINVAL;
	return 0;
}

static enum rank match_rank(const struct req_state *r, const char *ver, bool hidden)
{
	switch (r->want) {
	case WANT_PLAIN:
		return hidden ? RANK_HIDDEN : RANK_EXACT;
	case WANT_DEFAULT:
		return ver && !hidden && !strcmp(ver, r->ver) ? RANK_EXACT : RANK_NONE;
	case WANT_ANY:
		return ver && !strcmp(ver, r->ver) ? RANK_EXACT : RANK_NONE;
	}
	return RANK_NONE;
}

/* Virtual address to file offset: through the PT_LOAD holding it, else its section. */
static int sym_file_offset(struct ctx *c, const GElf_Sym *sym, long *off)
{
	GElf_Addr v = sym->st_value;
	GElf_Shdr sh;
	Elf_Scn *scn;
	size_t i;

	for (i = 0; i < c->phnum; i++) {
		const GElf_Phdr *ph = &c->phdrs[i];

		if (ph->p_type != PT_LOAD || v < ph->p_vaddr || v - ph->p_vaddr >= ph->p_filesz)
			continue;
		if (ph->p_offset > LONG_MAX || v - ph->p_vaddr > LONG_MAX - ph->p_offset)
			continue;
		*off = (long)(v - ph->p_vaddr + ph->p_offset);
		return 0;
	}
	if (sym->st_shndx >= SHN_LORESERVE)
		return -ENOENT;
	scn = elf_getscn(c->elf, sym->st_shndx);
	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
		return -ENOENT;
	if (v < sh.sh_addr || v - sh.sh_addr >= sh.sh_size)
		return -ENOENT;
	if (sh.sh_offset > LONG_MAX || v - sh.sh_addr > LONG_MAX - sh.sh_offset)
		return -ENOENT;
	*off = (long)(v - sh.sh_addr + sh.sh_offset);
	return 0;
}

static const char *verdef_lookup(const struct ctx *c, unsigned int ndx)
{
	size_t i;

	for (i = 0; i < c->nvers; i++)
		if (c->vers[i].ndx == ndx)
			return c->vers[i].name;
	return NULL;
}

/* Version index to name, from .gnu.version_d (first auxiliary entry of each definition). */
static int load_verdef(struct ctx *c, Elf_Scn *scn, const GElf_Shdr *sh)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t off = 0, i, max;

	if (!d)
		return set_err(c, -ENOEXEC, true, "malformed ELF: .gnu.version_d: %s", elf_msg());
	max = d->d_size / sizeof(Elf32_Verdef);
	if (sh->sh_info < max)
		max = sh->sh_info;
	if (!max)
		return 0;
	c->vers = calloc(max, sizeof(*c->vers));
	if (!c->vers)
		return set_err(c, -ENOMEM, false, "out of memory");
	for (i = 0; i < max; i++) {
		GElf_Verdef vd;
		GElf_Verdaux va;
		const char *name;

		if (off > INT_MAX || !gelf_getverdef(d, (int)off, &vd))
			return set_err(c, -ENOEXEC, true, "malformed ELF: .gnu.version_d: %s",
				       elf_msg());
		if (vd.vd_cnt && !(vd.vd_flags & VER_FLG_BASE) && off + vd.vd_aux <= INT_MAX &&
		    gelf_getverdaux(d, (int)(off + vd.vd_aux), &va)) {
			name = elf_strptr(c->elf, sh->sh_link, va.vda_name);
			if (name && *name) {
				c->vers[c->nvers].ndx = vd.vd_ndx & VERSYM_NDX;
				c->vers[c->nvers].name = name;
				c->nvers++;
			}
		}
		if (!vd.vd_next || vd.vd_next > d->d_size - off)
			break;
		off += vd.vd_next;
	}
	return 0;
}

static void consider(struct ctx *c, struct req_state *r, const GElf_Sym *sym, const char *ver,
		     bool hidden, unsigned int verndx)
{
	enum rank rank = match_rank(r, ver, hidden);
	bool local = GELF_ST_BIND(sym->st_info) == STB_LOCAL;
	bool better;
	long off;

	if (rank == RANK_NONE || rank < r->rank)
		return;
	if (rank > r->rank)
		better = true;
	else if (r->local && !local)
		better = true;
	else if (rank == RANK_HIDDEN && local == r->local && verndx > r->verndx)
		better = true;
	else
		better = false;
	if (!better || sym_file_offset(c, sym, &off))
		return;
	r->rank = rank;
	r->verndx = verndx;
	r->local = local;
	r->offset = off;
}

/* One symbol table; versym (may be NULL) is the .gnu.version paired with .dynsym. */
static int scan_symtab(struct ctx *c, Elf_Scn *scn, const GElf_Shdr *sh, Elf_Data *versym,
		       const char *what)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t entsz = gelf_fsize(c->elf, ELF_T_SYM, 1, EV_CURRENT);
	size_t nsym, nversym = 0, i, j;

	if (!d || !entsz)
		return set_err(c, -ENOEXEC, true, "malformed ELF: %s: %s", what, elf_msg());
	nsym = d->d_size / entsz;
	if (versym)
		nversym = versym->d_size / sizeof(GElf_Versym);
	for (i = 1; i < nsym && i <= INT_MAX; i++) {
		GElf_Sym sym;
		const char *name, *at, *ver = NULL;
		unsigned int verndx = 0;
		bool hidden = false, versioned_done = false;
		size_t baselen;
		int type;

		if (!gelf_getsym(d, (int)i, &sym))
			return set_err(c, -ENOEXEC, true, "malformed ELF: %s: %s", what, elf_msg());
		type = GELF_ST_TYPE(sym.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
		    !sym.st_value)
			continue;
		name = elf_strptr(c->elf, sh->sh_link, sym.st_name);
		if (!name || !*name)
			continue;
		at = strchr(name, '@');
		baselen = at ? (size_t)(at - name) : strlen(name);
		for (j = 0; j < c->n; j++) {
			struct req_state *r = &c->st[j];

			if (r->baselen != baselen || memcmp(r->base, name, baselen))
				continue;
			if (!versioned_done) {
				versioned_done = true;
				if (at) { /* literal "name@VER" / "name@@VER" */
					hidden = at[1] != '@';
					ver = hidden ? at + 1 : at + 2;
				} else if (versym && i < nversym) {
					GElf_Versym vs;

					if (gelf_getversym(versym, (int)i, &vs)) {
						hidden = vs & VERSYM_HIDDEN;
						verndx = vs & VERSYM_NDX;
						if (verndx > 1)
							ver = verdef_lookup(c, verndx);
					}
				}
			}
			consider(c, r, &sym, ver, hidden, verndx);
		}
	}
	return 0;
}

static int load_phdrs(struct ctx *c)
{
	size_t i;

	if (elf_getphdrnum(c->elf, &c->phnum))
		return set_err(c, -ENOEXEC, true, "malformed ELF: program headers: %s", elf_msg());
	if (!c->phnum)
		return 0;
	c->phdrs = calloc(c->phnum, sizeof(*c->phdrs));
	if (!c->phdrs)
		return set_err(c, -ENOMEM, false, "out of memory");
	for (i = 0; i < c->phnum; i++)
		if (!gelf_getphdr(c->elf, (int)i, &c->phdrs[i]))
			return set_err(c, -ENOEXEC, true, "malformed ELF: program header %zu: %s",
				       i, elf_msg());
	return 0;
}

/* Headers must lie inside the file: libelf would otherwise see a cut file as sectionless. */
static int check_extents(struct ctx *c, const GElf_Ehdr *eh, off_t fsize)
{
	uint64_t size = (uint64_t)fsize;
	size_t shnum;

	if (eh->e_phoff && eh->e_phnum &&
	    (eh->e_phoff > size || (uint64_t)eh->e_phnum * eh->e_phentsize > size - eh->e_phoff))
		return set_err(c, -ENOEXEC, true,
			       "truncated ELF: program headers past the end of the file");
	if (!eh->e_shoff)
		return 0;
	shnum = eh->e_shnum;
	if (!shnum && elf_getshdrnum(c->elf, &shnum))
		return set_err(c, -ENOEXEC, true, "malformed ELF: section count: %s", elf_msg());
	if (eh->e_shoff > size || (uint64_t)shnum * eh->e_shentsize > size - eh->e_shoff)
		return set_err(c, -ENOEXEC, true,
			       "truncated ELF: section headers past the end of the file");
	return 0;
}

static int resolve_elf(struct ctx *c, off_t fsize)
{
	Elf_Scn *scn = NULL, *dynsym = NULL, *symtab = NULL, *versym = NULL, *verdef = NULL;
	GElf_Shdr dynsym_sh = {}, symtab_sh = {}, versym_sh = {}, verdef_sh = {};
	Elf_Data *versym_data = NULL;
	GElf_Ehdr eh;
	int ret;

	if (elf_kind(c->elf) != ELF_K_ELF)
		return set_err(c, -ENOEXEC, true, "not an ELF file");
	if (!gelf_getehdr(c->elf, &eh))
		return set_err(c, -ENOEXEC, true, "malformed ELF header: %s", elf_msg());
	if (eh.e_type != ET_DYN && eh.e_type != ET_EXEC)
		return set_err(c, -ENOEXEC, true, "ELF type %u is neither ET_DYN nor ET_EXEC",
			       (unsigned int)eh.e_type);
	ret = check_extents(c, &eh, fsize);
	if (!ret)
		ret = load_phdrs(c);
	if (ret)
		return ret;

	while ((scn = elf_nextscn(c->elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			return set_err(c, -ENOEXEC, true, "malformed ELF: section header: %s",
				       elf_msg());
		if (sh.sh_type == SHT_DYNSYM && !dynsym) {
			dynsym = scn;
			dynsym_sh = sh;
		} else if (sh.sh_type == SHT_SYMTAB && !symtab) {
			symtab = scn;
			symtab_sh = sh;
		} else if (sh.sh_type == SHT_GNU_versym && !versym) {
			versym = scn;
			versym_sh = sh;
		} else if (sh.sh_type == SHT_GNU_verdef && !verdef) {
			verdef = scn;
			verdef_sh = sh;
		}
	}

	if (dynsym) {
		if (versym && verdef && versym_sh.sh_link == elf_ndxscn(dynsym)) {
			versym_data = elf_getdata(versym, NULL);
			if (!versym_data)
				return set_err(c, -ENOEXEC, true, "malformed ELF: .gnu.version: %s",
					       elf_msg());
			ret = load_verdef(c, verdef, &verdef_sh);
			if (ret)
				return ret;
		}
		ret = scan_symtab(c, dynsym, &dynsym_sh, versym_data, ".dynsym");
		if (ret)
			return ret;
	}
	if (symtab)
		return scan_symtab(c, symtab, &symtab_sh, NULL, ".symtab");
	return 0;
}

int bpftel_elf_resolve(const char *path, struct bpftel_elf_sym_req *reqs, size_t n, char *err,
		       size_t errlen)
{
	struct ctx c = {.path = path, .err = err, .errlen = errlen, .n = n};
	struct stat stbuf;
	int fd = -1, ret = 0;
	size_t i;

	if (err && errlen)
		err[0] = '\0';
	if (!path || !*path || !reqs || !n) {
		ret = set_err(&c, -EINVAL, false, "bad arguments (path, symbols or count)");
		goto out;
	}
	if (strnlen(path, PATH_MAX) >= PATH_MAX) {
		ret = set_err(&c, -ENAMETOOLONG, false, "path too long (PATH_MAX or more bytes)");
		goto out;
	}
	c.st = calloc(n, sizeof(*c.st));
	if (!c.st) {
		ret = set_err(&c, -ENOMEM, false, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (parse_req(reqs[i].name, &c.st[i])) {
			ret = set_err(&c, -EINVAL, false, "bad symbol name '%s'",
				      reqs[i].name ? reqs[i].name : "(null)");
			goto out;
		}
	}
	pthread_once(&elf_once, elf_init);
	if (!elf_ready) {
		ret = set_err(&c, -ENOEXEC, false, "libelf: %s", elf_msg());
		goto out;
	}

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		ret = -errno;
		set_err(&c, ret, true, "open: %s", strerror(-ret));
		goto out;
	}
	if (fstat(fd, &stbuf)) {
		ret = -errno;
		set_err(&c, ret, true, "fstat: %s", strerror(-ret));
		goto out;
	}
	if (S_ISDIR(stbuf.st_mode)) {
		ret = set_err(&c, -EISDIR, true, "is a directory");
		goto out;
	}
	if (!S_ISREG(stbuf.st_mode)) {
		ret = set_err(&c, -ENOEXEC, true, "not a regular file");
		goto out;
	}
	if (!stbuf.st_size) {
		ret = set_err(&c, -ENOEXEC, true, "empty file, not an ELF file");
		goto out;
	}
	/* ELF_C_READ: pread on demand, no mmap, so a file cut under us cannot SIGBUS. */
	c.elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!c.elf) {
		ret = set_err(&c, -ENOEXEC, true, "not an ELF file: %s", elf_msg());
		goto out;
	}
	ret = resolve_elf(&c, stbuf.st_size);

out:
	if (reqs)
		for (i = 0; i < n; i++)
			reqs[i].offset = ret ? ret : c.st[i].offset;
	if (c.elf)
		elf_end(c.elf);
	if (fd >= 0)
		close(fd);
	free(c.phdrs);
	free(c.vers);
	free(c.st);
	return ret;
}

long bpftel_elf_sym_offset(const char *path, const char *name, char *err, size_t errlen)
{
	struct bpftel_elf_sym_req req = {.name = name};
	struct ctx c = {.path = path, .err = err, .errlen = errlen};
	int ret;

	ret = bpftel_elf_resolve(path, &req, 1, err, errlen);
	if (ret)
		return ret;
	if (req.offset < 0)
		set_err(&c, (int)req.offset, true, "symbol '%s' not found", name);
	return req.offset;
}
