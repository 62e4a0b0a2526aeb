// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "retired.h"

/* The index of key, or where it would go (its first greater entry). */
static size_t lower_bound(const struct bpftel_retired *r, const void *key, bool *found)
{
	size_t lo = 0, hi = r->n, mid;
	int c;

	*found = false;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		c = memcmp(r->e[mid].key, key, BPFTEL_RETIRED_KEY);
		if (!c) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

long bpftel_retired_find(const struct bpftel_retired *r, const void *key)
{
	bool found;
	size_t i = lower_bound(r, key, &found);

	return found ? (long)i : -1;
}

/* Room for one more entry: 0, -ENOSPC or -ENOMEM. */
static int grow(struct bpftel_retired *r)
{
	struct bpftel_retired_entry *grown;
	size_t cap;

	if (r->n < r->cap)
		return 0;
	if (r->n == BPFTEL_RETIRED_MAX)
		return -ENOSPC;
	cap = r->cap ? r->cap * 2 : 64;
	if (cap > BPFTEL_RETIRED_MAX)
		cap = BPFTEL_RETIRED_MAX;
	grown = realloc(r->e, cap * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	r->e = grown;
	r->cap = cap;
	return 0;
}

int bpftel_retired_room(struct bpftel_retired *r, const void *key)
{
	return bpftel_retired_find(r, key) >= 0 ? 0 : grow(r);
}

int bpftel_retired_add(struct bpftel_retired *r, const void *key, __u64 count)
{
	bool found;
	size_t i = lower_bound(r, key, &found);
	int err;

	if (found) {
		r->e[i].count += count;
		return 0;
	}
	err = grow(r);
	if (err)
		return err;
	memmove(&r->e[i + 1], &r->e[i], (r->n - i) * sizeof(*r->e));
	memcpy(r->e[i].key, key, BPFTEL_RETIRED_KEY);
	r->e[i].count = count;
	r->n++;
	return 0;
}

void bpftel_retired_free(struct bpftel_retired *r)
{
	free(r->e);
	r->e = NULL;
	r->n = r->cap = 0;
}
