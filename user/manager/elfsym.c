// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ELF symbol resolver for uprobes: symbol name (optionally versioned) to file offset.
 * See elfsym.h for the API, the matching rules and the caps.
 *
 * A parse is one or two passes, each its own libelf handle checked by elfcheck.c: pass 1
 * reads .dynsym (with its versions), pass 2 reads .symtab only when that can still change
 * an answer. libelf keeps a section's data until elf_end(), so two handles are what keeps
 * one table resident at a time; what a pass found lives in struct req_state, which holds
 * no libelf memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <gelf.h>

#include "user/common/escape.h"
#include "user/manager/elfcheck.h"
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
	long code_lo, code_hi; /* the file bytes of the executable PT_LOAD holding it */
};

struct strtab {
	const char *buf; /* last byte NUL, so every name in it ends */
	size_t size;
};

struct ctx {
	const char *label;
	char fdlabel[24];
	char *err;
	size_t errlen;
	int fd;
	struct bpftel_elfck ck; /* this pass's libelf handle and checked tables */
	GElf_Phdr *phdrs;	/* ck.phnum of them */
	const char **vers;	/* by version index; names point into this pass's libelf data */
	struct req_state *st;
	size_t n;
	size_t maxbase; /* the longest baselen of st: a name's bytes past it never match */
};

static pthread_once_t elf_once = PTHREAD_ONCE_INIT;
static bool elf_ready;

static void elf_init(void)
{
	elf_ready = elf_version(EV_CURRENT) != EV_NONE;
}

__attribute__((format(printf, 4, 5))) static int set_err(struct ctx *c, int ret, bool with_label,
							 const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (!c->err || !c->errlen)
		return ret;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* One line, whatever the label holds, and the reason whole past a long label. */
	bpftel_labeled(c->err, c->errlen, with_label && c->label ? c->label : "", msg);
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

/*
 * Whether .symtab could still change an answer: consider() never replaces an exact match
 * by a global or weak symbol, and .symtab has nothing better to offer.
 */
static bool symtab_can_help(const struct ctx *c)
{
	size_t i;

	for (i = 0; i < c->n; i++)
		if (c->st[i].rank != RANK_EXACT || c->st[i].local)
			return true;
	return false;
}

/* Virtual address to file offset: through the PT_LOAD holding it, else its section.
 * [*lo, *hi): that segment's bytes in the file when it is executable and lies inside
 * the file, else empty. */
static int sym_file_offset(struct ctx *c, const GElf_Sym *sym, long *off, long *lo, long *hi)
{
	GElf_Addr v = sym->st_value;
	GElf_Shdr sh;
	Elf_Scn *scn;
	size_t i;

	for (i = 0; i < c->ck.phnum; i++) {
		const GElf_Phdr *ph = &c->phdrs[i];

		if (ph->p_type != PT_LOAD || v < ph->p_vaddr || v - ph->p_vaddr >= ph->p_filesz)
			continue;
		if (ph->p_offset > LONG_MAX || v - ph->p_vaddr > LONG_MAX - ph->p_offset)
			continue;
		*off = (long)(v - ph->p_vaddr + ph->p_offset);
		*lo = *hi = 0;
		if ((ph->p_flags & PF_X) && ph->p_offset <= c->ck.fsize &&
		    ph->p_filesz <= c->ck.fsize - ph->p_offset) {
			*lo = (long)ph->p_offset;
			*hi = (long)(ph->p_offset + ph->p_filesz);
		}
		return 0;
	}
	if (sym->st_shndx >= SHN_LORESERVE)
		return -ENOENT;
	scn = elf_getscn(c->ck.elf, sym->st_shndx);
	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
		return -ENOENT;
	if (v < sh.sh_addr || v - sh.sh_addr >= sh.sh_size)
		return -ENOENT;
	if (sh.sh_offset > LONG_MAX || v - sh.sh_addr > LONG_MAX - sh.sh_offset)
		return -ENOENT;
	*off = (long)(v - sh.sh_addr + sh.sh_offset);
	*lo = *hi = 0;
	return 0;
}

static const char *str_at(const struct strtab *s, size_t off)
{
	return off < s->size ? s->buf + off : NULL;
}

/* Names are looked up here, not by elf_strptr(): one end check instead of a scan per name. */
static int load_strtab(struct ctx *c, size_t ndx, const char *what, struct strtab *s)
{
	Elf_Data *d = elf_getdata(elf_getscn(c->ck.elf, ndx), NULL);

	if (!d || (d->d_size && (!d->d_buf || ((const char *)d->d_buf)[d->d_size - 1])))
		return set_err(c, -ENOEXEC, true, "malformed ELF: string table of %s", what);
	s->buf = d->d_buf;
	s->size = d->d_size;
	return 0;
}

/* Version index to name, from .gnu.version_d (first auxiliary entry of each definition). */
static int load_verdef(struct ctx *c, const struct bpftel_elfck_table *t)
{
	Elf_Data *d = elf_getdata(elf_getscn(c->ck.elf, t->ndx), NULL);
	size_t off = 0, i, max;
	struct strtab names;
	int ret;

	if (!d)
		return set_err(c, -ENOEXEC, true, "malformed ELF: .gnu.version_d: %s", elf_msg());
	ret = load_strtab(c, t->sh.sh_link, ".gnu.version_d", &names);
	if (ret)
		return ret;
	max = d->d_size / sizeof(Elf32_Verdef);
	if (t->sh.sh_info < max)
		max = t->sh.sh_info;
	if (max > BPFTEL_ELF_MAX_VERDEFS)
		max = BPFTEL_ELF_MAX_VERDEFS;
	if (!max)
		return 0;
	c->vers = calloc(VERSYM_NDX + 1, sizeof(*c->vers));
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
			name = str_at(&names, va.vda_name);
			/* The first definition of an index wins. */
			if (name && *name && !c->vers[vd.vd_ndx & VERSYM_NDX])
				c->vers[vd.vd_ndx & VERSYM_NDX] = name;
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
	long off, lo, hi;
	bool better;

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
	if (!better || sym_file_offset(c, sym, &off, &lo, &hi))
		return;
	r->rank = rank;
	r->verndx = verndx;
	r->local = local;
	r->offset = off;
	r->code_lo = lo;
	r->code_hi = hi;
}

/* The version of symbol i: from a literal "name@VER" / "name@@VER", else from versym. */
static const char *sym_version(const struct ctx *c, const char *at, Elf_Data *versym, size_t i,
			       bool *hidden, unsigned int *verndx)
{
	GElf_Versym vs;

	if (at) {
		*hidden = at[1] != '@';
		return *hidden ? at + 1 : at + 2;
	}
	if (!versym || i >= versym->d_size / sizeof(GElf_Versym) ||
	    !gelf_getversym(versym, (int)i, &vs))
		return NULL;
	*hidden = vs & VERSYM_HIDDEN;
	*verndx = vs & VERSYM_NDX;
	return *verndx > 1 && c->vers ? c->vers[*verndx] : NULL;
}

/* One symbol table; versym (may be NULL) is the .gnu.version paired with .dynsym. */
static int scan_table(struct ctx *c, const struct bpftel_elfck_table *t, Elf_Data *versym,
		      const char *what)
{
	Elf_Data *d = elf_getdata(elf_getscn(c->ck.elf, t->ndx), NULL);
	struct strtab names;
	size_t nsym, i, j;
	int ret;

	if (!d)
		return set_err(c, -ENOEXEC, true, "malformed ELF: %s: %s", what, elf_msg());
	ret = load_strtab(c, t->sh.sh_link, what, &names);
	if (ret)
		return ret;
	nsym = d->d_size / c->ck.symsz;
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
		name = str_at(&names, sym.st_name);
		if (!name || !*name)
			continue;
		/* Only as far as a request's name reaches: every symbol may name the same
		 * 16 MiB string, and a scan of it whole per symbol would be quadratic. */
		baselen = strnlen(name, c->maxbase + 1);
		at = memchr(name, '@', baselen);
		if (at)
			baselen = (size_t)(at - name);
		else if (baselen > c->maxbase)
			continue;
		for (j = 0; j < c->n; j++) {
			struct req_state *r = &c->st[j];

			if (r->baselen != baselen || memcmp(r->base, name, baselen))
				continue;
			if (!versioned_done) {
				versioned_done = true;
				ver = sym_version(c, at, versym, i, &hidden, &verndx);
			}
			consider(c, r, &sym, ver, hidden, verndx);
		}
	}
	return 0;
}

/* .dynsym, with its versions when .gnu.version and .gnu.version_d belong to it. */
static int scan_dynsym(struct ctx *c)
{
	Elf_Data *versym = NULL;
	int ret;

	if (c->ck.versym.ndx) {
		versym = elf_getdata(elf_getscn(c->ck.elf, c->ck.versym.ndx), NULL);
		if (!versym)
			return set_err(c, -ENOEXEC, true, "malformed ELF: .gnu.version: %s",
				       elf_msg());
		ret = load_verdef(c, &c->ck.verdef);
		if (ret)
			return ret;
	}
	return scan_table(c, &c->ck.dynsym, versym, ".dynsym");
}

static int load_phdrs(struct ctx *c)
{
	size_t i;

	if (!c->ck.phnum)
		return 0;
	c->phdrs = calloc(c->ck.phnum, sizeof(*c->phdrs));
	if (!c->phdrs)
		return set_err(c, -ENOMEM, false, "out of memory");
	for (i = 0; i < c->ck.phnum; i++)
		if (!gelf_getphdr(c->ck.elf, (int)i, &c->phdrs[i]))
			return set_err(c, -ENOEXEC, true, "malformed ELF: program header %zu: %s",
				       i, elf_msg());
	return 0;
}

/* One libelf handle over the checked file, with its program headers. */
static int begin_pass(struct ctx *c)
{
	int ret = bpftel_elfck__begin(&c->ck, c->fd);

	if (ret)
		return set_err(c, ret, true, "%s", c->ck.msg);
	return load_phdrs(c);
}

/* Releases everything the handle read; names in c->vers point there, so they go first. */
static void end_pass(struct ctx *c)
{
	free(c->vers);
	c->vers = NULL;
	free(c->phdrs);
	c->phdrs = NULL;
	bpftel_elfck__end(&c->ck);
}

/* .dynsym first; .symtab in a second handle, only if it can still change an answer. */
static int resolve(struct ctx *c)
{
	bool again = false;
	int ret;

	ret = begin_pass(c);
	if (!ret && c->ck.dynsym.ndx) {
		ret = scan_dynsym(c);
		again = !ret && c->ck.symtab.ndx && symtab_can_help(c);
	} else if (!ret && c->ck.symtab.ndx) {
		ret = scan_table(c, &c->ck.symtab, NULL, ".symtab");
	}
	end_pass(c);
	if (!again)
		return ret;
	/* Checked again from the start: the file may have changed since the first pass. */
	ret = begin_pass(c);
	if (!ret && c->ck.symtab.ndx)
		ret = scan_table(c, &c->ck.symtab, NULL, ".symtab");
	end_pass(c);
	return ret;
}

static void set_label(struct ctx *c, const char *label, int fd)
{
	if (label) {
		c->label = label;
		return;
	}
	snprintf(c->fdlabel, sizeof(c->fdlabel), "fd %d", fd);
	c->label = c->fdlabel;
}

/* Requests parsed and libelf ready: what both entry points check before any file access. */
static int prepare(struct ctx *c, struct bpftel_elf_sym_req *reqs, size_t n)
{
	size_t i;

	if (!reqs || !n)
		return set_err(c, -EINVAL, false, "bad arguments (symbols or count)");
	c->st = calloc(n, sizeof(*c->st));
	if (!c->st)
		return set_err(c, -ENOMEM, false, "out of memory");
	for (i = 0; i < n; i++) {
		if (parse_req(reqs[i].name, &c->st[i]))
			return set_err(c, -EINVAL, false, "bad symbol name '%s'",
				       reqs[i].name ? reqs[i].name : "(null)");
		if (c->st[i].baselen > c->maxbase)
			c->maxbase = c->st[i].baselen;
	}
	pthread_once(&elf_once, elf_init);
	if (!elf_ready)
		return set_err(c, -ENOEXEC, false, "libelf: %s", elf_msg());
	return 0;
}

/* Every request gets the call's error, or else its own result. */
static int finish(struct ctx *c, struct bpftel_elf_sym_req *reqs, int ret)
{
	size_t i;

	if (reqs)
		for (i = 0; i < c->n; i++) {
			reqs[i].offset = ret ? ret : c->st[i].offset;
			reqs[i].code_lo = ret ? 0 : c->st[i].code_lo;
			reqs[i].code_hi = ret ? 0 : c->st[i].code_hi;
		}
	free(c->st);
	return ret;
}

int bpftel_elf_resolve_fd(int fd, const char *label, struct bpftel_elf_sym_req *reqs, size_t n,
			  char *err, size_t errlen)
{
	struct ctx c = {.err = err, .errlen = errlen, .fd = fd, .n = n};
	int ret;

	if (err && errlen)
		err[0] = '\0';
	set_label(&c, label, fd);
	ret = prepare(&c, reqs, n);
	if (!ret && fd < 0)
		ret = set_err(&c, -EBADF, true, "bad file descriptor");
	if (!ret)
		ret = resolve(&c);
	return finish(&c, reqs, ret);
}

int bpftel_elf_resolve(const char *path, struct bpftel_elf_sym_req *reqs, size_t n, char *err,
		       size_t errlen)
{
	struct ctx c = {.label = path, .err = err, .errlen = errlen, .fd = -1, .n = n};
	int ret;

	if (err && errlen)
		err[0] = '\0';
	if (!path || !*path)
		ret = set_err(&c, -EINVAL, false, "bad arguments (path)");
	else if (strnlen(path, PATH_MAX) >= PATH_MAX)
		ret = set_err(&c, -ENAMETOOLONG, false, "path too long (PATH_MAX or more bytes)");
	else
		ret = prepare(&c, reqs, n);
	if (!ret) {
		/* O_NONBLOCK: a FIFO never blocks the open; O_NOCTTY: a tty never adopts us. */
		c.fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
		if (c.fd < 0) {
			ret = -errno;
			set_err(&c, ret, true, "open: %s", strerror(-ret));
		}
	}
	if (!ret)
		ret = resolve(&c);
	if (c.fd >= 0)
		close(c.fd);
	return finish(&c, reqs, ret);
}

/* The one-symbol calls report an absent symbol like a failure of the call. */
static long one_result(const struct bpftel_elf_sym_req *req, const char *label, int fd, char *err,
		       size_t errlen)
{
	struct ctx c = {.err = err, .errlen = errlen};

	if (req->offset >= 0)
		return req->offset;
	set_label(&c, label, fd);
	return set_err(&c, (int)req->offset, true, "symbol '%s' not found", req->name);
}

long bpftel_elf_sym_offset_fd(int fd, const char *label, const char *name, char *err, size_t errlen)
{
	struct bpftel_elf_sym_req req = {.name = name};
	int ret = bpftel_elf_resolve_fd(fd, label, &req, 1, err, errlen);

	return ret ? ret : one_result(&req, label, fd, err, errlen);
}

long bpftel_elf_sym_offset(const char *path, const char *name, char *err, size_t errlen)
{
	struct bpftel_elf_sym_req req = {.name = name};
	int ret = bpftel_elf_resolve(path, &req, 1, err, errlen);

	return ret ? ret : one_result(&req, path, -1, err, errlen);
}
