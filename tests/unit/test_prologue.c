// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * user/manager/prologue.c: where an entry uprobe goes past a function's prologue. The
 * cases are the first bytes of the functions the USM module probes at entry only, as
 * Debian 12 ships them (libssl 3.0, libgnutls 3.7: `objdump -d`), and prologues that
 * must keep the probe on the entry. Then where a read's entry and return probes move
 * to the callee SSL_read and SSL_read_ex share (ssl_read_internal), on the same bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "user/manager/prologue.h"

struct pcase {
	const char *name;
	unsigned char code[BPFTEL_PROLOGUE_MAX];
	size_t n;
	unsigned int nargs;
	size_t want;
};

static const struct pcase cases[] = {
	/* sub $8,%rsp; call: the call */
	{"SSL_write_ex", {0x48, 0x83, 0xec, 0x08, 0xe8, 0x87, 0xfb, 0xff, 0xff}, 9, 3, 4},
	/* sub $0x18,%rsp; mov %fs:0x28,%rax; mov %rax,8(%rsp); xor %eax,%eax;
	 * test %edx,%edx; js: the js */
	{"SSL_write",
	 {0x48, 0x83, 0xec, 0x18, 0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00,
	  0x00, 0x48, 0x89, 0x44, 0x24, 0x08, 0x31, 0xc0, 0x85, 0xd2, 0x78, 0x2f},
	 24,
	 3,
	 22},
	/* xor %eax,%eax; test %esi,%esi; jle: the jle (its 2 arguments untouched; both
	 * ways out of it pass it once) */
	{"SSL_get_error", {0x31, 0xc0, 0x85, 0xf6, 0x7e, 0x0a, 0x31, 0xd2}, 8, 2, 4},
	/* xor %r8d,%r8d; xor %ecx,%ecx; jmp gnutls_record_send2: the jmp (rcx, r8 are
	 * not among its 3 arguments) */
	{"gnutls_record_send",
	 {0x45, 0x31, 0xc0, 0x31, 0xc9, 0xe9, 0x86, 0x9c, 0xff, 0xff},
	 10,
	 3,
	 5},
	/* ... but with a 4th argument kept, xor %ecx,%ecx ends the walk */
	{"rcx kept", {0x45, 0x31, 0xc0, 0x31, 0xc9, 0xe9, 0x86, 0x9c, 0xff, 0xff}, 10, 4, 0},
	/* endbr64; push %rbp; push %r12; jmp rel8 */
	{"endbr64 and pushes", {0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x41, 0x54, 0xeb, 0x10}, 9, 3, 7},
	/* a branch first: already emulated, stays on the entry */
	{"branch first", {0xe9, 0x00, 0x00, 0x00, 0x00}, 5, 3, 0},
	/* mov %edx,%eax; ret: no branch before an unknown instruction */
	{"stub", {0x89, 0xd0, 0xc3}, 3, 3, 0},
	/* xor %edx,%edx: writes the 3rd argument */
	{"argument zeroed", {0x31, 0xd2, 0xe8, 0, 0, 0, 0}, 7, 3, 0},
	/* sub $imm8,%rsp cut short: stays */
	{"cut", {0x48, 0x83, 0xec}, 3, 3, 0},
	/* only harmless instructions, no branch within the bytes read: stays */
	{"no branch", {0x55, 0x53, 0x41, 0x54}, 4, 3, 0},
	/* jcc rel32 after sub $imm32,%rsp */
	{"jcc rel32", {0x48, 0x81, 0xec, 0x00, 0x01, 0x00, 0x00, 0x0f, 0x84, 0, 0, 0, 0}, 13, 3, 7},
};

static void test_cases(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t got = bpftel_prologue_skip(cases[i].code, cases[i].n, cases[i].nargs);

		if (got != cases[i].want)
			fail_msg("%s: skip %zu, want %zu", cases[i].name, got, cases[i].want);
	}
}

/* More bytes than BPFTEL_PROLOGUE_MAX are not looked at: a branch past them is not
 * reached. */
static void test_bounded(void **state)
{
	unsigned char code[BPFTEL_PROLOGUE_MAX + 8];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(code); i++)
		code[i] = 0x55; /* push %rbp */
	code[BPFTEL_PROLOGUE_MAX + 2] = 0xeb;
	assert_int_equal(bpftel_prologue_skip(code, sizeof(code), 3), 0);
	code[BPFTEL_PROLOGUE_MAX - 2] = 0xeb;
	assert_int_equal(bpftel_prologue_skip(code, sizeof(code), 3), BPFTEL_PROLOGUE_MAX - 2);
}

/* Debian 12's libssl.so.3 at its file offsets: SSL_read_ex 0x354c0, SSL_read 0x35430,
 * their shared callee 0x35290 (ssl_read_internal, not exported). */
#define SSL_READ_EX 0x354c0L
#define SSL_READ    0x35430L
#define READ_INTERN 0x35290L

/* sub $8,%rsp; call rel32: the callee, entered with the 4 arguments as they came. */
static const unsigned char ssl_read_ex[] = {0x48, 0x83, 0xec, 0x08, 0xe8, 0xc7, 0xfd, 0xff,
					    0xff, 0x31, 0xd2, 0x85, 0xc0};
/* sub $0x18,%rsp; canary; xor; test %edx,%edx; js; mov %rsp,%rcx; movslq %edx,%rdx;
 * call the same callee (with its own `readbytes` on its stack). */
static const unsigned char ssl_read[] = {
	0x48, 0x83, 0xec, 0x18, 0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00,
	0x48, 0x89, 0x44, 0x24, 0x08, 0x31, 0xc0, 0x85, 0xd2, 0x78, 0x2f, 0x48, 0x89,
	0xe1, 0x48, 0x63, 0xd2, 0xe8, 0x3d, 0xfe, 0xff, 0xff};
/* push %r13; push %r12; push %rbp; push %rbx; sub $0x38,%rsp */
static const unsigned char read_intern[] = {0x41, 0x55, 0x41, 0x54, 0x55, 0x53,
					    0x48, 0x83, 0xec, 0x38};

static void test_shared_callee(void **state)
{
	long callee = 0;

	(void)state;
	assert_true(bpftel_prologue_callee(ssl_read_ex, sizeof(ssl_read_ex), 4, &callee));
	assert_int_equal(SSL_READ_EX + callee, READ_INTERN);
	/* SSL_read's first branch is its js: no callee of its own, but it calls that one */
	assert_false(bpftel_prologue_callee(ssl_read, sizeof(ssl_read), 4, &callee));
	assert_true(bpftel_code_calls(ssl_read, sizeof(ssl_read), READ_INTERN - SSL_READ));
	assert_false(bpftel_code_calls(ssl_read, sizeof(ssl_read), READ_INTERN - SSL_READ + 1));
	/* ... not when the call is cut off */
	assert_false(bpftel_code_calls(ssl_read, sizeof(ssl_read) - 1, READ_INTERN - SSL_READ));
	/* the callee starts with a push the kernel emulates; the wrappers do not */
	assert_true(bpftel_insn_emulated(read_intern, sizeof(read_intern)));
	assert_false(bpftel_insn_emulated(ssl_read_ex, sizeof(ssl_read_ex)));
	assert_false(bpftel_insn_emulated(ssl_read, sizeof(ssl_read)));
}

/* What does not move: a first branch that is not a call, a prologue that writes an
 * argument before the call, a call cut off, and a 0xe8 byte inside an instruction. */
static void test_callee_refused(void **state)
{
	/* sub $8,%rsp; jmp rel32 */
	static const unsigned char jmp[] = {0x48, 0x83, 0xec, 0x08, 0xe9, 0x00, 0x01, 0x00, 0x00};
	/* mov %rdx,%rsi; call rel32: the 2nd argument overwritten */
	static const unsigned char arg_written[] = {0x48, 0x89, 0xd6, 0xe8, 0, 0, 0, 0};
	/* mov $0x(e8)0008e8,%eax; call 0x3f: decoded from byte 1, the immediate's bytes
	 * would be a call to 6 + (int32_t)0xe8e80008, which is not there */
	static const unsigned char imm[] = {0xb8, 0xe8, 0x08, 0x00, 0xe8,
					    0xe8, 0x35, 0x00, 0x00, 0x00};
	/* endbr64 first: the kernel single-steps it, no gain in moving */
	static const unsigned char endbr[] = {0xf3, 0x0f, 0x1e, 0xfa, 0x41, 0x55};
	long callee = 0;

	(void)state;
	assert_false(bpftel_prologue_callee(jmp, sizeof(jmp), 4, &callee));
	assert_false(bpftel_prologue_callee(arg_written, sizeof(arg_written), 4, &callee));
	assert_false(bpftel_prologue_callee(ssl_read_ex, 8, 4, &callee));
	assert_false(bpftel_code_calls(imm, sizeof(imm), 6 + (long)(int32_t)0xe8e80008u));
	assert_true(bpftel_code_calls(imm, sizeof(imm), 0x3f));
	assert_false(bpftel_insn_emulated(endbr, sizeof(endbr)));
	assert_false(bpftel_insn_emulated(endbr, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cases),
		cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_shared_callee),
		cmocka_unit_test(test_callee_refused),
	};

	return cmocka_run_group_tests_name("prologue", tests, NULL, NULL);
}
