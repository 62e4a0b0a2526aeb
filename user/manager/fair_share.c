// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Users' shares of the tables every process fills, from userspace (fair_share.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <bpf/bpf.h>
#include <jansson.h>

#include "user/common/log.h"
#include "fair_share.h"

__s64 fair_share_cap(__u32 max_entries, unsigned int percent)
{
	__s64 cap;

	if (!percent)
		percent = FAIR_SHARE_PERCENT_DEFAULT;
	if (percent >= 100)
		return 0;
	cap = (__s64)max_entries * percent / 100;
	return cap > 0 ? cap : 1;
}

__u64 fair_share_kernel_dev(__u64 d)
{
	return (__u64)major(d) << 20 | minor(d);
}

int fair_share_pidns(__u64 *dev, __u64 *ino)
{
	struct stat st;

	*dev = *ino = 0;
	if (stat("/proc/self/ns/pid", &st))
		return -errno;
	*dev = fair_share_kernel_dev(st.st_dev);
	*ino = st.st_ino;
	return 0;
}

struct user_count {
	__u32 uid;
	__s64 counted; /* the programs' count when the walk began */
	__u64 held;    /* the user's entries the walk saw */
};

struct fair_share_tally {
	__u32 table;
	size_t n;
	struct user_count v[FAIR_SHARE_KEYS];
};

static int by_uid(const void *a, const void *b)
{
	__u32 x = ((const struct user_count *)a)->uid, y = ((const struct user_count *)b)->uid;

	return x < y ? -1 : x > y;
}

/* The users with a count of table, and their counts. */
static int users_counted(int counts_fd, struct fair_share_tally *t)
{
	struct fair_share_key key, next, *prev = NULL;
	struct user_count *c;
	int steps;

	/* Keys are added meanwhile, deleted only here: a walk that starts over is bounded
	 * by the map's size. */
	for (steps = 0; t->n < FAIR_SHARE_KEYS && steps < 2 * FAIR_SHARE_KEYS; steps++) {
		if (bpf_map_get_next_key(counts_fd, prev, &next))
			return errno == ENOENT ? 0 : -errno;
		key = next;
		prev = &key;
		if (key.table != t->table)
			continue;
		c = &t->v[t->n];
		c->uid = key.uid;
		if (!bpf_map_lookup_elem(counts_fd, &key, &c->counted))
			t->n++;
	}
	return 0;
}

/* Sorted (each entry of a table looks its owner up), and a user seen twice (a walk
 * that started over) kept once. */
static void users_sort(struct fair_share_tally *t)
{
	size_t i, n = 0;

	qsort(t->v, t->n, sizeof(*t->v), by_uid);
	for (i = 0; i < t->n; i++)
		if (!n || t->v[n - 1].uid != t->v[i].uid)
			t->v[n++] = t->v[i];
	t->n = n;
}

int fair_share_tally_begin(int counts_fd, __u32 table, struct fair_share_tally **out)
{
	struct fair_share_tally *t;
	int err;

	*out = NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->table = table;
	err = users_counted(counts_fd, t);
	if (err || !t->n) {
		free(t);
		return err;
	}
	users_sort(t);
	*out = t;
	return 0;
}

void fair_share_tally_add(struct fair_share_tally *t, __u32 owner, __u64 entries)
{
	struct user_count k = {.uid = owner}, *c;

	/* Root is not counted; an owner whose count was made after begin: the next
	 * recount's. */
	if (!t || !owner || !entries)
		return;
	c = bsearch(&k, t->v, t->n, sizeof(*t->v), by_uid);
	if (c)
		c->held += entries;
}

bool fair_share_tally_moved(const struct fair_share_tally *t, int counts_fd)
{
	struct fair_share_key key;
	__s64 now;
	size_t j;

	for (j = 0; t && j < t->n; j++) {
		key = (struct fair_share_key){.uid = t->v[j].uid, .table = t->table};
		if (bpf_map_lookup_elem(counts_fd, &key, &now) || now != t->v[j].counted)
			return true;
	}
	return false;
}

/* Owner c into top, which keeps the FAIR_SHARE_HOLDERS that hold the most, most first
 * (of two that hold as many, the one seen first: the lower uid). */
static void holders_add(struct fair_share_holders *top, const struct user_count *c)
{
	__u32 i, held = c->held > UINT32_MAX ? UINT32_MAX : (__u32)c->held;

	if (top->n == FAIR_SHARE_HOLDERS) {
		if (top->v[FAIR_SHARE_HOLDERS - 1].held >= held)
			return; /* the least of them holds as many */
		i = FAIR_SHARE_HOLDERS - 1;
	} else {
		i = top->n++;
	}
	for (; i > 0 && top->v[i - 1].held < held; i--)
		top->v[i] = top->v[i - 1];
	top->v[i].owner = c->uid;
	top->v[i].held = held;
}

void fair_share_tally_end(struct fair_share_tally *t, int counts_fd, int adj_fd,
			  struct fair_share_holders *top)
{
	struct fair_share_holders found = {};
	struct fair_share_key key;
	__s64 adj;
	size_t j;

	for (j = 0; t && j < t->n; j++) {
		key = (struct fair_share_key){.uid = t->v[j].uid, .table = t->table};
		if (!t->v[j].held) {
			/* None left: its keys go, for another user's. (The programs may take a
			 * count between the read and here: one entry not counted, until the
			 * next recount.) */
			bpf_map_delete_elem(counts_fd, &key);
			bpf_map_delete_elem(adj_fd, &key);
			continue;
		}
		/* What the count was wrong by when the walk began. */
		adj = (__s64)t->v[j].held - t->v[j].counted;
		bpf_map_update_elem(adj_fd, &key, &adj, BPF_ANY);
		holders_add(&found, &t->v[j]);
	}
	if (top)
		*top = found;
	free(t);
}

void fair_share_tally_free(struct fair_share_tally *t)
{
	free(t);
}

void fair_share_say_full(unsigned int *said, int t, const struct fair_share_holders *h,
			 __s64 cap, __u32 entries, const char *who, const char *what,
			 const char *cmd, const char *host)
{
	bool ct;

	if (cap <= 0 || !h->n || h->v[0].held < cap || *said & 1u << t)
		return;
	*said |= 1u << t;
	ct = h->v[0].owner & FAIR_SHARE_CONTAINER;
	pr_warn("%s: %s %u holds its share of %s, %lld of %u: its next ones are refused "
		"(bpftel %s); on a host %s, raise user_share_percent",
		who, ct ? "the root of container cgroup" : "uid",
		ct ? h->v[0].owner & ~FAIR_SHARE_CONTAINER : h->v[0].owner, what,
		(long long)cap, entries, cmd, host);
}

struct fair_share_read *fair_share_reread(const struct subuid_files *seen)
{
	struct fair_share_read *rd;

	if (seen && !subuid_changed(seen))
		return NULL;
	rd = malloc(sizeof(*rd));
	if (rd)
		rd->err = subuid_read(&rd->ranges, &rd->skipped, &rd->seen);
	return rd;
}

struct fair_share_read *fair_share_prepare(const char *who, __u64 *pidns_dev, __u64 *pidns_ino)
{
	int err = fair_share_pidns(pidns_dev, pidns_ino);

	if (err)
		pr_warn("%s: /proc/self/ns/pid: %s: a container's root is taken for the host's, "
			"not bounded to a share of the kernel's tables",
			who, strerror(-err));
	return fair_share_reread(NULL);
}

void fair_share_read_apply(struct fair_share_uid_ranges *s, const char *who,
			   const struct fair_share_read *rd, struct fair_share_ranges *tables,
			   __u32 *live, bool loaded)
{
	__u32 next;

	if (rd->err) {
		if (rd->err != s->err)
			pr_warn("%s: %s: %s: the uid ranges stay as they were (%u)", who,
				subuid_path(), strerror(-rd->err), s->ranges);
		s->err = rd->err;
		return;
	}
	if (rd->skipped && (rd->skipped != s->skipped || !s->seen.subuid.ino))
		pr_warn("%s: %s: %u ranges left out (malformed, overlapping, or past %d)", who,
			subuid_path(), rd->skipped, FAIR_SHARE_RANGES);
	s->seen = rd->seen;
	s->err = 0;
	s->skipped = rd->skipped;
	s->ranges = rd->ranges.n;
	if (!tables || !live)
		return;
	if (!loaded) {
		tables[0] = rd->ranges;
		*live = 0;
		return;
	}
	next = !(*live & 1);
	tables[next] = rd->ranges;
	__atomic_store_n(live, next, __ATOMIC_RELEASE);
}

json_t *fair_share_owner_json(__u32 owner, const char *what, __u64 n)
{
	if (owner & FAIR_SHARE_CONTAINER)
		return json_pack("{s:s, s:I, s:I}", "kind", "container", "cgroup_id",
				 (json_int_t)(owner & ~FAIR_SHARE_CONTAINER), what,
				 (json_int_t)(n > INT64_MAX ? INT64_MAX : n));
	return json_pack("{s:s, s:I, s:I}", "kind", "user", "uid", (json_int_t)owner, what,
			 (json_int_t)(n > INT64_MAX ? INT64_MAX : n));
}

json_t *fair_share_table_json(__u32 max_entries, __s64 cap, const struct fair_share_holders *h,
			      const struct fair_share_refusers *r)
{
	json_t *who = json_array(), *o;
	__u32 i;

	for (i = 0; i < h->n && i < FAIR_SHARE_HOLDERS; i++)
		json_array_append_new(who,
				      fair_share_owner_json(h->v[i].owner, "entries", h->v[i].held));
	o = json_pack("{s:I, s:o, s:o}", "entries", (json_int_t)max_entries, "share",
		      cap ? json_integer(cap) : json_null(), "holders", who);
	if (r) {
		who = json_array();
		for (i = 0; i < r->n && i < FAIR_SHARE_HOLDERS; i++)
			json_array_append_new(who, fair_share_owner_json(r->v[i].owner, "refused",
									 r->v[i].refused));
		json_object_set_new(o, "refused_by", who);
	}
	return o;
}

/* Put (owner, refused) in t, kept most first (of two as many, the lower owner) and
 * FAIR_SHARE_HOLDERS long. */
static void refusers_add(struct fair_share_refusers *t, __u32 owner, __u64 refused)
{
	__u32 i, at = t->n;

	while (at > 0 && (t->v[at - 1].refused < refused ||
			  (t->v[at - 1].refused == refused && t->v[at - 1].owner > owner)))
		at--;
	if (at >= FAIR_SHARE_HOLDERS)
		return;
	i = t->n < FAIR_SHARE_HOLDERS ? t->n++ : FAIR_SHARE_HOLDERS - 1;
	for (; i > at; i--)
		t->v[i] = t->v[i - 1];
	t->v[at].owner = owner;
	t->v[at].refused = refused;
}

/* Entries read per batch: an LRU hash map's bucket holding more makes it fail. */
#define REFUSERS_BATCH 128

int fair_share_refusers_read(int fd, struct fair_share_refusers *top, __u32 ntables)
{
	struct fair_share_refusers *t = calloc(ntables ? ntables : 1, sizeof(*t));
	struct fair_share_key keys[REFUSERS_BATCH];
	__u64 vals[REFUSERS_BATCH], at = 0, next = 0;
	bool first = true;
	__u32 count, i, steps;
	int err = 0;

	if (!t)
		return -ENOMEM;
	/* Bounded: a map the programs change during the walk may be seen again in part. */
	for (steps = 0; !err && steps < 2 * FAIR_SHARE_REFUSERS / REFUSERS_BATCH + 2; steps++) {
		count = REFUSERS_BATCH;
		if (bpf_map_lookup_batch(fd, first ? NULL : &at, &next, keys, vals, &count, NULL))
			err = errno == ENOENT ? 1 : -errno; /* 1: the walk's end */
		for (i = 0; err >= 0 && i < count; i++)
			if (keys[i].table < ntables && keys[i].uid && vals[i])
				refusers_add(&t[keys[i].table], keys[i].uid, vals[i]);
		at = next;
		first = false;
	}
	if (err >= 0)
		memcpy(top, t, ntables * sizeof(*t));
	free(t);
	return err < 0 ? err : 0;
}

json_t *fair_share_subuid_json(unsigned int ranges, unsigned int skipped, int err)
{
	return json_pack("{s:s, s:I, s:I, s:o}", "path", subuid_path(), "ranges",
			 (json_int_t)ranges, "left_out", (json_int_t)skipped, "error",
			 err ? json_string(strerror(-err)) : json_null());
}

/* Every key of fd whose table is not in keep (a bit per table), collected first: a
 * walk that deletes the key it stands on starts over. */
static int drop_tables(int fd, __u64 keep)
{
	struct fair_share_key *keys, key, *prev = NULL;
	size_t n = 0, i;
	int err = 0;

	keys = calloc(FAIR_SHARE_KEYS, sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	while (n < FAIR_SHARE_KEYS && !bpf_map_get_next_key(fd, prev, &key)) {
		keys[n++] = key;
		prev = &keys[n - 1];
	}
	for (i = 0; i < n; i++) {
		if (keys[i].table < 64 && (keep & (1ull << keys[i].table)))
			continue;
		if (bpf_map_delete_elem(fd, &keys[i]) && errno != ENOENT)
			err = -errno;
	}
	free(keys);
	return err;
}

int fair_share_keep_tables(int counts_fd, int adj_fd, __u64 keep)
{
	int err = drop_tables(counts_fd, keep), err2 = drop_tables(adj_fd, keep);

	return err ?: err2;
}
