// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The uprobe registry's watch for files written in place (user/sharedlibs/uprobe_watch.c),
 * without BPF: a registry file is made by hand, its "links" are fds the reaper closes
 * (as it closes a multi-uprobe link's), and the file watched is a temporary file.
 * - a write releases the links at once, however long the grace, and counts once;
 * - an attach in flight when the file is written is told so (its links would be stale:
 *   it releases and counts them), keeps its module's place (no second attach starts)
 *   and the watch until it ends;
 * - a file that cannot be watched has no grace: released at the first sweep;
 * - the registry's inotify fd, eventfd and thread go with it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "tests/count_dir.h"

#include "user/manager/manager.h"
#include "user/sharedlibs/real_file.h"
#include "user/sharedlibs/uprobes_internal.h"

struct fixture {
	struct bpftel_uprobes *u;
	char path[32];
	int fd; /* the file watched, as the registry would hold it while attaching */
	int fds;
};

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	if (!fx || bpftel_uprobes__new(&fx->u))
		return -1;
	bpftel_uprobes__set_grace_ms(fx->u, 600000); /* only a write can release */
	snprintf(fx->path, sizeof(fx->path), "/tmp/bpftel-watch-XXXXXX");
	fx->fd = mkstemp(fx->path);
	if (fx->fd < 0)
		return -1;
	fx->fds = count_dir("/proc/self/fd");
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	bpftel_uprobes__free(fx->u);
	close(fx->fd);
	unlink(fx->path);
	free(fx);
	return 0;
}

/* A file in the registry, no process using it, with nlinks fd "links". */
static struct lib_file *file_add(struct bpftel_uprobes *u, size_t nlinks)
{
	struct lib_file *f = calloc(1, sizeof(*f));
	size_t i;

	assert_non_null(f);
	f->wd = -1;
	f->refused = -1;
	f->lib = SHLIB_LIB_SSL;
	snprintf(f->path, sizeof(f->path), "libssl.so.3");
	for (i = 0; i < nlinks; i++) {
		f->mods[0].links[i] = (struct ulink){.fd = open("/dev/null", O_RDONLY | O_CLOEXEC)};
		assert_true(f->mods[0].links[i].fd >= 0);
	}
	f->mods[0].nlinks = nlinks;
	f->mods[0].st = FM_DONE;
	pthread_mutex_lock(&u->lock);
	while (u->slot_used[f->slot])
		f->slot++;
	u->slot_used[f->slot] = true;
	u->files[u->nfiles++] = f;
	pthread_mutex_unlock(&u->lock);
	return f;
}

/* f's watch, read under the registry's lock as the watch thread writes it. */
static int wd_of(struct bpftel_uprobes *u, const struct lib_file *f)
{
	int wd;

	pthread_mutex_lock(&u->lock);
	wd = f->wd;
	pthread_mutex_unlock(&u->lock);
	return wd;
}

static size_t nfiles(struct bpftel_uprobes *u)
{
	size_t n;

	pthread_mutex_lock(&u->lock);
	n = u->nfiles;
	pthread_mutex_unlock(&u->lock);
	return n;
}

static void write_to(const char *path)
{
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "new build", 9), 9);
	close(fd);
}

static void test_write_releases_at_once(void **state)
{
	struct fixture *fx = *state;
	struct bpftel_uprobes_refusals ref;
	struct lib_file *f = file_add(fx->u, 2);
	int i;

	watch_file(fx->u, f, fx->fd);
	assert_true(wd_of(fx->u, f) >= 0);
	write_to(fx->path);
	/* Released and, no process using it, gone: 10 s at most, not the grace. */
	for (i = 0; i < 1000 && nfiles(fx->u); i++)
		sleep_ms(10);
	assert_int_equal(nfiles(fx->u), 0);
	bpftel_links_settle();
	assert_int_equal(count_dir("/proc/self/fd"), fx->fds); /* the links closed */
	bpftel_uprobes__refusals(fx->u, &ref);
	assert_int_equal(ref.released_modified, 1);
	assert_int_equal(ref.unwatched, 0);
}

static void test_attach_in_flight_told(void **state)
{
	struct fixture *fx = *state;
	struct bpftel_uprobes_refusals ref;
	struct lib_file *f = file_add(fx->u, 0);
	__u64 writes, now;
	int i, wd_before, wd_after;
	enum fm_state st;

	f->busy = 1; /* an attach runs, nothing stored yet */
	f->mods[0].st = FM_BUSY;
	writes = watch_file(fx->u, f, fx->fd);
	write_to(fx->path);
	for (i = 0, now = writes; i < 1000 && now == writes; i++) {
		sleep_ms(10);
		pthread_mutex_lock(&fx->u->lock);
		now = f->writes;
		pthread_mutex_unlock(&fx->u->lock);
	}
	assert_true(now != writes); /* attach_run gives its links back, and counts that */
	/* The module's place stays the attach's: no second attach of it may start on the
	 * file meanwhile, whose links the first would lose track of when it ends. */
	pthread_mutex_lock(&fx->u->lock);
	st = f->mods[0].st;
	f->mods[0].st = FM_NONE; /* the attach ends (attach_run) */
	pthread_mutex_unlock(&fx->u->lock);
	assert_int_equal(st, FM_BUSY);
	bpftel_uprobes__refusals(fx->u, &ref);
	assert_int_equal(ref.released_modified, 0); /* nothing released here */
	/* Its attach ends: the watch goes with it. */
	pthread_mutex_lock(&fx->u->lock);
	wd_before = f->wd;
	f->busy = 0;
	watch_drop_locked(fx->u, f);
	wd_after = f->wd;
	pthread_mutex_unlock(&fx->u->lock);
	assert_true(wd_before >= 0); /* asserted without the lock: a failure must not hang */
	assert_int_equal(wd_after, -1);
	assert_int_equal(bpftel_uprobes__sweep(fx->u), 0); /* idle now: its grace starts */
	assert_int_equal(nfiles(fx->u), 1);
}

static void test_unwatched_no_grace(void **state)
{
	struct fixture *fx = *state;
	struct bpftel_uprobes_refusals ref;
	struct lib_file *f = file_add(fx->u, 1);
	bool unwatched;

	watch_file(fx->u, f, -1); /* /proc/self/fd/-1: no such file, as a full watch table */
	assert_int_equal(wd_of(fx->u, f), -1);
	pthread_mutex_lock(&fx->u->lock);
	unwatched = f->unwatched;
	pthread_mutex_unlock(&fx->u->lock);
	assert_true(unwatched);
	assert_int_equal(bpftel_uprobes__sweep(fx->u), 1);
	bpftel_links_settle();
	assert_int_equal(nfiles(fx->u), 0);
	bpftel_uprobes__refusals(fx->u, &ref);
	assert_int_equal(ref.unwatched, 1);
	assert_int_equal(ref.released_modified, 0);
	assert_int_equal(count_dir("/proc/self/fd"), fx->fds);
}

/* This process's threads but the reaper's (they exit on their own, after a settle:
 * however late a loaded machine runs them, they are not counted). */
static int own_threads(void)
{
	char path[64], comm[32];
	struct dirent *d;
	DIR *dir = opendir("/proc/self/task");
	int n = 0;
	FILE *f;

	assert_non_null(dir);
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%.20s/comm", d->d_name);
		f = fopen(path, "re");
		if (!f)
			continue; /* exited since the listing */
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = '\0';
		fclose(f);
		comm[strcspn(comm, "\n")] = '\0';
		n += strcmp(comm, BPFTEL_REAPER_THREAD_NAME) != 0;
	}
	closedir(dir);
	return n;
}

/* This process's own threads once they stop changing. */
static int threads_settled(void)
{
	int n = own_threads(), i, prev = -1;

	for (i = 0; i < 1000 && n != prev; i++) {
		sleep_ms(10);
		prev = n;
		n = own_threads();
	}
	return n;
}

/* An attach whose module stopped since it was asked for does nothing: the file is not
 * opened (its process not asked, no backoff counted), no watch, nothing attached; its
 * module's place is free again and the stop waiting on it is let go. */
static void test_stale_attach_skipped(void **state)
{
	struct fixture *fx = *state;
	struct bpftel_uprobes *u = fx->u;
	struct lib_file *f = file_add(u, 0);
	struct attach_job job = {.mi = 0, .gen = 0};
	unsigned int busy, fbusy, fails;
	enum fm_state st;
	int wd;

	pthread_mutex_lock(&u->lock);
	f->procs = calloc(1, sizeof(*f->procs));
	assert_non_null(f->procs);
	f->procs[0].pid = (__u32)getpid(); /* a live process that maps no such file */
	f->procs[0].dirfd = AT_FDCWD;
	f->procs[0].path = strdup("/nonexistent-bpftel/libssl.so.3");
	assert_non_null(f->procs[0].path);
	f->nprocs = 1;
	u->nmods = 1;
	u->mods[0].gen = 1; /* stopped since the job was made at 0 */
	u->mods[0].busy = 1;
	f->busy = 1;
	f->mods[0].st = FM_BUSY;
	pthread_mutex_unlock(&u->lock);
	attach_run(u, f, &job, 1, -1);
	pthread_mutex_lock(&u->lock);
	st = f->mods[0].st;
	busy = u->mods[0].busy;
	fbusy = f->busy;
	fails = f->reopen_fails;
	wd = f->wd;
	u->nmods = 0;
	pthread_mutex_unlock(&u->lock);
	assert_int_equal(st, FM_NONE);
	assert_int_equal(busy, 0);
	assert_int_equal(fbusy, 0);
	assert_int_equal(fails, 0); /* not tried: no open through its process */
	assert_int_equal(wd, -1);
}

/* This process's threads once there are want (30 s at most): a joined thread is still
 * listed until the kernel reaps it, after its joiner woke up. */
static int threads_become(int want)
{
	int n = own_threads(), i;

	for (i = 0; i < 3000 && n != want; i++) {
		sleep_ms(10);
		n = own_threads();
	}
	return n;
}

/* Its inotify instance, eventfd and thread come and go with the registry. */
static void test_lifecycle(void **state)
{
	int fds, threads;
	struct bpftel_uprobes *u;
	int round;

	(void)state;
	bpftel_links_settle();
	/* The registry's iterator (real_file.h), where it loads, held across the rounds:
	 * what is counted here is the registry's own. */
	bpftel_real_files_get();
	threads = threads_settled();
	fds = count_dir("/proc/self/fd");
	for (round = 0; round < 3; round++) {
		assert_int_equal(bpftel_uprobes__new(&u), 0);
		assert_int_equal(count_dir("/proc/self/fd"), fds + 2);
		assert_int_equal(threads_become(threads + 1), threads + 1);
		bpftel_uprobes__free(u);
		assert_int_equal(count_dir("/proc/self/fd"), fds);
		assert_int_equal(threads_become(threads), threads); /* joined */
	}
	bpftel_real_files_put();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_releases_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_attach_in_flight_told, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unwatched_no_grace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_attach_skipped, setup, teardown),
		cmocka_unit_test(test_lifecycle),
	};

	return cmocka_run_group_tests_name("uprobe_watch", tests, NULL, NULL);
}
