/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Endpoint rows -> the series /metrics exports: rows of every process with the same
 * labels summed (unknown-side rows aside), at most budget series of their own, the
 * oldest first; the others counted in their family's overflow series.
 */
#ifndef BPFTEL_USM_SERIES_ROWS_H
#define BPFTEL_USM_SERIES_ROWS_H

#include "families.h"

/* A process's container id into buf (USM_CONTAINER_MAX bytes): false when it has none
 * or is not known. */
typedef bool (*usm_container_fn)(uint32_t pid, char *buf, void *ctx);

/* The series of rows[0..n), malloc'd into *out (NULL and 0 when out of memory);
 * container NULL: no container labels. *budget_overflow: the requests of the series past
 * the budget. */
size_t usm_series_from_rows(const struct usm_endpoint_row *rows, size_t n,
			    usm_container_fn container, void *ctx, unsigned int budget,
			    struct usm_series **out, uint64_t *budget_overflow);

#endif /* BPFTEL_USM_SERIES_ROWS_H */
