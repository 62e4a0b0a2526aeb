// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * New library files per owner and minute (user/sharedlibs/file_budget.h): a whole
 * minute's worth at once, then per_min a minute, exactly; owners apart; 0 is no budget.
 * Times are given, not read: nothing here waits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "user/sharedlibs/file_budget.h"

/* How many of n asks at now owner is granted. */
static int takes(struct bpftel_file_budget *b, __u64 owner, long long now, int n)
{
	int got = 0;

	while (n--)
		got += bpftel_file_budget_take(b, owner, now);
	return got;
}

static void test_burst_then_rate(void **state)
{
	struct bpftel_file_budget b = {0};

	(void)state;
	bpftel_file_budget_set(&b, 6); /* one every 10 s */
	assert_int_equal(takes(&b, 1000, 5000, 10), 6);
	assert_false(bpftel_file_budget_take(&b, 1000, 5000 + 9999));
	assert_true(bpftel_file_budget_take(&b, 1000, 5000 + 10000));
	assert_false(bpftel_file_budget_take(&b, 1000, 5000 + 10001));
	/* A quiet minute and more gives back the whole budget, never more. */
	assert_int_equal(takes(&b, 1000, 5000 + 10000 + 3600 * 1000, 10), 6);
}

/* Asked every millisecond, a budget of 1 a minute still refills: no rounding lost. */
static void test_no_rounding(void **state)
{
	struct bpftel_file_budget b = {0};
	long long t;
	int got = 0;

	(void)state;
	bpftel_file_budget_set(&b, 1);
	for (t = 0; t < 3 * 60000; t++)
		got += bpftel_file_budget_take(&b, 7, t);
	/* The first at once, then one at 60 s and at 120 s. */
	assert_int_equal(got, 3);
}

static void test_owners_apart(void **state)
{
	struct bpftel_file_budget b = {0};

	(void)state;
	bpftel_file_budget_set(&b, 2);
	assert_int_equal(takes(&b, 65534, 0, 5), 2);
	assert_int_equal(takes(&b, 0, 0, 5), 2);
	assert_int_equal(takes(&b, 65534, 1, 5), 0);
}

/* More owners than entries: a new one takes the entry of one whose budget is whole
 * (forgetting it changes nothing), else the one seen longest ago; the owner spending
 * now is never the one forgotten. */
static void test_owner_table_full(void **state)
{
	struct bpftel_file_budget b = {0};
	__u64 o;

	(void)state;
	bpftel_file_budget_set(&b, 2);
	/* Owner 1 spends all, then BPFTEL_FILE_BUDGET_OWNERS others spend one each, each
	 * later than the one before. */
	assert_int_equal(takes(&b, 1, 0, 2), 2);
	for (o = 2; o < 2 + BPFTEL_FILE_BUDGET_OWNERS; o++)
		assert_true(bpftel_file_budget_take(&b, o, (long long)o));
	/* Owner 1 was the oldest, so the last of them took its entry; owner 1 comes back
	 * with a whole budget (it was forgotten), and takes the entry of owner 2 (the one
	 * seen longest ago now). */
	assert_int_equal(takes(&b, 1, 100, 5), 2);
	/* Owner 3 is still known: one left. */
	assert_int_equal(takes(&b, 3, 100, 5), 1);
	/* The last owner too. */
	assert_int_equal(takes(&b, 1 + BPFTEL_FILE_BUDGET_OWNERS, 100, 5), 1);
}

/* How long until the next file: 0 while there is one, else to the millisecond. */
static void test_wait(void **state)
{
	struct bpftel_file_budget b = {0};

	(void)state;
	bpftel_file_budget_set(&b, 6); /* one every 10 s */
	assert_int_equal(bpftel_file_budget_wait_ms(&b, 9, 0), 0);
	assert_int_equal(takes(&b, 9, 0, 6), 6);
	assert_int_equal(bpftel_file_budget_wait_ms(&b, 9, 0), 10000);
	assert_int_equal(bpftel_file_budget_wait_ms(&b, 9, 2500), 7500);
	assert_int_equal(bpftel_file_budget_wait_ms(&b, 9, 10000), 0);
	bpftel_file_budget_set(&b, 7); /* 60000/7 ms a file: rounded up */
	assert_int_equal(takes(&b, 10, 0, 7), 7);
	assert_int_equal(bpftel_file_budget_wait_ms(&b, 10, 0), 8572);
	bpftel_file_budget_set(&b, 0);
	assert_int_equal(bpftel_file_budget_wait_ms(&b, 10, 0), 0);
}

static void test_off_and_lowered(void **state)
{
	struct bpftel_file_budget b = {0};

	(void)state;
	bpftel_file_budget_set(&b, 0);
	assert_int_equal(takes(&b, 5, 0, 1000), 1000);
	bpftel_file_budget_set(&b, 100);
	assert_int_equal(takes(&b, 5, 0, 10), 10);
	/* Lowered below what the owner has left: it keeps the new budget at most. */
	bpftel_file_budget_set(&b, 3);
	assert_int_equal(takes(&b, 5, 0, 10), 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst_then_rate),
		cmocka_unit_test(test_no_rounding),
		cmocka_unit_test(test_owners_apart),
		cmocka_unit_test(test_owner_table_full),
		cmocka_unit_test(test_wait),
		cmocka_unit_test(test_off_and_lowered),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
