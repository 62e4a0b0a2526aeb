// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Users' shares of the GPU module's tables, recounted (gpu_shares.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_shares.h"
#include "user/manager/map_batch.h"

const char *const bpftel_gpu_share_names[GPU_SHARE__COUNT] = {
	[GPU_SHARE_PROCS] = "processes",
	[GPU_SHARE_ALLOCS] = "allocations",
	[GPU_SHARE_KERNEL_ROWS] = "kernel_rows",
	[GPU_SHARE_ERROR_KINDS] = "error_kinds",
	[GPU_SHARE_THREADS] = "threads",
	[GPU_SHARE_CALLS_IN_FLIGHT] = "calls_in_flight",
};

/* What one entry of a table holds of each owner's shares, into the tallies. */
typedef void (*tally_fn)(const void *value, struct fair_share_tally **t);

/* A process's row: its owner holds the row, and what the row says the process holds of
 * the other tables. */
static void tally_proc(const void *value, struct fair_share_tally **t)
{
	const struct gpu_proc_stats *st = value;

	fair_share_tally_add(t[GPU_SHARE_PROCS], st->owner, 1);
	fair_share_tally_add(t[GPU_SHARE_ALLOCS], st->owner, st->allocs_tracked);
	fair_share_tally_add(t[GPU_SHARE_KERNEL_ROWS], st->owner, st->kernel_rows);
	fair_share_tally_add(t[GPU_SHARE_ERROR_KINDS], st->owner, st->error_kinds);
}

/* A slot is taken (owner set) before its state's owner is written: a walk in between
 * counts it as its previous holder's, or root's, until the next recount. */
static void tally_thread_slot(const void *value, struct fair_share_tally **t)
{
	const struct gpu_thread_slot *s = value;

	if (s->owner) /* a slot a thread holds */
		fair_share_tally_add(t[GPU_SHARE_THREADS], s->th.owner, 1);
}

static void tally_thread(const void *value, struct fair_share_tally **t)
{
	fair_share_tally_add(t[GPU_SHARE_THREADS], ((const struct gpu_thread *)value)->owner, 1);
}

static void tally_call(const void *value, struct fair_share_tally **t)
{
	fair_share_tally_add(t[GPU_SHARE_CALLS_IN_FLIGHT],
			     ((const struct gpu_call *)value)->owner, 1);
}

struct tally_walk {
	tally_fn each;
	struct fair_share_tally **t;
};

static int tally_entry(void *ctx, const void *key, const void *value)
{
	struct tally_walk *tw = ctx;

	(void)key;
	tw->each(value, tw->t);
	return 0;
}

/* Each entry of map fd into the tallies, in batches (map_batch.h). A walk of a map the
 * programs and the sweep change may see an entry twice or miss one: the next recount
 * sets it right. */
static int tally_map(int fd, size_t key_size, size_t value_size, tally_fn each,
		     struct fair_share_tally **t)
{
	struct tally_walk tw = {each, t};

	return bpftel_map_batch_walk(fd, key_size, value_size, tally_entry, &tw);
}

/* Walk the tables whose owners have counts (a tally each). */
static int tally_tables(const struct gpu_share_maps *m, struct fair_share_tally **t)
{
	int err = 0;

	if (t[GPU_SHARE_PROCS] || t[GPU_SHARE_ALLOCS] || t[GPU_SHARE_KERNEL_ROWS] ||
	    t[GPU_SHARE_ERROR_KINDS])
		err = tally_map(m->procs, sizeof(__u32), sizeof(struct gpu_proc_stats),
				tally_proc, t);
	if (!err && t[GPU_SHARE_THREADS])
		err = tally_map(m->thread_slots, sizeof(__u32), sizeof(struct gpu_thread_slot),
				tally_thread_slot, t) ?:
		      tally_map(m->threads, sizeof(__u64), sizeof(struct gpu_thread),
				tally_thread, t);
	if (!err && t[GPU_SHARE_CALLS_IN_FLIGHT])
		err = tally_map(m->inflight, sizeof(struct gpu_call_key), sizeof(struct gpu_call),
				tally_call, t);
	return err;
}

/* Walks made at most, while an owner's count moves during them. */
#define RECOUNT_TRIES 3

static void tallies_free(struct fair_share_tally **t)
{
	int i;

	for (i = 0; i < GPU_SHARE__COUNT; i++) {
		fair_share_tally_free(t[i]);
		t[i] = NULL;
	}
}

/* Did a count move during the walk? Not asked of the calls in flight, whose counts move
 * at every allocation, copy and sync: a busy owner's would make every recount walk
 * again, and its correction is off by what the walk half saw of its calls (a few), for
 * 10 s at most. */
static bool tallies_moved(struct fair_share_tally **t, int counts_fd)
{
	int i;

	for (i = 0; i < GPU_SHARE__COUNT; i++)
		if (i != GPU_SHARE_CALLS_IN_FLIGHT && fair_share_tally_moved(t[i], counts_fd))
			return true;
	return false;
}

/*
 * An owner's count that moves during the walk (its processes making or deleting
 * entries) makes the correction off by what the walk saw of that, until the next
 * recount: one too many refuses the owner's next entry, one too few admits one past
 * its share. So a walk during which a count moved is made again, a few times; walks
 * take a few milliseconds and a process's calls come in bursts, so the next is
 * nearly always quiet. One that never is still corrects, as USM's sweep does.
 */
int bpftel_gpu_shares_recount(const struct gpu_share_maps *m, struct fair_share_holders *top)
{
	struct fair_share_tally *t[GPU_SHARE__COUNT] = {};
	int i, tries, err = 0;
	bool any;

	for (tries = 0; tries < RECOUNT_TRIES; tries++) {
		any = false;
		for (i = 0; i < GPU_SHARE__COUNT && !err; i++) {
			err = fair_share_tally_begin(m->counts, (__u32)i, &t[i]);
			any |= t[i] != NULL;
		}
		if (!err && any)
			err = tally_tables(m, t);
		if (err || !any || tries == RECOUNT_TRIES - 1 || !tallies_moved(t, m->counts))
			break;
		tallies_free(t);
	}
	for (i = 0; i < GPU_SHARE__COUNT; i++) {
		if (err)
			fair_share_tally_free(t[i]);
		else
			fair_share_tally_end(t[i], m->counts, m->adj, &top[i]);
	}
	return err;
}
