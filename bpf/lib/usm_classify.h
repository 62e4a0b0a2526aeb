/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Does a buffer start an HTTP/1.x message (or an HTTP/2 connection)? Shared by the
 * TLS uprobes, the socket filter and their harnesses. Looks at 8 bytes only: userspace
 * parses the line fully; here the point is to drop everything else (bodies, other
 * protocols) before it costs a ring-buffer record.
 */
#ifndef BPFTEL_USM_CLASSIFY_H
#define BPFTEL_USM_CLASSIFY_H

#include "../usm.h"

#define USM_PEEK 8

static __always_inline bool usm_is4(const char *b, char c0, char c1, char c2, char c3)
{
	return b[0] == c0 && b[1] == c1 && b[2] == c2 && b[3] == c3;
}

static __always_inline bool usm_upper(char c)
{
	return c >= 'A' && c <= 'Z';
}

/* Another method (PURGE, MKCOL, LINK...): 3 to 6 upper-case letters, a space and '/'.
 * Userspace reports it as "_OTHER", so that it is counted, not seen as non-HTTP. */
static __always_inline bool usm_method_end(const char *b, int n)
{
	return b[n] == ' ' && b[n + 1] == '/';
}

/* Unrolled: the verifier refuses a loop-indexed read of the stack buffer. */
static __always_inline bool usm_other_method(const char *b)
{
	if (!usm_upper(b[0]) || !usm_upper(b[1]) || !usm_upper(b[2]))
		return false;
	if (usm_method_end(b, 3))
		return true;
	if (!usm_upper(b[3]))
		return false;
	if (usm_method_end(b, 4))
		return true;
	if (!usm_upper(b[4]))
		return false;
	if (usm_method_end(b, 5))
		return true;
	return usm_upper(b[5]) && usm_method_end(b, 6);
}

/* USM_KIND_REQUEST, USM_KIND_RESPONSE, or -1. b holds USM_PEEK bytes. */
static __always_inline int usm_classify_bytes(const char *b)
{
	if (usm_is4(b, 'H', 'T', 'T', 'P'))
		return b[4] == '/' && b[5] == '1' && b[6] == '.' ? USM_KIND_RESPONSE : -1;
	if (usm_is4(b, 'G', 'E', 'T', ' ') || usm_is4(b, 'P', 'U', 'T', ' ') ||
	    (usm_is4(b, 'P', 'O', 'S', 'T') && b[4] == ' ') ||
	    (usm_is4(b, 'H', 'E', 'A', 'D') && b[4] == ' ') ||
	    (usm_is4(b, 'P', 'A', 'T', 'C') && b[4] == 'H') ||
	    (usm_is4(b, 'D', 'E', 'L', 'E') && b[4] == 'T') ||
	    (usm_is4(b, 'O', 'P', 'T', 'I') && b[4] == 'O') ||
	    (usm_is4(b, 'C', 'O', 'N', 'N') && b[4] == 'E') ||
	    (usm_is4(b, 'T', 'R', 'A', 'C') && b[4] == 'E'))
		return USM_KIND_REQUEST;
	return usm_other_method(b) ? USM_KIND_REQUEST : -1;
}

/* The same of the USM_PEEK bytes of word, as they lie in memory. A global
 * function, verified once per program for any bytes: inlined, its chain of compares
 * was verified again along every path that reached it, a tenth of the socket
 * filter's verification. Its bytes go by value: a global function's pointer argument
 * is checked for the size of its type, one byte for a char's. */
__noinline int usm_classify_word(__u64 word)
{
	char b[USM_PEEK];

	__builtin_memcpy(b, &word, sizeof(b));
	return usm_classify_bytes(b);
}

static __always_inline int usm_classify(const char *b)
{
	__u64 word;

	_Static_assert(USM_PEEK == sizeof(word), "the peek goes in one word");
	__builtin_memcpy(&word, b, sizeof(word));
	return usm_classify_word(word);
}

/* HTTP/2's starts, for TLS sessions (lib/usm_h2.h) and h2c packets (lib/usm_socket.h):
 * a client's connection preface ("PRI * HTTP/2.0..."), and a server's first frame, a
 * SETTINGS with no flags (not an ACK) on stream 0 holding whole settings (b holds
 * USM_PEEK bytes: the stream id's last byte is past them). */
static __always_inline bool usm_h2_preface_start(const char *b)
{
	return usm_is4(b, 'P', 'R', 'I', ' ') && usm_is4(b + 4, '*', ' ', 'H', 'T');
}

static __always_inline bool usm_h2_settings_start(const char *b)
{
	__u32 len = (__u32)(__u8)b[1] << 8 | (__u8)b[2];

	return b[0] == 0 && b[3] == 4 && b[4] == 0 && b[5] == 0 && b[6] == 0 && b[7] == 0 &&
	       len % 6 == 0 && len <= 6 * 16;
}

#endif /* BPFTEL_USM_CLASSIFY_H */
