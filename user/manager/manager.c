// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The module registry and shared components' subscriptions (locking: internal.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "internal.h"
#include "user/common/log.h"

struct binding {
	struct bpftel_manager *mgr;
	const char *shared;
	const char *subscriber;
	__u64 mask;
};

struct bpftel_manager *bpftel_manager__new(void)
{
	struct bpftel_manager *mgr = calloc(1, sizeof(*mgr));

	if (!mgr)
		return NULL;
	pthread_mutex_init(&mgr->lock, NULL);
	pthread_mutex_init(&mgr->feat_lock, NULL);
	return mgr;
}

static void module_free(struct bpftel_module *m)
{
	size_t i;

	for (i = 0; i < m->nowned; i++)
		free(m->owned[i]);
	drop_kept(m);
	pthread_mutex_destroy(&m->sub_lock);
	pthread_mutex_destroy(&m->report_lock);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

void bpftel_manager__free(struct bpftel_manager *mgr)
{
	struct bpftel_module *m;
	size_t i;
	int pass;

	if (!mgr)
		return;
	/* Subscribers first: their stop hooks unsubscribe, which stops shared components. */
	for (pass = 0; pass < 2; pass++) {
		for (i = mgr->nmodules; i-- > 0;) {
			m = mgr->modules[i];
			if (m->ops->shared == (pass == 1))
				bpftel_module__stop(m);
		}
	}
	/* Nothing of ours stays in the kernel once the manager is gone. */
	bpftel_links_settle();
	for (i = 0; i < mgr->nmodules; i++)
		module_free(mgr->modules[i]);
	pthread_mutex_destroy(&mgr->feat_lock);
	pthread_mutex_destroy(&mgr->lock);
	free(mgr);
}

void bpftel_manager__shutdown(struct bpftel_manager *mgr)
{
	__atomic_store_n(&mgr->shutdown, 1, __ATOMIC_SEQ_CST);
}

int bpftel_manager__register(struct bpftel_manager *mgr, const struct bpftel_module_ops *ops,
			     void *priv, struct bpftel_module **out)
{
	struct bpftel_module *m;
	int err = 0;

	if (out)
		*out = NULL;
	if (!ops || !ops->name || !ops->open || (ops->shared && !ops->set_subscriptions))
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->mgr = mgr;
	m->ops = ops;
	m->priv = priv;
	pthread_mutex_init(&m->lock, NULL);
	pthread_mutex_init(&m->report_lock, NULL);
	pthread_mutex_init(&m->sub_lock, NULL);
	err = kept_maps_init(m);

	pthread_mutex_lock(&mgr->lock);
	if (!err && mgr->nmodules == BPFTEL_MAX_MODULES)
		err = -ENOSPC;
	for (size_t i = 0; !err && i < mgr->nmodules; i++) {
		if (!strcmp(mgr->modules[i]->ops->name, ops->name))
			err = -EEXIST;
	}
	if (!err)
		mgr->modules[mgr->nmodules++] = m;
	pthread_mutex_unlock(&mgr->lock);
	if (err) {
		module_free(m);
		return err;
	}
	if (out)
		*out = m;
	return 0;
}

struct bpftel_module *bpftel_manager__find(struct bpftel_manager *mgr, const char *name)
{
	struct bpftel_module *m = NULL;
	size_t i;

	pthread_mutex_lock(&mgr->lock);
	for (i = 0; i < mgr->nmodules; i++) {
		if (!strcmp(mgr->modules[i]->ops->name, name)) {
			m = mgr->modules[i];
			break;
		}
	}
	pthread_mutex_unlock(&mgr->lock);
	return m;
}

size_t bpftel_manager__modules(struct bpftel_manager *mgr, struct bpftel_module **out, size_t max)
{
	size_t i, n;

	pthread_mutex_lock(&mgr->lock);
	n = mgr->nmodules < max ? mgr->nmodules : max;
	for (i = 0; i < n; i++)
		out[i] = mgr->modules[i];
	pthread_mutex_unlock(&mgr->lock);
	return n;
}

static struct bpftel_module *find_shared(struct bpftel_manager *mgr, const char *name)
{
	struct bpftel_module *s = bpftel_manager__find(mgr, name);

	return s && s->ops->shared ? s : NULL;
}

static __u64 union_mask(const struct bpftel_module *s)
{
	__u64 mask = 0;
	size_t i;

	for (i = 0; i < s->nsubs; i++)
		mask |= s->subs[i].mask;
	return mask;
}

/* With s->sub_lock held: tell the running component what its subscribers want. */
static int apply_subscriptions(struct bpftel_module *s)
{
	int err;

	pthread_mutex_lock(&s->lock);
	err = s->state >= BPFTEL_MOD_LOADED ? s->ops->set_subscriptions(s, union_mask(s))
					    : -ENOTCONN;
	pthread_mutex_unlock(&s->lock);
	return err;
}

int bpftel_manager__subscribe(struct bpftel_manager *mgr, const char *shared,
			      const char *subscriber, __u64 mask)
{
	struct bpftel_module *s = find_shared(mgr, shared);
	struct shared_sub *sub = NULL;
	bool added = false;
	__u64 old_mask = 0;
	size_t i;
	int err;

	if (!s)
		return -ENOENT;
	if (strlen(subscriber) >= sizeof(s->subs[0].name))
		return -ENAMETOOLONG;
	pthread_mutex_lock(&s->sub_lock);
	for (i = 0; i < s->nsubs; i++) {
		if (!strcmp(s->subs[i].name, subscriber))
			sub = &s->subs[i];
	}
	if (!sub) {
		if (s->nsubs == BPFTEL_MAX_SUBS) {
			pthread_mutex_unlock(&s->sub_lock);
			return -ENOSPC;
		}
		sub = &s->subs[s->nsubs++];
		strcpy(sub->name, subscriber);
		added = true;
	}
	old_mask = sub->mask;
	sub->mask = mask;
	if (bpftel_module__state(s) != BPFTEL_MOD_RUNNING) {
		err = bpftel_module__run(s);
		if (err) {
			pr_err("shared '%s': start for '%s' failed: %s", shared, subscriber,
			       strerror(-err));
			if (added)
				*sub = s->subs[--s->nsubs];
			else
				sub->mask = old_mask;
			pthread_mutex_unlock(&s->sub_lock);
			return err;
		}
	}
	err = apply_subscriptions(s);
	__atomic_store_n(&s->nsubs_pub, s->nsubs, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&s->sub_lock);
	return err;
}

int bpftel_manager__unsubscribe(struct bpftel_manager *mgr, const char *shared,
				const char *subscriber)
{
	struct bpftel_module *s = find_shared(mgr, shared);
	size_t i;
	int err = 0;

	if (!s)
		return -ENOENT;
	pthread_mutex_lock(&s->sub_lock);
	for (i = 0; i < s->nsubs; i++) {
		if (!strcmp(s->subs[i].name, subscriber))
			break;
	}
	if (i < s->nsubs) {
		s->subs[i] = s->subs[--s->nsubs];
		__atomic_store_n(&s->nsubs_pub, s->nsubs, __ATOMIC_RELEASE);
		err = s->nsubs ? apply_subscriptions(s) : bpftel_module__stop(s);
	}
	pthread_mutex_unlock(&s->sub_lock);
	return err;
}

size_t bpftel_manager__subscribers(struct bpftel_manager *mgr, const char *shared)
{
	struct bpftel_module *s = find_shared(mgr, shared);

	/* Not sub_lock: a subscription may be starting the component (BPF load). */
	return s ? __atomic_load_n(&s->nsubs_pub, __ATOMIC_ACQUIRE) : 0;
}

static int binding_subscribe(const struct bpftel_hook_before_start *h, void *ctx)
{
	struct binding *b = ctx;

	(void)h;
	return bpftel_manager__subscribe(b->mgr, b->shared, b->subscriber, b->mask);
}

static int binding_unsubscribe(const struct bpftel_hook_before_stop *h, void *ctx)
{
	struct binding *b = ctx;

	if (bpftel_module__restarting(h->module))
		return 0; /* a restart's stop: kept for the start that follows */
	return bpftel_manager__unsubscribe(b->mgr, b->shared, b->subscriber);
}

int bpftel_module__restart(struct bpftel_module *m, int *stop_err)
{
	size_t i;
	int err;

	__atomic_store_n(&m->keep_shared, true, __ATOMIC_RELEASE);
	*stop_err = bpftel_module__stop(m);
	__atomic_store_n(&m->keep_shared, false, __ATOMIC_RELEASE);
	err = bpftel_module__run(m);
	drop_kept(m); /* what its open did not take: cancelled, or failed before it */
	if (!err || bpftel_module__state(m) != BPFTEL_MOD_CLOSED)
		return err;
	/* Not started: its subscriptions go, as its stop would have let them (a start
	 * that failed before its before_start hooks never unsubscribes). The hooks are
	 * fixed once the module runs. */
	for (i = 0; i < m->before_stop.n; i++) {
		if (m->before_stop.h[i].before_stop == binding_unsubscribe) {
			struct binding *b = m->before_stop.h[i].ctx;

			bpftel_manager__unsubscribe(b->mgr, b->shared, b->subscriber);
		}
	}
	return err;
}

int bpftel_manager__bind_shared(struct bpftel_manager *mgr, struct bpftel_module *module,
				const char *shared, __u64 mask)
{
	struct binding *b;
	int err;

	if (!find_shared(mgr, shared) || module->ops->shared)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	*b = (struct binding){
		.mgr = mgr, .shared = shared, .subscriber = module->ops->name, .mask = mask};
	pthread_mutex_lock(&module->lock);
	if (module->nowned == BPFTEL_MAX_HOOKS || module->before_start.n == BPFTEL_MAX_HOOKS ||
	    module->before_stop.n == BPFTEL_MAX_HOOKS) {
		err = -ENOSPC;
		free(b);
	} else {
		module->before_start.h[module->before_start.n++] =
			(struct hook){.before_start = binding_subscribe, .ctx = b};
		module->before_stop.h[module->before_stop.n++] =
			(struct hook){.before_stop = binding_unsubscribe, .ctx = b};
		module->owned[module->nowned++] = b;
		err = 0;
	}
	pthread_mutex_unlock(&module->lock);
	return err;
}

void bpftel_manager__set_pipeline(struct bpftel_manager *mgr,
				  const struct bpftel_pipeline_settings *s)
{
	__atomic_store_n(&mgr->pipeline.workers, s->workers, __ATOMIC_RELAXED);
	__atomic_store_n(&mgr->pipeline.queue_len, s->queue_len, __ATOMIC_RELAXED);
	__atomic_store_n(&mgr->pipeline.ringbuf_bytes, s->ringbuf_bytes, __ATOMIC_RELAXED);
}

int bpftel_percpu_counters_read(int map_fd, __u32 nkeys, __u64 *out, __u64 *last)
{
	int ncpu = libbpf_num_possible_cpus(), cpu;
	__u64 *vals = ncpu > 0 ? calloc(ncpu, sizeof(*vals)) : NULL;
	int err = vals ? 0 : ncpu > 0 ? -ENOMEM : ncpu ? ncpu : -EINVAL;
	__u32 key;

	for (key = 0; key < nkeys; key++) {
		if (!vals || bpf_map_lookup_elem(map_fd, &key, vals)) {
			err = vals ? -errno : err;
			out[key] = last[key];
			continue;
		}
		out[key] = 0;
		for (cpu = 0; cpu < ncpu; cpu++)
			out[key] += vals[cpu];
		last[key] = out[key];
	}
	free(vals);
	return err;
}
