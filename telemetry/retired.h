/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The error counts a module's stops took out of the telemetry maps, by key: what
 * bpftel_telemetry__errors adds to the live counts, so that a module's error series go
 * on across its restarts (a counter that went back to 0 at each restart would lose what
 * failed between the last scrape and the stop, and read as a reset).
 *
 * A set of fixed-size keys (the maps' own, tlm_map_key or tlm_helper_key: 16 bytes,
 * compared as bytes) with a total each, kept sorted: a lookup is a binary search, an
 * add at a stop an insertion. Bounded: at most BPFTEL_RETIRED_MAX keys.
 */
#ifndef BPFTEL_TELEMETRY_RETIRED_H
#define BPFTEL_TELEMETRY_RETIRED_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

#include "telemetry_defs.h"

#define BPFTEL_RETIRED_KEY 16
#define BPFTEL_RETIRED_MAX TLM_MAX_ENTRIES

struct bpftel_retired_entry {
	unsigned char key[BPFTEL_RETIRED_KEY];
	__u64 count;
};

struct bpftel_retired {
	struct bpftel_retired_entry *e; /* sorted by key */
	size_t n, cap;
};

/* Make sure key can be added: 0 when it is there or there is room for it now, else
 * -ENOSPC (the set holds BPFTEL_RETIRED_MAX keys) or -ENOMEM. After 0, the next
 * bpftel_retired_add() of key cannot fail: a count taken out of a map for it (which
 * cannot be put back) is not lost. */
int bpftel_retired_room(struct bpftel_retired *r, const void *key);

/* Add count to key's total (a new key the first time). 0, or bpftel_retired_room()'s
 * error: nothing added then. */
int bpftel_retired_add(struct bpftel_retired *r, const void *key, __u64 count);

/* key's index in r->e, or -1. */
long bpftel_retired_find(const struct bpftel_retired *r, const void *key);

void bpftel_retired_free(struct bpftel_retired *r);

#endif /* BPFTEL_TELEMETRY_RETIRED_H */
