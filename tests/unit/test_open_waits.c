// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Opens in flight by identity (user/sharedlibs/open_waits.c): an open abandoned at its
 * deadline marks its file stalled until it ends; one in time never does; one that ends
 * before it is marked leaves nothing; no identity or a full table, no ticket.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/sysmacros.h>
#include <cmocka.h>

#include "user/common/deadline_call.h"
#include "user/sharedlibs/open_waits.h"

static void test_abandoned_stalls_until_its_end(void **state)
{
	dev_t dev = makedev(0, 42);
	__u64 a, b;

	(void)state;
	a = bpftel_open_waits_begin(dev, 7, 0);
	b = bpftel_open_waits_begin(dev, 8, 0);
	assert_true(a && b && a != b);
	/* In flight, in time: not stalled. */
	assert_false(bpftel_open_waits_stalled(dev, 7, 0));
	bpftel_open_waits_abandon(a);
	assert_true(bpftel_open_waits_stalled(dev, 7, 0));
	/* Another file, another device: not it. */
	assert_false(bpftel_open_waits_stalled(dev, 8, 0));
	assert_false(bpftel_open_waits_stalled(makedev(0, 43), 7, 0));
	/* Another owner's opens of the file: what stalled may be the first owner's path. */
	assert_false(bpftel_open_waits_stalled(dev, 7, 1000));
	bpftel_open_waits_end(b);
	bpftel_open_waits_end(a); /* its thread ended: the file system answered */
	assert_false(bpftel_open_waits_stalled(dev, 7, 0));
}

/* Its thread ended before the caller marked it: marking it finds nothing. */
static void test_end_before_abandon(void **state)
{
	dev_t dev = makedev(0, 44);
	__u64 t;

	(void)state;
	t = bpftel_open_waits_begin(dev, 9, 0);
	bpftel_open_waits_end(t);
	bpftel_open_waits_abandon(t);
	assert_false(bpftel_open_waits_stalled(dev, 9, 0));
	bpftel_open_waits_end(0); /* no ticket: nothing */
}

static void test_no_ticket(void **state)
{
	enum { MAX = BPFTEL_DEADLINE_STUCK_MAX * 4 };
	__u64 t[MAX];
	dev_t dev = makedev(0, 45);
	size_t i;

	(void)state;
	assert_int_equal(bpftel_open_waits_begin(dev, 0, 0), 0); /* no identity */
	for (i = 0; i < MAX; i++) {
		t[i] = bpftel_open_waits_begin(dev, 100 + i, 0);
		assert_true(t[i] != 0);
	}
	assert_int_equal(bpftel_open_waits_begin(dev, 99, 0), 0); /* full */
	bpftel_open_waits_end(t[3]);
	assert_true(bpftel_open_waits_begin(dev, 99, 0) != 0); /* room again */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_abandoned_stalls_until_its_end),
		cmocka_unit_test(test_end_before_abandon),
		cmocka_unit_test(test_no_ticket),
	};

	return cmocka_run_group_tests_name("open_waits", tests, NULL, NULL);
}
