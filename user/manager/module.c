// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Module lifecycle: the state machine, its steps, and the hooks run around them. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "user/common/log.h"

static const char *const state_names[] = {
	[BPFTEL_MOD_CLOSED] = "closed",
	[BPFTEL_MOD_OPENED] = "opened",
	[BPFTEL_MOD_LOADED] = "loaded",
	[BPFTEL_MOD_RUNNING] = "running",
};

const char *bpftel_module_state_name(enum bpftel_module_state state)
{
	return (unsigned)state <= BPFTEL_MOD_RUNNING ? state_names[state] : "unknown";
}

static int hook_add(struct bpftel_module *m, struct hook_list *list, struct hook h)
{
	int err = 0;

	pthread_mutex_lock(&m->lock);
	if (list->n == BPFTEL_MAX_HOOKS)
		err = -ENOSPC;
	else
		list->h[list->n++] = h;
	pthread_mutex_unlock(&m->lock);
	return err;
}

int bpftel_module__add_before_init(struct bpftel_module *m, bpftel_before_init_fn fn, void *ctx)
{
	return hook_add(m, &m->before_init, (struct hook){.before_init = fn, .ctx = ctx});
}

int bpftel_module__add_after_init(struct bpftel_module *m, bpftel_after_init_fn fn, void *ctx)
{
	return hook_add(m, &m->after_init, (struct hook){.after_init = fn, .ctx = ctx});
}

int bpftel_module__add_before_start(struct bpftel_module *m, bpftel_before_start_fn fn, void *ctx)
{
	return hook_add(m, &m->before_start, (struct hook){.before_start = fn, .ctx = ctx});
}

int bpftel_module__add_after_start(struct bpftel_module *m, bpftel_after_start_fn fn, void *ctx)
{
	return hook_add(m, &m->after_start, (struct hook){.after_start = fn, .ctx = ctx});
}

int bpftel_module__add_before_stop(struct bpftel_module *m, bpftel_before_stop_fn fn, void *ctx)
{
	return hook_add(m, &m->before_stop, (struct hook){.before_stop = fn, .ctx = ctx});
}

int bpftel_module__add_after_stop(struct bpftel_module *m, bpftel_after_stop_fn fn, void *ctx)
{
	return hook_add(m, &m->after_stop, (struct hook){.after_stop = fn, .ctx = ctx});
}

void bpftel_module__set_object(struct bpftel_module *m, struct bpf_object *obj)
{
	m->obj = obj;
}

struct bpf_object *bpftel_module__object(const struct bpftel_module *m)
{
	return m->obj;
}

const struct bpftel_module_ops *bpftel_module__ops(const struct bpftel_module *m)
{
	return m->ops;
}

const char *bpftel_module__name(const struct bpftel_module *m)
{
	return m->ops->name;
}

void *bpftel_module__priv(const struct bpftel_module *m)
{
	return m->priv;
}

enum bpftel_module_state bpftel_module__state(struct bpftel_module *m)
{
	return __atomic_load_n(&m->state, __ATOMIC_ACQUIRE);
}

static void set_state(struct bpftel_module *m, enum bpftel_module_state state)
{
	__atomic_store_n(&m->state, state, __ATOMIC_RELEASE);
}

__u64 bpftel_module__restarts(struct bpftel_module *m)
{
	__u64 starts = __atomic_load_n(&m->starts, __ATOMIC_RELAXED);

	return starts ? starts - 1 : 0;
}

int bpftel_module__add_probe(struct bpftel_module *m, const struct bpftel_probe_spec *spec)
{
	struct probe *p;

	if (!spec->name || !spec->ncand || spec->ncand > BPFTEL_PROBE_MAX_CAND)
		return -EINVAL;
	if (spec->policy == BPFTEL_PROBE_ONE_OF_GROUP && !spec->group)
		return -EINVAL;
	if (m->nprobes == BPFTEL_MAX_PROBES)
		return -ENOSPC;
	pthread_mutex_lock(&m->report_lock);
	p = &m->probes[m->nprobes++];
	memset(p, 0, sizeof(*p));
	p->spec = *spec;
	p->sock = -1;
	probe_status_init(p);
	pthread_mutex_unlock(&m->report_lock);
	return 0;
}

int bpftel_module__add_ringbuf(struct bpftel_module *m, const char *map, ring_buffer_sample_fn cb,
			       void *ctx)
{
	if (m->nringbufs == BPFTEL_MAX_RINGBUFS)
		return -ENOSPC;
	m->ringbufs[m->nringbufs++] = (struct ringbuf_sub){.map = map, .cb = cb, .ctx = ctx};
	return 0;
}

size_t bpftel_module__probes(struct bpftel_module *m, struct bpftel_probe_status *out, size_t max)
{
	size_t i, n;

	pthread_mutex_lock(&m->report_lock);
	n = m->nprobes < max ? m->nprobes : max;
	for (i = 0; i < n; i++)
		out[i] = m->probes[i].status;
	pthread_mutex_unlock(&m->report_lock);
	return n;
}

size_t bpftel_module__stop_errors(struct bpftel_module *m, int *errs, size_t max)
{
	size_t n;

	pthread_mutex_lock(&m->report_lock);
	n = m->nstop_errs < max ? m->nstop_errs : max;
	memcpy(errs, m->stop_errs, n * sizeof(*errs));
	pthread_mutex_unlock(&m->report_lock);
	return n;
}

int bpftel_module__last_failure(struct bpftel_module *m, const char **step, __u64 *failures)
{
	int err;

	pthread_mutex_lock(&m->report_lock);
	err = m->fail_err;
	if (step)
		*step = m->fail_step;
	if (failures)
		*failures = m->failures;
	pthread_mutex_unlock(&m->report_lock);
	return err;
}

static const char *const step_names[] = {"open", "load", "start", "stop"};

int bpftel_module__inject_fault(struct bpftel_module *m, const char *step, int err,
				unsigned int count)
{
	size_t i;

	for (i = 0; i < sizeof(step_names) / sizeof(step_names[0]); i++) {
		if (step && !strcmp(step, step_names[i]))
			break;
	}
	if (i == sizeof(step_names) / sizeof(step_names[0]) || err >= 0)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	m->fault_step = count ? step_names[i] : NULL;
	m->fault_err = err;
	m->fault_left = count;
	pthread_mutex_unlock(&m->lock);
	return 0;
}

/* With m->lock: does an injected fault fail this step? Its errno, or 0. */
static int injected(struct bpftel_module *m, const char *step)
{
	if (!m->fault_left || strcmp(m->fault_step, step))
		return 0;
	if (!--m->fault_left)
		m->fault_step = NULL;
	pr_warn("module '%s': injected fault at %s: %s", m->ops->name, step,
		strerror(-m->fault_err));
	return m->fault_err;
}

int bpftel_module__inject_candidate_fault(struct bpftel_module *m, const char *probe, int cand,
					  int err, unsigned int count)
{
	struct cand_fault *f, *free_slot = NULL;
	size_t i;
	int ret = 0;

	if (!probe || cand < 0 || cand >= BPFTEL_PROBE_MAX_CAND || err >= 0)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	for (i = 0, f = NULL; i < BPFTEL_MAX_CAND_FAULTS; i++) {
		if (m->cand_faults[i].left && m->cand_faults[i].cand == cand &&
		    !strcmp(m->cand_faults[i].probe, probe))
			f = &m->cand_faults[i];
		else if (!m->cand_faults[i].left && !free_slot)
			free_slot = &m->cand_faults[i];
	}
	if (!f && count)
		f = free_slot;
	if (f) {
		snprintf(f->probe, sizeof(f->probe), "%s", probe);
		f->cand = cand;
		f->err = err;
		f->left = count;
	} else if (count) {
		ret = -ENOSPC;
	}
	pthread_mutex_unlock(&m->lock);
	return ret;
}

/* With m->lock: does an injected fault reject candidate cand of probe? Its errno, or 0. */
int cand_injected(struct bpftel_module *m, const char *probe, size_t cand)
{
	struct cand_fault *f;
	size_t i;

	for (i = 0; i < BPFTEL_MAX_CAND_FAULTS; i++) {
		f = &m->cand_faults[i];
		if (!f->left || (size_t)f->cand != cand || strcmp(f->probe, probe))
			continue;
		f->left--;
		pr_warn("module '%s': injected fault on probe '%s' candidate %zu: %s", m->ops->name,
			probe, cand, strerror(-f->err));
		return f->err;
	}
	return 0;
}

static bool illegal(struct bpftel_module *m, enum bpftel_module_state want, const char *step)
{
	if (m->state == want)
		return false;
	pr_warn("module '%s': cannot %s while %s", m->ops->name, step,
		bpftel_module_state_name(m->state));
	return true;
}

/* Steps: called with m->lock held. */

static int do_open(struct bpftel_module *m)
{
	struct bpftel_hook_before_init h = {.module = m};
	size_t i;
	int err;

	m->obj = NULL;
	pthread_mutex_lock(&m->report_lock);
	m->nprobes = 0;
	pthread_mutex_unlock(&m->report_lock);
	m->nringbufs = 0;
	err = m->ops->open(m);
	if (!err && !m->obj)
		err = -EINVAL;
	if (err) {
		pr_err("module '%s': open failed: %s", m->ops->name, strerror(-err));
		if (m->ops->close)
			m->ops->close(m);
		else
			bpf_object__close(m->obj);
		m->obj = NULL;
		return err;
	}
	set_state(m, BPFTEL_MOD_OPENED);
	err = injected(m, "open");
	if (err)
		return err;
	h.obj = m->obj;
	for (i = 0; i < m->before_init.n; i++) {
		err = m->before_init.h[i].before_init(&h, m->before_init.h[i].ctx);
		if (err) {
			pr_err("module '%s': before_init hook %zu failed: %s", m->ops->name, i,
			       strerror(-err));
			return err;
		}
	}
	/* After the hooks: they may size its maps. */
	err = reuse_kept(m);
	if (err)
		pr_err("module '%s': open failed: %s", m->ops->name, strerror(-err));
	return err;
}

static int do_load(struct bpftel_module *m)
{
	struct bpftel_hook_after_init h = {.module = m, .obj = m->obj};
	unsigned int bytes;
	struct bpf_map *map;
	size_t i;
	int err;

	probes_detect(m);
	bytes = __atomic_load_n(&m->mgr->pipeline.ringbuf_bytes, __ATOMIC_RELAXED);
	for (i = 0; bytes && i < m->nringbufs; i++) {
		map = bpf_object__find_map_by_name(m->obj, m->ringbufs[i].map);
		if (map && bpf_map__set_max_entries(map, bytes))
			pr_warn("module '%s': ring buffer '%s' keeps its size: %u bytes refused",
				m->ops->name, m->ringbufs[i].map, bytes);
	}
	err = injected(m, "load");
	if (!err)
		err = m->ops->load ? m->ops->load(m) : bpf_object__load(m->obj);
	if (err) {
		pr_err("module '%s': load failed: %s%s", m->ops->name, strerror(-err),
		       err == -EPERM ? " (needs root: CAP_BPF and CAP_PERFMON)" : "");
		return err;
	}
	set_state(m, BPFTEL_MOD_LOADED);
	for (i = 0; i < m->after_init.n; i++) {
		err = m->after_init.h[i].after_init(&h, m->after_init.h[i].ctx);
		if (err) {
			pr_err("module '%s': after_init hook %zu failed: %s", m->ops->name, i,
			       strerror(-err));
			return err;
		}
	}
	return 0;
}

static int do_start(struct bpftel_module *m)
{
	struct bpftel_hook_before_start h = {.module = m, .obj = m->obj};
	struct bpftel_hook_after_start ah = {.module = m, .obj = m->obj};
	size_t i;
	int err;

	err = injected(m, "start");
	if (err)
		return err;
	for (i = 0; i < m->before_start.n; i++) {
		err = m->before_start.h[i].before_start(&h, m->before_start.h[i].ctx);
		if (err) {
			pr_err("module '%s': before_start hook %zu failed: %s", m->ops->name, i,
			       strerror(-err));
			return err;
		}
	}
	err = probes_attach(m);
	if (!err)
		err = consumer_start(m);
	for (i = 0; !err && i < m->after_start.n; i++) {
		err = m->after_start.h[i].after_start(&ah, m->after_start.h[i].ctx);
		if (err)
			pr_err("module '%s': after_start hook %zu failed: %s", m->ops->name, i,
			       strerror(-err));
	}
	if (err) {
		probes_detach(m, false); /* as do_stop: the programs stop writing first */
		consumer_stop(m);
		return err;
	}
	set_state(m, BPFTEL_MOD_RUNNING);
	return 0;
}

/* Counted where a start is kept: one cancelled after it (bpftel_module__run) is none. */
static void started(struct bpftel_module *m)
{
	__atomic_add_fetch(&m->starts, 1, __ATOMIC_RELAXED);
}

static void stop_error(struct bpftel_module *m, const char *hook, size_t i, int err)
{
	pr_warn("module '%s': %s hook %zu failed: %s", m->ops->name, hook, i, strerror(-err));
	pthread_mutex_lock(&m->report_lock);
	if (m->nstop_errs < BPFTEL_MAX_HOOKS)
		m->stop_errs[m->nstop_errs++] = err;
	pthread_mutex_unlock(&m->report_lock);
}

static int do_stop(struct bpftel_module *m)
{
	struct bpftel_hook_before_stop bs = {.module = m, .obj = m->obj, .from = m->state};
	struct bpftel_hook_after_stop as = {.module = m};
	bool gated;
	size_t i;
	int err;

	if (m->state == BPFTEL_MOD_CLOSED)
		return 0;
	pthread_mutex_lock(&m->report_lock);
	m->nstop_errs = 0;
	pthread_mutex_unlock(&m->report_lock);
	for (i = m->before_stop.n; i-- > 0;) {
		err = m->before_stop.h[i].before_stop(&bs, m->before_stop.h[i].ctx);
		if (err)
			stop_error(m, "before_stop", i, err);
	}
	/* As a hook's error: the stop goes on. A stop of a running module: not the undoing
	 * of a start that failed. */
	err = bs.from == BPFTEL_MOD_RUNNING ? injected(m, "stop") : 0;
	if (err)
		stop_error(m, "injected fault", 0, err);
	/* Detaching waits for the kernel (a tracepoint ~45 ms, a uprobe ~80 ms, on 6.18):
	 * an object with a stop gate (bpf/lib/stop_gate.h) has its programs made inert
	 * instead and its links destroyed by the reaper. Either way the programs stop
	 * writing before the consumer stops, which first reads what they wrote: records
	 * written after would go with the ring buffer, uncounted. */
	gated = m->state >= BPFTEL_MOD_LOADED && !bpftel_stop_gate_close(m->obj);
	/* (A program that read the gate open just before it closed may still write for a
	 * few microseconds: waiting for an RCU grace period, membarrier's global command,
	 * would cover it, and cost a restart 10-20 ms on this VM. Not done.) */
	if (!gated)
		probes_detach(m, false);
	else
		probes_close_sockets(m); /* the gate does not stop a socket filter */
	consumer_stop(m);
	if (gated)
		probes_detach(m, true);
	keep_maps(m);
	if (m->ops->close)
		m->ops->close(m);
	else
		bpf_object__close(m->obj);
	m->obj = NULL;
	set_state(m, BPFTEL_MOD_CLOSED);
	for (i = m->after_stop.n; i-- > 0;) {
		err = m->after_stop.h[i].after_stop(&as, m->after_stop.h[i].ctx);
		if (err)
			stop_error(m, "after_stop", i, err);
	}
	return m->nstop_errs ? m->stop_errs[0] : 0;
}

int bpftel_module__open(struct bpftel_module *m)
{
	int err = -EINVAL;

	pthread_mutex_lock(&m->lock);
	if (!illegal(m, BPFTEL_MOD_CLOSED, "open"))
		err = do_open(m);
	pthread_mutex_unlock(&m->lock);
	return err;
}

int bpftel_module__load(struct bpftel_module *m)
{
	int err = -EINVAL;

	pthread_mutex_lock(&m->lock);
	if (!illegal(m, BPFTEL_MOD_OPENED, "load"))
		err = do_load(m);
	pthread_mutex_unlock(&m->lock);
	return err;
}

int bpftel_module__start(struct bpftel_module *m)
{
	int err = -EINVAL;

	pthread_mutex_lock(&m->lock);
	if (!illegal(m, BPFTEL_MOD_LOADED, "start"))
		err = do_start(m);
	if (!err)
		started(m);
	pthread_mutex_unlock(&m->lock);
	return err;
}

int bpftel_module__stop(struct bpftel_module *m)
{
	int err;

	/* Announce the stop first: a start in progress sees it and unwinds. */
	__atomic_add_fetch(&m->stop_gen, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&m->lock);
	err = do_stop(m);
	pthread_mutex_unlock(&m->lock);
	return err;
}

int bpftel_module__run(struct bpftel_module *m)
{
	unsigned int gen = __atomic_load_n(&m->stop_gen, __ATOMIC_SEQ_CST);
	const char *step;
	int err;

#define CANCELLED()                                                  \
	(__atomic_load_n(&m->stop_gen, __ATOMIC_SEQ_CST) != gen ||   \
	 __atomic_load_n(&m->mgr->shutdown, __ATOMIC_SEQ_CST))
	pthread_mutex_lock(&m->lock);
	if (m->state != BPFTEL_MOD_CLOSED) {
		err = m->state == BPFTEL_MOD_RUNNING ? -EALREADY : -EINVAL;
		pthread_mutex_unlock(&m->lock);
		return err;
	}
	err = CANCELLED() ? -ECANCELED : do_open(m);
	step = "open";
	if (!err) {
		err = CANCELLED() ? -ECANCELED : do_load(m);
		step = "load";
	}
	if (!err) {
		err = CANCELLED() ? -ECANCELED : do_start(m);
		step = "start";
	}
	if (!err && CANCELLED())
		err = -ECANCELED;
	if (err)
		do_stop(m);
	else
		started(m);
	pthread_mutex_lock(&m->report_lock);
	if (!err) {
		m->fail_step = NULL;
		m->fail_err = 0;
	} else if (err != -ECANCELED) {
		/* Reported where the agent shows its modules; the others keep running. */
		m->fail_step = step;
		m->fail_err = err;
		m->failures++;
	}
	pthread_mutex_unlock(&m->report_lock);
	pthread_mutex_unlock(&m->lock);
#undef CANCELLED
	return err;
}
