// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Files written in place while probed (uprobes.h). The kernel copies a uprobe's
 * instruction once, from the file's content when the probe is installed, keyed by
 * inode and offset, and executes that copy whenever the probe is hit: in every process
 * that maps the inode, also one that maps it after the file was rewritten (`cp new
 * lib.so` truncates and writes the same inode). That process would then run an
 * instruction its file no longer holds: wrong results, or a crash.
 *
 * So every file the registry holds links on is watched with inotify (IN_MODIFY, which
 * write(2), truncation, copy_file_range and fallocate raise) on the very inode it
 * opened (/proc/self/fd/N of the fd it attaches through), from before its first link
 * is made until its last is released. A write releases the file's links at once, ahead
 * of the reaper's queue, and bumps its count of writes: an attach in flight that began
 * before it gives its new links back too. The file is attached again, from what it
 * holds then, when a process maps it (collect_jobs waits for the old links to be gone,
 * so that the kernel's uprobes are new ones).
 *
 * One thread reads the inotify instance and nothing else: a release never waits
 * behind a sweep or an attach. It stops through an eventfd.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>

#include "uprobes_internal.h"
#include "user/common/log.h"

/* With u->lock: a file watched as wd other than but, and not released yet by write
 * event mark (0: any), or NULL. One inode is one watch: rows of two files opened
 * through one overlay inode (a layer's, and its copy-up's) hold the same wd. */
static struct lib_file *watched_locked(struct bpftel_uprobes *u, int wd,
				       const struct lib_file *but, __u64 mark)
{
	size_t i;

	for (i = 0; i < u->nfiles; i++) {
		if (u->files[i]->wd == wd && u->files[i] != but &&
		    (!mark || u->files[i]->written_mark != mark))
			return u->files[i];
	}
	return NULL;
}

/* With u->lock: forget f's watch, and remove it where no other row holds it.
 * inotify_rm_watch touches no file: quick. */
static void unwatch_locked(struct bpftel_uprobes *u, struct lib_file *f)
{
	if (f->wd < 0)
		return;
	if (u->watch_fd >= 0 && !watched_locked(u, f->wd, f, 0))
		inotify_rm_watch(u->watch_fd, f->wd);
	f->wd = -1;
}

void watch_drop_locked(struct bpftel_uprobes *u, struct lib_file *f)
{
	if (!f->busy && !file_links(f))
		unwatch_locked(u, f);
}

__u64 watch_file(struct bpftel_uprobes *u, struct lib_file *f, int fd)
{
	char path[64];
	__u64 writes;
	int wd = -ENOSYS;

	/* The inode of fd itself, whatever its path leads to now. The same inode watched
	 * twice is one watch: another attach of f in flight got this wd too. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (u->watch_fd >= 0) {
		wd = inotify_add_watch(u->watch_fd, path, IN_MODIFY);
		if (wd < 0)
			wd = -errno;
	}
	pthread_mutex_lock(&u->lock);
	if (wd >= 0) {
		if (f->wd != wd) /* reached through another inode now: the old watch goes */
			unwatch_locked(u, f);
		f->wd = wd;
		f->unwatched = false;
	} else if (!f->unwatched) {
		/* ENOSPC: fs.inotify.max_user_watches reached. */
		f->unwatched = true;
		u->ref.unwatched++;
		pr_debug("uprobes: %s: not watched for writes: %s", f->path, strerror(-wd));
	}
	writes = f->writes;
	pthread_mutex_unlock(&u->lock);
	return writes;
}

/* The inode watched as wd was written (write event mark): release the links of one
 * file watched so, ahead of the reaper's queue, and make an attach in flight give its
 * own back (attach_run). False when none is left. */
static bool file_written_once(struct bpftel_uprobes *u, int wd, __u64 mark)
{
	struct ulink rel[MAX_MODS * MAX_SPECS];
	struct lib_file *f;
	char path[256];
	bool warn = false, counted;
	size_t n;

	pthread_mutex_lock(&u->lock);
	f = watched_locked(u, wd, NULL, mark);
	if (!f) { /* released already: the same write's later events */
		pthread_mutex_unlock(&u->lock);
		return false;
	}
	f->written_mark = mark;
	f->writes++;
	n = take_links_locked(f, rel);
	/* Counted per release: an attach in flight counts its own (attach_run). */
	counted = n > 0;
	if (counted) {
		u->ref.released_modified++;
		warn = !u->warned_written;
		u->warned_written = true;
	}
	watch_drop_locked(u, f); /* kept while an attach is in flight: it drops it */
	snprintf(path, sizeof(path), "%s", f->path);
	pthread_mutex_unlock(&u->lock);
	if (warn)
		pr_warn("uprobes: %s was written in place while probed: its %zu links released "
			"(a process mapping it would run instructions it no longer holds); "
			"attached again when a process maps it",
			path, n);
	else if (counted)
		pr_debug("uprobes: %s written in place: %zu links released", path, n);
	hand_links(u, f, rel, n, true);
	return true;
}

/* Every file watched as wd is released: which of those sharing an inode's watch was
 * written cannot be told, and a row left attached would run instructions its file no
 * longer holds. Only the watch thread calls it: its marks need no lock. */
static void file_written(struct bpftel_uprobes *u, int wd)
{
	__u64 mark = ++u->write_events;

	while (file_written_once(u, wd, mark))
		;
}

/* Events were lost: any watched file may have been written. All are released. */
static void all_written(struct bpftel_uprobes *u)
{
	size_t i, n = 0;
	int *wds;

	pthread_mutex_lock(&u->lock);
	wds = calloc(u->nfiles + 1, sizeof(*wds));
	for (i = 0; wds && i < u->nfiles; i++) {
		if (u->files[i]->wd >= 0)
			wds[n++] = u->files[i]->wd;
	}
	pthread_mutex_unlock(&u->lock);
	pr_warn("uprobes: the write watch's queue overflowed: releasing the links of %zu files",
		n);
	for (i = 0; i < n; i++)
		file_written(u, wds[i]);
	free(wds);
}

/* The kernel removed the watch (the file deleted and gone, its filesystem unmounted):
 * the file is unwatched from now on. */
static void watch_gone(struct bpftel_uprobes *u, int wd)
{
	struct lib_file *f;

	pthread_mutex_lock(&u->lock);
	while ((f = watched_locked(u, wd, NULL, 0))) {
		f->wd = -1;
		f->unwatched = true;
		u->ref.unwatched++;
	}
	pthread_mutex_unlock(&u->lock);
}

static void watch_events(struct bpftel_uprobes *u, const char *buf, size_t len)
{
	const struct inotify_event *ev;
	size_t off;

	for (off = 0; off + sizeof(*ev) <= len; off += sizeof(*ev) + ev->len) {
		ev = (const struct inotify_event *)(buf + off);
		if (ev->mask & IN_Q_OVERFLOW)
			all_written(u);
		else if (ev->mask & IN_MODIFY)
			file_written(u, ev->wd);
		else if (ev->mask & IN_IGNORED)
			watch_gone(u, ev->wd);
	}
}

static void *watch_main(void *arg)
{
	struct bpftel_uprobes *u = arg;
	struct pollfd pfd[2] = {{.fd = u->watch_stop, .events = POLLIN},
				{.fd = u->watch_fd, .events = POLLIN}};
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			pr_warn("uprobes: write watch: poll: %s", strerror(errno));
			break;
		}
		if (pfd[0].revents)
			break;
		n = read(u->watch_fd, buf, sizeof(buf));
		if (n > 0)
			watch_events(u, buf, (size_t)n);
	}
	return NULL;
}

int watch_start(struct bpftel_uprobes *u)
{
	int err;

	u->watch_stop = -1;
	u->watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (u->watch_fd < 0)
		goto fail;
	u->watch_stop = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (u->watch_stop < 0)
		goto fail;
	err = pthread_create(&u->watch_thread, NULL, watch_main, u);
	if (err) {
		errno = err;
		goto fail;
	}
	u->watch_running = true;
	return 0;
fail:
	err = -errno;
	pr_warn("uprobes: files are not watched for writes (%s): each is released as soon as "
		"no process uses it",
		strerror(-err));
	if (u->watch_stop >= 0)
		close(u->watch_stop);
	if (u->watch_fd >= 0)
		close(u->watch_fd);
	u->watch_fd = u->watch_stop = -1;
	return err;
}

void watch_stop(struct bpftel_uprobes *u)
{
	__u64 one = 1;
	int fd;

	if (u->watch_running) {
		if (write(u->watch_stop, &one, sizeof(one)) != sizeof(one))
			pr_warn("uprobes: write watch: cannot stop its thread: %s", strerror(errno));
		pthread_join(u->watch_thread, NULL);
		u->watch_running = false;
	}
	if (u->watch_stop >= 0)
		close(u->watch_stop);
	/* Under the lock: the reaper's callbacks for links still queued remove watches. */
	pthread_mutex_lock(&u->lock);
	fd = u->watch_fd;
	u->watch_fd = u->watch_stop = -1;
	pthread_mutex_unlock(&u->lock);
	if (fd >= 0)
		close(fd); /* its watches with it */
}
