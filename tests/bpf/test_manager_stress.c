// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Race-free start/stop under stress: two modules sharing one shared component are
 * started and stopped from two threads, each thread starting its module and stopping
 * the other's, so stops land in the middle of starts. Events flow all along. Checks:
 * no callback outside [before_start, after_stop] of its module, the shared component
 * closes with its last subscriber, and fds and kernel BPF objects return exactly to
 * their baseline. Built also with ThreadSanitizer (BPFTEL_TSAN) by tools/dev.sh test.
 *
 *   test_bpf_manager_stress [ROUNDS]   (default 500)
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "test_module.h"

static int rounds = 500;

struct tracked {
	struct test_module *tm;
};

static struct tracked mods[2];
static struct test_module *watcher;
static int done;
static unsigned long cancelled, started;

static int on_start(const struct bpftel_hook_before_start *h, void *ctx)
{
	struct tracked *t = ctx;

	(void)h;
	/* Hooks run under the module's lock, in lifecycle order: no race with on_stopped. */
	__atomic_store_n(&t->tm->stopped, 0, __ATOMIC_RELEASE);
	return 0;
}

static int on_stopped(const struct bpftel_hook_after_stop *h, void *ctx)
{
	struct tracked *t = ctx;

	(void)h;
	/* From here on, any callback of this module is a bug: count it as late. */
	__atomic_store_n(&t->tm->stopped, 1, __ATOMIC_RELEASE);
	return 0;
}

static int on_before_stop(const struct bpftel_hook_before_stop *h, void *ctx)
{
	(void)h;
	(void)ctx;
	return 0;
}

static void *trigger_main(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
		test_trigger_events(20);
		usleep(200);
	}
	return NULL;
}

static void *worker_main(void *arg)
{
	int me = (int)(intptr_t)arg, r, err;

	for (r = 0; r < rounds; r++) {
		err = bpftel_module__run(mods[me].tm->module);
		if (err == -ECANCELED)
			__atomic_add_fetch(&cancelled, 1, __ATOMIC_RELAXED);
		else if (!err)
			__atomic_add_fetch(&started, 1, __ATOMIC_RELAXED);
		else if (err != -EALREADY)
			fail_msg("round %d: start of %s: %s", r, mods[me].tm->name, strerror(-err));
		if (rand() % 2)
			usleep(rand() % 2000);
		bpftel_module__stop(mods[1 - me].tm->module);
	}
	return NULL;
}

static void test_concurrent_start_stop(void **state)
{
	struct bpftel_obj_counts base, now;
	struct bpftel_manager *mgr;
	pthread_t workers[2], trigger;
	unsigned long events = 0;
	int i;

	(void)state;
	bpftel_test_baseline(&base);
	mgr = bpftel_manager__new();
	watcher = test_module_new(mgr, "watcher", true);
	mods[0].tm = test_module_new(mgr, "gpu", false);
	mods[1].tm = test_module_new(mgr, "usm", false);
	assert_non_null(watcher);
	for (i = 0; i < 2; i++) {
		assert_non_null(mods[i].tm);
		assert_int_equal(
			bpftel_manager__bind_shared(mgr, mods[i].tm->module, "watcher", 1u << i),
			0);
		bpftel_module__add_before_start(mods[i].tm->module, on_start, &mods[i]);
		bpftel_module__add_before_stop(mods[i].tm->module, on_before_stop, &mods[i]);
		bpftel_module__add_after_stop(mods[i].tm->module, on_stopped, &mods[i]);
	}

	srand(getpid());
	pthread_create(&trigger, NULL, trigger_main, NULL);
	for (i = 0; i < 2; i++)
		pthread_create(&workers[i], NULL, worker_main, (void *)(intptr_t)i);
	for (i = 0; i < 2; i++)
		pthread_join(workers[i], NULL);
	for (i = 0; i < 2; i++)
		assert_int_equal(bpftel_module__stop(mods[i].tm->module), 0);
	assert_int_equal(bpftel_module__state(watcher->module), BPFTEL_MOD_CLOSED);
	assert_int_equal(bpftel_manager__subscribers(mgr, "watcher"), 0);

	/* Events keep coming for a while: none may reach a stopped module. */
	usleep(100000);
	__atomic_store_n(&done, 1, __ATOMIC_RELEASE);
	pthread_join(trigger, NULL);

	for (i = 0; i < 2; i++) {
		events += mods[i].tm->events;
		assert_int_equal(mods[i].tm->late, 0);
	}
	printf("rounds %d x 2 threads: %lu starts, %lu cancelled by a concurrent stop, "
	       "%lu events, 0 late callbacks\n",
	       rounds, started, cancelled, events);
	assert_true(started > 0);
	assert_true(cancelled > 0);
	assert_true(events > 0);

	bpftel_manager__free(mgr);
	test_module_free(watcher);
	for (i = 0; i < 2; i++)
		test_module_free(mods[i].tm);
	bpftel_test_settle_objects(&base, &now);
	printf("baseline progs %u maps %u links %u fds %u; after progs %u maps %u links %u fds "
	       "%u\n",
	       base.progs, base.maps, base.links, base.fds, now.progs, now.maps, now.links,
	       now.fds);
	assert_objects_back(&base, &now);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_concurrent_start_stop),
	};

	if (argc > 1)
		rounds = atoi(argv[1]);
	if (rounds <= 0) {
		fprintf(stderr, "usage: %s [ROUNDS > 0]\n", argv[0]);
		return 2;
	}
	bpftel_test_require_bpf();
	return cmocka_run_group_tests_name("manager_stress", tests, NULL, NULL);
}
