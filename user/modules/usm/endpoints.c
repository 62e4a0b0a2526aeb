// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The endpoint table (endpoints.h): pending requests by connection, rows by endpoint.
 *
 * Rows live in one array in creation order (seq), found through an open-addressing
 * index of their keys; removals (expiry, sweep) compact the array in order and rebuild
 * the index, so a message costs a hash lookup, plus one scan of the rows when it needs
 * a new row and the process's row count must be known.
 *
 * Three kinds of rows, each with room of its own, so that a message always has a row:
 *  - endpoint rows: at most max_rows, and max_rows_per_proc per (pid, side);
 *  - process overflow rows (pid, side, proto, version, "_OTHER", "(overflow)", 0): at
 *    most 2 x (max_rows / max_rows_per_proc), at least 2: one per proto for every
 *    (pid, side) that can be at its cap at once. Once they are all taken (a process
 *    using several versions, overflow rows outliving their endpoint rows), a capped
 *    process's new endpoint goes to the USM_PID_OVERFLOW row instead;
 *  - reserved rows: USM_PID_OVERFLOW's, and the overflow rows of exited processes
 *    folded into USM_PID_EXITED: one per (side, proto, version) each, at most 48.
 * Endpoint rows of exited processes (USM_PID_EXITED) hold their room only while there
 * is room: a live process's new endpoint with max_rows taken folds them all into the
 * exited overflow rows (their counts kept) before it is sent to an overflow row.
 * Sides, protos and versions are clamped to the known ones (an unknown version is
 * kept as 0) so that the reserved rows are bounded.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "endpoints.h"

#define DEFAULT_PENDING	 4096
#define DEFAULT_ROWS	 4096
#define DEFAULT_PER_PROC 64
#define NVERSIONS	 4 /* 0 (unknown), 10, 11, 20 */
#define NPROTOS		 2
#define RESERVED_ROWS	 (2 * USM_SIDE__COUNT * NPROTOS * NVERSIONS)

enum row_kind {
	ROW_ENDPOINT,
	ROW_PROC_OVERFLOW,
	ROW_RESERVED,
	ROW__KINDS,
};

struct row {
	struct usm_endpoint_row r;
	enum row_kind kind;
};

/* What a row is found by. */
struct row_key {
	uint32_t pid;
	enum usm_side side;
	enum usm_proto proto;
	int version;
	const char *method, *path;
	int status;
	bool grpc;
	int grpc_status;
};

struct pending {
	struct usm_conn_key key;
	uint64_t t_ns;
	int version;
	bool grpc;
	bool answering; /* its response begun: not expired (usm_endpoints_answering) */
	char method[USM_METHOD_MAX];
	char path[USM_PATH_MAX];
	struct usm_conn_addr conn;
	uint32_t older, newer; /* in the age list: pool index + 1, 0 at its ends */
};

/*
 * Pending requests: an open-addressing table of small slots (the key's hash and where
 * the request is) over a pool of entries. Every message of every connection looks a
 * slot up, and a request waits only until its response: a few dozen are pending at
 * once, out of thousands allowed. With the entries in the slots (~250 bytes each,
 * 2 MiB at the default) each lookup was a cache miss somewhere in the table, the
 * agent's hottest line under h2load (BENCHMARKS.md); now the probes read an 8-byte
 * slot, compare a full key only where the hash matches, and the pool hands out the
 * entry freed last: the few in use stay in cache.
 */
struct slot {
	uint32_t hash;
	uint32_t idx; /* pool index + 1; 0: empty */
};

struct usm_endpoints {
	pthread_mutex_t lock;
	struct usm_endpoints_limits lim; /* defaults filled in */
	struct slot *slots;		 /* a power of two >= 2 x max_pending */
	size_t nslots, slot_mask, npending;
	struct pending *pool;		 /* max_pending */
	uint32_t *free_idx;		 /* pool entries not in use, the last freed on top */
	size_t nfree;
	/* The entries in use from the longest waiting (pool index + 1; 0: none): a
	 * request goes to the newest end when it starts waiting, so that the one evicted
	 * for room is found at once. A scan of every slot for the oldest cost ~8192 probes
	 * under the lock per request while the table was full: a flood of requests that
	 * are never answered (any local user can make one) turned each into ~10 us. */
	uint32_t oldest, newest;
	struct row *rows; /* creation order */
	size_t nrows, cap, proc_reserve;
	size_t kinds[ROW__KINDS]; /* rows of each kind */
	size_t exited;		  /* endpoint rows of USM_PID_EXITED */
	uint32_t *index;	  /* row index + 1, 0 when empty; 2 x cap rounded up */
	size_t index_mask;
	uint32_t *pids; /* sweep's scratch: one per row and pending slot */
	uint64_t seq;
	struct usm_endpoints_stats st;
	usm_copy_fn copy; /* usm_endpoints_set_copy_hook */
	void *copy_ctx;
};

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
	const unsigned char *p = data;
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

#define FNV_BASIS 1469598103934665603ull

/* ---- pending requests ---- */

/* The key's hash: eight bytes at a time (keys are whole structs, padding zeroed, as
 * memcmp below needs them to be). */
static uint32_t key_hash(const struct usm_conn_key *k)
{
	const unsigned char *p = (const unsigned char *)k;
	uint64_t h = FNV_BASIS, w;
	size_t i;

	_Static_assert(sizeof(*k) % 8 == 0, "usm_conn_key hashed in words");
	for (i = 0; i < sizeof(*k); i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 29;
	}
	return (uint32_t)(h ^ (h >> 32));
}

static struct pending *entry_of(struct usm_endpoints *e, const struct slot *s)
{
	return &e->pool[s->idx - 1];
}

/* The slot holding key (hash: key_hash(key)), or the empty slot where it would go. */
static struct slot *slot_of(struct usm_endpoints *e, const struct usm_conn_key *key,
			    uint32_t hash)
{
	size_t i = hash & e->slot_mask, n;
	struct slot *s;

	for (n = 0; n < e->nslots; n++, i = (i + 1) & e->slot_mask) {
		s = &e->slots[i];
		if (!s->idx ||
		    (s->hash == hash && !memcmp(&entry_of(e, s)->key, key, sizeof(*key))))
			return s;
	}
	return NULL; /* cannot happen: at most half the slots are used */
}

static void age_append(struct usm_endpoints *e, uint32_t idx)
{
	struct pending *p = &e->pool[idx - 1];

	p->older = e->newest;
	p->newer = 0;
	if (e->newest)
		e->pool[e->newest - 1].newer = idx;
	else
		e->oldest = idx;
	e->newest = idx;
}

static void age_unlink(struct usm_endpoints *e, uint32_t idx)
{
	struct pending *p = &e->pool[idx - 1];

	if (p->older)
		e->pool[p->older - 1].newer = p->newer;
	else
		e->oldest = p->newer;
	if (p->newer)
		e->pool[p->newer - 1].older = p->older;
	else
		e->newest = p->older;
}

/* An entry for the empty slot s: the pool's entry freed last. */
static struct pending *slot_fill(struct usm_endpoints *e, struct slot *s, uint32_t hash,
				 const struct usm_conn_key *key)
{
	struct pending *p;

	s->hash = hash;
	s->idx = e->free_idx[--e->nfree] + 1;
	p = entry_of(e, s);
	p->key = *key;
	age_append(e, s->idx);
	e->npending++;
	return p;
}

/* Empty slot s, its entry back to the pool, and re-seat the slots after it (linear
 * probing deletion). */
static void slot_remove(struct usm_endpoints *e, struct slot *s)
{
	size_t i = s - e->slots, j = i, home;

	age_unlink(e, s->idx);
	e->free_idx[e->nfree++] = s->idx - 1;
	s->idx = 0;
	e->npending--;
	for (;;) {
		j = (j + 1) & e->slot_mask;
		if (!e->slots[j].idx)
			return;
		home = e->slots[j].hash & e->slot_mask;
		/* Move j back to i if its home is not in (i, j]. */
		if ((i < j && (home <= i || home > j)) || (i > j && home <= i && home > j)) {
			e->slots[i] = e->slots[j];
			e->slots[j].idx = 0;
			i = j;
		}
	}
}

/* A request leaves without its response: counted in *stage (unanswered, evicted),
 * unless the copy hook says it is a copy of one counted already (a NATed packet's, seen
 * under both addresses): then it was never a request of its own. Before its removal. */
static void pending_lost(struct usm_endpoints *e, const struct pending *p, uint64_t *stage)
{
	if (e->copy && e->copy(&p->conn, e->copy_ctx)) {
		e->st.requests--;
		return;
	}
	(*stage)++;
}

/* The request waiting longest (since it came, in the order requests came) goes. */
static void evict_oldest(struct usm_endpoints *e)
{
	struct pending *p;

	if (!e->oldest)
		return;
	p = &e->pool[e->oldest - 1];
	pending_lost(e, p, &e->st.evicted);
	slot_remove(e, slot_of(e, &p->key, key_hash(&p->key)));
}

/* ---- rows and their index ---- */

static uint64_t row_hash(const struct row_key *k)
{
	uint64_t h = FNV_BASIS;
	uint32_t v[7] = {k->pid,		  k->side,    k->proto,
			 (uint32_t)k->version,	  (uint32_t)k->status, k->grpc,
			 (uint32_t)k->grpc_status};

	h = fnv(h, v, sizeof(v));
	h = fnv(h, k->method, strlen(k->method) + 1);
	return fnv(h, k->path, strlen(k->path));
}

static struct row_key key_of(const struct row *r)
{
	return (struct row_key){r->r.pid,    r->r.side, r->r.proto,	r->r.version, r->r.method,
				r->r.path,   r->r.status, r->r.grpc, r->r.grpc_status};
}

static bool row_is(const struct row *r, const struct row_key *k)
{
	return r->r.pid == k->pid && r->r.side == k->side && r->r.proto == k->proto &&
	       r->r.version == k->version && r->r.status == k->status && r->r.grpc == k->grpc &&
	       r->r.grpc_status == k->grpc_status && !strcmp(r->r.method, k->method) &&
	       !strcmp(r->r.path, k->path);
}

static struct row *row_find(struct usm_endpoints *e, const struct row_key *k)
{
	size_t i = row_hash(k) & e->index_mask;

	for (; e->index[i]; i = (i + 1) & e->index_mask) {
		if (row_is(&e->rows[e->index[i] - 1], k))
			return &e->rows[e->index[i] - 1];
	}
	return NULL;
}

static void index_add(struct usm_endpoints *e, size_t at)
{
	struct row_key k = key_of(&e->rows[at]);
	size_t i = row_hash(&k) & e->index_mask;

	while (e->index[i])
		i = (i + 1) & e->index_mask;
	e->index[i] = at + 1;
}

static struct row *row_add(struct usm_endpoints *e, const struct row_key *k, enum row_kind kind)
{
	struct row *r = &e->rows[e->nrows];

	memset(r, 0, sizeof(*r));
	r->kind = kind;
	r->r.pid = k->pid;
	r->r.side = k->side;
	r->r.proto = k->proto;
	r->r.version = k->version;
	snprintf(r->r.method, sizeof(r->r.method), "%s", k->method);
	snprintf(r->r.path, sizeof(r->r.path), "%s", k->path);
	r->r.status = k->status;
	r->r.grpc = k->grpc;
	r->r.grpc_status = k->grpc_status;
	r->r.seq = ++e->seq;
	index_add(e, e->nrows++);
	e->kinds[kind]++;
	return r;
}

/* The endpoint rows of one (pid, side): what its cap counts. */
static size_t rows_of(const struct usm_endpoints *e, uint32_t pid, enum usm_side side)
{
	size_t i, n = 0;

	for (i = 0; i < e->nrows; i++) {
		const struct row *r = &e->rows[i];

		n += r->kind == ROW_ENDPOINT && r->r.pid == pid && r->r.side == side;
	}
	return n;
}

static struct row_key overflow_key(const struct row_key *k, uint32_t pid)
{
	return (struct row_key){
		pid, k->side, k->proto, k->version, USM_METHOD_OTHER, USM_ROUTE_OVERFLOW, 0};
}

static struct row *table_overflow_row(struct usm_endpoints *e, const struct row_key *k)
{
	struct row_key o = overflow_key(k, USM_PID_OVERFLOW);
	struct row *r = row_find(e, &o);

	return r ? r : row_add(e, &o, ROW_RESERVED);
}

static size_t rows_compact(struct usm_endpoints *e, uint64_t cutoff, size_t ndead,
			   bool fold_exited);

/* The row a paired response is counted in: its endpoint's, or an overflow row. */
static struct row *row_for(struct usm_endpoints *e, const struct row_key *k)
{
	struct row *r = row_find(e, k);
	struct row_key o;

	if (r)
		return r;
	if (rows_of(e, k->pid, k->side) < e->lim.max_rows_per_proc) {
		/* Exited processes' rows give way to a live one's: however many processes
		 * came and went (any user can run them), the table is not theirs. */
		if (e->kinds[ROW_ENDPOINT] >= e->lim.max_rows && e->exited &&
		    k->pid != USM_PID_EXITED) {
			rows_compact(e, 0, 0, true);
			e->st.exited_folded++;
		}
		if (e->kinds[ROW_ENDPOINT] < e->lim.max_rows)
			return row_add(e, k, ROW_ENDPOINT);
		return table_overflow_row(e, k);
	}
	o = overflow_key(k, k->pid);
	r = row_find(e, &o);
	if (r)
		return r;
	if (e->kinds[ROW_PROC_OVERFLOW] < e->proc_reserve)
		return row_add(e, &o, ROW_PROC_OVERFLOW);
	return table_overflow_row(e, k);
}

/* ---- the table ---- */

static size_t or_default(size_t v, size_t dflt)
{
	return v ? v : dflt;
}

struct usm_endpoints *usm_endpoints_new(const struct usm_endpoints_limits *limits)
{
	struct usm_endpoints *e = calloc(1, sizeof(*e));
	size_t nindex = 1;

	if (!e)
		return NULL;
	pthread_mutex_init(&e->lock, NULL);
	if (limits)
		e->lim = *limits;
	e->lim.max_pending = or_default(e->lim.max_pending, DEFAULT_PENDING);
	e->lim.max_rows = or_default(e->lim.max_rows, DEFAULT_ROWS);
	e->lim.max_rows_per_proc = or_default(e->lim.max_rows_per_proc, DEFAULT_PER_PROC);
	if (e->lim.max_rows > UINT32_MAX / 8 || e->lim.max_pending > UINT32_MAX / 8) {
		usm_endpoints_free(e); /* the index holds uint32_t row numbers */
		return NULL;
	}
	e->proc_reserve = 2 * or_default(e->lim.max_rows / e->lim.max_rows_per_proc, 1);
	e->cap = e->lim.max_rows + e->proc_reserve + RESERVED_ROWS;
	while (nindex < 2 * e->cap)
		nindex *= 2;
	e->index_mask = nindex - 1;
	e->nslots = 1;
	while (e->nslots < 2 * e->lim.max_pending)
		e->nslots *= 2;
	e->slot_mask = e->nslots - 1;
	e->slots = calloc(e->nslots, sizeof(*e->slots));
	e->pool = calloc(e->lim.max_pending, sizeof(*e->pool));
	e->free_idx = calloc(e->lim.max_pending, sizeof(*e->free_idx));
	e->rows = calloc(e->cap, sizeof(*e->rows));
	e->index = calloc(nindex, sizeof(*e->index));
	e->pids = calloc(e->cap + e->lim.max_pending, sizeof(*e->pids));
	if (!e->slots || !e->pool || !e->free_idx || !e->rows || !e->index || !e->pids) {
		usm_endpoints_free(e);
		return NULL;
	}
	/* Handed out from the top: entry 0 first. */
	while (e->nfree < e->lim.max_pending) {
		e->free_idx[e->nfree] = (uint32_t)(e->lim.max_pending - 1 - e->nfree);
		e->nfree++;
	}
	return e;
}

void usm_endpoints_free(struct usm_endpoints *e)
{
	if (!e)
		return;
	pthread_mutex_destroy(&e->lock);
	free(e->slots);
	free(e->pool);
	free(e->free_idx);
	free(e->rows);
	free(e->index);
	free(e->pids);
	free(e);
}

static int clamp_version(int v)
{
	return v == 10 || v == 11 || v == 20 ? v : 0;
}

static void on_request(struct usm_endpoints *e, const struct usm_conn_key *key, uint64_t t_ns,
		       const struct usm_http_start *msg, const struct usm_conn_addr *conn)
{
	uint32_t hash = key_hash(key);
	struct slot *s = slot_of(e, key, hash);
	struct pending *p;

	e->st.requests++;
	if (s && s->idx) {
		p = entry_of(e, s);
		pending_lost(e, p, &e->st.unanswered);
		age_unlink(e, s->idx); /* waiting from now */
		age_append(e, s->idx);
	} else {
		if (e->npending == e->lim.max_pending) {
			evict_oldest(e);
			s = slot_of(e, key, hash);
		}
		if (!s)
			return;
		p = slot_fill(e, s, hash, key);
	}
	p->t_ns = t_ns;
	p->answering = false;
	p->version = clamp_version(msg->version);
	p->grpc = msg->grpc;
	memcpy(p->method, msg->method, sizeof(p->method));
	p->method[sizeof(p->method) - 1] = '\0';
	memcpy(p->path, msg->path, sizeof(p->path));
	p->path[sizeof(p->path) - 1] = '\0';
	if (conn)
		p->conn = *conn;
	else
		memset(&p->conn, 0, sizeof(p->conn));
}

/* What on_response counted, for usm_endpoints_pair's caller. */
static void paired_fill(struct usm_paired *out, const struct row_key *k, const struct row *r,
			uint64_t t_ns, uint64_t latency_ns)
{
	out->pid = k->pid;
	out->side = k->side;
	out->version = k->version;
	memcpy(out->method, k->method, sizeof(out->method)); /* the pending entry's arrays */
	memcpy(out->path, k->path, sizeof(out->path));
	out->status = k->status;
	out->grpc = k->grpc;
	out->grpc_status = k->grpc_status;
	out->overflow = r->r.pid == USM_PID_OVERFLOW ? USM_OVERFLOW_TABLE
			: r->kind == ROW_PROC_OVERFLOW ? USM_OVERFLOW_PROC
						       : USM_OVERFLOW_NONE;
	out->t_ns = t_ns;
	out->latency_ns = latency_ns;
}

static bool on_response(struct usm_endpoints *e, const struct usm_conn_key *key,
			enum usm_proto proto, uint64_t t_ns, const struct usm_http_start *msg,
			const struct usm_conn_addr *conn, struct usm_paired *out)
{
	struct pending *p;
	struct row_key k;
	struct slot *s;
	struct row *r;
	uint64_t ns;

	if (usm_http_interim(msg->status)) {
		/* 100 Continue, 103 Early Hints: not the answer; the request keeps waiting,
		 * and its latency runs to the final response. */
		e->st.interim++;
		return false;
	}
	s = slot_of(e, key, key_hash(key));
	e->st.responses++;
	if (!s || !s->idx) {
		e->st.orphan_responses++;
		return false;
	}
	p = entry_of(e, s);
	if (conn && !usm_endpoints_seg_answers(p->conn.seg, conn->seg)) {
		e->st.orphan_responses++;
		return false;
	}
	k = (struct row_key){key->pid,
			     key->side < USM_SIDE__COUNT ? key->side : USM_SIDE_UNKNOWN,
			     proto == USM_PROTO_HTTP ? USM_PROTO_HTTP : USM_PROTO_HTTPS,
			     p->version,
			     p->method,
			     p->path,
			     msg->status,
			     p->grpc,
			     p->grpc ? (msg->grpc_status >= 0 && msg->grpc_status <= 16
						? msg->grpc_status
						: -1)
				     : 0};
	r = row_for(e, &k);
	ns = t_ns > p->t_ns ? t_ns - p->t_ns : 0;
	usm_hist_add(&r->r.latency, ns);
	r->r.last_ns = t_ns;
	if (conn && conn->family)
		r->r.conn = *conn;
	else if (p->conn.family)
		r->r.conn = p->conn;
	e->st.paired++;
	if (r->r.pid == USM_PID_OVERFLOW)
		e->st.table_overflow++;
	else if (r->kind == ROW_PROC_OVERFLOW)
		e->st.proc_overflow++;
	if (out)
		paired_fill(out, &k, r, t_ns, ns);
	slot_remove(e, s);
	return true;
}

bool usm_endpoints_pair(struct usm_endpoints *e, const struct usm_conn_key *key,
			enum usm_proto proto, uint64_t t_ns, const struct usm_http_start *msg,
			const struct usm_conn_addr *conn, struct usm_paired *out)
{
	bool paired = false;

	pthread_mutex_lock(&e->lock);
	if (msg->kind == USM_HTTP_REQUEST)
		on_request(e, key, t_ns, msg, conn);
	else if (msg->kind == USM_HTTP_RESPONSE)
		paired = on_response(e, key, proto, t_ns, msg, conn, out);
	pthread_mutex_unlock(&e->lock);
	return paired;
}

void usm_endpoints_message(struct usm_endpoints *e, const struct usm_conn_key *key,
			   enum usm_proto proto, uint64_t t_ns, const struct usm_http_start *msg,
			   const struct usm_conn_addr *conn)
{
	usm_endpoints_pair(e, key, proto, t_ns, msg, conn, NULL);
}

bool usm_endpoints_seg_answers(uint64_t req, uint64_t resp)
{
	uint32_t req_seq = req >> 32, req_ack = (uint32_t)req;
	uint32_t seq = resp >> 32, ack = (uint32_t)resp;

	if (!req || !resp)
		return true;
	/* Not at the request's first byte or behind it by 1 GiB or less, modulo 2^32 (an
	 * upload may take the acknowledgment any distance past it). */
	if ((uint32_t)(req_seq - ack) < (1u << 30))
		return false;
	return !req_ack || (uint32_t)(seq - req_ack) < (1u << 30);
}

bool usm_endpoints_take(struct usm_endpoints *e, const struct usm_conn_key *key, uint64_t seg,
			uint64_t *t_ns, struct usm_http_start *msg, struct usm_conn_addr *conn)
{
	struct pending *p;
	struct slot *s;
	bool found = false;

	pthread_mutex_lock(&e->lock);
	s = slot_of(e, key, key_hash(key));
	if (s && s->idx && usm_endpoints_seg_answers(entry_of(e, s)->conn.seg, seg)) {
		p = entry_of(e, s);
		*t_ns = p->t_ns;
		memset(msg, 0, sizeof(*msg));
		msg->kind = USM_HTTP_REQUEST;
		msg->version = p->version;
		msg->grpc = p->grpc;
		memcpy(msg->method, p->method, sizeof(msg->method));
		memcpy(msg->path, p->path, sizeof(msg->path));
		*conn = p->conn;
		slot_remove(e, s);
		e->st.requests--; /* withdrawn: counted again where it is given back */
		found = true;
	}
	pthread_mutex_unlock(&e->lock);
	return found;
}

bool usm_endpoints_answering(struct usm_endpoints *e, const struct usm_conn_key *key)
{
	struct slot *s;
	bool found = false;

	pthread_mutex_lock(&e->lock);
	s = slot_of(e, key, key_hash(key));
	if (s && s->idx) {
		entry_of(e, s)->answering = true;
		found = true;
	}
	pthread_mutex_unlock(&e->lock);
	return found;
}

bool usm_endpoints_withdraw(struct usm_endpoints *e, const struct usm_conn_key *key)
{
	struct slot *s;
	bool found = false;

	pthread_mutex_lock(&e->lock);
	s = slot_of(e, key, key_hash(key));
	if (s && s->idx) {
		pending_lost(e, entry_of(e, s), &e->st.unanswered);
		slot_remove(e, s);
		found = true;
	}
	pthread_mutex_unlock(&e->lock);
	return found;
}

/* ---- expiry and folding: both compact the rows in order and rebuild the index ---- */

static int cmp_pid(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static bool is_dead(const struct usm_endpoints *e, size_t ndead, uint32_t pid)
{
	return ndead && bsearch(&pid, e->pids, ndead, sizeof(pid), cmp_pid);
}

static void merge(struct row *into, const struct row *from)
{
	usm_hist_merge(&into->r.latency, &from->r.latency);
	if (from->r.last_ns > into->r.last_ns) {
		into->r.last_ns = from->r.last_ns;
		if (from->r.conn.family)
			into->r.conn = from->r.conn;
	}
}

/* Endpoint row r of an exited process, as its side's exited overflow row: reserved. */
static void fold_exited_row(struct usm_endpoints *e, struct row *r)
{
	snprintf(r->r.method, sizeof(r->r.method), "%s", USM_METHOD_OTHER);
	snprintf(r->r.path, sizeof(r->r.path), "%s", USM_ROUTE_OVERFLOW);
	r->r.status = 0;
	r->r.grpc = false;
	r->r.grpc_status = 0;
	e->kinds[ROW_ENDPOINT]--;
	e->kinds[ROW_RESERVED]++;
	r->kind = ROW_RESERVED;
}

/*
 * Drop the rows whose last message is before cutoff; relabel those of the ndead pids
 * in e->pids to USM_PID_EXITED, merging each into the USM_PID_EXITED row of the same
 * key when there is one (the earlier row, whose seq stays); with fold_exited, the
 * endpoint rows of USM_PID_EXITED into their exited overflow rows. Returns the rows
 * dropped.
 */
static size_t rows_compact(struct usm_endpoints *e, uint64_t cutoff, size_t ndead,
			   bool fold_exited)
{
	size_t i, w = 0, gone = 0;
	struct row_key k;
	struct row *r, *into;

	memset(e->index, 0, (e->index_mask + 1) * sizeof(*e->index));
	e->exited = 0;
	for (i = 0; i < e->nrows; i++) {
		r = &e->rows[i];
		if (r->r.last_ns < cutoff) {
			e->kinds[r->kind]--;
			gone++;
			continue;
		}
		if (is_dead(e, ndead, r->r.pid)) {
			r->r.pid = USM_PID_EXITED;
			if (r->kind == ROW_PROC_OVERFLOW) {
				e->kinds[ROW_PROC_OVERFLOW]--;
				e->kinds[ROW_RESERVED]++;
				r->kind = ROW_RESERVED;
			}
		}
		if (fold_exited && r->r.pid == USM_PID_EXITED && r->kind == ROW_ENDPOINT)
			fold_exited_row(e, r);
		k = key_of(r);
		into = row_find(e, &k); /* only among the rows already kept */
		if (into) {
			merge(into, r);
			e->kinds[r->kind]--;
			continue;
		}
		e->exited += r->r.pid == USM_PID_EXITED && r->kind == ROW_ENDPOINT;
		if (w != i)
			e->rows[w] = *r;
		index_add(e, w++);
	}
	e->nrows = w;
	return gone;
}

void usm_endpoints_set_copy_hook(struct usm_endpoints *e, usm_copy_fn copy, void *ctx)
{
	pthread_mutex_lock(&e->lock);
	e->copy = copy;
	e->copy_ctx = ctx;
	pthread_mutex_unlock(&e->lock);
}

void usm_endpoints_set_expiry(struct usm_endpoints *e, uint64_t expiry_ns)
{
	pthread_mutex_lock(&e->lock);
	e->lim.expiry_ns = expiry_ns;
	pthread_mutex_unlock(&e->lock);
}

/* Requests pending since before `before` will not be answered: counted, dropped. A
 * removal shifts a later entry of its probe run into the slot, so the slot is looked
 * at again; an entry that wraps round may be looked at twice, which is harmless. */
static void pending_expire(struct usm_endpoints *e, uint64_t before)
{
	size_t i = 0;

	while (i < e->nslots) {
		if (e->slots[i].idx && entry_of(e, &e->slots[i])->t_ns < before &&
		    !entry_of(e, &e->slots[i])->answering) {
			pending_lost(e, entry_of(e, &e->slots[i]), &e->st.unanswered);
			slot_remove(e, &e->slots[i]);
			continue;
		}
		i++;
	}
}

size_t usm_endpoints_expire(struct usm_endpoints *e, uint64_t now_ns)
{
	size_t gone = 0;

	pthread_mutex_lock(&e->lock);
	if (e->lim.expiry_ns && now_ns > e->lim.expiry_ns) {
		gone = rows_compact(e, now_ns - e->lim.expiry_ns, 0, false);
		e->st.expired += gone;
		pending_expire(e, now_ns - e->lim.expiry_ns);
	}
	pthread_mutex_unlock(&e->lock);
	return gone;
}

static bool is_process(uint32_t pid)
{
	return pid != USM_PID_NONE && pid != USM_PID_EXITED && pid != USM_PID_OVERFLOW;
}

/* The processes seen in rows and pending requests that alive() says are gone, sorted
 * into e->pids; returns how many. alive() is asked once per process. */
static size_t dead_pids(struct usm_endpoints *e, bool (*alive)(uint32_t pid, void *ctx), void *ctx)
{
	size_t i, n = 0, ndead = 0;

	for (i = 0; i < e->nrows; i++) {
		if (is_process(e->rows[i].r.pid))
			e->pids[n++] = e->rows[i].r.pid;
	}
	for (i = 0; i < e->nslots; i++) {
		if (e->slots[i].idx && is_process(entry_of(e, &e->slots[i])->key.pid))
			e->pids[n++] = entry_of(e, &e->slots[i])->key.pid;
	}
	qsort(e->pids, n, sizeof(*e->pids), cmp_pid);
	for (i = 0; i < n; i++) {
		if ((!i || e->pids[i] != e->pids[i - 1]) && !alive(e->pids[i], ctx))
			e->pids[ndead++] = e->pids[i]; /* ndead <= i: still sorted */
	}
	return ndead;
}

int usm_endpoints_sweep(struct usm_endpoints *e, bool (*alive)(uint32_t pid, void *ctx),
			void *ctx)
{
	size_t ndead, i;

	pthread_mutex_lock(&e->lock);
	ndead = dead_pids(e, alive, ctx);
	if (ndead) {
		rows_compact(e, 0, ndead, false);
		/* A gone process's requests will not be answered: counted as such, like those
		 * that expire. Removal re-seats later entries into slot i: look at it again. */
		for (i = 0; i < e->nslots;) {
			if (e->slots[i].idx &&
			    is_dead(e, ndead, entry_of(e, &e->slots[i])->key.pid)) {
				pending_lost(e, entry_of(e, &e->slots[i]), &e->st.unanswered);
				slot_remove(e, &e->slots[i]);
			} else {
				i++;
			}
		}
	}
	pthread_mutex_unlock(&e->lock);
	return (int)ndead;
}

size_t usm_endpoints_rows(struct usm_endpoints *e, struct usm_endpoint_row **out)
{
	size_t n, i;

	pthread_mutex_lock(&e->lock);
	n = e->nrows;
	*out = malloc((n ? n : 1) * sizeof(**out));
	if (*out) {
		for (i = 0; i < n; i++)
			(*out)[i] = e->rows[i].r;
	} else {
		n = 0;
	}
	pthread_mutex_unlock(&e->lock);
	return n;
}

void usm_endpoints_stats(struct usm_endpoints *e, struct usm_endpoints_stats *out)
{
	pthread_mutex_lock(&e->lock);
	*out = e->st;
	out->pending = e->npending;
	out->rows = e->nrows;
	pthread_mutex_unlock(&e->lock);
}
