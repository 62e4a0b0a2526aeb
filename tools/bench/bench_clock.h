/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The C benches' clock and the median of their replicates. */
#ifndef BPFTEL_BENCH_CLOCK_H
#define BPFTEL_BENCH_CLOCK_H

#include <stdlib.h>
#include <time.h>

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

#endif /* BPFTEL_BENCH_CLOCK_H */
