// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Opening another process's files (user/sharedlibs/procfile.h) against a real child
 * process in a chroot or a working directory of its own: paths that would leave its
 * root or directory, magic links, FIFOs, directories, swapped identities, mappings.
 * Needs root (chroot); exits 77 without it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "user/common/ctl.h"
#include "user/sharedlibs/procfile.h"

struct fixture {
	char dir[64];	/* the child's root: dir/root; its cwd dir/root/lib */
	pid_t child;
	int ready[2];	/* the child says it is set up */
	unsigned long map_start, map_end;
	int proc_fd_dir; /* the child's fd of its /proc/self/fd directory */
	int mapped_fd;	 /* its fd of mapped.so */
};

static void put(const char *dir, const char *name, const char *text)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, text, strlen(text)) < 0)
		abort();
	close(fd);
}

/* The child: chroot into dir/root (chroot = 1) or just chdir into dir/root/lib; map
 * root/lib/mapped.so; report the mapping; wait to be killed. */
static void child_main(struct fixture *f, int chrooted)
{
	char root[128];
	unsigned long range[4];
	void *p;
	int fd, dir;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY); /* its entries: magic links */
	snprintf(root, sizeof(root), "%s/root", f->dir);
	if (chrooted ? chroot(root) || chdir("/lib") : chdir(root) || chdir("lib"))
		_exit(1);
	fd = open("mapped.so", O_RDONLY);
	p = fd < 0 ? MAP_FAILED : mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		_exit(1);
	range[0] = (unsigned long)p;
	range[1] = range[0] + 4096;
	range[2] = (unsigned long)dir;
	range[3] = (unsigned long)fd;
	if (write(f->ready[1], range, sizeof(range)) != sizeof(range))
		_exit(1);
	for (;;)
		pause();
}

static int setup_with(void **state, int chrooted)
{
	struct fixture *f = calloc(1, sizeof(*f));
	unsigned long range[4];
	char p[128];

	snprintf(f->dir, sizeof(f->dir), "/tmp/bpftel-procfile-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(p, sizeof(p), "%s/root", f->dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/root/lib", f->dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/root/etc", f->dir);
	mkdir(p, 0755);
	put(f->dir, "outside", "outside the root\n");
	snprintf(p, sizeof(p), "%s/root/etc", f->dir);
	put(p, "inside", "inside the root\n");
	snprintf(p, sizeof(p), "%s/root/lib", f->dir);
	put(p, "mapped.so", "mapped\n");
	put(p, "libreal.so", "a library\n");
	if (pipe(f->ready))
		return -1;
	f->child = fork();
	if (f->child == 0)
		child_main(f, chrooted);
	if (read(f->ready[0], range, sizeof(range)) != sizeof(range))
		return -1;
	f->map_start = range[0];
	f->map_end = range[1];
	f->proc_fd_dir = (int)range[2];
	f->mapped_fd = (int)range[3];
	*state = f;
	return 0;
}

static int setup_chroot(void **state)
{
	return setup_with(state, 1);
}

static int setup_cwd(void **state)
{
	return setup_with(state, 0);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	kill(f->child, SIGKILL);
	waitpid(f->child, NULL, 0);
	close(f->ready[0]);
	close(f->ready[1]);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd))
		return -1;
	free(f);
	return 0;
}

/* Make dir/root/<name> a symlink to target. */
static void link_in_root(struct fixture *f, const char *name, const char *target)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/root/%s", f->dir, name);
	unlink(p);
	assert_int_equal(symlink(target, p), 0);
}

static int open_as(struct fixture *f, int dirfd, const char *path, dev_t dev, __u64 ino,
		   struct stat *st, enum bpftel_refusal *why)
{
	struct bpftel_procfile_target t = {
		.pid = (__u32)f->child, .dirfd = dirfd, .path = path, .dev = dev, .ino = ino};

	return bpftel_procfile_open(&t, st, why);
}

static void stat_in_root(struct fixture *f, const char *name, struct stat *st)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/root/%s", f->dir, name);
	assert_int_equal(stat(p, st), 0);
}

/* Absolute symlinks and ".." resolve inside the process's root, never outside it. */
static void test_absolute_paths_stay_in_root(void **state)
{
	struct fixture *f = *state;
	enum bpftel_refusal why;
	struct stat st, inside;
	char esc[256];
	int fd;

	stat_in_root(f, "etc/inside", &inside);
	link_in_root(f, "lib/libabs.so", "/etc/inside");
	fd = open_as(f, AT_FDCWD, "/lib/libabs.so", 0, 0, &st, &why);
	assert_true(fd >= 0);
	assert_int_equal(st.st_ino, inside.st_ino); /* the root's /etc, not the host's */
	close(fd);
	/* Up and out: clamped at the root, where there is no such file. */
	snprintf(esc, sizeof(esc), "/../../../../..%s/outside", f->dir);
	link_in_root(f, "lib/libup.so", esc);
	fd = open_as(f, AT_FDCWD, "/lib/libup.so", 0, 0, &st, &why);
	assert_int_equal(fd, -ENOENT);
	assert_int_equal(why, BPFTEL_REFUSED__COUNT);
	fd = open_as(f, AT_FDCWD, esc, 0, 0, &st, &why);
	assert_int_equal(fd, -ENOENT);
}

/* A relative path is walked beneath the cwd it is relative to only: one that climbs
 * out of it, itself or through a symlink, is not walked, and is no refusal either (the
 * process may have stayed in its root: LD_LIBRARY_PATH=../lib): -EREMOTE, the caller
 * reaches the file through the process's mapping. */
static void test_relative_paths_stay_beneath(void **state)
{
	struct fixture *f = *state;
	enum bpftel_refusal why;
	struct stat st;
	int fd;

	fd = open_as(f, AT_FDCWD, "libreal.so", 0, 0, &st, &why);
	assert_true(fd >= 0);
	close(fd);
	fd = open_as(f, AT_FDCWD, "../../outside", 0, 0, &st, &why);
	assert_int_equal(fd, -EREMOTE);
	assert_int_equal(why, BPFTEL_REFUSED__COUNT);
	link_in_root(f, "lib/libout.so", "../../outside");
	fd = open_as(f, AT_FDCWD, "libout.so", 0, 0, &st, &why);
	assert_int_equal(fd, -EREMOTE);
	assert_int_equal(why, BPFTEL_REFUSED__COUNT);
}

static int renaming;
static unsigned int rename_go, rename_done; /* opens to race, opens raced */
static int rename_opened; /* the open being raced returned: no more pairs for it */

/* Renames on the host, each moving the rename seqlock that a walk's ".." under
 * RESOLVE_IN_ROOT checks: up to RENAME_PAIRS pairs per open, made while that open
 * walks, in lockstep with it. So a walk is raced now and then on any machine (the
 * renames start as the open does), at most 2 x RENAME_PAIRS times in a row by these
 * (the open's 8 tries outlast them), however slow the machine or its scheduling;
 * renames elsewhere on the host (the seqlock is global) come on top. */
#define RENAME_PAIRS 3
static void *rename_loop(void *arg)
{
	const char *dir = arg;
	char a[300], b[300];
	unsigned int done = 0;
	int k;

	snprintf(a, sizeof(a), "%s/ren-a", dir);
	snprintf(b, sizeof(b), "%s/ren-b", dir);
	close(open(a, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
	while (__atomic_load_n(&renaming, __ATOMIC_ACQUIRE)) {
		if (__atomic_load_n(&rename_go, __ATOMIC_ACQUIRE) == done) {
			sched_yield();
			continue;
		}
		for (k = 0; k < RENAME_PAIRS && !__atomic_load_n(&rename_opened, __ATOMIC_ACQUIRE);
		     k++) {
			if (rename(a, b) || rename(b, a))
				goto out;
		}
		__atomic_store_n(&rename_done, ++done, __ATOMIC_RELEASE);
	}
out:
	unlink(a);
	unlink(b);
	return NULL;
}

/* A path with ".." in it ($ORIGIN/../lib) opens while other processes rename files:
 * the walk's EAGAIN (a rename raced its "..") is tried again, not taken for the
 * file's absence (a library never probed, and nothing counted). */
static void test_dotdot_while_renaming(void **state)
{
	struct fixture *f = *state;
	enum bpftel_refusal why;
	pthread_t th;
	struct stat st;
	int fd, i, failed = 0;
	long long deadline;

	__atomic_store_n(&renaming, 1, __ATOMIC_RELEASE);
	assert_int_equal(pthread_create(&th, NULL, rename_loop, f->dir), 0);
	for (i = 1; i <= 3000; i++) {
		__atomic_store_n(&rename_opened, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&rename_go, (unsigned int)i, __ATOMIC_RELEASE);
		fd = open_as(f, AT_FDCWD, "/etc/../etc/../etc/inside", 0, 0, &st, &why);
		__atomic_store_n(&rename_opened, 1, __ATOMIC_RELEASE);
		if (fd < 0)
			failed++;
		else
			close(fd);
		/* Its renames done before the next open (60 s at most: the thread may have
		 * stopped on a failed rename, or a file system stall hold it). */
		deadline = bpftel_mono_ms() + 60000;
		while (__atomic_load_n(&rename_done, __ATOMIC_ACQUIRE) != (unsigned int)i &&
		       bpftel_mono_ms() < deadline)
			sched_yield();
		if (__atomic_load_n(&rename_done, __ATOMIC_ACQUIRE) != (unsigned int)i)
			break;
	}
	__atomic_store_n(&renaming, 0, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	assert_int_equal(__atomic_load_n(&rename_done, __ATOMIC_ACQUIRE), 3000);
	assert_int_equal(failed, 0);
}

/* A magic link (a /proc fd, root or exe link) is never followed. */
static void test_magic_links_refused(void **state)
{
	struct fixture *f = *state;
	enum bpftel_refusal why;
	struct stat st;
	char target[64];
	int fd;

	snprintf(target, sizeof(target), "/proc/%d/root/etc/hostname", (int)getpid());
	link_in_root(f, "lib/libmagic.so", target);
	/* Relative: the link is absolute, so it climbs out of the cwd: not walked. */
	fd = open_as(f, AT_FDCWD, "libmagic.so", 0, 0, &st, &why);
	assert_int_equal(fd, -EREMOTE);
	/* Absolute: walked in the process's root, where it is no magic link. */
	fd = open_as(f, AT_FDCWD, "/lib/libmagic.so", 0, 0, &st, &why);
	assert_true(fd < 0);
	/* Relative to a directory of the process's that holds magic links (its
	 * /proc/self/fd): the entry of its fd of a regular file, mapped.so, is not
	 * followed to it. */
	assert_true(f->proc_fd_dir >= 0 && f->mapped_fd >= 0);
	snprintf(target, sizeof(target), "%d", f->mapped_fd);
	fd = open_as(f, f->proc_fd_dir, target, 0, 0, &st, &why);
	assert_true(fd < 0);
	assert_int_equal(why, BPFTEL_REFUSED_OUTSIDE_ROOT);
}

/* A FIFO, a directory, a device: refused without being opened (nothing blocks). */
static void test_not_regular_refused(void **state)
{
	struct fixture *f = *state;
	enum bpftel_refusal why;
	struct stat st;
	char p[256];
	int fd;

	snprintf(p, sizeof(p), "%s/root/lib/libfifo.so", f->dir);
	assert_int_equal(mkfifo(p, 0644), 0);
	fd = open_as(f, AT_FDCWD, "libfifo.so", 0, 0, &st, &why);
	assert_int_equal(why, BPFTEL_REFUSED_NOT_REGULAR);
	assert_true(fd < 0 && S_ISFIFO(st.st_mode));
	fd = open_as(f, AT_FDCWD, "/lib", 0, 0, &st, &why);
	assert_int_equal(why, BPFTEL_REFUSED_NOT_REGULAR);
	/* /dev/zero's device node, made inside the root (a chroot has no /dev). */
	link_in_root(f, "lib/libzero.so", "zero");
	snprintf(p, sizeof(p), "%s/root/lib/zero", f->dir);
	assert_int_equal(mknod(p, S_IFCHR | 0666, makedev(1, 5)), 0);
	fd = open_as(f, AT_FDCWD, "libzero.so", 0, 0, &st, &why);
	assert_int_equal(why, BPFTEL_REFUSED_NOT_REGULAR);
	assert_true(fd < 0 && S_ISCHR(st.st_mode));
}

/* The path must lead to the file the kernel saw opened. */
static void test_identity_checked(void **state)
{
	struct fixture *f = *state;
	enum bpftel_refusal why;
	struct stat st, real, other;
	char *host;
	int fd;

	stat_in_root(f, "lib/libreal.so", &real);
	stat_in_root(f, "etc/inside", &other);
	fd = open_as(f, AT_FDCWD, "libreal.so", other.st_dev, other.st_ino, &st, &why);
	assert_int_equal(fd, -ESTALE);
	assert_int_equal(why, BPFTEL_REFUSED_IDENTITY_CHANGED);
	fd = open_as(f, AT_FDCWD, "libreal.so", real.st_dev, real.st_ino, &st, &why);
	assert_true(fd >= 0);
	close(fd);
	/* The path shown for display: only while it leads to the file opened. */
	host = bpftel_procfile_host_path(&(struct bpftel_procfile_target){
		.pid = (__u32)f->child, .dirfd = AT_FDCWD, .path = "libreal.so",
		.dev = other.st_dev, .ino = other.st_ino});
	assert_null(host);
	host = bpftel_procfile_host_path(&(struct bpftel_procfile_target){
		.pid = (__u32)f->child, .dirfd = AT_FDCWD, .path = "libreal.so",
		.dev = real.st_dev, .ino = real.st_ino});
	assert_non_null(host);
	assert_non_null(strstr(host, "/root/lib/libreal.so"));
	free(host);
}

/* As on a kernel before 5.6, whose openat2(2) is ENOSYS (a seccomp filter, in a
 * child): an absolute path is still walked from the process's root, not the agent's.
 * Exit 0: the root's file; 2: not opened; 3: another file. */
static void test_absolute_path_without_openat2(void **state)
{
	struct fixture *f = *state;
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(code) / sizeof(code[0]), .filter = code};
	enum bpftel_refusal why;
	struct stat st, inside;
	int fd, status;
	pid_t pid;

	stat_in_root(f, "etc/inside", &inside);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
			_exit(4);
		fd = open_as(f, AT_FDCWD, "/etc/inside", inside.st_dev, inside.st_ino, &st, &why);
		_exit(fd < 0 ? 2 : st.st_ino != inside.st_ino ? 3 : 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 4)
		skip(); /* no seccomp filters here: the case cannot be staged */
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* A mapping reaches its file whatever its path became; the real identity is the one
 * the mapping shows. */
static void test_mapped_file(void **state)
{
	struct fixture *f = *state;
	enum bpftel_refusal why;
	struct stat st, mapped;
	char range[64], p[256];
	dev_t dev;
	__u64 ino;
	int fd;

	stat_in_root(f, "lib/mapped.so", &mapped);
	snprintf(p, sizeof(p), "%s/root/lib/mapped.so", f->dir);
	assert_int_equal(unlink(p), 0); /* gone from every path */
	snprintf(range, sizeof(range), "%lx-%lx", f->map_start, f->map_end);
	fd = open_as(f, BPFTEL_PROCFILE_MAPPED, range, mapped.st_dev, mapped.st_ino, &st, &why);
	assert_true(fd >= 0);
	assert_int_equal(st.st_ino, mapped.st_ino);
	assert_int_equal(bpftel_procfile_real_identity(fd, &dev, &ino), 0);
	assert_int_equal(ino, mapped.st_ino);
	assert_int_equal(dev, mapped.st_dev);
	close(fd);
}

/* A process that exited and is not reaped yet (a zombie: its stat still reads) has no
 * root or directory left: gone (-ESRCH), not a path that led nowhere, which would ask
 * the registry for a /proc scan. */
static void test_exited_process_is_gone(void **state)
{
	struct fixture *f = *state;
	enum bpftel_refusal why;
	siginfo_t info;
	struct stat st;

	assert_int_equal(kill(f->child, SIGKILL), 0);
	/* Wait for the exit, leaving the child a zombie (teardown reaps it). */
	assert_int_equal(waitid(P_PID, (id_t)f->child, &info, WEXITED | WNOWAIT), 0);
	assert_int_equal(open_as(f, AT_FDCWD, "/etc/inside", 0, 0, &st, &why), -ESRCH);
	assert_int_equal(why, BPFTEL_REFUSED__COUNT);
	assert_int_equal(open_as(f, AT_FDCWD, "libreal.so", 0, 0, &st, &why), -ESRCH);
	assert_int_equal(why, BPFTEL_REFUSED__COUNT);
}

/* Mount lines: FUSE on the file's device, elsewhere, or none; a line too long to read
 * whole is taken as FUSE (on the device if its device is the file's). */
static enum bpftel_fuse_view scan(const char *text, unsigned int major, unsigned int minor)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	enum bpftel_fuse_view v;

	assert_non_null(f);
	v = bpftel_mountinfo_fuse(f, makedev(major, minor));
	fclose(f);
	return v;
}

static void test_fuse_mount_lines(void **state)
{
	static const char ext4[] = "24 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n";
	static const char both[] =
		"24 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
		"60 24 0:50 / /home/u/mnt rw,nosuid shared:30 - fuse.sshfs u@h:/ rw,user_id=0\n";
	size_t big = 20000, head;
	char *longline;

	(void)state;
	assert_int_equal(scan(ext4, 8, 1), BPFTEL_FUSE_NONE);
	assert_int_equal(scan(both, 8, 1), BPFTEL_FUSE_ELSEWHERE);
	assert_int_equal(scan(both, 0, 50), BPFTEL_FUSE_DEV);
	/* FUSE's control file system (systemd mounts it) is no FUSE mount; fuseblk is. */
	assert_int_equal(scan("40 24 0:39 / /sys/fs/fuse/connections rw - fusectl fusectl rw\n",
			      0, 39),
			 BPFTEL_FUSE_NONE);
	assert_int_equal(scan("41 24 8:17 / /mnt/ntfs rw - fuseblk /dev/sdb1 rw\n", 8, 17),
			 BPFTEL_FUSE_DEV);
	assert_int_equal(scan("42 24 0:51 / /mnt/x rw - fuseblk.ntfs /dev/sdc1 rw\n", 8, 1),
			 BPFTEL_FUSE_ELSEWHERE);
	assert_int_equal(scan("43 24 0:52 / /mnt/y rw - fuse /dev/fuse rw\n", 0, 52),
			 BPFTEL_FUSE_DEV);
	/* A mount point of 20000 bytes on the file's own ext4: not read whole. */
	longline = malloc(big + 200);
	assert_non_null(longline);
	head = (size_t)sprintf(longline, "70 24 8:1 / /");
	memset(longline + head, 'a', big);
	strcpy(longline + head + big, " rw shared:9 - ext4 /dev/sda1 rw\n");
	assert_int_equal(scan(longline, 8, 1), BPFTEL_FUSE_DEV);
	assert_int_equal(scan(longline, 8, 2), BPFTEL_FUSE_ELSEWHERE);
	free(longline);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_absolute_paths_stay_in_root, setup_chroot,
						teardown),
		cmocka_unit_test_setup_teardown(test_relative_paths_stay_beneath, setup_cwd,
						teardown),
		cmocka_unit_test_setup_teardown(test_dotdot_while_renaming, setup_chroot, teardown),
		cmocka_unit_test_setup_teardown(test_magic_links_refused, setup_cwd, teardown),
		cmocka_unit_test_setup_teardown(test_not_regular_refused, setup_chroot, teardown),
		cmocka_unit_test_setup_teardown(test_identity_checked, setup_cwd, teardown),
		cmocka_unit_test_setup_teardown(test_mapped_file, setup_chroot, teardown),
		cmocka_unit_test_setup_teardown(test_absolute_path_without_openat2, setup_chroot,
						teardown),
		cmocka_unit_test_setup_teardown(test_exited_process_is_gone, setup_cwd, teardown),
		cmocka_unit_test(test_fuse_mount_lines),
	};

	if (geteuid() != 0) {
		printf("SKIP: needs root (chroot, /proc/<pid>/root of another process)\n");
		return 77;
	}
	return cmocka_run_group_tests_name("procfile", tests, NULL, NULL);
}
