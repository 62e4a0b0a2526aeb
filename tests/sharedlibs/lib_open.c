// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * lib_open SYSCALL PATH N [unmapped]: open PATH read-only N times through SYSCALL (open,
 * openat or openat2, as raw system calls, so that the watcher's program for that very
 * call sees them), closing each; print "opened N" and exit. openat@DIRFD: openat with
 * that directory fd, any int (the kernel ignores it for an absolute PATH).
 *
 * unmapped: PATH is a FIFO named like a library (the caller makes it). Each open waits
 * in the kernel for a writer while this process unmaps the page holding the path it
 * passed; then the writer comes and the open succeeds. At the syscall's exit the
 * watcher matches the file's name and reads the path from the saved registers: that
 * read fails (EFAULT), every time, with no race (the open waits until we are done).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/openat2.h>
#include <sys/mman.h>
#include <sys/syscall.h>

struct opener {
	long nr;
	const char *path;
	pid_t tid; /* atomic */
	long fd;
	int err;
};

static int dirfd_arg = AT_FDCWD;

static long sys_open(long nr, const char *path)
{
	struct open_how how = {.flags = O_RDONLY};

	if (nr == SYS_openat)
		return syscall(SYS_openat, dirfd_arg, path, O_RDONLY);
	if (nr == SYS_openat2)
		return syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
	return syscall(SYS_open, path, O_RDONLY);
}

static void *opener_main(void *arg)
{
	struct opener *o = arg;

	__atomic_store_n(&o->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	o->fd = sys_open(o->nr, o->path);
	o->err = errno;
	return NULL;
}

/* Is thread tid inside system call nr (blocked there)? */
static int in_syscall(pid_t tid, long nr)
{
	char path[64], buf[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return strtol(buf, NULL, 10) == nr && buf[0] != '-';
}

static void die(const char *what)
{
	fprintf(stderr, "lib_open: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* One open of the FIFO at path whose path string is gone before the open returns. */
static void open_unmapped(long nr, const char *path)
{
	struct timespec ms = {0, 1000000};
	struct opener o = {.nr = nr};
	pthread_t t;
	char *page;
	int tries, wfd;

	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED || strlen(path) >= 4096)
		die("mmap");
	strcpy(page, path);
	o.path = page;
	if (pthread_create(&t, NULL, opener_main, &o))
		die("pthread_create");
	/* The path was copied in at the syscall's entry; the open now waits for a writer. */
	for (tries = 0; !__atomic_load_n(&o.tid, __ATOMIC_ACQUIRE) || !in_syscall(o.tid, nr);
	     tries++) {
		if (tries == 30000)
			die("the open never waited");
		nanosleep(&ms, NULL);
	}
	if (munmap(page, 4096))
		die("munmap");
	wfd = open(path, O_WRONLY | O_NONBLOCK);
	if (wfd < 0)
		die("open for writing");
	pthread_join(t, NULL);
	if (o.fd < 0) {
		errno = o.err;
		die("open");
	}
	close((int)o.fd);
	close(wfd);
}

int main(int argc, char **argv)
{
	long nr, n, i, fd;

	if (argc < 4) {
		fprintf(stderr, "usage: lib_open open|openat|openat@DIRFD|openat2 PATH N [unmapped]\n");
		return 2;
	}
	if (!strncmp(argv[1], "openat@", 7)) {
		dirfd_arg = atoi(argv[1] + 7);
		argv[1] = "openat";
	}
	nr = !strcmp(argv[1], "open")	   ? SYS_open
	     : !strcmp(argv[1], "openat")  ? SYS_openat
	     : !strcmp(argv[1], "openat2") ? SYS_openat2
					   : -1;
	n = atol(argv[3]);
	if (nr < 0 || n <= 0)
		return 2;
	for (i = 0; i < n; i++) {
		if (argc > 4 && !strcmp(argv[4], "unmapped")) {
			open_unmapped(nr, argv[2]);
			continue;
		}
		fd = sys_open(nr, argv[2]);
		if (fd < 0)
			die(argv[2]);
		close((int)fd);
	}
	printf("opened %ld\n", n);
	return 0;
}
