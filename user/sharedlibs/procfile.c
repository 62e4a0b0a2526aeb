// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Opening another process's files without blocking or leaving its root (procfile.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "open_waits.h"
#include "procfile.h"
#include "real_file.h"
#include "user/common/deadline_call.h"
#include "user/common/proc.h"

#ifndef FUSE_SUPER_MAGIC
#define FUSE_SUPER_MAGIC 0x65735546
#endif

static const char *const refusal_names[BPFTEL_REFUSED__COUNT] = {
	[BPFTEL_REFUSED_NOT_REGULAR] = "not_regular",
	[BPFTEL_REFUSED_IDENTITY_CHANGED] = "identity_changed",
	[BPFTEL_REFUSED_OUTSIDE_ROOT] = "outside_root",
	[BPFTEL_REFUSED_SLOW_FS] = "slow_fs",
	[BPFTEL_REFUSED_TOO_LARGE] = "too_large",
	[BPFTEL_REFUSED_NOT_ELF] = "not_elf",
	[BPFTEL_REFUSED_TABLES_TOO_LARGE] = "tables_too_large",
	[BPFTEL_REFUSED_REGISTRY_FULL] = "registry_full",
	[BPFTEL_REFUSED_UNSUPPORTED] = "unsupported",
	[BPFTEL_REFUSED_OVER_BUDGET] = "over_budget",
};

static unsigned int timeout_ms = BPFTEL_PROCFILE_TIMEOUT_MS;
static pthread_once_t timeout_once = PTHREAD_ONCE_INIT;

static void timeout_from_env(void)
{
	const char *v = getenv("BPFTEL_PROCFILE_TIMEOUT_MS");
	char *end;
	unsigned long ms;

	if (!v || !*v)
		return;
	errno = 0;
	ms = strtoul(v, &end, 10);
	if (!errno && !*end && ms >= 1 && ms <= 600000)
		timeout_ms = (unsigned int)ms;
}

unsigned int bpftel_procfile_timeout_ms(void)
{
	pthread_once(&timeout_once, timeout_from_env);
	return timeout_ms;
}

const char *bpftel_refusal_name(enum bpftel_refusal why)
{
	return (unsigned)why < BPFTEL_REFUSED__COUNT ? refusal_names[why] : "unknown";
}

void bpftel_procfile_explain(enum bpftel_refusal why, const struct stat *st, int err, char *buf,
			     size_t len)
{
	const char *kind;

	switch (why) {
	case BPFTEL_REFUSED_NOT_REGULAR:
		kind = S_ISFIFO(st->st_mode)  ? "a FIFO"
		       : S_ISDIR(st->st_mode) ? "a directory"
		       : S_ISCHR(st->st_mode) ? "a character device"
		       : S_ISBLK(st->st_mode) ? "a block device"
		       : S_ISSOCK(st->st_mode) ? "a socket"
					       : "not a regular file";
		snprintf(buf, len, "%s", kind);
		break;
	case BPFTEL_REFUSED_IDENTITY_CHANGED:
		snprintf(buf, len, "leads to another file than the one opened");
		break;
	case BPFTEL_REFUSED_OUTSIDE_ROOT:
		snprintf(buf, len, "the path leaves the process's root or directory (%s)",
			 strerror(-err));
		break;
	case BPFTEL_REFUSED_SLOW_FS:
		if (err == -ETIMEDOUT)
			snprintf(buf, len, "its file system did not answer within %u ms",
				 bpftel_procfile_timeout_ms());
		else if (err == -EBUSY)
			snprintf(buf, len, "%u earlier opens still wait on their file systems",
				 BPFTEL_DEADLINE_STUCK_MAX);
		else if (err == -EDQUOT)
			snprintf(buf, len,
				 "%u earlier opens for processes of its user still wait on their "
				 "file systems, or were given up within %u s",
				 BPFTEL_DEADLINE_STUCK_PER_OWNER,
				 BPFTEL_DEADLINE_STRIKE_WINDOW_S);
		else if (err == -EINPROGRESS)
			snprintf(buf, len, "an earlier open of it still waits on its file system");
		else
			snprintf(buf, len, "on or through a FUSE file system");
		break;
	default:
		snprintf(buf, len, "%s", strerror(-err));
	}
}

/* The device of mount mnt_id's file system, from pid's mountinfo. -ENOENT: no such
 * mount there. */
static int mount_dev(__u32 pid, unsigned int mnt_id, dev_t *dev)
{
	char path[64];
	FILE *f;
	int err;

	snprintf(path, sizeof(path), "/proc/%u/mountinfo", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	err = bpftel_mountinfo_dev(f, mnt_id, dev);
	fclose(f);
	return err;
}

/* Our fd's inode number and mount id, as the kernel has them (fdinfo; ino: since 5.14). */
static int fd_inode(int fd, unsigned int *mnt_id, __u64 *ino)
{
	char path[64], line[128];
	int found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "mnt_id: %u", mnt_id) == 1)
			found |= 1;
		else if (sscanf(line, "ino: %llu", (unsigned long long *)ino) == 1)
			found |= 2;
	}
	fclose(f);
	return found == 3 ? 0 : -ENOTSUP;
}

/*
 * Is fd's file, whose stat is st, the one the kernel saw opened (t->dev, t->ino)? stat
 * can say otherwise of that very file, while the BPF side read the inode's number and
 * its super block's device: a file on a btrfs subvolume has the subvolume's device,
 * and one on an overlayfs whose layers lie on different file systems, without xino,
 * its layer's pseudo-device. So where the numbers agree and the devices do not, the
 * kernel's own view of fd decides: its inode number and the device of its mount, in
 * the process's mounts (the walk went through them). Files of two layers of such an
 * overlay may share a number; the path could then lead to the other, which the process
 * could as well have opened itself.
 */
static bool same_file(const struct bpftel_procfile_target *t, int fd, const struct stat *st)
{
	unsigned int mnt_id = 0;
	__u64 ino = 0;
	dev_t dev = 0;

	if (st->st_ino != t->ino)
		return false;
	if (st->st_dev == t->dev)
		return true;
	return !fd_inode(fd, &mnt_id, &ino) && ino == t->ino && !mount_dev(t->pid, mnt_id, &dev) &&
	       dev == t->dev;
}

enum bpftel_fuse_view bpftel_procfile_fuse(__u32 pid, dev_t dev)
{
	enum bpftel_fuse_view view;
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/mountinfo", pid);
	f = fopen(path, "re");
	if (!f)
		return BPFTEL_FUSE_NONE; /* the process is gone: so are its paths */
	view = bpftel_mountinfo_fuse(f, dev);
	fclose(f);
	return view;
}

static int sys_openat2(int dirfd, const char *path, __u64 flags, __u64 resolve)
{
	struct open_how how = {.flags = flags, .resolve = resolve};

	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

/*
 * An O_PATH fd of t's file, resolved inside the process's root (absolute paths) or
 * beneath its cwd or directory fd (relative ones). -errno, *why set on a refusal.
 *
 * Where the process sees a FUSE mount (view), the path may lead through it (a FUSE
 * directory or symlink on the way to a file elsewhere), and a lookup there waits for
 * the FUSE daemon, which may never answer: the walk then takes only what the kernel's
 * caches hold (RESOLVE_CACHED, 5.12), which the process's own open just filled. What
 * would need the file system is refused as slow_fs.
 */
static int open_path(const struct bpftel_procfile_target *t, enum bpftel_fuse_view view,
		     enum bpftel_refusal *why)
{
	char base[64];
	__u64 resolve = RESOLVE_NO_MAGICLINKS;
	int dfd, fd, err, tries;
	const char *rel;

	if (t->dirfd == BPFTEL_PROCFILE_MAPPED || t->dirfd == BPFTEL_PROCFILE_EXE) {
		/* The kernel's own reference to the mapped file, or to the executable: no
		 * path of theirs to walk. */
		if (t->dirfd == BPFTEL_PROCFILE_EXE)
			snprintf(base, sizeof(base), "/proc/%u/exe", t->pid);
		else
			snprintf(base, sizeof(base), "/proc/%u/map_files/%.40s", t->pid, t->path);
		fd = open(base, O_PATH | O_CLOEXEC);
		return fd < 0 ? -errno : fd;
	}
	if (t->path[0] == '/') {
		snprintf(base, sizeof(base), "/proc/%u/root", t->pid);
		resolve |= RESOLVE_IN_ROOT;
	} else if (t->dirfd == AT_FDCWD) {
		snprintf(base, sizeof(base), "/proc/%u/cwd", t->pid);
		resolve |= RESOLVE_BENEATH;
	} else if (t->dirfd >= 0) {
		snprintf(base, sizeof(base), "/proc/%u/fd/%d", t->pid, t->dirfd);
		resolve |= RESOLVE_BENEATH;
	} else {
		return -EBADF;
	}
	dfd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	/* A process has a root and a directory until it exits; one that has let go of
	 * them (exiting, or a zombie not yet reaped, whose stat still reads) is gone. */
	if (dfd < 0 && errno == ENOENT && (t->path[0] == '/' || t->dirfd == AT_FDCWD))
		return -ESRCH;
	if (dfd < 0)
		return -errno;
	if (view != BPFTEL_FUSE_NONE)
		resolve |= RESOLVE_CACHED;
	/* EAGAIN also when a rename or a mount anywhere on the host raced a ".." of the
	 * walk (RESOLVE_IN_ROOT, _BENEATH: $ORIGIN/../lib paths): tried again, a few times,
	 * as openat2(2) says to. */
	for (tries = 0; tries < 8; tries++) {
		fd = sys_openat2(dfd, t->path, O_PATH | O_CLOEXEC, resolve);
		err = fd < 0 ? -errno : 0;
		if (err != -EAGAIN)
			break;
	}
	/* EAGAIN: the walk needed the file system. EINVAL: 5.6 to 5.11, no RESOLVE_CACHED.
	 * Refused either way, not walked through FUSE. */
	if ((err == -EAGAIN || err == -EINVAL) && (resolve & RESOLVE_CACHED)) {
		close(dfd);
		*why = BPFTEL_REFUSED_SLOW_FS;
		return -EAGAIN;
	}
	if (err == -ENOSYS) {
		/* Before 5.6: may escape the root, but only to the identity checked next. An
		 * absolute path is made relative to dfd (the process's root): openat(2)
		 * would walk it from the agent's own root, ignoring dfd. */
		for (rel = t->path; *rel == '/'; rel++)
			;
		fd = openat(dfd, *rel ? rel : ".", O_PATH | O_CLOEXEC);
		err = fd < 0 ? -errno : 0;
	}
	close(dfd);
	/* A relative path that climbs above its directory ("../lib/libssl.so.3", from
	 * LD_LIBRARY_PATH=../lib) is walked beneath it only, and refused there, though the
	 * process stayed in its root: not a refusal, -EREMOTE; the caller reaches the file
	 * through the process's mapping (a /proc scan). */
	if (err == -EXDEV && (resolve & RESOLVE_BENEATH))
		return -EREMOTE;
	if (err == -EXDEV || err == -ELOOP)
		*why = BPFTEL_REFUSED_OUTSIDE_ROOT;
	return err ? err : fd;
}

static int open_now(const struct bpftel_procfile_target *t, struct stat *st,
		    enum bpftel_refusal *why)
{
	enum bpftel_fuse_view view;
	char self[64];
	struct stat again;
	int opath, fd;

	*why = BPFTEL_REFUSED__COUNT;
	/* Zero unless the path led somewhere: a refusal of the path (outside_root, a walk
	 * through FUSE) must not read as one of the file the kernel opened. */
	memset(st, 0, sizeof(*st));
	if (!t->path || !*t->path)
		return -EINVAL;
	view = t->ino ? bpftel_procfile_fuse(t->pid, t->dev) : BPFTEL_FUSE_NONE;
	if (view == BPFTEL_FUSE_DEV) {
		/* The file itself, as the kernel named it: never opened here. */
		st->st_dev = t->dev;
		st->st_ino = t->ino;
		*why = BPFTEL_REFUSED_SLOW_FS;
		return -EAGAIN;
	}
	opath = open_path(t, view, why);
	if (opath < 0)
		return opath;
	if (fstat(opath, st)) {
		fd = -errno;
		goto out;
	}
	if (!S_ISREG(st->st_mode)) {
		*why = BPFTEL_REFUSED_NOT_REGULAR;
		fd = -EINVAL;
		goto out;
	}
	if (t->ino && !same_file(t, opath, st)) {
		*why = BPFTEL_REFUSED_IDENTITY_CHANGED;
		fd = -ESTALE;
		goto out;
	}
	/* The same inode, opened for reading: a regular file, so no FIFO or tty semantics
	 * can apply; the flags say so anyway. */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", opath);
	fd = open(self, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		fd = -errno;
		goto out;
	}
	if (fstat(fd, &again) || again.st_dev != st->st_dev || again.st_ino != st->st_ino) {
		close(fd);
		*why = BPFTEL_REFUSED_IDENTITY_CHANGED;
		fd = -ESTALE;
	} else if (t->ino) {
		/* Known by the identity the kernel reports it with (same_file()). */
		st->st_dev = t->dev;
	}
out:
	close(opath);
	return fd;
}

/* btrfs' statfs magic (linux/magic.h's BTRFS_SUPER_MAGIC). */
#define MAGIC_BTRFS 0x9123683e

/* On btrfs the subvolume's device of fd, mapped as dev, as stat gives it; else dev. */
static dev_t stat_sdev(int fd, dev_t dev)
{
	struct statfs sfs;
	struct stat st;

	if (!fstat(fd, &st) && st.st_dev != dev && !fstatfs(fd, &sfs) &&
	    sfs.f_type == MAGIC_BTRFS)
		return st.st_dev;
	return dev;
}

/*
 * What fd's mapping is of: on overlayfs the file underneath, which is what the kernel
 * maps and attaches uprobes to. Its identity in *dev, *ino; where sdev is given, on
 * btrfs its subvolume's device (stat's), else *dev; where fuse is given, whether it
 * lies on FUSE. Asked of the kernel where real_file.h's iterator is held (the
 * subvolume too: through an overlay, stat shows the overlay's device, and the subvolume
 * would be unknown, which any subvolume's file of the same numbers would be taken for);
 * else stat and statfs of the mapping (/proc/self/map_files), which on newer kernels
 * show the overlay's file, not the layer's (and whose statfs may wait on FUSE: this
 * runs on a deadline call).
 */
static int mapped_file(int fd, dev_t *dev, __u64 *ino, dev_t *sdev, bool *fuse)
{
	struct bpftel_real_file real;
	struct statfs sfs;
	char path[96];
	struct stat st;
	void *p;
	int err;

	/* Map one page and ask what the mapping is of. */
	p = mmap(NULL, 1, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	err = bpftel_real_file_at((unsigned long)p, &real);
	if (!err) {
		*dev = real.dev;
		*ino = real.ino;
		/* A btrfs file it names no subvolume of: btrfs loaded after the iterator
		 * was, its types unknown to it. Stat tells then. */
		if (sdev)
			*sdev = real.sdev			  ? real.sdev
				: real.magic == MAGIC_BTRFS ? stat_sdev(fd, real.dev)
							    : real.dev;
		if (fuse)
			*fuse = real.magic == FUSE_SUPER_MAGIC;
	} else {
		snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", (unsigned long)p,
			 (unsigned long)p + (unsigned long)sysconf(_SC_PAGESIZE));
		err = 0;
		if (stat(path, &st) || (fuse && statfs(path, &sfs))) {
			err = -errno;
		} else {
			*dev = st.st_dev;
			*ino = st.st_ino;
			if (sdev)
				*sdev = stat_sdev(fd, st.st_dev);
			if (fuse)
				*fuse = sfs.f_type == FUSE_SUPER_MAGIC;
		}
	}
	munmap(p, 1);
	return err;
}

int bpftel_procfile_real_identity(int fd, dev_t *dev, __u64 *ino)
{
	return mapped_file(fd, dev, ino, NULL, NULL);
}

/* Whose a call to pid's file is (deadline_call.h): who is accountable for pid (proc.h):
 * its user, or the container runtime's user namespace it runs in. */
static __u64 owner_of(const struct bpftel_procfile_target *t)
{
	__u64 owner;

	if (t->owner_gone)
		return BPFTEL_DEADLINE_NO_OWNER;
	return bpftel_proc_owner(t->pid, &owner) ? BPFTEL_DEADLINE_NO_OWNER : owner;
}

/* An open on a deadline call: what it needs, copied, and what it found. */
struct open_job {
	struct bpftel_deadline_call call;
	struct bpftel_procfile_target t;
	struct stat st;
	dev_t real_dev; /* what it maps (mapped_file()) */
	__u64 real_ino;
	dev_t real_sdev;
	enum bpftel_refusal why;
	int fd;
	__u64 ticket; /* in open_waits.h's table */
	char path[]; /* t.path's copy: the caller's may be gone when an abandoned job ends */
};

/*
 * Open, then ask what the file maps. Its path was checked against the process's mounts,
 * but FUSE can hide: beneath an overlayfs whose lower layer is a FUSE mount unmounted
 * (lazily) since, or behind a mapping, so that no mount of the process shows it. Reads
 * of the file, and the kernel's own when it attaches a uprobe, would then wait for that
 * FUSE daemon: a file that maps FUSE is refused. Unknown is taken as FUSE: the file was
 * just mapped.
 */
static int open_job_run(struct bpftel_deadline_call *c)
{
	struct open_job *j = (struct open_job *)c;
	bool fuse;

	j->fd = open_now(&j->t, &j->st, &j->why);
	if (j->fd >= 0 &&
	    (mapped_file(j->fd, &j->real_dev, &j->real_ino, &j->real_sdev, &fuse) || fuse)) {
		close(j->fd);
		j->why = BPFTEL_REFUSED_SLOW_FS;
		j->fd = -EAGAIN;
	}
	return j->fd;
}

static void open_job_release(struct bpftel_deadline_call *c)
{
	struct open_job *j = (struct open_job *)c;

	bpftel_open_waits_end(j->ticket);
	if (j->fd >= 0)
		close(j->fd);
	free(j);
}

int bpftel_procfile_open(const struct bpftel_procfile_target *t, struct stat *st,
			 enum bpftel_refusal *why)
{
	dev_t dev, sdev;
	__u64 ino;

	return bpftel_procfile_open_mapped(t, st, why, &dev, &ino, &sdev);
}

int bpftel_procfile_open_mapped(const struct bpftel_procfile_target *t, struct stat *st,
				enum bpftel_refusal *why, dev_t *real_dev, __u64 *real_ino,
				dev_t *real_sdev)
{
	size_t n = t->path ? strlen(t->path) + 1 : 1;
	__u64 ticket, owner = owner_of(t);
	struct open_job *j;
	int err, fd;

	*why = BPFTEL_REFUSED__COUNT;
	memset(st, 0, sizeof(*st));
	if (t->ino && bpftel_open_waits_stalled(t->dev, t->ino, owner)) {
		/* An earlier open of this file waits on its file system still. */
		st->st_dev = t->dev;
		st->st_ino = t->ino;
		*why = BPFTEL_REFUSED_SLOW_FS;
		return -EINPROGRESS;
	}
	j = calloc(1, sizeof(*j) + n);
	if (!j)
		return -ENOMEM;
	j->call.run = open_job_run;
	j->call.release = open_job_release;
	j->call.owner = owner;
	j->t = *t;
	if (t->path)
		memcpy(j->path, t->path, n);
	j->t.path = t->path ? j->path : NULL;
	j->fd = -1;
	j->ticket = ticket = bpftel_open_waits_begin(t->dev, t->ino, owner);
	err = bpftel_deadline_call(&j->call, bpftel_procfile_timeout_ms());
	if (err == -ETIMEDOUT || err == -EBUSY || err == -EDQUOT) {
		/* j is the thread's if it timed out (its ticket ends with it). Refused as the
		 * file the kernel named, never touched again (the caller remembers the
		 * refusal by identity, for a while; open_waits.h for as long as it waits). */
		st->st_dev = t->dev;
		st->st_ino = t->ino;
		*why = BPFTEL_REFUSED_SLOW_FS;
		if (err == -ETIMEDOUT)
			bpftel_open_waits_abandon(ticket);
		else
			open_job_release(&j->call);
		return err;
	}
	if (err) {
		open_job_release(&j->call);
		return err;
	}
	*st = j->st;
	*why = j->why;
	*real_dev = j->real_dev;
	*real_ino = j->real_ino;
	*real_sdev = j->real_sdev;
	fd = j->fd;
	j->fd = -1;
	open_job_release(&j->call);
	return fd;
}

static char *host_path_now(const struct bpftel_procfile_target *t)
{
	enum bpftel_fuse_view view;
	enum bpftel_refusal why;
	char self[64], buf[PATH_MAX];
	struct stat st;
	ssize_t n;
	int fd;

	view = t->ino ? bpftel_procfile_fuse(t->pid, t->dev) : BPFTEL_FUSE_NONE;
	if (view == BPFTEL_FUSE_DEV)
		return NULL;
	fd = open_path(t, view, &why);
	if (fd < 0)
		return NULL;
	/* Only where the path still leads to the file the kernel opened: swapped since
	 * (a symlink to another library), it would name another file. */
	if (t->ino && (fstat(fd, &st) || !same_file(t, fd, &st))) {
		close(fd);
		return NULL;
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	n = readlink(self, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	return strdup(buf);
}

/* The same walk on a deadline call: a path through a stalled file system shows none. */
struct host_path_job {
	struct bpftel_deadline_call call;
	struct bpftel_procfile_target t;
	char *result;
	__u64 ticket; /* in open_waits.h's table, as an open's */
	char path[];
};

static int host_path_job_run(struct bpftel_deadline_call *c)
{
	struct host_path_job *j = (struct host_path_job *)c;

	j->result = host_path_now(&j->t);
	return 0;
}

static void host_path_job_release(struct bpftel_deadline_call *c)
{
	struct host_path_job *j = (struct host_path_job *)c;

	bpftel_open_waits_end(j->ticket);
	free(j->result);
	free(j);
}

char *bpftel_procfile_host_path(const struct bpftel_procfile_target *t)
{
	size_t n = t->path ? strlen(t->path) + 1 : 1;
	struct host_path_job *j;
	__u64 ticket, owner = owner_of(t);
	char *result;
	int err;

	/* None while an earlier open or walk to this file waits on its file system: each
	 * new process that opens it would leave one more thread waiting. */
	if (!t->path || !*t->path || (t->ino && bpftel_open_waits_stalled(t->dev, t->ino, owner)))
		return NULL;
	j = calloc(1, sizeof(*j) + n);
	if (!j)
		return NULL;
	j->call.run = host_path_job_run;
	j->call.release = host_path_job_release;
	j->call.owner = owner;
	j->t = *t;
	memcpy(j->path, t->path, n);
	j->t.path = j->path;
	j->ticket = ticket = bpftel_open_waits_begin(t->dev, t->ino, owner);
	err = bpftel_deadline_call(&j->call, bpftel_procfile_timeout_ms());
	if (err == -ETIMEDOUT) {
		bpftel_open_waits_abandon(ticket); /* j is the thread's */
		return NULL;
	}
	result = err ? NULL : j->result;
	j->result = NULL;
	host_path_job_release(&j->call);
	return result;
}
