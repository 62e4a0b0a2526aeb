// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Attaching modules' uprobes to one library file: open it safely, parse it once for
 * every module's symbols, and create the links (multi-uprobe or per probe point). Runs
 * without the registry's lock (see uprobes_internal.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "uprobes_internal.h"
#include "user/common/procmap.h"
#include "user/common/ctl.h"
#include "user/common/log.h"
#include "user/manager/elfsym.h"
#include "user/manager/goexe.h"
#include "user/manager/prologue.h"
#include "user/manager/tailread.h"
#include "user/manager/codemove.h"
#include "user/manager/manager.h"
#include "user/manager/uprobe_multi.h"

#define MAX_GROUPS 4 /* distinct (program, return) pairs of one module */

/* Last attached first: entries before returns (attach_single says why). */
void links_drop(struct ulink *links, size_t n, bool gated)
{
	size_t i;

	for (i = n; i-- > 0;) {
		if (gated) {
			bpftel_release(links[i].link, links[i].link ? -1 : links[i].fd, NULL, NULL);
		} else if (links[i].link) {
			bpf_link__destroy(links[i].link);
		} else if (links[i].fd >= 0) {
			close(links[i].fd);
		}
	}
}

/*
 * A mapping of f in pid's address space, as "start-end" for map_files: the kernel's own
 * reference to the file, whatever has become of its path since. /proc/<pid>/maps shows
 * the file the process opened: on overlayfs on newer kernels the overlay's (f's alias, the
 * identity the kernel reported for the open), before that the layer's (f's own). The
 * one found in *dev, *ino.
 */
static bool find_mapping(__u32 pid, const struct lib_file *f, char *range, size_t len,
			 dev_t *dev, __u64 *ino)
{
	char path[64], line[512];
	unsigned long start, end;
	unsigned int major, minor;
	struct bpftel_maps_text maps = {0};
	unsigned long long i;
	bool found = false;

	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	maps.f = fopen(path, "re");
	if (!maps.f)
		return false;
	/* A long line's head holds what is read here: its path is not. */
	while (!found && bpftel_maps_text_next(&maps, line, sizeof(line))) {
		if (sscanf(line, "%lx-%lx %*s %*x %x:%x %llu", &start, &end, &major, &minor, &i) !=
		    5)
			continue;
		*dev = makedev(major, minor);
		*ino = i;
		if ((*dev == f->dev && *ino == f->ino) ||
		    (*dev == f->alias_dev && *ino == f->alias_ino)) {
			snprintf(range, len, "%lx-%lx", start, end);
			found = true;
		}
	}
	fclose(maps.f);
	return found;
}

/*
 * Open t, and keep it only if it maps f's file (what the kernel probes). A path can
 * lead to the same overlay inode, and the same stat, over another file: an overlayfs
 * copy-up (a chmod, a write, in one container) gives that container's overlay a private
 * copy while the other containers' processes, and this one's older mappings, still map
 * the shared layer's. Probes put on the copy would miss them all. On btrfs, a path can
 * lead to another subvolume's file of the same numbers (lib_file.sdev).
 */
static int open_as_file(const struct lib_file *f, const struct bpftel_procfile_target *t,
			struct stat *st, enum bpftel_refusal *why)
{
	dev_t dev = 0, sdev = 0;
	__u64 ino = 0;
	int fd;

	fd = bpftel_procfile_open_mapped(t, st, why, &dev, &ino, &sdev);
	if (fd >= 0 && (dev != f->dev || ino != f->ino || !same_sdev(f, sdev))) {
		close(fd);
		*why = BPFTEL_REFUSED_IDENTITY_CHANGED;
		fd = -ESTALE;
	}
	return fd;
}

/*
 * Open f through one of its processes, newest first: by the path each named it, and
 * when that no longer leads to the file (a hostile swap, a copy-up: refused and counted,
 * once per run of failed reopens), by the process's mapping of it. -errno if none
 * reaches it.
 */
static int open_through_procs(struct bpftel_uprobes *u, struct lib_file *f)
{
	struct bpftel_procfile_target t[BPFTEL_REOPEN_PATHS];
	enum bpftel_refusal why;
	char range[48], detail[128], what[96];
	struct stat st = {};
	size_t n = 0, i;
	int fd = -ENOENT;
	bool counted;
	__u64 ino;
	dev_t dev;

	pthread_mutex_lock(&u->lock);
	counted = f->reopen_fails > 0;
	/* The newest processes first; one whose path was not kept (an older one's) is
	 * reached through its mapping only. */
	for (i = f->nprocs; i-- > 0 && n < BPFTEL_REOPEN_PATHS;) {
		t[n] = (struct bpftel_procfile_target){
			.pid = f->procs[i].pid,
			.dirfd = f->procs[i].dirfd,
			.path = f->procs[i].path ? strdup(f->procs[i].path) : NULL,
			.dev = f->procs[i].dev,
			.ino = f->procs[i].ino,
		};
		if (t[n].path || !f->procs[i].path)
			n++;
	}
	pthread_mutex_unlock(&u->lock);
	for (i = 0; i < n && fd < 0; i++) {
		why = BPFTEL_REFUSED__COUNT;
		fd = t[i].path ? open_as_file(f, &t[i], &st, &why) : -ENOENT;
		if (fd < 0 && why < BPFTEL_REFUSED__COUNT && !counted) {
			bpftel_procfile_explain(why, &st, fd, what, sizeof(what));
			snprintf(detail, sizeof(detail), "reopening it: %s", what);
			pthread_mutex_lock(&u->lock);
			refusal_locked(u, t[i].pid, f->lib, t[i].path, why, detail);
			pthread_mutex_unlock(&u->lock);
		}
		if (fd < 0 && (t[i].dirfd != BPFTEL_PROCFILE_MAPPED || !t[i].path) &&
		    find_mapping(t[i].pid, f, range, sizeof(range), &dev, &ino))
			fd = open_as_file(f,
					  &(struct bpftel_procfile_target){
						  .pid = t[i].pid,
						  .dirfd = BPFTEL_PROCFILE_MAPPED,
						  .path = range,
						  .dev = dev,
						  .ino = ino},
					  &st, &why);
	}
	for (i = 0; i < n; i++)
		free((char *)t[i].path);
	return fd;
}

static void add_fail(struct file_mod *fm, const char *symbol, int err)
{
	if (fm->nfail < BPFTEL_UPROBE_MAX_FAIL) {
		snprintf(fm->fail[fm->nfail].symbol, sizeof(fm->fail[0].symbol), "%s", symbol);
		fm->fail[fm->nfail].err = err;
	}
	fm->nfail++;
}

/* Where one spec's probes go in one file: one point (a library's function), or for a
 * Go executable's RET probes, one per RET. */
struct points {
	long err;    /* 0, or why the spec has no point here (a negative errno) */
	__u32 flags; /* ORed into the cookie's low half: UPROBE_GO_STACK_CHECK */
	__u32 stepped; /* bit k: entry point k is on an instruction the kernel single-steps */
	size_t folded_into; /* 1 + the spec whose probe on a shared callee covers this one */
	size_t n;
	long at[BPFTEL_GO_MAX_RETS];
	/* The file bytes of the executable segment holding the symbol (elfsym.h): a move
	 * by a call's or jump's displacement must land inside them. Empty: no move. */
	long code_lo, code_hi;
};

struct group {
	const char *prog;
	bool retprobe;
	size_t n;
	unsigned long offsets[MAX_SPECS];
	__u64 cookies[MAX_SPECS];
	const char *symbols[MAX_SPECS];
};

/* What the program sees in bpf_get_attach_cookie() at point k: the spec's cookie, and
 * when the module's object counts calls per file, the slot of this file's calls of
 * that point's kind (bpf/uprobe_hits.h). */
static __u64 cookie_of(const struct bpftel_uprobe_spec *s, int slot, const struct points *p,
		       size_t k)
{
	__u64 what = s->cookie | p->flags;
	enum uprobe_hit_kind kind = s->retprobe		     ? UPROBE_HIT_RETURN
				    : (p->stepped >> k) & 1u ? UPROBE_HIT_STEPPED
							     : UPROBE_HIT_ENTRY;

	return slot < 0 ? what
			: UPROBE_HITS_COOKIE(UPROBE_HITS_SLOT((unsigned int)slot, kind), what);
}

/* One multi-uprobe link per (program, direction), or more where it has more points than
 * one link takes (BPFTEL_UPROBE_MULTI_MAX). */
static void attach_multi(const struct mod_entry *me, struct bpf_object *obj, enum shlib_lib lib,
			 const char *path, const struct points *pts, int slot, struct file_mod *fm)
{
	struct group g[MAX_GROUPS] = {};
	size_t ng = 0, i, j, k, pass, at, cnt;
	struct bpf_program *prog;
	int fd;

	for (i = 0; i < me->nspecs; i++) {
		const struct bpftel_uprobe_spec *s = &me->specs[i];

		if (s->lib != lib)
			continue;
		if (pts[i].err) {
			if (s->optional && pts[i].err == -ENOENT)
				fm->nskipped++;
			else
				add_fail(fm, s->symbol, (int)pts[i].err);
			continue;
		}
		for (j = 0; j < ng && (strcmp(g[j].prog, s->prog) || g[j].retprobe != s->retprobe);
		     j++)
			;
		if (j == ng) {
			if (ng == MAX_GROUPS) {
				add_fail(fm, s->symbol, -E2BIG);
				continue;
			}
			g[ng].prog = s->prog;
			g[ng++].retprobe = s->retprobe;
		}
		for (k = 0; k < pts[i].n; k++) {
			if (g[j].n == MAX_SPECS) {
				add_fail(fm, s->symbol, -E2BIG);
				break;
			}
			g[j].offsets[g[j].n] = (unsigned long)pts[i].at[k];
			g[j].cookies[g[j].n] = cookie_of(s, slot, &pts[i], k);
			g[j].symbols[g[j].n++] = s->symbol;
		}
	}
	/* Returns in the first pass, entries in the second (attach_single says why). */
	for (pass = 0; pass < 2 * ng; pass++) {
		j = pass % ng;
		if (g[j].retprobe != (pass < ng))
			continue;
		prog = bpf_object__find_program_by_name(obj, g[j].prog);
		for (at = 0; at < g[j].n; at += cnt) {
			cnt = g[j].n - at < BPFTEL_UPROBE_MULTI_MAX ? g[j].n - at
								    : BPFTEL_UPROBE_MULTI_MAX;
			fd = prog ? bpftel_uprobe_multi_attach(bpf_program__fd(prog), path,
							       g[j].offsets + at, g[j].cookies + at,
							       cnt, g[j].retprobe, 0)
				  : -ENOENT;
			if (fd < 0) {
				for (i = at; i < at + cnt; i++)
					add_fail(fm, g[j].symbols[i], fd);
				continue;
			}
			fm->links[fm->nlinks++] = (struct ulink){.fd = fd};
			fm->attached += cnt;
		}
	}
}

/*
 * One perf-event link per probe point, each with its cookie. Return probes are
 * attached before entry probes (the first pass over the specs, then the second), and
 * released after them (last attached first: links_drop, bpftel_uprobes__shed): a call
 * whose entry a probe saw then always has its return seen, which the modules' state
 * kept from entry to return relies on (the GPU module's runtime depth). A call begun
 * before the entry probe came is simply not seen; its return finds no entry.
 */
static void attach_single(const struct mod_entry *me, struct bpf_object *obj, enum shlib_lib lib,
			  const char *path, const struct points *pts, int slot, struct file_mod *fm)
{
	struct bpf_program *prog;
	struct bpf_link *link;
	size_t i, k, pass;

	for (pass = 0; pass < 2 * me->nspecs; pass++) {
		const struct bpftel_uprobe_spec *s = &me->specs[pass % me->nspecs];
		LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = s->retprobe);

		i = pass % me->nspecs;
		if (s->lib != lib || s->retprobe != (pass < me->nspecs))
			continue;
		if (pts[i].err) {
			if (s->optional && pts[i].err == -ENOENT)
				fm->nskipped++;
			else
				add_fail(fm, s->symbol, (int)pts[i].err);
			continue;
		}
		prog = bpf_object__find_program_by_name(obj, s->prog);
		for (k = 0; k < pts[i].n; k++) {
			if (fm->nlinks == MAX_SPECS) {
				add_fail(fm, s->symbol, -E2BIG);
				break;
			}
			opts.bpf_cookie = cookie_of(s, slot, &pts[i], k);
			link = prog ? bpf_program__attach_uprobe_opts(prog, -1, path,
								      (size_t)pts[i].at[k], &opts)
				    : NULL;
			if (!link) {
				add_fail(fm, s->symbol, prog ? -errno : -ENOENT);
				continue;
			}
			fm->links[fm->nlinks++] = (struct ulink){.link = link, .fd = -1};
			fm->attached++;
		}
	}
}

/* What the ELF reader's errno says about the file. */
enum bpftel_refusal refusal_of(int err)
{
	switch (err) {
	case -EFBIG:
		return BPFTEL_REFUSED_TOO_LARGE;
	case -E2BIG:
		return BPFTEL_REFUSED_TABLES_TOO_LARGE;
	case -EISDIR:
		return BPFTEL_REFUSED_NOT_REGULAR;
	case -ENOTSUP:
		return BPFTEL_REFUSED_UNSUPPORTED;
	default:
		return BPFTEL_REFUSED_NOT_ELF;
	}
}

/* An entry probe that asks for it moves past its function's prologue (prologue.h). A
 * short read leaves it on the entry. */
static long past_prologue(int fd, const struct bpftel_uprobe_spec *s, long off)
{
	unsigned char code[BPFTEL_PROLOGUE_MAX];
	ssize_t n;

	if (off < 0 || s->retprobe || !s->past_prologue)
		return off;
	n = pread(fd, code, sizeof(code), off);
	return n > 0 ? off + (long)bpftel_prologue_skip(code, (size_t)n, s->past_prologue) : off;
}

/* Note what the instructions under spec i's entry points in this file are: emulated
 * by the kernel (one trap) or single-stepped (two exceptions), per point in p->stepped
 * (their calls are counted apart) and for the spec. Unreadable: stepped, the costlier
 * guess. Returns the kinds seen. */
static unsigned char note_entry_kind(struct mod_entry *me, size_t i, int fd, struct points *p)
{
	unsigned char code[16], kind = 0;
	size_t k;
	ssize_t n;

	if (me->specs[i].retprobe)
		return 0;
	for (k = 0; k < p->n; k++) {
		n = pread(fd, code, sizeof(code), p->at[k]);
		if (n > 0 && bpftel_insn_emulated(code, (size_t)n)) {
			kind |= ENTRY_EMULATED;
		} else {
			kind |= ENTRY_STEPPED;
			p->stepped |= 1u << k;
		}
	}
	if (kind)
		__atomic_fetch_or(&me->entry_kind[i], kind, __ATOMIC_RELAXED);
	return kind;
}

static void point_set(struct points *p, long off)
{
	p->code_lo = p->code_hi = 0;
	p->flags = 0;
	p->stepped = 0;
	p->folded_into = 0;
	p->err = off < 0 ? off : 0;
	p->n = off < 0 ? 0 : 1;
	p->at[0] = off;
}

/*
 * A Go executable: its functions from .gopclntab (stripped or not), entry probes past
 * their stack checks, at_rets probes on their RETs (goexe.h). One read of the table
 * for every job's functions.
 */
static int resolve_go(struct bpftel_uprobes *u, const struct lib_file *f,
		      const struct attach_job *jobs, size_t njobs, int fd,
		      struct points (*pts)[MAX_SPECS], char *err, size_t errlen)
{
	struct bpftel_go_func *funcs = calloc(MAX_MODS * MAX_SPECS, sizeof(*funcs));
	struct bpftel_go_exe exe;
	size_t n = 0, j, i, k;
	int ret;

	if (!funcs)
		return -ENOMEM;
	for (j = 0; j < njobs; j++) {
		const struct mod_entry *me = &u->mods[jobs[j].mi];

		for (i = 0; i < me->nspecs; i++) {
			if (me->specs[i].lib != f->lib)
				continue;
			for (k = 0; k < n && strcmp(funcs[k].name, me->specs[i].symbol); k++)
				;
			if (k == n)
				funcs[n++].name = me->specs[i].symbol;
		}
	}
	ret = bpftel_go_inspect_fd(fd, f->path, &exe, funcs, n, err, errlen);
	for (j = 0; !ret && j < njobs; j++) {
		const struct mod_entry *me = &u->mods[jobs[j].mi];

		for (i = 0; i < me->nspecs; i++) {
			const struct bpftel_uprobe_spec *s = &me->specs[i];

			point_set(&pts[j][i], -ENOENT);
			for (k = 0; k < n && strcmp(funcs[k].name, s->symbol); k++)
				;
			if (k == n || funcs[k].offset < 0)
				continue;
			if (!s->at_rets) {
				/* On the stack check's JBE where there is one (goret.c). */
				point_set(&pts[j][i],
					  funcs[k].check >= 0 ? funcs[k].check : funcs[k].offset);
				pts[j][i].flags = funcs[k].check >= 0 ? UPROBE_GO_STACK_CHECK : 0;
				continue;
			}
			pts[j][i].err = funcs[k].nrets ? 0 : -ENOENT;
			pts[j][i].n = funcs[k].nrets;
			memcpy(pts[j][i].at, funcs[k].rets, funcs[k].nrets * sizeof(long));
		}
	}
	free(funcs);
	return ret;
}

/* Spec i moves to the callee it shares (uprobes.h), and the other function's probes of
 * the same program and direction are then covered: no point, and no failure. */
static void share_callee(const struct mod_entry *me, enum shlib_lib lib, int fd,
			 const struct bpftel_elf_sym_req *reqs, size_t n, struct points *pts,
			 size_t i)
{
	const struct bpftel_uprobe_spec *s = &me->specs[i], *o;
	long other = -1, callee;
	size_t k;

	if (s->lib != lib || !s->shares_callee || pts[i].err || pts[i].n != 1)
		return;
	for (k = 0; k < n; k++) {
		/* In the same segment as this one, by its symbol (codemove.h). */
		if (!strcmp(reqs[k].name, s->shares_callee) && reqs[k].code_lo == pts[i].code_lo &&
		    reqs[k].code_hi == pts[i].code_hi)
			other = reqs[k].offset;
	}
	callee = bpftel_shared_callee_fd(fd, pts[i].at[0], other, pts[i].code_lo, pts[i].code_hi);
	if (callee < 0)
		return;
	pts[i].at[0] = callee;
	for (k = 0; k < me->nspecs; k++) {
		o = &me->specs[k];
		if (o->lib == lib && !strcmp(o->symbol, s->shares_callee) &&
		    !strcmp(o->prog, s->prog) && o->retprobe == s->retprobe) {
			pts[k].n = 0;
			pts[k].folded_into = i + 1;
		}
	}
}

/*
 * Two specs of one program and cookie whose symbols are one function (an alias: a
 * library may export cuMemcpyHtoD_v2_ptds at cuMemcpyHtoD_v2's address) would be two
 * probes at one point, each call seen twice: the later folds into the earlier.
 */
static void fold_aliases(const struct mod_entry *me, enum shlib_lib lib, struct points *pts)
{
	const struct bpftel_uprobe_spec *s, *o;
	size_t i, k;

	for (i = 0; i < me->nspecs; i++) {
		s = &me->specs[i];
		if (s->lib != lib || pts[i].err || pts[i].n != 1)
			continue;
		for (k = 0; k < i; k++) {
			o = &me->specs[k];
			if (o->lib == lib && !pts[k].err && pts[k].n == 1 &&
			    pts[k].at[0] == pts[i].at[0] && o->retprobe == s->retprobe &&
			    o->cookie == s->cookie && !strcmp(o->prog, s->prog)) {
				pts[i].n = 0;
				pts[i].folded_into = k + 1;
				break;
			}
		}
	}
}

_Static_assert(BPFTEL_UPROBE_MOVED_AT == BPFTEL_TAIL_READS_MAX, "moved points: tailread.h");
_Static_assert(BPFTEL_GO_MAX_RETS <= 32, "a bit per point in points.stepped");
_Static_assert(BPFTEL_TAIL_READS_MAX <= BPFTEL_GO_MAX_RETS, "points hold the internal reads");

/*
 * A spec with typed_read (uprobes.h): its point moves to the internal reads its
 * function hands every read to (tailread.h), where that is proved and pays (one of
 * them starts with an instruction the kernel emulates; the others cost only when
 * they run: GnuTLS's kTLS read, with kTLS on). Reads the file someone else may have
 * crafted: a target outside the function's segment fails (codemove.h), and the code is
 * checked, not trusted.
 */
static void typed_reads(const struct mod_entry *me, enum shlib_lib lib, int fd,
			struct points *p, size_t i)
{
	const struct bpftel_uprobe_spec *s = &me->specs[i];
	long t[BPFTEL_TAIL_READS_MAX];
	bool pays;
	int nt;

	if (s->lib != lib || !s->typed_read || p->err || p->n != 1)
		return;
	nt = bpftel_tail_reads_fd(fd, p->at[0], p->code_lo, p->code_hi, s->typed_read, t,
				  BPFTEL_TAIL_READS_MAX, &pays);
	if (nt <= 0 || !pays)
		return;
	p->n = (size_t)nt;
	memcpy(p->at, t, (size_t)nt * sizeof(t[0]));
	p->flags |= UPROBE_TYPED_READ;
}

/* Note spec i's points, moved to internal reads (typed_reads), for `bpftel libs`. */
static void note_moved(const struct mod_entry *me, const struct points *pts, size_t i,
		       struct file_mod *fm)
{
	struct bpftel_uprobe_moved *mv;

	if (!(pts[i].flags & UPROBE_TYPED_READ) || fm->nmoved >= BPFTEL_UPROBE_MAX_MOVED)
		return;
	mv = &fm->moved[fm->nmoved++];
	snprintf(mv->symbol, sizeof(mv->symbol), "%s", me->specs[i].symbol);
	mv->retprobe = me->specs[i].retprobe;
	mv->type = me->specs[i].typed_read;
	mv->n = pts[i].n < BPFTEL_UPROBE_MOVED_AT ? pts[i].n : BPFTEL_UPROBE_MOVED_AT;
	memcpy(mv->at, pts[i].at, mv->n * sizeof(mv->at[0]));
}

/* Note spec i's point, folded into another spec's probe (share_callee), for `bpftel libs`. */
static void note_folded(const struct mod_entry *me, const struct points *pts, size_t i,
			struct file_mod *fm)
{
	struct bpftel_uprobe_folded *fo;
	size_t w;

	if (!pts[i].folded_into)
		return;
	/* Counted whatever their number: `bpftel libs` adds up every point. */
	if (fm->nfolded++ >= BPFTEL_UPROBE_MAX_FOLDED)
		return;
	w = pts[i].folded_into - 1;
	fo = &fm->folded[fm->nfolded - 1];
	snprintf(fo->symbol, sizeof(fo->symbol), "%s", me->specs[i].symbol);
	snprintf(fo->with, sizeof(fo->with), "%s", me->specs[w].symbol);
	fo->retprobe = me->specs[i].retprobe;
	fo->callee = pts[w].at[0];
}

/*
 * Resolve every symbol any job needs, in one parse. pts[j][i] is spec i of job j's
 * module. Returns 0, or the file-level errno with the reader's message in err.
 */
static int resolve(struct bpftel_uprobes *u, const struct lib_file *f, const struct attach_job *jobs,
		   size_t njobs, int fd, struct points (*pts)[MAX_SPECS], char *err, size_t errlen)
{
	struct bpftel_elf_sym_req reqs[MAX_MODS * MAX_SPECS];
	size_t n = 0, j, i, k;
	int ret;

	if (f->lib == SHLIB_LIB_GO)
		return resolve_go(u, f, jobs, njobs, fd, pts, err, errlen);

	for (j = 0; j < njobs; j++) {
		const struct mod_entry *me = &u->mods[jobs[j].mi];

		for (i = 0; i < me->nspecs; i++) {
			if (me->specs[i].lib != f->lib)
				continue;
			for (k = 0; k < n && strcmp(reqs[k].name, me->specs[i].symbol); k++)
				;
			if (k == n)
				reqs[n++] = (struct bpftel_elf_sym_req){.name = me->specs[i].symbol};
		}
	}
	if (!n)
		return 0;
	ret = bpftel_elf_resolve_fd(fd, f->path, reqs, n, err, errlen);
	if (ret)
		return ret;
	for (j = 0; j < njobs; j++) {
		const struct mod_entry *me = &u->mods[jobs[j].mi];

		for (i = 0; i < me->nspecs; i++) {
			point_set(&pts[j][i], -ENOENT);
			for (k = 0; k < n; k++) {
				if (strcmp(reqs[k].name, me->specs[i].symbol))
					continue;
				point_set(&pts[j][i],
					  past_prologue(fd, &me->specs[i], reqs[k].offset));
				pts[j][i].code_lo = reqs[k].code_lo;
				pts[j][i].code_hi = reqs[k].code_hi;
			}
		}
		for (i = 0; i < me->nspecs; i++) {
			share_callee(me, f->lib, fd, reqs, n, pts[j], i);
			typed_reads(me, f->lib, fd, &pts[j][i], i);
		}
		fold_aliases(me, f->lib, pts[j]);
	}
	return 0;
}

/* A file's counters start from 0 at its attach: its slot may have counted a file that
 * held it before (bpf/uprobe_hits.h). */
static void hits_reset(struct bpf_object *obj, unsigned int file_slot)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, "uprobe_hits");
	__u64 zero = 0;
	__u32 slot, k;

	for (k = 0; m && k < UPROBE_HITS_KINDS; k++) {
		slot = UPROBE_HITS_SLOT(file_slot, k);
		bpf_map_update_elem(bpf_map__fd(m), &slot, &zero, BPF_ANY);
	}
}

/* Has job's module instance stopped since the job was made? Its stop waits for the
 * job (me->busy): what the job would attach would only go to the reaper. */
static bool job_stale(struct bpftel_uprobes *u, const struct attach_job *job)
{
	bool stale;

	pthread_mutex_lock(&u->lock);
	stale = job->gen != u->mods[job->mi].gen;
	pthread_mutex_unlock(&u->lock);
	return stale;
}

/* ... all of them: then nothing is opened or read, and a stop waiting on a sweep's
 * attaches, one file after another, waits for none of that work. */
static bool jobs_stale(struct bpftel_uprobes *u, const struct attach_job *jobs, size_t njobs)
{
	size_t j;

	for (j = 0; j < njobs; j++) {
		if (!job_stale(u, &jobs[j]))
			return false;
	}
	return true;
}

void attach_run(struct bpftel_uprobes *u, struct lib_file *f, const struct attach_job *jobs,
		size_t njobs, int fd)
{
	struct file_mod *res = calloc(njobs, sizeof(*res));
	struct points (*pts)[MAX_SPECS] = calloc(njobs, sizeof(*pts));
	struct ulink stale[MAX_MODS * MAX_SPECS], written[MAX_MODS * MAX_SPECS];
	char path[64], err[256] = "";
	size_t nstale = 0, nwritten = 0, j;
	int own = -1, ret = -ENOMEM;
	bool skip = jobs_stale(u, jobs, njobs), unread;
	__u64 writes = 0;

	if (skip)
		fd = -1; /* not tried: as if unreachable, without counting it so */
	else if (fd < 0)
		fd = own = open_through_procs(u, f);
	/* Watched before anything is read or attached: a write after the kernel copies an
	 * instruction is then always seen (uprobe_watch.c). */
	if (fd >= 0)
		writes = watch_file(u, f, fd);
	if (fd >= 0 && res && pts) {
		ret = resolve(u, f, jobs, njobs, fd, pts, err, sizeof(err));
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		for (j = 0; !ret && j < njobs; j++) {
			struct mod_entry *me = &u->mods[jobs[j].mi];
			/* f->slot is the file's for its whole life, and f is busy: no lock. */
			int slot = bpf_object__find_map_by_name(jobs[j].obj, "uprobe_hits")
					   ? (int)f->slot
					   : -1;
			size_t i;

			for (i = 0; i < me->nspecs; i++) {
				if (me->specs[i].lib == f->lib && !pts[j][i].err)
					res[j].entry_kind |= note_entry_kind(me, i, fd, &pts[j][i]);
				note_folded(me, pts[j], i, &res[j]);
				note_moved(me, pts[j], i, &res[j]);
			}

			res[j].multi = jobs[j].multi;
			if (job_stale(u, &jobs[j]))
				continue; /* stopped while the file was read: nothing attached */
			if (slot >= 0)
				hits_reset(jobs[j].obj, (unsigned int)slot);
			if (jobs[j].multi)
				attach_multi(me, jobs[j].obj, f->lib, path, pts[j], slot, &res[j]);
			else
				attach_single(me, jobs[j].obj, f->lib, path, pts[j], slot, &res[j]);
			if (res[j].nfail)
				pr_warn("uprobes: module '%s': %s: %zu probe points failed, first %s: %s",
					me->name, f->path, res[j].nfail, res[j].fail[0].symbol,
					strerror(-res[j].fail[0].err));
		}
	}
	if (own >= 0)
		close(own);

	pthread_mutex_lock(&u->lock);
	/* Read, but not to a verdict on the file: written meanwhile (what was read may be
	 * half of each), or a read error (EIO: a disk's, a FUSE server's). */
	unread = fd >= 0 && ret && ret != -ENOMEM && (f->writes != writes || ret == -EIO);
	if ((fd < 0 || unread) && f->nprocs && !skip) {
		/* Its processes live but none reaches it (a path swapped, no mapping), or
		 * it was not read to a verdict (a file rewritten again and again, in a
		 * loop, must not be parsed every second): the sweep tries again later, and
		 * later each time. */
		long long delay;

		f->reopen_fails++;
		delay = f->reopen_fails < 6 ? 1000LL << f->reopen_fails : REOPEN_BACKOFF_MAX_MS;
		f->reopen_at_ms = bpftel_mono_ms() +
				  (delay < REOPEN_BACKOFF_MAX_MS ? delay : REOPEN_BACKOFF_MAX_MS);
	} else if (fd >= 0) {
		f->reopen_fails = 0;
	}
	if (fd < 0 || ret == -ENOMEM || unread) {
		/* Unreachable now (its processes went away), no memory, or not read to a
		 * verdict: not tried. A file written meanwhile is read again at the next
		 * sweep, not refused for good for what it held half-written. */
		for (j = 0; j < njobs; j++)
			f->mods[jobs[j].mi].st = FM_NONE;
	} else if (ret) {
		f->refused = refusal_of(ret);
		snprintf(f->refused_detail, sizeof(f->refused_detail), "%s", err);
		refusal_locked(u, f->nprocs ? f->procs[f->nprocs - 1].pid : 0, f->lib, f->path,
			       f->refused, err);
		for (j = 0; j < njobs; j++)
			f->mods[jobs[j].mi].st = FM_DONE;
	}
	for (j = 0; j < njobs; j++) {
		struct mod_entry *me = &u->mods[jobs[j].mi];

		if (!ret && fd >= 0 && f->writes != writes) {
			/* Written in place meanwhile: these may hold instructions the file no
			 * longer has. Released at once, under the file's guard; tried again
			 * when a process maps it. */
			memcpy(written + nwritten, res[j].links, res[j].nlinks * sizeof(written[0]));
			nwritten += res[j].nlinks;
			f->mods[jobs[j].mi].st = FM_NONE;
		} else if (!ret && fd >= 0 && jobs[j].gen == me->gen) {
			res[j].st = FM_DONE;
			f->mods[jobs[j].mi] = res[j];
		} else if (!ret && fd >= 0) {
			/* The instance stopped meanwhile (its stop waits for us): its gate is
			 * closed, so these go to the reaper with the rest of its links. */
			memcpy(stale + nstale, res[j].links, res[j].nlinks * sizeof(stale[0]));
			nstale += res[j].nlinks;
			f->mods[jobs[j].mi].st = FM_NONE;
		}
		me->busy--;
		f->busy--;
	}
	f->releasing += nwritten;
	u->ref.released_modified += nwritten > 0;
	watch_drop_locked(u, f); /* nothing attached, or nothing kept */
	pthread_cond_broadcast(&u->idle);
	pthread_mutex_unlock(&u->lock);
	links_drop(stale, nstale, true);
	hand_links(u, f, written, nwritten, true);
	free(res);
	free(pts);
}
