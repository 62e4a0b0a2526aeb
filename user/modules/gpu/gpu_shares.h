/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Users' shares of the GPU module's tables (enum gpu_share_table, bpf/gpu.h): a
 * process's row, and what it holds of the allocations, kernel rows and error kinds, in
 * its owner's share (bpf/lib/fair_share.h); a thread's state and a call in flight, in
 * the share of the owner they name. The programs count what they make and delete; a
 * process's end (its row and entries dropped by the sweep) and a thread gone unseen
 * they never see. So each recount sums, per owner, what the rows of gpu_procs hold and
 * the states and calls each owner's entries name, and corrects the owners' counts by it
 * (user/manager/fair_share.h).
 */
#ifndef BPFTEL_GPU_SHARES_H
#define BPFTEL_GPU_SHARES_H

#include <linux/types.h>

#include "bpf/gpu.h"
#include "user/manager/fair_share.h"

/* The tables by enum gpu_share_table: their names in JSON and /metrics (table=). */
extern const char *const bpftel_gpu_share_names[GPU_SHARE__COUNT];

/* The maps a recount reads (the tables') and writes (the counts' and corrections'). */
struct gpu_share_maps {
	int procs, thread_slots, threads, inflight;
	int counts, adj;
};

/*
 * Recount the owners' shares from the tables of m, correcting the counts (m->counts)
 * through m->adj. Nothing is read while only root holds entries, and a table no owner
 * but root holds is not read. 0, with top[t] (GPU_SHARE__COUNT of them) the owners
 * holding the most of each table; -errno when a table could not be read (nothing
 * corrected, top left as it was).
 */
int bpftel_gpu_shares_recount(const struct gpu_share_maps *m, struct fair_share_holders *top);

#endif /* BPFTEL_GPU_SHARES_H */
