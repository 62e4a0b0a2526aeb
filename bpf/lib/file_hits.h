/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Calls per library file (bpf/uprobe_hits.h): the registry's uprobe programs count
 * each call in the slot their cookie names, then do what its low half says. An array
 * lookup and an atomic add: a few ns against the ~10 us trap that brought us here.
 */
#ifndef BPFTEL_LIB_FILE_HITS_H
#define BPFTEL_LIB_FILE_HITS_H

#include "uprobe_hits.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, UPROBE_HITS_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} uprobe_hits SEC(".maps");

/* Count this call for its file; returns what the program is to do (the low half). */
static __always_inline __u64 uprobe_file_hit(__u64 cookie)
{
	__u32 slot = cookie >> 32;
	__u64 *n;

	if (slot) {
		n = bpf_map_lookup_elem(&uprobe_hits, &slot);
		if (n)
			__sync_fetch_and_add(n, 1);
	}
	return (__u32)cookie;
}

#endif /* BPFTEL_LIB_FILE_HITS_H */
