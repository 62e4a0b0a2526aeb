// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The mapping that holds an address (user/common/procmap.c), in this process: asked of
 * the kernel (PROCMAP_QUERY) and read from /proc/self/maps, the two ways giving the
 * same answers: the file, its range and the address's file offset; none for an
 * anonymous mapping, a hole, or a pid that does not exist; a file mapped past one whose
 * path is longer than a maps line is read whole.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "user/common/procmap.h"

#define PAGE 4096ul

/* Both ways; they must agree. Returns their answer. */
static int find_both(const void *addr, struct bpftel_procmap_vma *vma)
{
	struct bpftel_procmap_vma q = {}, t = {};
	int eq, et;

	bpftel_procmap_force_text(false);
	eq = bpftel_procmap_find((__u32)getpid(), (__u64)(uintptr_t)addr, &q);
	bpftel_procmap_force_text(true);
	et = bpftel_procmap_find((__u32)getpid(), (__u64)(uintptr_t)addr, &t);
	bpftel_procmap_force_text(false);
	assert_int_equal(eq, et);
	if (!eq) {
		assert_int_equal(q.start, t.start);
		assert_int_equal(q.end, t.end);
		assert_int_equal(q.offset, t.offset);
		assert_int_equal(q.dev, t.dev);
		assert_int_equal(q.ino, t.ino);
		*vma = q;
	}
	return eq;
}

struct mapped {
	char path[PATH_MAX];
	struct stat st;
	char *p; /* two pages, from the file's second */
};

/* A file of three pages at path, mapped from its second page. */
static void map_file(struct mapped *m)
{
	char page[PAGE];
	int fd, i;

	fd = open(m->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	for (i = 0; i < 3; i++) {
		memset(page, 'a' + i, sizeof(page));
		assert_int_equal(write(fd, page, sizeof(page)), (ssize_t)sizeof(page));
	}
	assert_int_equal(fstat(fd, &m->st), 0);
	m->p = mmap(NULL, 2 * PAGE, PROT_READ, MAP_PRIVATE, fd, PAGE);
	assert_true(m->p != MAP_FAILED);
	close(fd);
}

static void check_mapped(const struct mapped *m)
{
	struct bpftel_procmap_vma vma = {};

	assert_int_equal(find_both(m->p + PAGE + 100, &vma), 0);
	assert_int_equal(vma.start, (__u64)(uintptr_t)m->p);
	assert_int_equal(vma.end, (__u64)(uintptr_t)m->p + 2 * PAGE);
	assert_int_equal(vma.offset, PAGE + PAGE + 100);
	assert_int_equal(vma.dev, m->st.st_dev);
	assert_int_equal(vma.ino, m->st.st_ino);
}

static void test_file_mapping(void **state)
{
	char dir[] = "/tmp/bpftel-procmap-XXXXXX";
	struct mapped m;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(m.path, sizeof(m.path), "%s/lib.so", dir);
	map_file(&m);
	check_mapped(&m);
	munmap(m.p, 2 * PAGE);
	unlink(m.path);
	rmdir(dir);
}

/* Anonymous memory, a hole between two mappings, and no such process: none. */
static void test_none(void **state)
{
	struct bpftel_procmap_vma vma;
	char *p;

	(void)state;
	p = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	assert_int_equal(find_both(p + 10, &vma), -ENOENT);
	assert_int_equal(munmap(p + PAGE, PAGE), 0);
	assert_int_equal(find_both(p + PAGE + 10, &vma), -ENOENT);
	munmap(p, PAGE);
	munmap(p + 2 * PAGE, PAGE);
	/* Past pid_max (at most 2^22): no process has it. */
	assert_int_equal(bpftel_procmap_find(1u << 23, (__u64)(uintptr_t)&vma, &vma), -ENOENT);
}

/* A file whose path makes its maps line longer than a line is read in: the file
 * mapped after it is still found, and so is it. */
static void test_long_path(void **state)
{
	char dir[] = "/tmp/bpftel-procmap-XXXXXX", sub[PATH_MAX];
	struct mapped longp, after;
	size_t n;

	(void)state;
	assert_non_null(mkdtemp(dir));
	n = (size_t)snprintf(sub, sizeof(sub), "%s/", dir);
	memset(sub + n, 'd', 250);
	sub[n + 250] = '\0';
	assert_int_equal(mkdir(sub, 0700), 0);
	n = (size_t)snprintf(longp.path, sizeof(longp.path), "%s/", sub);
	memset(longp.path + n, 'f', 250); /* a name of 250 bytes */
	longp.path[n + 250] = '\0';
	assert_true(strlen(longp.path) > 512);
	map_file(&longp);
	snprintf(after.path, sizeof(after.path), "%s/after.so", dir);
	map_file(&after);
	check_mapped(&longp);
	check_mapped(&after);
	munmap(longp.p, 2 * PAGE);
	munmap(after.p, 2 * PAGE);
	unlink(longp.path);
	unlink(after.path);
	rmdir(sub);
	rmdir(dir);
}

/* A process that maps a file of a long path thousands of times (one mapping each: the
 * protections alternate) makes megabytes of maps text: read as text, the lookup gives
 * up past its byte bound (-E2BIG) instead of reading it all at every lookup. */
static void test_huge_maps_text_bounded(void **state)
{
	char dir[] = "/tmp/bpftel-procmap-XXXXXX", sub[PATH_MAX], path[PATH_MAX + 16];
	struct bpftel_procmap_vma vma;
	int fd, i, n = 4000, depth;
	size_t k;
	char **maps = calloc((size_t)n, sizeof(*maps));
	char page[PAGE] = {0};

	(void)state;
	assert_non_null(maps);
	assert_non_null(mkdtemp(dir));
	k = (size_t)snprintf(sub, sizeof(sub), "%s", dir);
	for (depth = 0; depth < 12; depth++) { /* a path of ~3 KiB */
		sub[k++] = '/';
		memset(sub + k, 'd', 250);
		k += 250;
		sub[k] = '\0';
		assert_int_equal(mkdir(sub, 0700), 0);
	}
	snprintf(path, sizeof(path), "%s/lib.so", sub);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, page, sizeof(page)), (ssize_t)sizeof(page));
	for (i = 0; i < n; i++) {
		maps[i] = mmap(NULL, PAGE, i % 2 ? PROT_READ : PROT_READ | PROT_WRITE, MAP_PRIVATE,
			       fd, 0);
		assert_true(maps[i] != MAP_FAILED);
	}
	close(fd);
	/* ~12 MB of text: the stack is past them all, or the bound is met first. */
	bpftel_procmap_force_text(true);
	assert_int_equal(bpftel_procmap_find((__u32)getpid(), (__u64)(uintptr_t)&vma, &vma),
			 -E2BIG);
	bpftel_procmap_force_text(false);
	for (i = 0; i < n; i++)
		munmap(maps[i], PAGE);
	free(maps);
	unlink(path);
	for (; depth > 0; depth--) {
		assert_int_equal(rmdir(sub), 0);
		*strrchr(sub, '/') = '\0';
	}
	rmdir(dir);
}

/* Every mapping of this process, at its first and last byte: the same both ways. */
static void test_every_mapping(void **state)
{
	struct bpftel_procmap_vma vma;
	unsigned long start, end, seen = 0, files = 0;
	char line[1024];
	FILE *f;

	(void)state;
	f = fopen("/proc/self/maps", "re");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx", &start, &end) != 2 || start >= 1ul << 47)
			continue; /* [vsyscall] is not in the process's VMA tree */
		seen++;
		files += find_both((void *)start, &vma) == 0;
		find_both((void *)(end - 1), &vma);
	}
	fclose(f);
	assert_true(seen > 5 && files > 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_mapping),
		cmocka_unit_test(test_none),
		cmocka_unit_test(test_long_path),
		cmocka_unit_test(test_every_mapping),
		cmocka_unit_test(test_huge_maps_text_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
