// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Programs' overhead: run time plus traps (overhead.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "overhead.h"
#include "user/sharedlibs/uprobes.h"

#define MAX_UPROBE_PROGS 32

/*
 * A program whose entry points are on both kinds of instruction: the two calibrated
 * costs weighted by the calls counted on its files' points of each kind
 * (bpf/uprobe_hits.h: a Go executable's entries on their JBE, emulated, and its
 * RETs, single-stepped; GnuTLS's reads on _gnutls_recv_int, emulated, and its kTLS
 * read, single-stepped, which runs only with kTLS on). Only the files of its
 * libraries: a module's other entry program probes others (USM: TLS libraries, Go
 * executables). No calls yet: the single-stepped cost.
 */
static double mixed_trap_ns(struct bpftel_agent *a, const struct bpftel_trap_cost *tc,
			    const struct bpftel_uprobe_prog *up)
{
	struct bpftel_uprobe_file_load *fl = NULL;
	double emulated = 0, stepped = 0;
	int n, i;

	n = bpftel_uprobes__file_loads(a->uprobes, up->module, &fl);
	for (i = 0; i < n; i++) {
		if (!fl[i].counted || !(up->entry_libs & (1u << fl[i].lib)))
			continue;
		emulated += fl[i].calls[0] - fl[i].calls_stepped;
		stepped += fl[i].calls_stepped;
	}
	free(fl);
	if (emulated + stepped <= 0)
		return tc->uprobe_ns;
	return (emulated * tc->uprobe_emulated_ns + stepped * tc->uprobe_ns) /
	       (emulated + stepped);
}

/* A program's trap per run. Some entries and some returns: the entry's cost. An entry
 * probe's cost is the calibrated one of its instructions' kind when all are alike,
 * else both weighted by calls. */
static double trap_ns(struct bpftel_agent *a, const struct bpftel_trap_cost *tc,
		      const struct bpftel_uprobe_prog *up, struct bpftel_prog_overhead *o)
{
	static const char *const kinds[] = {NULL, "emulated", "single-stepped", "mixed"};
	double ret;

	o->trap = up->ret && !up->entry ? "uretprobe" : "uprobe";
	o->paired = up->ret && !up->entry && up->ret_paired;
	o->entry_insn = up->entry ? kinds[up->entry_kind & 3] : NULL;
	if (!tc->known)
		return -1;
	if (!strcmp(o->trap, "uprobe")) {
		if (tc->uprobe_emulated_ns <= 0)
			return tc->uprobe_ns;
		if (up->entry_kind == 1)
			return tc->uprobe_emulated_ns;
		return up->entry_kind == 3 ? mixed_trap_ns(a, tc, up) : tc->uprobe_ns;
	}
	/* In the noise, pair - uprobe may come out below 0: a return adds little. */
	ret = tc->pair_ns - tc->uprobe_ns;
	return o->paired ? (ret > 0 ? ret : 0) : tc->uretprobe_ns;
}

/* Each uprobe program's traps so far, added up run by run in the agent's ledger. */
static void trap_totals(struct bpftel_agent *a, struct bpftel_prog_overhead *o, int n)
{
	struct bpftel_trap_reading r[BPFTEL_TRAP_LEDGER_MAX];
	int idx[BPFTEL_TRAP_LEDGER_MAX];
	size_t nr = 0, j;
	int i;

	for (i = 0; i < n && nr < BPFTEL_TRAP_LEDGER_MAX; i++) {
		if (!o[i].trap)
			continue;
		idx[nr] = i;
		r[nr++] = (struct bpftel_trap_reading){.id = o[i].p.id, .runs = o[i].p.run_cnt,
						       .trap_ns = o[i].trap_ns};
	}
	bpftel_trap_ledger_update(&a->traps, r, nr);
	for (j = 0; j < nr; j++)
		o[idx[j]].trap_total_ns = r[j].total_ns;
}

int bpftel_agent_overheads(struct bpftel_agent *a, struct bpftel_prog_overhead **out)
{
	struct bpftel_uprobe_prog up[MAX_UPROBE_PROGS];
	struct bpftel_prog_overhead *o;
	struct bpftel_tlm_prog *tp;
	size_t nup, k;
	int n, i;

	*out = NULL;
	nup = a->uprobes ? bpftel_uprobes__programs(a->uprobes, up, MAX_UPROBE_PROGS) : 0;
	n = bpftel_telemetry__programs(a->tlm, &tp);
	if (n < 0)
		return n;
	o = calloc(n + 1, sizeof(*o));
	if (!o) {
		free(tp);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		o[i].p = tp[i];
		for (k = 0; k < nup; k++) {
			if (strcmp(up[k].module, tp[i].module) || strcmp(up[k].prog, tp[i].program))
				continue;
			o[i].trap_ns = trap_ns(a, &a->trap, &up[k], &o[i]);
		}
	}
	trap_totals(a, o, n);
	free(tp);
	*out = o;
	return n;
}

double bpftel_overhead_seconds(const struct bpftel_prog_overhead *o)
{
	if (o->trap_ns < 0 || o->trap_total_ns < 0)
		return -1;
	return (o->p.run_time_ns + o->trap_total_ns) / 1e9;
}

double bpftel_overhead_recent_run_ns_per_s(const struct bpftel_prog_overhead *o,
					   __u64 max_age_ns)
{
	return o->p.window_age_ns <= max_age_ns ? o->p.window_ns_per_s : 0;
}

double bpftel_overhead_window_ns_per_s(const struct bpftel_prog_overhead *o)
{
	if (o->trap_ns < 0)
		return -1;
	return o->p.window_ns_per_s + o->p.window_runs_per_s * o->trap_ns;
}
