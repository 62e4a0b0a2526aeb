// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "uprobes.h"
#include "user/common/log.h"
#include "user/manager/elfsym.h"
#include "user/manager/manager.h"

#define MAX_MODS  8
#define MAX_SPECS 16
#define MAX_FILES 1024

struct proc_ref {
	__u32 pid;
	__u64 start_time;
	char *access; /* a path that reaches the file through this process */
};

struct file_mod {
	bool tried;
	size_t nlinks;
	struct bpf_link *links[MAX_SPECS];
	size_t nfail;
	struct {
		char symbol[64];
		int err;
	} fail[BPFTEL_UPROBE_MAX_FAIL];
};

struct lib_file {
	__u64 dev, ino;
	enum shlib_lib lib;
	char path[256];
	size_t nprocs, cap;
	struct proc_ref *procs;
	struct file_mod mods[MAX_MODS];
};

struct mod_entry {
	struct bpftel_uprobes *u;
	char name[64];
	const struct bpftel_uprobe_spec *specs;
	size_t nspecs;
	struct bpf_object *obj; /* between before_start and before_stop */
};

struct bpftel_uprobes {
	pthread_mutex_t lock;
	size_t nmods;
	struct mod_entry mods[MAX_MODS];
	size_t nfiles;
	struct lib_file *files[MAX_FILES];
	__u64 stale; /* detections whose path no longer led to the file opened */
};

int bpftel_shlib_match_name(const char *path)
{
	struct shlib_config cfg;
	const char *base = strrchr(path, '/');
	size_t len, end, i;

	base = base ? base + 1 : path;
	len = strlen(base);
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

/* Field 22 of /proc/<pid>/stat: tells a pid's reuse apart. 0 if the process is gone. */
static __u64 start_time(__u32 pid)
{
	char path[64], buf[1024], *p;
	unsigned long long st = 0;
	FILE *f;
	int i;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return 0;
	}
	fclose(f);
	p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
	for (i = 0; p && i < 20; i++)
		p = strchr(p + 1, ' ');
	if (p)
		sscanf(p + 1, "%llu", &st);
	return st;
}

int bpftel_uprobes__new(struct bpftel_uprobes **out)
{
	struct bpftel_uprobes *u = calloc(1, sizeof(*u));

	*out = u;
	if (!u)
		return -ENOMEM;
	pthread_mutex_init(&u->lock, NULL);
	return 0;
}

/*
 * Detach module mod's uprobes from f. In place (~80 ms a link, the kernel's), unless
 * in_background: the module is stopping and its object's stop gate is closed, so its
 * programs do nothing any more and the reaper can take its time.
 */
static void file_detach(struct lib_file *f, size_t mod, bool in_background)
{
	struct file_mod *fm = &f->mods[mod];
	size_t i;

	for (i = 0; i < fm->nlinks; i++) {
		if (in_background)
			bpftel_link_release(fm->links[i]);
		else
			bpf_link__destroy(fm->links[i]);
	}
	memset(fm, 0, sizeof(*fm));
}

static void file_free(struct lib_file *f)
{
	size_t i;

	for (i = 0; i < MAX_MODS; i++)
		file_detach(f, i, false);
	for (i = 0; i < f->nprocs; i++)
		free(f->procs[i].access);
	free(f->procs);
	free(f);
}

void bpftel_uprobes__free(struct bpftel_uprobes *u)
{
	size_t i;

	if (!u)
		return;
	for (i = 0; i < u->nfiles; i++)
		file_free(u->files[i]);
	pthread_mutex_destroy(&u->lock);
	free(u);
}

/* A path that reaches f now: the newest process's that still resolves. */
/*
 * Open f through one of its live processes' access paths. The fd pins the file while
 * symbols are resolved and uprobes attached (through /proc/self/fd/N): a process that
 * exits meanwhile cannot turn into a spurious ENOENT recorded as an attach failure.
 * -1 when none of its processes can reach it any more.
 */
static int file_open_pinned(struct lib_file *f)
{
	struct stat st;
	size_t i;
	int fd;

	for (i = f->nprocs; i-- > 0;) {
		fd = open(f->procs[i].access, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (!fstat(fd, &st) && st.st_dev == f->dev && st.st_ino == f->ino)
			return fd;
		close(fd);
	}
	return -1;
}

/* With u->lock: attach module mi's probes for f's library, once. */
static void file_attach(struct bpftel_uprobes *u, struct lib_file *f, size_t mi)
{
	struct mod_entry *me = &u->mods[mi];
	struct file_mod *fm = &f->mods[mi];
	const struct bpftel_uprobe_spec *s;
	struct bpf_program *prog;
	struct bpf_link *link;
	char reason[160], access[64];
	long off;
	size_t i;
	int err, fd;

	if (!me->obj || fm->tried || !f->nprocs)
		return;
	fd = file_open_pinned(f);
	if (fd < 0)
		return; /* its processes are gone: the sweep forgets it, nothing to record */
	snprintf(access, sizeof(access), "/proc/self/fd/%d", fd);
	fm->tried = true; /* success or failure: no retry storm */
	for (i = 0; i < me->nspecs; i++) {
		s = &me->specs[i];
		if (s->lib != f->lib)
			continue;
		prog = bpf_object__find_program_by_name(me->obj, s->prog);
		off = bpftel_elf_sym_offset(access, s->symbol, reason, sizeof(reason));
		if (!prog) {
			err = -ENOENT;
		} else if (off < 0) {
			err = (int)off;
		} else {
			link = bpf_program__attach_uprobe(prog, s->retprobe, -1, access, off);
			err = link ? 0 : -errno;
			if (link)
				fm->links[fm->nlinks++] = link; /* nspecs <= MAX_SPECS */
		}
		if (!err)
			continue;
		pr_warn("uprobes: module '%s': %s:%s: %s", me->name, f->path, s->symbol,
			strerror(-err));
		if (fm->nfail < BPFTEL_UPROBE_MAX_FAIL) {
			snprintf(fm->fail[fm->nfail].symbol, sizeof(fm->fail[0].symbol), "%s",
				 s->symbol);
			fm->fail[fm->nfail].err = err;
		}
		fm->nfail++;
	}
	close(fd);
}

/* want_ino != 0: the file must be (want_dev, want_ino), the one the kernel saw opened. */
static int uprobes_seen(struct bpftel_uprobes *u, __u32 pid, enum shlib_lib lib, const char *named,
			const char *access, dev_t want_dev, __u64 want_ino)
{
	struct proc_ref *grown;
	struct lib_file *f = NULL;
	struct stat st;
	__u64 stime;
	size_t i;

	if (stat(access, &st))
		return -errno; /* the process is gone, or the file is */
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (want_ino && (st.st_dev != want_dev || st.st_ino != want_ino)) {
		/* Renamed, replaced, or the dirfd closed since: not the file that was
		 * opened. The caller reads /proc/<pid>/maps instead. */
		pthread_mutex_lock(&u->lock);
		u->stale++;
		pthread_mutex_unlock(&u->lock);
		return -ESTALE;
	}
	stime = start_time(pid);
	if (!stime)
		return -ESRCH;

	pthread_mutex_lock(&u->lock);
	for (i = 0; i < u->nfiles; i++) {
		if (u->files[i]->dev == st.st_dev && u->files[i]->ino == st.st_ino) {
			f = u->files[i];
			break;
		}
	}
	if (!f) {
		if (u->nfiles == MAX_FILES || !(f = calloc(1, sizeof(*f)))) {
			pthread_mutex_unlock(&u->lock);
			return -ENOSPC;
		}
		f->dev = st.st_dev;
		f->ino = st.st_ino;
		f->lib = lib;
		snprintf(f->path, sizeof(f->path), "%s", named);
		u->files[u->nfiles++] = f;
	}
	for (i = 0; i < f->nprocs; i++) {
		if (f->procs[i].pid == pid && f->procs[i].start_time == stime)
			break;
	}
	if (i == f->nprocs) {
		if (f->nprocs == f->cap) {
			grown = realloc(f->procs, (f->cap ? f->cap * 2 : 4) * sizeof(*grown));
			if (!grown) {
				pthread_mutex_unlock(&u->lock);
				return -ENOMEM;
			}
			f->procs = grown;
			f->cap = f->cap ? f->cap * 2 : 4;
		}
		f->procs[f->nprocs].pid = pid;
		f->procs[f->nprocs].start_time = stime;
		f->procs[f->nprocs].access = strdup(access);
		if (!f->procs[f->nprocs].access) {
			pthread_mutex_unlock(&u->lock);
			return -ENOMEM;
		}
		f->nprocs++;
	}
	for (i = 0; i < u->nmods; i++)
		file_attach(u, f, i);
	pthread_mutex_unlock(&u->lock);
	return 0;
}

int bpftel_uprobes__process_seen(struct bpftel_uprobes *u, __u32 pid, enum shlib_lib lib,
				 const char *path)
{
	char access[PATH_MAX + 64];
	int err;

	if ((unsigned)lib >= SHLIB_LIB__COUNT)
		return -EINVAL;
	/* Through the process's own root and cwd: containers included. */
	err = bpftel_shlib_host_path(pid, AT_FDCWD, path, access, sizeof(access));
	return err ? err : uprobes_seen(u, pid, lib, path, access, 0, 0);
}

int bpftel_uprobes__detected(struct bpftel_uprobes *u, const struct bpftel_shlib_detection *d)
{
	char access[PATH_MAX + 64];
	int err;

	if ((unsigned)d->lib >= SHLIB_LIB__COUNT)
		return -EINVAL;
	err = bpftel_shlib_host_path(d->pid, d->dirfd, d->path, access, sizeof(access));
	return err ? err : uprobes_seen(u, d->pid, d->lib, d->path, access, d->dev, d->ino);
}

void bpftel_uprobes__listener(void *ctx, const struct bpftel_shlib_detection *d)
{
	int err = bpftel_uprobes__detected(ctx, d);

	if (err && err != -ENOENT && err != -ESRCH)
		pr_debug("uprobes: pid %u %s: %s", d->pid, d->path, strerror(-err));
}

__u64 bpftel_uprobes__stale(struct bpftel_uprobes *u)
{
	__u64 n;

	pthread_mutex_lock(&u->lock);
	n = u->stale;
	pthread_mutex_unlock(&u->lock);
	return n;
}

int bpftel_uprobes__sweep(struct bpftel_uprobes *u)
{
	struct lib_file *f;
	size_t i, j, kept;
	int dropped = 0;

	pthread_mutex_lock(&u->lock);
	for (i = 0; i < u->nfiles;) {
		f = u->files[i];
		for (j = 0, kept = 0; j < f->nprocs; j++) {
			if (start_time(f->procs[j].pid) == f->procs[j].start_time)
				f->procs[kept++] = f->procs[j];
			else
				free(f->procs[j].access);
		}
		f->nprocs = kept;
		if (kept) {
			i++;
			continue;
		}
		file_free(f);
		u->files[i] = u->files[--u->nfiles];
		dropped++;
	}
	pthread_mutex_unlock(&u->lock);
	return dropped;
}

int bpftel_uprobes__scan(struct bpftel_uprobes *u)
{
	char path[64], line[PATH_MAX + 128], access[128], *file;
	unsigned long start, end;
	struct dirent *de;
	int found = 0, lib, hit;
	DIR *proc;
	FILE *maps;
	__u32 pid;

	proc = opendir("/proc");
	if (!proc)
		return -errno;
	while ((de = readdir(proc))) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = (__u32)strtoul(de->d_name, NULL, 10);
		snprintf(path, sizeof(path), "/proc/%u/maps", pid);
		maps = fopen(path, "re");
		if (!maps)
			continue;
		hit = 0;
		while (fgets(line, sizeof(line), maps)) {
			file = strchr(line, '/');
			if (!file || sscanf(line, "%lx-%lx", &start, &end) != 2)
				continue;
			file[strcspn(file, "\n")] = '\0';
			lib = bpftel_shlib_match_name(file);
			if (lib < 0)
				continue;
			/* map_files reaches the mapped file itself, whatever namespace. */
			snprintf(access, sizeof(access), "/proc/%u/map_files/%lx-%lx", pid, start,
				 end);
			hit |= !uprobes_seen(u, pid, lib, file, access, 0, 0);
		}
		fclose(maps);
		found += hit;
	}
	closedir(proc);
	return found;
}

/* The module's uprobe programs attach later, per file: make sure they get loaded. */
static int up_before_init(const struct bpftel_hook_before_init *h, void *ctx)
{
	struct mod_entry *me = ctx;
	struct bpf_program *prog;
	size_t i;

	for (i = 0; i < me->nspecs; i++) {
		prog = bpf_object__find_program_by_name(h->obj, me->specs[i].prog);
		if (!prog) {
			pr_err("uprobes: module '%s' has no program '%s'", me->name,
			       me->specs[i].prog);
			return -ENOENT;
		}
		bpf_program__set_autoload(prog, true);
	}
	return 0;
}

static int up_before_start(const struct bpftel_hook_before_start *h, void *ctx)
{
	struct mod_entry *me = ctx;
	struct bpftel_uprobes *u = me->u;
	size_t i;

	pthread_mutex_lock(&u->lock);
	me->obj = h->obj;
	for (i = 0; i < u->nfiles; i++)
		file_attach(u, u->files[i], (size_t)(me - u->mods));
	pthread_mutex_unlock(&u->lock);
	return 0;
}

static int up_before_stop(const struct bpftel_hook_before_stop *h, void *ctx)
{
	struct mod_entry *me = ctx;
	struct bpftel_uprobes *u = me->u;
	size_t i;

	bool gated;

	pthread_mutex_lock(&u->lock);
	/* A module restart must not wait for the kernel's uprobe teardown: with the
	 * object's gate closed its links go to the reaper. An object without a gate
	 * detaches in place. */
	gated = !bpftel_stop_gate_close(h->obj);
	for (i = 0; i < u->nfiles; i++)
		file_detach(u->files[i], (size_t)(me - u->mods), gated);
	me->obj = NULL;
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

int bpftel_uprobes__files(struct bpftel_uprobes *u, struct bpftel_uprobe_file_info **out)
{
	struct bpftel_uprobe_file_info *arr, *r;
	struct lib_file *f;
	size_t i, j, k, n = 0;

	pthread_mutex_lock(&u->lock);
	arr = calloc(u->nfiles * (u->nmods + 1) + 1, sizeof(*arr));
	for (i = 0; arr && i < u->nfiles; i++) {
		f = u->files[i];
		for (j = 0; j <= u->nmods; j++) {
			bool wants = false;

			if (j == u->nmods && n && arr[n - 1].dev == f->dev &&
			    arr[n - 1].ino == f->ino)
				break; /* some module row already shows this file */
			for (k = 0; j < u->nmods && k < u->mods[j].nspecs; k++)
				wants |= u->mods[j].specs[k].lib == f->lib;
			if (j < u->nmods && !wants)
				continue;
			r = &arr[n++];
			snprintf(r->path, sizeof(r->path), "%s", f->path);
			r->lib = f->lib;
			r->dev = f->dev;
			r->ino = f->ino;
			r->nprocs = f->nprocs;
			for (k = 0; k < f->nprocs && k < 8; k++)
				r->pids[k] = f->procs[k].pid;
			if (j == u->nmods)
				break;
			snprintf(r->module, sizeof(r->module), "%s", u->mods[j].name);
			r->attached = f->mods[j].nlinks;
			r->failed = f->mods[j].nfail;
			for (k = 0; k < f->mods[j].nfail && k < BPFTEL_UPROBE_MAX_FAIL; k++) {
				memcpy(r->fail[k].symbol, f->mods[j].fail[k].symbol,
				       sizeof(r->fail[k].symbol));
				r->fail[k].err = f->mods[j].fail[k].err;
			}
		}
	}
	pthread_mutex_unlock(&u->lock);
	*out = arr;
	return arr ? (int)n : -ENOMEM;
}
