// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The self-overhead budget's state machine (user/agent/budget.h): samples in, decisions out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>

#include "user/agent/budget.h"
#include "user/agent/overhead.h"

static const struct bpftel_budget_cfg cfg = {
	.limit = 0.05, .hold_min = 4, .hold_max = 32, .calm = 20};

/* One window: the module's load, and its files as given. */
static struct bpftel_budget_decision step(struct bpftel_budget *b, double load,
					  struct bpftel_budget_file *files, size_t n)
{
	struct bpftel_budget_decision d;

	bpftel_budget_step(b, &cfg, load, files, n, &d);
	if (d.action == BPFTEL_BUDGET_SHED)
		files[d.file].shed = true;
	else if (d.action == BPFTEL_BUDGET_RECOVER)
		for (size_t i = 0; i < n; i++)
			files[i].shed = false;
	return d;
}

static void test_under_budget_never_sheds(void **state)
{
	struct bpftel_budget_file files[2] = {{.load = 0.03}, {.load = 0.015}};
	struct bpftel_budget b;
	int i;

	(void)state;
	bpftel_budget_init(&b);
	for (i = 0; i < 1000; i++)
		assert_int_equal(step(&b, 0.045, files, 2).action, BPFTEL_BUDGET_NONE);
	assert_false(b.throttled);
	assert_int_equal(b.episodes, 0);
}

/* Over two windows in a row: the hottest attached file goes, and only it. */
static void test_over_twice_sheds_the_hottest(void **state)
{
	struct bpftel_budget_file files[3] = {{.load = 0.01}, {.load = 0.06}, {.load = 0.02}};
	struct bpftel_budget_decision d;
	struct bpftel_budget b;

	(void)state;
	bpftel_budget_init(&b);
	assert_int_equal(step(&b, 0.09, files, 3).action, BPFTEL_BUDGET_NONE);
	d = step(&b, 0.09, files, 3);
	assert_int_equal(d.action, BPFTEL_BUDGET_SHED);
	assert_int_equal(d.file, 1);
	assert_int_equal(d.why, BPFTEL_BUDGET_OVER);
	assert_true(b.throttled);
	assert_int_equal(b.episodes, 1);
}

/* Twice the budget in one window is clear enough: shed at once. */
static void test_far_over_sheds_at_once(void **state)
{
	struct bpftel_budget_file files[1] = {{.load = 0.9}};
	struct bpftel_budget b;

	(void)state;
	bpftel_budget_init(&b);
	assert_int_equal(step(&b, 0.9, files, 1).action, BPFTEL_BUDGET_SHED);
}

/* Still over once throttled: the next hottest goes, the shed one is not picked again. */
static void test_still_over_sheds_the_next(void **state)
{
	struct bpftel_budget_file files[3] = {{.load = 0.2}, {.load = 0.3}, {.load = 0}};
	struct bpftel_budget_decision d;
	struct bpftel_budget b;

	(void)state;
	bpftel_budget_init(&b);
	assert_int_equal(step(&b, 0.5, files, 3).file, 1);
	files[1].load = 0;
	files[1].potential = 1.0;
	d = step(&b, 0.2, files, 3);
	assert_int_equal(d.action, BPFTEL_BUDGET_SHED);
	assert_int_equal(d.file, 0);
	assert_int_equal(d.why, BPFTEL_BUDGET_STILL_OVER);
	assert_int_equal(b.episodes, 1);
}

/* Over, but the load is not on any library file (a tracepoint, a socket filter):
 * nothing to shed, said so, and the module keeps running. */
static void test_nothing_to_shed(void **state)
{
	struct bpftel_budget_file files[1] = {{.load = 0}};
	struct bpftel_budget_decision d;
	struct bpftel_budget b;

	(void)state;
	bpftel_budget_init(&b);
	d = step(&b, 0.2, files, 1);
	assert_int_equal(d.action, BPFTEL_BUDGET_NONE);
	assert_int_equal(d.why, BPFTEL_BUDGET_NOTHING_TO_SHED);
	assert_false(b.throttled);
}

/* The hot loop stops: its processes go quiet, what could come back is below half the
 * budget for a window: recover. */
static void test_sustained_low_recovers(void **state)
{
	struct bpftel_budget_file files[1] = {{.load = 0.8}};
	struct bpftel_budget_decision d;
	struct bpftel_budget b;

	(void)state;
	bpftel_budget_init(&b);
	assert_int_equal(step(&b, 0.8, files, 1).action, BPFTEL_BUDGET_SHED);
	files[0].load = 0;
	files[0].potential = 1.0; /* still looping, untraced now */
	assert_int_equal(step(&b, 0.001, files, 1).action, BPFTEL_BUDGET_NONE);
	files[0].potential = 0.01; /* the loop stopped */
	d = step(&b, 0.001, files, 1);
	assert_int_equal(d.action, BPFTEL_BUDGET_RECOVER);
	assert_int_equal(d.why, BPFTEL_BUDGET_BELOW_HALF);
	assert_false(b.throttled);
	assert_false(files[0].shed);
}

/* Between half the budget and the budget: no recovery (hysteresis) until the hold is
 * over, then a trial. */
static void test_hysteresis_then_trial(void **state)
{
	struct bpftel_budget_file files[1] = {{.load = 0.2}};
	struct bpftel_budget_decision d;
	struct bpftel_budget b;
	unsigned int w;

	(void)state;
	bpftel_budget_init(&b);
	assert_int_equal(step(&b, 0.2, files, 1).action, BPFTEL_BUDGET_SHED);
	files[0].load = 0;
	files[0].potential = 0.035; /* 0.7 of the budget */
	for (w = 1; w < cfg.hold_min; w++)
		assert_int_equal(step(&b, 0.0, files, 1).action, BPFTEL_BUDGET_NONE);
	d = step(&b, 0.0, files, 1);
	assert_int_equal(d.action, BPFTEL_BUDGET_RECOVER);
	assert_int_equal(d.why, BPFTEL_BUDGET_TRIAL);
}

/* A load that stays high: trials that fail come back sooner than never but later each
 * time (the hold doubles up to hold_max); after a calm stretch it starts over. */
static void test_backoff_and_calm(void **state)
{
	struct bpftel_budget_file files[1] = {{.load = 0.5}};
	unsigned int holds[8], n = 0, w;
	struct bpftel_budget_decision d;
	struct bpftel_budget b;

	(void)state;
	bpftel_budget_init(&b);
	for (w = 0; w < 2000 && n < 8; w++) {
		files[0].load = files[0].shed ? 0 : 0.5;
		files[0].potential = 0.5;
		d = step(&b, files[0].load, files, 1);
		if (d.action == BPFTEL_BUDGET_SHED)
			holds[n++] = b.hold;
	}
	assert_int_equal(n, 8);
	assert_int_equal(holds[0], 4);
	assert_int_equal(holds[1], 8);
	assert_int_equal(holds[2], 16);
	assert_int_equal(holds[3], 32);
	assert_int_equal(holds[7], 32);
	/* Quiet for longer than `calm`: the next episode holds hold_min again. */
	while (b.throttled) {
		files[0].potential = 0;
		step(&b, 0, files, 1);
	}
	for (w = 0; w <= cfg.calm; w++)
		step(&b, 0.01, files, 1);
	files[0].load = 0.5;
	assert_int_equal(step(&b, 0.5, files, 1).action, BPFTEL_BUDGET_SHED);
	assert_int_equal(b.hold, 4);
}

/* Under the budget with single-window spikes over it (up to 1.9x): never shed. */
static void test_spikes_are_not_load(void **state)
{
	struct bpftel_budget_file files[1] = {{.load = 0}};
	struct bpftel_budget b;
	double load;
	int w;

	(void)state;
	srandom(3);
	bpftel_budget_init(&b);
	for (w = 0; w < 3000; w++) {
		load = w % 2 && random() % 3 == 0
			       ? cfg.limit * (1.05 + 0.85 * (random() % 100) / 100.0)
			       : cfg.limit * 0.6 * (random() % 100) / 100.0;
		files[0].load = load;
		assert_int_equal(step(&b, load, files, 1).action, BPFTEL_BUDGET_NONE);
	}
	assert_int_equal(b.episodes, 0);
}

/* Noise around the budget (+-15 %, never twice it): a window over now and then is not
 * two in a row often, and when it is, the shed file's processes still show the load:
 * few episodes over a long run, never a shed and a recovery in consecutive windows. */
static void test_no_flapping_on_noise(void **state)
{
	struct bpftel_budget_file files[1] = {{.load = 0}};
	struct bpftel_budget_decision d;
	struct bpftel_budget b;
	int w, transitions = 0, last = -10;
	double noise;

	(void)state;
	srandom(7);
	bpftel_budget_init(&b);
	for (w = 0; w < 3000; w++) {
		noise = cfg.limit * (0.85 + 0.3 * (random() % 1000) / 1000.0);
		files[0].load = files[0].shed ? 0 : noise;
		files[0].potential = noise;
		d = step(&b, files[0].load, files, 1);
		if (d.action == BPFTEL_BUDGET_NONE)
			continue;
		transitions++;
		assert_true(w - last > 1);
		last = w;
	}
	/* Each episode: one shed and one recovery, the holds growing to 32 windows. */
	assert_in_range(transitions, 2, 2 * (3000 / 32 + 4));
	assert_true(b.hold == cfg.hold_max);
}

/* Over, but the attached files carry too little of the load for shedding all of them
 * to bring it under (the rest is a socket filter's): nothing shed. */
static void test_shedding_cannot_help(void **state)
{
	struct bpftel_budget_file files[2] = {{.load = 0.00005}, {.load = 0.00002}};
	struct bpftel_budget_decision d;
	struct bpftel_budget b;
	int w;

	(void)state;
	bpftel_budget_init(&b);
	for (w = 0; w < 100; w++) {
		d = step(&b, 2 * cfg.limit, files, 2);
		assert_int_equal(d.action, BPFTEL_BUDGET_NONE);
		if (w) /* over two windows in a row from the second */
			assert_int_equal(d.why, BPFTEL_BUDGET_NOTHING_TO_SHED);
	}
	assert_int_equal(b.episodes, 0);
	/* Enough on the files to matter: shed. */
	files[0].load = 1.5 * cfg.limit;
	assert_int_equal(step(&b, 2 * cfg.limit, files, 2).action, BPFTEL_BUDGET_SHED);
	/* Throttled, the socket filter's load alone goes over: the file left is not shed
	 * for nothing. */
	files[0].load = 0;
	files[0].potential = cfg.limit;
	d = step(&b, 3 * cfg.limit, files, 2);
	assert_int_equal(d.action, BPFTEL_BUDGET_NONE);
	assert_int_equal(d.why, BPFTEL_BUDGET_NOTHING_TO_SHED);
	assert_false(files[1].shed);
}

/* Busy two windows, idle one, again and again: the first episode recovers as soon as
 * the shed file's processes go quiet, the later ones wait out the growing hold. */
static void test_bursts_back_off(void **state)
{
	struct bpftel_budget_file files[1] = {{.load = 0}};
	struct bpftel_budget b;
	bool busy;
	int w;

	(void)state;
	bpftel_budget_init(&b);
	for (w = 0; w < 900; w++) {
		busy = w % 3 != 2;
		files[0].load = busy && !files[0].shed ? 4 * cfg.limit : 0;
		files[0].potential = busy ? 4 * cfg.limit : 0;
		step(&b, files[0].load, files, 1);
	}
	/* Without the hold: one episode every 3 windows, 300. With it: 4 + 8 + 16 + 32 +
	 * 32... windows throttled each, about 900 / 32. */
	assert_in_range(b.episodes, 2, 900 / 32 + 4);
}

/* What a program's last window of run stats says of its load now: its rate while the
 * window is recent; none once it is older than the budget's bound (run stats turned
 * off: the last burst's rate would otherwise count for ever). */
static void test_stale_window_is_no_load(void **state)
{
	struct bpftel_prog_overhead o = {0};

	(void)state;
	o.p.window_ns_per_s = 7e6;
	o.p.window_age_ns = 3000000000ull;
	assert_true(bpftel_overhead_recent_run_ns_per_s(&o, 20000000000ull) == 7e6);
	o.p.window_age_ns = 3604000000000ull;
	assert_true(bpftel_overhead_recent_run_ns_per_s(&o, 20000000000ull) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_under_budget_never_sheds),
		cmocka_unit_test(test_over_twice_sheds_the_hottest),
		cmocka_unit_test(test_far_over_sheds_at_once),
		cmocka_unit_test(test_still_over_sheds_the_next),
		cmocka_unit_test(test_nothing_to_shed),
		cmocka_unit_test(test_sustained_low_recovers),
		cmocka_unit_test(test_hysteresis_then_trial),
		cmocka_unit_test(test_backoff_and_calm),
		cmocka_unit_test(test_spikes_are_not_load),
		cmocka_unit_test(test_no_flapping_on_noise),
		cmocka_unit_test(test_shedding_cannot_help),
		cmocka_unit_test(test_bursts_back_off),
		cmocka_unit_test(test_stale_window_is_no_load),
	};

	return cmocka_run_group_tests_name("budget", tests, NULL, NULL);
}
