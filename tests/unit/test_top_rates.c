// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* `bpftel top`'s rates between two samples (tools/bpftel/top.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>

#include "tools/bpftel/print.h"

static json_t *stats(int processed, int kernel_lost, int queue_full)
{
	return json_pack("{s:{s:s}, s:[{s:s, s:i, s:i, s:i, s:i, s:i}], s:[]}", "agent",
			 "run_stats", "always", "losses", "module", "usm", "processed", processed,
			 "kernel", kernel_lost, "queue_full", queue_full, "too_big", 0, "parse", 0,
			 "programs");
}

static json_t *errors(int count)
{
	return json_pack("{s:[{s:s, s:i}]}", "errors", "module", "usm", "count", count);
}

static void rates_of(json_t *sa, json_t *ea, json_t *sb, json_t *eb, double dt, double *ev,
		     double *lost, double *err)
{
	json_t *r = bpftel_top_rates(sa, ea, 10.0, sb, eb, 10.0 + dt), *m;

	assert_non_null(r);
	m = json_array_get(json_object_get(r, "modules"), 0);
	assert_non_null(m);
	*ev = json_number_value(json_object_get(m, "events_per_s"));
	*lost = json_number_value(json_object_get(m, "lost_per_s"));
	*err = json_number_value(json_object_get(m, "errors_per_s"));
	json_decref(r);
	json_decref(sa);
	json_decref(ea);
	json_decref(sb);
	json_decref(eb);
}

static void test_rates(void **state)
{
	double ev, lost, err;

	(void)state;
	rates_of(stats(100, 3, 1), errors(5), stats(150, 7, 1), errors(9), 2.0, &ev, &lost, &err);
	assert_true(ev == 25.0 && lost == 2.0 && err == 2.0);
}

/* The agent restarted between the samples: its counters began again from 0, and what
 * they hold now is what it counted since; never a negative rate. */
static void test_rates_after_reset(void **state)
{
	double ev, lost, err;

	(void)state;
	rates_of(stats(100, 3, 1), errors(5), stats(10, 1, 0), errors(2), 1.0, &ev, &lost, &err);
	assert_true(ev == 10.0 && lost == 1.0 && err == 2.0);
}

/* A stats answer with the agent's own cost: pid, uptime, CPU seconds, resident bytes,
 * and two maps' kernel memory. */
static json_t *costed(int pid, double up_s, double cpu_s, json_int_t rss, json_int_t m1,
		      json_int_t m2)
{
	return json_pack("{s:{s:s, s:i, s:f, s:f, s:I}, s:[], s:[], s:[{s:I}, {s:I}, {}]}",
			 "agent", "run_stats", "always", "pid", pid, "uptime_s", up_s,
			 "cpu_seconds", cpu_s, "rss_bytes", rss, "losses", "programs", "maps",
			 "memory_bytes", m1, "memory_bytes", m2);
}

static json_t *agent_of(json_t *sa, json_t *sb, double dt)
{
	json_t *ea = errors(0), *eb = errors(0);
	json_t *r = bpftel_top_rates(sa, ea, 10.0, sb, eb, 10.0 + dt);
	json_t *agent = json_incref(json_object_get(r, "agent"));

	json_decref(r);
	json_decref(sa);
	json_decref(ea);
	json_decref(sb);
	json_decref(eb);
	return agent;
}

/* The agent's CPU between the samples as % of one CPU, its RSS and its maps' memory
 * (a map without a figure adds nothing) at the second; no CPU rate across two agent
 * processes (another pid, or the same one up for less: restarted as a container's pid
 * 1), nor without the figures. */
static void test_agent_cost(void **state)
{
	json_t *a;

	(void)state;
	a = agent_of(costed(7, 60, 1.25, 1000, 1, 1), costed(7, 62, 1.75, 4096, 1000, 24), 2.0);
	assert_true(json_number_value(json_object_get(a, "cpu_percent")) == 25.0);
	assert_int_equal(json_integer_value(json_object_get(a, "rss_bytes")), 4096);
	assert_true(json_is_integer(json_object_get(a, "maps_memory_bytes")) &&
		    json_integer_value(json_object_get(a, "maps_memory_bytes")) == 1024);
	json_decref(a);
	a = agent_of(costed(7, 60, 9.0, 1000, 1, 1), costed(8, 61, 9.5, 1000, 1, 1), 1.0);
	assert_true(json_is_null(json_object_get(a, "cpu_percent")));
	json_decref(a);
	a = agent_of(costed(1, 60, 9.0, 1000, 1, 1), costed(1, 1, 0.5, 1000, 1, 1), 1.0);
	assert_true(json_is_null(json_object_get(a, "cpu_percent")));
	json_decref(a);
	a = agent_of(stats(1, 0, 0), stats(2, 0, 0), 1.0);
	assert_true(json_is_null(json_object_get(a, "cpu_percent")) &&
		    json_is_null(json_object_get(a, "rss_bytes")));
	json_decref(a);
}

/* With sampled run stats a program with no window yet (just attached, or before the
 * first period) has no overhead to show: null ("?"), not 0 %; one with a window shows
 * the window's. */
static void test_sampled_no_window(void **state)
{
	json_t *s = json_pack("{s:{s:s}, s:[], s:[{s:s, s:s, s:i}, {s:s, s:s, s:i, s:{s:f, s:f}}]}",
			      "agent", "run_stats", "sampled", "losses", "programs", "name",
			      "fresh", "component", "usm", "id", 1, "name", "old", "component",
			      "usm", "id", 2, "window", "overhead_percent", 1.5, "runs_per_s",
			      10.0);
	json_t *e = json_pack("{s:[]}", "errors"), *r, *p;

	(void)state;
	r = bpftel_top_rates(s, e, 1.0, s, e, 2.0);
	assert_non_null(r);
	p = json_array_get(json_object_get(r, "programs"), 0);
	assert_string_equal(json_string_value(json_object_get(p, "program")), "fresh");
	assert_true(json_is_null(json_object_get(p, "overhead_percent")));
	p = json_array_get(json_object_get(r, "programs"), 1);
	assert_true(json_number_value(json_object_get(p, "overhead_percent")) == 1.5);
	json_decref(r);
	json_decref(s);
	json_decref(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rates),
		cmocka_unit_test(test_rates_after_reset),
		cmocka_unit_test(test_agent_cost),
		cmocka_unit_test(test_sampled_no_window),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
