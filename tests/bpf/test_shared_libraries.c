// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * BPF_PROG_TEST_RUN tests of bpf/shared_libraries.bpf.c through its harness object:
 * each case opens a real file, plays the exit of that open through the same inline
 * code the probes run, then checks the ring buffer and the counters.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <limits.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <net/if.h>
#include <cmocka.h>
#include <bpf/bpf.h>

#include "harness.h"
#include "shared_libraries_harness.skel.h"
#include "shared_libraries.h"
#include "user/sharedlibs/sharedlibs.h"

/* Mirrors struct shlib_test_open in the harness program. */
struct shlib_test_open {
	__u64 filename;
	__s64 ret;
	__u64 pid_tgid;
	__s32 dirfd;
	__u32 syscall;
};

/* Mirrors struct shlib_test_exec in the harness program. */
struct shlib_test_exec {
	__u64 pid_tgid;
	char filename[64];
};

#define TEST_PID_TGID ((4242ULL << 32) | 4343)
#define SELF_TGID     777 /* plays the agent's own process (rodata shlib_self_tgid) */
#define TEST_COMM     "shlib-test"

struct path_case {
	const char *name;
	const char *path; /* NULL: generated, gen_len bytes ending in gen_tail */
	size_t gen_len;
	const char *gen_tail;
	int want_lib; /* enum shlib_lib, -1 for no event */
	int want_too_long;
};

static const struct path_case path_cases[] = {
	{"versioned_full_path", "/lib/x86_64-linux-gnu/libssl.so.3", 0, NULL, SHLIB_LIB_SSL},
	{"unversioned_full_path", "/usr/lib/libssl.so", 0, NULL, SHLIB_LIB_SSL},
	{"relative_name", "libssl.so.3", 0, NULL, SHLIB_LIB_SSL},
	{"relative_dir", "lib64/libssl.so.3", 0, NULL, SHLIB_LIB_SSL},
	{"crypto_two_part_version", "/opt/x/libcrypto.so.1.1", 0, NULL, SHLIB_LIB_CRYPTO},
	{"gnutls", "/usr/lib/x86_64-linux-gnu/libgnutls.so.30", 0, NULL, SHLIB_LIB_GNUTLS},
	{"cudart_13", "/usr/local/cuda/lib64/libcudart.so.13", 0, NULL, SHLIB_LIB_CUDART},
	{"cudart_long_version", "/usr/lib/libcudart.so.12.1.105", 0, NULL, SHLIB_LIB_CUDART},
	{"cuda_driver", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", 0, NULL, SHLIB_LIB_CUDA},
	{"rhel_openssl_1_1", "/usr/lib64/libssl.so.1.1.1k", 0, NULL, SHLIB_LIB_SSL},
	{"rhel_openssl_1_0", "/usr/lib64/libcrypto.so.1.0.2k", 0, NULL, SHLIB_LIB_CRYPTO},
	{"rhel_openssl_letter_o", "/usr/lib64/libssl.so.1.1.1o", 0, NULL, SHLIB_LIB_SSL},
	/* 17 bytes: the letter opens the name's third word, its digit ends the second. */
	{"letter_first_of_its_word", "/usr/lib64/libssl.so.1.0.22k", 0, NULL, SHLIB_LIB_SSL},
	{"near_miss_letter_first_of_word", "/usr/lib64/libssl.so.1.0.2.k", 0, NULL, -1},
	{"near_miss_two_letters", "/lib/libssl.so.1.1.1kk", 0, NULL, -1},
	{"near_miss_letter_after_dot", "/lib/libssl.so.1.k", 0, NULL, -1},
	{"near_miss_letter_after_so", "/lib/libssl.sok", 0, NULL, -1},
	{"near_miss_bak", "/lib/libssl.so.3.bak", 0, NULL, -1},
	{"near_miss_prefix", "/lib/notlibssl.so", 0, NULL, -1},
	{"near_miss_mylib", "/opt/mylibssl.so", 0, NULL, -1},
	{"near_miss_mylib_bare", "mylibssl.so", 0, NULL, -1},
	{"unversioned_opt_path", "/opt/x/libssl.so", 0, NULL, SHLIB_LIB_SSL},
	{"cuda_not_cudart", "/usr/lib/libcudart.so", 0, NULL, SHLIB_LIB_CUDART},
	{"near_miss_sox", "/lib/libssl.sox", 0, NULL, -1},
	{"no_so_suffix", "/lib/libssl", 0, NULL, -1},
	{"trailing_dot", "/lib/libssl.so.", 0, NULL, -1},
	{"double_dot_version", "/lib/libssl.so.3..1", 0, NULL, -1},
	{"version_without_dot", "/lib/libssl.so3", 0, NULL, -1},
	{"directory_named_like_lib", "/lib/libssl.so/README.so", 0, NULL, -1},
	{"other_library", "/lib/x86_64-linux-gnu/libz.so.1", 0, NULL, -1},
	{"cudart_stem_only", "/lib/libcudar.so", 0, NULL, -1},
	{"empty", "", 0, NULL, -1},
	{"version_too_long", "/lib/libssl.so.1.2.3.4.5.6.7.8.9.10.11.12.13.14.15", 0, NULL, -1},
	{"at_buffer_len_minus_1", NULL, SHLIB_PATH_MAX - 2, "/libssl.so.3", SHLIB_LIB_SSL},
	{"at_buffer_len", NULL, SHLIB_PATH_MAX - 1, "/libcrypto.so.3", SHLIB_LIB_CRYPTO},
	{"over_buffer_len_by_1", NULL, SHLIB_PATH_MAX, "/libssl.so.3", -1, 1},
	{"far_over_buffer_len", NULL, 5000, "/libssl.so.3", -1, 1},
	{"long_but_no_lib", NULL, SHLIB_PATH_MAX - 1, "/data.bin", -1},
	/* Names of 40 bytes and more live outside the dentry's inline copy. */
	{"name_39_bytes_inline", "/opt/libcudart.so.12.1.105.12.1.105.12.1.1.0", 0, NULL,
	 SHLIB_LIB_CUDART},
	{"name_40_bytes_external", "/opt/libcudart.so.12.1.105.12.1.105.12.1.1.05", 0, NULL,
	 SHLIB_LIB_CUDART},
	{"name_41_bytes_no_lib", "/opt/libcudart.so.12.1.105.12.1.105.12.1.1.0.x", 0, NULL, -1},
	{"name_41_bytes_letter", "/opt/libcudart.so.12.1.105.12.1.105.12.1.1.05x", 0, NULL,
	 SHLIB_LIB_CUDART},
};

/* Real files the cases open, named as the paths' basenames. */
static char tmpdir[] = "/tmp/bpftel-shlib-XXXXXX";

static struct shared_libraries_harness *skel;
static struct bpftel_rb_capture cap;
static struct bpftel_rb_capture exec_cap; /* execs have a ring buffer of their own */

static int counter_fd(void)
{
	return bpf_map__fd(skel->maps.shlib_counters);
}

static void set_libsets(__u32 libsets)
{
	struct shlib_config cfg;
	__u32 zero = 0;

	bpftel_shlib_config(&cfg, libsets);
	assert_int_equal(
		bpf_map_update_elem(bpf_map__fd(skel->maps.shlib_config), &zero, &cfg, BPF_ANY), 0);
}

/* btrfs was in the kernel when the harness loaded, and a file system of it can be made
 * on a loop device (test_btrfs_subvolume_dev: mkfs.btrfs, of btrfs-progs, a test
 * package). */
static bool btrfs_at_load;

static int group_setup(void **state)
{
	(void)state;
	/* Before the load: the programs see btrfs only if its types are there then (a
	 * module's BTF). */
	btrfs_at_load = !access("/usr/sbin/mkfs.btrfs", X_OK) &&
			!access("/dev/loop-control", F_OK) &&
			(!access("/sys/fs/btrfs", F_OK) ||
			 !system("modprobe -q btrfs > /dev/null 2>&1"));
	skel = shared_libraries_harness__open();
	if (!skel)
		return -1;
	/* The agent's manager loads only the candidates the kernel takes; fexit is
	 * refused on some kernels (EPERM), so the harness leaves it out too. */
	skel->rodata->shlib_self_tgid = SELF_TGID;
	if (shared_libraries_harness__load(skel))
		return -1;
	if (!mkdtemp(tmpdir))
		return -1;
	return bpftel_rb_capture__open(&cap, bpf_map__fd(skel->maps.shlib_events)) ?:
	       bpftel_rb_capture__open(&exec_cap, bpf_map__fd(skel->maps.shlib_exec_events));
}

static int group_teardown(void **state)
{
	char cmd[64];

	(void)state;
	bpftel_rb_capture__close(&cap);
	bpftel_rb_capture__close(&exec_cap);
	shared_libraries_harness__destroy(skel);
	/* test_btrfs_subvolume_dev's mount, left where it failed */
	snprintf(cmd, sizeof(cmd), "%s/btrfs", tmpdir);
	umount2(cmd, MNT_DETACH);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) ? -1 : 0;
}

static int scratch_hold(unsigned int held);

/* Before each case: every libset on, counters at zero, ring buffer empty, event slots
 * free. */
static int case_setup(void **state)
{
	(void)state;
	set_libsets(SHLIB_LIBSET_ALL);
	assert_int_equal(bpftel_test_percpu_clear(counter_fd(), SHLIB_CNT__COUNT), 0);
	bpftel_rb_capture__drain(&cap);
	bpftel_rb_capture__drain(&exec_cap);
	/* Every run gives its slot back: none is held after the case before (one that
	 * fails in test_scratch_held holds them; they are freed here all the same). */
	assert_int_equal(scratch_hold(0), 0);
	return 0;
}

/* Play the exit of an open that returned ret for path (relative to dirfd) as pid_tgid;
 * returns the number of events it emitted (captured in cap). */
static int play_exit_as(const char *path, long ret, int dirfd, __u32 sys, __u64 pid_tgid)
{
	struct shlib_test_open ctx = {
		.filename = (uintptr_t)path,
		.ret = ret,
		.pid_tgid = pid_tgid,
		.dirfd = dirfd,
		.syscall = sys,
	};
	int retval = -1;

	assert_int_equal(bpftel_test_run(skel->progs.shlib_test_open, &ctx, sizeof(ctx), &retval),
			 0);
	assert_int_equal(retval, 0);
	return bpftel_rb_capture__drain(&cap);
}

static int play_exit(const char *path, long ret, __u32 sys)
{
	return play_exit_as(path, ret, AT_FDCWD, sys, TEST_PID_TGID);
}

/* Open (creating it if need be) tmpdir/name with flags; an empty name opens tmpdir. */
static int open_real(const char *name, int flags)
{
	char real[PATH_MAX];
	int fd;

	if (!*name)
		return open(tmpdir, O_RDONLY | O_DIRECTORY);
	snprintf(real, sizeof(real), "%s/%s", tmpdir, name);
	fd = open(real, flags | O_CREAT, 0644);
	assert_true(fd >= 0);
	return fd;
}

/* The basename of a case's path: the file the process would have opened. */
static const char *base_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* Open tmpdir/<basename of path> read-only for real, play its exit with path as the name
 * the process passed; returns events emitted. *st gets the file's identity. */
static int play_open(const char *path, __u32 sys, struct stat *st)
{
	int fd = open_real(base_of(path), O_RDONLY), n;

	assert_int_equal(fstat(fd, st), 0);
	n = play_exit(path, fd, sys);
	close(fd);
	return n;
}

static __u64 counter(enum shlib_counter c)
{
	return bpftel_test_percpu_sum(counter_fd(), c);
}

static char *make_path(const struct path_case *c)
{
	size_t tail = strlen(c->gen_tail), i;
	char *p = malloc(c->gen_len + 1);

	assert_non_null(p);
	for (i = 0; i < c->gen_len - tail; i++)
		p[i] = i % 100 == 0 ? '/' : 'a' + i % 26; /* components well under NAME_MAX */
	memcpy(p + c->gen_len - tail, c->gen_tail, tail + 1);
	assert_int_equal(strlen(p), c->gen_len);
	return p;
}

/* This process's start time, clock ticks since boot (/proc/self/stat's 22nd field). */
static unsigned long long self_start_ticks(void)
{
	unsigned long long ticks = 0;
	char buf[1024], *p;
	FILE *f = fopen("/proc/self/stat", "re");
	int i;

	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	p = strrchr(buf, ')');
	assert_non_null(p);
	for (i = 2; i < 22 && p; i++) /* field 2 ends at ')' */
		p = strchr(p + 1, ' ');
	assert_non_null(p);
	assert_int_equal(sscanf(p + 1, "%llu", &ticks), 1);
	return ticks;
}

/* stat's device as the kernel encodes it (major << 20 | minor), as events carry it. */
static __u32 kernel_dev_of(dev_t dev)
{
	return major(dev) << 20 | minor(dev);
}

static void assert_event(const char *path, int lib, __u32 sys, const struct stat *st)
{
	const struct shlib_event *ev = cap.rec[0].data;
	size_t len = strlen(path);

	/* The identity of the file the open returned, kernel dev_t as stat's: the super
	 * block's device, or on btrfs the subvolume's (sdev; test_btrfs_subvolume_dev). */
	assert_int_equal(ev->ino, st->st_ino);
	assert_int_equal(ev->sdev ? ev->sdev : ev->dev, kernel_dev_of(st->st_dev));
	assert_int_equal(ev->dirfd, AT_FDCWD);

	assert_int_equal(cap.rec[0].size, SHLIB_EVENT_HDR_SIZE + len + 1);
	assert_int_equal(ev->pid, TEST_PID_TGID >> 32);
	assert_int_equal(ev->tid, (__u32)TEST_PID_TGID);
	assert_int_equal(ev->lib, lib);
	assert_int_equal(ev->libset,
			 lib >= SHLIB_LIB_CUDART ? SHLIB_LIBSET_GPU : SHLIB_LIBSET_CRYPTO);
	assert_int_equal(ev->syscall, sys);
	assert_int_equal(ev->path_len, len);
	assert_memory_equal(ev->path, path, len + 1);
	assert_string_equal(ev->comm, TEST_COMM);
	assert_true(ev->ktime_ns > 0);
	/* The process that ran the program (this one: the pid is the harness's): its
	 * start, the kernel's ns, is the one /proc shows in clock ticks. */
	assert_int_equal(ev->start_ns / (1000000000ull / sysconf(_SC_CLK_TCK)), self_start_ticks());
}

static void test_path_case(void **state)
{
	const struct path_case *c = *state;
	char *path = c->path ? strdup(c->path) : make_path(c);
	struct stat st;
	int n;

	n = play_open(path, SHLIB_SYS_OPENAT, &st);
	if (c->want_lib >= 0) {
		assert_int_equal(n, 1);
		assert_event(path, c->want_lib, SHLIB_SYS_OPENAT, &st);
		assert_int_equal(counter(SHLIB_CNT_MATCHED), 1);
		assert_int_equal(counter(SHLIB_CNT_EMITTED), 1);
	} else {
		assert_int_equal(n, 0);
		assert_int_equal(counter(SHLIB_CNT_EMITTED), 0);
	}
	/* Too long: the file matched, its path could not be reported (counted). */
	assert_int_equal(counter(SHLIB_CNT_MATCHED), c->want_lib >= 0 || c->want_too_long);
	assert_int_equal(counter(SHLIB_CNT_TOO_LONG), c->want_too_long);
	assert_int_equal(counter(SHLIB_CNT_LOST), 0);
	assert_int_equal(counter(SHLIB_CNT_NO_PATH), 0);
	free(path);
}

static void test_failed_open_emits_nothing(void **state)
{
	(void)state;
	assert_int_equal(play_exit("/lib/libssl.so.3", -2 /* ENOENT */, SHLIB_SYS_OPENAT), 0);
	assert_int_equal(play_exit("/lib/libssl.so.3", -24 /* EMFILE */, SHLIB_SYS_OPEN), 0);
	assert_int_equal(counter(SHLIB_CNT_MATCHED), 0);
	assert_int_equal(counter(SHLIB_CNT_EMITTED), 0);
}

/* An fd that is not open (closed by another thread since) is not looked at. */
static void test_closed_fd_ignored(void **state)
{
	int fd = open_real("libssl.so.3", O_RDONLY);

	(void)state;
	close(fd);
	assert_int_equal(play_exit("/lib/libssl.so.3", fd, SHLIB_SYS_OPENAT), 0);
	assert_int_equal(play_exit("/lib/libssl.so.3", 1 << 20, SHLIB_SYS_OPENAT), 0);
	assert_int_equal(counter(SHLIB_CNT_MATCHED), 0);
}

static void test_write_open_ignored(void **state)
{
	int fd;

	(void)state;
	fd = open_real("libssl.so.3", O_RDWR);
	assert_int_equal(play_exit("/lib/libssl.so.3", fd, SHLIB_SYS_OPENAT), 0);
	close(fd);
	fd = open_real("libssl.so.3", O_WRONLY);
	assert_int_equal(play_exit("/lib/libssl.so.3", fd, SHLIB_SYS_OPENAT), 0);
	close(fd);
	assert_int_equal(counter(SHLIB_CNT_MATCHED), 0);
}

/* O_PATH: its access mode reads as read-only, but nothing maps such a file (a runtime
 * walking paths; with O_NOFOLLOW, a symlink named like a library opened as itself). */
static void test_o_path_open_ignored(void **state)
{
	int fd;

	(void)state;
	fd = open_real("libssl.so.3", O_RDONLY); /* made, and matched */
	assert_int_equal(play_exit("/lib/libssl.so.3", fd, SHLIB_SYS_OPENAT), 1);
	close(fd);
	fd = open_real("libssl.so.3", O_PATH);
	assert_int_equal(play_exit("/lib/libssl.so.3", fd, SHLIB_SYS_OPENAT), 0);
	close(fd);
	assert_int_equal(counter(SHLIB_CNT_MATCHED), 1);
}

static void test_disabled_libset_ignored(void **state)
{
	struct stat st;

	(void)state;
	set_libsets(SHLIB_LIBSET_BIT(SHLIB_LIBSET_CRYPTO));
	assert_int_equal(play_open("/usr/local/cuda/lib64/libcudart.so.13", SHLIB_SYS_OPENAT, &st),
			 0);
	assert_int_equal(play_open("/lib/libssl.so.3", SHLIB_SYS_OPENAT, &st), 1);
	set_libsets(0);
	assert_int_equal(play_open("/lib/libssl.so.3", SHLIB_SYS_OPENAT, &st), 0);
	assert_int_equal(counter(SHLIB_CNT_MATCHED), 1);
}

static void test_syscall_recorded(void **state)
{
	struct stat st;

	(void)state;
	assert_int_equal(play_open("/lib/libgnutls.so.30", SHLIB_SYS_OPENAT2, &st), 1);
	assert_event("/lib/libgnutls.so.30", SHLIB_LIB_GNUTLS, SHLIB_SYS_OPENAT2, &st);
	assert_int_equal(play_open("/lib/libgnutls.so.30", SHLIB_SYS_OPEN, &st), 1);
	assert_event("/lib/libgnutls.so.30", SHLIB_LIB_GNUTLS, SHLIB_SYS_OPEN, &st);
	assert_int_equal(play_open("/lib/libgnutls.so.30", SHLIB_SYS_ANY, &st), 1);
	assert_event("/lib/libgnutls.so.30", SHLIB_LIB_GNUTLS, SHLIB_SYS_ANY, &st);
}

/* The file opened decides, not the name passed: symlinks are followed by the kernel. */
static void test_symlinks(void **state)
{
	char link[PATH_MAX], target[PATH_MAX];
	struct stat st;
	int fd;

	(void)state;
	/* Links in their own directory: the other cases open tmpdir/<name> for real. */
	snprintf(link, sizeof(link), "%s/links", tmpdir);
	assert_int_equal(mkdir(link, 0755), 0);
	/* libssl.so -> libssl.so.3: matched through the link, path reported as passed. */
	close(open_real("libssl.so.3", O_RDONLY));
	snprintf(link, sizeof(link), "%s/links/libssl.so", tmpdir);
	snprintf(target, sizeof(target), "%s/libssl.so.3", tmpdir);
	assert_int_equal(symlink(target, link), 0);
	fd = open(link, O_RDONLY);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(play_exit(link, fd, SHLIB_SYS_OPENAT), 1);
	close(fd);
	assert_event(link, SHLIB_LIB_SSL, SHLIB_SYS_OPENAT, &st);
	/* libcrypto.so.3 -> notes.txt: a name like a library, but not one. */
	close(open_real("notes.txt", O_RDONLY));
	snprintf(link, sizeof(link), "%s/links/libcrypto.so.3", tmpdir);
	snprintf(target, sizeof(target), "%s/notes.txt", tmpdir);
	assert_int_equal(symlink(target, link), 0);
	fd = open(link, O_RDONLY);
	assert_int_equal(play_exit(link, fd, SHLIB_SYS_OPENAT), 0);
	close(fd);
	assert_int_equal(counter(SHLIB_CNT_MATCHED), 1);
}

/*
 * A library on a btrfs subvolume, and its copy in a snapshot of it (two containers of one
 * image on a host whose storage is btrfs): the same super block's device and inode
 * number, two files. Each event carries its subvolume's device, the one stat gives, so
 * that userspace tells them apart without opening them. Skipped without mkfs.btrfs
 * (btrfs-progs, a test package), a loop device or btrfs in the kernel.
 */
static void test_btrfs_subvolume_dev(void **state)
{
	char dir[128], cmd[1024], path[256];
	__u32 dev[2], sdev[2];
	struct stat st;
	int i, fd;

	(void)state;
	if (!btrfs_at_load)
		skip();
	snprintf(dir, sizeof(dir), "%s/btrfs", tmpdir);
	snprintf(cmd, sizeof(cmd), "truncate -s 300M %s.img && mkfs.btrfs -q %s.img > /dev/null 2>&1",
		 dir, dir);
	if (system(cmd))
		skip(); /* no btrfs here */
	/* Mounted in a mount namespace of this test's own: gone with it, whatever fails. */
	assert_int_equal(unshare(CLONE_NEWNS), 0);
	assert_int_equal(mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	snprintf(cmd, sizeof(cmd), "mkdir %s && mount -o loop %s.img %s", dir, dir, dir);
	if (system(cmd))
		skip(); /* no loop device to be had */
	snprintf(cmd, sizeof(cmd),
		 "set -e; d=%s; rm $d.img; "
		 "btrfs subvolume create $d/sub > /dev/null; echo x > $d/sub/libssl.so.3; "
		 "btrfs subvolume snapshot $d/sub $d/snap > /dev/null",
		 dir);
	assert_int_equal(system(cmd), 0);
	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s/libssl.so.3", dir, i ? "snap" : "sub");
		fd = open(path, O_RDONLY);
		assert_true(fd >= 0);
		assert_int_equal(fstat(fd, &st), 0);
		assert_int_equal(play_exit(path, fd, SHLIB_SYS_OPENAT), 1);
		close(fd);
		assert_event(path, SHLIB_LIB_SSL, SHLIB_SYS_OPENAT, &st);
		dev[i] = ((const struct shlib_event *)cap.rec[0].data)->dev;
		sdev[i] = ((const struct shlib_event *)cap.rec[0].data)->sdev;
		assert_int_equal(sdev[i], kernel_dev_of(st.st_dev));
	}
	/* One file system, two subvolumes, neither the file system's own device. */
	assert_int_equal(dev[0], dev[1]);
	assert_int_not_equal(sdev[0], sdev[1]);
	assert_int_not_equal(sdev[0], dev[0]);
	assert_int_not_equal(sdev[1], dev[1]);
	assert_int_equal(umount2(dir, MNT_DETACH), 0);
}

/* openat(dirfd, "libssl.so.3"): the event carries dirfd for userspace to resolve. */
static void test_dirfd_recorded(void **state)
{
	const struct shlib_event *ev;
	int dir = open(tmpdir, O_RDONLY | O_DIRECTORY), fd;

	(void)state;
	close(open_real("libssl.so.3", O_RDONLY));
	fd = openat(dir, "libssl.so.3", O_RDONLY);
	assert_int_equal(play_exit_as("libssl.so.3", fd, dir, SHLIB_SYS_OPENAT, TEST_PID_TGID), 1);
	ev = cap.rec[0].data;
	assert_int_equal(ev->dirfd, dir);
	assert_string_equal(ev->path, "libssl.so.3");
	close(fd);
	close(dir);
}

/* The agent opens libraries itself (symbol resolution): it must not see itself. */
static void test_self_ignored(void **state)
{
	int fd = open_real("libssl.so.3", O_RDONLY);

	(void)state;
	assert_int_equal(play_exit_as("/lib/libssl.so.3", fd, AT_FDCWD, SHLIB_SYS_OPENAT,
				      (__u64)SELF_TGID << 32 | SELF_TGID),
			 0);
	assert_int_equal(play_exit_as("/lib/libssl.so.3", fd, AT_FDCWD, SHLIB_SYS_OPENAT,
				      (__u64)SELF_TGID << 32 | 9999),
			 0);
	close(fd);
	assert_int_equal(counter(SHLIB_CNT_MATCHED), 0);
}

/* A match whose path pointer cannot be read: counted, so the agent rescans /proc. */
static void test_unreadable_pointer(void **state)
{
	int fd = open_real("libssl.so.3", O_RDONLY);

	(void)state;
	assert_int_equal(play_exit((const char *)8, fd, SHLIB_SYS_OPENAT), 0);
	close(fd);
	assert_int_equal(counter(SHLIB_CNT_MATCHED), 1);
	assert_int_equal(counter(SHLIB_CNT_NO_PATH), 1);
	assert_int_equal(counter(SHLIB_CNT_EMITTED), 0);
}

/*
 * Mark the first `held` event slots of every CPU taken (as by programs preempted
 * mid-event on a preemptible kernel), the others free; returns how many (CPU, slot)
 * were taken before. The busy word is the slot's first 8 bytes.
 */
static int scratch_hold(unsigned int held)
{
	int fd = bpf_map__fd(skel->maps.shlib_scratch), ncpu = libbpf_num_possible_cpus(), i,
	    taken = 0;
	size_t vsz = (bpf_map__value_size(skel->maps.shlib_scratch) + 7) / 8 * 8;
	unsigned char *v = calloc((size_t)ncpu, vsz);
	__u64 busy;
	__u32 k;

	assert_non_null(v);
	for (k = 0; k < bpf_map__max_entries(skel->maps.shlib_scratch); k++) {
		assert_int_equal(bpf_map_lookup_elem(fd, &k, v), 0);
		for (i = 0; i < ncpu; i++) {
			memcpy(&busy, v + (size_t)i * vsz, 8);
			taken += busy != 0;
			busy = k < held;
			memcpy(v + (size_t)i * vsz, &busy, 8);
		}
		assert_int_equal(bpf_map_update_elem(fd, &k, v, BPF_ANY), 0);
	}
	free(v);
	return taken;
}

/* A program that finds its CPU's event slot held by one it preempted takes the other;
 * with both held it looks at nothing, counted (nested), and the slots are as they were.
 * Every run gives its slot back. */
static void test_scratch_held(void **state)
{
	int ncpu = libbpf_num_possible_cpus();
	struct stat st;

	(void)state;
	assert_int_equal(scratch_hold(1), 0); /* the runs before gave theirs back */
	assert_int_equal(play_open("/usr/lib/libssl.so.3", SHLIB_SYS_OPENAT, &st), 1);
	assert_event("/usr/lib/libssl.so.3", SHLIB_LIB_SSL, SHLIB_SYS_OPENAT, &st);
	assert_int_equal(counter(SHLIB_CNT_NESTED), 0);
	assert_int_equal(scratch_hold(2), ncpu); /* slot 0 still held, slot 1 given back */
	assert_int_equal(play_open("/usr/lib/libssl.so.3", SHLIB_SYS_OPENAT, &st), 0);
	assert_int_equal(counter(SHLIB_CNT_NESTED), 1);
	assert_int_equal(counter(SHLIB_CNT_MATCHED), 1);
	assert_int_equal(scratch_hold(0), 2 * ncpu);
	assert_int_equal(play_open("/usr/lib/libssl.so.3", SHLIB_SYS_OPENAT, &st), 1);
	assert_int_equal(counter(SHLIB_CNT_NESTED), 1);
}

/* ---- socket owners (lib/shlib_sockets.h) ---- */

/* Play the exit of a connect that returned fd, in this process. */
static void play_sock(long fd)
{
	struct {
		__s64 fd;
		__u64 accepted;
	} ctx = {fd, 0};
	int retval = -1;

	assert_int_equal(bpftel_test_run(skel->progs.shlib_test_sock, &ctx, sizeof(ctx), &retval),
			 0);
	assert_int_equal(retval, 0);
}

static void set_sockets(bool on)
{
	struct shlib_config cfg;
	__u32 zero = 0;

	bpftel_shlib_config(&cfg, SHLIB_LIBSET_ALL | (on ? SHLIB_SUB_SOCKETS : 0));
	assert_int_equal(cfg.flags, on ? SHLIB_CFG_SOCKETS : 0);
	assert_int_equal(
		bpf_map_update_elem(bpf_map__fd(skel->maps.shlib_config), &zero, &cfg, BPF_ANY), 0);
}

static int map_entries(struct bpf_map *map)
{
	char key[64], next[64];
	void *prev = NULL;
	int n = 0;

	assert_true(bpf_map__key_size(map) <= sizeof(key));
	while (!bpf_map_get_next_key(bpf_map__fd(map), prev, next)) {
		memcpy(key, next, sizeof(key));
		prev = key;
		n++;
	}
	return n;
}

static void clear_map(struct bpf_map *map)
{
	char key[64];

	while (!bpf_map_get_next_key(bpf_map__fd(map), NULL, key))
		assert_int_equal(bpf_map_delete_elem(bpf_map__fd(map), key), 0);
}

static int sock_setup(void **state)
{
	case_setup(state);
	clear_map(skel->maps.shlib_sock_owners);
	clear_map(skel->maps.shlib_fd_socks);
	set_sockets(true);
	return 0;
}

/* A TCP connection over loopback: a listener, a client connected to it, the accepted
 * socket. family AF_INET, or AF_INET6 to ::1 (v4mapped: to ::ffff:127.0.0.1). */
struct tcp_pair {
	int lfd, cfd, afd;
	__u16 cport, sport;
};

static void tcp_pair(struct tcp_pair *t, int family, bool v4mapped)
{
	struct sockaddr_storage ss = {};
	socklen_t len;

	t->lfd = socket(family, SOCK_STREAM, 0);
	assert_true(t->lfd >= 0);
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(*a);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		if (v4mapped)
			inet_pton(AF_INET6, "::ffff:127.0.0.1", &a->sin6_addr);
		else
			a->sin6_addr = in6addr_loopback;
		len = sizeof(*a);
	}
	assert_int_equal(bind(t->lfd, (struct sockaddr *)&ss, len), 0);
	assert_int_equal(listen(t->lfd, 4), 0);
	assert_int_equal(getsockname(t->lfd, (struct sockaddr *)&ss, &len), 0);
	t->sport = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					   : ((struct sockaddr_in6 *)&ss)->sin6_port);
	t->cfd = socket(family, SOCK_STREAM, 0);
	assert_int_equal(connect(t->cfd, (struct sockaddr *)&ss, len), 0);
	t->afd = accept(t->lfd, NULL, NULL);
	assert_true(t->afd >= 0);
	assert_int_equal(getsockname(t->cfd, (struct sockaddr *)&ss, &len), 0);
	t->cport = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					   : ((struct sockaddr_in6 *)&ss)->sin6_port);
}

static void tcp_pair_close(struct tcp_pair *t)
{
	close(t->afd);
	close(t->cfd);
	close(t->lfd);
}

/* The network namespace this process runs in (its inode). */
static __u32 netns_of_self(void)
{
	struct stat st;

	assert_int_equal(stat("/proc/self/ns/net", &st), 0);
	return (__u32)st.st_ino;
}

static void sock_key(struct shlib_sock_key *k, int family, const void *addr, __u16 lport,
		     __u16 rport)
{
	memset(k, 0, sizeof(*k));
	k->netns = netns_of_self();
	k->family = family;
	memcpy(k->local, addr, family == 4 ? 4 : 16);
	memcpy(k->remote, addr, family == 4 ? 4 : 16);
	k->lport = lport;
	k->rport = rport;
}

static __u64 mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* The owner recorded for k is this thread of this process, by the connection and by
 * (pid, fd), the latter since the program ran (after played_ns, the clock before it). */
static void assert_owner(const struct shlib_sock_key *k, int fd, __u64 played_ns)
{
	struct shlib_fd_key fk = {.pid = (__u32)getpid(), .fd = fd};
	struct shlib_sock_owner owner;
	struct shlib_fd_sock back;

	assert_int_equal(
		bpf_map_lookup_elem(bpf_map__fd(skel->maps.shlib_sock_owners), k, &owner), 0);
	assert_int_equal(owner.pid, getpid());
	assert_int_equal(owner.tid, (__u32)syscall(SYS_gettid));
	assert_string_equal(owner.comm, TEST_COMM);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.shlib_fd_socks), &fk, &back),
			 0);
	assert_memory_equal(&back.conn, k, sizeof(*k));
	assert_in_range(back.since_ns, played_ns, mono_ns());
}

/* connect and accept on IPv4: each end's socket recorded as that end sees it. */
static void test_sock_ipv4(void **state)
{
	__u64 played;
	const __u8 lo[4] = {127, 0, 0, 1};
	struct shlib_sock_key k;
	struct tcp_pair t;

	(void)state;
	tcp_pair(&t, AF_INET, false);
	played = mono_ns();
	play_sock(t.cfd);
	sock_key(&k, 4, lo, t.cport, t.sport);
	assert_owner(&k, t.cfd, played);
	played = mono_ns();
	play_sock(t.afd);
	sock_key(&k, 4, lo, t.sport, t.cport);
	assert_owner(&k, t.afd, played);
	assert_int_equal(map_entries(skel->maps.shlib_sock_owners), 4); /* each end: its namespace, and none */
	assert_int_equal(map_entries(skel->maps.shlib_fd_socks), 2);
	tcp_pair_close(&t);
}

/* IPv6: ::1 keyed as family 6; an IPv4-mapped address as the IPv4 connection that the
 * socket filter sees in the packets. */
static void test_sock_ipv6(void **state)
{
	__u64 played;
	const __u8 lo4[4] = {127, 0, 0, 1};
	struct shlib_sock_key k;
	struct tcp_pair t;

	(void)state;
	tcp_pair(&t, AF_INET6, false);
	played = mono_ns();
	play_sock(t.cfd);
	sock_key(&k, 6, &in6addr_loopback, t.cport, t.sport);
	assert_owner(&k, t.cfd, played);
	played = mono_ns();
	play_sock(t.afd);
	sock_key(&k, 6, &in6addr_loopback, t.sport, t.cport);
	assert_owner(&k, t.afd, played);
	tcp_pair_close(&t);

	tcp_pair(&t, AF_INET6, true);
	played = mono_ns();
	play_sock(t.cfd);
	sock_key(&k, 4, lo4, t.cport, t.sport);
	assert_owner(&k, t.cfd, played);
	tcp_pair_close(&t);
	assert_int_equal(map_entries(skel->maps.shlib_sock_owners), 6);
}

/* In a child in a network namespace of its own, the connection of the same 4-tuple
 * (the loopback, ports cport -> sport): played there; the child writes its netns. */
static void netns_twin(__u16 cport, __u16 sport, int out)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	struct ifreq ifr = {.ifr_name = "lo"};
	int lfd, cfd, afd, s;
	__u32 ns;

	if (unshare(CLONE_NEWNET))
		_exit(77);
	s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr))
		_exit(1);
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr))
		_exit(1);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons(sport);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 1))
		_exit(1);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	a.sin_port = htons(cport);
	if (bind(cfd, (struct sockaddr *)&a, sizeof(a)))
		_exit(1);
	a.sin_port = htons(sport);
	if (connect(cfd, (struct sockaddr *)&a, sizeof(a)))
		_exit(1);
	afd = accept(lfd, NULL, NULL);
	play_sock(cfd);
	play_sock(afd);
	ns = netns_of_self();
	_exit(write(out, &ns, sizeof(ns)) == sizeof(ns) ? 0 : 1);
}

/* A user's network namespace (`unshare -rn`) connects over the 4-tuples of the host's
 * connections: its connect and accept are recorded under its namespace, and the
 * host's connections keep their owner (the socket filter, in the agent's namespace,
 * looks them up there). Once, the twin took the host's entries. */
static void test_sock_netns(void **state)
{
	const __u8 lo[4] = {127, 0, 0, 1};
	struct shlib_sock_owner owner;
	struct shlib_sock_key k;
	struct tcp_pair t;
	int pfd[2], status;
	__u32 twin_ns = 0;
	__u64 played;
	pid_t pid;

	(void)state;
	tcp_pair(&t, AF_INET, false);
	played = mono_ns();
	play_sock(t.cfd);
	play_sock(t.afd);
	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid)
		netns_twin(t.cport, t.sport, pfd[1]);
	close(pfd[1]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77) {
		close(pfd[0]);
		tcp_pair_close(&t);
		skip(); /* no network namespace could be made */
	}
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(read(pfd[0], &twin_ns, sizeof(twin_ns)), sizeof(twin_ns));
	close(pfd[0]);
	assert_int_not_equal(twin_ns, netns_of_self());
	/* The host's two ends, as they were; the twin's two, apart. */
	sock_key(&k, 4, lo, t.cport, t.sport);
	assert_owner(&k, t.cfd, played);
	sock_key(&k, 4, lo, t.sport, t.cport);
	assert_owner(&k, t.afd, played);
	k.netns = twin_ns;
	assert_int_equal(
		bpf_map_lookup_elem(bpf_map__fd(skel->maps.shlib_sock_owners), &k, &owner), 0);
	assert_int_equal(owner.pid, (__u32)pid);
	/* Under no namespace: the last to use the 4-tuple, for packets of other
	 * namespaces' connections. */
	k.netns = 0;
	assert_int_equal(
		bpf_map_lookup_elem(bpf_map__fd(skel->maps.shlib_sock_owners), &k, &owner), 0);
	assert_int_equal(owner.pid, (__u32)pid);
	assert_int_equal(map_entries(skel->maps.shlib_sock_owners), 6);
	tcp_pair_close(&t);
}

/* An fd number given a second connection (closed, then accepted again: dup2 here)
 * keeps the first as the one before, with its time, for the first's last messages;
 * a third pushes the first out. The same connection again changes nothing. */
static void test_sock_fd_history(void **state)
{
	struct shlib_fd_key fk = {.pid = (__u32)getpid()};
	const __u8 lo[4] = {127, 0, 0, 1};
	struct shlib_sock_key ka, kb, kc;
	struct shlib_fd_sock a, b;
	struct tcp_pair t, u, v;
	__u64 played;

	(void)state;
	tcp_pair(&t, AF_INET, false);
	tcp_pair(&u, AF_INET, false);
	tcp_pair(&v, AF_INET, false);
	sock_key(&ka, 4, lo, t.sport, t.cport);
	sock_key(&kb, 4, lo, u.sport, u.cport);
	sock_key(&kc, 4, lo, v.sport, v.cport);
	fk.fd = t.afd;
	played = mono_ns();
	play_sock(t.afd);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.shlib_fd_socks), &fk, &a), 0);
	assert_memory_equal(&a.conn, &ka, sizeof(ka));
	assert_in_range(a.since_ns, played, mono_ns());
	assert_true(a.prev_since_ns == 0);
	/* The same connection again (a connect on a socket connected already): as it was. */
	play_sock(t.afd);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.shlib_fd_socks), &fk, &b), 0);
	assert_true(b.since_ns == a.since_ns && b.prev_since_ns == 0);
	assert_int_equal(dup2(u.afd, t.afd), t.afd); /* t.afd's number, u's connection now */
	play_sock(t.afd);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.shlib_fd_socks), &fk, &b), 0);
	assert_memory_equal(&b.conn, &kb, sizeof(kb));
	assert_memory_equal(&b.prev, &ka, sizeof(ka));
	assert_true(b.prev_since_ns == a.since_ns && b.since_ns >= a.since_ns);
	assert_int_equal(dup2(v.afd, t.afd), t.afd);
	play_sock(t.afd);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.shlib_fd_socks), &fk, &a), 0);
	assert_memory_equal(&a.conn, &kc, sizeof(kc));
	assert_memory_equal(&a.prev, &kb, sizeof(kb));
	assert_true(a.prev_since_ns == b.since_ns);
	tcp_pair_close(&t);
	tcp_pair_close(&u);
	tcp_pair_close(&v);
}

/* An fd number that held a recorded connection, closed and given a UNIX socket by a
 * connect (or a TCP socket that did not connect): its entry goes, so that a TLS call on
 * the fd is not given the old connection. Other fds' entries stay. */
static void test_sock_fd_reused(void **state)
{
	struct shlib_fd_key fk = {.pid = (__u32)getpid()};
	struct shlib_fd_sock back;
	struct tcp_pair t, u;
	int unx[2], tmp;

	(void)state;
	tcp_pair(&t, AF_INET, false);
	tcp_pair(&u, AF_INET, false);
	play_sock(t.cfd);
	play_sock(u.cfd);
	assert_int_equal(map_entries(skel->maps.shlib_fd_socks), 2);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, unx), 0);
	assert_int_equal(dup2(unx[0], t.cfd), t.cfd); /* t.cfd's number, a UNIX socket now */
	play_sock(t.cfd);
	fk.fd = t.cfd;
	assert_int_not_equal(
		bpf_map_lookup_elem(bpf_map__fd(skel->maps.shlib_fd_socks), &fk, &back), 0);
	fk.fd = u.cfd;
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.shlib_fd_socks), &fk, &back),
			 0);
	tmp = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(dup2(tmp, u.cfd), u.cfd); /* TCP, never connected */
	close(tmp);
	play_sock(u.cfd);
	assert_int_equal(map_entries(skel->maps.shlib_fd_socks), 0);
	close(unx[0]);
	close(unx[1]);
	tcp_pair_close(&t);
	tcp_pair_close(&u);
}

/* Nothing recorded for what is not a connected TCP socket, for a bad fd, nor when no
 * subscriber asked for sockets. */
static void test_sock_ignored(void **state)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(9)};
	int tcp = socket(AF_INET, SOCK_STREAM, 0), udp = socket(AF_INET, SOCK_DGRAM, 0);
	int unx[2], file = open_real("notes.txt", O_RDONLY);
	struct tcp_pair t;

	(void)state;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(udp, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, unx), 0);
	play_sock(tcp); /* TCP, never connected: no peer */
	play_sock(udp); /* connected, but UDP */
	play_sock(unx[0]);
	play_sock(file);
	play_sock(-1);
	play_sock(1 << 20); /* beyond the fd table */
	close(tcp);
	play_sock(tcp); /* closed */
	tcp_pair(&t, AF_INET, false);
	set_sockets(false);
	play_sock(t.cfd); /* connected, but nobody asked */
	assert_int_equal(map_entries(skel->maps.shlib_sock_owners), 0);
	assert_int_equal(map_entries(skel->maps.shlib_fd_socks), 0);
	set_sockets(true);
	play_sock(t.cfd);
	assert_int_equal(map_entries(skel->maps.shlib_sock_owners), 2);
	tcp_pair_close(&t);
	close(udp);
	close(unx[0]);
	close(unx[1]);
	close(file);
}

/* Play an exec of the test's own executable; returns the events it emitted. */
static int play_exec(void)
{
	struct shlib_test_exec ctx = {.pid_tgid = TEST_PID_TGID, .filename = "/opt/tool"};
	int retval = -1;

	assert_int_equal(bpftel_test_run(skel->progs.shlib_test_exec, &ctx, sizeof(ctx), &retval),
			 0);
	assert_int_equal(retval, 0);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 0); /* not with library opens */
	return bpftel_rb_capture__drain(&exec_cap);
}

/* The skip map's key for the file st describes: kernel dev_t encoding. */
static struct shlib_file_key file_key(const struct stat *st)
{
	return (struct shlib_file_key){
		.ino = st->st_ino,
		.dev = (__u32)(major(st->st_dev) << 20 | minor(st->st_dev)),
	};
}

/* A skip entry for the test's own executable, as userspace writes it, but with a
 * ctime moved by d_sec seconds and d_nsec nanoseconds from the file's. */
static void skip_self(const struct stat *st, long d_sec, long d_nsec)
{
	struct shlib_file_key key = file_key(st);
	struct shlib_exe_skip_val val = {
		.ctime_sec = st->st_ctim.tv_sec + d_sec,
		.ctime_nsec = (__u32)(st->st_ctim.tv_nsec + d_nsec),
	};

	assert_int_equal(
		bpf_map_update_elem(bpf_map__fd(skel->maps.shlib_exe_skip), &key, &val, BPF_ANY), 0);
}

/*
 * An exec is reported with its file's identity and ctime unless shlib_exe_skip holds
 * the file at that very ctime: an entry whose ctime is another (the file was written
 * since userspace read it, same inode) is not honoured. The test's fstat() marks the
 * ctime queried (6.13+), which the kernel keeps in i_ctime_nsec: not part of the time.
 */
static void test_exec_skip_needs_same_ctime(void **state)
{
	const struct shlib_event *ev;
	struct shlib_file_key key;
	struct stat st;

	(void)state;
	set_libsets(SHLIB_LIBSET_ALL | SHLIB_SUB_EXECS);
	assert_int_equal(stat("/proc/self/exe", &st), 0);
	assert_int_equal(play_exec(), 1);
	ev = exec_cap.rec[0].data;
	assert_int_equal(ev->syscall, SHLIB_SYS_EXEC);
	assert_int_equal(ev->ino, st.st_ino);
	assert_int_equal(ev->ctime_sec, st.st_ctim.tv_sec);
	assert_int_equal(ev->ctime_nsec, st.st_ctim.tv_nsec);
	assert_string_equal(ev->path, "/opt/tool");

	skip_self(&st, 0, 0);
	assert_int_equal(play_exec(), 0);
	assert_int_equal(counter(SHLIB_CNT_MATCHED), 1); /* the first exec only */

	skip_self(&st, -1, 0);
	assert_int_equal(play_exec(), 1);
	skip_self(&st, 0, st.st_ctim.tv_nsec ? -1 : 1);
	assert_int_equal(play_exec(), 1);
	assert_int_equal(counter(SHLIB_CNT_MATCHED), 3);
	assert_int_equal(counter(SHLIB_CNT_EMITTED), 3);
	key = file_key(&st);
	assert_int_equal(bpf_map_delete_elem(bpf_map__fd(skel->maps.shlib_exe_skip), &key), 0);
}

int main(void)
{
	size_t ncases = sizeof(path_cases) / sizeof(path_cases[0]), i;
	const struct CMUnitTest fixed[] = {
		cmocka_unit_test_setup(test_failed_open_emits_nothing, case_setup),
		cmocka_unit_test_setup(test_closed_fd_ignored, case_setup),
		cmocka_unit_test_setup(test_write_open_ignored, case_setup),
		cmocka_unit_test_setup(test_o_path_open_ignored, case_setup),
		cmocka_unit_test_setup(test_disabled_libset_ignored, case_setup),
		cmocka_unit_test_setup(test_syscall_recorded, case_setup),
		cmocka_unit_test_setup(test_symlinks, case_setup),
		cmocka_unit_test_setup(test_dirfd_recorded, case_setup),
		cmocka_unit_test_setup(test_btrfs_subvolume_dev, case_setup),
		cmocka_unit_test_setup(test_self_ignored, case_setup),
		cmocka_unit_test_setup(test_unreadable_pointer, case_setup),
		cmocka_unit_test_setup(test_scratch_held, case_setup),
		cmocka_unit_test_setup(test_exec_skip_needs_same_ctime, case_setup),
		cmocka_unit_test_setup(test_sock_ipv4, sock_setup),
		cmocka_unit_test_setup(test_sock_ipv6, sock_setup),
		cmocka_unit_test_setup(test_sock_netns, sock_setup),
		cmocka_unit_test_setup(test_sock_ignored, sock_setup),
		cmocka_unit_test_setup(test_sock_fd_history, sock_setup),
		cmocka_unit_test_setup(test_sock_fd_reused, sock_setup),
	};
	size_t nfixed = sizeof(fixed) / sizeof(fixed[0]);
	struct CMUnitTest *tests = calloc(ncases + nfixed, sizeof(*tests));
	int ret;

	bpftel_test_require_bpf();
	prctl(PR_SET_NAME, TEST_COMM);
	for (i = 0; i < ncases; i++) {
		tests[i].name = path_cases[i].name;
		tests[i].test_func = test_path_case;
		tests[i].setup_func = case_setup;
		tests[i].initial_state = (void *)&path_cases[i];
	}
	memcpy(tests + ncases, fixed, sizeof(fixed));
	ret = _cmocka_run_group_tests("shared_libraries", tests, ncases + nfixed, group_setup,
				      group_teardown);
	free(tests);
	return ret;
}
