// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * user/manager/tailread.c: a read function's typed tail reads. The real cases are
 * Debian 12's libgnutls.so.30 (3.7.9-2+deb12u7, `objdump -d`) at its file offsets:
 * gnutls_record_recv and gnutls_record_recv_seq, whose reads go to _gnutls_recv_int
 * (and with kTLS to _gnutls_ktls_recv_int) with type 23. Then crafted code where the
 * caller's buffer could be filled another way, which must be refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "user/manager/prologue.h"
#include "user/manager/tailread.h"

#define RECORD_RECV	0x3fa40L
#define RECORD_RECV_SEQ 0x3fae0L
#define RECV_INT	0x3e8b0L /* _gnutls_recv_int: push %r15 */
#define KTLS_RECV_INT	0x96dc0L /* _gnutls_ktls_recv_int */
#define APP_DATA	23

/* sub $8,%rsp; cmpb $0,0x6b8(%rdi); mov %rdx,%rcx; je 3fa90; testb $1,0x1168(%rdi);
 * je 3fa70; mov %rsi,%rdx; mov $0x17,%esi; call ktls; cltq; add $8,%rsp; ret;
 * 3fa70: mov 0x770(%rdi),%r9d; mov %rsi,%rdx; xor %r8d,%r8d; mov $0x17,%esi;
 * add $8,%rsp; jmp recv_int; 3fa90: the handshake-state checks jumping back to
 * 3fa50, and an error path (a call to _gnutls_log with rsi a string) returning -408. */
static const unsigned char record_recv[] = {
	0x48, 0x83, 0xec, 0x08, 0x80, 0xbf, 0xb8, 0x06, 0x00, 0x00, 0x00, 0x48, 0x89, 0xd1,
	0x74, 0x40, 0xf6, 0x87, 0x68, 0x11, 0x00, 0x00, 0x01, 0x74, 0x17, 0x48, 0x89, 0xf2,
	0xbe, 0x17, 0x00, 0x00, 0x00, 0xe8, 0x5a, 0x73, 0x05, 0x00, 0x48, 0x98, 0x48, 0x83,
	0xc4, 0x08, 0xc3, 0x0f, 0x1f, 0x00, 0x44, 0x8b, 0x8f, 0x70, 0x07, 0x00, 0x00, 0x48,
	0x89, 0xf2, 0x45, 0x31, 0xc0, 0xbe, 0x17, 0x00, 0x00, 0x00, 0x48, 0x83, 0xc4, 0x08,
	0xe9, 0x25, 0xee, 0xff, 0xff, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x8b, 0x87, 0x64, 0x08,
	0x00, 0x00, 0x83, 0xf8, 0x03, 0x74, 0xb5, 0x83, 0xf8, 0x06, 0x74, 0xb0, 0x48, 0x8b,
	0x05, 0x89, 0x91, 0x1d, 0x00, 0x83, 0x38, 0x02, 0x7f, 0x09, 0x48, 0xc7, 0xc0, 0x68,
	0xfe, 0xff, 0xff, 0xeb, 0xb3, 0x41, 0xb8, 0x62, 0x09, 0x00, 0x00, 0x48, 0x8d, 0x0d,
	0x5e, 0xcc, 0x12, 0x00, 0x31, 0xc0, 0xbf, 0x03, 0x00, 0x00, 0x00, 0x48, 0x8d, 0x15,
	0x94, 0xc6, 0x12, 0x00, 0x48, 0x8d, 0x35, 0x3b, 0xc5, 0x12, 0x00, 0xe8, 0xc4, 0x86,
	0xff, 0xff, 0xeb, 0xce};

/* mov 0x770(%rdi),%r9d; mov %rcx,%r8; mov %rdx,%rcx; mov %rsi,%rdx; mov $0x17,%esi;
 * jmp recv_int */
static const unsigned char record_recv_seq[] = {
	0x44, 0x8b, 0x8f, 0x70, 0x07, 0x00, 0x00, 0x49, 0x89, 0xc8, 0x48, 0x89, 0xd1,
	0x48, 0x89, 0xf2, 0xbe, 0x17, 0x00, 0x00, 0x00, 0xe9, 0xb6, 0xed, 0xff, 0xff};

/* _gnutls_recv_int's first bytes: push %r15; mov %esi,%r15d */
static const unsigned char recv_int[] = {0x41, 0x57, 0x41, 0x89, 0xf7};

static int reads(const unsigned char *code, size_t n, long *t)
{
	memset(t, 0, BPFTEL_TAIL_READS_MAX * sizeof(*t));
	return bpftel_tail_reads(code, n, APP_DATA, t, BPFTEL_TAIL_READS_MAX);
}

static void test_gnutls(void **state)
{
	long t[BPFTEL_TAIL_READS_MAX];

	(void)state;
	/* Both ways out with data: the kTLS call first (lower address), then the jump. */
	assert_int_equal(reads(record_recv, sizeof(record_recv), t), 2);
	assert_true((t[0] == KTLS_RECV_INT - RECORD_RECV && t[1] == RECV_INT - RECORD_RECV) ||
		    (t[1] == KTLS_RECV_INT - RECORD_RECV && t[0] == RECV_INT - RECORD_RECV));
	assert_int_equal(reads(record_recv_seq, sizeof(record_recv_seq), t), 1);
	assert_int_equal(RECORD_RECV_SEQ + t[0], RECV_INT);
	/* the one that pays to probe: its first instruction is emulated */
	assert_true(bpftel_insn_emulated(recv_int, sizeof(recv_int)));
	/* another record type: the reads are not of it, and the buffer leaves in rdx */
	assert_int_equal(bpftel_tail_reads(record_recv, sizeof(record_recv), 0x15, t, 4), -1);
	/* room for one target only */
	assert_int_equal(bpftel_tail_reads(record_recv, sizeof(record_recv), APP_DATA, t, 1), -1);
	/* cut before the end of a path: refused, not guessed */
	assert_int_equal(reads(record_recv, sizeof(record_recv) - 2, t), -1);
	assert_int_equal(reads(record_recv_seq, sizeof(record_recv_seq) - 1, t), -1);
}

/* What must be refused: the caller's buffer filled, or able to be, some other way. */
static void test_refused(void **state)
{
	/* mov %rsi,%rdi; call x; mov %rsi,%rdx; mov $0x17,%esi; jmp y: the buffer goes to
	 * another function first (as its first argument) */
	static const unsigned char passed[] = {0x48, 0x89, 0xf7, 0xe8, 0x00, 0x01, 0x00, 0x00,
					       0x48, 0x89, 0xf2, 0xbe, 0x17, 0x00, 0x00, 0x00,
					       0xe9, 0x00, 0x02, 0x00, 0x00};
	/* movb $0,(%rsi); mov %rsi,%rdx; mov $0x17,%esi; jmp y: written here */
	static const unsigned char written[] = {0xc6, 0x06, 0x00, 0x48, 0x89, 0xf2, 0xbe,
						0x17, 0x00, 0x00, 0x00, 0xe9, 0x00, 0x02,
						0x00, 0x00};
	/* push %rsi; ...: stored where a callee could find it */
	static const unsigned char pushed[] = {0x56, 0x48, 0x89, 0xf2, 0xbe, 0x17, 0x00,
					       0x00, 0x00, 0xe9, 0x00, 0x02, 0x00, 0x00};
	/* mov %rsi,%rbx; mov %rbx,%rdx; mov $0x17,%esi; jmp *%rax: indirect */
	static const unsigned char indirect[] = {0x48, 0x89, 0xf3, 0x48, 0x89, 0xda, 0xbe,
						 0x17, 0x00, 0x00, 0x00, 0xff, 0xe0};
	/* test %edx,%edx; je +3; mov %rcx,%rsi; mov %rsi,%rdx; mov $0x17,%esi; jmp y: on
	 * one path rdx is another pointer: not proved the caller's buffer */
	static const unsigned char maybe[] = {0x85, 0xd2, 0x74, 0x03, 0x48, 0x89, 0xce,
					      0x48, 0x89, 0xf2, 0xbe, 0x17, 0x00, 0x00,
					      0x00, 0xe9, 0x00, 0x02, 0x00, 0x00};
	/* mov %rsi,%rdx; mov %rdx,%rdi; mov $0x17,%esi; jmp y: the session replaced */
	static const unsigned char no_session[] = {0x48, 0x89, 0xf2, 0x48, 0x89, 0xd7, 0xbe,
						   0x17, 0x00, 0x00, 0x00, 0xe9, 0x00, 0x02,
						   0x00, 0x00};
	/* mov %rsi,%rbx; mov $0x17,%esi; jmp y: the buffer leaves in rbx, not rdx */
	static const unsigned char elsewhere[] = {0x48, 0x89, 0xf3, 0xbe, 0x17, 0x00, 0x00,
						  0x00, 0xe9, 0x00, 0x02, 0x00, 0x00};
	/* mov %rsi,%rbx; xor %esi,%esi; call x; mov %rbx,%rdx; mov $0x17,%esi; jmp y: the
	 * call may have changed rdi: the session is not known, and the buffer leaves */
	static const unsigned char lost_session[] = {0x48, 0x89, 0xf3, 0x31, 0xf6, 0xe8, 0x00,
						     0x01, 0x00, 0x00, 0x48, 0x89, 0xda, 0xbe,
						     0x17, 0x00, 0x00, 0x00, 0xe9, 0x00, 0x02,
						     0x00, 0x00};
	/* push %rbx; mov %rsi,%rdx; mov $0x17,%esi; jmp y: a typed read jumped to with the
	 * caller's rbx on top of the stack, where its uretprobe would write */
	static const unsigned char unbalanced[] = {0x53, 0x48, 0x89, 0xf2, 0xbe, 0x17, 0x00,
						   0x00, 0x00, 0xe9, 0x00, 0x02, 0x00, 0x00};
	/* sub $8,%rsp; mov %rsi,%rdx; mov $0x17,%esi; jne y (a conditional way out);
	 * add $8,%rsp; ret */
	static const unsigned char framed[] = {0x48, 0x83, 0xec, 0x08, 0x48, 0x89, 0xf2, 0xbe,
					       0x17, 0x00, 0x00, 0x00, 0x0f, 0x85, 0x00, 0x02,
					       0x00, 0x00, 0x48, 0x83, 0xc4, 0x08, 0xc3};
	/* test %edx,%edx; je +1; push %rbx; mov %rsi,%rdx; mov $0x17,%esi; jmp y: the
	 * paths reach the jump at two depths */
	static const unsigned char two_depths[] = {0x85, 0xd2, 0x74, 0x01, 0x53, 0x48, 0x89,
						   0xf2, 0xbe, 0x17, 0x00, 0x00, 0x00, 0xe9,
						   0x00, 0x02, 0x00, 0x00};
	/* mov %rbp,%rsp; mov %rsi,%rdx; mov $0x17,%esi; jmp y: rsp not followed */
	static const unsigned char sp_moved[] = {0x48, 0x89, 0xec, 0x48, 0x89, 0xf2, 0xbe,
						 0x17, 0x00, 0x00, 0x00, 0xe9, 0x00, 0x02,
						 0x00, 0x00};
	/* Pushes capstone does not list as writes of rsp, or of another size than their
	 * operand says, and a pop into rsp; each then mov %rsi,%rdx; mov $0x17,%esi;
	 * jmp y. push %fs: */
	static const unsigned char seg_pushed[] = {0x0f, 0xa0, 0x48, 0x89, 0xf2, 0xbe, 0x17,
						   0x00, 0x00, 0x00, 0xe9, 0x00, 0x02, 0x00,
						   0x00};
	/* enter $0,$0 */
	static const unsigned char entered[] = {0xc8, 0x00, 0x00, 0x00, 0x48, 0x89, 0xf2, 0xbe,
						0x17, 0x00, 0x00, 0x00, 0xe9, 0x00, 0x02, 0x00,
						0x00};
	/* pushw $1; add $8,%rsp: 2 bytes pushed, 8 taken off */
	static const unsigned char pushw[] = {0x66, 0x6a, 0x01, 0x48, 0x83, 0xc4, 0x08, 0x48,
					      0x89, 0xf2, 0xbe, 0x17, 0x00, 0x00, 0x00, 0xe9,
					      0x00, 0x02, 0x00, 0x00};
	/* 66 48 6a 01 (REX.W wins over 0x66: 8 bytes pushed, capstone says a word);
	 * add $2,%rsp: 6 bytes still on the stack */
	static const unsigned char rexw_pushw[] = {0x66, 0x48, 0x6a, 0x01, 0x48, 0x83, 0xc4,
						   0x02, 0x48, 0x89, 0xf2, 0xbe, 0x17, 0x00,
						   0x00, 0x00, 0xe9, 0x00, 0x02, 0x00, 0x00};
	/* push %rbx; pop %rsp: rsp is what was pushed, not 8 higher */
	static const unsigned char pop_rsp[] = {0x53, 0x5c, 0x48, 0x89, 0xf2, 0xbe, 0x17, 0x00,
						0x00, 0x00, 0xe9, 0x00, 0x02, 0x00, 0x00};
	/* syscall with the buffer in rsi: read(2) straight into it */
	static const unsigned char sys[] = {0x0f, 0x05, 0xc3};
	long t[BPFTEL_TAIL_READS_MAX];

	(void)state;
	assert_int_equal(reads(passed, sizeof(passed), t), -1);
	assert_int_equal(reads(written, sizeof(written), t), -1);
	assert_int_equal(reads(pushed, sizeof(pushed), t), -1);
	assert_int_equal(reads(indirect, sizeof(indirect), t), -1);
	assert_int_equal(reads(maybe, sizeof(maybe), t), -1);
	assert_int_equal(reads(no_session, sizeof(no_session), t), -1);
	assert_int_equal(reads(elsewhere, sizeof(elsewhere), t), -1);
	assert_int_equal(reads(lost_session, sizeof(lost_session), t), -1);
	assert_int_equal(reads(sys, sizeof(sys), t), -1);
	assert_int_equal(reads(sys, 0, t), -1);
	assert_int_equal(reads(unbalanced, sizeof(unbalanced), t), -1);
	assert_int_equal(reads(framed, sizeof(framed), t), -1);
	assert_int_equal(reads(two_depths, sizeof(two_depths), t), -1);
	assert_int_equal(reads(sp_moved, sizeof(sp_moved), t), -1);
	assert_int_equal(reads(seg_pushed, sizeof(seg_pushed), t), -1);
	assert_int_equal(reads(entered, sizeof(entered), t), -1);
	assert_int_equal(reads(pushw, sizeof(pushw), t), -1);
	assert_int_equal(reads(pop_rsp, sizeof(pop_rsp), t), -1);
	assert_int_equal(reads(rexw_pushw, sizeof(rexw_pushw), t), -1);
}

/* What is accepted: reads of the buffer pointer that cannot fill it, and code with no
 * typed read at all (0: nothing to move, the caller keeps its probes). */
static void test_accepted(void **state)
{
	/* test %rsi,%rsi; je 18; mov %rsi,%rdx; mov $0x17,%esi; jmp y; 18: xor %eax,%eax;
	 * ret */
	static const unsigned char null_check[] = {0x48, 0x85, 0xf6, 0x74, 0x0d, 0x48, 0x89,
						   0xf2, 0xbe, 0x17, 0x00, 0x00, 0x00, 0xe9,
						   0x00, 0x02, 0x00, 0x00, 0x31, 0xc0, 0xc3};
	/* mov %rdi,%rbp; mov %rsi,%rbx; xor %esi,%esi; call x; mov %rbp,%rdi;
	 * mov %rbx,%rdx; mov $0x17,%esi; jmp y: both kept in callee-saved registers
	 * across a call that is not given the buffer */
	static const unsigned char saved[] = {0x48, 0x89, 0xfd, 0x48, 0x89, 0xf3, 0x31, 0xf6,
					      0xe8, 0x00, 0x01, 0x00, 0x00, 0x48, 0x89, 0xef,
					      0x48, 0x89, 0xda, 0xbe, 0x17, 0x00, 0x00, 0x00,
					      0xe9, 0x00, 0x02, 0x00, 0x00};
	/* mov $0x17,%esi; mov %rsi,%rdx; jmp y: the buffer dropped (rdx is 23): no typed
	 * read, and nothing else can fill it */
	static const unsigned char dropped[] = {0xbe, 0x17, 0x00, 0x00, 0x00, 0x48, 0x89,
						0xf2, 0xe9, 0x00, 0x02, 0x00, 0x00};
	/* endbr64 (a build with CET); mov %rsi,%rdx; mov $0x17,%esi; jmp y */
	static const unsigned char cet[] = {0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x89, 0xf2, 0xbe, 0x17,
					    0x00, 0x00, 0x00, 0xe9, 0x00, 0x02, 0x00, 0x00};
	/* push %rbx; mov %rsi,%rdx; mov $0x17,%esi; pop %rbx; jmp y: the frame undone
	 * before the jump, as a tail call does */
	static const unsigned char popped[] = {0x53, 0x48, 0x89, 0xf2, 0xbe, 0x17, 0x00, 0x00,
					       0x00, 0x5b, 0xe9, 0x00, 0x02, 0x00, 0x00};
	/* push %rbx; mov %rsi,%rdx; mov $0x17,%esi; call y; pop %rbx; ret: a call pushes
	 * its own return address, whatever the depth */
	static const unsigned char called[] = {0x53, 0x48, 0x89, 0xf2, 0xbe, 0x17, 0x00, 0x00,
					       0x00, 0xe8, 0x00, 0x02, 0x00, 0x00, 0x5b, 0xc3};
	/* mov $-1,%rax; ret: no read */
	static const unsigned char none[] = {0x48, 0xc7, 0xc0, 0xff, 0xff, 0xff, 0xff, 0xc3};
	long t[BPFTEL_TAIL_READS_MAX];

	(void)state;
	assert_int_equal(reads(null_check, sizeof(null_check), t), 1);
	assert_int_equal(t[0], 18 + 0x200);
	assert_int_equal(reads(saved, sizeof(saved), t), 1);
	assert_int_equal(t[0], 29 + 0x200);
	assert_int_equal(reads(dropped, sizeof(dropped), t), 0);
	assert_int_equal(reads(cet, sizeof(cet), t), 1);
	assert_int_equal(t[0], 17 + 0x200);
	assert_int_equal(reads(none, sizeof(none), t), 0);
	assert_int_equal(reads(popped, sizeof(popped), t), 1);
	assert_int_equal(t[0], 15 + 0x200);
	assert_int_equal(reads(called, sizeof(called), t), 1);
	assert_int_equal(t[0], 14 + 0x200);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gnutls),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_accepted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
