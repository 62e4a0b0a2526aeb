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

int bpftel_gpu_shares_recount(int procs_fd, int counts_fd, int adj_fd,
			      struct fair_share_holders *top)
{
	struct fair_share_tally *t[GPU_SHARE__COUNT] = {};
	bool any = false;
	int i, err = 0;

	for (i = 0; i < GPU_SHARE__COUNT && !err; i++) {
		err = fair_share_tally_begin(counts_fd, (__u32)i, &t[i]);
		any |= t[i] != NULL;
	}
	if (!err && any)
		err = tally_rows(procs_fd, t);
	for (i = 0; i < GPU_SHARE__COUNT; i++) {
		if (err)
			fair_share_tally_free(t[i]);
		else
			fair_share_tally_end(t[i], counts_fd, adj_fd, &top[i]);
	}
	return err;
}
