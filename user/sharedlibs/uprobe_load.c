// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The registry's side of the agent's overhead accounting (uprobes.h): which programs
 * are entry or return probes, calls counted per file, and shedding a module's load on
 * one file and taking it back, with the mechanics idle files use (reaper, guard).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "uprobes_internal.h"
#include "user/common/log.h"
#include "user/manager/manager.h"

/* Does module me probe the entry of the function spec s probes the return of? */
static bool entry_probed(const struct mod_entry *me, const struct bpftel_uprobe_spec *s)
{
	size_t i;

	for (i = 0; i < me->nspecs; i++) {
		if (!me->specs[i].retprobe && me->specs[i].lib == s->lib &&
		    !strcmp(me->specs[i].symbol, s->symbol))
			return true;
	}
	return false;
}

size_t bpftel_uprobes__programs(struct bpftel_uprobes *u, struct bpftel_uprobe_prog *out,
				size_t max)
{
	const struct bpftel_uprobe_spec *sp;
	size_t n = 0, mi, i, k;

	pthread_mutex_lock(&u->lock);
	for (mi = 0; mi < u->nmods; mi++) {
		for (i = 0; i < u->mods[mi].nspecs; i++) {
			sp = &u->mods[mi].specs[i];
			for (k = 0; k < n && (strcmp(out[k].module, u->mods[mi].name) ||
					      strcmp(out[k].prog, sp->prog));
			     k++)
				;
			if (k == n) {
				if (n == max)
					continue;
				memset(&out[n], 0, sizeof(out[n]));
				snprintf(out[n].module, sizeof(out[n].module), "%s",
					 u->mods[mi].name);
				snprintf(out[n].prog, sizeof(out[n].prog), "%s", sp->prog);
				out[n].ret_paired = true;
				n++;
			}
			if (sp->retprobe) {
				out[k].ret = true;
				out[k].ret_paired &= entry_probed(&u->mods[mi], sp);
			} else {
				out[k].entry = true;
				out[k].entry_kind |= __atomic_load_n(&u->mods[mi].entry_kind[i],
								     __ATOMIC_RELAXED);
				out[k].entry_libs |= 1u << sp->lib;
			}
		}
	}
	pthread_mutex_unlock(&u->lock);
	return n;
}

static int mod_index_locked(struct bpftel_uprobes *u, const char *module)
{
	size_t mi;

	for (mi = 0; mi < u->nmods; mi++) {
		if (!strcmp(u->mods[mi].name, module))
			return (int)mi;
	}
	return -1;
}

int bpftel_uprobes__shed(struct bpftel_uprobes *u, const char *module,
			  const struct bpftel_uprobe_file_load *file)
{
	struct ulink links[MAX_SPECS];
	char path[PATH_MAX];
	struct release_ctx *rc;
	struct lib_file *f;
	struct file_mod *fm;
	size_t n, i;
	int mi;

	pthread_mutex_lock(&u->lock);
	mi = mod_index_locked(u, module);
	/* A module stopped since its loads were read: its stop cleared the shed marks,
	 * and one set now would outlive it (its next instance never attaching the file). */
	f = mi < 0 || !u->mods[mi].obj
		    ? NULL
		    : find_file(u, (dev_t)file->dev, file->ino, (dev_t)file->sdev);
	if (!f || f->mods[mi].st == FM_BUSY) {
		pthread_mutex_unlock(&u->lock);
		return !f ? -ENOENT : -EBUSY;
	}
	f->shed |= 1u << mi;
	fm = &f->mods[mi];
	n = fm->nlinks;
	memcpy(links, fm->links, n * sizeof(links[0]));
	memset(fm, 0, sizeof(*fm));
	watch_drop_locked(u, f); /* the last module's links shed: nothing left to guard */
	/* The file's guard: a re-attach waits for these to be gone (collect_jobs). */
	f->releasing += n;
	/* For the log: once the links are handed over, the last one's callback may free f
	 * (a file no process uses any more). */
	snprintf(path, sizeof(path), "%s", f->path);
	pthread_mutex_unlock(&u->lock);
	pr_debug("uprobes: module '%s': %s shed (%zu links)", module, path, n);
	/* The module runs (no gate to close): its programs still see this file until the
	 * reaper gets to the links, a few ms. Last attached first: entries before returns
	 * (uprobe_attach.c: attach_single). */
	for (i = n; i-- > 0;) {
		rc = malloc(sizeof(*rc));
		if (!rc) {
			links_drop(&links[i], 1, false);
			release_account(u, f);
			continue;
		}
		*rc = (struct release_ctx){.u = u, .f = f};
		bpftel_release(links[i].link, links[i].link ? -1 : links[i].fd, release_done, rc);
	}
	return 0;
}

int bpftel_uprobes__unshed(struct bpftel_uprobes *u, const char *module,
			    const struct bpftel_uprobe_file_load *file)
{
	struct attach_job jobs[MAX_MODS];
	struct lib_file *f;
	size_t njobs = 0;
	int mi;

	pthread_mutex_lock(&u->lock);
	mi = mod_index_locked(u, module);
	f = mi < 0 ? NULL : find_file(u, (dev_t)file->dev, file->ino, (dev_t)file->sdev);
	if (f) {
		f->shed &= ~(1u << mi);
		/* Now if it is in use and its old links are gone; else the next sweep. */
		njobs = collect_jobs(u, f, (size_t)mi, jobs);
	}
	pthread_mutex_unlock(&u->lock);
	if (njobs)
		attach_run(u, f, jobs, njobs, -1);
	return f ? 0 : -ENOENT;
}

void file_hits(int fd, const struct lib_file *f, __u64 hit[UPROBE_HITS_KINDS])
{
	__u32 slot, k;

	for (k = 0; k < UPROBE_HITS_KINDS; k++) {
		slot = UPROBE_HITS_SLOT(f->slot, k);
		if (fd < 0 || bpf_map_lookup_elem(fd, &slot, &hit[k]))
			hit[k] = 0;
	}
}

int bpftel_uprobes__file_loads(struct bpftel_uprobes *u, const char *module,
			       struct bpftel_uprobe_file_load **out)
{
	struct bpftel_uprobe_file_load *arr, *r;
	__u64 hit[UPROBE_HITS_KINDS];
	const struct mod_entry *me;
	struct bpf_map *hits;
	struct lib_file *f;
	size_t i, k, n = 0;
	int mi, fd = -1, ret;

	*out = NULL;
	pthread_mutex_lock(&u->lock);
	mi = mod_index_locked(u, module);
	me = mi < 0 ? NULL : &u->mods[mi];
	if (!me || !me->obj) {
		pthread_mutex_unlock(&u->lock);
		return 0; /* not running: nothing attached, nothing counted */
	}
	hits = bpf_object__find_map_by_name(me->obj, "uprobe_hits");
	fd = hits ? bpf_map__fd(hits) : -1;
	arr = calloc(u->nfiles + 1, sizeof(*arr));
	for (i = 0; arr && i < u->nfiles; i++) {
		f = u->files[i];
		if (!wants(me, f->lib) || f->refused >= 0)
			continue;
		r = &arr[n++];
		r->dev = f->dev;
		r->ino = f->ino;
		r->sdev = f->sdev;
		snprintf(r->path, sizeof(r->path), "%s", f->path);
		r->lib = f->lib;
		r->shed = f->shed & (1u << mi);
		r->attached = f->mods[mi].nlinks > 0;
		r->entry_kind = f->mods[mi].entry_kind;
		r->nprocs = f->nprocs;
		for (k = 0; k < f->nprocs && k < BPFTEL_UPROBE_LOAD_PIDS; k++)
			r->pids[k] = f->procs[k].pid;
		file_hits(fd, f, hit);
		r->calls[0] = hit[UPROBE_HIT_ENTRY] + hit[UPROBE_HIT_STEPPED];
		r->calls[1] = hit[UPROBE_HIT_RETURN];
		r->calls_stepped = hit[UPROBE_HIT_STEPPED];
		r->counted = fd >= 0;
	}
	pthread_mutex_unlock(&u->lock);
	ret = arr ? (int)n : -ENOMEM;
	*out = arr;
	return ret;
}
