// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The uprobe registry's verdicts on executables (user/sharedlibs/uprobes.c): Go or not
 * is known per file identity *and* change time, so a file rewritten in place (same
 * inode) is read again, and the ctime returned for the kernel's skip map is the one of
 * the file read. Execs are played by a process that is gone (no /proc/<pid>/exe): the
 * registry then reads the absolute path in its own root, as for a shell's `true`.
 * Two writes in a row are told apart by their ctimes: multigrain timestamps (6.13+)
 * make a write after a stat() move it; on older kernels the same tick could keep it.
 *
 * Usage: test_unit_exe_verdict GO_EXECUTABLE
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <cmocka.h>
#include "tests/copy_over.h"

#include "user/sharedlibs/uprobes.h"

#define GONE_PID 0x3fffffffu /* over any pid_max: never has a /proc entry */

static const char *go_path;
static char tool[32];

/* Write the content of from over tool, in place (same inode); tool's stat in *st. */
static void overwrite(const char *from, struct stat *st)
{
	copy_over(from, tool);
	assert_int_equal(stat(tool, st), 0);
}

/* An exec of path, the file st, as the kernel reports it with the ctime it saw. */
static int play_exec(struct bpftel_uprobes *u, const char *path, const struct stat *st,
		     const struct timespec *ctime, struct timespec *seen)
{
	struct bpftel_shlib_detection d = {
		.pid = GONE_PID,
		.tid = GONE_PID,
		.lib = SHLIB_LIB_GO,
		.syscall = SHLIB_SYS_EXEC,
		.dirfd = AT_FDCWD,
		.dev = st->st_dev,
		.ino = st->st_ino,
		.ctime = *ctime,
		.path = (char *)path,
	};

	*seen = (struct timespec){-1, -1};
	return bpftel_uprobes__exec(u, &d, seen);
}

static void assert_ctime(const struct timespec *a, const struct timespec *b)
{
	assert_int_equal(a->tv_sec, b->tv_sec);
	assert_int_equal(a->tv_nsec, b->tv_nsec);
}

static int setup(void **state)
{
	struct bpftel_uprobes *u;
	int fd;

	snprintf(tool, sizeof(tool), "/tmp/bpftel-verdict-XXXXXX");
	fd = mkstemp(tool);

	if (fd < 0 || bpftel_uprobes__new(&u))
		return -1;
	close(fd);
	*state = u;
	return 0;
}

static int teardown(void **state)
{
	bpftel_uprobes__free(*state);
	unlink(tool);
	return 0;
}

/* Not Go at one ctime: known without reading at that ctime (a path that leads nowhere
 * is not opened), not at another. */
static void test_verdict_keyed_by_ctime(void **state)
{
	struct bpftel_uprobes *u = *state;
	struct timespec seen, other;
	struct stat st;

	overwrite("/bin/true", &st);
	assert_int_equal(play_exec(u, tool, &st, &st.st_ctim, &seen), 0);
	assert_ctime(&seen, &st.st_ctim);
	assert_int_equal(play_exec(u, "/nonexistent/tool", &st, &st.st_ctim, &seen), 0);
	assert_ctime(&seen, &st.st_ctim);
	other = st.st_ctim;
	other.tv_sec--;
	assert_int_equal(play_exec(u, "/nonexistent/tool", &st, &other, &seen), -ENOENT);
}

/* A C program overwritten in place by a Go program: same inode, new ctime, read again
 * and found Go; and back. */
static void test_rewritten_in_place_read_again(void **state)
{
	struct bpftel_uprobes *u = *state;
	struct stat c, go;
	struct timespec seen;

	overwrite("/bin/true", &c);
	assert_int_equal(play_exec(u, tool, &c, &c.st_ctim, &seen), 0);
	overwrite(go_path, &go);
	assert_int_equal(go.st_ino, c.st_ino);
	assert_true(go.st_ctim.tv_sec != c.st_ctim.tv_sec ||
		    go.st_ctim.tv_nsec != c.st_ctim.tv_nsec);
	assert_int_equal(play_exec(u, tool, &go, &go.st_ctim, &seen), 1);
	assert_ctime(&seen, &go.st_ctim);
	/* One entry per file: the old content's ctime is no longer known (the path
	 * leads nowhere, so the file is not read either). */
	assert_int_equal(play_exec(u, "/nonexistent/tool", &c, &c.st_ctim, &seen), -ENOENT);
	overwrite("/bin/true", &c);
	assert_int_equal(play_exec(u, tool, &c, &c.st_ctim, &seen), 0);
	assert_ctime(&seen, &c.st_ctim);
}

/* An exec whose process is gone, of a path that leads in the agent's root to another
 * file than the one the kernel ran (a container's path, or a file renamed over since):
 * nothing is known of the file run, and nothing is refused; once counted as a file
 * whose identity changed, under the agent's own pid, it made the watcher rescan /proc. */
static void test_gone_exec_path_elsewhere(void **state)
{
	struct bpftel_uprobes *u = *state;
	struct bpftel_uprobes_refusals r;
	struct timespec seen;
	struct stat ran, here;
	size_t i;
	__u64 n = 0;

	overwrite("/bin/true", &here);
	assert_int_equal(stat("/bin/sh", &ran), 0); /* what the kernel ran, elsewhere */
	assert_int_equal(play_exec(u, tool, &ran, &ran.st_ctim, &seen), -ENOENT);
	bpftel_uprobes__refusals(u, &r);
	for (i = 0; i < BPFTEL_REFUSED__COUNT; i++)
		n += r.count[i];
	assert_int_equal(n, 0);
	assert_int_equal(r.nrecent, 0);
	assert_int_equal(bpftel_uprobes__stale(u), 0);
}

/* The file written between the exec (the kernel saw the C program's ctime) and the
 * registry's read (it reads the Go program): the verdict and the ctime returned are
 * the ones of the file read, so the skip map never pairs the old ctime with a verdict
 * made on other content. */
static void test_exec_raced_by_write(void **state)
{
	struct bpftel_uprobes *u = *state;
	struct timespec seen;
	struct stat c, go;

	overwrite("/bin/true", &c);
	overwrite(go_path, &go);
	assert_int_equal(play_exec(u, tool, &go, &c.st_ctim, &seen), 1);
	assert_ctime(&seen, &go.st_ctim);
	overwrite("/bin/true", &c);
	overwrite("/bin/true", &go); /* written again: another ctime, same content */
	assert_int_equal(play_exec(u, tool, &go, &c.st_ctim, &seen), 0);
	assert_ctime(&seen, &go.st_ctim);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_verdict_keyed_by_ctime, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rewritten_in_place_read_again, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_exec_raced_by_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gone_exec_path_elsewhere, setup, teardown),
	};

	if (argc != 2) {
		fprintf(stderr, "usage: test_unit_exe_verdict GO_EXECUTABLE\n");
		return 2;
	}
	go_path = argv[1];
	return cmocka_run_group_tests_name("exe_verdict", tests, NULL, NULL);
}
