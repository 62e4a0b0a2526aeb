// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "endpoints.h"

#define OTHER_PATH "(other)"

struct pending {
	struct usm_conn_key key;
	uint64_t t_ns;
	char method[USM_METHOD_MAX];
	char path[USM_PATH_MAX];
	bool used;
};

struct usm_endpoints {
	pthread_mutex_t lock;
	size_t max_pending, max_rows, max_paths;
	struct pending *pending; /* open addressing, 2 x max_pending slots */
	size_t nslots, npending;
	struct usm_endpoint_row *rows;
	size_t nrows;
	struct usm_endpoints_stats st;
};

static uint64_t hash_key(const struct usm_conn_key *k)
{
	const unsigned char *p = (const unsigned char *)k;
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	size_t i;

	for (i = 0; i < sizeof(*k); i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

struct usm_endpoints *usm_endpoints_new(size_t max_pending, size_t max_rows, size_t max_paths)
{
	struct usm_endpoints *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	pthread_mutex_init(&e->lock, NULL);
	e->max_pending = max_pending ? max_pending : 1;
	e->max_rows = max_rows;
	e->max_paths = max_paths;
	e->nslots = 2 * e->max_pending;
	e->pending = calloc(e->nslots, sizeof(*e->pending));
	e->rows = calloc(max_rows ? max_rows : 1, sizeof(*e->rows));
	if (!e->pending || !e->rows) {
		usm_endpoints_free(e);
		return NULL;
	}
	return e;
}

void usm_endpoints_free(struct usm_endpoints *e)
{
	if (!e)
		return;
	pthread_mutex_destroy(&e->lock);
	free(e->pending);
	free(e->rows);
	free(e);
}

/* The slot holding key, or the empty slot where it would go. */
static struct pending *slot_of(struct usm_endpoints *e, const struct usm_conn_key *key)
{
	size_t i = hash_key(key) % e->nslots, n;

	for (n = 0; n < e->nslots; n++, i = (i + 1) % e->nslots) {
		if (!e->pending[i].used || !memcmp(&e->pending[i].key, key, sizeof(*key)))
			return &e->pending[i];
	}
	return NULL; /* cannot happen: at most half the slots are used */
}

/* Remove slot s and re-seat the entries after it (linear probing deletion). */
static void slot_remove(struct usm_endpoints *e, struct pending *s)
{
	size_t i = s - e->pending, j = i, home;
	struct pending tmp;

	e->pending[i].used = false;
	e->npending--;
	for (;;) {
		j = (j + 1) % e->nslots;
		if (!e->pending[j].used)
			return;
		home = hash_key(&e->pending[j].key) % e->nslots;
		/* Move j back to i if its home is not in (i, j]. */
		if ((i < j && (home <= i || home > j)) || (i > j && home <= i && home > j)) {
			tmp = e->pending[j];
			e->pending[j].used = false;
			e->pending[i] = tmp;
			i = j;
		}
	}
}

static void evict_oldest(struct usm_endpoints *e)
{
	struct pending *oldest = NULL;
	size_t i;

	for (i = 0; i < e->nslots; i++) {
		if (e->pending[i].used && (!oldest || e->pending[i].t_ns < oldest->t_ns))
			oldest = &e->pending[i];
	}
	if (oldest) {
		slot_remove(e, oldest);
		e->st.evicted++;
	}
}

static struct usm_endpoint_row *row_find(struct usm_endpoints *e, uint32_t pid,
					 enum usm_proto proto, const char *method, const char *path,
					 int status)
{
	size_t i;

	for (i = 0; i < e->nrows; i++) {
		struct usm_endpoint_row *r = &e->rows[i];

		if (r->pid == pid && r->proto == proto && r->status == status &&
		    !strcmp(r->method, method) && !strcmp(r->path, path))
			return r;
	}
	return NULL;
}

static size_t paths_of(struct usm_endpoints *e, uint32_t pid)
{
	size_t i, n = 0;

	for (i = 0; i < e->nrows; i++)
		n += e->rows[i].pid == pid;
	return n;
}

static struct usm_endpoint_row *row_get(struct usm_endpoints *e, uint32_t pid, enum usm_proto proto,
					const char *method, const char *path, int status)
{
	struct usm_endpoint_row *r = row_find(e, pid, proto, method, path, status);

	if (r)
		return r;
	if (strcmp(path, OTHER_PATH) && paths_of(e, pid) >= e->max_paths) {
		e->st.path_overflow++;
		return row_get(e, pid, proto, method, OTHER_PATH, status);
	}
	if (e->nrows == e->max_rows) {
		e->st.row_overflow++;
		return NULL;
	}
	r = &e->rows[e->nrows++];
	memset(r, 0, sizeof(*r));
	r->pid = pid;
	r->proto = proto;
	r->status = status;
	snprintf(r->method, sizeof(r->method), "%s", method);
	snprintf(r->path, sizeof(r->path), "%s", path);
	return r;
}

void usm_endpoints_message(struct usm_endpoints *e, const struct usm_conn_key *key,
			   enum usm_proto proto, uint64_t t_ns, const struct usm_http_start *msg)
{
	struct usm_endpoint_row *r;
	struct pending *p;

	pthread_mutex_lock(&e->lock);
	p = slot_of(e, key);
	if (msg->kind == USM_HTTP_REQUEST) {
		e->st.requests++;
		if (p && p->used) {
			e->st.unanswered++;
		} else {
			if (e->npending == e->max_pending) {
				evict_oldest(e);
				p = slot_of(e, key);
			}
			if (!p) {
				pthread_mutex_unlock(&e->lock);
				return;
			}
			p->used = true;
			p->key = *key;
			e->npending++;
		}
		p->t_ns = t_ns;
		memcpy(p->method, msg->method, sizeof(p->method));
		memcpy(p->path, msg->path, sizeof(p->path));
	} else if (msg->kind == USM_HTTP_RESPONSE) {
		e->st.responses++;
		if (!p || !p->used) {
			e->st.orphan_responses++;
		} else {
			r = row_get(e, key->pid, proto, p->method, p->path, msg->status);
			if (r)
				usm_hist_add(&r->latency, t_ns > p->t_ns ? t_ns - p->t_ns : 0);
			e->st.paired++;
			slot_remove(e, p);
		}
	}
	pthread_mutex_unlock(&e->lock);
}

size_t usm_endpoints_rows(struct usm_endpoints *e, struct usm_endpoint_row **out)
{
	size_t n;

	pthread_mutex_lock(&e->lock);
	n = e->nrows;
	*out = malloc((n ? n : 1) * sizeof(**out));
	if (*out)
		memcpy(*out, e->rows, n * sizeof(**out));
	else
		n = 0;
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

int usm_endpoints_sweep(struct usm_endpoints *e, bool (*alive)(uint32_t pid))
{
	struct usm_endpoint_row *r, *into;
	uint32_t dead[64];
	int ndead = 0, k;
	size_t i;

	pthread_mutex_lock(&e->lock);
	for (i = 0; i < e->nrows && ndead < 64; i++) {
		r = &e->rows[i];
		if (r->pid == USM_PID_NONE || r->pid == USM_PID_EXITED || alive(r->pid))
			continue;
		for (k = 0; k < ndead && dead[k] != r->pid; k++)
			;
		if (k == ndead)
			dead[ndead++] = r->pid;
	}
	for (k = 0; k < ndead; k++) {
		for (i = 0; i < e->nrows;) {
			r = &e->rows[i];
			if (r->pid != dead[k]) {
				i++;
				continue;
			}
			/* Merge first (the row may move), then remove it. */
			into = row_find(e, USM_PID_EXITED, r->proto, r->method, r->path, r->status);
			if (into) {
				usm_hist_merge(&into->latency, &r->latency);
				*r = e->rows[--e->nrows];
			} else {
				r->pid = USM_PID_EXITED;
				i++;
			}
		}
		for (i = 0; i < e->nslots; i++) {
			if (e->pending[i].used && e->pending[i].key.pid == dead[k]) {
				slot_remove(e, &e->pending[i]);
				i = (size_t)-1; /* re-seating may move entries: restart */
			}
		}
	}
	pthread_mutex_unlock(&e->lock);
	return ndead;
}
