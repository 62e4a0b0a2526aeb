// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The self-overhead budget's driver (throttle.h). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "budget.h"
#include "overhead.h"
#include "throttle.h"
#include "user/common/proc.h"
#include "user/common/ctl.h"
#include "user/common/log.h"
#include "user/manager/manager.h"
#include "user/sharedlibs/uprobes.h"

/* Files per module the budget measures and can shed: every file the registry holds
 * (uprobes_internal.h's MAX_FILES), the array grown as they come. */
#define MAX_TRACKED 1024

struct tracked {
	__u64 dev, ino, sdev;
	char path[256];
	bool seen;	/* in this window's list */
	__u64 calls[2]; /* entries, returns at the last window */
	__u64 stepped;	/* of the entries, single-stepped ones then */
	size_t npids;
	__u32 pids[BPFTEL_UPROBE_LOAD_PIDS];
	__u64 ticks[BPFTEL_UPROBE_LOAD_PIDS]; /* their CPU time then, clock ticks */
};

struct mod_throttle {
	struct bpftel_budget b;
	bool running;	/* at the last window */
	__u64 restarts; /* the module's, then */
	size_t n, cap;
	struct tracked *files; /* n of cap */
	struct bpftel_throttle_status st; /* under t->lock */
};

struct bpftel_throttle {
	struct bpftel_agent *a;
	pthread_mutex_t lock; /* the status of each module */
	long long last_ms, next_ms;
	/* The budgets and window the last window ran with: a reload that changes them is
	 * acted on at the next tick, not at the end of the old window (up to 60 s). */
	double last_pct[BPFTEL_CFG_MAX_MODULES];
	unsigned int last_window_s;
	struct mod_throttle mods[BPFTEL_CFG_MAX_MODULES];
};

int bpftel_throttle__new(struct bpftel_agent *a, struct bpftel_throttle **out)
{
	struct bpftel_throttle *t = calloc(1, sizeof(*t));
	size_t i;

	*out = NULL;
	if (!t)
		return -ENOMEM;
	t->a = a;
	pthread_mutex_init(&t->lock, NULL);
	for (i = 0; i < BPFTEL_CFG_MAX_MODULES; i++)
		bpftel_budget_init(&t->mods[i].b);
	*out = t; /* whole: its readers (reports, /metrics) may already run */
	return 0;
}

void bpftel_throttle__free(struct bpftel_throttle *t)
{
	size_t i;

	if (!t)
		return;
	for (i = 0; i < BPFTEL_CFG_MAX_MODULES; i++)
		free(t->mods[i].files);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* utime + stime of pid (fields 14 and 15), in clock ticks; 0 if it is gone. */
static __u64 cpu_ticks(__u32 pid)
{
	unsigned long long t[2];

	return bpftel_proc_stat(pid, 14, 2, t) ? t[0] + t[1] : 0;
}

/* CPU seconds f's processes used since the last window; their times kept for the next. */
static double procs_cpu_s(struct tracked *f, const struct bpftel_uprobe_file_load *r)
{
	static long hz;
	__u64 ticks, delta = 0;
	size_t i, k;

	if (!hz)
		hz = sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100;
	for (i = 0; i < r->nprocs && i < BPFTEL_UPROBE_LOAD_PIDS; i++) {
		ticks = cpu_ticks(r->pids[i]);
		for (k = 0; k < f->npids && f->pids[k] != r->pids[i]; k++)
			;
		if (k < f->npids && ticks >= f->ticks[k])
			delta += ticks - f->ticks[k]; /* a new process counts from now */
		f->pids[i] = r->pids[i];
		f->ticks[i] = ticks;
	}
	f->npids = i;
	/* More processes than listed: what the others used is not known, and the sum
	 * would be no bound on what the file's probes could add back (budget.h). */
	return r->nprocs > BPFTEL_UPROBE_LOAD_PIDS ? INFINITY : (double)delta / hz;
}

/* r's file in mt's list, added if new: its index, or -1 (no room). */
static long track(struct mod_throttle *mt, const struct bpftel_uprobe_file_load *r)
{
	struct tracked *f;
	size_t i, cap;

	for (i = 0; i < mt->n; i++) {
		if (mt->files[i].dev == r->dev && mt->files[i].ino == r->ino &&
		    mt->files[i].sdev == r->sdev)
			return (long)i;
	}
	if (mt->n == mt->cap) {
		cap = mt->cap ? mt->cap * 2 : 16;
		f = cap <= MAX_TRACKED ? realloc(mt->files, cap * sizeof(*f)) : NULL;
		if (!f)
			return -1;
		mt->files = f;
		mt->cap = cap;
	}
	f = &mt->files[mt->n++];
	memset(f, 0, sizeof(*f));
	f->dev = r->dev;
	f->ino = r->ino;
	f->sdev = r->sdev;
	memcpy(f->calls, r->calls, sizeof(f->calls)); /* counted from here */
	f->stepped = r->calls_stepped;
	return (long)(mt->n - 1);
}

/* What one call costs at entry and at return for the module's uprobe programs (trap +
 * average run time), and its other programs' run time per second. An entry's trap is
 * priced by what its file's instructions are (a file counts its single-stepped
 * entries): a module's entry programs differ (libssl's emulated, a Go RET stepped, at
 * ~17x the cost), and one price for all was the last program's. */
struct costs {
	double call_ns[2]; /* entry (the programs' trap), return */
	double entry_run_ns;		  /* an entry's program run alone */
	double trap_stepped, trap_emulated; /* < 0: not calibrated (call_ns[0] then) */
	double other_ns_per_s;
};

/* Windows of run stats older than max_age_ns say nothing of now (overhead.h). */
static void module_costs(const struct bpftel_prog_overhead *o, int n, const char *module,
			 const struct bpftel_trap_cost *tc, __u64 max_age_ns, struct costs *c)
{
	__u64 runs[2] = {0, 0}, ns[2] = {0, 0};
	double trap[2] = {0, 0};
	int i, k;

	memset(c, 0, sizeof(*c));
	for (i = 0; i < n; i++) {
		if (strcmp(o[i].p.module, module))
			continue;
		if (!o[i].trap) {
			c->other_ns_per_s += bpftel_overhead_recent_run_ns_per_s(&o[i], max_age_ns);
			continue;
		}
		k = !strcmp(o[i].trap, "uretprobe"); /* its trap_ns: what it adds to an entry */
		runs[k] += o[i].p.run_cnt;
		ns[k] += o[i].p.run_time_ns;
		/* Unknown trap cost (calibration failed): run time alone, a lower bound. */
		trap[k] = o[i].trap_ns > 0 ? o[i].trap_ns : 0;
	}
	for (k = 0; k < 2; k++)
		c->call_ns[k] = trap[k] + (runs[k] ? (double)ns[k] / runs[k] : 0);
	c->entry_run_ns = runs[0] ? (double)ns[0] / runs[0] : 0;
	/* As overhead.c prices them: not where the calibration failed. */
	c->trap_stepped = tc->known && tc->uprobe_ns > 0 ? tc->uprobe_ns : -1;
	c->trap_emulated = tc->uprobe_emulated_ns > 0 ? tc->uprobe_emulated_ns : c->trap_stepped;
}

/* What a file's calls over the window cost: its entries (stepped of them) and its
 * returns, in ns. */
static double file_cost_ns(const struct costs *c, double entries, double stepped,
			   double returns)
{
	double entry;

	if (stepped > entries)
		stepped = entries;
	entry = c->trap_stepped < 0
			? entries * c->call_ns[0]
			: entries * c->entry_run_ns + stepped * c->trap_stepped +
				  (entries - stepped) * c->trap_emulated;
	return entry + returns * c->call_ns[1];
}

/* A module stopped, restarted or lost its budget: its new instance attaches every file. */
static void reset(struct mod_throttle *mt)
{
	__u64 episodes = mt->b.episodes;

	bpftel_budget_init(&mt->b);
	mt->b.episodes = episodes;
	mt->n = 0;
}

static void set_status(struct bpftel_throttle *t, struct mod_throttle *mt, double limit,
		       double load, const char *reason, const struct bpftel_uprobe_file_load *r,
		       size_t n)
{
	struct bpftel_throttle_status *st = &mt->st;
	size_t i;

	pthread_mutex_lock(&t->lock);
	st->budget = limit > 0;
	st->limit_percent = limit * 100;
	st->load_percent = load < 0 ? -1 : load * 100;
	st->episodes = mt->b.episodes;
	if (mt->b.throttled && !st->throttled)
		st->since = time(NULL);
	st->throttled = mt->b.throttled;
	if (reason)
		snprintf(st->reason, sizeof(st->reason), "%s", reason);
	if (!st->throttled)
		st->reason[0] = '\0';
	st->nshed = 0;
	for (i = 0; st->throttled && i < n; i++) {
		if (r[i].shed && st->nshed < BPFTEL_THROTTLE_SHOWN)
			snprintf(st->shed[st->nshed++], sizeof(st->shed[0]), "%s", r[i].path);
	}
	pthread_mutex_unlock(&t->lock);
}

/* Take every shed file of the module back. */
static void unshed_all(struct bpftel_agent *a, const char *module,
		       const struct bpftel_uprobe_file_load *r, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (r[i].shed && bpftel_uprobes__unshed(a->uprobes, module, &r[i]))
			pr_warn("budget: %s: cannot take %s back", module, r[i].path);
	}
}

/* Every file the running module has shed back, read from the registry now. */
static void unshed_module(struct bpftel_agent *a, const char *module)
{
	struct bpftel_uprobe_file_load *r;
	int n = bpftel_uprobes__file_loads(a->uprobes, module, &r);

	unshed_all(a, module, r, n > 0 ? (size_t)n : 0);
	free(r);
}

/* Forget files gone from the module's list (their slots may serve others). */
static void prune(struct mod_throttle *mt)
{
	size_t i, kept = 0;

	for (i = 0; i < mt->n; i++) {
		if (!mt->files[i].seen)
			continue;
		mt->files[kept] = mt->files[i];
		mt->files[kept++].seen = false;
	}
	mt->n = kept;
}

/*
 * One window of one module with a budget (limit > 0) that runs: measure, decide, act.
 * Without c, only take the counts and CPU times the next window starts from.
 */
static void step_module(struct bpftel_throttle *t, struct mod_throttle *mt, const char *module,
			double limit, double dt_s, const struct costs *c)
{
	struct bpftel_budget_cfg cfg = {.limit = limit,
					.hold_min = BPFTEL_BUDGET_HOLD_MIN,
					.hold_max = BPFTEL_BUDGET_HOLD_MAX,
					.calm = BPFTEL_BUDGET_CALM};
	struct bpftel_budget_file *bf = NULL;
	struct bpftel_uprobe_file_load *r = NULL;
	struct bpftel_budget_decision d;
	double load = c ? c->other_ns_per_s / 1e9 : 0, calls_d[2], stepped;
	char reason[320] = "";
	size_t nb = 0, i, k;
	struct tracked *f;
	size_t *tf = NULL;
	long ti;
	int n;

	n = bpftel_uprobes__file_loads(t->a->uprobes, module, &r);
	if (n > 0) {
		bf = calloc(n, sizeof(*bf));
		tf = calloc(n, sizeof(*tf));
		if (!bf || !tf)
			n = 0; /* no window: the next one measures from the last counts */
	}
	for (i = 0; n > 0 && i < (size_t)n; i++) {
		ti = track(mt, &r[i]);
		if (ti < 0)
			continue;
		f = &mt->files[ti];
		f->seen = true;
		memset(&bf[nb], 0, sizeof(bf[nb]));
		for (k = 0; k < 2; k++) {
			/* A counter below the last one: its slot was reused, count afresh. */
			calls_d[k] = r[i].calls[k] >= f->calls[k] ? r[i].calls[k] - f->calls[k]
								  : r[i].calls[k];
			f->calls[k] = r[i].calls[k];
		}
		stepped = r[i].calls_stepped >= f->stepped ? r[i].calls_stepped - f->stepped
							   : r[i].calls_stepped;
		f->stepped = r[i].calls_stepped;
		bf[nb].load = c ? file_cost_ns(c, calls_d[0], stepped, calls_d[1]) / 1e9 / dt_s : 0;
		bf[nb].potential = procs_cpu_s(f, &r[i]) / dt_s;
		bf[nb].shed = r[i].shed;
		snprintf(f->path, sizeof(f->path), "%s", r[i].path);
		load += bf[nb].load;
		tf[nb] = (size_t)ti; /* an index: the array may grow under later files */
		/* r[nb] follows bf[nb] from here. */
		r[nb++] = r[i];
	}
	if (!c) {
		prune(mt);
		goto out;
	}
	bpftel_budget_step(&mt->b, &cfg, load, bf, nb, &d);
	if (d.action == BPFTEL_BUDGET_SHED) {
		snprintf(reason, sizeof(reason),
			 "%s: %.2f %% of one CPU over %.0f s, budget %.2f %%; shed %s "
			 "(%.2f %%)",
			 bpftel_budget_why_text(d.why), 100 * load, dt_s, 100 * limit,
			 mt->files[tf[d.file]].path, 100 * bf[d.file].load);
		if (bpftel_uprobes__shed(t->a->uprobes, module, &r[d.file]))
			pr_warn("budget: %s: cannot shed %s now", module, r[d.file].path);
		else
			r[d.file].shed = true;
		pr_warn("budget: module '%s' throttled: %s", module, reason);
	} else if (d.action == BPFTEL_BUDGET_RECOVER) {
		unshed_all(t->a, module, r, nb);
		for (i = 0; i < nb; i++)
			r[i].shed = false;
		pr_info("budget: module '%s' running again: %s (%.2f %% of one CPU)", module,
			bpftel_budget_why_text(d.why), 100 * load);
	}
	set_status(t, mt, limit, load, reason[0] ? reason : NULL, r, nb);
	prune(mt);
out:
	free(bf);
	free(tf);
	free(r);
}

void bpftel_throttle__tick(void *arg)
{
	struct bpftel_throttle *t = arg;
	struct bpftel_agent *a = t->a;
	double pct[BPFTEL_CFG_MAX_MODULES], dt_s;
	long long now = bpftel_mono_ms();
	struct bpftel_prog_overhead *o = NULL;
	struct bpftel_module *m;
	struct mod_throttle *mt;
	unsigned int window_s, period_s;
	struct costs c;
	bool any = false, running;
	size_t i;
	int n = 0;

	pthread_mutex_lock(&a->cfg_lock);
	memcpy(pct, a->cfg.max_cpu_percent, sizeof(pct));
	window_s = a->cfg.max_cpu_window_s ?: 2;
	period_s = a->cfg.run_stats_period_s;
	pthread_mutex_unlock(&a->cfg_lock);
	if (now < t->next_ms && window_s == t->last_window_s &&
	    !memcmp(pct, t->last_pct, sizeof(pct)))
		return;
	memcpy(t->last_pct, pct, sizeof(pct));
	t->last_window_s = window_s;
	dt_s = t->last_ms ? (now - t->last_ms) / 1e3 : 0;
	t->last_ms = now;
	t->next_ms = now + window_s * 1000LL;
	for (i = 0; i < bpftel_agent_nmodules && i < BPFTEL_CFG_MAX_MODULES; i++)
		any |= pct[i] > 0 || t->mods[i].b.throttled;
	if (!any) {
		/* No budget anywhere: what a budget given back later measures starts from
		 * that window (the calls of the hours without one are no window's). */
		for (i = 0; i < bpftel_agent_nmodules && i < BPFTEL_CFG_MAX_MODULES; i++) {
			if (t->mods[i].running) {
				reset(&t->mods[i]);
				t->mods[i].running = false;
				set_status(t, &t->mods[i], 0, -1, NULL, NULL, 0);
			}
		}
		return;
	}
	n = bpftel_agent_overheads(a, &o);
	for (i = 0; i < bpftel_agent_nmodules && i < BPFTEL_CFG_MAX_MODULES; i++) {
		const char *name = bpftel_agent_modules[i].name;

		mt = &t->mods[i];
		m = bpftel_agent_modules[i].selectable ? bpftel_manager__find(a->mgr, name) : NULL;
		if (!m)
			continue;
		running = bpftel_module__state(m) == BPFTEL_MOD_RUNNING;
		if (pct[i] <= 0 && mt->b.throttled) {
			/* The budget was taken away (SIGHUP): everything back. */
			unshed_module(a, name);
			pr_info("budget: module '%s': no budget any more, running again", name);
		}
		if (running && pct[i] > 0 && mt->running &&
		    bpftel_module__restarts(m) != mt->restarts) {
			/* A new instance starts with every file; a shed decided on the old
			 * one's loads may have landed on it: taken back. */
			unshed_module(a, name);
		}
		if (pct[i] <= 0 || !running || bpftel_module__restarts(m) != mt->restarts ||
		    !mt->running || !dt_s) {
			reset(mt);
			mt->running = running && pct[i] > 0;
			mt->restarts = bpftel_module__restarts(m);
			set_status(t, mt, pct[i] / 100, -1, NULL, NULL, 0);
			if (mt->running) /* a baseline for the next window */
				step_module(t, mt, name, pct[i] / 100, window_s, NULL);
			continue;
		}
		/* Two run-stats cycles or budget windows: a sampled window is that recent. */
		module_costs(o, n > 0 ? n : 0, name, &a->trap,
			     2ull * (period_s > window_s ? period_s : window_s) * 1000000000ull,
			     &c);
		step_module(t, mt, name, pct[i] / 100, dt_s, &c);
	}
	free(o);
}

/*
 * The budget itself is the configuration's, read now: the status the windows set says
 * nothing until the housekeeping thread's first one, and a `bpftel modules` right after
 * start (or after SIGHUP) must show the budget configured, its load not known yet.
 */
void bpftel_throttle__status(struct bpftel_throttle *t, const char *module,
			     struct bpftel_throttle_status *out)
{
	double pct;
	size_t i;

	memset(out, 0, sizeof(*out));
	for (i = 0; t && i < bpftel_agent_nmodules && i < BPFTEL_CFG_MAX_MODULES; i++) {
		if (strcmp(bpftel_agent_modules[i].name, module))
			continue;
		pthread_mutex_lock(&t->lock);
		*out = t->mods[i].st;
		pthread_mutex_unlock(&t->lock);
		pthread_mutex_lock(&t->a->cfg_lock);
		pct = t->a->cfg.max_cpu_percent[i];
		pthread_mutex_unlock(&t->a->cfg_lock);
		/* limit_percent went through a fraction (7 -> 0.07 -> 7.000000000000001):
		 * the same budget within rounding. */
		if (!out->budget || fabs(out->limit_percent - pct) > 1e-6 * (pct > 1 ? pct : 1))
			out->load_percent = -1; /* no window measured against this budget */
		out->budget = pct > 0;
		out->limit_percent = pct;
	}
}
