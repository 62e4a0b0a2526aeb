/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A user's share of a table that every process of the host fills.
 *
 * Some maps keep state per (process, session) for the whole host, and evict their
 * least recently used entries when full (LRU: a process killed mid-session never says
 * its session ended). Any local user can make entries cheaply: an HTTP/2 preface written
 * on a TLS session over memory, which needs no peer, makes one. Without a bound, one
 * user's flood evicts the live sessions of everyone else, and their next requests are
 * lost: HPACK cannot resume mid-way.
 *
 * So each user but root holds at most a share of such a table (the caller's cap, a
 * quarter by default, the configuration's user_share_percent): past it, the user's
 * new entries are refused and counted, and the others' stay (a table that root and
 * four users at their share fill still evicts: the share bounds one user, not all of
 * them). The count is per (owner, table), the owner the real uid of the thread that
 * makes the entry, as the initial user namespace sees it: a set-user-ID program keeps
 * its caller's, and forking does not make another, as a per-process share would.
 * The host's root is not bounded: it can stop the agent anyway. A container's root
 * is: a thread of uid 0 in a pid namespace other than the agent's (docker's and
 * Kubernetes' containers without a user namespace: the host's root by uid, but in
 * their own pid namespace) is owned by its cgroup, FAIR_SHARE_CONTAINER with the low
 * bits of its cgroup v2 id; one share per container, all of them one share on a host
 * without cgroup v2. The pid namespace is a helper's test against the agent's
 * (bpf_get_ns_current_pid_tgid), no kernel structure read. A uid of a range granted
 * to a user (/etc/subuid: with newuidmap installed, a rootless container's user
 * namespace maps them) is that user's (fair_share_range_owner; userspace reads the
 * file, user/manager/subuid.c). Not covered: a container's root that may make
 * cgroups (privileged, or given its cgroup tree) gets a share per cgroup it makes and
 * moves into; a user namespace a container runtime made from uids of no range in
 * /etc/subuid (Kubernetes' pods with user namespaces: the kubelet picks their uids),
 * one per uid it maps. Its owner (the user that made the outermost namespace) is a
 * walk of kernel structures, cred and user_namespace, whose layout this object cannot
 * read without CO-RE, which it is built without (a module's start would parse the
 * kernel's BTF again: tests/unit/test_core_free.c).
 *
 * The count is taken by the entry's maker (fair_share_take) and given back where the
 * entry is deleted (fair_share_give, with the owner the entry keeps). What the LRU
 * evicts, and what a process's end leaves, the programs never see: every sweep,
 * userspace deletes the entries of processes gone, counts what each owner holds, and
 * writes what the programs' count was wrong by when its walk began to fair_share_adj
 * (user/manager/fair_share.c; the USM's tables: user/modules/usm/fair_share.c, the
 * GPU's: user/modules/gpu/gpu_shares.c). It writes a correction, not the count: the
 * programs' count moves during the walk, and a count overwritten would lose what they
 * made meanwhile, letting an owner past its share at every sweep. An owner's entries
 * are its count plus its correction. Until the next sweep that is high by what was
 * evicted and by entries made during the walk that it saw too, and low by entries the
 * programs deleted during the walk before it reached them: an owner churning entries
 * through a walk can pass its share by as many, once.
 *
 * Cost: two hash lookups and an atomic add where an entry is made, a lookup where one
 * is deleted; for the host's root, a BPF-to-BPF call and a helper call where an entry is
 * made (fair_share_owner), nothing more; for another user, a binary search of the uid
 * ranges (up to 9 steps) where one is made, and two calls more (fair_share_range_owner,
 * fair_share_take_counted). These are global functions, each verified once per program,
 * not at each call site: a module's restart is mostly the verifier's walk.
 * Callers call these only where an entry is new (a session's start, a process's row,
 * a thread's state), never per call; but a process refused a row tries again at each
 * of its calls, and pays that at each (the GPU module: gpu_proc). The one exception is
 * the GPU module's calls in flight, whose entry is made at each call that keeps
 * arguments for its return (allocations, frees, copies, syncs; not launches): an
 * owner but root pays the above at each such call's entry and return, root a call to
 * fair_share_owner at its entry and one compare at each.
 *
 * Include after telemetry/telemetry.bpf.h.
 */
#ifndef BPFTEL_LIB_FAIR_SHARE_H
#define BPFTEL_LIB_FAIR_SHARE_H

#include "bpf/fair_share_defs.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FAIR_SHARE_KEYS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fair_share_key);
	__type(value, __s64);
} fair_share SEC(".maps");

TLM_MAP_KEY(fair_share);

/* Userspace's corrections of the counts above (it alone writes them). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FAIR_SHARE_KEYS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fair_share_key);
	__type(value, __s64);
} fair_share_adj SEC(".maps");

TLM_MAP_KEY(fair_share_adj);

/* What each owner was refused, by table, since the object was loaded: whose entries a
 * share turns away (userspace shows the owners refused the most). LRU: a user with many
 * uids makes room by evicting the counts of the owners refused least recently; the
 * callers' own counts of refusals, by table, stay whole. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FAIR_SHARE_REFUSERS);
	__type(key, struct fair_share_key);
	__type(value, __u64);
} fair_share_refused SEC(".maps");

TLM_MAP_KEY(fair_share_refused);

/* The agent's pid namespace, the host's: its nsfs device (the kernel's encoding,
 * MKDEV) and inode, set before load. 0: not known, and every thread of uid 0 is the
 * host's root. */
const volatile __u64 fair_share_pidns_dev = 0;
const volatile __u64 fair_share_pidns_ino = 0;

/* The ranges of uids granted to users, two tables: userspace fills the one that is not
 * live and then makes it live (fair_share_ranges_live), so that a program never
 * searches a table half written (user/manager/fair_share.c, fair_share_read_apply).
 * Tables change 10 s apart at the soonest: a program still searching the older one when
 * it is written again (preempted that long) may give one entry a wrong owner, no more. */
struct fair_share_ranges fair_share_ranges[2];
__u32 fair_share_ranges_live;

_Static_assert(FAIR_SHARE_RANGES <= 256, "fair_share_range_owner searches in 9 steps");

/* The user granted uid, if uid is of a range (/etc/subuid); else uid. A binary search,
 * 9 steps at most for FAIR_SHARE_RANGES. A global function, verified once per program
 * for any uid: inlined, its branches were verified again at each of a program's call
 * sites, half of what the verifier walked in the GPU and USM programs (a module's
 * restart is mostly their verification). A BPF-to-BPF call, for users but root. */
__noinline __u32 fair_share_range_owner(__u32 uid)
{
	return fair_share_ranges_owner(&fair_share_ranges[fair_share_ranges_live & 1], uid);
}

/* Whose share an entry made by the current thread is in (above): 0 for the host's
 * root. A helper call more for root's threads only, and only where an entry is made.
 * A global function too: inlined, the owner known to be 0 on one path and not on the
 * other split what the verifier walks after it at each call site. */
__noinline __u32 fair_share_owner(void)
{
	__u32 uid = (__u32)bpf_get_current_uid_gid();
	struct bpf_pidns_info ns;

	if (uid)
		return fair_share_range_owner(uid);
	if (!fair_share_pidns_ino)
		return 0;
	/* Any failure is another namespace (-EINVAL), or none (-ENOENT: a task exiting,
	 * which makes no entry): owned by its cgroup, like a container's. */
	if (!bpf_get_ns_current_pid_tgid(fair_share_pidns_dev, fair_share_pidns_ino, &ns,
					 sizeof(ns)))
		return 0;
	return FAIR_SHARE_CONTAINER |
	       ((__u32)bpf_get_current_cgroup_id() & ~FAIR_SHARE_CONTAINER);
}

/*
 * Owner uid makes an entry of table, whose share per owner is cap entries (0: no bound,
 * user_share_percent = 100): true when it may (its count taken, or none kept: the
 * counts' map full), false when it holds its share already. Unbounded, the entry is
 * counted all the same: a bound set later (SIGHUP) starts from what each owner holds.
 * A refusal is counted by owner and table too (fair_share_refused: a lookup, an insert
 * the first time, an atomic add). A global function, as fair_share_range_owner, for
 * the same reason; root's entries do not get this far (fair_share_take).
 */
__noinline bool fair_share_take_counted(TLM_PARAM, __u32 table, __u32 uid, __s64 cap)
{
	struct fair_share_key key = {.uid = uid, .table = table};
	__s64 one = 1, zero = 0, *n, *adj;
	long r;

	n = bpf_map_lookup_elem(&fair_share, &key);
	adj = bpf_map_lookup_elem(&fair_share_adj, &key);
	/* Two CPUs may both pass at cap - 1: a share is exceeded by at most the CPUs. */
	if (cap > 0 && (n ? *n : 0) + (adj ? *adj : 0) >= cap) {
		n = tlm_map_lookup_or_init(fair_share_refused, &key, &zero);
		if (n)
			__sync_fetch_and_add(n, 1);
		return false;
	}
	if (n) {
		__sync_fetch_and_add(n, 1);
		return true;
	}
	r = tlm_map_insert(fair_share, &key, &one);
	if (!r)
		return true;
	n = bpf_map_lookup_elem(&fair_share, &key); /* -EEXIST: another CPU's */
	/* No count can be kept (FAIR_SHARE_KEYS owners already; the insert's failure is
	 * counted as the map's error): admitted, uncounted. Refusing would let a user
	 * with many uids lock every other user out. */
	if (!n)
		return true;
	__sync_fetch_and_add(n, 1);
	return true;
}

/* Root's entries are not counted: one compare, no call. */
static __always_inline bool fair_share_take(TLM_PARAM, __u32 table, __u32 uid, __s64 cap)
{
	return !uid || fair_share_take_counted(TLM_ARG, table, uid, cap);
}

/* n entries of table that owner uid made are deleted (or were not made after all). */
static __always_inline void fair_share_give_n(__u32 table, __u32 uid, __s64 n)
{
	struct fair_share_key key = {.uid = uid, .table = table};
	__s64 *cnt;

	if (!uid || !n)
		return;
	cnt = bpf_map_lookup_elem(&fair_share, &key);
	if (cnt)
		__sync_fetch_and_add(cnt, -n);
}

static __always_inline void fair_share_give(__u32 table, __u32 uid)
{
	fair_share_give_n(table, uid, 1);
}

#endif /* BPFTEL_LIB_FAIR_SHARE_H */
