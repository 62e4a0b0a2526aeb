// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Which processes have GPU series of their own (gpu_series.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_series.h"

/* The counters a row exports, as one vector: what "other" sums. */
enum {
	V_CALLS = 0,
	V_FAILED = V_CALLS + GPU_FN__COUNT,
	V_THREADS = V_FAILED + GPU_FN__COUNT,
	V_ALLOCS_UNTRACKED,
	V_CALLS_UNTRACKED,
	V_SYNC_NS,
	V_MEMCPY,
	V_DEV_LAUNCHES = V_MEMCPY + GPU_MEMCPY__COUNT,
	V_DEV_ERRORS = V_DEV_LAUNCHES + GPU_DEV_SLOTS,
	V_DEV_ALLOCS = V_DEV_ERRORS + GPU_DEV_SLOTS,
	V__COUNT = V_DEV_ALLOCS + GPU_DEV_SLOTS,
};

/* A process: its pid, when its row was made, its owner (gpu_proc_stats.owner), and
 * its counters last seen (by a report). */
struct sproc {
	__u32 pid;
	__u32 owner;
	__u64 born;
	__u64 v[V__COUNT];
};

/* A process with series of its own, and its counters as a scrape last showed them:
 * when it is gone, what it counted after (sproc.v less shown) is "other"'s, which sums
 * what no series shows. */
struct sown {
	struct sproc p; /* first: found and sorted as a sproc */
	__u64 shown[V__COUNT];
};

struct bpftel_gpu_series {
	pthread_mutex_t lock;
	size_t budget;
	size_t per_owner; /* of the budget, an owner but root's at most; 0: no cap */
	struct sown *own; /* with series of their own (at most budget) */
	size_t nown;
	struct sproc *folded;
	size_t nfolded;
	__u64 retired[V__COUNT]; /* processes gone: their counts no series showed */
	bool ever_folded;
};

static void vals_of(const struct bpftel_gpu_proc *r, __u64 *v)
{
	const struct gpu_proc_stats *st = &r->st;
	int k;

	memcpy(v + V_CALLS, st->calls, sizeof(st->calls));
	memcpy(v + V_FAILED, st->failed, sizeof(st->failed));
	v[V_THREADS] = st->threads;
	v[V_ALLOCS_UNTRACKED] = st->allocs_untracked;
	v[V_CALLS_UNTRACKED] = st->calls_untracked;
	v[V_SYNC_NS] = st->sync_ns;
	memcpy(v + V_MEMCPY, st->memcpy_bytes, sizeof(st->memcpy_bytes));
	for (k = 0; k < GPU_DEV_SLOTS; k++) {
		v[V_DEV_LAUNCHES + k] = st->dev[k].launches;
		v[V_DEV_ERRORS + k] = st->dev[k].errors;
		v[V_DEV_ALLOCS + k] = st->dev[k].allocs;
	}
}

/* The "other" row from its counters v, and the gauges of the live folded rows. */
static void other_row(struct bpftel_gpu_proc *o, const __u64 *v, const struct bpftel_gpu_proc *live,
		      size_t nlive)
{
	struct gpu_proc_stats *st;
	size_t i;
	int k;

	memset(o, 0, sizeof(*o));
	st = &o->st;
	memcpy(o->comm, "other", sizeof("other"));
	memcpy(st->calls, v + V_CALLS, sizeof(st->calls));
	memcpy(st->failed, v + V_FAILED, sizeof(st->failed));
	memcpy(o->errors_other, v + V_FAILED, sizeof(o->errors_other));
	st->threads = v[V_THREADS];
	st->allocs_untracked = v[V_ALLOCS_UNTRACKED];
	st->calls_untracked = v[V_CALLS_UNTRACKED];
	st->sync_ns = v[V_SYNC_NS];
	memcpy(st->memcpy_bytes, v + V_MEMCPY, sizeof(st->memcpy_bytes));
	for (k = 0; k < GPU_DEV_SLOTS; k++) {
		st->dev[k].launches = v[V_DEV_LAUNCHES + k];
		st->dev[k].errors = v[V_DEV_ERRORS + k];
		st->dev[k].allocs = v[V_DEV_ALLOCS + k];
	}
	o->kseries_other = bpftel_gpu_launches(st); /* no kernel series of its own */
	for (i = 0; i < nlive; i++) {
		for (k = 0; k < GPU_MEM__COUNT; k++) {
			st->mem[k].outstanding_bytes = bpftel_add_sat_s64(
				st->mem[k].outstanding_bytes, live[i].st.mem[k].outstanding_bytes);
			st->mem[k].peak_bytes = bpftel_add_sat_s64(st->mem[k].peak_bytes,
								   live[i].st.mem[k].peak_bytes);
			if (live[i].kinds[k].oldest_ns > o->kinds[k].oldest_ns)
				o->kinds[k].oldest_ns = live[i].kinds[k].oldest_ns;
		}
		for (k = 0; k < GPU_DEV_SLOTS; k++)
			st->dev[k].outstanding_bytes = bpftel_add_sat_s64(
				st->dev[k].outstanding_bytes, live[i].st.dev[k].outstanding_bytes);
	}
}

static int cmp_sproc(const void *a, const void *b)
{
	__u32 x = ((const struct sproc *)a)->pid, y = ((const struct sproc *)b)->pid;

	return x < y ? -1 : x > y;
}

/* pid's entry in arr (sorted by pid), if it is of the process born then. A born time
 * of 0 is one not read yet (the row made, its stamp to come): an entry of 0 is the
 * process whatever stamp its row has since; a row of 0 is a new one, made again since
 * an entry's row was stamped (an exec), so no stamped entry's. */
static struct sproc *find_in(void *arr, size_t n, size_t size, __u32 pid, __u64 born)
{
	struct sproc key = {.pid = pid}, *p;

	p = n ? bsearch(&key, arr, n, size, cmp_sproc) : NULL;
	if (!p || (p->born && p->born != born))
		return NULL;
	if (!p->born)
		p->born = born;
	return p;
}

static struct sproc *find(struct sproc *arr, size_t n, __u32 pid, __u64 born)
{
	return find_in(arr, n, sizeof(*arr), pid, born);
}

static struct sown *find_own(struct sown *arr, size_t n, __u32 pid, __u64 born)
{
	return (struct sown *)find_in(arr, n, sizeof(*arr), pid, born);
}

/* pid's entry in own, if of the process born then exactly; stamps nothing: a scrape's
 * rows may be older than the state (another report updated it since), and a row of a
 * program exec'd away must not stamp the new program's entry with its birth. */
static struct sown *find_own_exact(struct sown *arr, size_t n, __u32 pid, __u64 born)
{
	struct sproc key = {.pid = pid};
	struct sown *p = n ? bsearch(&key, arr, n, sizeof(*arr), cmp_sproc) : NULL;

	return p && p->p.born == born ? p : NULL;
}

struct bpftel_gpu_series *bpftel_gpu_series__new(size_t budget)
{
	struct bpftel_gpu_series *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	s->budget = budget;
	return s;
}

void bpftel_gpu_series__set_per_owner(struct bpftel_gpu_series *s, size_t per_owner)
{
	pthread_mutex_lock(&s->lock);
	s->per_owner = per_owner;
	pthread_mutex_unlock(&s->lock);
}

/* May a new process of owner have series of its own, nown of own[] given? Root's
 * (owner 0), as in the tables' shares (lib/fair_share.h), while the budget lasts. */
static bool admit(const struct bpftel_gpu_series *s, const struct sown *own, size_t nown,
		  __u32 owner)
{
	size_t i, held = 0;

	if (nown >= s->budget)
		return false;
	if (!owner || !s->per_owner)
		return true;
	for (i = 0; i < nown; i++)
		held += own[i].p.owner == owner;
	return held < s->per_owner;
}

static void reset_locked(struct bpftel_gpu_series *s)
{
	free(s->own);
	free(s->folded);
	s->own = NULL;
	s->folded = NULL;
	s->nown = s->nfolded = 0;
	memset(s->retired, 0, sizeof(s->retired));
	s->ever_folded = false;
}

void bpftel_gpu_series__reset(struct bpftel_gpu_series *s)
{
	pthread_mutex_lock(&s->lock);
	reset_locked(s);
	pthread_mutex_unlock(&s->lock);
}

void bpftel_gpu_series__free(struct bpftel_gpu_series *s)
{
	if (!s)
		return;
	reset_locked(s);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* Rows with series of their own first (in no particular order: /metrics has none);
 * returns their count. */
static size_t own_first(struct bpftel_gpu_proc *rows, size_t n, bool *own)
{
	struct bpftel_gpu_proc tmp;
	size_t i = 0, j = n;
	bool b;

	while (i < j) {
		if (own[i]) {
			i++;
			continue;
		}
		j--;
		tmp = rows[i];
		rows[i] = rows[j];
		rows[j] = tmp;
		b = own[i];
		own[i] = own[j];
		own[j] = b;
	}
	return i;
}

/* What a process gone counted that no scrape showed (v less shown): "other"'s. True
 * when that is anything. */
static bool retire(__u64 *retired, const __u64 *v, const __u64 *shown)
{
	bool any = false;
	int k;

	for (k = 0; k < V__COUNT; k++) {
		if (v[k] <= shown[k])
			continue;
		retired[k] = bpftel_add_sat(retired[k], v[k] - shown[k]);
		any = true;
	}
	return any;
}

void bpftel_gpu_series__update(struct bpftel_gpu_series *s, struct bpftel_gpu_proc *rows, size_t n)
{
	size_t i, nown = 0, nfolded = 0, room = (n < s->budget ? n : s->budget) + 1;
	struct sown *own = calloc(room, sizeof(*own)), *o;
	struct sproc *folded = calloc(n + 1, sizeof(*folded)), *p;
	static const __u64 none[V__COUNT];
	bool *kept = NULL, *kept_own = NULL;

	pthread_mutex_lock(&s->lock);
	if (!own || !folded || !(kept = calloc(s->nfolded + 1, sizeof(*kept))) ||
	    !(kept_own = calloc(s->nown + 1, sizeof(*kept_own)))) {
		/* Out of memory: nothing changes; what is known keeps its place. */
		for (i = 0; i < n; i++)
			rows[i].folded = !find_own(s->own, s->nown, rows[i].pid, rows[i].st.born_ns);
		goto out;
	}
	/* Known processes keep what they had. */
	for (i = 0; i < n; i++) {
		rows[i].folded = false;
		if ((o = find_own(s->own, s->nown, rows[i].pid, rows[i].st.born_ns))) {
			kept_own[o - s->own] = true;
			own[nown] = *o;
			vals_of(&rows[i], own[nown++].p.v);
		} else if ((p = find(s->folded, s->nfolded, rows[i].pid, rows[i].st.born_ns))) {
			kept[p - s->folded] = true;
			folded[nfolded] = (struct sproc){rows[i].pid, rows[i].st.owner,
							 rows[i].st.born_ns};
			vals_of(&rows[i], folded[nfolded++].v);
			rows[i].folded = true;
		}
	}
	qsort(own, nown, sizeof(*own), cmp_sproc);
	/* Processes gone (or another program now): what no series of theirs showed is
	 * "other"'s, all of a folded one's. */
	for (i = 0; i < s->nfolded; i++)
		if (!kept[i])
			retire(s->retired, s->folded[i].v, none);
	for (i = 0; i < s->nown; i++)
		if (!kept_own[i] && retire(s->retired, s->own[i].p.v, s->own[i].shown))
			s->ever_folded = true; /* "other" has counts to show */
	/* New processes: series of their own while the budget lasts. */
	for (i = 0; i < n; i++) {
		if (rows[i].folded || find_own(own, nown, rows[i].pid, rows[i].st.born_ns))
			continue;
		if (!rows[i].gone && nown + 1 < room && admit(s, own, nown, rows[i].st.owner)) {
			own[nown].p = (struct sproc){rows[i].pid, rows[i].st.owner,
						     rows[i].st.born_ns};
			vals_of(&rows[i], own[nown++].p.v);
			qsort(own, nown, sizeof(*own), cmp_sproc);
			continue;
		}
		folded[nfolded] = (struct sproc){rows[i].pid, rows[i].st.owner, rows[i].st.born_ns};
		vals_of(&rows[i], folded[nfolded++].v);
		rows[i].folded = true;
	}
	qsort(folded, nfolded, sizeof(*folded), cmp_sproc);
	free(s->own);
	free(s->folded);
	s->own = own;
	s->nown = nown;
	s->folded = folded;
	s->nfolded = nfolded;
	own = NULL;
	folded = NULL;
	s->ever_folded |= nfolded > 0;
out:
	pthread_mutex_unlock(&s->lock);
	free(own);
	free(folded);
	free(kept);
	free(kept_own);
}

/* A scrape shows row's counters (a process with series of its own, o): its shown. */
static void note_shown(struct sown *o, const struct bpftel_gpu_proc *row)
{
	__u64 v[V__COUNT];
	int k;

	vals_of(row, v);
	for (k = 0; k < V__COUNT; k++)
		if (v[k] > o->shown[k])
			o->shown[k] = v[k];
}

size_t bpftel_gpu_series__fold(struct bpftel_gpu_series *s, struct bpftel_gpu_proc *rows, size_t n,
			       bool *other)
{
	bool *mine = calloc(n + 1, sizeof(*mine));
	__u64 sum[V__COUNT];
	size_t i, k, m, nf;
	struct sown *o;

	*other = false;
	if (!mine)
		return 0; /* no series this scrape: none goes down */
	pthread_mutex_lock(&s->lock);
	/* A process whose series a later report retired (it exited, and what it counted
	 * past its shown is "other"'s now) is left out: shown here, it would be counted
	 * twice. */
	for (i = 0; i < n; i++) {
		o = rows[i].folded
			    ? NULL
			    : find_own_exact(s->own, s->nown, rows[i].pid, rows[i].st.born_ns);
		if (o)
			note_shown(o, &rows[i]);
		mine[i] = o;
	}
	m = own_first(rows, n, mine);
	/* Then the folded ones, the rows left out last. */
	for (i = m; i < n; i++)
		mine[i] = rows[i].folded;
	nf = own_first(rows + m, n - m, mine + m);
	if (s->ever_folded) {
		struct bpftel_gpu_proc other_proc;

		memcpy(sum, s->retired, sizeof(sum));
		for (i = 0; i < s->nfolded; i++)
			for (k = 0; k < V__COUNT; k++)
				sum[k] = bpftel_add_sat(sum[k], s->folded[i].v[k]);
		/* The folded rows are rows[m..m + nf): read before rows[m] is overwritten. */
		other_row(&other_proc, sum, rows + m, nf);
		rows[m] = other_proc;
		*other = true;
	}
	pthread_mutex_unlock(&s->lock);
	free(mine);
	return m;
}
