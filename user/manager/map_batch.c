// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* A map's entries read in batches (map_batch.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>

#include "user/manager/map_batch.h"

/* Entries a batch asks for at first; a bucket holding more (ENOSPC) doubles it. */
#define BATCH_FIRST 256
#define BATCH_MAX   65536

int bpftel_map_batch_walk(int fd, size_t key_size, size_t value_size,
			  int (*visit)(void *ctx, const void *key, const void *value), void *ctx)
{
	/* A hash map's cursor is a bucket's index, an array's a key. */
	unsigned char at[BPFTEL_MAP_BATCH_KEY_MAX] = {0}, next[BPFTEL_MAP_BATCH_KEY_MAX] = {0};
	unsigned char *keys = NULL, *vals = NULL, *k, *v;
	size_t cap = BATCH_FIRST, i;
	bool first = true;
	__u32 count;
	int err, ret = 0;

	if (!key_size || key_size > sizeof(at) || !value_size)
		return -EINVAL;
	keys = malloc(cap * key_size);
	vals = malloc(cap * value_size);
	if (!keys || !vals) {
		ret = -ENOMEM;
		goto out;
	}
	do {
		count = (__u32)cap;
		err = bpf_map_lookup_batch(fd, first ? NULL : at, next, keys, vals, &count, NULL);
		if (err && errno == ENOSPC && !count && cap < BATCH_MAX) {
			/* A bucket larger than the batch: the same cursor, a larger batch. */
			k = realloc(keys, 2 * cap * key_size);
			if (k)
				keys = k;
			v = k ? realloc(vals, 2 * cap * value_size) : NULL;
			if (v)
				vals = v;
			if (!k || !v) {
				ret = -ENOMEM;
				goto out;
			}
			cap *= 2;
			err = 0; /* the loop's test: the same batch again */
			continue;
		}
		if (err && errno != ENOENT) {
			ret = -errno;
			if (!first && bpftel_map_batch_unsupported(ret))
				ret = -EIO; /* not the kernel's lack: some were visited */
			goto out;
		}
		for (i = 0; i < count; i++) {
			if (visit(ctx, keys + i * key_size, vals + i * value_size))
				goto out;
		}
		memcpy(at, next, sizeof(at));
		first = false;
	} while (!err);
out:
	free(keys);
	free(vals);
	return ret;
}
