// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * BPF_PROG_TEST_RUN tests of bpf/shared_libraries.bpf.c through its harness object:
 * each case plays one open (enter + exit) through the same inline code the
 * tracepoints run, then checks the ring buffer and the counters.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <cmocka.h>
#include <bpf/bpf.h>

#include "harness.h"
#include "shared_libraries_harness.skel.h"
#include "shared_libraries.h"
#include "user/sharedlibs/sharedlibs.h"

/* Mirrors struct shlib_test_open in the harness program. */
struct shlib_test_open {
	__u64 filename;
	__u64 flags;
	__s64 ret;
	__u64 pid_tgid;
	__u32 syscall;
	__u32 __pad;
	__u64 exit_filename;
};

#define TEST_PID_TGID ((4242ULL << 32) | 4343)
#define TEST_COMM     "shlib-test"

struct path_case {
	const char *name;
	const char *path; /* NULL: generated, gen_len bytes ending in gen_tail */
	size_t gen_len;
	const char *gen_tail;
	int want_lib; /* enum shlib_lib, -1 for no event */
	int want_too_long;
};

static const struct path_case path_cases[] = {
	{"versioned_full_path", "/lib/x86_64-linux-gnu/libssl.so.3", 0, NULL, SHLIB_LIB_SSL},
	{"unversioned_full_path", "/usr/lib/libssl.so", 0, NULL, SHLIB_LIB_SSL},
	{"relative_name", "libssl.so.3", 0, NULL, SHLIB_LIB_SSL},
	{"relative_dir", "lib64/libssl.so.3", 0, NULL, SHLIB_LIB_SSL},
	{"crypto_two_part_version", "/opt/x/libcrypto.so.1.1", 0, NULL, SHLIB_LIB_CRYPTO},
	{"gnutls", "/usr/lib/x86_64-linux-gnu/libgnutls.so.30", 0, NULL, SHLIB_LIB_GNUTLS},
	{"cudart_13", "/usr/local/cuda/lib64/libcudart.so.13", 0, NULL, SHLIB_LIB_CUDART},
	{"cudart_long_version", "/usr/lib/libcudart.so.12.1.105", 0, NULL, SHLIB_LIB_CUDART},
	{"cuda_driver", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", 0, NULL, SHLIB_LIB_CUDA},
	{"near_miss_bak", "/lib/libssl.so.3.bak", 0, NULL, -1},
	{"near_miss_prefix", "/lib/notlibssl.so", 0, NULL, -1},
	{"near_miss_mylib", "/opt/mylibssl.so", 0, NULL, -1},
	{"near_miss_mylib_bare", "mylibssl.so", 0, NULL, -1},
	{"unversioned_opt_path", "/opt/x/libssl.so", 0, NULL, SHLIB_LIB_SSL},
	{"cuda_not_cudart", "/usr/lib/libcudart.so", 0, NULL, SHLIB_LIB_CUDART},
	{"near_miss_sox", "/lib/libssl.sox", 0, NULL, -1},
	{"no_so_suffix", "/lib/libssl", 0, NULL, -1},
	{"trailing_dot", "/lib/libssl.so.", 0, NULL, -1},
	{"double_dot_version", "/lib/libssl.so.3..1", 0, NULL, -1},
	{"version_without_dot", "/lib/libssl.so3", 0, NULL, -1},
	{"directory_named_like_lib", "/lib/libssl.so/README.so", 0, NULL, -1},
	{"other_library", "/lib/x86_64-linux-gnu/libz.so.1", 0, NULL, -1},
	{"cudart_stem_only", "/lib/libcudar.so", 0, NULL, -1},
	{"empty", "", 0, NULL, -1},
	{"version_too_long", "/lib/libssl.so.1.2.3.4.5.6.7.8.9.10.11.12.13.14.15", 0, NULL, -1},
	{"at_buffer_len_minus_1", NULL, SHLIB_PATH_MAX - 2, "/libssl.so.3", SHLIB_LIB_SSL},
	{"at_buffer_len", NULL, SHLIB_PATH_MAX - 1, "/libcrypto.so.3", SHLIB_LIB_CRYPTO},
	{"over_buffer_len_by_1", NULL, SHLIB_PATH_MAX, "/libssl.so.3", -1, 1},
	{"far_over_buffer_len", NULL, 5000, "/libssl.so.3", -1, 1},
	{"long_but_no_lib", NULL, SHLIB_PATH_MAX - 1, "/data.bin", -1},
};

static struct shared_libraries_harness *skel;
static struct bpftel_rb_capture cap;

static int counter_fd(void)
{
	return bpf_map__fd(skel->maps.shlib_counters);
}

static void set_libsets(__u32 libsets)
{
	struct shlib_config cfg;
	__u32 zero = 0;

	bpftel_shlib_config(&cfg, libsets);
	assert_int_equal(
		bpf_map_update_elem(bpf_map__fd(skel->maps.shlib_config), &zero, &cfg, BPF_ANY), 0);
}

static int group_setup(void **state)
{
	(void)state;
	skel = shared_libraries_harness__open();
	if (!skel)
		return -1;
	/* The agent's manager loads only the exit candidate the kernel takes; fentry is
	 * refused on some kernels (EPERM), so the harness leaves it out too. */
	bpf_program__set_autoload(skel->progs.shlib_fentry_exit, false);
	if (shared_libraries_harness__load(skel))
		return -1;
	return bpftel_rb_capture__open(&cap, bpf_map__fd(skel->maps.shlib_events));
}

static int group_teardown(void **state)
{
	(void)state;
	bpftel_rb_capture__close(&cap);
	shared_libraries_harness__destroy(skel);
	return 0;
}

/* Before each case: every libset on, counters at zero, ring buffer empty. */
static int case_setup(void **state)
{
	(void)state;
	set_libsets(SHLIB_LIBSET_ALL);
	assert_int_equal(bpftel_test_percpu_clear(counter_fd(), SHLIB_CNT__COUNT), 0);
	bpftel_rb_capture__drain(&cap);
	return 0;
}

/* Play one open; returns the number of events it emitted (captured in cap). */
static int play_open(const char *path, __u64 flags, long ret, __u32 sys)
{
	struct shlib_test_open ctx = {
		.filename = (uintptr_t)path,
		.flags = flags,
		.ret = ret,
		.pid_tgid = TEST_PID_TGID,
		.syscall = sys,
	};
	int retval = -1;

	assert_int_equal(bpftel_test_run(skel->progs.shlib_test_open, &ctx, sizeof(ctx), &retval),
			 0);
	assert_int_equal(retval, 0);
	return bpftel_rb_capture__drain(&cap);
}

static __u64 counter(enum shlib_counter c)
{
	return bpftel_test_percpu_sum(counter_fd(), c);
}

static char *make_path(const struct path_case *c)
{
	size_t tail = strlen(c->gen_tail), i;
	char *p = malloc(c->gen_len + 1);

	assert_non_null(p);
	for (i = 0; i < c->gen_len - tail; i++)
		p[i] = i % 100 == 0 ? '/' : 'a' + i % 26; /* components well under NAME_MAX */
	memcpy(p + c->gen_len - tail, c->gen_tail, tail + 1);
	assert_int_equal(strlen(p), c->gen_len);
	return p;
}

static void assert_event(const char *path, int lib, __u32 sys)
{
	const struct shlib_event *ev = cap.rec[0].data;
	size_t len = strlen(path);

	assert_int_equal(cap.rec[0].size, SHLIB_EVENT_HDR_SIZE + len + 1);
	assert_int_equal(ev->pid, TEST_PID_TGID >> 32);
	assert_int_equal(ev->tid, (__u32)TEST_PID_TGID);
	assert_int_equal(ev->lib, lib);
	assert_int_equal(ev->libset,
			 lib >= SHLIB_LIB_CUDART ? SHLIB_LIBSET_GPU : SHLIB_LIBSET_CRYPTO);
	assert_int_equal(ev->syscall, sys);
	assert_int_equal(ev->path_len, len);
	assert_memory_equal(ev->path, path, len + 1);
	assert_string_equal(ev->comm, TEST_COMM);
	assert_true(ev->ktime_ns > 0);
}

static void test_path_case(void **state)
{
	const struct path_case *c = *state;
	char *path = c->path ? strdup(c->path) : make_path(c);
	int n;

	n = play_open(path, O_RDONLY | O_CLOEXEC, 3, SHLIB_SYS_OPENAT);
	if (c->want_lib >= 0) {
		assert_int_equal(n, 1);
		assert_event(path, c->want_lib, SHLIB_SYS_OPENAT);
		assert_int_equal(counter(SHLIB_CNT_MATCHED), 1);
		assert_int_equal(counter(SHLIB_CNT_EMITTED), 1);
	} else {
		assert_int_equal(n, 0);
		assert_int_equal(counter(SHLIB_CNT_MATCHED), 0);
		assert_int_equal(counter(SHLIB_CNT_EMITTED), 0);
	}
	assert_int_equal(counter(SHLIB_CNT_TOO_LONG), c->want_too_long);
	assert_int_equal(counter(SHLIB_CNT_LOST), 0);
	free(path);
}

static void test_failed_open_emits_nothing(void **state)
{
	(void)state;
	assert_int_equal(play_open("/lib/libssl.so.3", O_RDONLY, -2 /* ENOENT */, SHLIB_SYS_OPENAT),
			 0);
	assert_int_equal(counter(SHLIB_CNT_MATCHED), 1);
	assert_int_equal(counter(SHLIB_CNT_OPEN_FAILED), 1);
	assert_int_equal(counter(SHLIB_CNT_EMITTED), 0);
}

static void test_write_open_ignored(void **state)
{
	(void)state;
	assert_int_equal(play_open("/lib/libssl.so.3", O_RDWR, 3, SHLIB_SYS_OPENAT), 0);
	assert_int_equal(play_open("/lib/libssl.so.3", O_WRONLY | O_CREAT, 3, SHLIB_SYS_OPENAT), 0);
	assert_int_equal(counter(SHLIB_CNT_MATCHED), 0);
}

static void test_disabled_libset_ignored(void **state)
{
	(void)state;
	set_libsets(SHLIB_LIBSET_BIT(SHLIB_LIBSET_CRYPTO));
	assert_int_equal(
		play_open("/usr/local/cuda/lib64/libcudart.so.13", O_RDONLY, 3, SHLIB_SYS_OPENAT),
		0);
	assert_int_equal(play_open("/lib/libssl.so.3", O_RDONLY, 3, SHLIB_SYS_OPENAT), 1);
	set_libsets(0);
	assert_int_equal(play_open("/lib/libssl.so.3", O_RDONLY, 3, SHLIB_SYS_OPENAT), 0);
	assert_int_equal(counter(SHLIB_CNT_MATCHED), 1);
}

static void test_syscall_recorded(void **state)
{
	(void)state;
	assert_int_equal(play_open("/lib/libgnutls.so.30", O_RDONLY, 5, SHLIB_SYS_OPENAT2), 1);
	assert_event("/lib/libgnutls.so.30", SHLIB_LIB_GNUTLS, SHLIB_SYS_OPENAT2);
	assert_int_equal(play_open("/lib/libgnutls.so.30", O_RDONLY, 5, SHLIB_SYS_OPEN), 1);
	assert_event("/lib/libgnutls.so.30", SHLIB_LIB_GNUTLS, SHLIB_SYS_OPEN);
}

static int play_deferred(const char *at_exit, long ret)
{
	struct shlib_test_open ctx = {
		.filename = 8, /* unreadable at enter */
		.flags = O_RDONLY,
		.ret = ret,
		.pid_tgid = TEST_PID_TGID,
		.syscall = SHLIB_SYS_OPENAT,
		.exit_filename = (uintptr_t)at_exit,
	};
	int retval = -1;

	assert_int_equal(bpftel_test_run(skel->progs.shlib_test_open, &ctx, sizeof(ctx), &retval),
			 0);
	return bpftel_rb_capture__drain(&cap);
}

/* A path not readable at enter (page not faulted in yet) is matched at exit. */
static void test_unreadable_at_enter_matched_at_exit(void **state)
{
	(void)state;
	assert_int_equal(play_deferred("/lib/x86_64-linux-gnu/libssl.so.3", 3), 1);
	assert_event("/lib/x86_64-linux-gnu/libssl.so.3", SHLIB_LIB_SSL, SHLIB_SYS_OPENAT);
	assert_int_equal(counter(SHLIB_CNT_DEFERRED), 1);
	assert_int_equal(counter(SHLIB_CNT_MATCHED), 1);
	/* ...but not a non-library, nor a failed open, nor a disabled libset. */
	assert_int_equal(play_deferred("/etc/passwd", 3), 0);
	assert_int_equal(play_deferred("/lib/libssl.so.3", -2), 0);
	set_libsets(SHLIB_LIBSET_BIT(SHLIB_LIBSET_GPU));
	assert_int_equal(play_deferred("/lib/libssl.so.3", 3), 0);
	assert_int_equal(counter(SHLIB_CNT_DEFERRED), 4);
	assert_int_equal(counter(SHLIB_CNT_MATCHED), 1);
	assert_int_equal(counter(SHLIB_CNT_OPEN_FAILED), 0);
}

static void test_unreadable_pointer(void **state)
{
	(void)state;
	assert_int_equal(play_open((const char *)8, O_RDONLY, 3, SHLIB_SYS_OPENAT), 0);
	assert_int_equal(counter(SHLIB_CNT_MATCHED), 0);
	assert_int_equal(counter(SHLIB_CNT_DEFERRED), 1);
	assert_int_equal(counter(SHLIB_CNT_LOST), 1); /* still unreadable at exit */
}

int main(void)
{
	size_t ncases = sizeof(path_cases) / sizeof(path_cases[0]), i;
	const struct CMUnitTest fixed[] = {
		cmocka_unit_test_setup(test_failed_open_emits_nothing, case_setup),
		cmocka_unit_test_setup(test_write_open_ignored, case_setup),
		cmocka_unit_test_setup(test_disabled_libset_ignored, case_setup),
		cmocka_unit_test_setup(test_syscall_recorded, case_setup),
		cmocka_unit_test_setup(test_unreadable_pointer, case_setup),
		cmocka_unit_test_setup(test_unreadable_at_enter_matched_at_exit, case_setup),
	};
	size_t nfixed = sizeof(fixed) / sizeof(fixed[0]);
	struct CMUnitTest *tests = calloc(ncases + nfixed, sizeof(*tests));
	int ret;

	bpftel_test_require_bpf();
	prctl(PR_SET_NAME, TEST_COMM);
	for (i = 0; i < ncases; i++) {
		tests[i].name = path_cases[i].name;
		tests[i].test_func = test_path_case;
		tests[i].setup_func = case_setup;
		tests[i].initial_state = (void *)&path_cases[i];
	}
	memcpy(tests + ncases, fixed, sizeof(fixed));
	ret = _cmocka_run_group_tests("shared_libraries", tests, ncases + nfixed, group_setup,
				      group_teardown);
	free(tests);
	return ret;
}
