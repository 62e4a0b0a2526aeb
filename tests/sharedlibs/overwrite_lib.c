// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Two builds of one library (OVERWRITE_V 1 and 2), named like libssl for the registry's
 * test module, whose SSL_write starts at the same file offset with a different first
 * instruction (gcc -O2 -fcf-protection=none, x86-64):
 *   1: lea 0x1(%rdi),%eax          SSL_write(20) = 21
 *   2: lea 0x2(%rdi,%rdi,1),%eax   SSL_write(20) = 42
 * A uprobe installed on build 1 keeps build 1's instruction: a process that maps the
 * file after build 2 was written over it in place would run that one (test_uprobe_registry.c
 * checks the offsets and the bytes itself).
 */
#ifndef OVERWRITE_V
#error "OVERWRITE_V: 1 or 2"
#endif

__attribute__((noinline)) int SSL_write(int x)
{
#if OVERWRITE_V == 1
	return x + 1;
#else
	return 2 * x + 2;
#endif
}

__attribute__((noinline)) int SSL_read(int x)
{
	return x;
}
