/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Users' shares of tables every process fills (bpf/lib/fair_share.h), what every module
 * that shares a table out needs from userspace: the caps from user_share_percent, the
 * agent's pid namespace (a container's root is told from the host's by it), the uid
 * ranges granted to users (subuid.h) as its programs search them, and the recount
 * that corrects each owner's count from what the tables hold (the programs count what
 * they make and delete, not what an LRU evicts nor what a process's end leaves).
 */
#ifndef BPFTEL_MANAGER_FAIR_SHARE_H
#define BPFTEL_MANAGER_FAIR_SHARE_H

#include <stdbool.h>
#include <linux/types.h>

#include "bpf/fair_share_defs.h"
#include "user/manager/subuid.h"

/* What a user but root may hold of a table of max_entries at percent
 * (user_share_percent, 1..100; 0: the default), as the programs read it: at least 1;
 * 0 at 100, no bound. */
__s64 fair_share_cap(__u32 max_entries, unsigned int percent);

/* Device d (stat's st_dev) as the kernel encodes a dev_t (MKDEV: major << 20 | minor),
 * which bpf_get_ns_current_pid_tgid() compares. */
__u64 fair_share_kernel_dev(__u64 d);

/* The agent's pid namespace as bpf_get_ns_current_pid_tgid() takes it (the kernel's
 * dev_t of nsfs, the inode), for fair_share_pidns_dev and _ino (bpf/lib/fair_share.h):
 * 0, or -errno (both left 0: every thread of uid 0 is the host's root). */
int fair_share_pidns(__u64 *dev, __u64 *ino);

/* The owners holding the most of a table, as a recount found them (most first). */
#define FAIR_SHARE_HOLDERS 4

struct fair_share_holders {
	__u32 n;
	struct {
		__u32 owner; /* a uid; FAIR_SHARE_CONTAINER set: a container's root */
		__u32 held;  /* its entries the walk saw */
	} v[FAIR_SHARE_HOLDERS];
};

/* The owners (but root) refused the most entries of a table since the object was
 * loaded, most first (of two refused as many, the lower owner): from the programs'
 * fair_share_refused map (bpf/lib/fair_share.h). */
struct fair_share_refusers {
	__u32 n;
	struct {
		__u32 owner;
		__u64 refused;
	} v[FAIR_SHARE_HOLDERS];
};

/* Read a fair_share_refused map (fd): top[t] for each table t below ntables. 0, or
 * -errno with top left as it was. One batched walk of at most FAIR_SHARE_REFUSERS
 * entries. */
int fair_share_refusers_read(int fd, struct fair_share_refusers *top, __u32 ntables);

/*
 * A recount of one table: begin reads which owners the programs count (the fair_share
 * map's fd) and their counts; the caller walks the table, adding each owner's entries;
 * end writes each owner's correction (fair_share_adj's fd): its entries less its count
 * as the walk began (the programs add to the count what they make and delete from then
 * on: a count overwritten would lose what they made meanwhile). An owner with none left
 * loses both keys, for another's. Entries of an owner counted after begin are the next
 * recount's.
 */
struct fair_share_tally;

/* 0 and *out NULL when no owner but root has a count of table (nothing to correct, no
 * holder: the caller need not walk); -errno. */
int fair_share_tally_begin(int counts_fd, __u32 table, struct fair_share_tally **out);
void fair_share_tally_add(struct fair_share_tally *t, __u32 owner, __u64 entries);
/* Whether any owner's count of t's table moved since begin (entries made or deleted
 * during the walk): the walk may have seen some of them, and its correction would be
 * off by as many until the next recount. A caller may walk again. */
bool fair_share_tally_moved(const struct fair_share_tally *t, int counts_fd);
/* Correct, set *top (when not NULL; none when t is NULL) and free t. */
void fair_share_tally_end(struct fair_share_tally *t, int counts_fd, int adj_fd,
			  struct fair_share_holders *top);
/* Free t, correcting nothing (the walk failed: the counts would be short). */
void fair_share_tally_free(struct fair_share_tally *t);

/* The uid ranges granted to users as a module's programs have them (under the module's
 * lock): the files as read, how many ranges, left out, the read's error, and when the
 * files are next looked at. */
struct fair_share_uid_ranges {
	struct subuid_files seen;
	unsigned int ranges, skipped;
	int err;
	__u64 due_ns;
};

/* How often modules recount the shares and look at the uid range files again. */
#define FAIR_SHARE_RECOUNT_NS (10ull * 1000000000ull)

/*
 * The first time (bit t of *said clear) the owner holding the most of a table (h)
 * holds the whole of its share (cap > 0, of entries), the log says so once a table and
 * run, and names the setting: "WHO: uid U holds its share of WHAT, CAP of ENTRIES: its
 * next ones are refused (bpftel CMD); on a host HOST, raise user_share_percent".
 */
void fair_share_say_full(unsigned int *said, int t, const struct fair_share_holders *h,
			 __s64 cap, __u32 entries, const char *who, const char *what,
			 const char *cmd, const char *host);

/* The uid ranges as the files held them when read (subuid_read: file I/O, not under a
 * lock): the ranges, what the files were, how many were left out, the read's error. */
struct fair_share_read {
	struct fair_share_ranges ranges;
	struct subuid_files seen;
	unsigned int skipped;
	int err;
};

/* The files read again if they changed since *seen: NULL when they did not (or out of
 * memory). free() it. */
struct fair_share_read *fair_share_reread(const struct subuid_files *seen);

/* Before module who's object loads: the agent's pid namespace into *pidns_dev and
 * *pidns_ino (its rodata; the log says so when it is not known: a container's root is
 * then taken for the host's), and the uid ranges read. NULL: out of memory. */
struct fair_share_read *fair_share_prepare(const char *who, __u64 *pidns_dev, __u64 *pidns_ino);

/*
 * Apply rd for module who: counted into s, and its ranges written to the table of
 * tables[2] the programs do not search, which then becomes the one they search
 * (*live, bpf/lib/fair_share.h): a program never sees one half written. Before load
 * (loaded false) the first table of the object's image is the one. tables NULL:
 * counted only. A read that failed changes nothing (logged once), and is tried again
 * at the next look. Under the module's lock.
 */
void fair_share_read_apply(struct fair_share_uid_ranges *s, const char *who,
			   const struct fair_share_read *rd, struct fair_share_ranges *tables,
			   __u32 *live, bool loaded);

/* JSON, as modules' reports show their shares: an owner ({kind: "user", uid, <what>: n}
 * or {kind: "container", cgroup_id, <what>: n}, the id's low 31 bits: as rows'
 * cgroup_id on a cgroup v2 host); a table ({entries: its size, share: null when there
 * is no bound, holders: h's, most first, as owners with entries; and with r,
 * refused_by: r's, as owners with refused}); the uid ranges ({path, ranges, left_out,
 * error}). */
struct json_t;
struct json_t *fair_share_owner_json(__u32 owner, const char *what, __u64 n);
struct json_t *fair_share_table_json(__u32 max_entries, __s64 cap,
				     const struct fair_share_holders *h,
				     const struct fair_share_refusers *r);
struct json_t *fair_share_subuid_json(unsigned int ranges, unsigned int skipped, int err);

/*
 * Counts and corrections (the fair_share and fair_share_adj maps' fds) kept across a
 * restart with only some of the tables they count (the bits of keep, by table): the
 * others' keys go, as their tables did. Before the programs run. 0, or -errno.
 */
int fair_share_keep_tables(int counts_fd, int adj_fd, __u64 keep);

#endif /* BPFTEL_MANAGER_FAIR_SHARE_H */
