// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * USM's HTTP/2 sessions (h2_sessions.h): a hash of (pid, source, session pointer) to
 * a decoder and each direction's byte offset, fed from the kernel's records.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "h2_sessions.h"

#define NBUCKETS 2048 /* a power of two, twice USM_H2_SESSIONS_MAX */
#define OWNER_SLOTS (2 * USM_H2_SESSIONS_MAX) /* a power of two */

/* Sessions and their decoders' bytes per owner (not root: 0 marks a free slot),
 * counted by count_owners(). */
struct owner_count {
	uint32_t uid, n;
	size_t mem;
};

struct h2s {
	bool used;
	uint8_t source;
	uint8_t c2s; /* enum usm_dir of the client's bytes, as the process sees them */
	uint32_t pid;
	uint32_t uid; /* the session's owner, from its start (struct usm_h2_record) */
	uint32_t owner_slot; /* count_owners()'s scratch */
	uint64_t conn;
	int next;		 /* in its bucket, -1 ends */
	struct usm_h2_conn *dec; /* NULL once undecodable or dropped */
	uint64_t off[2];	 /* bytes of each direction fed (or skipped) so far */
	uint64_t last_ns;
	int32_t fd;
	size_t mem; /* the decoder's bytes as last seen */
	bool addr_known;
	struct usm_conn_addr addr;
};

struct usm_h2_sessions {
	pthread_mutex_t lock;
	usm_h2_sink sink;
	void *ctx;
	int bucket[NBUCKETS];
	int free_head; /* unused entries, chained through next */
	struct h2s e[USM_H2_SESSIONS_MAX];
	struct owner_count owners[OWNER_SLOTS]; /* count_owners()'s scratch */
	struct usm_h2_sessions_stats st;
	size_t mem_budget; /* USM_H2_SESSIONS_MEM; tests lower it */
};

static const char *const drop_names[USM_H2_DROP__COUNT] = {
	[USM_H2_DROP_UNKNOWN] = "unknown_session", [USM_H2_DROP_UNFRAMED] = "unframed",
	[USM_H2_DROP_EVICTED] = "evicted",	   [USM_H2_DROP_MEMORY] = "memory",
	[USM_H2_DROP_DIRECTION] = "direction",	   [USM_H2_DROP_REORDERED] = "reordered",
	[USM_H2_DROP_PROCESS_CAP] = "process_cap", [USM_H2_DROP_USER_CAP] = "user_cap",
};

const char *usm_h2_drop_str(enum usm_h2_drop d)
{
	return (unsigned)d < USM_H2_DROP__COUNT ? drop_names[d] : "unknown";
}

static unsigned int hash(uint32_t pid, uint8_t source, uint64_t conn)
{
	uint64_t h = conn ^ ((uint64_t)pid << 32) ^ source;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (unsigned int)h & (NBUCKETS - 1);
}

struct usm_h2_sessions *usm_h2_sessions_new(usm_h2_sink sink, void *ctx)
{
	struct usm_h2_sessions *s = calloc(1, sizeof(*s));
	int i;

	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	s->sink = sink;
	s->ctx = ctx;
	for (i = 0; i < NBUCKETS; i++)
		s->bucket[i] = -1;
	for (i = 0; i < USM_H2_SESSIONS_MAX; i++)
		s->e[i].next = i + 1 < USM_H2_SESSIONS_MAX ? i + 1 : -1;
	s->free_head = 0;
	s->mem_budget = USM_H2_SESSIONS_MEM;
	return s;
}

/* Messages are collected under the lock and handed to the sink after it: the sink
 * may do slow work (naming a connection reads /proc). A record holds at most
 * USM_H2_CAP / 9 frames, so few messages. */
struct feed_ctx {
	struct usm_h2_sessions *s;
	struct h2s *e;
	const struct usm_h2_record *r;
	struct usm_h2_message *msgs;
	size_t n, cap;
};

static void on_event(const struct usm_h2_event *ev, void *ctx);

/* The decoder goes; the entry stays, so that the session's later records are known
 * (and ignored) rather than counted again. Its requests still waiting for an answer
 * are withdrawn through f (f->e is whichever session is being fed), when there is one:
 * none will come that names them. Without (the sweep: the process exited), the
 * endpoints' own sweep takes them. */
static void kill(struct usm_h2_sessions *s, struct h2s *e, int drop, struct feed_ctx *f)
{
	const struct usm_h2_callbacks cb = {.event = on_event};
	struct h2s *fed;

	if (!e->dec)
		return;
	if (drop >= 0)
		s->st.dropped[drop]++;
	if (f) {
		fed = f->e;
		f->e = e;
		usm_h2_conn_abandon(e->dec, e->last_ns, &cb, f);
		f->e = fed;
	}
	usm_h2_conn_free(e->dec);
	e->dec = NULL;
	s->st.mem -= e->mem;
	e->mem = 0;
}

static void unlink_entry(struct usm_h2_sessions *s, struct h2s *e, struct feed_ctx *f)
{
	int idx = (int)(e - s->e), *p = &s->bucket[hash(e->pid, e->source, e->conn)];

	while (*p != idx)
		p = &s->e[*p].next;
	*p = e->next;
	kill(s, e, -1, f);
	if (s->st.live)
		s->st.live--;
	memset(e, 0, sizeof(*e));
	e->next = s->free_head;
	s->free_head = idx;
}

void usm_h2_sessions_free(struct usm_h2_sessions *s)
{
	int i;

	if (!s)
		return;
	for (i = 0; i < USM_H2_SESSIONS_MAX; i++)
		if (s->e[i].used)
			usm_h2_conn_free(s->e[i].dec);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static struct h2s *find(struct usm_h2_sessions *s, uint32_t pid, uint8_t source, uint64_t conn)
{
	int i = s->bucket[hash(pid, source, conn)];

	for (; i >= 0; i = s->e[i].next)
		if (s->e[i].pid == pid && s->e[i].source == source && s->e[i].conn == conn)
			return &s->e[i];
	return NULL;
}

static bool idle(const struct h2s *e, uint64_t now_ns)
{
	return now_ns >= USM_H2_SESSION_IDLE_NS && e->last_ns <= now_ns - USM_H2_SESSION_IDLE_NS;
}

/* Free e to make room at now_ns: reclaimed if idle long enough, else dropped for
 * reason `drop` if it still decoded. */
static void make_room(struct usm_h2_sessions *s, struct h2s *e, uint64_t now_ns, int drop,
		      struct feed_ctx *f)
{
	if (idle(e, now_ns))
		s->st.reclaimed++;
	else if (e->dec)
		s->st.dropped[drop]++;
	unlink_entry(s, e, f);
}

/* Is e to make room before o (NULL: none yet)? One no longer decoded first: the kernel
 * keeps sending a dead session's calls, which keep it recently used, and it costs
 * nothing to forget; then the least recently used. */
static bool evict_before(const struct h2s *e, const struct h2s *o)
{
	return !o || (!e->dec && o->dec) || (!e->dec == !o->dec && e->last_ns < o->last_ns);
}

/* Sessions of pid (by_user: of the user uid): how many, and the one to make room
 * with (an index, or -1): the least recently used of those no longer decoded, else of
 * all. */
static size_t of_owner(struct usm_h2_sessions *s, uint32_t id, bool by_user, int *oldest)
{
	const struct h2s *e, *o;
	size_t n = 0;
	int i;

	*oldest = -1;
	for (i = 0; i < USM_H2_SESSIONS_MAX; i++) {
		e = &s->e[i];
		if (!e->used || (by_user ? e->uid : e->pid) != id)
			continue;
		n++;
		o = *oldest < 0 ? NULL : &s->e[*oldest];
		if (evict_before(e, o))
			*oldest = i;
	}
	return n;
}

/* The session to make room with other than keep (evict_before), among those still
 * decoding and idle at now_ns when idle_only: an index, or -1. */
static int lru(struct usm_h2_sessions *s, const struct h2s *keep, uint64_t now_ns, bool idle_only)
{
	int i, oldest = -1;

	for (i = 0; i < USM_H2_SESSIONS_MAX; i++) {
		const struct h2s *e = &s->e[i];

		if (!e->used || e == keep || (idle_only && (!e->dec || !idle(e, now_ns))))
			continue;
		if (evict_before(e, oldest < 0 ? NULL : &s->e[oldest]))
			oldest = i;
	}
	return oldest;
}

/* Each owner's (not root's) sessions and decoders' bytes, in an open-addressing table
 * twice the sessions' size; each session's slot in owner_slot. */
static void count_owners(struct usm_h2_sessions *s)
{
	struct owner_count *slot = s->owners;
	unsigned int h;
	int i;

	memset(s->owners, 0, sizeof(s->owners));
	for (i = 0; i < USM_H2_SESSIONS_MAX; i++) {
		if (!s->e[i].used || !s->e[i].uid)
			continue;
		for (h = (s->e[i].uid * 2654435761u) & (OWNER_SLOTS - 1);
		     slot[h].uid && slot[h].uid != s->e[i].uid; h = (h + 1) & (OWNER_SLOTS - 1))
			;
		slot[h].uid = s->e[i].uid;
		s->e[i].owner_slot = h;
		slot[h].n++;
		slot[h].mem += s->e[i].mem;
	}
}

/* The least recently used session other than keep of an owner (not root) holding more
 * than USM_H2_SESSIONS_PER_USER sessions (by_mem: more than a quarter of the decoders'
 * budget, in decoders still decoding), as count_owners() last counted them: an index,
 * or -1 when none does. */
static int hog_lru(struct usm_h2_sessions *s, const struct h2s *keep, bool by_mem)
{
	const struct owner_count *slot = s->owners;
	int i, oldest = -1;

	for (i = 0; i < USM_H2_SESSIONS_MAX; i++) {
		const struct h2s *e = &s->e[i];

		if (!e->used || !e->uid || e == keep)
			continue;
		if (by_mem ? !e->dec || slot[e->owner_slot].mem <= s->mem_budget / 4
			   : slot[e->owner_slot].n <= USM_H2_SESSIONS_PER_USER)
			continue;
		if (evict_before(e, oldest < 0 ? NULL : &s->e[oldest]))
			oldest = i;
	}
	return oldest;
}

/* hog_lru() by sessions, counted now. */
static int hog_by_count(struct usm_h2_sessions *s)
{
	count_owners(s);
	return hog_lru(s, NULL, false);
}

/* A new entry of r's at now_ns. A process at its cap makes room with its own. When the
 * table is full, its owner (not root) makes room with its own when it holds its share,
 * else the least recently used of an owner over its share goes, else the least
 * recently used: while there is room, an owner may hold more than its share. */
static struct h2s *create(struct usm_h2_sessions *s, const struct usm_h2_record *r,
			  uint64_t now_ns, struct feed_ctx *f)
{
	unsigned int b = hash(r->pid, r->source, r->conn);
	struct h2s *e;
	int i;

	if (of_owner(s, r->pid, false, &i) >= USM_H2_SESSIONS_PER_PROC)
		make_room(s, &s->e[i], now_ns, USM_H2_DROP_PROCESS_CAP, f);
	else if (s->free_head >= 0)
		;
	else if (r->uid && of_owner(s, r->uid, true, &i) >= USM_H2_SESSIONS_PER_USER)
		make_room(s, &s->e[i], now_ns, USM_H2_DROP_USER_CAP, f);
	else if ((i = hog_by_count(s)) >= 0)
		make_room(s, &s->e[i], now_ns, USM_H2_DROP_USER_CAP, f);
	else
		make_room(s, &s->e[lru(s, NULL, now_ns, false)], now_ns, USM_H2_DROP_EVICTED, f);
	i = s->free_head;
	e = &s->e[i];
	s->free_head = e->next;
	memset(e, 0, sizeof(*e));
	e->used = true;
	e->pid = r->pid;
	e->uid = r->uid;
	e->source = r->source;
	e->conn = r->conn;
	e->next = s->bucket[b];
	s->bucket[b] = i;
	s->st.live++;
	return e;
}


static void message(struct feed_ctx *f, const struct usm_h2_stream_info *si,
		    enum usm_http_kind kind, uint64_t t_ns)
{
	struct usm_h2_message *mp, m;
	size_t i;

	memset(&m, 0, sizeof(m));
	m.key.pid = f->e->pid;
	m.key.source = f->e->source;
	m.key.conn = f->e->conn;
	m.key.side = f->e->c2s == USM_DIR_READ ? USM_SIDE_SERVER : USM_SIDE_CLIENT;
	m.key.stream = si->id;
	m.t_ns = t_ns;
	m.msg.kind = kind;
	m.msg.version = 20;
	memcpy(m.msg.method, si->method, sizeof(m.msg.method));
	memcpy(m.msg.path, si->path, sizeof(m.msg.path));
	m.msg.status = kind == USM_HTTP_RESPONSE ? si->status : 0;
	m.msg.grpc = si->grpc;
	m.msg.grpc_status = kind == USM_HTTP_RESPONSE ? si->grpc_status : -1;
	m.fd = f->e->fd;
	m.addr_known = f->e->addr_known;
	m.addr = f->e->addr;
	/* The stream's end in the same record as its :status (most responses): the mark
	 * that it is being answered is not needed, and its place takes the end, saving
	 * the endpoints a lock and a lookup per response. */
	for (i = f->n; kind != USM_HTTP_REQUEST && kind != USM_HTTP_ANSWERING && i-- > 0;) {
		if (f->msgs[i].msg.kind == USM_HTTP_ANSWERING &&
		    !memcmp(&f->msgs[i].key, &m.key, sizeof(m.key))) {
			f->msgs[i] = m;
			return;
		}
	}
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 16;

		mp = realloc(f->msgs, cap * sizeof(*mp));
		if (!mp) {
			f->s->st.dropped[USM_H2_DROP_MEMORY]++;
			return;
		}
		f->msgs = mp;
		f->cap = cap;
	}
	f->msgs[f->n++] = m;
}

/*
 * A request when its headers are complete; its response when the server ends the
 * stream (latency: request HEADERS to response END_STREAM), with the final :status
 * the stream got; at that :status, that it is being answered (a watch's END_STREAM
 * may come an hour later: its request is not expired meanwhile). A stream dropped for a newer one (past USM_H2_STREAMS_MAX) will
 * have no response that names its request, and one answered with a :status outside
 * 100-599 (the decoder keeps it as 0) none that makes a row: rejected as HTTP/1's are,
 * and withdrawn (USM_HTTP_NONE). So are the requests of streams reset before their
 * response, and of those the server's GOAWAY did not process (refused): no answer
 * comes, and a request left pending would wait for its expiry, or for ever.
 */
static void on_event(const struct usm_h2_event *ev, void *ctx)
{
	struct feed_ctx *f = ctx;
	const struct usm_h2_stream_info *si = &ev->stream;

	switch (ev->kind) {
	case USM_H2_EV_REQUEST:
		if (ev->dir != USM_H2_CLIENT_TO_SERVER)
			return;
		f->s->st.requests++;
		message(f, si, USM_HTTP_REQUEST, si->request_ns ? si->request_ns : ev->ktime_ns);
		return;
	case USM_H2_EV_RESPONSE:
		if (ev->dir != USM_H2_SERVER_TO_CLIENT)
			return;
		if (si->status) { /* final: the request waits for its END_STREAM however long */
			if (si->request_seen && !si->server_ending)
				message(f, si, USM_HTTP_ANSWERING, ev->ktime_ns);
			return;
		}
		f->s->st.rejected_status++;
		if (si->request_seen)
			message(f, si, USM_HTTP_NONE, ev->ktime_ns);
		return;
	case USM_H2_EV_END_STREAM:
		if (ev->dir != USM_H2_SERVER_TO_CLIENT || !si->request_seen || !si->status)
			return;
		f->s->st.responses++;
		if (si->grpc)
			f->s->st.grpc++;
		message(f, si, USM_HTTP_RESPONSE, ev->ktime_ns);
		return;
	case USM_H2_EV_RESET:
		f->s->st.resets++;
		if (si->request_seen && !si->server_ended)
			message(f, si, USM_HTTP_NONE, ev->ktime_ns);
		return;
	case USM_H2_EV_REFUSED:
		f->s->st.refused++;
		if (si->request_seen)
			message(f, si, USM_HTTP_NONE, ev->ktime_ns);
		return;
	case USM_H2_EV_DROPPED:
		if (si->request_seen)
			message(f, si, USM_HTTP_NONE, ev->ktime_ns);
		return;
	default:
		return;
	}
}

static bool valid(const struct usm_h2_record *r, size_t size)
{
	uint64_t copied = 0, walked = 0;
	int i;

	if (size < USM_H2_RECORD_HDR || r->data_len > USM_H2_CAP ||
	    size != USM_H2_RECORD_HDR + r->data_len || r->nruns > USM_H2_RUNS ||
	    r->dir > USM_DIR_READ || r->source == USM_SRC_SOCKET || r->source >= USM_SRC__COUNT || r->walked > r->len)
		return false;
	for (i = 0; i < r->nruns; i++) {
		copied += r->runs[i].copied;
		walked += (uint64_t)r->runs[i].copied + r->runs[i].skipped;
	}
	return copied == r->data_len && walked == r->walked;
}

/* Feed the record's runs to the decoder; < 0 once it is undecodable. */
static int feed(struct feed_ctx *f)
{
	const struct usm_h2_callbacks cb = {.event = on_event};
	const struct usm_h2_record *r = f->r;
	struct h2s *e = f->e;
	enum usm_h2_dir dir = r->dir == e->c2s ? USM_H2_CLIENT_TO_SERVER : USM_H2_SERVER_TO_CLIENT;
	const uint8_t *p = r->data;
	int i, err = 0;

	if (r->offset > e->off[r->dir]) {
		/* Records lost on the way (ring buffer full): a gap. */
		f->s->st.lost_bytes += r->offset - e->off[r->dir];
		err = usm_h2_feed_gap(e->dec, dir, r->ktime_ns, r->offset - e->off[r->dir], &cb, f);
	}
	for (i = 0; i < r->nruns && !err; i++) {
		if (r->runs[i].copied)
			err = usm_h2_feed(e->dec, dir, r->ktime_ns, p, r->runs[i].copied, &cb, f);
		p += r->runs[i].copied;
		if (!err && r->runs[i].skipped)
			err = usm_h2_feed_gap(e->dec, dir, r->ktime_ns, r->runs[i].skipped, &cb, f);
	}
	return err;
}

int usm_h2_sessions_record(struct usm_h2_sessions *s, const void *data, size_t size)
{
	const struct usm_h2_record *r = data;
	struct feed_ctx f = {.s = s, .r = r};
	struct usm_h2_stats ds;
	uint64_t dropped, stream_errors;
	struct h2s *e;
	int err, i;

	if (!valid(r, size))
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	s->st.records++;
	if (r->flags & USM_H2_F_CUT)
		s->st.cut_records++;
	e = find(s, r->pid, r->source, r->conn);
	/* The kernel marks each direction's first record NEW (bpf/lib/usm_h2.h): both
	 * ends of a connection may start at once on two CPUs (a Go server writes its
	 * SETTINGS in one goroutine while another reads the client's preface), and either
	 * record may come first. A NEW record is the session's other direction, not a new
	 * connection, when that direction has seen nothing, this record begins it, and
	 * both agree which way the client writes; whether or not the session still
	 * decodes: one whose first record killed it (a first request past USM_H2_CAP)
	 * stays dead, not started again by its peer's first record, counted again, and
	 * then killed again by the first direction's next record, an offset jump. */
	if (r->flags & USM_H2_F_CLOSED) {
		/* The session ended: its decoder and its waiting requests go now, not at
		 * its eviction, which would count it as a loss. */
		if (e) {
			s->st.closed++;
			unlink_entry(s, e, &f);
		}
		pthread_mutex_unlock(&s->lock);
		goto deliver;
	}
	if ((r->flags & USM_H2_F_NEW) && e && !r->offset && !e->off[r->dir] &&
	    e->c2s == (r->flags & USM_H2_F_PREFACE ? r->dir : r->dir ^ 1)) {
		s->st.merged++; /* counted as a session once */
	} else if (r->flags & USM_H2_F_NEW) {
		if (e)
			unlink_entry(s, e, &f);
		e = create(s, r, r->ktime_ns, &f);
		e->c2s = r->flags & USM_H2_F_PREFACE ? r->dir : r->dir ^ 1;
		e->dec = usm_h2_conn_new();
		if (!e->dec)
			s->st.dropped[USM_H2_DROP_MEMORY]++;
		s->st.sessions++;
	} else if (!e) {
		s->st.dropped[USM_H2_DROP_UNKNOWN]++;
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	f.e = e;
	e->last_ns = r->ktime_ns;
	e->fd = r->fd;
	if (e->dec && (r->flags & USM_H2_F_PREFACE) && r->dir != e->c2s)
		kill(s, e, USM_H2_DROP_DIRECTION, &f);
	if (e->dec && r->offset < e->off[r->dir])
		kill(s, e, USM_H2_DROP_REORDERED, &f); /* the kernel counts up: a worker's race */
	if (e->dec) {
		usm_h2_conn_stats(e->dec, &ds);
		dropped = ds.count[USM_H2_TOO_MANY_STREAMS];
		stream_errors = ds.count[USM_H2_STREAM_ERROR];
		err = feed(&f);
		usm_h2_conn_stats(e->dec, &ds);
		/* Not fatal, counted each time: streams dropped past USM_H2_STREAMS_MAX, and
		 * stream errors ignored. */
		s->st.undecodable[USM_H2_TOO_MANY_STREAMS] +=
			ds.count[USM_H2_TOO_MANY_STREAMS] - dropped;
		s->st.undecodable[USM_H2_STREAM_ERROR] += ds.count[USM_H2_STREAM_ERROR] - stream_errors;
		if (err < 0) {
			s->st.undecodable[ds.undecodable < USM_H2_REASON_MAX ? ds.undecodable
									     : 0]++;
			kill(s, e, -1, &f);
		} else if (r->flags & USM_H2_F_UNFRAMED) {
			kill(s, e, USM_H2_DROP_UNFRAMED, &f);
		}
	}
	if (e->dec) {
		usm_h2_conn_stats(e->dec, &ds);
		s->st.mem += ds.mem - e->mem;
		e->mem = ds.mem;
		while (s->st.mem > s->mem_budget && (i = lru(s, e, r->ktime_ns, true)) >= 0)
			make_room(s, &s->e[i], r->ktime_ns, USM_H2_DROP_MEMORY, &f);
		/* Then a user's holding more than its quarter: one user's sessions, each
		 * near USM_H2_MEM_MAX, would otherwise have every other's dropped as it
		 * grows, however small. */
		if (s->st.mem > s->mem_budget)
			count_owners(s); /* once: each session freed is taken off its owner */
		while (s->st.mem > s->mem_budget && (i = hog_lru(s, e, true)) >= 0) {
			s->owners[s->e[i].owner_slot].mem -= s->e[i].mem;
			make_room(s, &s->e[i], r->ktime_ns, USM_H2_DROP_MEMORY, &f);
		}
		if (s->st.mem > s->mem_budget)
			kill(s, e, USM_H2_DROP_MEMORY, &f);
	}
	e->off[r->dir] = r->offset + r->len;
	pthread_mutex_unlock(&s->lock);
deliver:
	for (size_t i = 0; i < f.n; i++)
		s->sink(&f.msgs[i], s->ctx);
	free(f.msgs);
	return 0;
}

size_t usm_h2_sessions_sweep(struct usm_h2_sessions *s, bool (*alive)(uint32_t pid, void *ctx),
			     void *ctx)
{
	size_t n = 0;
	int i;

	pthread_mutex_lock(&s->lock);
	for (i = 0; i < USM_H2_SESSIONS_MAX; i++) {
		struct h2s *e = &s->e[i];

		if (!e->used)
			continue;
		if (alive && !alive(e->pid, ctx)) {
			unlink_entry(s, e, NULL);
			n++;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

void usm_h2_sessions_set_addr(struct usm_h2_sessions *s, const struct usm_conn_key *key,
			      const struct usm_conn_addr *addr)
{
	struct h2s *e;

	pthread_mutex_lock(&s->lock);
	e = find(s, key->pid, key->source, key->conn);
	if (e) {
		e->addr = *addr;
		e->addr_known = true;
	}
	pthread_mutex_unlock(&s->lock);
}

void usm_h2_sessions_set_mem_budget(struct usm_h2_sessions *s, size_t bytes)
{
	pthread_mutex_lock(&s->lock);
	s->mem_budget = bytes;
	pthread_mutex_unlock(&s->lock);
}

void usm_h2_sessions_stats(struct usm_h2_sessions *s, struct usm_h2_sessions_stats *out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->st;
	pthread_mutex_unlock(&s->lock);
}
