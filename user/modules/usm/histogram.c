// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "histogram.h"

static int bucket_of(uint64_t ns)
{
	int log;

	if (ns <= (1ull << USM_HIST_MIN_LOG))
		return 0;
	log = 63 - __builtin_clzll(ns - 1); /* (ns - 1) so that bounds are inclusive */
	if (log >= USM_HIST_MAX_LOG)
		return USM_HIST_BUCKETS - 1;
	return 1 + (log - USM_HIST_MIN_LOG) * USM_HIST_SUB +
	       (int)(((ns - 1) >> (log - 2)) & (USM_HIST_SUB - 1));
}

uint64_t usm_hist_upper_ns(int bucket)
{
	int log, sub;

	if (bucket <= 0)
		return 1ull << USM_HIST_MIN_LOG;
	if (bucket >= USM_HIST_BUCKETS - 1)
		return UINT64_MAX;
	log = USM_HIST_MIN_LOG + (bucket - 1) / USM_HIST_SUB;
	sub = (bucket - 1) % USM_HIST_SUB;
	return (uint64_t)(USM_HIST_SUB + sub + 1) << (log - 2);
}

void usm_hist_add(struct usm_hist *h, uint64_t ns)
{
	h->count++;
	h->sum_ns += ns;
	h->buckets[bucket_of(ns)]++;
}

void usm_hist_merge(struct usm_hist *into, const struct usm_hist *from)
{
	int i;

	into->count += from->count;
	into->sum_ns += from->sum_ns;
	for (i = 0; i < USM_HIST_BUCKETS; i++)
		into->buckets[i] += from->buckets[i];
}

uint64_t usm_hist_quantile_ns(const struct usm_hist *h, double q)
{
	uint64_t want, seen = 0;
	int i;

	if (!h->count)
		return 0;
	want = (uint64_t)(q * (double)h->count + 0.999999);
	if (want < 1)
		want = 1;
	for (i = 0; i < USM_HIST_BUCKETS; i++) {
		seen += h->buckets[i];
		if (seen >= want)
			return usm_hist_upper_ns(i);
	}
	return usm_hist_upper_ns(USM_HIST_BUCKETS - 1);
}
