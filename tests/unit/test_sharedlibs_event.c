// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Userspace checks on ring-buffer records and path resolution of the watcher. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "user/sharedlibs/sharedlibs.h"

static struct shlib_event *make_event(const char *path, size_t *size)
{
	struct shlib_event *ev = calloc(1, sizeof(*ev));

	ev->pid = 10;
	ev->lib = SHLIB_LIB_SSL;
	ev->libset = SHLIB_LIBSET_CRYPTO;
	ev->path_len = strlen(path);
	memcpy(ev->path, path, ev->path_len + 1);
	*size = SHLIB_EVENT_HDR_SIZE + ev->path_len + 1;
	return ev;
}

static void test_event_check(void **state)
{
	size_t size;
	struct shlib_event *ev = make_event("/lib/libssl.so.3", &size);

	(void)state;
	assert_int_equal(bpftel_shlib_event_check(ev, size), 0);
	assert_int_equal(bpftel_shlib_event_check(ev, size - 1), -EINVAL); /* truncated */
	assert_int_equal(bpftel_shlib_event_check(ev, size + 1), -EINVAL); /* size lies */
	assert_int_equal(bpftel_shlib_event_check(ev, 10), -EINVAL);	   /* header cut */
	assert_int_equal(bpftel_shlib_event_check(ev, sizeof(*ev) + 1), -EINVAL);
	ev->path[3] = '\0'; /* embedded NUL */
	assert_int_equal(bpftel_shlib_event_check(ev, size), -EINVAL);
	ev->path[3] = 'x';
	ev->path[ev->path_len] = 'x'; /* no terminator */
	assert_int_equal(bpftel_shlib_event_check(ev, size), -EINVAL);
	ev->path[ev->path_len] = '\0';
	ev->lib = SHLIB_LIB__COUNT;
	assert_int_equal(bpftel_shlib_event_check(ev, size), -EINVAL);
	ev->lib = SHLIB_LIB_SSL;
	ev->path_len = SHLIB_PATH_MAX;
	assert_int_equal(bpftel_shlib_event_check(ev, size), -EINVAL);
	free(ev);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(bpftel_shlib_lib_name(SHLIB_LIB_CUDART), "libcudart");
	assert_string_equal(bpftel_shlib_lib_name(99), "unknown");
	assert_string_equal(bpftel_shlib_libset_name(SHLIB_LIBSET_GPU), "gpu");
	assert_string_equal(bpftel_shlib_counter_name(SHLIB_CNT_LOST), "lost");
	assert_string_equal(bpftel_shlib_counter_name(SHLIB_CNT_EXEC_LOST), "exec_lost");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_event_check),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests_name("sharedlibs_event", tests, NULL, NULL);
}
