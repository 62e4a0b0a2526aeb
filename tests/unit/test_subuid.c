// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The uid ranges granted to users (user/manager/subuid.c): /etc/subuid's lines,
 * their owners named by /etc/passwd's, sorted; what is malformed, overlapping or past
 * the table left out and counted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <linux/types.h>

#include "bpf/fair_share_defs.h"
#include "user/manager/subuid.h"

static const char passwd[] = "root:x:0:0:root:/root:/bin/bash\n"
			     "alice:x:1000:1000::/home/alice:/bin/sh\n"
			     "bob:x:1001:1001::/home/bob:/bin/sh\n"
			     "broken line\n"
			     "carol:x:notanumber:0::/:/bin/sh\n"
			     "dave:x:1003:1003::/home/dave:/bin/sh"; /* no newline at the end */

static struct fair_share_ranges r;

static int parse(const char *subuid)
{
	return subuid_parse(subuid, strlen(subuid), passwd, strlen(passwd), &r);
}

static void assert_range(__u32 i, __u32 first, __u32 count, __u32 owner)
{
	assert_true(i < r.n);
	assert_int_equal(r.r[i].first, first);
	assert_int_equal(r.r[i].count, count);
	assert_int_equal(r.r[i].owner, owner);
}

/* Names and uids, sorted by first uid; root's range and an unknown user's are no one
 * user's (owner 0: an owner per block of them); a name passwd has without a uid too. */
static void test_owners_and_order(void **state)
{
	(void)state;
	assert_int_equal(parse("bob:300000:65536\n"
			       "alice:100000:65536\n"
			       "1002:400000:10\n"
			       "root:500000:65536\n"
			       "nosuchuser:600000:5\n"
			       "carol:700000:5\n"
			       "dave:800000:1\n"),
			 0);
	assert_int_equal(r.n, 7);
	assert_range(0, 100000, 65536, 1000);
	assert_range(1, 300000, 65536, 1001);
	assert_range(2, 400000, 10, 1002);
	assert_range(3, 500000, 65536, 0);
	assert_range(4, 600000, 5, 0);
	assert_range(5, 700000, 5, 0);
	assert_range(6, 800000, 1, 1003);
}

/* Malformed lines are counted and left out; comments and blank lines are not lines. */
static void test_malformed(void **state)
{
	(void)state;
	assert_int_equal(parse("# a comment\n"
			       "\n"
			       "alice:100000:65536\n"
			       "alice:100000\n"	     /* no count */
			       "alice::5\n"		     /* no first */
			       ":200000:5\n"		     /* no name */
			       "alice:2x0000:5\n"	     /* not a number */
			       "alice:300000:0\n"	     /* empty */
			       "alice:4294967290:10\n"    /* past uid 2^32 - 2 */
			       "alice:4294967295:1\n"     /* uid -1 */
			       "alice:-5:10\n"	     /* negative */
			       "alice:99999999999:1\n"    /* past 32 bits */
			       "alice:300000:65536\r\n"   /* CRLF: the count is no number */
			       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			       ":900000:5\n"		     /* a name past 64 bytes */
			       "alice:0:10\n"		     /* uid 0 is no one's to grant */
			       "unknown:0:5\n"
			       "alice:1:4294967295\n"     /* past uid 2^32 - 2 by one */
			       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			       ":950000:5\n"		     /* a name of 64 bytes: fine */
			       "alice:4294967285:10\n"),  /* the last uids but -1: fine */
			 14);
	assert_int_equal(r.n, 3);
	assert_range(0, 100000, 65536, 1000);
	assert_range(1, 950000, 5, 0);
	assert_range(2, 4294967285u, 10, 1000);
}

/* A range overlapping one before it (sorted) is left out, the first kept. */
static void test_overlaps(void **state)
{
	(void)state;
	assert_int_equal(parse("bob:100010:10\n"
			       "alice:100000:65536\n"
			       "bob:165535:2\n"
			       "bob:165536:2\n"
			       "alice:100000:1\n"),
			 3);
	assert_int_equal(r.n, 2);
	assert_range(0, 100000, 65536, 1000);
	assert_range(1, 165536, 2, 1001);
}

/* Past FAIR_SHARE_RANGES: the lowest of the file's first 2 * FAIR_SHARE_RANGES kept,
 * the rest counted. */
static void test_full(void **state)
{
	size_t cap = (FAIR_SHARE_RANGES + 10) * 32, at = 0;
	char *text = malloc(cap);
	unsigned int i;

	(void)state;
	assert_non_null(text);
	for (i = 0; i < FAIR_SHARE_RANGES + 10; i++)
		at += (size_t)snprintf(text + at, cap - at, "alice:%u:10\n",
				       1000000 - i * 100);
	assert_int_equal(parse(text), 10);
	assert_int_equal(r.n, FAIR_SHARE_RANGES);
	assert_range(0, 1000000 - (FAIR_SHARE_RANGES + 9) * 100, 10, 1000);
	for (i = 1; i < r.n; i++)
		assert_true(r.r[i].first > r.r[i - 1].first);
	free(text);
}

/* More lines than 2 * FAIR_SHARE_RANGES: those past them are left out whatever their
 * uids (the lowest, last in the file here). */
static void test_many_lines(void **state)
{
	const unsigned int lines = 2 * FAIR_SHARE_RANGES + 20;
	size_t cap = lines * 32, at = 0;
	char *text = malloc(cap);
	unsigned int i;

	(void)state;
	assert_non_null(text);
	for (i = 0; i < lines; i++)
		at += (size_t)snprintf(text + at, cap - at, "bob:%u:10\n", 2000000 - i * 100);
	/* 20 past the pending room, then 256 of the 512 past the table. */
	assert_int_equal(parse(text), 20 + FAIR_SHARE_RANGES);
	assert_int_equal(r.n, FAIR_SHARE_RANGES);
	assert_range(0, 2000000 - (2 * FAIR_SHARE_RANGES - 1) * 100, 10, 1001);
	free(text);
}

/* Nothing, and no passwd: numeric names still name their user, others none. */
static void test_empty_and_no_passwd(void **state)
{
	(void)state;
	assert_int_equal(parse(""), 0);
	assert_int_equal(r.n, 0);
	assert_int_equal(subuid_parse("alice:5:5\n7:100:5\n", strlen("alice:5:5\n7:100:5\n"),
					  "", 0, &r),
			 0);
	assert_int_equal(r.n, 2);
	assert_range(0, 5, 5, 0); /* alice: no one known */
	assert_range(1, 100, 5, 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_owners_and_order),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_overlaps),
		cmocka_unit_test(test_full),
		cmocka_unit_test(test_many_lines),
		cmocka_unit_test(test_empty_and_no_passwd),
	};

	return cmocka_run_group_tests_name("subuid", tests, NULL, NULL);
}
