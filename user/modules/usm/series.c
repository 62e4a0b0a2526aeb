// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The cumulative /metrics series (series.h): an array in creation order, found through
 * an open-addressing index of their keys' hashes; expiry compacts the array in order and
 * rebuilds the index. The array keeps room for the four overflow series, so that a
 * response always has a series to go to, even when the array cannot grow.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "series.h"

#define INITIAL_CAP 64

struct entry {
	struct usm_series s;
	uint64_t last_ns; /* its latest response's time */
	uint32_t hash;
	bool admitted; /* holds a place in the budget (overflow series may not) */
};

struct usm_series_set {
	pthread_mutex_t lock;
	struct entry *e; /* creation order */
	size_t n, cap;
	uint32_t *index; /* entry + 1, 0 when empty; a power of two >= 2 x cap */
	size_t index_mask;
	size_t admitted;
	unsigned int budget;
	bool containers;
	uint64_t expiry_ns;
	uint64_t series_budget;
};

static uint32_t fnv_str(uint64_t *h, const char *s)
{
	for (; *s; s++)
		*h = (*h ^ (unsigned char)*s) * 1099511628211ull;
	*h = (*h ^ 0xff) * 1099511628211ull; /* a separator: ("ab","c") != ("a","bc") */
	return (uint32_t)(*h ^ (*h >> 32));
}

static uint32_t key_hash(const struct usm_series_key *k)
{
	uint64_t h = 1469598103934665603ull ^ k->family;

	fnv_str(&h, k->route);
	fnv_str(&h, k->method);
	fnv_str(&h, k->status);
	fnv_str(&h, k->version);
	return fnv_str(&h, k->container);
}

static struct entry *find(struct usm_series_set *s, const struct usm_series_key *k, uint32_t hash)
{
	size_t i = hash & s->index_mask;
	struct entry *e;

	for (; s->index[i]; i = (i + 1) & s->index_mask) {
		e = &s->e[s->index[i] - 1];
		if (e->hash == hash && !usm_series_key_cmp(&e->s.key, k))
			return e;
	}
	return NULL;
}

static void index_add(struct usm_series_set *s, size_t at)
{
	size_t i = s->e[at].hash & s->index_mask;

	while (s->index[i])
		i = (i + 1) & s->index_mask;
	s->index[i] = (uint32_t)at + 1;
}

static void index_rebuild(struct usm_series_set *s)
{
	size_t i;

	memset(s->index, 0, (s->index_mask + 1) * sizeof(*s->index));
	for (i = 0; i < s->n; i++)
		index_add(s, i);
}

/* Room for cap entries (and their index); false when out of memory, nothing changed. */
static bool reserve(struct usm_series_set *s, size_t cap)
{
	size_t nindex = 1;
	struct entry *e;
	uint32_t *index;

	if (cap <= s->cap)
		return true;
	if (cap > UINT32_MAX / 4)
		return false;
	while (nindex < 2 * cap)
		nindex *= 2;
	index = calloc(nindex, sizeof(*index));
	e = index ? realloc(s->e, cap * sizeof(*e)) : NULL;
	if (!e) {
		free(index);
		return false;
	}
	free(s->index);
	s->e = e;
	s->cap = cap;
	s->index = index;
	s->index_mask = nindex - 1;
	index_rebuild(s);
	return true;
}

struct usm_series_set *usm_series_set_new(void)
{
	struct usm_series_set *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	s->budget = 2000;
	if (!reserve(s, INITIAL_CAP)) {
		usm_series_set_free(s);
		return NULL;
	}
	return s;
}

void usm_series_set_free(struct usm_series_set *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s->e);
	free(s->index);
	free(s);
}

void usm_series_set_configure(struct usm_series_set *s, unsigned int budget, bool containers,
			      uint64_t expiry_ns)
{
	pthread_mutex_lock(&s->lock);
	s->budget = budget;
	s->expiry_ns = expiry_ns;
	if (containers != s->containers) {
		__atomic_store_n(&s->containers, containers, __ATOMIC_RELAXED);
		s->n = 0;
		s->admitted = 0;
		index_rebuild(s);
	}
	pthread_mutex_unlock(&s->lock);
}

/* Asked before every response's add (whether to look its container up): no lock. A
 * change racing with it only sends that response to its series without a container. */
bool usm_series_set_containers(struct usm_series_set *s)
{
	return __atomic_load_n(&s->containers, __ATOMIC_RELAXED);
}

static struct entry *insert(struct usm_series_set *s, const struct usm_series_key *k, uint32_t hash,
			    bool admitted)
{
	struct entry *e = &s->e[s->n];

	memset(e, 0, sizeof(*e));
	e->s.key = *k;
	e->hash = hash;
	e->admitted = admitted;
	s->admitted += admitted;
	index_add(s, s->n++);
	return e;
}

/* A new series in the budget, if it has a place and the array room for it besides the
 * overflow series' (grown by doubling, not far past what the budget can fill). Out of
 * memory, the response goes to the overflow series, as past the budget. */
static struct entry *admit(struct usm_series_set *s, const struct usm_series_key *k, uint32_t hash)
{
	size_t want = s->n + 1 + USM_FAM__COUNT, cap = 2 * s->cap,
	       most = (size_t)s->budget + 2 * USM_FAM__COUNT;

	if (s->admitted >= s->budget)
		return NULL;
	if (want > s->cap) {
		if (cap > most)
			cap = most;
		if (!reserve(s, cap > want ? cap : want))
			return NULL;
	}
	return insert(s, k, hash, true);
}

void usm_series_set_add(struct usm_series_set *s, const struct usm_paired *p, const char *container)
{
	struct usm_series_key k;
	struct entry *e;
	uint32_t hash;

	if (p->side != USM_SIDE_SERVER && p->side != USM_SIDE_CLIENT)
		return;
	pthread_mutex_lock(&s->lock);
	usm_series_key_of(&k, p, s->containers ? container : NULL);
	hash = key_hash(&k);
	e = find(s, &k, hash);
	if (!e)
		e = admit(s, &k, hash);
	if (!e) {
		/* Past the budget: the family's overflow series, made outside it (the
		 * array always has room for it). */
		if (p->overflow == USM_OVERFLOW_NONE)
			s->series_budget++;
		usm_series_key_overflow(&k, k.family);
		hash = key_hash(&k);
		e = find(s, &k, hash);
		if (!e)
			e = insert(s, &k, hash, false);
	}
	usm_series_observe(&e->s, p->latency_ns);
	if (p->t_ns > e->last_ns)
		e->last_ns = p->t_ns;
	pthread_mutex_unlock(&s->lock);
}

size_t usm_series_set_expire(struct usm_series_set *s, uint64_t now_ns)
{
	size_t i, w = 0, gone;
	uint64_t cutoff;

	pthread_mutex_lock(&s->lock);
	if (!s->expiry_ns || now_ns <= s->expiry_ns) {
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	cutoff = now_ns - s->expiry_ns;
	for (i = 0; i < s->n; i++) {
		if (s->e[i].last_ns < cutoff) {
			s->admitted -= s->e[i].admitted;
			continue;
		}
		if (w != i)
			s->e[w] = s->e[i];
		w++;
	}
	gone = s->n - w;
	s->n = w;
	if (gone)
		index_rebuild(s);
	pthread_mutex_unlock(&s->lock);
	return gone;
}

size_t usm_series_set_snapshot(struct usm_series_set *s, struct usm_series **out, bool *containers,
			       uint64_t *series_budget)
{
	size_t n, i;

	pthread_mutex_lock(&s->lock);
	n = s->n;
	*out = malloc((n ? n : 1) * sizeof(**out));
	if (*out) {
		for (i = 0; i < n; i++)
			(*out)[i] = s->e[i].s;
	} else {
		n = 0;
	}
	*containers = s->containers;
	*series_budget = s->series_budget;
	pthread_mutex_unlock(&s->lock);
	return n;
}
