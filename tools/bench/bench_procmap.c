// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What finding the mapping that holds an address costs (user/common/procmap.c, how the
 * GPU module names a kernel's host function): the kernel's PROCMAP_QUERY against
 * reading /proc/<pid>/maps line by line (what it did before, and still does where the
 * kernel has no such query), side by side, replicates interleaved. A child process
 * maps a file last, after -m extra mappings (alternating protections, so that none
 * merge: as many as a process may hold, vm.max_map_count, 65,530 by default), and the
 * lookups are of an address in that file: the text is read to its end. ns per lookup,
 * the median of the replicates.
 *
 *   build/tests/bench_procmap [-n lookups] [-r replicates] [-m extra mappings]
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "bench_common.h"
#include "user/common/procmap.h"

#define PAGE 4096ul

/* A child with `extra` unmergeable anonymous mappings, then this binary mapped; it
 * writes that mapping's address to the pipe and waits to be killed. */
static pid_t child(long extra, const char *self, uint64_t *addr)
{
	int p[2], fd;
	char *base, *file;
	pid_t pid;
	long i;

	if (pipe(p))
		exit(1);
	pid = fork();
	if (pid == 0) {
		base = mmap(NULL, PAGE * (size_t)(extra ? extra : 1), PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		for (i = 0; base != MAP_FAILED && i < extra; i += 2)
			mprotect(base + PAGE * (size_t)i, PAGE, PROT_READ);
		fd = open(self, O_RDONLY | O_CLOEXEC);
		file = fd < 0 ? MAP_FAILED : mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE, fd, 0);
		*addr = file == MAP_FAILED ? 0 : (uint64_t)(uintptr_t)file + 10;
		if (write(p[1], addr, sizeof(*addr)) != sizeof(*addr))
			_exit(1);
		pause();
		_exit(0);
	}
	close(p[1]);
	if (pid < 0 || read(p[0], addr, sizeof(*addr)) != sizeof(*addr) || !*addr) {
		fprintf(stderr, "bench_procmap: the child did not map its file\n");
		exit(1);
	}
	close(p[0]);
	return pid;
}

static double per_lookup(pid_t pid, uint64_t addr, int n, int text)
{
	struct bpftel_procmap_vma vma;
	double t0 = now_ns();
	int i;

	bpftel_procmap_force_text(text);
	for (i = 0; i < n; i++) {
		if (bpftel_procmap_find((__u32)pid, addr, &vma)) {
			fprintf(stderr, "bench_procmap: lookup failed\n");
			exit(1);
		}
	}
	return (now_ns() - t0) / n;
}

int main(int argc, char **argv)
{
	int n = 200, reps = 7, r, err;
	double q[64], t[64];
	struct bpftel_procmap_vma vma;
	long extra = 0;
	uint64_t addr;
	pid_t pid;

	if (!bench_opts(argc, argv, &n, &reps, 64, &extra))
		return 2;
	pid = child(extra, "/proc/self/exe", &addr);
	bpftel_procmap_force_text(false);
	err = bpftel_procmap_find((__u32)pid, addr, &vma);
	printf("procmap: %d lookups x %d replicates, %ld extra mappings; the query %s\n", n,
	       reps, extra, err ? strerror(-err) : "answers");
	for (r = 0; r < reps; r++) {
		q[r] = per_lookup(pid, addr, n, 0);
		t[r] = per_lookup(pid, addr, n, 1);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	printf("/proc/<pid>/maps read       %10.0f ns/lookup\n", median(t, reps));
	printf("PROCMAP_QUERY               %10.0f ns/lookup\n", median(q, reps));
	return 0;
}
