// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The files this process's mappings are of, as the kernel holds them
 * (user/sharedlibs/real_file.c, a task_vma iterator): a file on tmpfs is what stat
 * says; found among more mappings than one read of the iterator returns; an overlay's
 * file is its layer's, whatever stat of the overlay says; nothing without a holder;
 * and the iterator's objects go with the last holder.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "user/sharedlibs/real_file.h"

#define TMPFS_MAGIC 0x01021994
#define DIR	    "/tmp/bpftel-real-file"

struct fixture {
	struct bpftel_obj_counts base;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	bpftel_test_baseline(&f->base);
	/* Mounts made here stay in this process's namespace. */
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return -1;
	mkdir(DIR, 0755);
	if (mount("none", DIR, "tmpfs", 0, NULL))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	struct bpftel_obj_counts now;

	umount2(DIR, MNT_DETACH);
	rmdir(DIR);
	bpftel_test_settle_objects(&f->base, &now);
	assert_objects_back(&f->base, &now);
	free(f);
	return 0;
}

static int make_file(const char *path, size_t pages)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)pages * 4096), 0);
	return fd;
}

static void test_tmpfs_file_as_stat(void **state)
{
	struct bpftel_real_file r;
	struct stat st;
	void *p;
	int fd;

	(void)state;
	fd = make_file(DIR "/a", 1);
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(p != MAP_FAILED);
	/* No holder yet: no iterator. */
	assert_int_equal(bpftel_real_file_at((unsigned long)p, &r), -ENOENT);
	assert_int_equal(bpftel_real_files_get(), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(bpftel_real_file_at((unsigned long)p, &r), 0);
	assert_int_equal(r.dev, st.st_dev);
	assert_int_equal(r.ino, st.st_ino);
	assert_int_equal(r.magic, TMPFS_MAGIC);
	assert_int_equal(r.sdev, 0); /* not btrfs */
	/* Not the start of a mapping of a file. */
	assert_int_equal(bpftel_real_file_at((unsigned long)p + 4096 * 1024, &r), -ENOENT);
	bpftel_real_files_put();
	assert_int_equal(bpftel_real_file_at((unsigned long)p, &r), -ENOENT);
	munmap(p, 4096);
	close(fd);
}

/* 600 mappings of a file, every other page (so that none merge): more than any one
 * read of the iterator returns. Each is found, the last one made too. */
static void test_found_among_many(void **state)
{
	enum { N = 600 };
	struct bpftel_real_file r;
	static void *maps[N];
	struct stat st;
	int fd, i;

	(void)state;
	fd = make_file(DIR "/many", 2 * N);
	assert_int_equal(fstat(fd, &st), 0);
	for (i = 0; i < N; i++) {
		maps[i] = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, (off_t)i * 2 * 4096);
		assert_true(maps[i] != MAP_FAILED);
	}
	assert_int_equal(bpftel_real_files_get(), 0);
	for (i = 0; i < N; i += 37) {
		memset(&r, 0, sizeof(r));
		assert_int_equal(bpftel_real_file_at((unsigned long)maps[i], &r), 0);
		assert_int_equal(r.ino, st.st_ino);
	}
	assert_int_equal(bpftel_real_file_at((unsigned long)maps[N - 1], &r), 0);
	assert_int_equal(r.ino, st.st_ino);
	bpftel_real_files_put();
	for (i = 0; i < N; i++)
		munmap(maps[i], 4096);
	close(fd);
}

/* A file of an overlay's lower layer, mapped through the overlay: the layer's file, on
 * the layer's tmpfs, while stat of the overlay's file shows the overlay's device. */
static void test_overlay_file_is_the_layers(void **state)
{
	struct stat lower, over;
	struct bpftel_real_file r;
	void *p;
	int fd;

	(void)state;
	assert_int_equal(mkdir(DIR "/lower", 0755), 0);
	assert_int_equal(mkdir(DIR "/upper", 0755), 0);
	assert_int_equal(mkdir(DIR "/work", 0755), 0);
	assert_int_equal(mkdir(DIR "/merged", 0755), 0);
	close(make_file(DIR "/lower/lib.so", 1));
	if (mount("overlay", DIR "/merged", "overlay", 0,
		  "lowerdir=" DIR "/lower,upperdir=" DIR "/upper,workdir=" DIR "/work"))
		skip(); /* no overlayfs here */
	assert_int_equal(stat(DIR "/lower/lib.so", &lower), 0);
	fd = open(DIR "/merged/lib.so", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &over), 0);
	assert_int_not_equal(over.st_dev, lower.st_dev); /* stat shows the overlay's */
	p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(p != MAP_FAILED);
	assert_int_equal(bpftel_real_files_get(), 0);
	assert_int_equal(bpftel_real_file_at((unsigned long)p, &r), 0);
	assert_int_equal(r.dev, lower.st_dev);
	assert_int_equal(r.ino, lower.st_ino);
	assert_int_equal(r.magic, TMPFS_MAGIC);
	assert_int_equal(r.sdev, 0); /* not btrfs */
	bpftel_real_files_put();
	munmap(p, 4096);
	close(fd);
	umount2(DIR "/merged", MNT_DETACH);
}

/* Two holders share one iterator; it goes with the last. */
static void test_holders_share(void **state)
{
	struct bpftel_obj_counts one, two;
	struct bpftel_real_file r;
	void *p;
	int fd;

	(void)state;
	fd = make_file(DIR "/b", 1);
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(p != MAP_FAILED);
	assert_int_equal(bpftel_real_files_get(), 0);
	bpftel_test_count_objects(&one);
	assert_int_equal(bpftel_real_files_get(), 0);
	bpftel_test_count_objects(&two);
	assert_int_equal(two.progs, one.progs);
	assert_int_equal(two.links, one.links);
	bpftel_real_files_put();
	assert_int_equal(bpftel_real_file_at((unsigned long)p, &r), 0);
	bpftel_real_files_put();
	assert_int_equal(bpftel_real_file_at((unsigned long)p, &r), -ENOENT);
	munmap(p, 4096);
	close(fd);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_tmpfs_file_as_stat),
		T(test_found_among_many),
		T(test_overlay_file_is_the_layers),
		T(test_holders_share),
	};
#undef T

	bpftel_test_require_bpf();
	return cmocka_run_group_tests_name("real_file", tests, NULL, NULL);
}
