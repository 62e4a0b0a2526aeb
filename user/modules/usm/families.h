/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * USM's Prometheus families: the HTTP and gRPC duration histograms of each side
 * (OpenTelemetry's HTTP and RPC conventions), one series per usm_series_key, and
 * bpftel_http_overflow_requests_total. Writes what it is given: which series there are
 * and what they counted is the caller's (the budget, the overflow series).
 */
#ifndef BPFTEL_USM_FAMILIES_H
#define BPFTEL_USM_FAMILIES_H

#include <linux/types.h>

#include "series_key.h"

struct bpftel_prom;

/* Latency bounds exported (seconds): OpenTelemetry's default for HTTP durations. */
#define USM_NLE 14
extern const double usm_http_le[USM_NLE];

/* One exported series: its labels and what it counted. */
struct usm_series {
	struct usm_series_key key;
	__u64 le[USM_NLE + 1]; /* observations per bound, not cumulative; then +Inf (prom.h's) */
	uint64_t count;
	uint64_t sum_ns;
};

/* One response of ns: in the first bucket whose bound holds it (le: at most). */
void usm_series_observe(struct usm_series *s, uint64_t ns);

/* Requests counted in an overflow series or row, by reason. */
struct usm_overflow_counts {
	uint64_t series_budget, process_rows, table_full;
};

/* The four histogram families, each with its series of ser[0..n) in their order (keys
 * distinct), container_id labels when containers; then the overflow counter. */
void usm_families_write(struct bpftel_prom *w, const struct usm_series *ser, size_t n,
			bool containers, const struct usm_overflow_counts *over);

#endif /* BPFTEL_USM_FAMILIES_H */
