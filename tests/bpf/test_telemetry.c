// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Errors telemetry through BPF_PROG_TEST_RUN: each failure lands on exactly its
 * (program, map or helper, op, errno), a success-only run counts nothing, an insert's
 * expected EEXIST is not an error (a plain update's is), and a module's stop removes
 * its counters and nobody else's.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <bpf/bpf.h>

#include "harness.h"
#include "telemetry/telemetry.h"
#include "tt_module.h"
#include "telemetry_test.skel.h"

struct fixture {
	struct bpftel_manager *mgr;
	struct bpftel_telemetry *tlm;
	struct tt_module *a, *b;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	f->mgr = bpftel_manager__new();
	if (bpftel_telemetry__new(&f->tlm))
		return -1;
	f->a = tt_module_new(f->mgr, "mod_a", false);
	f->b = tt_module_new(f->mgr, "mod_b", false);
	if (!f->a || !f->b || bpftel_telemetry__instrument(f->tlm, f->a->module) ||
	    bpftel_telemetry__instrument(f->tlm, f->b->module))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	bpftel_manager__free(f->mgr);
	bpftel_telemetry__free(f->tlm);
	free(f->a);
	free(f->b);
	free(f);
	return 0;
}

static void load(struct tt_module *tm)
{
	assert_int_equal(bpftel_module__open(tm->module), 0);
	assert_int_equal(bpftel_module__load(tm->module), 0);
}

/* The one counter matching (module, program, resource, op, err), or NULL. */
static const struct bpftel_tlm_error *find(const struct bpftel_tlm_error *e, int n,
					   const char *module, const char *prog, const char *res,
					   const char *op, int err)
{
	int i;

	for (i = 0; i < n; i++) {
		if (!strcmp(e[i].module, module) && !strcmp(e[i].program, prog) &&
		    !strcmp(e[i].resource, res) && !strcmp(e[i].op, op) && e[i].err == err)
			return &e[i];
	}
	return NULL;
}

static void test_e2big_counted_exactly(void **state)
{
	struct fixture *f = *state;
	struct bpftel_tlm_error *e;
	int n;

	load(f->a);
	assert_int_equal(tt_module_run(f->a, "tt_fill_hash"), 1);
	n = bpftel_telemetry__errors(f->tlm, &e);
	assert_int_equal(n, 1);
	assert_non_null(find(e, n, "mod_a", "tt_fill_hash", "tiny", "update", E2BIG));
	assert_true(e[0].is_map);
	assert_int_equal(e[0].count, 1);
	free(e);
	assert_int_equal(tt_module_run(f->a, "tt_fill_hash"), 1);
	n = bpftel_telemetry__errors(f->tlm, &e);
	assert_int_equal(n, 1);
	assert_int_equal(e[0].count, 2);
	free(e);
}

static void test_efault_counted_on_helper(void **state)
{
	struct fixture *f = *state;
	struct bpftel_tlm_error *e;
	int n;

	load(f->a);
	assert_int_equal(tt_module_run(f->a, "tt_bad_read"), 1);
	n = bpftel_telemetry__errors(f->tlm, &e);
	assert_int_equal(n, 1);
	assert_non_null(find(e, n, "mod_a", "tt_bad_read", "probe_read_user", "call", EFAULT));
	assert_false(e[0].is_map);
	assert_int_equal(e[0].count, 1);
	free(e);
}

static void test_full_ringbuf_counted(void **state)
{
	struct fixture *f = *state;
	const struct bpftel_tlm_error *r, *o;
	struct bpftel_tlm_error *e;
	int n, failed;

	load(f->a);
	failed = tt_module_run(f->a, "tt_fill_rb");
	assert_int_equal(failed, 1);
	n = bpftel_telemetry__errors(f->tlm, &e);
	assert_int_equal(n, 2);
	r = find(e, n, "mod_a", "tt_fill_rb", "small_rb", "ringbuf_reserve", ENOSPC);
	o = find(e, n, "mod_a", "tt_fill_rb", "small_rb", "ringbuf_output", EAGAIN);
	assert_non_null(r);
	assert_non_null(o);
	assert_int_equal(r->count, failed);
	assert_int_equal(o->count, 1);
	free(e);

	/* Its stop sweeps them, and keeps their sum: the kernel stage of the module's
	 * event loss does not go back to 0 when it restarts; new failures add to it. */
	assert_int_equal(bpftel_telemetry__retired_ringbuf(f->tlm, "mod_a"), 0);
	assert_int_equal(bpftel_module__stop(f->a->module), 0);
	assert_int_equal(bpftel_telemetry__module_entries(f->tlm, "mod_a"), 0);
	assert_int_equal(bpftel_telemetry__retired_ringbuf(f->tlm, "mod_a"), failed + 1);
	assert_int_equal(bpftel_telemetry__retired_ringbuf(f->tlm, "mod_b"), 0);
	load(f->a);
	assert_int_equal(tt_module_run(f->a, "tt_fill_rb"), 1);
	assert_int_equal(bpftel_module__stop(f->a->module), 0);
	assert_int_equal(bpftel_telemetry__retired_ringbuf(f->tlm, "mod_a"), 2 * (failed + 1));
}

/* tlm_map_insert: the EEXIST of a lost BPF_NOEXIST race is expected, not counted. */
static void test_insert_expected_eexist_not_counted(void **state)
{
	struct fixture *f = *state;
	struct bpftel_tlm_error *e;

	load(f->a);
	assert_int_equal(tt_module_run(f->a, "tt_insert_dup"), 1);
	assert_int_equal(bpftel_telemetry__errors(f->tlm, &e), 0);
	free(e);
	assert_int_equal(bpftel_telemetry__module_entries(f->tlm, "mod_a"), 0);
}

/* A plain update with BPF_NOEXIST: the same EEXIST is an error, counted as such. */
static void test_update_noexist_eexist_counted(void **state)
{
	struct fixture *f = *state;
	struct bpftel_tlm_error *e;
	int n;

	load(f->a);
	assert_int_equal(tt_module_run(f->a, "tt_update_dup"), 1);
	n = bpftel_telemetry__errors(f->tlm, &e);
	assert_int_equal(n, 1);
	assert_non_null(find(e, n, "mod_a", "tt_update_dup", "ins_map", "update", EEXIST));
	assert_int_equal(e[0].count, 1);
	free(e);
}

/* tlm_map_take, tlm_map_replace: the ENOENT of a key another CPU took first is
 * expected, not counted; tlm_map_delete's is an error. */
static void test_take_expected_enoent_not_counted(void **state)
{
	struct fixture *f = *state;
	struct bpftel_tlm_error *e;
	int n;

	load(f->a);
	assert_int_equal(tt_module_run(f->a, "tt_take_gone"), 1);
	n = bpftel_telemetry__errors(f->tlm, &e);
	assert_int_equal(n, 1);
	assert_non_null(find(e, n, "mod_a", "tt_take_gone", "ins_map", "delete", ENOENT));
	assert_int_equal(e[0].count, 1);
	free(e);
}

/* An insert that fails for another reason (a full map) is counted, under "insert". */
static void test_insert_full_map_counted(void **state)
{
	struct fixture *f = *state;
	struct bpftel_tlm_error *e;
	int n;

	load(f->a);
	assert_int_equal(tt_module_run(f->a, "tt_insert_full"), 1);
	n = bpftel_telemetry__errors(f->tlm, &e);
	assert_int_equal(n, 1);
	assert_non_null(find(e, n, "mod_a", "tt_insert_full", "ins_map", "insert", E2BIG));
	assert_int_equal(e[0].count, 1);
	free(e);
}

static void test_success_counts_nothing(void **state)
{
	struct fixture *f = *state;
	struct bpftel_tlm_error *e;

	load(f->a);
	assert_int_equal(tt_module_run(f->a, "tt_success"), 0);
	assert_int_equal(tt_module_run(f->a, "tt_success"), 0);
	assert_int_equal(bpftel_telemetry__errors(f->tlm, &e), 0);
	free(e);
	assert_int_equal(bpftel_telemetry__module_entries(f->tlm, "mod_a"), 0);
	assert_int_equal(bpftel_telemetry__lost(f->tlm, TLM_LOST_MAP_ERRORS), 0);
	assert_int_equal(bpftel_telemetry__lost(f->tlm, TLM_LOST_HELPER_ERRORS), 0);
}

static void test_stop_removes_only_own_counters(void **state)
{
	struct fixture *f = *state;
	struct bpftel_tlm_error *e;
	int n;

	load(f->a);
	load(f->b);
	assert_int_equal(tt_module_run(f->a, "tt_fill_hash"), 1);
	assert_int_equal(tt_module_run(f->a, "tt_bad_read"), 1);
	assert_int_equal(tt_module_run(f->b, "tt_fill_hash"), 1);
	assert_int_equal(tt_module_run(f->b, "tt_bad_read"), 1);
	assert_int_equal(tt_module_run(f->b, "tt_bad_read"), 1);
	assert_int_equal(bpftel_telemetry__module_entries(f->tlm, "mod_a"), 2);
	assert_int_equal(bpftel_telemetry__module_entries(f->tlm, "mod_b"), 2);

	/* mod_a's entries leave the maps, not the report: its counts are kept. */
	assert_int_equal(bpftel_module__stop(f->a->module), 0);
	assert_int_equal(bpftel_telemetry__module_entries(f->tlm, "mod_a"), 0);
	assert_int_equal(bpftel_telemetry__module_entries(f->tlm, "mod_b"), 2);
	n = bpftel_telemetry__errors(f->tlm, &e);
	assert_int_equal(n, 4);
	assert_int_equal(find(e, n, "mod_a", "tt_fill_hash", "tiny", "update", E2BIG)->count, 1);
	assert_int_equal(
		find(e, n, "mod_a", "tt_bad_read", "probe_read_user", "call", EFAULT)->count, 1);
	assert_int_equal(find(e, n, "mod_b", "tt_fill_hash", "tiny", "update", E2BIG)->count, 1);
	assert_int_equal(
		find(e, n, "mod_b", "tt_bad_read", "probe_read_user", "call", EFAULT)->count, 2);
	free(e);

	/* mod_a runs again with the same keys: its counts go on from where its stop left
	 * them, one row each (the live counter and the retired total together). */
	load(f->a);
	assert_int_equal(bpftel_telemetry__module_entries(f->tlm, "mod_a"), 0);
	assert_int_equal(tt_module_run(f->a, "tt_fill_hash"), 1);
	assert_int_equal(tt_module_run(f->a, "tt_bad_read"), 1);
	assert_int_equal(tt_module_run(f->a, "tt_bad_read"), 1);
	assert_int_equal(bpftel_telemetry__module_entries(f->tlm, "mod_a"), 2);
	n = bpftel_telemetry__errors(f->tlm, &e);
	assert_int_equal(n, 4);
	assert_int_equal(find(e, n, "mod_a", "tt_fill_hash", "tiny", "update", E2BIG)->count, 2);
	assert_int_equal(
		find(e, n, "mod_a", "tt_bad_read", "probe_read_user", "call", EFAULT)->count, 3);
	assert_int_equal(find(e, n, "mod_b", "tt_fill_hash", "tiny", "update", E2BIG)->count, 1);
	free(e);
}

#define MANY_FILLED 700 /* entries of `many`: more than two of telemetry's batches */

/* Fill the per-CPU hash `many` with n keys from userspace. */
static void fill_many(struct tt_module *tm, __u32 n)
{
	int ncpus = libbpf_num_possible_cpus(), fd = bpf_map__fd(tm->skel->maps.many);
	__u64 *vals;
	__u32 k;

	assert_true(ncpus > 0);
	vals = calloc(ncpus, sizeof(*vals));
	assert_non_null(vals);
	for (k = 0; k < n; k++)
		assert_int_equal(bpf_map_update_elem(fd, &k, vals, BPF_NOEXIST), 0);
	free(vals);
}

static void test_run_stats_and_occupancy(void **state)
{
	struct fixture *f = *state;
	struct bpftel_tlm_prog *p;
	struct bpftel_tlm_map *m;
	int n, i, seen = 0;

	load(f->a);
	tt_module_run(f->a, "tt_fill_hash");
	tt_module_run(f->a, "tt_fill_hash");
	fill_many(f->a, MANY_FILLED);
	n = bpftel_telemetry__programs(f->tlm, &p);
	for (i = 0; i < n; i++) {
		if (!strcmp(p[i].program, "tt_fill_hash")) {
			seen++;
			assert_string_equal(p[i].module, "mod_a");
			assert_true(p[i].id > 0);
			if (bpftel_telemetry__stats_enabled(f->tlm)) {
				assert_int_equal(p[i].run_cnt, 2);
				assert_true(p[i].run_time_ns > 0);
			}
		}
	}
	assert_int_equal(seen, 1);
	free(p);
	n = bpftel_telemetry__maps(f->tlm, &m);
	for (i = 0, seen = 0; i < n; i++) {
		if (!strcmp(m[i].map, "tiny")) {
			seen++;
			assert_int_equal(m[i].capacity, 2);
			assert_int_equal(m[i].entries, 2);
		} else if (!strcmp(m[i].map, "many")) {
			seen++;
			assert_int_equal(m[i].entries, MANY_FILLED);
		} else if (!strcmp(m[i].map, "tlm_map_errors")) {
			seen++;
			assert_int_equal(m[i].entries, 1);
			assert_int_equal(m[i].capacity, TLM_MAX_ENTRIES);
		} else if (!strcmp(m[i].map, "tlm_lost")) {
			/* What the error maps could not hold: shown with them. */
			seen++;
			assert_string_equal(m[i].module, "telemetry");
			assert_int_equal(m[i].capacity, TLM_LOST__COUNT);
		}
	}
	assert_int_equal(seen, 4);
	free(m);
}

/* The run count of mod_a's tt_fill_hash, and its sampled fraction. */
static __u64 fill_runs(struct fixture *f, double *fraction)
{
	struct bpftel_tlm_prog *p;
	__u64 runs = 0;
	int n, i;

	n = bpftel_telemetry__programs(f->tlm, &p);
	for (i = 0; i < n; i++) {
		if (!strcmp(p[i].module, "mod_a") && !strcmp(p[i].program, "tt_fill_hash")) {
			runs = p[i].run_cnt;
			if (fraction)
				*fraction = p[i].sampled_fraction;
		}
	}
	free(p);
	return runs;
}

static __u64 now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000ULL + ts.tv_nsec / 1000000;
}

/*
 * Sampled: stats on 50 ms of every 200 ms. A program run all along gets an estimate
 * from the windows, which never goes down, and covers more time than it was measured
 * over; back to always, each run is counted exactly again, on top of the estimate.
 */
static void test_sampled_run_stats(void **state)
{
	struct bpftel_run_stats_cfg sampled = {BPFTEL_RUN_STATS_SAMPLED, 50, 200};
	struct fixture *f = *state;
	struct bpftel_run_stats_info info;
	__u64 deadline = now_ms() + 30000, prev = 0, runs, est;
	double fraction = 0;
	int i;

	load(f->a);
	assert_int_equal(bpftel_telemetry__set_run_stats_mode(f->tlm, &sampled), 0);
	do {
		for (i = 0; i < 20; i++)
			tt_module_run(f->a, "tt_fill_hash");
		runs = fill_runs(f, &fraction);
		assert_true(runs >= prev);
		prev = runs;
		bpftel_telemetry__run_stats(f->tlm, &info);
		assert_int_equal(info.cfg.mode, BPFTEL_RUN_STATS_SAMPLED);
		usleep(1000);
	} while ((info.windows < 5 || !runs) && now_ms() < deadline);
	assert_true(info.windows >= 5);
	assert_true(runs > 0);
	assert_true(fraction > 0 && fraction < 0.9);
	assert_true(info.on_fraction > 0 && info.on_fraction < 0.9);

	assert_int_equal(bpftel_telemetry__set_run_stats(f->tlm, true), 0);
	est = fill_runs(f, NULL);
	assert_true(est >= prev);
	for (i = 0; i < 7; i++)
		tt_module_run(f->a, "tt_fill_hash");
	assert_int_equal(fill_runs(f, &fraction), est + 7);
	assert_true(bpftel_telemetry__stats_enabled(f->tlm));
	assert_int_equal(bpftel_telemetry__set_run_stats(f->tlm, false), 0);
	assert_false(bpftel_telemetry__stats_enabled(f->tlm));
	tt_module_run(f->a, "tt_fill_hash");
	assert_int_equal(fill_runs(f, NULL), est + 7);
}

/* A module's programs can count errors between before_stop and detach: after_stop
 * sweeps those too, so a restart never finds a leftover entry. */
/* mod_c's tt_getppid EFAULTs as reported now, from its one row; 0 when it has none. */
static __u64 getppid_errors(struct fixture *f)
{
	struct bpftel_tlm_error *e;
	int n, i, rows = 0;
	__u64 count = 0;

	n = bpftel_telemetry__errors(f->tlm, &e);
	assert_true(n >= 0);
	for (i = 0; i < n; i++) {
		if (!strcmp(e[i].module, "mod_c")) {
			assert_string_equal(e[i].program, "tt_getppid");
			assert_int_equal(e[i].err, EFAULT);
			count = e[i].count;
			rows++;
		}
	}
	free(e);
	assert_true(rows <= 1);
	return count;
}

static void test_errors_while_stopping_are_swept(void **state)
{
	struct fixture *f = *state;
	struct tt_module *c = tt_module_new(f->mgr, "mod_c", true);
	int round;

	assert_non_null(c);
	assert_int_equal(bpftel_telemetry__instrument(f->tlm, c->module), 0);
	for (round = 0; round < 5; round++) {
		assert_int_equal(bpftel_module__run(c->module), 0);
		/* What every earlier round counted, never read before its stop: kept. */
		assert_int_equal(getppid_errors(f), 2 * round);
		getppid();
		getppid();
		assert_int_equal(bpftel_telemetry__module_entries(f->tlm, "mod_c"), 1);
		assert_int_equal(getppid_errors(f), 2 * round + 2);
		assert_int_equal(bpftel_module__stop(c->module), 0);
		assert_int_equal(bpftel_telemetry__module_entries(f->tlm, "mod_c"), 0);
		assert_int_equal(getppid_errors(f), 2 * round + 2); /* kept while stopped */
	}
	bpftel_manager__free(f->mgr);
	f->mgr = NULL;
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_e2big_counted_exactly),
		T(test_efault_counted_on_helper),
		T(test_full_ringbuf_counted),
		T(test_insert_expected_eexist_not_counted),
		T(test_update_noexist_eexist_counted),
		T(test_insert_full_map_counted),
		T(test_take_expected_enoent_not_counted),
		T(test_success_counts_nothing),
		T(test_stop_removes_only_own_counters),
		T(test_run_stats_and_occupancy),
		T(test_sampled_run_stats),
		T(test_errors_while_stopping_are_swept),
#undef T
	};

	bpftel_test_require_bpf();
	return cmocka_run_group_tests_name("telemetry", tests, NULL, NULL);
}
