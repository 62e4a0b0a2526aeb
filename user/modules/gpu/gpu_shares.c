// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Users' shares of the GPU module's tables, recounted (gpu_shares.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>

#include "gpu_shares.h"

const char *const bpftel_gpu_share_names[GPU_SHARE__COUNT] = {
	[GPU_SHARE_PROCS] = "processes",
	[GPU_SHARE_ALLOCS] = "allocations",
	[GPU_SHARE_KERNEL_ROWS] = "kernel_rows",
	[GPU_SHARE_ERROR_KINDS] = "error_kinds",
};

/* Rows read per batch: a bucket of gpu_procs holding more makes the batch fail
 * (ENOSPC), and this recount with it. */
#define RECOUNT_BATCH 64

/* Each row of gpu_procs into the tallies: its owner holds the row, and what the row
 * says the process holds of the other tables. A walk of a map the programs and the
 * sweep change may see a row twice or miss one: the next recount sets it right. */
static int tally_rows(int procs_fd, struct fair_share_tally **t)
{
	struct gpu_proc_stats *vals;
	__u32 keys[RECOUNT_BATCH], at = 0, next = 0, count, i;
	bool first = true;
	int err = 0;

	vals = calloc(RECOUNT_BATCH, sizeof(*vals));
	if (!vals)
		return -ENOMEM;
	do {
		count = RECOUNT_BATCH;
		if (bpf_map_lookup_batch(procs_fd, first ? NULL : &at, &next, keys, vals, &count,
					 NULL))
			err = errno == ENOENT ? 1 : -errno; /* 1: the walk's end */
		for (i = 0; err >= 0 && i < count; i++) {
			fair_share_tally_add(t[GPU_SHARE_PROCS], vals[i].owner, 1);
			fair_share_tally_add(t[GPU_SHARE_ALLOCS], vals[i].owner,
					     vals[i].allocs_tracked);
			fair_share_tally_add(t[GPU_SHARE_KERNEL_ROWS], vals[i].owner,
					     vals[i].kernel_rows);
			fair_share_tally_add(t[GPU_SHARE_ERROR_KINDS], vals[i].owner,
					     vals[i].error_kinds);
		}
		at = next;
		first = false;
	} while (!err);
	free(vals);
	return err < 0 ? err : 0;
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

static bool tallies_moved(struct fair_share_tally **t, int counts_fd)
{
	int i;

	for (i = 0; i < GPU_SHARE__COUNT; i++)
		if (fair_share_tally_moved(t[i], counts_fd))
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
int bpftel_gpu_shares_recount(int procs_fd, int counts_fd, int adj_fd,
			      struct fair_share_holders *top)
{
	struct fair_share_tally *t[GPU_SHARE__COUNT] = {};
	int i, tries, err = 0;
	bool any;

	for (tries = 0; tries < RECOUNT_TRIES; tries++) {
		any = false;
		for (i = 0; i < GPU_SHARE__COUNT && !err; i++) {
			err = fair_share_tally_begin(counts_fd, (__u32)i, &t[i]);
			any |= t[i] != NULL;
		}
		if (!err && any)
			err = tally_rows(procs_fd, t);
		if (err || !any || tries == RECOUNT_TRIES - 1 || !tallies_moved(t, counts_fd))
			break;
		tallies_free(t);
	}
	for (i = 0; i < GPU_SHARE__COUNT; i++) {
		if (err)
			fair_share_tally_free(t[i]);
		else
			fair_share_tally_end(t[i], counts_fd, adj_fd, &top[i]);
	}
	return err;
}
