// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Traps added up run by run (trap_ledger.h). */
#include <string.h>

#include "trap_ledger.h"

/* Readings a program may be missing from before it is forgotten: another thread's
 * reading, taken before a module restarted, may come in after a newer one. */
#define LEDGER_KEEP_READINGS 4

void bpftel_trap_ledger_update(struct bpftel_trap_ledger *l, struct bpftel_trap_reading *r,
			       size_t n)
{
	size_t i, k, kept;
	__u64 runs;

	pthread_mutex_lock(&l->lock);
	l->gen++;
	for (i = 0; i < n; i++) {
		r[i].total_ns = -1;
		if (r[i].trap_ns < 0)
			continue; /* not calibrated: nothing to add up */
		for (k = 0; k < l->n && l->e[k].id != r[i].id; k++)
			;
		runs = r[i].runs;
		if (k == l->n) { /* first seen: its runs so far at today's trap */
			r[i].total_ns = (double)runs * r[i].trap_ns;
			if (l->n == BPFTEL_TRAP_LEDGER_MAX)
				continue; /* no room: priced whole again next time */
			l->n++;
		} else {
			r[i].total_ns = l->e[k].ns;
			/* A reading older than the last one (another thread's) adds nothing. */
			if (runs > l->e[k].runs)
				r[i].total_ns += (double)(runs - l->e[k].runs) * r[i].trap_ns;
			else
				runs = l->e[k].runs;
		}
		l->e[k].id = r[i].id;
		l->e[k].runs = runs;
		l->e[k].ns = r[i].total_ns;
		l->e[k].seen = l->gen;
	}
	/* Programs missing from the last readings are gone (a module stopped). */
	for (k = kept = 0; k < l->n; k++)
		if (l->gen - l->e[k].seen < LEDGER_KEEP_READINGS)
			l->e[kept++] = l->e[k];
	l->n = kept;
	pthread_mutex_unlock(&l->lock);
}
