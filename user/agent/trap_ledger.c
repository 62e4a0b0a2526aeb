// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Traps added up run by run (trap_ledger.h). */
#include <string.h>

#include "trap_ledger.h"

void bpftel_trap_ledger_update(struct bpftel_trap_ledger *l, struct bpftel_trap_reading *r,
			       size_t n)
{
	struct bpftel_trap_ledger next;
	size_t i, k;
	__u64 runs;

	next.n = 0;
	pthread_mutex_lock(&l->lock);
	for (i = 0; i < n; i++) {
		r[i].total_ns = -1;
		if (r[i].trap_ns < 0)
			continue; /* not calibrated: nothing to add up */
		for (k = 0; k < l->n && l->e[k].id != r[i].id; k++)
			;
		runs = r[i].runs;
		if (k == l->n) { /* first seen: its runs so far at today's trap */
			r[i].total_ns = (double)runs * r[i].trap_ns;
		} else {
			r[i].total_ns = l->e[k].ns;
			/* A reading older than the last one (another thread's) adds nothing. */
			if (runs > l->e[k].runs)
				r[i].total_ns += (double)(runs - l->e[k].runs) * r[i].trap_ns;
			else
				runs = l->e[k].runs;
		}
		if (next.n < BPFTEL_TRAP_LEDGER_MAX) {
			next.e[next.n].id = r[i].id;
			next.e[next.n].runs = runs;
			next.e[next.n++].ns = r[i].total_ns;
		}
	}
	memcpy(l->e, next.e, next.n * sizeof(next.e[0]));
	l->n = next.n;
	pthread_mutex_unlock(&l->lock);
}
