// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * open_loop: open+close a file N times, or for SECONDS, and print the mean ns per
 * iteration. The workload of tools/bench/bench_open.py and bench.py's open_loop: a
 * duration spans whole duty cycles of sampled run stats, which a fixed count would not.
 *
 *   open_loop [N] [PATH]            (default 100000 /etc/hostname)
 *   open_loop -d SECONDS [PATH]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"

int main(int argc, char **argv)
{
	int timed = argc > 2 && !strcmp(argv[1], "-d");
	long n = timed ? 0 : argc > 1 ? strtol(argv[1], NULL, 10) : 100000, i = 0, k;
	double secs = timed ? strtod(argv[2], NULL) : 0, t0, t1;
	const char *path = argc > 2 + timed ? argv[2 + timed] : "/etc/hostname";
	int fd;

	if ((!timed && n <= 0) || (timed && secs <= 0)) {
		fprintf(stderr, "usage: open_loop [N > 0] [PATH] | open_loop -d SECONDS [PATH]\n");
		return 2;
	}
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		fprintf(stderr, "open_loop: %s: %s\n", path, strerror(errno));
		return 1;
	}
	close(fd);
	t0 = now_ns();
	do {
		/* The clock is read every 1024 iterations: a few ns of ~2 us each. */
		for (k = 0; k < 1024 && (timed || i < n); k++, i++) {
			fd = open(path, O_RDONLY);
			if (fd >= 0)
				close(fd);
		}
		t1 = now_ns();
	} while (timed ? t1 - t0 < secs * 1e9 : i < n);
	printf("%.1f\n", (t1 - t0) / i);
	return 0;
}
