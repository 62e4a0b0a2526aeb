/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* What the C benches share: their clock, the median of their replicates, and the
 * options of those that take -n lookups, -r replicates and -m extra mappings. */
#ifndef BPFTEL_BENCH_COMMON_H
#define BPFTEL_BENCH_COMMON_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static inline double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Sorts v. */
static inline double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* -n N -r R -m M into *n, *reps, *extra (left as they are when not given); false on
 * an unknown option or a value out of range (reps: 1..max_reps), after the usage. */
static inline bool bench_opts(int argc, char **argv, int *n, int *reps, int max_reps, long *extra)
{
	int opt;

	while ((opt = getopt(argc, argv, "n:r:m:")) != -1) {
		if (opt == 'n')
			*n = atoi(optarg);
		else if (opt == 'r')
			*reps = atoi(optarg);
		else if (opt == 'm')
			*extra = atol(optarg);
		else
			break;
	}
	if (opt != -1 || *n < 1 || *reps < 1 || *reps > max_reps || *extra < 0) {
		fprintf(stderr, "usage: %s [-n lookups] [-r replicates] [-m extra mappings]\n",
			argv[0]);
		return false;
	}
	return true;
}

#endif /* BPFTEL_BENCH_COMMON_H */
