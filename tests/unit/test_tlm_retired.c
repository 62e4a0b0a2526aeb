// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The retired error totals (telemetry/retired.h): a key's counts add up across adds,
 * keys are found whatever order they came in, and the set stops at its bound: no room
 * is made for a new key past it (the caller then leaves the count where it is).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "telemetry/retired.h"

/* A key of the maps' size whose bytes are made of i (the high bytes first: sorted by
 * memcmp as by i). */
static void key_of(__u32 i, unsigned char key[BPFTEL_RETIRED_KEY])
{
	memset(key, 0, BPFTEL_RETIRED_KEY);
	key[0] = (unsigned char)(i >> 24);
	key[1] = (unsigned char)(i >> 16);
	key[2] = (unsigned char)(i >> 8);
	key[3] = (unsigned char)i;
	key[15] = 0x5a; /* the last byte counts too */
}

static void test_totals_add_up(void **state)
{
	struct bpftel_retired r = {};
	unsigned char k[BPFTEL_RETIRED_KEY];
	long i;

	(void)state;
	key_of(7, k);
	assert_int_equal(bpftel_retired_find(&r, k), -1);
	assert_int_equal(bpftel_retired_add(&r, k, 3), 0);
	assert_int_equal(bpftel_retired_add(&r, k, 4), 0);
	i = bpftel_retired_find(&r, k);
	assert_true(i >= 0);
	assert_int_equal(r.e[i].count, 7);
	assert_int_equal(r.n, 1);
	k[15] = 0; /* another key, by its last byte */
	assert_int_equal(bpftel_retired_find(&r, k), -1);
	bpftel_retired_free(&r);
	assert_int_equal(r.n, 0);
}

static void test_found_in_any_order(void **state)
{
	static const __u32 order[] = {50, 3, 999, 0, 70000, 4, 51, 1u << 31, 2};
	struct bpftel_retired r = {};
	unsigned char k[BPFTEL_RETIRED_KEY];
	size_t j;
	long i;

	(void)state;
	for (j = 0; j < sizeof(order) / sizeof(order[0]); j++) {
		key_of(order[j], k);
		assert_int_equal(bpftel_retired_add(&r, k, order[j] + 1), 0);
	}
	assert_int_equal(r.n, sizeof(order) / sizeof(order[0]));
	for (j = 0; j + 1 < r.n; j++)
		assert_true(memcmp(r.e[j].key, r.e[j + 1].key, BPFTEL_RETIRED_KEY) < 0);
	for (j = 0; j < sizeof(order) / sizeof(order[0]); j++) {
		key_of(order[j], k);
		i = bpftel_retired_find(&r, k);
		assert_true(i >= 0);
		assert_int_equal(r.e[i].count, (__u64)order[j] + 1);
	}
	key_of(5, k);
	assert_int_equal(bpftel_retired_find(&r, k), -1);
	bpftel_retired_free(&r);
}

static void test_bounded(void **state)
{
	struct bpftel_retired r = {};
	unsigned char k[BPFTEL_RETIRED_KEY];
	__u32 i;

	(void)state;
	/* Backwards: each add an insertion at the front. Room made first, as the
	 * telemetry's sweep does, then the add: never refused after. */
	for (i = BPFTEL_RETIRED_MAX; i > 0; i--) {
		key_of(i, k);
		assert_int_equal(bpftel_retired_room(&r, k), 0);
		assert_int_equal(bpftel_retired_add(&r, k, 1), 0);
	}
	assert_int_equal(r.n, BPFTEL_RETIRED_MAX);
	key_of(0, k);
	assert_int_equal(bpftel_retired_room(&r, k), -ENOSPC);
	assert_int_equal(bpftel_retired_add(&r, k, 1), -ENOSPC);
	assert_int_equal(bpftel_retired_find(&r, k), -1);
	assert_int_equal(r.n, BPFTEL_RETIRED_MAX);
	key_of(1, k); /* a key it holds still adds up */
	assert_int_equal(bpftel_retired_room(&r, k), 0);
	assert_int_equal(bpftel_retired_add(&r, k, 1), 0);
	assert_int_equal(r.e[bpftel_retired_find(&r, k)].count, 2);
	bpftel_retired_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_totals_add_up),
		cmocka_unit_test(test_found_in_any_order),
		cmocka_unit_test(test_bounded),
	};

	return cmocka_run_group_tests_name("tlm_retired", tests, NULL, NULL);
}
