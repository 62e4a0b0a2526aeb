/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The USM tables every process fills that are shared out by user (bpf/lib/fair_share.h),
 * and their recount (user/manager/fair_share.h): each sweep deletes the entries of
 * processes gone and corrects each user's count by what it holds.
 */
#ifndef BPFTEL_USM_FAIR_SHARE_H
#define BPFTEL_USM_FAIR_SHARE_H

#include <stdbool.h>
#include <linux/types.h>

#include "user/manager/fair_share.h"

/* A table whose entries are shared out, and where its keys and values say whose. */
struct usm_share_map {
	const char *key;   /* in JSON and /metrics (table=) */
	const char *label; /* in the log */
	int fd;
	__u32 table;	   /* fair_share_key.table */
	__u32 max_entries; /* the table's */
	__u32 key_size, value_size;
	__u32 tgid_off; /* the process, a __u32 in the key */
	__u32 uid_off;	/* the user, a __u32 in the value */
	/* Entries made and deleted at every call (Go's Reads in flight): walked once a
	 * sweep, not again when counts moved, which a busy owner's always do. */
	bool walk_once;
};

/* The USM object's tables that are shared out, by enum usm_share_table (bpf/usm.h),
 * fd -1: a caller sets the map's. */
extern const struct usm_share_map usm_share_tables[];

/* What a user but root may hold of t's entries at percent (fair_share_cap), as the
 * programs read it (usm_share_cap, bpf/lib/usm_common.h). */
static inline __s64 usm_fair_share_cap(const struct usm_share_map *t, unsigned int percent)
{
	return fair_share_cap(t->max_entries, percent);
}

/*
 * If the counts (the fair_share map's fd) hold a user of t's table, read t: delete the
 * entries whose process alive() says is gone (how many: *deleted), and set each user's
 * correction (fair_share_adj's fd) to its entries less its count as the walk began; a
 * user with none loses both. A walk during which an owner's count moved (its processes
 * made or deleted entries meanwhile, which the walk may have seen or missed) is made
 * again, 3 walks at most (t->walk_once: not). Nothing is read while only root holds entries (root is
 * not counted). Returns 0, -EAGAIN when the walk of a busy table did not end within
 * its room (nothing corrected this round: the counts would be short), or another
 * negative errno when a map could not be read (the corrections left as they were).
 * On 0, *top (when not NULL) is set to the owners holding the most (none when only
 * root holds entries); else it is left as it was.
 */
int usm_fair_share_sweep(int counts_fd, int adj_fd, const struct usm_share_map *t,
			 bool (*alive)(__u32 tgid), __u64 *deleted,
			 struct fair_share_holders *top);

#endif /* BPFTEL_USM_FAIR_SHARE_H */
