// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "manager_test.skel.h"
#include "test_module.h"

static int on_event(void *ctx, void *data, size_t size)
{
	struct test_module *tm = ctx;

	(void)data;
	(void)size;
	int us = __atomic_load_n(&tm->callback_us, __ATOMIC_RELAXED);

	if (us)
		usleep((useconds_t)us);
	__atomic_add_fetch(&tm->events, 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&tm->stopped, __ATOMIC_ACQUIRE))
		__atomic_add_fetch(&tm->late, 1, __ATOMIC_RELAXED);
	return 0;
}

static int tm_open(struct bpftel_module *m)
{
	struct test_module *tm = bpftel_module__priv(m);
	struct bpf_program *prog;
	size_t i;
	int err;

	tm->skel = manager_test__open();
	if (!tm->skel)
		return -errno;
	tm->skel->rodata->target_tgid = getpid();
	/* Only what a probe asks for is loaded (fentry would fail the load here). */
	bpf_object__for_each_program(prog, tm->skel->obj) bpf_program__set_autoload(prog, false);
	bpftel_module__set_object(m, tm->skel->obj);
	for (i = 0; i < tm->nprobes; i++) {
		err = bpftel_module__add_probe(m, &tm->probes[i]);
		if (err)
			return err;
	}
	if (tm->ringbuf)
		return bpftel_module__add_ringbuf(m, "mt_events", on_event, tm);
	return 0;
}

static int tm_load(struct bpftel_module *m)
{
	struct test_module *tm = bpftel_module__priv(m);

	return manager_test__load(tm->skel);
}

static void tm_close(struct bpftel_module *m)
{
	struct test_module *tm = bpftel_module__priv(m);

	manager_test__destroy(tm->skel);
	tm->skel = NULL;
}

static int tm_set_subs(struct bpftel_module *m, __u64 mask)
{
	struct test_module *tm = bpftel_module__priv(m);
	__u32 zero = 0;

	__atomic_store_n(&tm->last_mask, mask, __ATOMIC_RELAXED);
	return bpf_map_update_elem(bpf_map__fd(tm->skel->maps.mt_shared), &zero, &mask, BPF_ANY)
		       ? -errno
		       : 0;
}

static const struct bpftel_probe_spec default_probe = {
	.name = "getppid",
	.policy = BPFTEL_PROBE_REQUIRED,
	.ncand = 1,
	.cand = {{BPFTEL_ATTACH_TRACEPOINT, "mt_getppid", "syscalls/sys_enter_getppid"}},
};

struct test_module *test_module_new(struct bpftel_manager *mgr, const char *name, bool shared)
{
	struct test_module *tm = calloc(1, sizeof(*tm));

	if (!tm)
		return NULL;
	snprintf(tm->name, sizeof(tm->name), "%s", name);
	tm->ops.name = tm->name;
	tm->ops.open = tm_open;
	tm->ops.load = tm_load;
	tm->ops.close = tm_close;
	if (shared) {
		tm->ops.shared = true;
		tm->ops.set_subscriptions = tm_set_subs;
	}
	test_module_set_probes(tm, &default_probe, 1, true);
	if (bpftel_manager__register(mgr, &tm->ops, tm, &tm->module)) {
		free(tm);
		return NULL;
	}
	return tm;
}

void test_module_set_probes(struct test_module *tm, const struct bpftel_probe_spec *probes,
			    size_t n, bool ringbuf)
{
	memcpy(tm->probes, probes, n * sizeof(*probes));
	tm->nprobes = n;
	tm->ringbuf = ringbuf;
}

void test_module_free(struct test_module *tm)
{
	free(tm);
}

void test_trigger_events(int n)
{
	while (n-- > 0)
		getppid();
}

unsigned long test_wait_events(struct test_module *tm, unsigned long want, int timeout_ms)
{
	struct timespec ts = {.tv_nsec = 1000000};
	unsigned long seen;

	for (;;) {
		seen = __atomic_load_n(&tm->events, __ATOMIC_RELAXED);
		if (seen >= want || timeout_ms-- <= 0)
			return seen;
		nanosleep(&ts, NULL);
	}
}
