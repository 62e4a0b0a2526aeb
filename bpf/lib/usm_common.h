/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The USM module's BPF code shared by its TLS probes (lib/usm_tls.h) and its socket
 * filter (lib/usm_socket.h): the ring buffer, the counters, and one way to reserve and
 * submit a record. Included by bpf/usm.bpf.c and by the BPF_PROG_TEST_RUN harness
 * (tests/bpf/progs/usm_harness.bpf.c), after vmlinux.h, the libbpf headers, usm.h,
 * lib/usm_classify.h and telemetry/telemetry.bpf.h.
 */
#ifndef BPFTEL_LIB_USM_COMMON_H
#define BPFTEL_LIB_USM_COMMON_H

#include "bpf/fair_share_defs.h"

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

/*
 * How many entries of each table it shares out (enum usm_share_table, lib/fair_share.h)
 * a user but root may hold: a quarter by default. Userspace sets them from
 * user_share_percent before load, and again as the configuration changes (SIGHUP):
 * read where an entry is made, so a change applies to the next one. 0: no bound.
 */
__s64 usm_share_cap[USM_SHARE__COUNT] = {
	[USM_SHARE_H2_CONNS] = USM_H2_CONNS_MAX / FAIR_SHARE_DIV,
	[USM_SHARE_TLS_FDS] = USM_TLS_FDS_MAX / FAIR_SHARE_DIV,
	[USM_SHARE_TLS_RETRY] = USM_TLS_RETRY_MAX / FAIR_SHARE_DIV,
	[USM_SHARE_GO_READS] = USM_GO_READS_MAX / FAIR_SHARE_DIV,
};

/* What one record takes in the ring buffer: its 8-byte header and the event, rounded
 * up to 8. */
#define USM_RECORD_BYTES ((8 + sizeof(struct usm_event) + 7) / 8 * 8)

/*
 * Wake the consumer when the ring buffer's unread data crosses this much: TLS-heavy
 * traffic can produce a record per call, and a wake-up per record would cost the
 * traced processes' CPUs more than the probes do. Only the record that crosses the
 * threshold wakes it: while the consumer drains, the records after it do not queue
 * wake-ups of their own (each one forced cost ~200 ns per TLS call in the write loop,
 * BENCHMARKS.md). A crossing missed in a race is caught by the consumer's own poll
 * every BPFTEL_EVENTS_POLL_MS (50 ms); at this threshold a full buffer is still 7/8
 * away.
 */
#define USM_WAKEUP_BYTES (64 * 1024)

/* For a record already reserved (counted in the unread data): its submit's flags. */
static __always_inline __u64 usm_submit_flags(void)
{
	__u64 avail = tlm_ringbuf_query(usm_events, BPF_RB_AVAIL_DATA);

	return avail >= USM_WAKEUP_BYTES && avail < USM_WAKEUP_BYTES + USM_RECORD_BYTES
		       ? BPF_RB_FORCE_WAKEUP
		       : BPF_RB_NO_WAKEUP;
}

static __always_inline void usm_count(enum usm_counter counter)
{
	__u32 key = counter;
	__u64 *val;

	val = bpf_map_lookup_elem(&usm_counters, &key);
	if (val) /* atomic: a program that interrupts this one on its CPU counts too */
		__sync_fetch_and_add(val, 1);
}

/* A record for a message start, or NULL: ring buffer full, counted. */
static __always_inline struct usm_event *usm_event_reserve(TLM_PARAM)
{
	struct usm_event *ev = tlm_ringbuf_reserve(usm_events, sizeof(*ev), 0);

	if (!ev)
		usm_count(USM_CNT_LOST);
	return ev;
}

/*
 * Give back a record reserved for nothing (its bytes could not be read), without
 * waking the consumer: with no flag the kernel wakes it whenever it has caught up,
 * for a record it will skip. A process whose buffers start like HTTP and run into an
 * unmapped page would have cost the agent a wake-up per TLS call, and its own call
 * ~6.8 us instead of ~0.2 (the write loop, every call discarded, BENCHMARKS.md).
 */
static __always_inline void usm_event_discard(struct usm_event *ev)
{
	tlm_ringbuf_discard(ev, BPF_RB_NO_WAKEUP);
}

/* Fill what both sides set alike, submit, and count the record under `sent`. The
 * caller has filled the prefix and the connection fields. */
static __always_inline void usm_event_submit(struct usm_event *ev, __u64 ktime_ns, int kind,
					     __u64 len, __u32 prefix_len, enum usm_counter sent)
{
	ev->ktime_ns = ktime_ns;
	ev->kind = kind;
	ev->len = len > 0xffffffff ? 0xffffffff : len;
	ev->prefix_len = prefix_len;
	ev->__pad2 = 0;
	tlm_ringbuf_submit(ev, usm_submit_flags());
	usm_count(sent);
}

#endif /* BPFTEL_LIB_USM_COMMON_H */
