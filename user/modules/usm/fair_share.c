// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Users' shares of the USM tables, recounted (fair_share.h). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <bpf/bpf.h>

#include "bpf/fair_share_defs.h"
#include "bpf/usm.h"
#include "fair_share.h"

const struct usm_share_map usm_share_tables[USM_SHARE__COUNT] = {
	[USM_SHARE_H2_CONNS] = {.key = "http2_sessions",
				.label = "HTTP/2 sessions",
				.fd = -1,
				.table = USM_SHARE_H2_CONNS,
				.max_entries = USM_H2_CONNS_MAX,
				.key_size = sizeof(struct usm_fd_key),
				.value_size = sizeof(struct usm_h2_state),
				.tgid_off = offsetof(struct usm_fd_key, tgid),
				.uid_off = offsetof(struct usm_h2_state, uid)},
	[USM_SHARE_TLS_FDS] = {.key = "tls_sessions",
			       .label = "TLS sessions",
			       .fd = -1,
			       .table = USM_SHARE_TLS_FDS,
			       .max_entries = USM_TLS_FDS_MAX,
			       .key_size = sizeof(struct usm_fd_key),
			       .value_size = sizeof(struct usm_tls_sess),
			       .tgid_off = offsetof(struct usm_fd_key, tgid),
			       .uid_off = offsetof(struct usm_tls_sess, uid)},
	[USM_SHARE_TLS_RETRY] = {.key = "tls_retry_marks",
				 .label = "marks of writes to retry",
				 .fd = -1,
				 .table = USM_SHARE_TLS_RETRY,
				 .max_entries = USM_TLS_RETRY_MAX,
				 .key_size = sizeof(struct usm_fd_key),
				 .value_size = sizeof(struct usm_tls_retry_mark),
				 .tgid_off = offsetof(struct usm_fd_key, tgid),
				 .uid_off = offsetof(struct usm_tls_retry_mark, uid)},
};

__s64 usm_fair_share_cap(const struct usm_share_map *t, unsigned int percent)
{
	__s64 cap;

	if (!percent)
		percent = FAIR_SHARE_PERCENT_DEFAULT;
	if (percent >= 100)
		return 0;
	cap = (__s64)t->max_entries * percent / 100;
	return cap > 0 ? cap : 1;
}

__u64 usm_kernel_dev(__u64 d)
{
	return (__u64)major(d) << 20 | minor(d);
}

int usm_fair_share_pidns(__u64 *dev, __u64 *ino)
{
	struct stat st;

	*dev = *ino = 0;
	if (stat("/proc/self/ns/pid", &st))
		return -errno;
	*dev = usm_kernel_dev(st.st_dev);
	*ino = st.st_ino;
	return 0;
}

struct user_count {
	__u32 uid;
	__s64 counted; /* the programs' count when the walk began */
	__s64 held;    /* the user's entries the walk saw */
};

struct users {
	struct user_count *v;
	size_t n;
};

static int by_uid(const void *a, const void *b)
{
	__u32 x = ((const struct user_count *)a)->uid, y = ((const struct user_count *)b)->uid;

	return x < y ? -1 : x > y;
}

/* The users are sorted once read: each entry of a table looks its owner up. */
static struct user_count *user_of(struct users *u, __u32 uid)
{
	struct user_count k = {.uid = uid};

	return bsearch(&k, u->v, u->n, sizeof(*u->v), by_uid);
}

/* The users with a count of table, and their counts. */
static int users_counted(int counts_fd, __u32 table, struct users *u)
{
	struct fair_share_key key, next, *prev = NULL;
	struct user_count *c;
	int steps;

	u->v = calloc(FAIR_SHARE_KEYS, sizeof(*u->v));
	if (!u->v)
		return -ENOMEM;
	/* Keys are added meanwhile, deleted only here: a walk that starts over is bounded
	 * by the map's size. */
	for (steps = 0; u->n < FAIR_SHARE_KEYS && steps < 2 * FAIR_SHARE_KEYS; steps++) {
		if (bpf_map_get_next_key(counts_fd, prev, &next))
			return errno == ENOENT ? 0 : -errno;
		key = next;
		prev = &key;
		if (key.table != table)
			continue;
		c = &u->v[u->n];
		c->uid = key.uid;
		if (!bpf_map_lookup_elem(counts_fd, &key, &c->counted))
			u->n++;
	}
	return 0;
}

/* Sorted, and a user seen twice (a walk that started over) kept once. */
static void users_sort(struct users *u)
{
	size_t i, n = 0;

	qsort(u->v, u->n, sizeof(*u->v), by_uid);
	for (i = 0; i < u->n; i++)
		if (!n || u->v[n - 1].uid != u->v[i].uid)
			u->v[n++] = u->v[i];
	u->n = n;
}

/* Whether each process is alive, asked once a sweep: a table's entries are mostly
 * those of a few processes. */
#define ALIVE_SLOTS 1024 /* a power of two */

struct alive_cache {
	bool (*alive)(__u32 tgid);
	struct {
		__u32 tgid; /* 0: free (pid 0 owns no session) */
		bool alive;
	} slot[ALIVE_SLOTS];
};

static bool cached_alive(struct alive_cache *c, __u32 tgid)
{
	unsigned int i = (tgid * 2654435761u) & (ALIVE_SLOTS - 1), n;

	for (n = 0; n < 16; n++, i = (i + 1) & (ALIVE_SLOTS - 1)) {
		if (c->slot[i].tgid == tgid)
			return c->slot[i].alive;
		if (!c->slot[i].tgid) {
			c->slot[i].tgid = tgid;
			c->slot[i].alive = c->alive(tgid);
			return c->slot[i].alive;
		}
	}
	return c->alive(tgid); /* a crowded stretch: asked again */
}

/* Room for a walk of t: more than it holds, since a walk of a table the programs
 * change can see an entry twice (deleted from a bucket read, made again in one not). */
static size_t walk_room(const struct usm_share_map *t)
{
	return (size_t)t->max_entries + t->max_entries / 4;
}

/* Read every entry of t: keys, values and how many. -EAGAIN when the walk did not end
 * within walk_room() (or a bucket did not fit): the counts would be short, so this
 * round corrects nothing. */
static int read_all(const struct usm_share_map *t, char *keys, char *values, __u32 *n)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	__u64 at = 0, next = 0; /* a hash map's batch token: a bucket's index */
	__u32 count;
	bool first = true;
	int err;

	*n = 0;
	while (*n < walk_room(t)) {
		count = (__u32)(walk_room(t) - *n);
		err = bpf_map_lookup_batch(t->fd, first ? NULL : &at, &next,
					   keys + (size_t)*n * t->key_size,
					   values + (size_t)*n * t->value_size, &count, &opts);
		*n += count;
		if (err)
			return errno == ENOENT ? 0 : errno == ENOSPC ? -EAGAIN : -errno;
		at = next;
		first = false;
	}
	return -EAGAIN;
}

/* Owner c into top, which keeps the USM_SHARE_HOLDERS that hold the most, most first
 * (of two that hold as many, the one seen first: the lower uid). */
static void holders_add(struct usm_share_holders *top, const struct user_count *c)
{
	__u32 i;

	if (top->n == USM_SHARE_HOLDERS) {
		if (top->v[USM_SHARE_HOLDERS - 1].held >= c->held)
			return; /* the least of them holds as many */
		i = USM_SHARE_HOLDERS - 1;
	} else {
		i = top->n++;
	}
	for (; i > 0 && top->v[i - 1].held < c->held; i--)
		top->v[i] = top->v[i - 1];
	top->v[i].owner = c->uid;
	top->v[i].held = (__u32)c->held;
}

int usm_fair_share_sweep(int counts_fd, int adj_fd, const struct usm_share_map *t,
			 bool (*alive)(__u32 tgid), __u64 *deleted,
			 struct usm_share_holders *top)
{
	struct usm_share_holders found = {};
	struct alive_cache *live = NULL;
	struct users u = {};
	struct fair_share_key key = {.table = t->table};
	struct user_count *c;
	char *keys = NULL, *values = NULL;
	__u32 n = 0, i, tgid, uid;
	__s64 adj;
	size_t j;
	int err;

	err = users_counted(counts_fd, t->table, &u);
	if (err || !u.n)
		goto out; /* no owner but root has a count: nothing to correct, no holder */
	users_sort(&u);
	keys = malloc(walk_room(t) * t->key_size);
	values = malloc(walk_room(t) * t->value_size);
	live = calloc(1, sizeof(*live));
	err = keys && values && live ? read_all(t, keys, values, &n) : -ENOMEM;
	if (err)
		goto out;
	live->alive = alive;
	for (i = 0; i < n; i++) {
		memcpy(&tgid, keys + (size_t)i * t->key_size + t->tgid_off, sizeof(tgid));
		memcpy(&uid, values + (size_t)i * t->value_size + t->uid_off, sizeof(uid));
		if (!cached_alive(live, tgid)) {
			if (!bpf_map_delete_elem(t->fd, keys + (size_t)i * t->key_size))
				(*deleted)++;
			continue;
		}
		/* An owner whose count was made after they were read: the next sweep's. */
		c = uid ? user_of(&u, uid) : NULL;
		if (c)
			c->held++;
	}
	for (j = 0; j < u.n; j++) {
		key.uid = u.v[j].uid;
		if (!u.v[j].held) {
			/* None left: its keys go, for another user's. (The programs may take a
			 * count between the read and here: one entry not counted, until the
			 * next sweep.) */
			bpf_map_delete_elem(counts_fd, &key);
			bpf_map_delete_elem(adj_fd, &key);
			continue;
		}
		/* What the count was wrong by when the walk began: the programs add to it
		 * what they make and delete from then on. */
		adj = u.v[j].held - u.v[j].counted;
		bpf_map_update_elem(adj_fd, &key, &adj, BPF_ANY);
		holders_add(&found, &u.v[j]);
	}
out:
	if (!err && top)
		*top = found;
	free(live);
	free(keys);
	free(values);
	free(u.v);
	return err;
}
