// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * bpftel_map_batch_walk (user/manager/map_batch.c) on real maps: every entry once with
 * its value, in hash, LRU hash and array maps; deletes made during the walk, by the
 * visitor, neither start it over nor lose the entries after them; a visitor stops it;
 * sizes it cannot walk are refused. As root.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <bpf/bpf.h>

#include "harness.h"
#include "user/manager/map_batch.h"

#define ENTRIES 3000

struct seen {
	int fd;
	unsigned char times[ENTRIES];
	size_t visits, stop_after;
	bool bad_value, delete_each;
};

static int visit(void *ctx, const void *key, const void *value)
{
	struct seen *s = ctx;
	__u64 k, v;

	memcpy(&k, key, sizeof(k));
	memcpy(&v, value, sizeof(v));
	if (k >= ENTRIES || v != 3 * k + 1)
		s->bad_value = true;
	else
		s->times[k]++;
	if (s->delete_each)
		assert_int_equal(bpf_map_delete_elem(s->fd, key), 0);
	return ++s->visits == s->stop_after;
}

static int hash_map(enum bpf_map_type type)
{
	int fd = bpf_map_create(type, "batch_test", sizeof(__u64), sizeof(__u64), 4096, NULL);
	__u64 k, v;

	assert_true(fd >= 0);
	for (k = 0; k < ENTRIES; k++) {
		v = 3 * k + 1;
		assert_int_equal(bpf_map_update_elem(fd, &k, &v, BPF_NOEXIST), 0);
	}
	return fd;
}

static void assert_each_once(const struct seen *s)
{
	size_t i;

	assert_false(s->bad_value);
	for (i = 0; i < ENTRIES; i++)
		assert_int_equal(s->times[i], 1);
}

static void test_hash_maps_every_entry_once(void **state)
{
	static const enum bpf_map_type types[] = {BPF_MAP_TYPE_HASH, BPF_MAP_TYPE_LRU_HASH};
	static struct seen s;
	size_t t;

	(void)state;
	for (t = 0; t < 2; t++) {
		memset(&s, 0, sizeof(s));
		s.fd = hash_map(types[t]);
		assert_int_equal(bpftel_map_batch_walk(s.fd, sizeof(__u64), sizeof(__u64), visit, &s),
				 0);
		assert_int_equal(s.visits, ENTRIES);
		assert_each_once(&s);
		close(s.fd);
	}
}

/* The visitor deletes each entry it is given: the walk goes on to the end, each entry
 * once, and the map is empty after. */
static void test_deletes_during_the_walk(void **state)
{
	static struct seen s;
	__u64 k;

	(void)state;
	memset(&s, 0, sizeof(s));
	s.fd = hash_map(BPF_MAP_TYPE_HASH);
	s.delete_each = true;
	assert_int_equal(bpftel_map_batch_walk(s.fd, sizeof(__u64), sizeof(__u64), visit, &s), 0);
	assert_int_equal(s.visits, ENTRIES);
	assert_each_once(&s);
	assert_int_equal(bpf_map_get_next_key(s.fd, NULL, &k), -ENOENT);
	close(s.fd);
}

static int visit_array(void *ctx, const void *key, const void *value)
{
	struct seen *s = ctx;
	__u32 k;
	__u64 v;

	memcpy(&k, key, sizeof(k));
	memcpy(&v, value, sizeof(v));
	if (k >= ENTRIES || v != 3 * (__u64)k + 1)
		s->bad_value = true;
	else
		s->times[k]++;
	s->visits++;
	return 0;
}

static void test_array_map(void **state)
{
	static struct seen s;
	__u32 k;
	__u64 v;

	(void)state;
	memset(&s, 0, sizeof(s));
	s.fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "batch_arr", sizeof(k), sizeof(v), ENTRIES, NULL);
	assert_true(s.fd >= 0);
	for (k = 0; k < ENTRIES; k++) {
		v = 3 * (__u64)k + 1;
		assert_int_equal(bpf_map_update_elem(s.fd, &k, &v, BPF_ANY), 0);
	}
	assert_int_equal(bpftel_map_batch_walk(s.fd, sizeof(k), sizeof(v), visit_array, &s), 0);
	assert_int_equal(s.visits, ENTRIES);
	assert_each_once(&s);
	close(s.fd);
}

static void test_visitor_stops_it(void **state)
{
	static struct seen s;

	(void)state;
	memset(&s, 0, sizeof(s));
	s.fd = hash_map(BPF_MAP_TYPE_HASH);
	s.stop_after = 10;
	assert_int_equal(bpftel_map_batch_walk(s.fd, sizeof(__u64), sizeof(__u64), visit, &s), 0);
	assert_int_equal(s.visits, 10);
	close(s.fd);
}

static void test_refused(void **state)
{
	static struct seen s;

	(void)state;
	memset(&s, 0, sizeof(s));
	assert_int_equal(bpftel_map_batch_walk(-1, sizeof(__u64), sizeof(__u64), visit, &s), -EBADF);
	assert_false(bpftel_map_batch_unsupported(-EBADF));
	s.fd = hash_map(BPF_MAP_TYPE_HASH);
	assert_int_equal(bpftel_map_batch_walk(s.fd, 0, sizeof(__u64), visit, &s), -EINVAL);
	assert_int_equal(bpftel_map_batch_walk(s.fd, BPFTEL_MAP_BATCH_KEY_MAX + 1, sizeof(__u64),
					       visit, &s),
			 -EINVAL);
	assert_int_equal(s.visits, 0);
	close(s.fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hash_maps_every_entry_once),
		cmocka_unit_test(test_deletes_during_the_walk),
		cmocka_unit_test(test_array_map),
		cmocka_unit_test(test_visitor_stops_it),
		cmocka_unit_test(test_refused),
	};

	bpftel_test_require_bpf();
	return cmocka_run_group_tests_name("map_batch", tests, NULL, NULL);
}
