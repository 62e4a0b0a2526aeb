// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * How often the watcher may rescan /proc after lost library events
 * (user/sharedlibs/scan_pace.h): the first at once; asked again and again, each waits
 * twice as long as the last up to 32 s; a quiet spell starts over at 1 s. Times are
 * given, not read: nothing here waits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "user/sharedlibs/scan_pace.h"

/* Asked every second from t0 to t1 (ms, inclusive): the times it ran. */
static int ask_every_second(struct bpftel_scan_pace *p, long long t0, long long t1,
			    long long *ran, int max)
{
	int n = 0;
	long long t;

	for (t = t0; t <= t1; t += 1000)
		if (bpftel_scan_pace_take(p, t) && n < max)
			ran[n++] = t - t0;
	return n;
}

static void test_backs_off_and_caps(void **state)
{
	struct bpftel_scan_pace p = {0};
	long long ran[32];
	const long long want[] = {0, 1000, 3000, 7000, 15000, 31000, 63000, 95000, 127000};
	int n, i;

	(void)state;
	n = ask_every_second(&p, 5000, 5000 + 127000, ran, 32);
	assert_int_equal(n, sizeof(want) / sizeof(want[0]));
	for (i = 0; i < n; i++)
		assert_int_equal(ran[i], want[i]);
	assert_int_equal(p.scans, n);
	assert_int_equal(p.gap_ms, BPFTEL_SCAN_GAP_MAX_MS);
}

static void test_quiet_starts_over(void **state)
{
	struct bpftel_scan_pace p = {0};
	long long ran[32];

	(void)state;
	assert_int_equal(ask_every_second(&p, 0, 7000, ran, 32), 4); /* 0, 1, 3, 7 s */
	assert_int_equal(p.gap_ms, 8000);
	/* Asked before the gap is out: not yet. */
	assert_false(bpftel_scan_pace_take(&p, 7000 + 7999));
	/* Nothing asked for twice the gap: at once, and the gap back to 1 s. */
	assert_true(bpftel_scan_pace_take(&p, 7000 + 16000));
	assert_int_equal(p.gap_ms, BPFTEL_SCAN_GAP_MIN_MS);
	assert_false(bpftel_scan_pace_take(&p, 7000 + 16500));
	assert_true(bpftel_scan_pace_take(&p, 7000 + 17000));
	assert_int_equal(p.scans, 6);
}

/*
 * Scans for files refused over budget: a minute after the first refusal no scan
 * answered (the budget has refilled by then), then a minute after the refusals a scan
 * made itself, none once they stop.
 */
static void test_budget_scans(void **state)
{
	struct bpftel_budget_pace p = {0};

	(void)state;
	assert_false(bpftel_budget_pace_take(&p, 0, 1000)); /* nothing refused */
	assert_false(bpftel_budget_pace_take(&p, 3, 2000));
	assert_false(bpftel_budget_pace_take(&p, 4, 2000 + 59999)); /* more, same minute */
	assert_true(bpftel_budget_pace_take(&p, 4, 2000 + 60000));
	/* The scan refused 2 more (seen at its next tick): a minute after that. */
	assert_false(bpftel_budget_pace_take(&p, 6, 63000));
	assert_false(bpftel_budget_pace_take(&p, 6, 63000 + 59999));
	assert_true(bpftel_budget_pace_take(&p, 6, 63000 + 60000));
	/* That scan refused none: no more, however long. */
	assert_false(bpftel_budget_pace_take(&p, 6, 63000 + 60000 + 3600000));
	/* A new refusal long after: a minute after it. */
	assert_false(bpftel_budget_pace_take(&p, 7, 5000000));
	assert_true(bpftel_budget_pace_take(&p, 7, 5060000));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backs_off_and_caps),
		cmocka_unit_test(test_quiet_starts_over),
		cmocka_unit_test(test_budget_scans),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
