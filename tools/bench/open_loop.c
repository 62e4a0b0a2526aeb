// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * open_loop: open+close a file N times and print the mean ns per iteration. The
 * workload of tools/bench/bench_open.py.
 *
 *   open_loop [N] [PATH]      (default 100000 /etc/hostname)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100000, i;
	const char *path = argc > 2 ? argv[2] : "/etc/hostname";
	struct timespec a, b;
	int fd;

	if (n <= 0) {
		fprintf(stderr, "usage: open_loop [N > 0] [PATH]\n");
		return 2;
	}
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		fprintf(stderr, "open_loop: %s: %s\n", path, strerror(errno));
		return 1;
	}
	close(fd);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < n; i++) {
		fd = open(path, O_RDONLY);
		if (fd >= 0)
			close(fd);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
	return 0;
}
