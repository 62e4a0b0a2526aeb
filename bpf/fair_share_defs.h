/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Users' shares of the tables every process fills (lib/fair_share.h): the counts' key,
 * shared with userspace, which recounts them (user/modules/usm/fair_share.h). Included
 * after vmlinux.h or <linux/types.h>. */
#ifndef BPFTEL_FAIR_SHARE_DEFS_H
#define BPFTEL_FAIR_SHARE_DEFS_H

/* Users (times tables) counted at once: past that, a new user's entries are made
 * uncounted until a sweep drops the users with none. */
#define FAIR_SHARE_KEYS 4096

/* Owners (times tables) whose refusals are counted at once (fair_share_refused, LRU). */
#define FAIR_SHARE_REFUSERS 1024

/* By default a user other than root holds at most 1/FAIR_SHARE_DIV of each table
 * (the configuration's user_share_percent: 100 / FAIR_SHARE_DIV). */
#define FAIR_SHARE_DIV 4
#define FAIR_SHARE_PERCENT_DEFAULT (100 / FAIR_SHARE_DIV)

/* The owners of a container's root (lib/fair_share.h): this bit and the low bits of its
 * cgroup id. Uids of 2^31 and over, which systemd's users and groups guide says not to
 * use, share owners with them. */
#define FAIR_SHARE_CONTAINER 0x80000000u

/* Ranges of uids granted to users (/etc/subuid: rootless containers' user namespaces
 * map them), whose uids are their user's (lib/fair_share.h): at most this many, sorted
 * by first uid, disjoint. fair_share_range_owner's binary search takes 9 steps. */
#define FAIR_SHARE_RANGES 256

/* A range of root's or of a user /etc/passwd does not name (podman's "containers",
 * which --userns=auto hands out 65536 at a time) is no one user's: each block of this
 * many uids of it is an owner of its own, named by its first uid. */
#define FAIR_SHARE_RANGE_BLOCK 65536u

struct fair_share_range {
	__u32 first; /* never 0 */
	__u32 count;
	__u32 owner; /* the user granted it; 0: none, an owner per block of the range */
};

struct fair_share_ranges {
	__u32 n;
	__u32 __pad;
	struct fair_share_range r[FAIR_SHARE_RANGES];
};

/* The user granted uid in t, if uid is of one of its ranges; else uid. A binary search,
 * 9 steps at most for FAIR_SHARE_RANGES: the BPF programs' (lib/fair_share.h) and
 * userspace's. */
static inline __u32 fair_share_ranges_owner(const struct fair_share_ranges *t, __u32 uid)
{
	__u32 lo = 0, hi = t->n, mid, off, i;

	for (i = 0; i < 9 && lo < hi; i++) {
		mid = (lo + hi) / 2;
		if (mid >= FAIR_SHARE_RANGES)
			break;
		if (uid < t->r[mid].first) {
			hi = mid;
			continue;
		}
		off = uid - t->r[mid].first;
		if (off >= t->r[mid].count) {
			lo = mid + 1;
			continue;
		}
		if (t->r[mid].owner)
			return t->r[mid].owner;
		return t->r[mid].first + (off & ~(FAIR_SHARE_RANGE_BLOCK - 1));
	}
	return uid;
}

struct fair_share_key {
	__u32 uid;   /* real uid, in the initial user namespace; a container's root: its
		      * FAIR_SHARE_CONTAINER owner */
	__u32 table; /* which table: the object's own numbering (bpf/usm.h) */
};

#endif /* BPFTEL_FAIR_SHARE_DEFS_H */
