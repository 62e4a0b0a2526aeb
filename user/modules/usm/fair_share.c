// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Users' shares of the USM tables, recounted (fair_share.h). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
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
	[USM_SHARE_GO_READS] = {.key = "go_reads",
				.label = "Go reads in flight",
				.fd = -1,
				.table = USM_SHARE_GO_READS,
				.max_entries = USM_GO_READS_MAX,
				.key_size = sizeof(struct usm_go_read_key),
				.value_size = sizeof(struct usm_go_read),
				.tgid_off = offsetof(struct usm_go_read_key, tgid),
				.uid_off = offsetof(struct usm_go_read, uid),
				.walk_once = true},
};

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

/* Walks made at most, while an owner's count moves during them (bpftel_gpu_shares_recount
 * says why). */
#define SWEEP_TRIES 3

int usm_fair_share_sweep(int counts_fd, int adj_fd, const struct usm_share_map *t,
			 bool (*alive)(__u32 tgid), __u64 *deleted,
			 struct fair_share_holders *top)
{
	struct fair_share_tally *tally = NULL;
	struct alive_cache *live = NULL;
	char *keys = NULL, *values = NULL;
	__u32 n = 0, i, tgid, uid;
	int tries, err;

	for (tries = 0;; tries++) {
		err = fair_share_tally_begin(counts_fd, t->table, &tally);
		if (err || !tally)
			goto out; /* no owner but root has a count: nothing to correct, no holder */
		if (!keys) {
			keys = malloc(walk_room(t) * t->key_size);
			values = malloc(walk_room(t) * t->value_size);
			live = calloc(1, sizeof(*live));
		}
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
			fair_share_tally_add(tally, uid, 1);
		}
		/* The entries of processes gone are deleted by the first walk: the next
		 * sees none of them, and asks no process again (live). */
		if (t->walk_once || tries == SWEEP_TRIES - 1 ||
		    !fair_share_tally_moved(tally, counts_fd))
			break;
		fair_share_tally_free(tally);
		tally = NULL;
	}
out:
	if (!err)
		fair_share_tally_end(tally, counts_fd, adj_fd, top);
	else
		fair_share_tally_free(tally);
	free(live);
	free(keys);
	free(values);
	return err;
}
