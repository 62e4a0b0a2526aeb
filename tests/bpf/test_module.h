/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A configurable module for manager tests, over tests/bpf/progs/manager_test.bpf.c.
 * By default it has one required probe (tracepoint sys_enter_getppid) and consumes the
 * mt_events ring buffer: each getppid() of this process is one callback. Callbacks
 * that arrive after the test marked the module stopped are counted in `late`.
 */
#ifndef BPFTEL_TEST_MODULE_H
#define BPFTEL_TEST_MODULE_H

#include <stdbool.h>

#include "user/manager/manager.h"

#define TEST_MODULE_MAX_PROBES 8

struct test_module {
	struct bpftel_module_ops ops;
	char name[32];
	size_t nprobes;
	struct bpftel_probe_spec probes[TEST_MODULE_MAX_PROBES];
	bool ringbuf;
	struct manager_test *skel;
	struct bpftel_module *module;
	unsigned long events; /* atomic */
	unsigned long late;   /* atomic: callbacks after `stopped` was set */
	int stopped;	      /* atomic: set by the test after stop returned */
	int callback_us;      /* atomic: each callback takes this long, a consumer that lags */
	__u64 last_mask;      /* shared: last set_subscriptions mask */
};

/* A module named name with the default probe and ring buffer; shared adds
 * set_subscriptions (writes the mask to mt_shared[0]). Registered with mgr. */
struct test_module *test_module_new(struct bpftel_manager *mgr, const char *name, bool shared);
/* Replace the probes (before the next open). */
void test_module_set_probes(struct test_module *tm, const struct bpftel_probe_spec *probes,
			    size_t n, bool ringbuf);
void test_module_free(struct test_module *tm);

/* Calls getppid() n times; each is one event for a running default module. */
void test_trigger_events(int n);
/* Wait up to timeout_ms for tm->events >= want; returns the count seen. */
unsigned long test_wait_events(struct test_module *tm, unsigned long want, int timeout_ms);

#endif /* BPFTEL_TEST_MODULE_H */
