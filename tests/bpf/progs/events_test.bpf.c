// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * An event source for the pipeline's test: a ring buffer and a SEC("syscall") program
 * that writes `count` 64-byte records into it, numbered from 0, tagged with `source`.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define EVENTS_TEST_MAX 4096

#include "events_test.h"

/* outputs */
__u64 emit_failed = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1024 * 1024);
} events_test_rb SEC(".maps");

SEC("syscall")
int events_test_emit(struct events_test_args *args)
{
	struct events_test_record rec = {};
	__u32 i, count = args->count, n = 0;

	rec.source = args->source;
	for (i = 0; i < EVENTS_TEST_MAX && i < count; i++) {
		rec.seq = i;
		rec.payload[0] = (__u8)i;
		if (bpf_ringbuf_output(&events_test_rb, &rec, sizeof(rec), args->flags))
			__sync_fetch_and_add(&emit_failed, 1);
		else
			n++;
	}
	return n;
}
