// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Endpoint rows -> the series /metrics exports (series_rows.h). Sorted by labels and
 * grouped: n log n, a scrape of a full table stays cheap. */
#include <stdlib.h>
#include <string.h>

#include "series_rows.h"

/* A row with the container its series is labelled with ("" without container labels). */
struct labelled_row {
	const struct usm_endpoint_row *row;
	char container[USM_CONTAINER_MAX];
};

/* A series being built: the first row's labels, its oldest row's seq. */
struct building {
	struct usm_series s;
	uint64_t seq;
	bool overflow; /* beyond the budget: folded into its family's overflow series */
};

/* Orders rows by their series' labels, so that a series' rows are neighbours. */
static int by_labels(const void *pa, const void *pb)
{
	const struct labelled_row *x = pa, *y = pb;
	const struct usm_endpoint_row *a = x->row, *b = y->row;
	int d;

	if (a->side != b->side)
		return a->side < b->side ? -1 : 1;
	if (a->version != b->version)
		return a->version < b->version ? -1 : 1;
	if (a->status != b->status)
		return a->status < b->status ? -1 : 1;
	if (a->grpc != b->grpc)
		return a->grpc ? 1 : -1;
	if (a->grpc_status != b->grpc_status)
		return a->grpc_status < b->grpc_status ? -1 : 1;
	d = strcmp(a->method, b->method);
	if (!d)
		d = strcmp(a->path, b->path);
	return d ? d : strcmp(x->container, y->container);
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
	size_t nb = 0, m = 0, i, j;

	if (!lr)
		return 0;
	for (i = 0; i < n; i++) {
		if (rows[i].side == USM_SIDE_UNKNOWN)
			continue;
		lr[m].row = &rows[i];
		if (container && !container(rows[i].pid, lr[m].container, ctx))
			lr[m].container[0] = '\0';
		m++;
	}
	qsort(lr, m, sizeof(*lr), by_labels);
	for (i = 0; i < m; i++) {
		if (!i || by_labels(&lr[i - 1], &lr[i])) {
			j = nb++;
			memset(&b[j], 0, sizeof(b[j]));
			usm_series_key_of_row(&b[j].s.key, lr[i].row, lr[i].container);
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
	size_t nb, ns = 0, i;
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
	for (f = 0; f < USM_FAM__COUNT; f++) {
		if (over[f].count)
			(*out)[ns++] = over[f];
	}
	free(b);
	return ns;
}
