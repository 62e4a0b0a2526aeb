/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Latency histogram with log-linear buckets: 4 linear buckets per power of two from
 * 1.024 us to ~1100 s, one below and one above. Every histogram has the same bounds,
 * so they merge by adding counts; the relative error of a quantile is at most 25 %.
 */
#ifndef BPFTEL_USM_HISTOGRAM_H
#define BPFTEL_USM_HISTOGRAM_H

#include <stdint.h>

#define USM_HIST_SUB	 4  /* linear buckets per power of two */
#define USM_HIST_MIN_LOG 10 /* 2^10 ns */
#define USM_HIST_MAX_LOG 40 /* 2^40 ns */
#define USM_HIST_BUCKETS (2 + (USM_HIST_MAX_LOG - USM_HIST_MIN_LOG) * USM_HIST_SUB)

struct usm_hist {
	uint64_t count;
	uint64_t sum_ns;
	uint64_t buckets[USM_HIST_BUCKETS];
};

void usm_hist_add(struct usm_hist *h, uint64_t ns);
void usm_hist_merge(struct usm_hist *into, const struct usm_hist *from);
/* Bucket i holds values <= its upper bound (ns); the last one's is UINT64_MAX. */
uint64_t usm_hist_upper_ns(int bucket);
/* Upper bound of the bucket holding quantile q (0..1); 0 when empty. */
uint64_t usm_hist_quantile_ns(const struct usm_hist *h, double q);

#endif /* BPFTEL_USM_HISTOGRAM_H */
