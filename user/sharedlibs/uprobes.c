// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The uprobe registry's tables: files, processes, sweep, scan, module hooks (uprobes.h). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "real_file.h"
#include "uprobes_internal.h"
#include "user/common/procmap.h"
#include "user/common/ctl.h"
#include "user/common/deadline_call.h"
#include "user/common/proc.h"
#include "user/common/log.h"
#include "user/manager/goexe.h"
#include "user/manager/manager.h"
#include "user/manager/uprobe_multi.h"

int bpftel_shlib_match_name(const char *path)
{
	struct shlib_config cfg;
	const char *base = strrchr(path, '/');
	size_t len, end, i;

	base = base ? base + 1 : path;
	len = strlen(base);
	/* One letter after the version's last digit, as the kernel's matcher takes it
	 * (bpf/lib/shlib_match.h): RHEL-family OpenSSL 1.x, "libssl.so.1.1.1k". */
	if (len > 1 && islower((unsigned char)base[len - 1]) &&
	    isdigit((unsigned char)base[len - 2]))
		len--; /* "1.1.1o" too: ".so" has an 's' before its 'o' */
	end = len;
	/* Strip ".<digits and single dots>" that starts and ends with a digit. */
	if (len && isdigit((unsigned char)base[len - 1])) {
		i = len;
		while (i > 0 && (isdigit((unsigned char)base[i - 1]) || base[i - 1] == '.')) {
			if (base[i - 1] == '.' && (i == len || base[i] == '.'))
				return -1;
			i--;
		}
		/* The BPF matcher walks at most SHLIB_VERSION_MAX bytes: 31 after the dot. */
		if (i == len || base[i] != '.' || len - i - 1 >= SHLIB_VERSION_MAX)
			return -1;
		end = i;
	}
	if (end < 3 || strncmp(base + end - 3, ".so", 3))
		return -1;
	end -= 3;
	bpftel_shlib_config(&cfg, SHLIB_LIBSET_ALL);
	for (i = 0; i < cfg.nstems; i++) {
		if (cfg.stems[i].len == end && !memcmp(base, cfg.stems[i].name, end))
			return cfg.stems[i].lib;
	}
	return -1;
}

int bpftel_uprobes__new(struct bpftel_uprobes **out)
{
	struct bpftel_uprobes *u = calloc(1, sizeof(*u));

	*out = u;
	if (!u)
		return -ENOMEM;
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->idle, NULL);
	u->grace_ms = BPFTEL_UPROBES_GRACE_MS;
	bpftel_file_budget_set(&u->budget, BPFTEL_FILE_BUDGET_DEFAULT);
	u->owner_share = OWNER_SHARE_DEFAULT;
	/* The files it keys, as the kernel maps them (a failure is logged: then as stat
	 * shows them). */
	bpftel_real_files_get();
	/* Without it (no inotify instance left, no thread), every file is unwatched: a
	 * short grace, counted; the registry works. */
	watch_start(u);
	return 0;
}

void bpftel_uprobes__set_grace_ms(struct bpftel_uprobes *u, unsigned int ms)
{
	pthread_mutex_lock(&u->lock);
	u->grace_ms = ms;
	pthread_mutex_unlock(&u->lock);
}

void bpftel_uprobes__set_owner_share(struct bpftel_uprobes *u, unsigned int files)
{
	pthread_mutex_lock(&u->lock);
	u->owner_share = files;
	pthread_mutex_unlock(&u->lock);
}

void bpftel_uprobes__set_file_budget(struct bpftel_uprobes *u, unsigned int per_min)
{
	pthread_mutex_lock(&u->lock);
	bpftel_file_budget_set(&u->budget, per_min);
	pthread_mutex_unlock(&u->lock);
}

__u64 bpftel_uprobes__refused_for_user(struct bpftel_uprobes *u)
{
	__u64 n;

	pthread_mutex_lock(&u->lock);
	n = u->ref.count[BPFTEL_REFUSED_OVER_BUDGET] + u->ref.over_share;
	pthread_mutex_unlock(&u->lock);
	return n;
}

unsigned int bpftel_uprobes__file_budget(struct bpftel_uprobes *u)
{
	unsigned int n;

	pthread_mutex_lock(&u->lock);
	n = u->budget.per_min;
	pthread_mutex_unlock(&u->lock);
	return n;
}

static void file_free(struct lib_file *f)
{
	size_t i;

	for (i = 0; i < MAX_MODS; i++)
		links_drop(f->mods[i].links, f->mods[i].nlinks, false);
	for (i = 0; i < f->nprocs; i++)
		free(f->procs[i].path);
	free(f->procs);
	free(f);
}

void bpftel_uprobes__free(struct bpftel_uprobes *u)
{
	size_t i;

	if (!u)
		return;
	/* Its thread hands links to the reaper: stopped first. */
	watch_stop(u);
	/* Release callbacks of idle files take u->lock: none may still be pending. */
	bpftel_links_settle();
	for (i = 0; i < u->nfiles; i++)
		file_free(u->files[i]);
	pthread_cond_destroy(&u->idle);
	pthread_mutex_destroy(&u->lock);
	bpftel_real_files_put();
	free(u);
}

void refusal_locked(struct bpftel_uprobes *u, __u32 pid, enum shlib_lib lib, const char *path,
		    enum bpftel_refusal why, const char *detail)
{
	struct bpftel_uprobes_refusals *r = &u->ref;
	struct bpftel_uprobe_refusal *e;
	__u64 times = 1;
	size_t i;

	r->count[why]++;
	if (why == BPFTEL_REFUSED_IDENTITY_CHANGED)
		u->stale++;
	/* The same refusal again (a process retrying) updates its entry: the list shows
	 * what is refused, not one culprit many times. */
	for (i = 0; i < r->nrecent; i++) {
		e = &r->recent[i];
		if (e->pid == pid && e->why == why && !strncmp(e->path, path, sizeof(e->path) - 1))
			break;
	}
	if (i == r->nrecent) {
		if (r->nrecent < BPFTEL_UPROBES_RECENT)
			r->nrecent++;
		i = r->nrecent - 1;
	} else {
		times = r->recent[i].times + 1;
	}
	/* Newest first. */
	memmove(&r->recent[1], &r->recent[0], i * sizeof(r->recent[0]));
	e = &r->recent[0];
	*e = (struct bpftel_uprobe_refusal){
		.when = time(NULL), .times = times, .pid = pid, .lib = lib, .why = why};
	snprintf(e->path, sizeof(e->path), "%s", path);
	snprintf(e->detail, sizeof(e->detail), "%s", detail ? detail : "");
	pr_debug("uprobes: refused pid %u %s: %s %s", pid, path, bpftel_refusal_name(why),
		 detail ? detail : "");
}

bool same_sdev(const struct lib_file *f, dev_t sdev)
{
	return f->sdev == sdev || f->sdev == f->dev || sdev == f->dev;
}

/* The file that is (dev, ino, sdev) itself: what the kernel maps and probes; that very
 * subvolume's first, else one whose subvolume is not known (same_sdev()). */
static struct lib_file *find_real_file(struct bpftel_uprobes *u, dev_t dev, __u64 ino, dev_t sdev)
{
	struct lib_file *f, *unknown = NULL;
	size_t i;

	for (i = 0; i < u->nfiles; i++) {
		f = u->files[i];
		if (f->dev != dev || f->ino != ino)
			continue;
		if (f->sdev == sdev)
			return f;
		if (!unknown && same_sdev(f, sdev))
			unknown = f;
	}
	return unknown;
}

struct lib_file *find_file(struct bpftel_uprobes *u, dev_t dev, __u64 ino, dev_t sdev)
{
	struct lib_file *f = find_real_file(u, dev, ino, sdev);
	size_t i;

	/* By an alias, an overlay inode, only: a btrfs row's alias is its own (dev, ino),
	 * which another subvolume's file shares. */
	for (i = 0; !f && i < u->nfiles; i++)
		if (u->files[i]->alias_dev == dev && u->files[i]->alias_ino == ino &&
		    (u->files[i]->dev != dev || u->files[i]->ino != ino))
			f = u->files[i];
	return f;
}

static ssize_t proc_index(const struct lib_file *f, __u32 pid);

/*
 * The file an event of pid names by (dev, ino): the file itself, else one it is the
 * alias (overlay inode) of, that pid's row first. After a copy-up, a copy's row and the
 * layer's both have the overlay inode for alias, in no set order; btrfs subvolumes'
 * files can share (dev, ino) (lib_file.sdev): the subvolume the kernel named (sdev, 0
 * where it did not), never another one known, else a process's events are answered
 * from the row it is in (one process can map both a subvolume's copy and a snapshot's).
 */
static struct lib_file *find_file_of(struct bpftel_uprobes *u, dev_t dev, __u64 ino, dev_t sdev,
				     __u32 pid)
{
	struct lib_file *real = NULL, *mine = NULL, *alias = NULL;
	size_t i;

	for (i = 0; i < u->nfiles; i++) {
		struct lib_file *f = u->files[i];

		if (f->dev == dev && f->ino == ino) {
			if (f->sdev == dev || (sdev && f->sdev == sdev))
				return f;
			if (sdev && f->sdev != f->dev)
				continue; /* another subvolume's */
			if (!mine && proc_index(f, pid) >= 0)
				mine = f;
			if (!real)
				real = f;
		} else if (f->alias_dev == dev && f->alias_ino == ino) {
			if (!mine && proc_index(f, pid) >= 0)
				mine = f;
			if (!alias)
				alias = f;
		}
	}
	return mine ? mine : real ? real : alias;
}

/*
 * Does the kernel's (dev, ino, sdev) name f alone, whichever process it is of? Not
 * through f's overlay inode, which may be over another file since (a copy-up gave a
 * container a private copy), nor on btrfs, where another subvolume's file can have the
 * same (dev, ino), unless the kernel named f's subvolume (bpf/lib/btrfs_subvol.h).
 */
static bool names_alone(const struct lib_file *f, dev_t dev, __u64 ino, dev_t sdev)
{
	return f->dev == dev && f->ino == ino && (f->sdev == f->dev || (sdev && f->sdev == sdev));
}

static ssize_t proc_index(const struct lib_file *f, __u32 pid)
{
	size_t i;

	for (i = 0; i < f->nprocs; i++) {
		if (f->procs[i].pid == pid)
			return (ssize_t)i;
	}
	return -1;
}

bool wants(const struct mod_entry *me, enum shlib_lib lib)
{
	size_t i;

	for (i = 0; i < me->nspecs; i++) {
		if (me->specs[i].lib == lib)
			return true;
	}
	return false;
}

/*
 * With u->lock: mark the attaches f lacks (module only, or every module when only is
 * MAX_MODS) busy and describe them in jobs. Returns how many.
 */
size_t collect_jobs(struct bpftel_uprobes *u, struct lib_file *f, size_t only,
			   struct attach_job *jobs)
{
	size_t n = 0, mi;

	if (f->refused >= 0 || f->releasing || !f->nprocs)
		return 0;
	for (mi = 0; mi < u->nmods; mi++) {
		struct mod_entry *me = &u->mods[mi];

		if ((only < MAX_MODS && mi != only) || !me->obj || f->mods[mi].st != FM_NONE ||
		    !wants(me, f->lib) || (f->shed & (1u << mi)))
			continue;
		f->mods[mi].st = FM_BUSY;
		me->busy++;
		f->busy++;
		jobs[n++] = (struct attach_job){
			.mi = mi, .gen = me->gen, .obj = me->obj, .multi = me->multi};
	}
	return n;
}

static int add_proc(struct lib_file *f, const struct bpftel_procfile_target *t, __u64 stime,
		    __u64 kstart, const struct stat *st)
{
	struct proc_ref *grown, *p;
	size_t cap;

	if (f->nprocs == f->cap) {
		cap = f->cap ? f->cap * 2 : 4;
		grown = realloc(f->procs, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		f->procs = grown;
		f->cap = cap;
	}
	p = &f->procs[f->nprocs];
	*p = (struct proc_ref){.pid = t->pid, .start_time = stime, .kstart = kstart, .dirfd = t->dirfd,
			       .path = strdup(t->path), .dev = st->st_dev, .ino = st->st_ino};
	if (!p->path)
		return -ENOMEM;
	f->nprocs++;
	/* Only the newest keep the path they named the file by (up to 4 KiB each, for
	 * pairs of a file and a process that any user makes): a reopen goes through
	 * those only (open_through_procs). The entries stay in the order they came: a
	 * removal moves those after it down (proc_uses_locked, the sweep). */
	if (f->nprocs > BPFTEL_REOPEN_PATHS) {
		p = &f->procs[f->nprocs - 1 - BPFTEL_REOPEN_PATHS];
		free(p->path);
		p->path = NULL;
	}
	return 0;
}

/* A new file: keyed by what the kernel maps (dev, ino: on overlayfs the file underneath),
 * found too by what a path reached (st). With u->lock, and room for one more. */
static struct lib_file *file_new(struct bpftel_uprobes *u, const struct stat *st, dev_t dev,
				 __u64 ino, dev_t sdev, enum shlib_lib lib, const char *named)
{
	struct lib_file *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	/* Its calls are counted in a slot of its own while it is in the table. */
	while (u->slot_used[f->slot])
		f->slot++;
	u->slot_used[f->slot] = true;
	f->dev = dev;
	f->ino = ino;
	f->sdev = sdev;
	f->alias_dev = st->st_dev;
	f->alias_ino = st->st_ino;
	f->lib = lib;
	f->refused = -1;
	f->wd = -1;
	snprintf(f->path, sizeof(f->path), "%s", named);
	return f;
}

static void remove_file_locked(struct bpftel_uprobes *u, struct lib_file *f);

/*
 * With u->lock: f holds a slot and nothing else. Refused, or unprobed: every running
 * module that wants its library tried it and attached nothing (an ELF file named like
 * a library, without the library's functions). Either way no links and no attach in
 * flight; a row of a library only a stopped module wants is kept, for its start.
 */
static bool row_idle_locked(const struct bpftel_uprobes *u, const struct lib_file *f, bool refused)
{
	size_t mi, tried = 0;

	if (f->busy || f->releasing || (f->refused >= 0) != refused)
		return false;
	for (mi = 0; mi < MAX_MODS; mi++)
		if (f->mods[mi].nlinks)
			return false;
	if (refused)
		return true;
	for (mi = 0; mi < u->nmods; mi++) {
		if (!u->mods[mi].obj || !wants(&u->mods[mi], f->lib))
			continue;
		if (f->mods[mi].st != FM_DONE)
			return false;
		tried++;
	}
	return tried;
}

/*
 * With u->lock, the registry full: a row that holds a slot and nothing else gives way
 * to the new file, a refused one first, else an unprobed one (row_idle_locked). A row
 * costs a slot for as long as one of its processes lives: a process holding a thousand
 * junk files named like libraries must not keep the next real library out. Each stays
 * counted (its refusal; evicted, unprobed_evicted).
 */
static void evict_locked(struct bpftel_uprobes *u)
{
	struct lib_file *f;
	size_t i;
	int pass;

	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < u->nfiles; i++) {
			f = u->files[i];
			if (!row_idle_locked(u, f, !pass))
				continue;
			watch_drop_locked(u, f);
			remove_file_locked(u, f);
			if (!pass)
				u->ref.evicted++;
			else
				u->ref.unprobed_evicted++;
			file_free(f); /* no links: memory only */
			return;
		}
	}
}

/* With u->lock: note that t's process uses f, and describe what f still lacks. */
/* Whether the row p is of another process than the one started at stime (/proc's) and
 * kstart (the kernel's, 0 if not known): the pid was reused. */
static bool proc_other(const struct proc_ref *p, __u64 stime, __u64 kstart)
{
	return p->start_time != stime || (kstart && p->kstart && p->kstart != kstart);
}

static size_t proc_uses_locked(struct bpftel_uprobes *u, struct lib_file *f,
			       const struct bpftel_procfile_target *t, __u64 stime, __u64 kstart,
			       const struct stat *st, struct attach_job *jobs, int *err)
{
	ssize_t i = proc_index(f, t->pid);

	/* The pid is another process's now (the old one exited since the last sweep): the
	 * new one takes its entry, or the sweep would drop it as the old one. */
	if (i >= 0 && proc_other(&f->procs[i], stime, kstart)) {
		/* In order: the newest last, whose paths are kept (add_proc). */
		free(f->procs[i].path);
		memmove(&f->procs[i], &f->procs[i + 1], (f->nprocs - i - 1) * sizeof(*f->procs));
		f->nprocs--;
		i = -1;
	}
	if (i >= 0 && kstart)
		f->procs[i].kstart = kstart;
	*err = i >= 0 ? 0 : add_proc(f, t, stime, kstart, st);
	f->idle_since_ms = 0;
	return *err ? 0 : collect_jobs(u, f, MAX_MODS, jobs);
}

/*
 * A process uses a library: through the target t (its identity known when t->ino is
 * set, as the kernel reported it). A known file costs a lookup, and for a new process
 * of it a read of its start time; only a new file is opened (safely), identified, and
 * attached for the running modules.
 */
/* Refusals that are the file's own (see struct refused_file), not its path's. */
static bool refusal_of_file(enum bpftel_refusal why)
{
	return why == BPFTEL_REFUSED_NOT_REGULAR || why == BPFTEL_REFUSED_SLOW_FS ||
	       why == BPFTEL_REFUSED_TOO_LARGE || why == BPFTEL_REFUSED_NOT_ELF ||
	       why == BPFTEL_REFUSED_TABLES_TOO_LARGE;
}

/* With u->lock: the live cache entry of (dev, ino), the file's own refusal (owner NULL)
 * or owner's, or NULL. */
static struct refused_file *refused_find_locked(struct bpftel_uprobes *u, dev_t dev, __u64 ino,
						__u64 now, const __u64 *owner)
{
	size_t i;

	for (i = 0; i < REFUSED_CACHE; i++) {
		struct refused_file *r = &u->refused[i];

		if (r->ino == ino && r->dev == dev && r->until_ns > now &&
		    r->by_owner == !!owner && (!owner || r->owner == *owner))
			return r;
	}
	return NULL;
}

/* With u->lock: is (dev, ino) in the cache for some owner's budget? */
static bool refused_by_owner_locked(struct bpftel_uprobes *u, dev_t dev, __u64 ino, __u64 now)
{
	size_t i;

	for (i = 0; i < REFUSED_CACHE; i++) {
		struct refused_file *r = &u->refused[i];

		if (r->ino == ino && r->dev == dev && r->until_ns > now && r->by_owner)
			return true;
	}
	return false;
}

/* owner: NULL for a refusal of the file's own (REFUSED_TTL_S), else owner's (over its
 * budget, or its walk to the file stalled), until ttl_ns. */
static void refused_add_locked(struct bpftel_uprobes *u, dev_t dev, __u64 ino,
			       enum bpftel_refusal why, int err, const char *detail, __u64 now,
			       const __u64 *owner, __u64 ttl_ns)
{
	struct refused_file *r = refused_find_locked(u, dev, ino, now, owner);
	size_t i;

	for (i = 0; !r && i < REFUSED_CACHE; i++) {
		if (!u->refused[i].ino || u->refused[i].until_ns <= now)
			r = &u->refused[i];
	}
	if (!r) {
		r = &u->refused[u->refused_next];
		u->refused_next = (u->refused_next + 1) % REFUSED_CACHE;
	}
	*r = (struct refused_file){.dev = dev,
				   .ino = ino,
				   .why = why,
				   .err = err,
				   .by_owner = owner != NULL,
				   .owner = owner ? *owner : 0,
				   .until_ns = now + (owner ? ttl_ns : REFUSED_TTL_S * 1000000000ull)};
	snprintf(r->detail, sizeof(r->detail), "%s", detail);
}

/* With u->lock: owner's process t refused for its user's sake (why, err), the refusal
 * just listed: remembered for that user for ttl_ns, by the identity the kernel opened
 * (st: the file opened; what the path led to may differ). */
static void refused_for_owner_locked(struct bpftel_uprobes *u,
				     const struct bpftel_procfile_target *t, const struct stat *st,
				     enum bpftel_refusal why, int err, __u64 owner, __u64 ttl_ns)
{
	if (t->ino && st->st_ino == t->ino && st->st_dev == t->dev)
		refused_add_locked(u, t->dev, t->ino, why, err, u->ref.recent[0].detail,
				   bpftel_mono_ns(), &owner, ttl_ns);
}

/* A file refused a moment ago for what it is, or over this process's user's budget:
 * refused again, counted, without opening it. Returns the first refusal's errno, or 0
 * when it is not in the cache. */
static int refused_again(struct bpftel_uprobes *u, const struct bpftel_procfile_target *t,
			 enum shlib_lib lib, const char *named)
{
	struct refused_file *r;
	bool by_owner;
	__u64 owner;
	int err = 0;

	pthread_mutex_lock(&u->lock);
	r = refused_find_locked(u, t->dev, t->ino, bpftel_mono_ns(), NULL);
	by_owner = !r && refused_by_owner_locked(u, t->dev, t->ino, bpftel_mono_ns());
	pthread_mutex_unlock(&u->lock);
	/* Whose: read outside the lock (procfs), only for a file some user is over
	 * budget on. */
	if (by_owner && bpftel_proc_owner(t->pid, &owner))
		owner = BPFTEL_DEADLINE_NO_OWNER;
	pthread_mutex_lock(&u->lock);
	r = refused_find_locked(u, t->dev, t->ino, bpftel_mono_ns(), by_owner ? &owner : NULL);
	if (r) {
		refusal_locked(u, t->pid, lib, named, r->why, r->detail);
		u->ref.cached++;
		err = r->err;
	}
	pthread_mutex_unlock(&u->lock);
	return err;
}

/*
 * With u->lock: may owner's process t bring a file new to the registry (file_budget.h)?
 * Asked once the file is open and known to be new (a file already probed, reached by
 * another identity, an overlay's, costs nothing), before it is parsed. Else the refusal
 * is counted with its reason, and false.
 */
static bool budget_take_locked(struct bpftel_uprobes *u, const struct bpftel_procfile_target *t,
			       enum shlib_lib lib, const char *named, __u64 owner)
{
	char detail[160], who[64];

	if (bpftel_file_budget_take(&u->budget, owner, bpftel_mono_ms()))
		return true;
	if (owner == BPFTEL_DEADLINE_NO_OWNER)
		snprintf(who, sizeof(who), "processes of no known user");
	else if (owner >> 32)
		snprintf(who, sizeof(who), "user namespace %llu's processes",
			 (unsigned long long)(owner & 0xffffffffull));
	else
		snprintf(who, sizeof(who), "user %llu's processes", (unsigned long long)owner);
	snprintf(detail, sizeof(detail),
		 "%s brought %u new library files within a minute (new_files_per_user)", who,
		 u->budget.per_min);
	refusal_locked(u, t->pid, lib, named, BPFTEL_REFUSED_OVER_BUDGET, detail);
	return false;
}

/*
 * With u->lock: may owner's process bring a new file? Not when the owner (not root,
 * whose files are the host's own libraries) holds its share of the rows probed, or
 * being probed, already: rows idle (refused, unprobed) give way to new files anyway
 * (evict_locked()), those with links do not, and one user's thousand copies of libssl,
 * each probed while its process sleeps, would hold the registry against every other's.
 */
static bool share_room_locked(struct bpftel_uprobes *u, const struct bpftel_procfile_target *t,
			      enum shlib_lib lib, const char *named, __u64 owner)
{
	char detail[160];
	unsigned int held = 0;
	size_t i;

	if (!owner || !u->owner_share)
		return true;
	for (i = 0; i < u->nfiles; i++)
		if (u->files[i]->owner == owner && !row_idle_locked(u, u->files[i], true) &&
		    !row_idle_locked(u, u->files[i], false))
			held++;
	if (held < u->owner_share)
		return true;
	snprintf(detail, sizeof(detail),
		 "its user holds %u probed files of the registry's %d, its share", held,
		 MAX_FILES);
	refusal_locked(u, t->pid, lib, named, BPFTEL_REFUSED_REGISTRY_FULL, detail);
	/* At an open, not in a /proc scan: the rescan it asks for (a minute later) tries
	 * once more; one refused again asks for no other, as a share, unlike a budget,
	 * need not ever have room. */
	if (t->dirfd != BPFTEL_PROCFILE_MAPPED)
		u->ref.over_share++;
	return false;
}

/* kstart: the process's start as the kernel's event carried it, 0 if not known. */
static int uprobes_seen(struct bpftel_uprobes *u, const struct bpftel_procfile_target *t,
			__u64 kstart, enum shlib_lib lib, const char *named)
{
	struct attach_job jobs[MAX_MODS];
	enum bpftel_refusal why;
	struct lib_file *f = NULL;
	char detail[128];
	struct stat st = {};
	__u64 stime = 0, had = 0, had_k = 0, ino, owner;
	bool known = false, checked, exact, slow;
	ssize_t idx = -1;
	size_t njobs;
	dev_t dev, sdev;
	int fd, err;

	if (t->ino) {
		pthread_mutex_lock(&u->lock);
		f = find_file_of(u, t->dev, t->ino, t->sdev, t->pid);
		known = f != NULL;
		idx = f ? proc_index(f, t->pid) : -1;
		/* Through the file's overlay inode (its alias), only a process the row has:
		 * the overlay may be over another file since (a copy-up gave it a private
		 * copy), which a new process maps. That one is opened, and found by what
		 * it maps. So is a new process's file on btrfs: another subvolume's may
		 * have the same numbers. */
		if (f && idx < 0 && !names_alone(f, t->dev, t->ino, t->sdev))
			known = false;
		had = idx >= 0 ? f->procs[idx].start_time : 0;
		had_k = idx >= 0 ? f->procs[idx].kstart : 0;
		/* A process opening its library in a loop (the soak's flood) is answered from
		 * the row. With the kernel's start time on both sides, exactly, and a pid
		 * reused shows at once. Without it (a row of the /proc scan not yet met by an
		 * event), /proc's start time is read at the pid's first event of a sweep's
		 * period only, which is when a pid reused since the last sweep shows. */
		exact = idx >= 0 && kstart && had_k;
		checked = !kstart && idx >= 0 && f->procs[idx].checked == u->sweeps + 1;
		if (idx >= 0 && !kstart)
			f->procs[idx].checked = u->sweeps + 1;
		pthread_mutex_unlock(&u->lock);
		if ((exact && had_k == kstart) || checked)
			return 0;
		if (idx >= 0 && !exact) {
			/* Known, unless the pid is another process's now (the one noted
			 * exited, and the sweep has not seen it yet): that one is new. An
			 * event with the kernel's start time goes on: the row learns it. */
			stime = bpftel_proc_start(t->pid);
			if (!stime)
				return -ESRCH;
			if (stime == had && !kstart)
				return 0;
		}
		if (!known) {
			err = refused_again(u, t, lib, named);
			if (err)
				return err;
		}
	}
	if (!stime)
		stime = bpftel_proc_start(t->pid);
	if (!stime)
		return -ESRCH;
	if (known) {
		/* The kernel says which file it is; its path is checked if it is ever used
		 * to reopen the file. */
		st.st_dev = t->dev;
		st.st_ino = t->ino;
		pthread_mutex_lock(&u->lock);
		f = find_file_of(u, t->dev, t->ino, t->sdev, t->pid);
		/* As above; and a pid reused since is a new process. */
		if (f && !names_alone(f, t->dev, t->ino, t->sdev) &&
		    (proc_index(f, t->pid) < 0 || stime != had))
			f = NULL;
		njobs = f ? proc_uses_locked(u, f, t, stime, kstart, &st, jobs, &err) : 0;
		pthread_mutex_unlock(&u->lock);
		if (njobs)
			attach_run(u, f, jobs, njobs, -1);
		if (f)
			return err;
		/* Dropped meanwhile: as a new file. */
	}
	fd = bpftel_procfile_open_mapped(t, &st, &why, &dev, &ino, &sdev);
	if (fd == -EREMOTE) {
		/* A relative path above its directory: a /proc scan reaches the file through
		 * the process's mapping. */
		pthread_mutex_lock(&u->lock);
		u->ref.climbing_scans++;
		pthread_mutex_unlock(&u->lock);
		return fd;
	}
	if (fd < 0) {
		if (why == BPFTEL_REFUSED__COUNT) {
			/* Not a refusal. Gone, or the path an open named led nowhere for a
			 * process that still runs: the file renamed or removed since, or
			 * every walk raced by renames on the host (EAGAIN): the process may
			 * map it all the same, which a /proc scan reaches (paced; a scan's
			 * own misses ask for no other). */
			if (fd != -ESRCH && t->dirfd != BPFTEL_PROCFILE_MAPPED &&
			    t->dirfd != BPFTEL_PROCFILE_EXE && bpftel_proc_start(t->pid)) {
				pthread_mutex_lock(&u->lock);
				u->ref.unreached_scans++;
				pthread_mutex_unlock(&u->lock);
			}
			return fd;
		}
		bpftel_procfile_explain(why, &st, fd, detail, sizeof(detail));
		/* A stall may be the path's, not the file's (open_waits.h): a user's walk
		 * through a FUSE symlink of its own to the system's libgnutls stalls where
		 * the file would not. Remembered for that user only (read before the lock:
		 * procfs), or every user's opens of libgnutls would be refused from the
		 * cache for as long as that user kept its stall. */
		slow = why == BPFTEL_REFUSED_SLOW_FS;
		if (slow && bpftel_proc_owner(t->pid, &owner))
			owner = BPFTEL_DEADLINE_NO_OWNER;
		pthread_mutex_lock(&u->lock);
		refusal_locked(u, t->pid, lib, named, why, detail);
		/* By the identity the kernel opened: what the path led to may differ. Not
		 * one refused untried for others' stalled opens (-EBUSY: all of them; -EDQUOT:
		 * this process's user's): that says nothing of the file, and another user's
		 * process that opens it would be refused from the cache. */
		if (t->ino && refusal_of_file(why) && fd != -EBUSY && fd != -EDQUOT &&
		    st.st_ino == t->ino && st.st_dev == t->dev)
			refused_add_locked(u, t->dev, t->ino, why, fd, detail, bpftel_mono_ns(),
					   slow ? &owner : NULL, REFUSED_TTL_S * 1000000000ull);
		pthread_mutex_unlock(&u->lock);
		return fd;
	}
	/* Whose budget a new file would come out of: read before the lock (procfs). A
	 * process whose user cannot be told shares one budget with all such. */
	if (bpftel_proc_owner(t->pid, &owner))
		owner = BPFTEL_DEADLINE_NO_OWNER;
	pthread_mutex_lock(&u->lock);
	/* By what it maps: the same overlay inode can be over another file since. */
	f = find_real_file(u, dev, ino, sdev);
	if (!f && !share_room_locked(u, t, lib, named, owner)) {
		/* Remembered for that user, as over its budget below: a process at its
		 * user's share opening the file in a loop costs a lookup, not an open. A
		 * share freed since: the rescan a minute later that the refusal asks for, as
		 * one over budget does, finds the file if it is mapped. */
		refused_for_owner_locked(u, t, &st, BPFTEL_REFUSED_REGISTRY_FULL, -ENOSPC, owner,
					 REFUSED_TTL_S * 1000000000ull);
		pthread_mutex_unlock(&u->lock);
		close(fd);
		return -ENOSPC;
	}
	if (!f && !budget_take_locked(u, t, lib, named, owner)) {
		/* Until the budget has room. */
		refused_for_owner_locked(u, t, &st, BPFTEL_REFUSED_OVER_BUDGET, -EDQUOT, owner,
					 (__u64)bpftel_file_budget_wait_ms(&u->budget, owner,
									   bpftel_mono_ms()) *
							 1000000ull +
						 1);
		pthread_mutex_unlock(&u->lock);
		close(fd);
		return -EDQUOT;
	}
	if (!f) {
		if (u->nfiles == MAX_FILES)
			evict_locked(u);
		f = u->nfiles < MAX_FILES ? file_new(u, &st, dev, ino, sdev, lib, named) : NULL;
		if (f)
			f->owner = owner;
		if (!f) {
			refusal_locked(u, t->pid, lib, named, BPFTEL_REFUSED_REGISTRY_FULL,
				       "the registry holds its maximum of files");
			pthread_mutex_unlock(&u->lock);
			close(fd);
			return -ENOSPC;
		}
		u->files[u->nfiles++] = f;
	}
	f->opens++;
	njobs = proc_uses_locked(u, f, t, stime, kstart, &st, jobs, &err);
	pthread_mutex_unlock(&u->lock);
	if (njobs)
		attach_run(u, f, jobs, njobs, fd);
	close(fd);
	return err;
}

int bpftel_uprobes__process_seen(struct bpftel_uprobes *u, __u32 pid, enum shlib_lib lib,
				 const char *path)
{
	struct bpftel_procfile_target t = {.pid = pid, .dirfd = AT_FDCWD, .path = path};

	if ((unsigned)lib >= SHLIB_LIB__COUNT)
		return -EINVAL;
	return uprobes_seen(u, &t, 0, lib, path);
}

int bpftel_uprobes__detected(struct bpftel_uprobes *u, const struct bpftel_shlib_detection *d)
{
	struct bpftel_procfile_target t = {
		.pid = d->pid,
		.dirfd = d->dirfd,
		.path = d->path,
		.dev = d->dev,
		.ino = d->ino,
		.sdev = d->sdev};

	if ((unsigned)d->lib >= SHLIB_LIB__COUNT)
		return -EINVAL;
	return uprobes_seen(u, &t, d->start_ns, d->lib, d->path);
}

void bpftel_uprobes__listener(void *ctx, const struct bpftel_shlib_detection *d)
{
	int err = bpftel_uprobes__detected(ctx, d);

	/* -EDQUOT: over its user's budget, a refusal logged as such. */
	if (err && err != -ENOENT && err != -ESRCH && err != -EDQUOT)
		pr_debug("uprobes: pid %u %s: %s", d->pid, d->path, strerror(-err));
}

__u64 bpftel_uprobes__stale(struct bpftel_uprobes *u)
{
	__u64 n;

	pthread_mutex_lock(&u->lock);
	n = u->stale + u->ref.idle_used + u->ref.idle_scans + u->ref.climbing_scans +
	    u->ref.unreached_scans;
	pthread_mutex_unlock(&u->lock);
	return n;
}

static void remove_file_locked(struct bpftel_uprobes *u, struct lib_file *f)
{
	size_t i;

	for (i = 0; i < u->nfiles; i++) {
		if (u->files[i] == f) {
			u->files[i] = u->files[--u->nfiles];
			u->slot_used[f->slot] = false; /* its links are gone */
			return;
		}
	}
}

/* Reaper callback: one link of an idle file is gone. The last one lifts the guard. */
void release_account(struct bpftel_uprobes *u, struct lib_file *f)
{
	struct lib_file *gone = NULL;

	pthread_mutex_lock(&u->lock);
	if (!--f->releasing && !f->nprocs && !f->busy) {
		watch_drop_locked(u, f);
		remove_file_locked(u, f);
		gone = f;
	}
	/* With processes again: the next sweep attaches one new set. */
	pthread_cond_broadcast(&u->idle);
	pthread_mutex_unlock(&u->lock);
	if (gone)
		file_free(gone);
}

void release_done(void *arg)
{
	struct release_ctx *rc = arg;

	release_account(rc->u, rc->f);
	free(rc);
}

size_t file_links(const struct lib_file *f)
{
	size_t mi, n = 0;

	for (mi = 0; mi < MAX_MODS; mi++)
		n += f->mods[mi].nlinks;
	return n;
}

size_t take_links_locked(struct lib_file *f, struct ulink *rel)
{
	size_t mi, n = 0;

	for (mi = 0; mi < MAX_MODS; mi++) {
		bool busy = f->mods[mi].st == FM_BUSY;

		memcpy(rel + n, f->mods[mi].links, f->mods[mi].nlinks * sizeof(*rel));
		n += f->mods[mi].nlinks;
		memset(&f->mods[mi], 0, sizeof(f->mods[mi]));
		/* An attach in flight (a write seen meanwhile: uprobe_watch.c) keeps its
		 * place: it stores or gives back its own links (attach_run), and no second
		 * attach of the module may start on the file before it ends. */
		if (busy)
			f->mods[mi].st = FM_BUSY;
	}
	/* The file's guard: a re-attach waits for these to be gone (collect_jobs), so that
	 * the kernel's uprobes on it are new ones, with the instructions the file holds. */
	f->releasing += n;
	return n;
}

void hand_links(struct bpftel_uprobes *u, struct lib_file *f, struct ulink *rel, size_t n,
		bool first)
{
	struct release_ctx *rc;
	size_t i, k;

	/* Last attached first: entries before returns (uprobe_attach.c: attach_single).
	 * Put ahead of the queue one by one, they go in the reverse order. */
	for (k = 0; k < n; k++) {
		i = first ? k : n - 1 - k;
		rc = malloc(sizeof(*rc));
		if (!rc) { /* in place: slow, but nothing is leaked */
			links_drop(&rel[i], 1, false);
			release_account(u, f);
			continue;
		}
		*rc = (struct release_ctx){.u = u, .f = f};
		if (first)
			bpftel_release_first(rel[i].link, rel[i].link ? -1 : rel[i].fd, release_done,
					     rc);
		else
			bpftel_release(rel[i].link, rel[i].link ? -1 : rel[i].fd, release_done, rc);
	}
}

struct sweep_proc {
	struct lib_file *f;
	__u32 pid;
	__u64 start_time;
	bool alive;
};

/* With u->lock (the modules' objects cannot close): did f's probes count calls since
 * the last look? Per module instance: a module's restart starts its counts over. */
static bool file_called_locked(struct bpftel_uprobes *u, struct lib_file *f)
{
	__u64 hit[UPROBE_HITS_KINDS], sum;
	bool called = false;
	struct bpf_map *m;
	size_t j, k;

	for (j = 0; j < u->nmods && j < MAX_MODS; j++) {
		m = u->mods[j].obj ? bpf_object__find_map_by_name(u->mods[j].obj, "uprobe_hits")
				   : NULL;
		if (!m || f->mods[j].st != FM_DONE)
			continue;
		file_hits(bpf_map__fd(m), f, hit);
		for (k = 0, sum = 0; k < UPROBE_HITS_KINDS; k++)
			sum += hit[k];
		called |= f->idle_gen[j] == u->mods[j].gen && f->idle_calls[j] != sum;
		f->idle_gen[j] = u->mods[j].gen;
		f->idle_calls[j] = sum;
	}
	return called;
}

/*
 * With u->lock: a file nobody used for the grace period gives its links to the reaper.
 * Returns true when the file is done with (dropped, or its links released). Nobody
 * known: the processes the watcher reported are gone. But a process can use a library
 * it never opened: a child forked after its parent loaded it (daemon(3), a pre-fork
 * server whose parent exits). So a file whose probes fired while it had no known
 * process is not idle; the first time in such a stretch, a /proc scan is asked for
 * (bpftel_uprobes__stale), which finds the process and lists it. A child that makes no
 * call is found the same way: a file's links go only once a scan begun after the file
 * went idle has found no process that maps it (one asked for at the grace's end).
 */
static bool sweep_idle_locked(struct bpftel_uprobes *u, struct lib_file *f, long long now,
			      struct ulink *rel, struct lib_file **relf, size_t *nrel,
			      struct lib_file **drop, size_t *ndrop)
{
	bool called;
	size_t i, n;

	if (f->nprocs || f->busy || f->releasing)
		return false;
	called = file_called_locked(u, f);
	if (!f->idle_since_ms) {
		f->idle_since_ms = now;
		f->idle_used = false;
		f->idle_scan = false;
	} else if (called) {
		f->idle_since_ms = now;
		if (!f->idle_used)
			u->ref.idle_used++;
		f->idle_used = true;
	}
	/* A file whose writes are not watched must not keep links it is not using: a
	 * write in place would leave them on instructions it no longer holds. */
	if (!f->unwatched && now - f->idle_since_ms < (long long)u->grace_ms)
		return false;
	/* A row without links (refused, or only a stopped module's) holds nothing: no
	 * scan. Else one is asked for (the housekeeping thread's paced scan), and again
	 * if one ran since but calls moved the idle stretch past its start. */
	if (!f->unwatched && file_links(f) && u->scan_from_ms < f->idle_since_ms) {
		if (!f->idle_scan || f->scan_seen_ms != u->scan_from_ms)
			u->ref.idle_scans++;
		f->idle_scan = true;
		f->scan_seen_ms = u->scan_from_ms;
		return false;
	}
	n = take_links_locked(f, rel + *nrel);
	watch_drop_locked(u, f); /* its links are the reaper's now */
	if (!n) {
		remove_file_locked(u, f);
		drop[(*ndrop)++] = f;
		return true;
	}
	for (i = 0; i < n; i++)
		relf[(*nrel)++] = f;
	return true;
}

static int cmp_sweep_pid(const void *a, const void *b)
{
	const struct sweep_proc *x = a, *y = b;

	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

int bpftel_uprobes__sweep(struct bpftel_uprobes *u)
{
	__u64 start;
	struct sweep_proc *procs = NULL;
	struct attach_job (*jobs)[MAX_MODS] = NULL;
	struct lib_file **marked = NULL, **drop = NULL, **relf = NULL, **jobf = NULL;
	struct ulink *rel = NULL;
	size_t nprocs = 0, nmarked = 0, ndrop = 0, nrel = 0, njobf = 0, i, j, k, kept, n, total;
	size_t *njobs = NULL, nidle = 0, nlinks;
	long long now = bpftel_mono_ms();

	/* 1. Which processes to check, copied out: /proc is read without the lock. The
	 * files are marked busy meanwhile, so that none is freed under us. */
	pthread_mutex_lock(&u->lock);
	for (i = 0, total = 0; i < u->nfiles; i++)
		total += u->files[i]->nprocs;
	procs = calloc(total + 1, sizeof(*procs));
	marked = calloc(u->nfiles + 1, sizeof(*marked));
	for (i = 0; procs && marked && i < u->nfiles; i++) {
		for (j = 0; j < u->files[i]->nprocs; j++)
			procs[nprocs++] = (struct sweep_proc){
				.f = u->files[i],
				.pid = u->files[i]->procs[j].pid,
				.start_time = u->files[i]->procs[j].start_time};
		u->files[i]->busy++;
		marked[nmarked++] = u->files[i];
	}
	pthread_mutex_unlock(&u->lock);
	if (!procs || !marked) {
		free(procs);
		free(marked);
		return -ENOMEM;
	}
	/* One read of /proc a process, however many of the files it uses: by pid. */
	qsort(procs, nprocs, sizeof(*procs), cmp_sweep_pid);
	for (i = 0, start = 0; i < nprocs; i++) {
		if (!i || procs[i].pid != procs[i - 1].pid)
			start = bpftel_proc_start(procs[i].pid);
		procs[i].alive = start == procs[i].start_time;
	}

	/* 2. Apply: forget the dead, release the long idle, attach what is missing. Files
	 * added meanwhile are looked at too. */
	pthread_mutex_lock(&u->lock);
	n = u->nfiles;
	/* Room for every link the files hold now (all could be released), not for as
	 * many as they could hold: 1024 files could, 4.7 MiB a sweep. */
	for (i = 0, nlinks = 0; i < n; i++)
		nlinks += file_links(u->files[i]);
	drop = calloc(n + 1, sizeof(*drop));
	relf = calloc(nlinks + 1, sizeof(*relf));
	rel = calloc(nlinks + 1, sizeof(*rel));
	jobs = calloc(n + 1, sizeof(*jobs));
	jobf = calloc(n + 1, sizeof(*jobf));
	njobs = calloc(n + 1, sizeof(*njobs));
	for (i = 0; i < nprocs; i++) {
		struct lib_file *f = procs[i].f;

		if (procs[i].alive)
			continue;
		for (j = 0, kept = 0; j < f->nprocs; j++) {
			if (f->procs[j].pid == procs[i].pid &&
			    f->procs[j].start_time == procs[i].start_time)
				free(f->procs[j].path);
			else
				f->procs[kept++] = f->procs[j];
		}
		f->nprocs = kept;
	}
	for (i = 0; i < nmarked; i++)
		marked[i]->busy--;
	for (i = 0; drop && relf && rel && jobs && jobf && njobs && i < u->nfiles;) {
		struct lib_file *f = u->files[i];

		if (sweep_idle_locked(u, f, now, rel, relf, &nrel, drop, &ndrop)) {
			nidle++;
			if (i < u->nfiles && u->files[i] != f)
				continue; /* removed: another file moved into slot i */
			i++;
			continue;
		}
		/* A file its processes did not reach at the last try waits its turn. */
		k = f->reopen_fails && now < f->reopen_at_ms
			    ? 0
			    : collect_jobs(u, f, MAX_MODS, jobs[njobf]);
		if (k) {
			njobs[njobf] = k;
			jobf[njobf++] = f;
		}
		i++;
	}
	u->sweeps++;
	pthread_mutex_unlock(&u->lock);

	/* 3. The slow part, unlocked. Each file's links last attached first: its entries
	 * before its returns (uprobe_attach.c: attach_single), so that no entry runs on
	 * while its return is gone. */
	for (k = 0; k < nrel; k++) {
		struct release_ctx *rc = malloc(sizeof(*rc));

		i = nrel - 1 - k;
		if (!rc) { /* in place: slow, but nothing is leaked */
			links_drop(&rel[i], 1, false);
			release_account(u, relf[i]);
			continue;
		}
		*rc = (struct release_ctx){.u = u, .f = relf[i]};
		bpftel_release(rel[i].link, rel[i].link ? -1 : rel[i].fd, release_done, rc);
	}
	for (i = 0; i < ndrop; i++)
		file_free(drop[i]);
	for (i = 0; i < njobf; i++)
		attach_run(u, jobf[i], jobs[i], njobs[i], -1);
	free(procs);
	free(marked);
	free(drop);
	free(relf);
	free(rel);
	free(jobs);
	free(jobf);
	free(njobs);
	return (int)nidle;
}

static bool ctime_equal(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* With u->lock: what the executable (dev, ino) was found to be when its change time
 * was ctime: 1 Go, 0 not, -1 not looked into at that ctime. */
static int verdict_locked(struct bpftel_uprobes *u, dev_t dev, __u64 ino,
			  const struct timespec *ctime)
{
	struct exe_verdict *v;
	size_t i;

	for (i = 0; i < EXE_VERDICTS; i++) {
		v = &u->verdicts[i];
		if (v->ino == ino && v->dev == dev)
			return ctime_equal(&v->ctime, ctime) ? v->go : -1;
	}
	return -1;
}

/* With u->lock: (dev, ino) was found to be go when its change time was ctime. A file
 * rewritten in place keeps its entry, now on what it holds. */
static void verdict_set_locked(struct bpftel_uprobes *u, dev_t dev, __u64 ino,
			       const struct timespec *ctime, bool go)
{
	struct exe_verdict *v = NULL;
	size_t i;

	for (i = 0; i < EXE_VERDICTS && !v; i++) {
		if (u->verdicts[i].ino == ino && u->verdicts[i].dev == dev)
			v = &u->verdicts[i];
	}
	if (!v) {
		v = &u->verdicts[u->verdict_next];
		u->verdict_next = (u->verdict_next + 1) % EXE_VERDICTS;
	}
	*v = (struct exe_verdict){.dev = dev, .ino = ino, .ctime = *ctime, .go = go};
}

/* An executable refused (err: the open's; msg: the inspection's, if it said why):
 * counted and listed like a library's refusal, under `go`. */
static void exe_refused(struct bpftel_uprobes *u, const struct bpftel_procfile_target *t,
			const char *named, enum bpftel_refusal why, int err, const char *msg)
{
	char detail[128];
	struct stat st = {.st_mode = S_IFREG};

	if (msg && *msg)
		snprintf(detail, sizeof(detail), "%s", msg);
	else
		bpftel_procfile_explain(why, &st, err, detail, sizeof(detail));
	pthread_mutex_lock(&u->lock);
	refusal_locked(u, t->pid, SHLIB_LIB_GO, named, why, detail);
	pthread_mutex_unlock(&u->lock);
}

/* With u->lock taken here: the verdict on t's file at ctime, or -1. */
static int verdict_at(struct bpftel_uprobes *u, const struct bpftel_procfile_target *t,
		      const struct timespec *ctime)
{
	int v;

	pthread_mutex_lock(&u->lock);
	v = verdict_locked(u, t->dev, t->ino, ctime);
	pthread_mutex_unlock(&u->lock);
	return v;
}

/*
 * Is the executable t reaches a Go program: 1, 0, or a negative errno when it cannot
 * be read now (not remembered)? Read once per file and change time: its ELF headers
 * and .go.buildinfo (goexe.h). A Go executable of a version or layout that cannot be
 * probed is one too: the registry lists it refused, with its reason.
 *
 * want: the ctime the kernel saw at the exec, known without opening the file; NULL
 * (the scan) when only an open tells. guess: t is the exec's path in the agent's own
 * root (its process gone): an open refused there (another file, or none) says nothing
 * of the file the process ran, and is no refusal. On 0 or 1, *seen is the ctime of the file the
 * verdict is on. A file read is known by the ctime fstat() gave before the read: a
 * write during or after the read moves the ctime past it, so the verdict is never
 * taken for content it was not made on (a write within the same clock tick after the
 * fstat could keep it: kernels before 6.13, without multigrain timestamps).
 */
static int go_exe(struct bpftel_uprobes *u, const struct bpftel_procfile_target *t,
		  const char *named, const struct timespec *want, struct timespec *seen, bool guess)
{
	struct bpftel_go_exe exe;
	enum bpftel_refusal why;
	char err[128] = "";
	struct stat st;
	int v, fd, ret;

	v = want ? verdict_at(u, t, want) : -1;
	if (v >= 0) {
		*seen = *want;
		return v;
	}
	fd = bpftel_procfile_open(t, &st, &why);
	if (fd < 0) {
		if (guess)
			return -ENOENT;
		if (why < BPFTEL_REFUSED__COUNT)
			exe_refused(u, t, named, why, fd, NULL);
		return fd;
	}
	*seen = st.st_ctim;
	v = verdict_at(u, t, seen);
	if (v >= 0) {
		close(fd);
		return v;
	}
	ret = bpftel_go_inspect_fd(fd, named, &exe, NULL, 0, err, sizeof(err));
	close(fd);
	if (ret == -EFBIG || ret == -E2BIG || ret == -EISDIR) {
		/* Refused for what it is: counted once, then known not to be probed. */
		exe_refused(u, t, named, refusal_of(ret), ret, err);
		ret = -ENOEXEC;
	} else if (ret && ret != -ENOEXEC && ret != -ENOTSUP && ret != -EINVAL) {
		return ret; /* unreadable now: not known either way */
	}
	pthread_mutex_lock(&u->lock);
	verdict_set_locked(u, t->dev, t->ino, seen, ret != -ENOEXEC);
	pthread_mutex_unlock(&u->lock);
	return ret != -ENOEXEC;
}

int bpftel_uprobes__exec(struct bpftel_uprobes *u, const struct bpftel_shlib_detection *d,
			 struct timespec *ctime)
{
	struct bpftel_procfile_target t = {.pid = d->pid,
					   .dirfd = BPFTEL_PROCFILE_EXE,
					   .path = d->path,
					   .dev = d->dev,
					   .ino = d->ino,
					   .sdev = d->sdev};
	int go;

	/* Through /proc/<pid>/exe: the file the kernel runs, whatever the path the
	 * process gave leads to (a script's: its interpreter, which the exec's identity
	 * names), with no directory of theirs walked. */
	go = go_exe(u, &t, d->path, &d->ctime, ctime, false);
	/* Most programs are gone before their exec is read (a shell's `true`), and with
	 * them their root. An absolute path that leads, in the agent's own root, to the
	 * very file the kernel ran (procfile checks the identity) is that file: read it
	 * there, so that it is found not Go once, not at every exec. */
	if (go == -ENOENT && d->path[0] == '/') {
		t.dirfd = d->dirfd;
		t.pid = (__u32)getpid();
		t.owner_gone = true;
		go = go_exe(u, &t, d->path, &d->ctime, ctime, true);
		t.pid = d->pid;
		t.owner_gone = false;
	}
	if (go <= 0)
		return go;
	uprobes_seen(u, &t, d->start_ns, SHLIB_LIB_GO, d->path);
	return 1;
}

/* path as /proc/<pid>/maps shows it: a newline as "\012" (the kernel's mangle_path()),
 * in place; "" (matching nothing) where that would not fit size. */
static void maps_escape(char *path, size_t size)
{
	size_t len = strlen(path), i;

	for (i = 0; i < len; i++) {
		if (path[i] != '\n')
			continue;
		if (len + 3 >= size) {
			path[0] = '\0'; /* cannot be shown whole: matches nothing */
			return;
		}
		memmove(path + i + 4, path + i + 1, len - i);
		memcpy(path + i, "\\012", 4);
		len += 3;
		i += 3;
	}
}

/*
 * A process's libraries, from its mappings, and its executable when that is a Go
 * program (the mapping of the path /proc/<pid>/exe names). Each by the identity maps
 * shows: on overlayfs on newer kernels the overlay's file, as the watcher reports opens (before,
 * the layer's); the registry keys files by the layer's all the same. A line:
 * "7f1c2a000000-7f1c2a021000 r-xp 00000000 08:01 1234 /usr/lib/libssl.so.3"
 */
static int scan_pid(struct bpftel_uprobes *u, __u32 pid)
{
	char path[64], line[PATH_MAX + 128], range[48], exe[PATH_MAX], *file;
	unsigned long start, end;
	unsigned int major, minor;
	unsigned long long ino, last_ino = 0;
	dev_t last_dev = 0;
	struct bpftel_procfile_target t;
	struct bpftel_maps_text maps = {0};
	struct timespec ctime;
	int lib, hit = 0;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%u/exe", pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	maps_escape(exe, sizeof(exe));
	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	maps.f = fopen(path, "re");
	if (!maps.f)
		return 0;
	while (bpftel_maps_text_next(&maps, line, sizeof(line))) {
		/* A path longer than any (its newlines escaped, 4 bytes each): not read. */
		if (maps.long_line)
			continue;
		file = strchr(line, '/');
		if (!file || sscanf(line, "%lx-%lx %*s %*x %x:%x %llu", &start, &end, &major, &minor,
				    &ino) != 5)
			continue;
		file[strcspn(file, "\n")] = '\0';
		lib = bpftel_shlib_match_name(file);
		if (lib < 0 && (!exe[0] || strcmp(file, exe)))
			continue;
		/* A library is mapped in 4-5 areas in a row (its segments): one is enough,
		 * and a refusal (over budget, say) is counted once, not once per area. */
		if (ino == last_ino && makedev(major, minor) == last_dev)
			continue;
		last_ino = ino;
		last_dev = makedev(major, minor);
		/* map_files reaches the mapped file itself, whatever the namespace. */
		snprintf(range, sizeof(range), "%lx-%lx", start, end);
		t = (struct bpftel_procfile_target){.pid = pid,
						    .dirfd = BPFTEL_PROCFILE_MAPPED,
						    .path = range,
						    .dev = makedev(major, minor),
						    .ino = ino};
		if (lib < 0) {
			exe[0] = '\0'; /* its first mapping is enough */
			if (go_exe(u, &t, file, NULL, &ctime, false) <= 0)
				continue;
			lib = SHLIB_LIB_GO;
		}
		hit |= !uprobes_seen(u, &t, 0, lib, file);
	}
	if (maps.cut) { /* the process holds more than any program maps: read no further */
		pthread_mutex_lock(&u->lock);
		u->ref.scan_maps_cut++;
		pthread_mutex_unlock(&u->lock);
	}
	fclose(maps.f);
	return hit;
}

int bpftel_uprobes__scan(struct bpftel_uprobes *u)
{
	long long from = bpftel_mono_ms();
	__u32 self = (__u32)getpid(), pid;
	struct dirent *de;
	int found = 0;
	DIR *proc;

	proc = opendir("/proc");
	if (!proc)
		return -errno;
	while ((de = readdir(proc))) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = (__u32)strtoul(de->d_name, NULL, 10);
		/* Not the agent: it maps libraries of the sets itself (libmicrohttpd's
		 * libgnutls; a file the registry reads, briefly), and as their user would keep
		 * their rows for good. The kernel side skips it alike (shlib_self_tgid). */
		if (pid != self)
			found += scan_pid(u, pid);
	}
	closedir(proc);
	/* Every process that mapped a file when the scan began is listed now: files
	 * idle since before then may go (sweep_idle_locked). */
	pthread_mutex_lock(&u->lock);
	if (from > u->scan_from_ms)
		u->scan_from_ms = from;
	pthread_mutex_unlock(&u->lock);
	return found;
}

long long bpftel_uprobes__scanned_from_ms(struct bpftel_uprobes *u)
{
	long long ms;

	pthread_mutex_lock(&u->lock);
	ms = u->scan_from_ms;
	pthread_mutex_unlock(&u->lock);
	return ms;
}

/* Before load: the uprobe programs attach later, per file; load them, for multi-uprobe
 * links where the kernel has them. */
static int up_before_init(const struct bpftel_hook_before_init *h, void *ctx)
{
	struct mod_entry *me = ctx;
	struct bpftel_uprobes *u = me->u;
	struct bpf_program *prog;
	char reason[160] = "";
	bool multi;
	size_t i;

	multi = !bpftel_uprobe_multi_detect(reason, sizeof(reason));
	for (i = 0; i < me->nspecs; i++) {
		prog = bpf_object__find_program_by_name(h->obj, me->specs[i].prog);
		if (!prog) {
			pr_err("uprobes: module '%s' has no program '%s'", me->name,
			       me->specs[i].prog);
			return -ENOENT;
		}
		bpf_program__set_autoload(prog, true);
		if (multi && bpftel_uprobe_multi_prepare(prog)) {
			snprintf(reason, sizeof(reason), "program '%s' cannot be loaded for them",
				 me->specs[i].prog);
			multi = false;
		}
	}
	/* A program prepared before a later one failed would load as multi: back to what
	 * SEC("uprobe") declares (no expected attach type). */
	for (i = 0; !multi && i < me->nspecs; i++) {
		prog = bpf_object__find_program_by_name(h->obj, me->specs[i].prog);
		bpf_program__set_expected_attach_type(prog, (enum bpf_attach_type)0);
	}
	pthread_mutex_lock(&u->lock);
	me->multi = multi;
	snprintf(me->mode_reason, sizeof(me->mode_reason), "%s", multi ? "" : reason);
	pthread_mutex_unlock(&u->lock);
	if (!multi)
		pr_info("uprobes: module '%s': one link per probe point: %s", me->name, reason);
	return 0;
}

static int up_before_start(const struct bpftel_hook_before_start *h, void *ctx)
{
	struct mod_entry *me = ctx;
	struct bpftel_uprobes *u = me->u;
	size_t mi = (size_t)(me - u->mods), n = 0, i;
	struct lib_file **files;
	struct attach_job *jobs;

	pthread_mutex_lock(&u->lock);
	me->obj = h->obj;
	files = calloc(u->nfiles + 1, sizeof(*files));
	jobs = calloc(u->nfiles + 1, sizeof(*jobs));
	for (i = 0; files && jobs && i < u->nfiles; i++) {
		if (collect_jobs(u, u->files[i], mi, &jobs[n]))
			files[n++] = u->files[i];
	}
	pthread_mutex_unlock(&u->lock);
	for (i = 0; i < n; i++)
		attach_run(u, files[i], &jobs[i], 1, -1);
	free(files);
	free(jobs);
	return files && jobs ? 0 : -ENOMEM;
}

static int up_before_stop(const struct bpftel_hook_before_stop *h, void *ctx)
{
	struct mod_entry *me = ctx;
	struct bpftel_uprobes *u = me->u;
	size_t mi = (size_t)(me - u->mods), n, i;
	struct ulink links[MAX_SPECS];
	struct file_mod *fm;
	bool gated;

	/* A restart must not wait for the kernel's uprobe teardown: with the object's
	 * gate closed its links go to the reaper. An object without one detaches here. */
	gated = !bpftel_stop_gate_close(h->obj);
	pthread_mutex_lock(&u->lock);
	me->obj = NULL;
	me->gen++;
	while (me->busy)
		pthread_cond_wait(&u->idle, &u->lock);
	/*
	 * One file's links at a time, taken out under the lock and dropped without it
	 * (a detach is the kernel's slow work), then the scan for the next starts over:
	 * the files may have changed meanwhile. With obj NULL no attach adds links of this
	 * module, and a file done has none left, so each is done once. Nothing to allocate.
	 */
again:
	for (i = 0; i < u->nfiles; i++) {
		fm = &u->files[i]->mods[mi];
		if (!fm->nlinks)
			continue;
		n = fm->nlinks;
		memcpy(links, fm->links, n * sizeof(*links));
		fm->nlinks = 0;
		pthread_mutex_unlock(&u->lock);
		links_drop(links, n, gated);
		pthread_mutex_lock(&u->lock);
		goto again;
	}
	/* No links left: every file's state for this module goes, in one pass. */
	for (i = 0; i < u->nfiles; i++) {
		u->files[i]->shed &= ~(1u << mi); /* a new instance starts with every file */
		memset(&u->files[i]->mods[mi], 0, sizeof(u->files[i]->mods[mi]));
		watch_drop_locked(u, u->files[i]);
	}
	pthread_mutex_unlock(&u->lock);
	return 0;
}

int bpftel_uprobes__add_module(struct bpftel_uprobes *u, struct bpftel_module *m,
			       const struct bpftel_uprobe_spec *specs, size_t n)
{
	struct mod_entry *me;
	int err;

	if (n > MAX_SPECS)
		return -E2BIG;
	pthread_mutex_lock(&u->lock);
	if (u->nmods == MAX_MODS) {
		pthread_mutex_unlock(&u->lock);
		return -ENOSPC;
	}
	me = &u->mods[u->nmods++];
	me->u = u;
	snprintf(me->name, sizeof(me->name), "%s", bpftel_module__name(m));
	me->specs = specs;
	me->nspecs = n;
	pthread_mutex_unlock(&u->lock);
	err = bpftel_module__add_before_init(m, up_before_init, me);
	if (!err)
		err = bpftel_module__add_before_start(m, up_before_start, me);
	if (!err)
		err = bpftel_module__add_before_stop(m, up_before_stop, me);
	return err;
}

static const char *file_state(const struct lib_file *f)
{
	if (f->refused >= 0)
		return "refused";
	if (f->releasing)
		return "releasing";
	return f->nprocs ? "in_use" : "idle";
}

static void fill_row(struct bpftel_uprobe_file_info *r, const struct lib_file *f, long long now)
{
	size_t k;

	snprintf(r->path, sizeof(r->path), "%s", f->path);
	r->lib = f->lib;
	r->dev = f->dev;
	r->sdev = f->sdev;
	r->ino = f->ino;
	r->opens = f->opens;
	r->nprocs = f->nprocs;
	for (k = 0; k < f->nprocs && k < 8; k++)
		r->pids[k] = f->procs[k].pid;
	r->state = file_state(f);
	r->idle_s = !f->nprocs && f->idle_since_ms ? (now - f->idle_since_ms) / 1000 : 0;
	r->refused = f->refused;
	snprintf(r->refused_detail, sizeof(r->refused_detail), "%s", f->refused_detail);
}

/* A row's calls, from its module's per-file counters (bpf/uprobe_hits.h); fd -1: none. */
static void row_calls(struct bpftel_uprobe_file_info *r, int fd, const struct lib_file *f)
{
	__u64 hit[UPROBE_HITS_KINDS];

	if (fd < 0)
		return;
	file_hits(fd, f, hit);
	r->counted = true;
	r->entries = hit[UPROBE_HIT_ENTRY] + hit[UPROBE_HIT_STEPPED];
	r->stepped_entries = hit[UPROBE_HIT_STEPPED];
	r->returns = hit[UPROBE_HIT_RETURN];
}

int bpftel_uprobes__files(struct bpftel_uprobes *u, struct bpftel_uprobe_file_info **out)
{
	struct bpftel_uprobe_file_info *arr, *r;
	long long now = bpftel_mono_ms();
	const struct file_mod *fm;
	struct lib_file *f;
	size_t i, j, k, n = 0, rows;
	int hits[MAX_MODS];
	struct bpf_map *m;

	pthread_mutex_lock(&u->lock);
	/* The objects cannot close under the lock: an array lookup per row and kind. */
	for (j = 0; j < u->nmods && j < MAX_MODS; j++) {
		m = u->mods[j].obj ? bpf_object__find_map_by_name(u->mods[j].obj, "uprobe_hits")
				   : NULL;
		hits[j] = m ? bpf_map__fd(m) : -1;
	}
	arr = calloc(u->nfiles * (u->nmods + 1) + 1, sizeof(*arr));
	for (i = 0; arr && i < u->nfiles; i++) {
		f = u->files[i];
		for (j = 0, rows = 0; j < u->nmods; j++) {
			if (!wants(&u->mods[j], f->lib))
				continue;
			r = &arr[n++];
			rows++;
			fill_row(r, f, now);
			fm = &f->mods[j];
			snprintf(r->module, sizeof(r->module), "%s", u->mods[j].name);
			r->attached = fm->attached;
			r->throttled = f->shed & (1u << j);
			r->links = fm->nlinks;
			r->link_mode = fm->st != FM_DONE ? NULL : fm->multi ? "multi" : "single";
			if (fm->st == FM_DONE && !fm->multi)
				snprintf(r->mode_reason, sizeof(r->mode_reason), "%s",
					 u->mods[j].mode_reason);
			r->failed = fm->nfail;
			for (k = 0; k < fm->nfail && k < BPFTEL_UPROBE_MAX_FAIL; k++) {
				memcpy(r->fail[k].symbol, fm->fail[k].symbol,
				       sizeof(r->fail[k].symbol));
				r->fail[k].err = fm->fail[k].err;
			}
			r->nfolded = fm->nfolded;
			r->skipped = fm->nskipped;
			memcpy(r->folded, fm->folded, sizeof(r->folded));
			r->nmoved = fm->nmoved;
			memcpy(r->moved, fm->moved, sizeof(r->moved));
			if (fm->st == FM_DONE && j < MAX_MODS)
				row_calls(r, hits[j], f);
		}
		if (!rows) /* no module wants it: one row for the file */
			fill_row(&arr[n++], f, now);
	}
	pthread_mutex_unlock(&u->lock);
	*out = arr;
	return arr ? (int)n : -ENOMEM;
}

void bpftel_uprobes__refusals(struct bpftel_uprobes *u, struct bpftel_uprobes_refusals *out)
{
	pthread_mutex_lock(&u->lock);
	*out = u->ref;
	out->sweeps = u->sweeps;
	pthread_mutex_unlock(&u->lock);
}

