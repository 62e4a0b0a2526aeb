// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* What /proc says of another process (proc.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <linux/nsfs.h>

#include "proc.h"

void bpftel_proc_comm(__u32 pid, char *comm, size_t size)
{
	char path[64];
	size_t n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	f = fopen(path, "re");
	/* Whole: a name may hold a newline of its own; the kernel adds one at its end. */
	if (f && size > 1)
		n = fread(comm, 1, size - 1, f);
	if (f)
		fclose(f);
	if (!n) {
		snprintf(comm, size, "?");
		return;
	}
	comm[n] = '\0';
	if (comm[n - 1] == '\n')
		comm[n - 1] = '\0';
}

int bpftel_proc_stat_parse(const char *text, int field, int n, unsigned long long *out)
{
	const char *p = strrchr(text, ')'); /* the name may hold ')' itself */
	int i, got = 0;

	if (field < 3 || n < 1)
		return 0;
	for (i = 2; p && i < field; i++) /* field 3 follows the name's ") " */
		p = strchr(p + 1, ' ');
	while (p && got < n && sscanf(p + 1, "%llu", &out[got]) == 1) {
		got++;
		p = strchr(p + 1, ' ');
	}
	return got == n ? n : 0;
}

ssize_t bpftel_proc_stat_text(int procfd, __u32 pid, char *buf, size_t size)
{
	char path[64];
	ssize_t len;
	int fd, err;

	snprintf(path, sizeof(path), procfd == AT_FDCWD ? "/proc/%u/stat" : "%u/stat", pid);
	fd = openat(procfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	/* Read whole, not by line: the name is the process's own, and may hold a newline
	 * (prctl(PR_SET_NAME), an executable's name) or ')'. */
	len = read(fd, buf, size - 1);
	err = errno;
	close(fd);
	if (len < 0)
		return -err;
	buf[len] = '\0';
	return len;
}

int bpftel_proc_stat(__u32 pid, int field, int n, unsigned long long *out)
{
	char buf[1024]; /* the fields asked for are within it: a 16-byte name and numbers */

	if (bpftel_proc_stat_text(AT_FDCWD, pid, buf, sizeof(buf)) <= 0)
		return 0;
	return bpftel_proc_stat_parse(buf, field, n, out);
}

__u64 bpftel_proc_start(__u32 pid)
{
	unsigned long long st;

	return bpftel_proc_stat(pid, 22, 1, &st) ? st : 0;
}

__u64 bpftel_proc_ticks_now(void)
{
	long hz = sysconf(_SC_CLK_TCK);
	struct timespec boot;

	if (hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &boot))
		return 0;
	return ((__u64)boot.tv_sec * 1000000000ull + (__u64)boot.tv_nsec) /
	       (1000000000ull / (__u64)hz);
}

__u64 bpftel_proc_start_mono_ns(__u64 start)
{
	long hz = sysconf(_SC_CLK_TCK);
	struct timespec mono, boot;
	__u64 born, gap;

	if (!start || hz <= 0 || clock_gettime(CLOCK_MONOTONIC, &mono) ||
	    clock_gettime(CLOCK_BOOTTIME, &boot))
		return 0;
	born = start * (1000000000ull / (__u64)hz);
	gap = ((__u64)boot.tv_sec - (__u64)mono.tv_sec) * 1000000000ull +
	      (__u64)boot.tv_nsec - (__u64)mono.tv_nsec;
	return born > gap ? born - gap : 0;
}

int bpftel_proc_uid(__u32 pid, __u32 *uid)
{
	char path[64], line[256];
	unsigned int u;
	int err = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	/* The name comes first and is the process's own, but a line of status holds it
	 * escaped, and "Uid:" lines come only from the kernel. */
	while (err && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Uid:", 4))
			err = sscanf(line + 4, "%u", &u) == 1 ? 0 : -EINVAL;
	}
	fclose(f);
	if (!err)
		*uid = u;
	return err;
}

/* User namespaces nest 32 deep at most. */
#define USERNS_DEPTH_MAX 33

static bool same_ns(int fd, const struct stat *ns)
{
	struct stat st;

	return !fstat(fd, &st) && st.st_ino == ns->st_ino && st.st_dev == ns->st_dev;
}

/* This process's user namespace: it never changes (the agent does not unshare it). */
static struct stat self_ns;
static int self_ns_err;
static pthread_once_t self_ns_once = PTHREAD_ONCE_INIT;

static void self_ns_init(void)
{
	self_ns_err = stat("/proc/self/ns/user", &self_ns) ? -errno : 0;
}

int bpftel_proc_owner(__u32 pid, __u64 *owner)
{
	struct stat st;
	int fd, parent, depth, err = -ELOOP;
	char path[64];
	uid_t uid;
	__u32 real;

	pthread_once(&self_ns_once, self_ns_init);
	if (self_ns_err)
		goto real_uid; /* no user namespaces */
	snprintf(path, sizeof(path), "/proc/%u/ns/user", pid);
	/* Most processes share ours: a stat tells, without an fd. */
	if (stat(path, &st))
		return -errno;
	if (st.st_ino == self_ns.st_ino && st.st_dev == self_ns.st_dev)
		goto real_uid;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Up to the namespace whose parent is ours: its creator is the owner. */
	for (depth = 0; depth < USERNS_DEPTH_MAX; depth++) {
		parent = ioctl(fd, NS_GET_PARENT);
		if (parent < 0) {
			/* EPERM: not below ours (the agent in a container of its own): the
			 * process's uid as ours maps it. */
			err = errno == EPERM ? 1 : -errno;
			break;
		}
		if (same_ns(parent, &self_ns)) {
			close(parent);
			err = ioctl(fd, NS_GET_OWNER_UID, &uid) || fstat(fd, &st) ? -errno : 0;
			break;
		}
		close(fd);
		fd = parent;
	}
	close(fd);
	if (err == 1)
		goto real_uid;
	if (!err)
		*owner = uid ? (__u64)uid : BPFTEL_PROC_OWNER_NS | (st.st_ino & 0xffffffffULL);
	return err;
real_uid:
	/* /proc/<pid> is owned by the process's effective uid, a stat away (status is
	 * ~20 us to generate): one a user cannot take but by running another user's
	 * setuid program, whose code is not theirs. Root's, and a process's that made
	 * itself non-dumpable (which any can: its /proc/<pid> is root's then): the real
	 * uid from status. */
	snprintf(path, sizeof(path), "/proc/%u", pid);
	if (stat(path, &st))
		return -errno;
	if (st.st_uid) {
		*owner = st.st_uid;
		return 0;
	}
	err = bpftel_proc_uid(pid, &real);
	if (!err)
		*owner = real;
	return err;
}
