// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What asking the kernel what a mapping is of costs (user/sharedlibs/real_file.c, a
 * task_vma iterator): its load, once per agent (the uprobe registry holds it), and one
 * lookup, once per new library file, side by side with the floor, stat of the mapping
 * through /proc/self/map_files (what the registry did before, and still does where the
 * iterator cannot load). The lookup walks this process's mappings: with the extra
 * mappings given (-m), as many more as a busy agent might hold. ns per lookup, the
 * median of the replicates, the two interleaved.
 *
 *   build/tests/bench_real_file [-n lookups] [-r replicates] [-m extra mappings]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "user/sharedlibs/real_file.h"

#define LIB "/lib/x86_64-linux-gnu/libssl.so.3"

int main(int argc, char **argv)
{
	int n = 2000, reps = 7, fd, r;
	long extra = 0, i;
	double iter[64], stat_ns[64], t0, load_ms;
	struct bpftel_real_file rf;
	char path[96];
	struct stat st;
	void *p;

	if (!bench_opts(argc, argv, &n, &reps, 64, &extra))
		return 2;
	fd = open(LIB, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		perror(LIB);
		return 1;
	}
	/* Mappings of one page each, at offset 0: none merge with another. */
	for (i = 0; i < extra; i++) {
		if (mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0) == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
	}
	p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", (unsigned long)p,
		 (unsigned long)p + 4096);
	t0 = now_ns();
	if (bpftel_real_files_get()) {
		fprintf(stderr, "bench_real_file: the iterator did not load (root? BTF?)\n");
		return 1;
	}
	load_ms = (now_ns() - t0) / 1e6;
	for (r = 0; r < reps; r++) {
		t0 = now_ns();
		for (i = 0; i < n; i++) {
			if (stat(path, &st))
				return 1;
		}
		stat_ns[r] = (now_ns() - t0) / n;
		t0 = now_ns();
		for (i = 0; i < n; i++) {
			if (bpftel_real_file_at((unsigned long)p, &rf))
				return 1;
		}
		iter[r] = (now_ns() - t0) / n;
	}
	printf("real_file: %d lookups x %d replicates, %ld extra mappings; iterator load %.1f ms\n",
	       n, reps, extra, load_ms);
	printf("stat of map_files (floor)  %9.0f ns/lookup\n", median(stat_ns, reps));
	printf("task_vma iterator          %9.0f ns/lookup\n", median(iter, reps));
	bpftel_real_files_put();
	return 0;
}
