// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * user/manager/codemove.c: a probe moved by a call's or jump's displacement stays
 * inside the executable segment of its symbol. The file is crafted: functions at
 * known offsets, and the segment given as [lo, hi) as elfsym.c would find it; a
 * segment that leaves out the caller, the callee or the other function moves nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "user/manager/codemove.h"

#define FN_A	   0x100L /* sub $8,%rsp; call CALLEE */
#define CALLEE	   0x180L /* push %r13; ret */
#define FN_B	   0x300L /* call CALLEE; ret */
#define FN_T	   0x400L /* mov %rsi,%rdx; mov $0x17,%esi; jmp TARGET */
#define TARGET	   0x500L /* push %r15; ret */
#define FN_U	   0x600L /* the same, to STEPPED */
#define STEPPED	   0x700L /* sub $8,%rsp: single-stepped */
#define FILE_BYTES 0x1000L

static void put(unsigned char *f, long at, const unsigned char *code, size_t n)
{
	memcpy(f + at, code, n);
}

static void put_rel(unsigned char *f, long at, long insn_end, long target)
{
	int32_t rel = (int32_t)(target - insn_end);

	memcpy(f + at, &rel, sizeof(rel));
}

static int crafted(void)
{
	static const unsigned char a[] = {0x48, 0x83, 0xec, 0x08, 0xe8, 0, 0, 0, 0, 0xc3};
	static const unsigned char callee[] = {0x41, 0x55, 0xc3};
	static const unsigned char b[] = {0xe8, 0, 0, 0, 0, 0xc3};
	static const unsigned char t[] = {0x48, 0x89, 0xf2, 0xbe, 0x17, 0, 0, 0, 0xe9, 0, 0, 0, 0};
	static const unsigned char target[] = {0x41, 0x57, 0xc3};
	static const unsigned char stepped[] = {0x48, 0x83, 0xec, 0x08, 0xc3};
	unsigned char f[FILE_BYTES];
	int fd = memfd_create("codemove", MFD_CLOEXEC);

	assert_true(fd >= 0);
	memset(f, 0xcc, sizeof(f)); /* int3 between the functions */
	put(f, FN_A, a, sizeof(a));
	put_rel(f, FN_A + 5, FN_A + 9, CALLEE);
	put(f, CALLEE, callee, sizeof(callee));
	put(f, FN_B, b, sizeof(b));
	put_rel(f, FN_B + 1, FN_B + 5, CALLEE);
	put(f, FN_T, t, sizeof(t));
	put_rel(f, FN_T + 9, FN_T + 13, TARGET);
	put(f, TARGET, target, sizeof(target));
	put(f, FN_U, t, sizeof(t));
	put_rel(f, FN_U + 9, FN_U + 13, STEPPED);
	put(f, STEPPED, stepped, sizeof(stepped));
	assert_int_equal(pwrite(fd, f, sizeof(f), 0), sizeof(f));
	return fd;
}

static void test_shared_callee(void **state)
{
	int fd = crafted();

	(void)state;
	/* One segment holds all three: the callee. */
	assert_int_equal(bpftel_shared_callee_fd(fd, FN_A, FN_B, 0, FILE_BYTES), CALLEE);
	/* The callee past the segment's end: in the process it is elsewhere. */
	assert_int_equal(bpftel_shared_callee_fd(fd, FN_A, FN_B, 0, CALLEE), -1);
	/* The caller outside it. */
	assert_int_equal(bpftel_shared_callee_fd(fd, FN_A, FN_B, FN_A + 1, FILE_BYTES), -1);
	/* The other function outside it: its call is not known to reach the callee. */
	assert_int_equal(bpftel_shared_callee_fd(fd, FN_A, FN_B, 0, FN_B), -1);
	/* The caller's call cut by the segment's end. */
	assert_int_equal(bpftel_shared_callee_fd(fd, FN_A, FN_B, 0, FN_A + 7), -1);
	/* An empty segment (none executable holds the symbol) moves nothing. */
	assert_int_equal(bpftel_shared_callee_fd(fd, FN_A, FN_B, 0, 0), -1);
	close(fd);
}

static void test_tail_reads(void **state)
{
	long t[4];
	bool pays = true;
	int fd = crafted();

	(void)state;
	assert_int_equal(bpftel_tail_reads_fd(fd, FN_T, 0, FILE_BYTES, 0x17, t, 4, &pays), 1);
	assert_int_equal(t[0], TARGET);
	assert_true(pays);
	/* The target past the segment's end. */
	assert_int_equal(bpftel_tail_reads_fd(fd, FN_T, 0, TARGET, 0x17, t, 4, &pays), -1);
	/* The jump cut by the segment's end: a path leaves the bytes read. */
	assert_int_equal(bpftel_tail_reads_fd(fd, FN_T, 0, FN_T + 10, 0x17, t, 4, &pays), -1);
	/* The function outside the segment, or none. */
	assert_int_equal(bpftel_tail_reads_fd(fd, FN_T, FN_T + 1, FILE_BYTES, 0x17, t, 4, &pays),
			 -1);
	assert_int_equal(bpftel_tail_reads_fd(fd, FN_T, 0, 0, 0x17, t, 4, &pays), -1);
	/* A target that is single-stepped: found, but it does not pay. */
	assert_int_equal(bpftel_tail_reads_fd(fd, FN_U, 0, FILE_BYTES, 0x17, t, 4, &pays), 1);
	assert_int_equal(t[0], STEPPED);
	assert_false(pays);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shared_callee),
		cmocka_unit_test(test_tail_reads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
