/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The series USM exports on /metrics, kept cumulative: each paired response is added to
 * its series (series_key.h) as it pairs, so that no bucket, _count or _sum of a series
 * goes down while the series exists, whatever becomes of the endpoint rows meanwhile
 * (expiry, folding into "(exited)"): rows are what `bpftel http` shows, series what
 * Prometheus reads, and counters must only grow.
 *
 * Bounded. A new series is admitted while fewer than budget (http_series_max) are, and
 * stays admitted until it expires: expiry_ns without a response (http_row_expiry; 0:
 * never), the whole series at once. A response whose series is not there and cannot be
 * admitted is counted in its family's overflow series, and as series_budget unless its
 * row was an overflow row already (then it is counted under process_rows or table_full:
 * one reason a request, so that the reasons sum to the requests). The overflow series, one
 * a family, need no room in the budget: at most budget + 4 series, budget being the
 * largest set while the oldest series lived (~0.5 KiB a series: 1 MiB at the default
 * 2000, 50 MiB at the 100000 the configuration allows).
 *
 * Turning container labels on or off changes every label set: the series start over.
 * Thread-safe.
 */
#ifndef BPFTEL_USM_SERIES_H
#define BPFTEL_USM_SERIES_H

#include "families.h"

struct usm_series_set;

struct usm_series_set *usm_series_set_new(void);
void usm_series_set_free(struct usm_series_set *s);

/* Apply as they come: a lower budget admits nothing new until fewer series are left. */
void usm_series_set_configure(struct usm_series_set *s, unsigned int budget, bool containers,
			      uint64_t expiry_ns);
bool usm_series_set_containers(struct usm_series_set *s);

/* Count a paired response (sides server and client; others are not exported) in its
 * series. container: its process's container id, NULL or "" for none. */
void usm_series_set_add(struct usm_series_set *s, const struct usm_paired *p,
			const char *container);

/* Remove the series without a response since now_ns - expiry_ns. Returns how many. */
size_t usm_series_set_expire(struct usm_series_set *s, uint64_t now_ns);

/* What /metrics writes: a copy of the series, oldest first (malloc'd, count returned),
 * whether they carry container labels, and the requests counted as series_budget. */
size_t usm_series_set_snapshot(struct usm_series_set *s, struct usm_series **out, bool *containers,
			       uint64_t *series_budget);

#endif /* BPFTEL_USM_SERIES_H */
