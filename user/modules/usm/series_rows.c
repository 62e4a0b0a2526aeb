// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Endpoint rows -> the series /metrics exports (series_rows.h). Sorted by labels and
 * grouped: n log n, a scrape of a full table stays cheap. */
#include <stdlib.h>
#include <string.h>

#include "series_rows.h"

/* A row and the labels of its series. */
struct labelled_row {
	const struct usm_endpoint_row *row;
	struct usm_series_key key;
};

/* A series being built: its oldest row's seq. */
struct building {
	struct usm_series s;
	uint64_t seq;
	bool overflow; /* beyond the budget: folded into its family's overflow series */
};

/* Orders rows by the labels their series prints, and by nothing else: rows that differ
 * only in what no label shows (a gRPC call's HTTP method or status) are one series. */
static int by_labels(const void *pa, const void *pb)
{
	const struct labelled_row *x = pa, *y = pb;

	return usm_series_key_cmp(&x->key, &y->key);
}

static int by_seq(const void *a, const void *b)
{
	const struct building *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Rows -> series, oldest first, those past budget marked. */
static size_t group(const struct usm_endpoint_row *rows, size_t n, usm_container_fn container,
		    void *ctx, unsigned int budget, struct building *b)
{
	struct labelled_row *lr = calloc(n + 1, sizeof(*lr));
	char ct[USM_CONTAINER_MAX];
	size_t nb = 0, m = 0, i, j;

	if (!lr)
		return 0;
	for (i = 0; i < n; i++) {
		if (rows[i].side == USM_SIDE_UNKNOWN)
			continue;
		lr[m].row = &rows[i];
		if (!container || !container(rows[i].pid, ct, ctx))
			ct[0] = '\0';
		usm_series_key_of_row(&lr[m].key, &rows[i], ct);
		m++;
	}
	qsort(lr, m, sizeof(*lr), by_labels);
	for (i = 0; i < m; i++) {
		if (!i || by_labels(&lr[i - 1], &lr[i])) {
			j = nb++;
			memset(&b[j], 0, sizeof(b[j]));
			b[j].s.key = lr[i].key;
			b[j].seq = lr[i].row->seq;
		}
		j = nb - 1;
		if (lr[i].row->seq < b[j].seq)
			b[j].seq = lr[i].row->seq;
		usm_series_add_hist(&b[j].s, &lr[i].row->latency);
	}
	free(lr);
	qsort(b, nb, sizeof(*b), by_seq);
	for (j = budget; j < nb; j++)
		b[j].overflow = true;
	return nb;
}

size_t usm_series_from_rows(const struct usm_endpoint_row *rows, size_t n,
			    usm_container_fn container, void *ctx, unsigned int budget,
			    struct usm_series **out, uint64_t *budget_overflow)
{
	struct usm_series over[USM_FAM__COUNT];
	struct building *b = calloc(n + 1, sizeof(*b));
	size_t nb, ns = 0, nin, i;
	uint32_t f;

	*out = NULL;
	*budget_overflow = 0;
	if (!b)
		return 0;
	*out = calloc(n + USM_FAM__COUNT, sizeof(**out));
	if (!*out) {
		free(b);
		return 0;
	}
	memset(over, 0, sizeof(over));
	for (f = 0; f < USM_FAM__COUNT; f++)
		usm_series_key_overflow(&over[f].key, f);
	nb = group(rows, n, container, ctx, budget, b);
	for (i = 0; i < nb; i++) {
		if (!b[i].overflow) {
			(*out)[ns++] = b[i].s;
			continue;
		}
		usm_series_merge(&over[b[i].s.key.family], &b[i].s);
		*budget_overflow += b[i].s.count;
	}
	/* An overflow series with the labels of a series in the budget (a process's
	 * overflow row, the table's) is that series: written once, holding both. */
	nin = ns;
	for (f = 0; f < USM_FAM__COUNT; f++) {
		if (!over[f].count)
			continue;
		for (i = 0; i < nin && usm_series_key_cmp(&(*out)[i].key, &over[f].key); i++)
			;
		if (i < nin)
			usm_series_merge(&(*out)[i], &over[f]);
		else
			(*out)[ns++] = over[f];
	}
	free(b);
	return ns;
}
