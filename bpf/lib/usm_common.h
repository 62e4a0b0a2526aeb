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
 * Submit without waking the consumer until the ring buffer holds this much: TLS-heavy
 * traffic can produce a record per call, and a wake-up per record would cost the
 * traced processes' CPUs more than the probes do. The consumer also reads the buffer
 * every BPFTEL_EVENTS_POLL_MS (50 ms), so a record waits at most that long; at this
 * threshold a full buffer is still 7/8 away.
 */
#define USM_WAKEUP_BYTES (64 * 1024)

static __always_inline __u64 usm_submit_flags(void)
{
	return tlm_ringbuf_query(usm_events, BPF_RB_AVAIL_DATA) >= USM_WAKEUP_BYTES
		       ? BPF_RB_FORCE_WAKEUP
		       : BPF_RB_NO_WAKEUP;
}

static __always_inline void usm_count(enum usm_counter counter)
{
	__u32 key = counter;
	__u64 *val;

	val = bpf_map_lookup_elem(&usm_counters, &key);
	if (val)
		*val += 1;
}

/* A record for a message start, or NULL: ring buffer full, counted. */
static __always_inline struct usm_event *usm_event_reserve(TLM_PARAM)
{
	struct usm_event *ev = tlm_ringbuf_reserve(usm_events, sizeof(*ev), 0);

	if (!ev)
		usm_count(USM_CNT_LOST);
	return ev;
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
