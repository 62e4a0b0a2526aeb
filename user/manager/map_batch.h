/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A map's entries read in batches (BPF_MAP_LOOKUP_BATCH). The kernel's cursor in a hash
 * map is a bucket, not a key: an entry deleted meanwhile, by a program or by the
 * caller, never starts the walk over, as bpf_map_get_next_key's walk does when the key
 * it stands on goes. Another process's churn (a free and an allocation of the same
 * pointer, in a loop) can keep such a walk from ever reaching the end; it cannot keep
 * this one from it. One syscall per batch, values included, where the key walk took two
 * per entry.
 */
#ifndef BPFTEL_MANAGER_MAP_BATCH_H
#define BPFTEL_MANAGER_MAP_BATCH_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

/* The largest key (and array cursor) walked. */
#define BPFTEL_MAP_BATCH_KEY_MAX 64

/*
 * visit(ctx, key, value) for each entry of the hash, LRU hash or array map fd (keys of
 * key_size bytes, values of value_size); visit returns nonzero to stop. 0 at the map's
 * end or when visit stopped; -errno when a batch could not be read. An error that
 * bpftel_map_batch_unsupported() names came of the first batch, nothing visited: the
 * kernel has no batch operations for this map (the caller walks its keys instead).
 */
int bpftel_map_batch_walk(int fd, size_t key_size, size_t value_size,
			  int (*visit)(void *ctx, const void *key, const void *value), void *ctx);

/* Before 5.6 the command is unknown (EINVAL); a map type without them, ENOTSUPP (524). */
static inline bool bpftel_map_batch_unsupported(int err)
{
	return err == -EINVAL || err == -EOPNOTSUPP || err == -524;
}

#endif /* BPFTEL_MANAGER_MAP_BATCH_H */
