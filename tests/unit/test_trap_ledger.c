// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * user/agent/trap_ledger.c: uprobe programs' traps added up run by run. A program's
 * trap per run that changes (a mixed entry program's, as files come and go) prices
 * only the runs since the last reading: the total never goes down. A new program id
 * starts its own; one no longer read is forgotten; an older reading (another
 * thread's) adds nothing; an unknown trap is unknown.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "user/agent/trap_ledger.h"

static double one(struct bpftel_trap_ledger *l, __u32 id, __u64 runs, double trap_ns)
{
	struct bpftel_trap_reading r = {.id = id, .runs = runs, .trap_ns = trap_ns};

	bpftel_trap_ledger_update(l, &r, 1);
	return r.total_ns;
}

static void test_runs_priced_when_read(void **state)
{
	struct bpftel_trap_ledger l = {.lock = PTHREAD_MUTEX_INITIALIZER};

	(void)state;
	assert_true(one(&l, 7, 100, 1000) == 100000);
	/* The mix moved to cheap traps: 100 more runs at 100 ns, the first 100 kept. */
	assert_true(one(&l, 7, 200, 100) == 110000);
	/* Back to dear ones: only grows. */
	assert_true(one(&l, 7, 210, 2000) == 130000);
	/* An older reading (200 runs) adds nothing and takes nothing. */
	assert_true(one(&l, 7, 200, 5000) == 130000);
	assert_true(one(&l, 7, 210, 5000) == 130000);
	assert_int_equal(l.n, 1);
}

static void test_programs_come_and_go(void **state)
{
	struct bpftel_trap_ledger l = {.lock = PTHREAD_MUTEX_INITIALIZER};
	struct bpftel_trap_reading r[2] = {{.id = 1, .runs = 10, .trap_ns = 10},
					   {.id = 2, .runs = 20, .trap_ns = -1}};

	(void)state;
	bpftel_trap_ledger_update(&l, r, 2);
	assert_true(r[0].total_ns == 100);
	assert_true(r[1].total_ns < 0); /* not calibrated */
	assert_int_equal(l.n, 1);
	/* Program 1's module restarted as program 3. */
	assert_true(one(&l, 3, 5, 1000) == 5000);
	/* Another thread's reading, taken before the restart, comes in after: 3 is kept,
	 * and its next reading adds its new runs, at a cheaper trap, to what it had. */
	assert_true(one(&l, 1, 10, 10) == 100);
	assert_true(one(&l, 3, 6, 10) == 5010);
	/* Missing from 4 readings in a row, 1 is forgotten: back, it starts anew. */
	assert_true(one(&l, 3, 7, 10) == 5020);
	assert_true(one(&l, 3, 8, 10) == 5030);
	assert_true(one(&l, 3, 9, 10) == 5040);
	assert_int_equal(l.n, 1);
	assert_true(one(&l, 1, 15, 10) == 150); /* an id not held: its runs so far */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runs_priced_when_read),
		cmocka_unit_test(test_programs_come_and_go),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
