// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Manager: every legal and illegal transition, hook order and errors, .rodata and map
 * resizing from hooks, map sharing, attach fallback (the whole fentry -> kprobe ->
 * tracepoint chain through injected candidate faults on any kernel, and as this kernel
 * decides), probe policies, consumers, shared components. Real BPF objects throughout.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <bpf/bpf.h>

#include "harness.h"
#include "manager_test.skel.h"
#include "test_module.h"

struct fixture {
	struct bpftel_manager *mgr;
	struct test_module *tm;
	struct bpftel_obj_counts base;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	bpftel_test_baseline(&f->base);
	if (getenv("BPFTEL_TEST_DEBUG"))
		bpftel_test_list_fds(stderr);
	f->mgr = bpftel_manager__new();
	f->tm = test_module_new(f->mgr, "mod", false);
	*state = f;
	return f->tm ? 0 : -1;
}

/* Everything the test loaded is gone once the manager is. */
static int teardown(void **state)
{
	struct fixture *f = *state;
	struct bpftel_obj_counts now;

	bpftel_manager__free(f->mgr);
	test_module_free(f->tm);
	bpftel_test_settle_objects(&f->base, &now);
	assert_objects_back(&f->base, &now);
	free(f);
	return 0;
}

static void test_legal_transitions(void **state)
{
	struct fixture *f = *state;
	struct bpftel_module *m = f->tm->module;

	assert_int_equal(bpftel_module__state(m), BPFTEL_MOD_CLOSED);
	assert_int_equal(bpftel_module__open(m), 0);
	assert_int_equal(bpftel_module__state(m), BPFTEL_MOD_OPENED);
	assert_int_equal(bpftel_module__load(m), 0);
	assert_int_equal(bpftel_module__state(m), BPFTEL_MOD_LOADED);
	assert_int_equal(bpftel_module__start(m), 0);
	assert_int_equal(bpftel_module__state(m), BPFTEL_MOD_RUNNING);
	assert_int_equal(bpftel_module__stop(m), 0);
	assert_int_equal(bpftel_module__state(m), BPFTEL_MOD_CLOSED);
	/* stop from OPENED and from LOADED */
	assert_int_equal(bpftel_module__open(m), 0);
	assert_int_equal(bpftel_module__stop(m), 0);
	assert_int_equal(bpftel_module__state(m), BPFTEL_MOD_CLOSED);
	assert_int_equal(bpftel_module__open(m), 0);
	assert_int_equal(bpftel_module__load(m), 0);
	assert_int_equal(bpftel_module__stop(m), 0);
	assert_int_equal(bpftel_module__state(m), BPFTEL_MOD_CLOSED);
	/* run = open + load + start; a second run counts a restart */
	assert_int_equal(bpftel_module__run(m), 0);
	assert_int_equal(bpftel_module__stop(m), 0);
	assert_int_equal(bpftel_module__run(m), 0);
	assert_int_equal(bpftel_module__restarts(m), 2);
	assert_int_equal(bpftel_module__stop(m), 0);
}

static void test_illegal_transitions(void **state)
{
	struct fixture *f = *state;
	struct bpftel_module *m = f->tm->module;

	/* CLOSED */
	assert_int_equal(bpftel_module__load(m), -EINVAL);
	assert_int_equal(bpftel_module__start(m), -EINVAL);
	assert_int_equal(bpftel_module__stop(m), 0);
	assert_int_equal(bpftel_module__stop(m), 0);
	assert_int_equal(bpftel_module__state(m), BPFTEL_MOD_CLOSED);
	/* OPENED */
	assert_int_equal(bpftel_module__open(m), 0);
	assert_int_equal(bpftel_module__open(m), -EINVAL);
	assert_int_equal(bpftel_module__start(m), -EINVAL);
	assert_int_equal(bpftel_module__run(m), -EINVAL);
	assert_int_equal(bpftel_module__state(m), BPFTEL_MOD_OPENED);
	/* LOADED */
	assert_int_equal(bpftel_module__load(m), 0);
	assert_int_equal(bpftel_module__open(m), -EINVAL);
	assert_int_equal(bpftel_module__load(m), -EINVAL);
	assert_int_equal(bpftel_module__state(m), BPFTEL_MOD_LOADED);
	/* RUNNING */
	assert_int_equal(bpftel_module__start(m), 0);
	assert_int_equal(bpftel_module__open(m), -EINVAL);
	assert_int_equal(bpftel_module__load(m), -EINVAL);
	assert_int_equal(bpftel_module__start(m), -EINVAL);
	assert_int_equal(bpftel_module__run(m), -EALREADY);
	assert_int_equal(bpftel_module__state(m), BPFTEL_MOD_RUNNING);
	assert_int_equal(bpftel_module__stop(m), 0);
	assert_int_equal(bpftel_module__stop(m), 0);
	assert_int_equal(bpftel_module__state(m), BPFTEL_MOD_CLOSED);
}

/* ---- hooks ---- */

struct hook_rec {
	char log[32][24];
	int n;
	int fail_before_stop, fail_after_stop, fail_before_init, fail_after_start;
};

struct comp {
	struct hook_rec *rec;
	const char *name;
};

static void rec_add(struct comp *c, const char *what)
{
	assert_true(c->rec->n < 32);
	snprintf(c->rec->log[c->rec->n++], sizeof(c->rec->log[0]), "%s.%s", c->name, what);
}

static int h_before_init(const struct bpftel_hook_before_init *h, void *ctx)
{
	struct comp *c = ctx;
	struct manager_test *skel;

	rec_add(c, "before_init");
	/* Not loaded yet: no fd for the probe's program. */
	assert_true(bpf_program__fd(bpf_object__find_program_by_name(h->obj, "mt_getppid")) < 0);
	(void)skel;
	return c->rec->fail_before_init;
}

static int h_after_init(const struct bpftel_hook_after_init *h, void *ctx)
{
	rec_add(ctx, "after_init");
	assert_true(bpf_program__fd(bpf_object__find_program_by_name(h->obj, "mt_getppid")) >= 0);
	return 0;
}

static int h_before_start(const struct bpftel_hook_before_start *h, void *ctx)
{
	(void)h;
	rec_add(ctx, "before_start");
	return 0;
}

/* After the probes attached and the consumers started: the module is not yet running
 * (a failure here unwinds the start). */
static int h_after_start(const struct bpftel_hook_after_start *h, void *ctx)
{
	struct comp *c = ctx;

	assert_int_equal(bpftel_module__state(h->module), BPFTEL_MOD_LOADED);
	assert_true(bpf_program__fd(bpf_object__find_program_by_name(h->obj, "mt_getppid")) >= 0);
	rec_add(c, "after_start");
	return c->rec->fail_after_start;
}

static int h_before_stop(const struct bpftel_hook_before_stop *h, void *ctx)
{
	struct comp *c = ctx;

	(void)h;
	rec_add(c, "before_stop");
	return !strcmp(c->name, "A") ? c->rec->fail_before_stop : 0;
}

static int h_after_stop(const struct bpftel_hook_after_stop *h, void *ctx)
{
	struct comp *c = ctx;

	assert_int_equal(bpftel_module__state(h->module), BPFTEL_MOD_CLOSED);
	rec_add(c, "after_stop");
	return !strcmp(c->name, "B") ? c->rec->fail_after_stop : 0;
}

static void register_hooks(struct bpftel_module *m, struct comp *c)
{
	assert_int_equal(bpftel_module__add_before_init(m, h_before_init, c), 0);
	assert_int_equal(bpftel_module__add_after_init(m, h_after_init, c), 0);
	assert_int_equal(bpftel_module__add_before_start(m, h_before_start, c), 0);
	assert_int_equal(bpftel_module__add_after_start(m, h_after_start, c), 0);
	assert_int_equal(bpftel_module__add_before_stop(m, h_before_stop, c), 0);
	assert_int_equal(bpftel_module__add_after_stop(m, h_after_stop, c), 0);
}

static void test_hook_order(void **state)
{
	static const char *const want[] = {
		"A.before_init",  "B.before_init",  "A.after_init",  "B.after_init",
		"A.before_start", "B.before_start", "A.after_start", "B.after_start",
		"B.before_stop",  "A.before_stop",  "B.after_stop",  "A.after_stop",
	};
	struct fixture *f = *state;
	struct hook_rec rec = {};
	struct comp a = {&rec, "A"}, b = {&rec, "B"};
	size_t i;

	register_hooks(f->tm->module, &a);
	register_hooks(f->tm->module, &b);
	assert_int_equal(bpftel_module__run(f->tm->module), 0);
	assert_int_equal(bpftel_module__stop(f->tm->module), 0);
	assert_int_equal(rec.n, 12);
	for (i = 0; i < 12; i++)
		assert_string_equal(rec.log[i], want[i]);
}

static void test_stop_hook_errors_collected(void **state)
{
	struct fixture *f = *state;
	struct hook_rec rec = {.fail_before_stop = -EIO, .fail_after_stop = -EBUSY};
	struct comp a = {&rec, "A"}, b = {&rec, "B"};
	int errs[8];

	register_hooks(f->tm->module, &a);
	register_hooks(f->tm->module, &b);
	assert_int_equal(bpftel_module__run(f->tm->module), 0);
	assert_int_equal(bpftel_module__stop(f->tm->module), -EIO);
	/* Stop completed anyway: every hook ran, module closed. */
	assert_int_equal(rec.n, 12);
	assert_int_equal(bpftel_module__state(f->tm->module), BPFTEL_MOD_CLOSED);
	assert_int_equal(bpftel_module__stop_errors(f->tm->module, errs, 8), 2);
	assert_int_equal(errs[0], -EIO);
	assert_int_equal(errs[1], -EBUSY);
	/* ...and the module starts again. */
	rec.fail_before_stop = rec.fail_after_stop = 0;
	assert_int_equal(bpftel_module__run(f->tm->module), 0);
	assert_int_equal(bpftel_module__stop(f->tm->module), 0);
	assert_int_equal(bpftel_module__stop_errors(f->tm->module, errs, 8), 0);
}

static int h_shutdown_at_start(const struct bpftel_hook_before_start *h, void *ctx)
{
	(void)h;
	bpftel_manager__shutdown(ctx);
	return 0;
}

/* A start the program's exit cancels once it is done (the exit came during its last
 * hook) is undone, and not counted as a restart. */
static void test_cancelled_start_not_counted(void **state)
{
	struct fixture *f = *state;
	struct bpftel_module *m = f->tm->module;

	assert_int_equal(bpftel_module__run(m), 0);
	assert_int_equal(bpftel_module__stop(m), 0);
	assert_int_equal(bpftel_module__restarts(m), 0);
	assert_int_equal(bpftel_module__add_before_start(m, h_shutdown_at_start, f->mgr), 0);
	assert_int_equal(bpftel_module__run(m), -ECANCELED);
	assert_int_equal(bpftel_module__state(m), BPFTEL_MOD_CLOSED);
	assert_int_equal(bpftel_module__restarts(m), 0);
}

/* A failing after_start hook fails the start: its probes detached, the stop hooks run,
 * the module closed, the failure reported at the start step. */
static void test_failing_after_start_hook_unwinds(void **state)
{
	struct fixture *f = *state;
	struct hook_rec rec = {.fail_after_start = -EPIPE};
	struct comp a = {&rec, "A"};
	const char *step = NULL;
	__u64 failures = 0;

	register_hooks(f->tm->module, &a);
	assert_int_equal(bpftel_module__run(f->tm->module), -EPIPE);
	assert_int_equal(bpftel_module__state(f->tm->module), BPFTEL_MOD_CLOSED);
	assert_int_equal(bpftel_module__last_failure(f->tm->module, &step, &failures), -EPIPE);
	assert_string_equal(step, "start");
	assert_int_equal(failures, 1);
	assert_int_equal(rec.n, 6);
	assert_string_equal(rec.log[3], "A.after_start");
	assert_string_equal(rec.log[4], "A.before_stop");
	assert_string_equal(rec.log[5], "A.after_stop");
}

static void test_failing_init_hook_unwinds(void **state)
{
	struct fixture *f = *state;
	struct hook_rec rec = {.fail_before_init = -EPERM};
	struct comp a = {&rec, "A"};

	register_hooks(f->tm->module, &a);
	assert_int_equal(bpftel_module__run(f->tm->module), -EPERM);
	assert_int_equal(bpftel_module__state(f->tm->module), BPFTEL_MOD_CLOSED);
	assert_int_equal(rec.n, 3);
	assert_string_equal(rec.log[1], "A.before_stop");
	assert_string_equal(rec.log[2], "A.after_stop");
}

/*
 * A start that fails at a step is reported (step, errno, count) until one succeeds,
 * and leaves nothing behind; each step's injected fault unwinds like a real one.
 */
static void test_failed_start_reported(void **state)
{
	struct fixture *f = *state;
	struct bpftel_module *m = f->tm->module;
	static const char *const steps[] = {"open", "load", "start"};
	struct bpftel_probe_status st[8];
	const char *step = "x";
	__u64 failures = 99;
	size_t i;

	assert_int_equal(bpftel_module__last_failure(m, &step, &failures), 0);
	assert_null(step);
	assert_int_equal(failures, 0);
	assert_int_equal(bpftel_module__inject_fault(m, "attach", -EIO, 1), -EINVAL);
	assert_int_equal(bpftel_module__inject_fault(m, "load", EIO, 1), -EINVAL);

	for (i = 0; i < 3; i++) {
		assert_int_equal(bpftel_module__inject_fault(m, steps[i], -ENOMEM - (int)i, 1), 0);
		assert_int_equal(bpftel_module__run(m), -ENOMEM - (int)i);
		assert_int_equal(bpftel_module__state(m), BPFTEL_MOD_CLOSED);
		assert_int_equal(bpftel_module__last_failure(m, &step, &failures),
				 -ENOMEM - (int)i);
		assert_string_equal(step, steps[i]);
		assert_int_equal(failures, i + 1);
		/* Its probes listed by name, whichever step it failed at (a report read
		 * them: one without a name took the agent down). */
		assert_true(bpftel_module__probes(m, st, 8) >= 1);
		assert_non_null(st[0].name);
		assert_true(st[0].ncand >= 1);
		assert_int_equal(st[0].winner, -1);
	}
	/* Two armed starts fail, the third works and clears the report, not the count. */
	assert_int_equal(bpftel_module__inject_fault(m, "load", -EPERM, 2), 0);
	assert_int_equal(bpftel_module__run(m), -EPERM);
	assert_int_equal(bpftel_module__run(m), -EPERM);
	assert_int_equal(bpftel_module__run(m), 0);
	assert_int_equal(bpftel_module__state(m), BPFTEL_MOD_RUNNING);
	assert_int_equal(bpftel_module__last_failure(m, &step, &failures), 0);
	assert_null(step);
	assert_int_equal(failures, 5);
	assert_true(bpftel_module__probes(m, st, 8) >= 1);
	assert_true(st[0].winner >= 0);
	/* A disarmed fault (count 0) fails nothing. */
	assert_int_equal(bpftel_module__stop(m), 0);
	assert_int_equal(bpftel_module__inject_fault(m, "open", -EIO, 1), 0);
	assert_int_equal(bpftel_module__inject_fault(m, "open", -EIO, 0), 0);
	assert_int_equal(bpftel_module__run(m), 0);
}

/* ---- before_init: rodata, resize, shared maps ---- */

static int h_resize(const struct bpftel_hook_before_init *h, void *ctx)
{
	(void)ctx;
	return bpf_map__set_max_entries(bpf_object__find_map_by_name(h->obj, "mt_resizable"), 1000);
}

static int h_rodata(const struct bpftel_hook_before_init *h, void *ctx)
{
	struct bpf_map *rodata = bpf_object__find_map_by_name(h->obj, ".rodata");
	size_t size;
	__u32 *tgid = (__u32 *)bpf_map__initial_value(rodata, &size);

	*tgid = *(__u32 *)ctx;
	return 0;
}

static void test_before_init_rodata_and_resize(void **state)
{
	struct fixture *f = *state;
	__u32 tgid = 424242, zero = 0, got = 0;
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	struct bpf_object *obj;
	char buf[64];
	int fd;

	assert_int_equal(bpftel_module__add_before_init(f->tm->module, h_resize, NULL), 0);
	assert_int_equal(bpftel_module__add_before_init(f->tm->module, h_rodata, &tgid), 0);
	assert_int_equal(bpftel_module__run(f->tm->module), 0);
	obj = bpftel_module__object(f->tm->module);
	fd = bpf_map__fd(bpf_object__find_map_by_name(obj, "mt_resizable"));
	assert_int_equal(bpf_obj_get_info_by_fd(fd, &info, &len), 0);
	assert_int_equal(info.max_entries, 1000);
	fd = bpf_map__fd(bpf_object__find_map_by_name(obj, ".rodata"));
	assert_int_equal(bpf_map_lookup_elem(fd, &zero, buf), 0);
	memcpy(&got, buf, sizeof(got));
	assert_int_equal(got, 424242);
	assert_int_equal(bpftel_module__stop(f->tm->module), 0);
}

static int h_reuse_map(const struct bpftel_hook_before_init *h, void *ctx)
{
	struct bpf_object *other = bpftel_module__object(ctx);

	return bpf_map__reuse_fd(bpf_object__find_map_by_name(h->obj, "mt_shared"),
				 bpf_map__fd(bpf_object__find_map_by_name(other, "mt_shared")));
}

static __u32 map_id(struct bpf_object *obj, const char *name)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);

	assert_int_equal(bpf_obj_get_info_by_fd(
				 bpf_map__fd(bpf_object__find_map_by_name(obj, name)), &info, &len),
			 0);
	return info.id;
}

static __u64 shared_value(struct bpftel_module *m)
{
	__u64 v = 0;
	__u32 zero = 0;

	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(bpf_object__find_map_by_name(
						     bpftel_module__object(m), "mt_shared")),
					     &zero, &v),
			 0);
	return v;
}

static void set_shared_value(struct bpftel_module *m, __u64 v)
{
	__u32 zero = 0;

	assert_int_equal(bpf_map_update_elem(bpf_map__fd(bpf_object__find_map_by_name(
						     bpftel_module__object(m), "mt_shared")),
					     &zero, &v, BPF_ANY),
			 0);
}

/* A restart hands the maps a module names to its next instance, what the old programs
 * left in them included; all of them made anew when a hook sized one anew since. A
 * stop then a run begins afresh, and a restart whose run fails keeps nothing
 * (teardown counts). */
static void test_restart_keeps_maps(void **state)
{
	static const char *const keeps[] = {"mt_shared", "mt_resizable", "mt_none", NULL};
	struct fixture *f = *state;
	struct bpftel_module *m = f->tm->module;
	__u32 shared, resizable;
	int stop_err = -1;

	f->tm->ops.restart_keeps = keeps;
	assert_int_equal(bpftel_module__run(m), 0);
	set_shared_value(m, 42);
	shared = map_id(bpftel_module__object(m), "mt_shared");
	resizable = map_id(bpftel_module__object(m), "mt_resizable");
	assert_int_equal(bpftel_module__restart(m, &stop_err), 0);
	assert_int_equal(stop_err, 0);
	assert_int_equal(shared_value(m), 42);
	assert_int_equal(map_id(bpftel_module__object(m), "mt_shared"), shared);
	assert_int_equal(map_id(bpftel_module__object(m), "mt_resizable"), resizable);
	assert_true(bpftel_module__reused_maps(m));

	/* A hook sizes one anew: none is kept, the maps hold one state. Sized so again
	 * at the next restart, they are. */
	assert_int_equal(bpftel_module__add_before_init(m, h_resize, NULL), 0);
	assert_int_equal(bpftel_module__restart(m, &stop_err), 0);
	assert_int_not_equal(map_id(bpftel_module__object(m), "mt_shared"), shared);
	assert_int_not_equal(map_id(bpftel_module__object(m), "mt_resizable"), resizable);
	assert_int_equal(shared_value(m), 0);
	assert_false(bpftel_module__reused_maps(m));
	set_shared_value(m, 43);
	shared = map_id(bpftel_module__object(m), "mt_shared");
	assert_int_equal(bpftel_module__restart(m, &stop_err), 0);
	assert_int_equal(map_id(bpftel_module__object(m), "mt_shared"), shared);
	assert_int_equal(shared_value(m), 43);

	assert_int_equal(bpftel_module__stop(m), 0);
	assert_int_equal(bpftel_module__run(m), 0);
	assert_int_not_equal(map_id(bpftel_module__object(m), "mt_shared"), shared);
	assert_int_equal(shared_value(m), 0);
	assert_false(bpftel_module__reused_maps(m));

	set_shared_value(m, 7); /* its run fails before its open could take it */
	assert_int_equal(bpftel_module__inject_fault(m, "open", -EIO, 1), 0);
	assert_int_equal(bpftel_module__restart(m, &stop_err), -EIO);
	assert_int_equal(bpftel_module__state(m), BPFTEL_MOD_CLOSED);
	assert_int_equal(bpftel_module__run(m), 0);
	assert_int_equal(shared_value(m), 0);
	/* Its run fails after its open took them: they go with its object. */
	set_shared_value(m, 8);
	assert_int_equal(bpftel_module__inject_fault(m, "load", -EIO, 1), 0);
	assert_int_equal(bpftel_module__restart(m, &stop_err), -EIO);
	assert_int_equal(bpftel_module__run(m), 0);
	assert_int_equal(shared_value(m), 0);
	assert_int_equal(bpftel_module__stop(m), 0);
}

/* A per-CPU counter that cannot be read gives the sum it gave last, never 0: a
 * scraper takes a counter that went down for a reset, a rate's spike. */
static void test_percpu_counters_held(void **state)
{
	int ncpu = libbpf_num_possible_cpus(), fd, i;
	__u64 out[3], last[3] = {0, 0, 5}, *vals;
	__u32 one = 1;

	(void)state;
	assert_true(ncpu > 0);
	fd = bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "t_counters", sizeof(__u32), sizeof(__u64),
			    2, NULL);
	assert_true(fd >= 0);
	vals = calloc(ncpu, sizeof(*vals));
	assert_non_null(vals);
	for (i = 0; i < ncpu; i++)
		vals[i] = 3;
	assert_int_equal(bpf_map_update_elem(fd, &one, vals, BPF_ANY), 0);
	/* Slot 2 is past the map's end: it cannot be read. */
	assert_int_equal(bpftel_percpu_counters_read(fd, 3, out, last), -ENOENT);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 3 * (__u64)ncpu);
	assert_int_equal(out[2], 5);
	assert_int_equal(last[1], 3 * (__u64)ncpu);
	/* None can be read: the sums read last. */
	assert_int_equal(bpftel_percpu_counters_read(-1, 3, out, last), -EBADF);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 3 * (__u64)ncpu);
	assert_int_equal(out[2], 5);
	free(vals);
	close(fd);
}

static void test_map_shared_between_objects(void **state)
{
	struct fixture *f = *state;
	struct test_module *b = test_module_new(f->mgr, "other", false);

	assert_int_equal(bpftel_module__add_before_init(b->module, h_reuse_map, f->tm->module), 0);
	assert_int_equal(bpftel_module__run(f->tm->module), 0);
	assert_int_equal(bpftel_module__run(b->module), 0);
	assert_int_equal(map_id(bpftel_module__object(f->tm->module), "mt_shared"),
			 map_id(bpftel_module__object(b->module), "mt_shared"));
	assert_int_not_equal(map_id(bpftel_module__object(f->tm->module), "mt_resizable"),
			     map_id(bpftel_module__object(b->module), "mt_resizable"));
	assert_int_equal(bpftel_module__stop(b->module), 0);
	assert_int_equal(bpftel_module__stop(f->tm->module), 0);
	bpftel_manager__free(f->mgr);
	f->mgr = bpftel_manager__new();
	test_module_free(b);
	test_module_free(f->tm);
	f->tm = test_module_new(f->mgr, "mod", false);
}

/* ---- probes ---- */

static const struct bpftel_probe_spec fallback_probe = {
	.name = "openat",
	.policy = BPFTEL_PROBE_REQUIRED,
	.ncand = 3,
	.cand =
		{
			{BPFTEL_ATTACH_FENTRY, "mt_fentry", "do_sys_openat2"},
			{BPFTEL_ATTACH_KPROBE, "mt_kprobe", "do_sys_openat2"},
			{BPFTEL_ATTACH_TRACEPOINT, "mt_tp_openat", "syscalls/sys_enter_openat"},
		},
};

/*
 * The whole chain on any kernel: faults injected on the fentry and kprobe candidates
 * reject them before the kernel is asked (with errnos no kernel gives here), so the
 * tracepoint attaches and runs wherever this test runs.
 */
static void test_fallback_fentry_kprobe_tracepoint(void **state)
{
	struct fixture *f = *state;
	struct bpftel_module *m = f->tm->module;
	struct bpftel_probe_status st;
	struct manager_test *skel;
	int fd, i;

	assert_int_equal(bpftel_module__inject_candidate_fault(m, "openat", 0, -EACCES, 1), 0);
	assert_int_equal(bpftel_module__inject_candidate_fault(m, "openat", 1, -ENODEV, 1), 0);
	test_module_set_probes(f->tm, &fallback_probe, 1, false);
	assert_int_equal(bpftel_module__run(m), 0);
	assert_int_equal(bpftel_module__probes(m, &st, 1), 1);
	assert_int_equal(st.winner, 2);
	assert_int_equal(st.cand[0].result, BPFTEL_CAND_REJECTED);
	assert_int_equal(st.cand[0].err, -EACCES);
	assert_int_equal(st.cand[1].result, BPFTEL_CAND_REJECTED);
	assert_int_equal(st.cand[1].err, -ENODEV);
	for (i = 0; i < 2; i++)
		assert_string_equal(st.cand[i].reason, "injected fault");
	assert_int_equal(st.cand[2].result, BPFTEL_CAND_ATTACHED);
	/* Neither rejected program was loaded; the winner really runs. */
	skel = f->tm->skel;
	assert_true(bpf_program__fd(skel->progs.mt_fentry) < 0);
	assert_true(bpf_program__fd(skel->progs.mt_kprobe) < 0);
	fd = open("/dev/null", O_RDONLY);
	close(fd);
	assert_true(skel->bss->openat_hits >= 1);
	assert_int_equal(bpftel_module__stop(m), 0);
}

/* Faults armed for one load are spent: the next load asks the kernel again. Bad
 * arguments change nothing. */
static void test_candidate_fault_spent_and_checked(void **state)
{
	struct fixture *f = *state;
	struct bpftel_module *m = f->tm->module;
	struct bpftel_probe_status st;

	assert_int_equal(bpftel_module__inject_candidate_fault(m, "openat", 4, -EIO, 1), -EINVAL);
	assert_int_equal(bpftel_module__inject_candidate_fault(m, "openat", 0, EIO, 1), -EINVAL);
	assert_int_equal(bpftel_module__inject_candidate_fault(m, "openat", 2, -EIO, 1), 0);
	test_module_set_probes(f->tm, &fallback_probe, 1, false);
	/* Every candidate rejected by detection, none tried: a required probe fails the
	 * start with the first candidate's errno (not ENOENT, which said nothing). */
	assert_int_equal(bpftel_module__inject_candidate_fault(m, "openat", 0, -EACCES, 1), 0);
	assert_int_equal(bpftel_module__inject_candidate_fault(m, "openat", 1, -EIO, 1), 0);
	assert_int_equal(bpftel_module__run(m), -EACCES);
	assert_int_equal(bpftel_module__probes(m, &st, 1), 1);
	assert_int_equal(st.winner, -1);
	assert_int_equal(st.cand[2].err, -EIO);
	/* Spent: this load's candidates are the kernel's verdicts, none injected. */
	assert_int_equal(bpftel_module__run(m), 0);
	assert_int_equal(bpftel_module__probes(m, &st, 1), 1);
	assert_true(st.winner >= 0);
	assert_string_not_equal(st.cand[0].reason, "injected fault");
	/* A fault disarmed with count 0 rejects nothing. */
	assert_int_equal(bpftel_module__stop(m), 0);
	assert_int_equal(bpftel_module__inject_candidate_fault(m, "openat", 2, -EIO, 1), 0);
	assert_int_equal(bpftel_module__inject_candidate_fault(m, "openat", 2, -EIO, 0), 0);
	assert_int_equal(bpftel_module__run(m), 0);
	assert_int_equal(bpftel_module__stop(m), 0);
}

/*
 * The chain as this kernel decides it, without faults: the first candidate the kernel
 * takes wins, each one before it is rejected with its errno and reason, and the winner
 * runs. Here (fentry refused with EPERM, no kprobes) that is the tracepoint.
 */
static void test_fallback_as_the_kernel_decides(void **state)
{
	struct fixture *f = *state;
	struct bpftel_probe_status st;
	struct manager_test *skel;
	int fd, j;

	test_module_set_probes(f->tm, &fallback_probe, 1, false);
	assert_int_equal(bpftel_module__run(f->tm->module), 0);
	assert_int_equal(bpftel_module__probes(f->tm->module, &st, 1), 1);
	assert_in_range(st.winner, 0, 2);
	assert_int_equal(st.cand[st.winner].result, BPFTEL_CAND_ATTACHED);
	for (j = 0; j < st.winner; j++) {
		assert_int_equal(st.cand[j].result, BPFTEL_CAND_REJECTED);
		assert_true(st.cand[j].err < 0);
		assert_true(st.cand[j].reason[0] != '\0');
	}
	if (st.winner >= 1 && st.cand[0].err == -EPERM)
		assert_non_null(strstr(st.cand[0].reason, "fentry"));
	if (st.winner == 2 && access("/sys/bus/event_source/devices/kprobe", F_OK)) {
		assert_int_equal(st.cand[1].err, -EOPNOTSUPP);
		assert_non_null(strstr(st.cand[1].reason, "no kprobe support"));
	}
	print_message("fallback here: %s attached (%s: %s)\n",
		      bpftel_attach_type_name(st.cand[st.winner].cand.type),
		      st.winner ? bpftel_attach_type_name(st.cand[0].cand.type) : "-",
		      st.winner ? st.cand[0].reason : "-");
	skel = f->tm->skel;
	fd = open("/dev/null", O_RDONLY);
	close(fd);
	/* fentry and the kprobe count every process's opens; the tracepoint ours. */
	assert_true(skel->bss->openat_hits >= 1);
	assert_int_equal(bpftel_module__stop(f->tm->module), 0);
}

static void test_attach_failure_falls_back(void **state)
{
	const struct bpftel_probe_spec spec = {
		.name = "openat",
		.policy = BPFTEL_PROBE_REQUIRED,
		.ncand = 2,
		/* Passes detection (the tracepoint exists), fails attach (kprobe program). */
		.cand = {{BPFTEL_ATTACH_TRACEPOINT, "mt_kprobe", "syscalls/sys_enter_openat"},
			 {BPFTEL_ATTACH_TRACEPOINT, "mt_tp_openat", "syscalls/sys_enter_openat"}},
	};
	struct fixture *f = *state;
	struct bpftel_probe_status st;

	test_module_set_probes(f->tm, &spec, 1, false);
	assert_int_equal(bpftel_module__run(f->tm->module), 0);
	bpftel_module__probes(f->tm->module, &st, 1);
	assert_int_equal(st.winner, 1);
	assert_int_equal(st.cand[0].result, BPFTEL_CAND_REJECTED);
	assert_true(st.cand[0].err < 0);
	assert_non_null(strstr(st.cand[0].reason, "attach failed"));
	assert_int_equal(bpftel_module__stop(f->tm->module), 0);
}

static void test_probe_policies(void **state)
{
	struct bpftel_probe_spec specs[3] = {
		{.name = "missing",
		 .policy = BPFTEL_PROBE_BEST_EFFORT,
		 .ncand = 1,
		 .cand = {{BPFTEL_ATTACH_TRACEPOINT, "mt_tp_openat", "syscalls/no_such_tp"}}},
		{.name = "g1",
		 .policy = BPFTEL_PROBE_ONE_OF_GROUP,
		 .group = "g",
		 .ncand = 1,
		 .cand = {{BPFTEL_ATTACH_TRACEPOINT, "mt_getppid", "syscalls/no_such_tp"}}},
		{.name = "g2",
		 .policy = BPFTEL_PROBE_ONE_OF_GROUP,
		 .group = "g",
		 .ncand = 1,
		 .cand = {{BPFTEL_ATTACH_TRACEPOINT, "mt_getppid", "syscalls/sys_enter_getppid"}}},
	};
	struct fixture *f = *state;
	struct bpftel_probe_status st[3];

	/* best-effort missing + one of the group attached: runs */
	test_module_set_probes(f->tm, specs, 3, true);
	assert_int_equal(bpftel_module__run(f->tm->module), 0);
	assert_int_equal(bpftel_module__probes(f->tm->module, st, 3), 3);
	assert_int_equal(st[0].winner, -1);
	assert_int_equal(st[0].cand[0].err, -ENOENT);
	assert_non_null(strstr(st[0].cand[0].reason, "no tracepoint syscalls/no_such_tp"));
	assert_int_equal(st[2].winner, 0);
	assert_int_equal(bpftel_module__stop(f->tm->module), 0);

	/* no probe of the group attached: fails, nothing left behind */
	specs[2].cand[0].target = "syscalls/no_such_tp_either";
	test_module_set_probes(f->tm, specs, 3, true);
	assert_int_equal(bpftel_module__run(f->tm->module), -ENOENT);
	assert_int_equal(bpftel_module__state(f->tm->module), BPFTEL_MOD_CLOSED);

	/* a required probe with no candidate: fails */
	specs[0].policy = BPFTEL_PROBE_REQUIRED;
	test_module_set_probes(f->tm, specs, 1, false);
	assert_int_equal(bpftel_module__run(f->tm->module), -ENOENT);
	assert_int_equal(bpftel_module__state(f->tm->module), BPFTEL_MOD_CLOSED);
}

/* A probe covered by another's winner is skipped; covered by a loser, it attaches. */
static void test_probe_covered_by(void **state)
{
	struct bpftel_probe_spec specs[2] = {
		{.name = "all",
		 .policy = BPFTEL_PROBE_REQUIRED,
		 .ncand = 2,
		 .cand = {{BPFTEL_ATTACH_TRACEPOINT, "mt_tp_openat", "syscalls/sys_enter_openat"},
			  {BPFTEL_ATTACH_TRACEPOINT, "mt_tp_openat", "syscalls/sys_enter_openat"}}},
		{.name = "one",
		 .policy = BPFTEL_PROBE_BEST_EFFORT,
		 .ncand = 1,
		 .cand = {{BPFTEL_ATTACH_TRACEPOINT, "mt_getppid", "syscalls/sys_enter_getppid"}},
		 .covered_by = "all",
		 .covered_by_cand = 0},
	};
	struct fixture *f = *state;
	struct bpftel_probe_status st[2];
	struct manager_test *skel;

	test_module_set_probes(f->tm, specs, 2, true);
	assert_int_equal(bpftel_module__run(f->tm->module), 0);
	assert_int_equal(bpftel_module__probes(f->tm->module, st, 2), 2);
	assert_int_equal(st[0].winner, 0);
	assert_int_equal(st[1].winner, -1);
	assert_string_equal(st[1].covered_by, "all");
	assert_int_equal(st[1].cand[0].result, BPFTEL_CAND_COVERED);
	skel = f->tm->skel;
	getppid();
	assert_int_equal(skel->bss->getppid_hits, 0); /* not attached */
	assert_int_equal(bpftel_module__stop(f->tm->module), 0);

	/* The covering candidate loses (no such tracepoint): the covered probe attaches. */
	specs[0].cand[0].target = "syscalls/no_such_tp";
	test_module_set_probes(f->tm, specs, 2, true);
	assert_int_equal(bpftel_module__run(f->tm->module), 0);
	assert_int_equal(bpftel_module__probes(f->tm->module, st, 2), 2);
	assert_int_equal(st[0].winner, 1);
	assert_int_equal(st[1].winner, 0);
	assert_null(st[1].covered_by);
	skel = f->tm->skel;
	getppid();
	assert_true(skel->bss->getppid_hits >= 1);
	assert_int_equal(bpftel_module__stop(f->tm->module), 0);
}

static void test_uprobe_versioned_symbol(void **state)
{
	const char *libssl = "/lib/x86_64-linux-gnu/libssl.so.3";
	const struct bpftel_probe_spec spec = {
		.name = "ssl_write",
		.policy = BPFTEL_PROBE_REQUIRED,
		.ncand = 2,
		.cand = {{BPFTEL_ATTACH_UPROBE, "mt_uprobe", libssl, "SSL_no_such_fn"},
			 {BPFTEL_ATTACH_UPROBE, "mt_uprobe", libssl, "SSL_write@@OPENSSL_3.0.0"}},
	};
	struct fixture *f = *state;
	struct bpftel_probe_status st;

	if (access(libssl, R_OK))
		skip();
	test_module_set_probes(f->tm, &spec, 1, false);
	assert_int_equal(bpftel_module__run(f->tm->module), 0);
	bpftel_module__probes(f->tm->module, &st, 1);
	assert_int_equal(st.cand[0].err, -ENOENT);
	assert_int_equal(st.winner, 1);
	assert_int_equal(bpftel_module__stop(f->tm->module), 0);
}

/* ---- consumers ---- */

/*
 * A stop returns with no callback to come: stopped while its consumer lags 200 records
 * behind (each callback takes 1 ms), it reads them or drops them, but none after it
 * returned. A stop that left its consumer running would count some in `late` within a
 * few ms; checked after 300 ms (on a machine too slow for that, this check passes
 * either way: it never fails a correct stop). Events after the stop are none: the
 * probe is gone.
 */
static void test_consumer_no_callback_after_stop(void **state)
{
	struct fixture *f = *state;
	unsigned long seen;

	assert_int_equal(bpftel_module__run(f->tm->module), 0);
	test_trigger_events(1);
	assert_int_equal(test_wait_events(f->tm, 1, 30000), 1);
	__atomic_store_n(&f->tm->callback_us, 1000, __ATOMIC_RELAXED);
	test_trigger_events(200);
	assert_int_equal(bpftel_module__stop(f->tm->module), 0);
	__atomic_store_n(&f->tm->stopped, 1, __ATOMIC_RELEASE);
	seen = __atomic_load_n(&f->tm->events, __ATOMIC_RELAXED);
	printf("# at the stop's return: %lu of 201 records had their callback\n", seen);
	test_trigger_events(50);
	usleep(300000);
	assert_int_equal(__atomic_load_n(&f->tm->events, __ATOMIC_RELAXED), seen);
	assert_int_equal(__atomic_load_n(&f->tm->late, __ATOMIC_RELAXED), 0);
	__atomic_store_n(&f->tm->callback_us, 0, __ATOMIC_RELAXED);
}

/* ---- shared components ---- */

static void test_shared_refcount(void **state)
{
	struct fixture *f = *state;
	struct test_module *shared = test_module_new(f->mgr, "watcher", true);
	struct test_module *b = test_module_new(f->mgr, "gpu", false);
	struct bpftel_module *s = shared->module;

	assert_int_equal(bpftel_manager__bind_shared(f->mgr, f->tm->module, "watcher", 0x1), 0);
	assert_int_equal(bpftel_manager__bind_shared(f->mgr, b->module, "watcher", 0x2), 0);
	assert_int_equal(bpftel_manager__bind_shared(f->mgr, s, "watcher", 0x2), -EINVAL);

	assert_int_equal(bpftel_module__state(s), BPFTEL_MOD_CLOSED);
	assert_int_equal(bpftel_module__run(f->tm->module), 0);
	assert_int_equal(bpftel_module__state(s), BPFTEL_MOD_RUNNING);
	assert_int_equal(shared->last_mask, 0x1);
	assert_int_equal(bpftel_module__run(b->module), 0);
	assert_int_equal(bpftel_manager__subscribers(f->mgr, "watcher"), 2);
	assert_int_equal(shared->last_mask, 0x3);
	assert_int_equal(bpftel_module__restarts(s), 0); /* started once, not per subscriber */

	assert_int_equal(bpftel_module__stop(f->tm->module), 0);
	assert_int_equal(bpftel_module__state(s), BPFTEL_MOD_RUNNING);
	assert_int_equal(shared->last_mask, 0x2);
	assert_int_equal(bpftel_module__stop(b->module), 0);
	assert_int_equal(bpftel_module__state(s), BPFTEL_MOD_CLOSED);
	assert_int_equal(bpftel_manager__subscribers(f->mgr, "watcher"), 0);

	/* The next subscriber starts it again from scratch. */
	assert_int_equal(bpftel_module__run(b->module), 0);
	assert_int_equal(bpftel_module__state(s), BPFTEL_MOD_RUNNING);
	assert_int_equal(bpftel_module__restarts(s), 1);
	test_trigger_events(5);
	assert_int_equal(test_wait_events(shared, 5, 30000), 5);
	assert_int_equal(bpftel_manager__unsubscribe(f->mgr, "watcher", "nobody"), 0);
	assert_int_equal(bpftel_module__stop(b->module), 0);
	assert_int_equal(bpftel_module__state(s), BPFTEL_MOD_CLOSED);

	bpftel_manager__free(f->mgr);
	f->mgr = bpftel_manager__new();
	test_module_free(shared);
	test_module_free(b);
	test_module_free(f->tm);
	f->tm = test_module_new(f->mgr, "mod", false);
}

static void test_register_errors(void **state)
{
	struct fixture *f = *state;
	struct bpftel_module_ops bad = {.name = "x"};
	struct bpftel_module *m;

	assert_int_equal(bpftel_manager__register(f->mgr, &bad, NULL, &m), -EINVAL);
	assert_int_equal(bpftel_manager__register(f->mgr, &f->tm->ops, f->tm, &m), -EEXIST);
	assert_ptr_equal(bpftel_manager__find(f->mgr, "mod"), f->tm->module);
	assert_null(bpftel_manager__find(f->mgr, "nope"));
	assert_int_equal(bpftel_manager__subscribe(f->mgr, "mod", "x", 1), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_legal_transitions),
		T(test_illegal_transitions),
		T(test_hook_order),
		T(test_stop_hook_errors_collected),
		T(test_cancelled_start_not_counted),
		T(test_failing_after_start_hook_unwinds),
		T(test_failing_init_hook_unwinds),
		T(test_failed_start_reported),
		T(test_before_init_rodata_and_resize),
		T(test_restart_keeps_maps),
		T(test_percpu_counters_held),
		T(test_map_shared_between_objects),
		T(test_fallback_fentry_kprobe_tracepoint),
		T(test_candidate_fault_spent_and_checked),
		T(test_fallback_as_the_kernel_decides),
		T(test_attach_failure_falls_back),
		T(test_probe_covered_by),
		T(test_probe_policies),
		T(test_uprobe_versioned_symbol),
		T(test_consumer_no_callback_after_stop),
		T(test_shared_refcount),
		T(test_register_errors),
#undef T
	};

	bpftel_test_require_bpf();
	return cmocka_run_group_tests_name("manager", tests, NULL, NULL);
}
