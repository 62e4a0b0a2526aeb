/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * USM, HTTP/2 over TLS: which TLS sessions carry HTTP/2, and the frame walk that sends
 * their bytes to userspace without their DATA payloads (bpf/usm.h says what a record
 * holds).
 *
 * HPACK is stateful: userspace must see every header block of a direction, in order,
 * so the kernel cannot pick the interesting calls as it does for HTTP/1 (a message
 * start per call): once a session is HTTP/2, every call on it sends a record. What it
 * can drop is what userspace never needs, DATA payloads, so it keeps each direction's
 * place in the frame stream across calls: how much of the current frame is left to
 * skip (DATA) or copy (anything else), and the part of a frame header cut by the end of
 * a call.
 *
 * A session becomes HTTP/2 on a call whose bytes begin with the client's connection
 * preface (a client's first write, a server's first read) or with a SETTINGS frame (a
 * server's first write, a client's first read: servers send theirs without waiting).
 * The state is per (process, session pointer), in an LRU hash: sessions are freed
 * without a probe, and their address is reused. Each user but root holds a quarter of
 * it at most (lib/fair_share.h). So SSL_set_fd and its GnuTLS twin
 * forget it (a session being set up is a new connection), and a preface at a frame
 * boundary restarts it (a client reusing a freed session's address). A session that
 * carried an HTTP/1 message never becomes HTTP/2: a body may begin with those bytes
 * (an upload), and would hide the session's next messages (USM_CNT_H2_START_REFUSED).
 * Its mark goes with the session (SSL_free, gnutls_deinit, Go's Close or a Go read
 * that ends the connection) or a new connection on it (SSL_set_fd); a session reused
 * for a new connection without any of those is refused HTTP/2 (counted as such). So is
 * an HTTP/1.1 connection upgraded to h2 inside TLS, which RFC 9113 forbids.
 *
 * A session whose start was missed (it began before the agent, or before the probes
 * were on its library) cannot be decoded: HPACK needs every header block from the
 * first. Its calls go the HTTP/1 way (and are dropped as no message start); a call
 * that looks like a frame header counts the session once, as joined mid-way.
 *
 * Loss is never silent: each record carries the direction's byte offset before the
 * call, so userspace sees a record lost in the ring buffer as a jump, and feeds it to
 * the decoder as a gap (harmless inside a DATA payload, fatal inside a header block).
 *
 * Include after lib/usm_common.h and lib/usm_tls.h's usm_tls_fds.
 */
#ifndef BPFTEL_LIB_USM_H2_H
#define BPFTEL_LIB_USM_H2_H

#include "fair_share.h"

#define USM_H2_FRAME_HDR 9
#define USM_H2_PREFACE	 24
#define USM_H2_DATA	 0
#define USM_H2_SETTINGS	 4

/* The sessions' state (struct usm_h2_state, bpf/usm.h). Each user but root holds at
 * most a quarter of it by default (lib/fair_share.h, usm_share_cap): a user's flood of
 * prefaces must not evict the others' live sessions. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, USM_H2_CONNS_MAX);
	__type(key, struct usm_fd_key);
	__type(value, struct usm_h2_state);
} usm_h2_conns SEC(".maps");

TLM_MAP_KEY(usm_h2_conns);

/* Sessions already counted as HTTP/2 joined mid-way (USM_CNT_H2_MIDSTREAM): once
 * each. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct usm_fd_key);
	__type(value, __u8);
} usm_h2_midstream SEC(".maps");

TLM_MAP_KEY(usm_h2_midstream);

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 2 * 1024 * 1024);
} usm_h2_events SEC(".maps");

TLM_MAP_KEY(usm_h2_events);

/*
 * The flags for a record of size bytes about to be output: a wake-up when the unread
 * data crosses a multiple of USM_H2_WAKEUP_BYTES, none otherwise (the consumer's own
 * poll reads them within 50 ms). A wake-up per record costs more than the walk: on a
 * VM it is a self-IPI, an APIC write that exits to the hypervisor (~5 % of all CPU
 * under h2load when every record over the threshold woke the consumer, BENCHMARKS.md).
 * Every multiple, not only the first as HTTP/1's usm_submit_flags(): two CPUs can
 * cross one together with neither seeing the crossing, and the next one is then at
 * most USM_H2_WAKEUP_BYTES further, so the consumer never sleeps its 50 ms while the
 * data grows into a burst larger than the pipeline's queue; a session's records are
 * worth more than HTTP/1's (one lost inside a header block ends its decoding).
 */
#define USM_H2_WAKEUP_BYTES (64 * 1024)

static __always_inline __u64 usm_h2_wakeup(__u32 size)
{
	__u64 avail = tlm_ringbuf_query(usm_h2_events, BPF_RB_AVAIL_DATA);

	return (avail + 8 + size) / USM_H2_WAKEUP_BYTES != avail / USM_H2_WAKEUP_BYTES
		       ? BPF_RB_FORCE_WAKEUP
		       : BPF_RB_NO_WAKEUP;
}

/* The record being built and the direction being walked, per CPU: too big for the
 * stack. slack follows rec.data so that a copy of up to USM_H2_CAP bytes from any
 * offset below USM_H2_CAP stays inside the value, as the verifier sees it (its masks
 * allow twice that). */
struct usm_h2_scratch {
	struct usm_h2_dir_state st;
	/* The call's records: kept here, not in the walk's context on the stack, whose
	 * values the verifier follows one by one (8 records made the program's verification
	 * 4 times longer); a map value's it takes as any. */
	__u32 start;   /* pos where the record being built begins */
	__u32 records; /* records of this call sent so far */
	__u32 cut;     /* a record of this call was cut */
	/* A walk is using this slot. A uprobe program runs with migration, not
	 * preemption, disabled: on a preemptible kernel (preempt=full, lazy, RT) another
	 * task's walk can run on this CPU before a preempted one ends, also between a
	 * walk's test of busy and its set: taken with a compare-and-swap (64 bits: the one
	 * the BPF target has), as lib/shlib_probe.h's scratch is. */
	__u64 busy;
	struct usm_h2_record rec;
	__u8 slack[2 * USM_H2_CAP];
};

/* Slots per CPU: a walk preempted by another task's walk on its CPU leaves it the
 * next slot. With one, the walk that preempted lost its direction's framing for good
 * (one user's busy in-memory HTTP/2 loop could so cost another user's server, which
 * preempts it on waking, its session); all held, that is still what happens. */
#define USM_H2_SCRATCH_SLOTS 4

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, USM_H2_SCRATCH_SLOTS);
	__type(key, __u32);
	__type(value, struct usm_h2_scratch);
} usm_h2_scratch SEC(".maps");

static __always_inline struct usm_h2_scratch *usm_h2_scratch_get(__u32 slot)
{
	return bpf_map_lookup_elem(&usm_h2_scratch, &slot);
}

/* A free slot of this CPU's, taken (busy: clear it when done), its index in *slot; NULL
 * when every slot is held by a walk this one preempted. */
static __always_inline struct usm_h2_scratch *usm_h2_scratch_take(__u32 *slot)
{
	struct usm_h2_scratch *s;
	__u32 k;

	for (k = 0; k < USM_H2_SCRATCH_SLOTS; k++) {
		s = usm_h2_scratch_get(k);
		if (s && !__sync_val_compare_and_swap(&s->busy, 0, 1)) {
			*slot = k;
			return s;
		}
	}
	return NULL;
}

/* What bpf_loop's callback needs: scalars only (the scratch is looked up again, in
 * the walk's slot). */
struct usm_h2_walk {
	__u64 buf;
	__u32 len;
	__u32 pos;
	__u32 tlm_prog;
	__u32 slot;
};

/* Send the record in the scratch (data_len <= USM_H2_CAP), counted if lost. */
static __always_inline void usm_h2_output(TLM_PARAM, struct usm_h2_scratch *s)
{
	__u32 size = s->rec.data_len;

	if (size > USM_H2_CAP)
		return;
	usm_count(USM_CNT_H2_RECORDS);
	if (tlm_ringbuf_output(usm_h2_events, &s->rec, USM_H2_RECORD_HDR + size,
			       usm_h2_wakeup(USM_H2_RECORD_HDR + size)))
		usm_count(USM_CNT_H2_LOST);
}

/*
 * The record is full (its copy has no room for a frame header, or its runs are used
 * up) and the call goes on: send it as if the call had ended here, and start the next
 * record where it stops, as the next call would (its offset, no start flags). What a
 * record stands for is walked whole, so the walk's state carries over as between
 * calls. False when the call has no record left: the walk goes on in this one, as far
 * as its cap and runs allow (then cut, or unframed).
 */
/* The sending, a global function: the verifier checks it once, by itself, not again
 * in every caller's walk (inlined in the bpf_loop callback it made the programs'
 * verification 4 times longer: a module's restart ~0.4 s slower). */
__noinline int usm_h2_flush(__u32 __tlm_prog, __u32 slot, __u32 pos)
{
	struct usm_h2_scratch *s = usm_h2_scratch_get(slot);
	__u32 n;

	if (!s)
		return 0;
	n = pos - s->start;
	s->rec.len = n;
	s->rec.walked = n;
	s->cut |= !!(s->rec.flags & USM_H2_F_CUT);
	usm_h2_output(TLM_ARG, s);
	s->rec.offset += n;
	s->rec.flags = 0;
	s->rec.nruns = 0;
	s->rec.data_len = 0;
	s->start = pos;
	s->records++;
	return 1;
}

static __always_inline bool usm_h2_next_record(TLM_PARAM, struct usm_h2_scratch *s,
					       struct usm_h2_walk *w)
{
	if (s->rec.nruns < USM_H2_RUNS && s->rec.data_len + USM_H2_FRAME_HDR <= USM_H2_CAP)
		return true; /* room left */
	if (w->pos == s->start || s->records + 1 >= USM_H2_RECORDS)
		return false;
	return usm_h2_flush(TLM_ARG, w->slot, w->pos);
}

/* The current run, or a new one when want_copy follows skipped bytes; NULL when the
 * runs are used up. */
static __always_inline struct usm_h2_run *usm_h2_run(struct usm_h2_scratch *s, bool want_copy)
{
	__u32 n = s->rec.nruns, last;
	struct usm_h2_run *r;

	if (n > USM_H2_RUNS)
		return NULL;
	if (n) {
		last = n - 1;
		barrier_var(last); /* keeps the bound below on the index the access uses */
		if (last >= USM_H2_RUNS)
			return NULL;
		r = &s->rec.runs[last];
		if (!(want_copy && r->skipped))
			return r;
	}
	if (n >= USM_H2_RUNS)
		return NULL;
	barrier_var(n);
	r = &s->rec.runs[n];
	r->copied = 0;
	r->skipped = 0;
	s->rec.nruns = n + 1;
	return r;
}

static __always_inline int usm_h2_skip(struct usm_h2_scratch *s, __u32 n)
{
	struct usm_h2_run *r = usm_h2_run(s, false);

	if (!r)
		return -1;
	r->skipped += n;
	return 0;
}

/* Copy n bytes into the record, as far as USM_H2_CAP allows; the rest is skipped and
 * the record marked cut. From the process's memory at src, or where the walk already
 * holds them (hdr: a frame header's, n <= 9, read once from the user's memory, not
 * twice: each read is ~60 ns on these VMs, and an h2load read carries ~10 frames).
 * -1: out of runs. */
static __always_inline int usm_h2_copy_from(TLM_PARAM, struct usm_h2_scratch *s, __u64 src,
					    const __u8 *hdr, __u32 n)
{
	__u32 off = s->rec.data_len, c = 0, k;
	struct usm_h2_run *r;
	bool got = true;

	if (off < USM_H2_CAP)
		c = n < USM_H2_CAP - off ? n : USM_H2_CAP - off;
	if (c) {
		r = usm_h2_run(s, true);
		if (!r)
			return -1;
		/* off < USM_H2_CAP and c <= USM_H2_CAP already: the masks, which the
		 * compiler cannot drop past the barriers, are for the verifier. */
		barrier_var(off);
		barrier_var(c);
		off &= USM_H2_CAP - 1;
		c &= 2 * USM_H2_CAP - 1;
		if (hdr) {
			for (k = 0; k < USM_H2_FRAME_HDR && k < c; k++)
				s->rec.data[off + k] = hdr[k];
		} else {
			got = !tlm_probe_read_user(&s->rec.data[off], c, (void *)src);
		}
		if (got) {
			r->copied += c;
			s->rec.data_len = off + c;
		} else {
			/* Not readable: the bytes are lost to userspace, not the framing. */
			s->rec.flags |= USM_H2_F_CUT;
			r->skipped += c;
		}
	}
	if (n > c) {
		s->rec.flags |= USM_H2_F_CUT;
		return usm_h2_skip(s, n - c);
	}
	return 0;
}

static __always_inline int usm_h2_copy(TLM_PARAM, struct usm_h2_scratch *s, __u64 src, __u32 n)
{
	return usm_h2_copy_from(TLM_ARG, s, src, NULL, n);
}

/*
 * One piece of the walk: a DATA payload skipped, another frame's payload copied, or
 * (part of) a frame header read and copied. 1 ends the walk. A global function,
 * verified once per program for any walk: as bpf_loop's callback itself, it was
 * verified again at each loop, until the states converged, with each caller's; that
 * was half of what the verifier walked in the TLS and Go programs.
 */
__noinline int usm_h2_walk_step(struct usm_h2_walk *w)
{
	struct usm_h2_scratch *s;
	__u32 __tlm_prog, left, n, have, room;
	struct usm_h2_dir_state *st;
	__u64 src;

	if (!w)
		return 1;
	s = usm_h2_scratch_get(w->slot);
	if (!s || w->pos >= w->len)
		return 1;
	__tlm_prog = w->tlm_prog;
	st = &s->st;
	left = w->len - w->pos;
	src = w->buf + w->pos;
	/* A record with room copies a frame header whole, and at least one byte of a
	 * payload; one without room is sent and another started, while the call has one. */
	room = usm_h2_next_record(TLM_ARG, s, w) ? USM_H2_CAP - s->rec.data_len : 0;
	if (st->skip) {
		n = st->skip < left ? st->skip : left;
		if (usm_h2_skip(s, n))
			goto unframed;
		st->skip -= n;
		w->pos += n;
		return 0;
	}
	if (st->copy) {
		n = st->copy < left ? st->copy : left;
		if (room && n > room && s->records + 1 < USM_H2_RECORDS)
			n = room; /* the rest in the next record */
		if (usm_h2_copy(TLM_ARG, s, src, n))
			goto unframed;
		st->copy -= n;
		w->pos += n;
		return 0;
	}
	have = st->have;
	if (have >= USM_H2_FRAME_HDR)
		goto unframed;
	n = USM_H2_FRAME_HDR - have;
	if (n > left)
		n = left;
	barrier_var(have);
	barrier_var(n);
	have &= 15; /* have < 9 and n <= 9 already: for the verifier */
	n &= 15;
	if (tlm_probe_read_user(&st->hdr[have], n, (void *)src) ||
	    usm_h2_copy_from(TLM_ARG, s, 0, &st->hdr[have], n))
		goto unframed;
	w->pos += n;
	st->have = have + n;
	if (st->have < USM_H2_FRAME_HDR)
		return 0; /* the call ended inside the header: the rest comes next call */
	st->have = 0;
	n = (__u32)st->hdr[0] << 16 | (__u32)st->hdr[1] << 8 | st->hdr[2];
	if (st->hdr[3] == USM_H2_DATA)
		st->skip = n;
	else
		st->copy = n;
	return 0;
unframed:
	st->unframed = 1;
	s->rec.flags |= USM_H2_F_UNFRAMED;
	return 1;
}

static long usm_h2_step(__u32 i, void *ctx)
{
	(void)i;
	return usm_h2_walk_step(ctx) ? 1 : 0; /* bpf_loop's callback returns 0 or 1 */
}

/*
 * Do these bytes look like an HTTP/2 frame header, of a frame that begins a call (DATA,
 * HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE): a length within the
 * default maximum frame size, no undefined flag, the stream id's reserved bit clear?
 * For counting sessions joined mid-way only: a binary body can look like this too, so
 * nothing else depends on it.
 */
static __always_inline bool usm_h2_frame_like(const char *p)
{
	__u32 len = (__u32)(__u8)p[1] << 8 | (__u8)p[2];
	__u8 type = p[3];

	return p[0] == 0 && len <= 16384 && type <= 8 && type != 2 && type != 5 &&
	       !((__u8)p[4] & ~0x2d) && !((__u8)p[5] & 0x80);
}

/* The session carried an HTTP/1 message (lib/usm_tls.h, usm_tls_http1_seen()): its
 * bytes are a body now, whatever they look like. An HTTP/2 session's first bytes are
 * its preface or SETTINGS, before any message. */
static __always_inline bool usm_h2_http1_session(const struct usm_fd_key *key)
{
	struct usm_tls_sess *s = bpf_map_lookup_elem(&usm_tls_fds, key);

	return s && s->http1;
}

/* Count a session that looks HTTP/2 but was not seen start, once. */
static __always_inline void usm_h2_count_midstream(TLM_PARAM, const struct usm_fd_key *key)
{
	__u8 one = 1;

	/* Counted already (every call of such a session gets here), or HTTP/1's body. */
	if (bpf_map_lookup_elem(&usm_h2_midstream, key) || usm_h2_http1_session(key))
		return;
	if (!tlm_map_insert(usm_h2_midstream, key, &one))
		usm_count(USM_CNT_H2_MIDSTREAM);
}

/* A session refused for its user's share (lib/fair_share.h): counted, and marked as
 * the sessions joined mid-way are, so that its frames are not counted as those of one. */
static __always_inline void usm_h2_over_share(TLM_PARAM, const struct usm_fd_key *key)
{
	__u8 one = 1;

	usm_count(USM_CNT_H2_OVER_SHARE);
	if (!bpf_map_lookup_elem(&usm_h2_midstream, key))
		tlm_map_insert(usm_h2_midstream, key, &one);
}

static __always_inline void usm_h2_dir_reset(struct usm_h2_dir_state *d, bool preface)
{
	__builtin_memset(d, 0, sizeof(*d));
	if (preface)
		d->copy = USM_H2_PREFACE; /* not a frame: copied as it is */
}

/*
 * A record of no bytes of session conn, owned by uid, reserved, not built in the per-CPU
 * scratch: a walk this program preempted on this CPU (a preemptible kernel) may be
 * building its record there.
 */
static __always_inline void usm_h2_send_empty(TLM_PARAM, __u64 conn, __u64 pid_tgid, __u32 source,
					      enum usm_dir dir, __u8 flags, __u64 offset, __u64 len,
					      __u32 uid)
{
	struct usm_h2_record *r;

	usm_count(USM_CNT_H2_RECORDS);
	r = tlm_ringbuf_reserve(usm_h2_events, USM_H2_RECORD_HDR, 0);
	if (!r) {
		usm_count(USM_CNT_H2_LOST);
		return;
	}
	__builtin_memset(r, 0, USM_H2_RECORD_HDR);
	r->ktime_ns = bpf_ktime_get_ns();
	r->conn = conn;
	r->offset = offset;
	r->pid = pid_tgid >> 32;
	r->tid = (__u32)pid_tgid;
	r->len = len > 0xffffffff ? 0xffffffff : len;
	r->fd = -1;
	r->source = source;
	r->dir = dir;
	r->flags = flags;
	r->uid = uid;
	tlm_ringbuf_submit(r, usm_h2_wakeup(USM_H2_RECORD_HDR));
}

/*
 * Every slot of this CPU's scratch is held by a walk the program preempted: this call's
 * bytes are not walked, so the direction's framing is lost. Said once, in a record of
 * no bytes (the scratch is not its to use), so that userspace stops decoding the
 * session; the direction sends nothing more.
 */
static __always_inline void usm_h2_nested(TLM_PARAM, struct usm_h2_state *state, enum usm_dir dir,
					  __u64 conn, __u64 len, __u32 source, __u8 flags,
					  __u64 pid_tgid)
{
	struct usm_h2_dir_state *d = &state->d[dir & 1];

	d->unframed = 1;
	usm_count(USM_CNT_H2_NESTED);
	usm_h2_send_empty(TLM_ARG, conn, pid_tgid, source, dir, flags | USM_H2_F_UNFRAMED, d->offset,
			  len, state->uid);
}

/*
 * A TLS call moved len bytes through buf on session conn. If the session is HTTP/2 (or
 * becomes it with this call), walk and send its bytes and return true; false: not
 * HTTP/2, the caller goes on with HTTP/1. peek: the first USM_PEEK bytes when peeked
 * (a call that moved fewer cannot start HTTP/2).
 */
static __always_inline bool usm_h2_tls(TLM_PARAM, __u64 conn, __u64 buf, __u64 len, __u32 source,
				       enum usm_dir dir, __u64 ktime_ns, __u64 pid_tgid,
				       const char *peek, bool peeked)
{
	struct usm_fd_key key = {.conn = conn, .tgid = pid_tgid >> 32};
	struct usm_h2_walk w = {.buf = buf, .tlm_prog = TLM_ARG};
	struct usm_h2_state *state, init = {};
	struct usm_h2_dir_state *d;
	struct usm_h2_scratch *s;
	__u8 flags = 0;
	bool first;
	long err;

	state = bpf_map_lookup_elem(&usm_h2_conns, &key);
	if (!state) {
		if (!peeked)
			return false;
		if (usm_h2_preface_start(peek) && len >= USM_H2_PREFACE)
			flags = USM_H2_F_NEW | USM_H2_F_PREFACE;
		else if (usm_h2_settings_start(peek))
			flags = USM_H2_F_NEW | USM_H2_F_SETTINGS;
		else if (usm_h2_frame_like(peek))
			usm_h2_count_midstream(TLM_ARG, &key);
		if (!flags)
			return false;
		if (usm_h2_http1_session(&key)) {
			/* A body that looks like a start: the session stays HTTP/1. */
			usm_count(USM_CNT_H2_START_REFUSED);
			return false;
		}
		init.uid = fair_share_owner();
		if (!fair_share_take(TLM_ARG, USM_SHARE_H2_CONNS, init.uid,
				     usm_share_cap[USM_SHARE_H2_CONNS])) {
			usm_h2_over_share(TLM_ARG, &key);
			return true;
		}
		usm_h2_dir_reset(&init.d[dir & 1], flags & USM_H2_F_PREFACE);
		err = tlm_map_insert(usm_h2_conns, &key, &init);
		if (err) /* not made: full, or made by the other end (its own count) */
			fair_share_give(USM_SHARE_H2_CONNS, init.uid);
		if (err && err != -EEXIST)
			return true;
		state = bpf_map_lookup_elem(&usm_h2_conns, &key);
		if (!state)
			return true;
		/* The other end of the session started it meanwhile, on another CPU (a Go
		 * server writes its SETTINGS in one goroutine while another reads the
		 * client's preface): keep its direction, start this one. The record still
		 * says NEW; userspace takes it as the session's other direction. */
		if (err == -EEXIST)
			usm_h2_dir_reset(&state->d[dir & 1], flags & USM_H2_F_PREFACE);
	}
	d = &state->d[dir & 1];
	first = !d->offset && !d->skip && !d->copy && !d->have;
	if (peeked && !flags && usm_h2_preface_start(peek) && len >= USM_H2_PREFACE && !d->skip &&
	    !d->copy && !d->have) {
		flags = USM_H2_F_PREFACE;
		if (d->offset) {
			/* A new connection on a reused session address. */
			flags |= USM_H2_F_NEW;
			usm_h2_dir_reset(&state->d[dir ^ 1], false);
		}
		/* Or the preface of a session that a server's SETTINGS started. */
		usm_h2_dir_reset(d, true);
	}
	/* A direction's first call says NEW too: the other end's first call, on another
	 * CPU, may have made the session and still be walking its bytes, so that this
	 * record reaches the ring buffer first. Userspace starts the session from
	 * whichever comes first and takes the other as its other direction. */
	if (first)
		flags |= USM_H2_F_NEW;
	if (d->unframed)
		return true; /* counted when it was lost */
	usm_count(USM_CNT_H2_CALLS);
	s = usm_h2_scratch_take(&w.slot);
	if (!s) {
		usm_h2_nested(TLM_ARG, state, dir, conn, len, source, flags, pid_tgid);
		return true; /* busy is each preempted walk's to clear */
	}
	/* No return until busy is cleared. */
	s->st = *d;
	s->rec.ktime_ns = ktime_ns == USM_TLS_NOW ? bpf_ktime_get_ns() : ktime_ns;
	s->rec.conn = conn;
	s->rec.offset = d->offset;
	s->rec.pid = pid_tgid >> 32;
	s->rec.tid = (__u32)pid_tgid;
	s->rec.len = len > 0xffffffff ? 0xffffffff : len;
	s->rec.fd = usm_tls_fd_of(TLM_ARG, conn, pid_tgid, source);
	s->rec.source = source;
	s->rec.dir = dir;
	s->rec.flags = flags;
	s->rec.nruns = 0;
	s->rec.data_len = 0;
	s->rec.uid = state->uid;
	s->start = 0;
	s->records = 0;
	s->cut = 0;
	w.len = s->rec.len;
	bpf_loop(USM_H2_STEPS, usm_h2_step, &w, 0);
	if (w.pos < w.len && !(s->rec.flags & USM_H2_F_UNFRAMED)) {
		s->st.unframed = 1; /* steps ran out */
		s->rec.flags |= USM_H2_F_UNFRAMED;
	}
	/* The call's last record: the rest of it. */
	s->rec.len = w.len - s->start;
	s->rec.walked = w.pos - s->start;
	s->st.offset += w.len;
	/* Back into the session's entry only if it is still the one walked from. Deleted
	 * meanwhile (SSL_free, Go's Close on another thread; the LRU making room), an LRU
	 * entry goes to the next insert at once, and this state would be written into
	 * another session's direction, maybe another user's. This narrows the window to
	 * the instructions between the lookup and the copy, over the walk's whole run; an
	 * entry made again for the same key meanwhile compares equal. */
	if (bpf_map_lookup_elem(&usm_h2_conns, &key) == state)
		*d = s->st;
	if ((s->rec.flags & USM_H2_F_CUT) || s->cut)
		usm_count(USM_CNT_H2_TRUNCATED);
	if (s->rec.flags & USM_H2_F_UNFRAMED)
		usm_count(USM_CNT_H2_UNFRAMED);
	usm_h2_output(TLM_ARG, s);
	s->busy = 0;
	return true;
}

/*
 * SSL_set_fd & co. (the session is being set up for a new connection), SSL_free & co.
 * and Go's Close (it ended): its HTTP/2 state goes, and userspace is told with a
 * record of no bytes (USM_H2_F_CLOSED), so that it frees the session's decoder and
 * gives up its requests still waiting for an answer, which none will bring; else they
 * wait for their expiry and the decoder for eviction, counted as a loss.
 */
static __always_inline void usm_h2_forget(TLM_PARAM, __u64 conn, __u64 pid_tgid, __u32 source)
{
	struct usm_fd_key key = {.conn = conn, .tgid = pid_tgid >> 32};
	struct usm_h2_state *state = bpf_map_lookup_elem(&usm_h2_conns, &key);
	__u32 uid;

	if (!state)
		return;
	uid = state->uid;
	if (!tlm_map_take(usm_h2_conns, &key))
		fair_share_give(USM_SHARE_H2_CONNS, uid);
	usm_h2_send_empty(TLM_ARG, conn, pid_tgid, source, USM_DIR_WRITE, USM_H2_F_CLOSED, 0, 0,
			  uid);
}

/* A session ended (SSL_free, gnutls_deinit, Go's Close): its socket and HTTP/1 mark
 * go, its mid-way mark, and its HTTP/2 state, said to userspace. The callers drop what
 * their own maps keep by it. */
static __always_inline void usm_h2_session_end(TLM_PARAM, const struct usm_fd_key *key,
					       __u64 pid_tgid, __u32 source)
{
	usm_tls_sess_delete(TLM_ARG, key);
	if (bpf_map_lookup_elem(&usm_h2_midstream, key))
		tlm_map_take(usm_h2_midstream, key);
	usm_h2_forget(TLM_ARG, key->conn, pid_tgid, source);
}

#endif /* BPFTEL_LIB_USM_H2_H */
