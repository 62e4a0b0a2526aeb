// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The USM module's BPF object: the maps both sides share, then the TLS uprobes
 * (usm_tls.bpf.c) and the plaintext socket filter (usm_http_socket.bpf.c).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>
#include "usm.h"
#include "lib/usm_classify.h"
#include "telemetry/telemetry.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 512 * 1024);
} usm_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, USM_CNT__COUNT);
	__type(key, __u32);
	__type(value, __u64);
} usm_counters SEC(".maps");

TLM_MAP_KEY(usm_events);

static __always_inline void usm_count(enum usm_counter counter)
{
	__u32 key = counter;
	__u64 *val;

	val = bpf_map_lookup_elem(&usm_counters, &key);
	if (val)
		*val += 1;
}

#include "usm_tls.bpf.c"
#include "usm_http_socket.bpf.c"
