// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What /proc says of another process (user/common/proc.c):
 * - a process's real uid, as another user's child shows it, and -ENOENT once it is gone
 *   (a pid at pid_max, which no process can have);
 * - its name, whole, and its start time, when the name holds a newline;
 * - who is accountable for it: its real uid; in a user namespace a user made (a
 *   rootless container, uids mapped from a subordinate range) that user; in one root
 *   made (a runtime's, per container) the namespace.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "user/common/proc.h"

/* A child that takes uid (real, effective, saved) and name, and with undumpable makes
 * itself non-dumpable (its /proc/<pid> is root's then), says so on a pipe, and waits
 * until its stdin pipe closes. */
static pid_t child_of(uid_t uid, const char *name, bool undumpable, int *hold)
{
	int ready[2], wait_fd[2];
	pid_t pid;
	char b;

	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(wait_fd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		close(ready[0]);
		close(wait_fd[1]);
		if (setresuid(uid, uid, uid) || prctl(PR_SET_NAME, name) ||
		    (undumpable && prctl(PR_SET_DUMPABLE, 0)))
			_exit(1);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		(void)!read(wait_fd[0], &b, 1);
		_exit(0);
	}
	close(ready[1]);
	close(wait_fd[0]);
	assert_int_equal(read(ready[0], &b, 1), 1);
	close(ready[0]);
	*hold = wait_fd[1];
	return pid;
}

static pid_t child_as(uid_t uid, const char *name, int *hold)
{
	return child_of(uid, name, false, hold);
}

static void child_end(pid_t pid, int hold)
{
	int status;

	close(hold);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_uid(void **state)
{
	__u32 uid = 1, max = 0;
	int hold;
	pid_t pid;
	FILE *f;

	(void)state;
	assert_int_equal(bpftel_proc_uid(getpid(), &uid), 0);
	assert_int_equal(uid, getuid());
	if (geteuid()) {
		skip();
		return;
	}
	pid = child_as(65534, "nobody's", &hold);
	assert_int_equal(bpftel_proc_uid(pid, &uid), 0);
	assert_int_equal(uid, 65534);
	child_end(pid, hold);
	f = fopen("/proc/sys/kernel/pid_max", "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%u", &max), 1);
	fclose(f);
	uid = 7;
	assert_int_equal(bpftel_proc_uid(max, &uid), -ENOENT);
	assert_int_equal(uid, 7); /* untouched */
}

static void test_comm_and_start(void **state)
{
	char comm[16];
	int hold;
	pid_t pid;

	(void)state;
	pid = child_as(getuid(), "a\nname", &hold);
	bpftel_proc_comm(pid, comm, sizeof(comm));
	assert_string_equal(comm, "a\nname"); /* whole, its own newline kept */
	/* Its stat line holds that newline: the fields after the name are read all the
	 * same (they were not: 0, taken as gone). */
	assert_true(bpftel_proc_start(pid) > 0);
	assert_true(bpftel_proc_start(pid) >= bpftel_proc_start(getpid()));
	child_end(pid, hold);
	bpftel_proc_comm(0x7fffffff, comm, sizeof(comm));
	assert_string_equal(comm, "?");
	assert_int_equal(bpftel_proc_start(0x7fffffff), 0);
}

static __u64 mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ull + (__u64)ts.tv_nsec;
}

/* A start time on the clock of BPF's stamps: between the fork's, less one tick (the
 * start is floored to one), and the clock after it, so that an fd entry a process made
 * is never taken for an earlier process's of its pid (usm.c). */
static void test_start_mono(void **state)
{
	__u64 tick = 1000000000ull / (__u64)sysconf(_SC_CLK_TCK), before, after, born;
	int hold;
	pid_t pid;

	(void)state;
	before = mono_ns();
	pid = child_as(getuid(), "born", &hold);
	after = mono_ns();
	born = bpftel_proc_start_mono_ns(bpftel_proc_start(pid));
	child_end(pid, hold);
	assert_true(born + tick >= before);
	assert_true(born <= after);
	assert_int_equal(bpftel_proc_start_mono_ns(0), 0);
}

/* The clock of start times, now: a child forked after a reading starts no earlier (the
 * two floored to the same tick at most), one forked before no later than the next; so
 * that a start earlier than a reading is a process that ran at it (usm/procs.c). */
static void test_ticks_now(void **state)
{
	__u64 before, after, born;
	int hold;
	pid_t pid;

	(void)state;
	before = bpftel_proc_ticks_now();
	pid = child_as(getuid(), "born", &hold);
	after = bpftel_proc_ticks_now();
	born = bpftel_proc_start(pid);
	child_end(pid, hold);
	assert_true(before > 0);
	assert_true(born >= before);
	assert_true(born <= after);
	assert_true(bpftel_proc_start(getpid()) <= before);
}

/*
 * A child that takes uid creator, makes a user namespace of its own (owned by creator),
 * and, once the test mapped ns uids 0..65535 to host 100000.. (as newuidmap does for a
 * rootless container, or a runtime for a pod), takes ns uid 1000: host uid 101000. -1
 * where this kernel lets no such user make a user namespace.
 */
static pid_t child_in_userns(uid_t creator, int *hold)
{
	int up[2], down[2], fd;
	char b, path[64];
	pid_t pid;

	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		close(up[0]);
		close(down[1]);
		if (setresuid(creator, creator, creator))
			_exit(1);
		b = unshare(CLONE_NEWUSER) ? 'x' : 'u';
		if (write(up[1], &b, 1) != 1 || b == 'x')
			_exit(0);
		if (read(down[0], &b, 1) != 1 || setresuid(1000, 1000, 1000))
			_exit(1);
		if (write(up[1], "r", 1) != 1)
			_exit(1);
		(void)!read(down[0], &b, 1);
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	assert_int_equal(read(up[0], &b, 1), 1);
	if (b == 'x') {
		close(up[0]);
		child_end(pid, down[1]);
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0 100000 65536\n", 15), 15);
	close(fd);
	assert_int_equal(write(down[1], "m", 1), 1);
	assert_int_equal(read(up[0], &b, 1), 1);
	assert_int_equal(b, 'r');
	close(up[0]);
	*hold = down[1];
	return pid;
}

/* The key of pid's user namespace as bpftel_proc_owner() makes it. */
static __u64 ns_key(pid_t pid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/ns/user", pid);
	assert_int_equal(stat(path, &st), 0);
	return BPFTEL_PROC_OWNER_NS | (st.st_ino & 0xffffffffULL);
}

static void test_owner(void **state)
{
	__u64 owner = 1;
	__u32 uid = 1;
	int hold;
	pid_t pid;

	(void)state;
	assert_int_equal(bpftel_proc_owner(getpid(), &owner), 0);
	assert_int_equal(owner, getuid());
	if (geteuid()) {
		skip();
		return;
	}
	/* Outside a user namespace of its own: its real uid, also once it made itself
	 * non-dumpable (its /proc/<pid> root's). */
	pid = child_as(65534, "plain", &hold);
	assert_int_equal(bpftel_proc_owner(pid, &owner), 0);
	assert_int_equal(owner, 65534);
	child_end(pid, hold);
	pid = child_of(65534, "undumpable", true, &hold);
	assert_int_equal(bpftel_proc_owner(pid, &owner), 0);
	assert_int_equal(owner, 65534);
	child_end(pid, hold);
	/* In one root made (a runtime's, per container): that namespace. */
	pid = child_in_userns(0, &hold);
	if (pid < 0) { /* user.max_user_namespaces = 0 */
		skip();
		return;
	}
	assert_int_equal(bpftel_proc_uid(pid, &uid), 0);
	assert_int_equal(uid, 101000); /* what it runs as, on the host */
	assert_int_equal(bpftel_proc_owner(pid, &owner), 0);
	assert_int_equal(owner, ns_key(pid));
	child_end(pid, hold);
	assert_int_equal(bpftel_proc_owner(0x7fffffff, &owner), -ENOENT);
	/* In one a user made (rootless): that user, whatever uid it runs as. */
	pid = child_in_userns(65534, &hold);
	if (pid < 0) {
		skip();
		return;
	}
	assert_int_equal(bpftel_proc_uid(pid, &uid), 0);
	assert_int_equal(uid, 101000);
	assert_int_equal(bpftel_proc_owner(pid, &owner), 0);
	assert_int_equal(owner, 65534); /* who made its namespace */
	child_end(pid, hold);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uid),
		cmocka_unit_test(test_owner),
		cmocka_unit_test(test_comm_and_start),
		cmocka_unit_test(test_start_mono),
		cmocka_unit_test(test_ticks_now),
	};

	return cmocka_run_group_tests_name("proc", tests, NULL, NULL);
}
