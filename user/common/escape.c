// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <stdlib.h>
#include <string.h>

#include "escape.h"

/*
 * The characters that reorder or hide what follows them, or show as nothing, which a
 * name chosen to deceive could carry: a path shown reversed ("Trojan Source"), or
 * "nginx" and an invisible character beside the real nginx. Unicode's
 * Default_Ignorable_Code_Point set (DerivedCoreProperties.txt: the bidirectional
 * marks, embeddings, overrides and isolates, the zero-width ones, the soft hyphen,
 * the Hangul fillers, variation selectors, tags, ...), and the line and paragraph
 * separators (U+2028/9), which break a line as a newline does, and the interlinear
 * annotation marks (U+FFF9..B), which hide text between them.
 */
static bool invisible_format(unsigned int cp)
{
	static const struct {
		unsigned int lo, hi;
	} ranges[] = {
		{0x00ad, 0x00ad},   {0x034f, 0x034f},	{0x061c, 0x061c},   {0x115f, 0x1160},
		{0x17b4, 0x17b5},   {0x180b, 0x180f},	{0x200b, 0x200f},   {0x2028, 0x202e},
		{0x2060, 0x206f},   {0x3164, 0x3164},	{0xfe00, 0xfe0f},   {0xfeff, 0xfeff},
		{0xffa0, 0xffa0},   {0xfff0, 0xfffb},	{0x1bca0, 0x1bca3}, {0x1d173, 0x1d17a},
		{0xe0000, 0xe0fff},
	};
	size_t i;

	if (cp < 0xad)
		return false; /* most text: ASCII and the Latin-1 letters */
	for (i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		if (cp >= ranges[i].lo && cp <= ranges[i].hi)
			return true;
	}
	return false;
}

/* Length of the valid, printable UTF-8 sequence at s (at most len bytes), or 0. */
static size_t utf8_ok(const unsigned char *s, size_t len)
{
	unsigned int cp;
	size_t n, i;

	if (s[0] < 0x80)
		return s[0] >= 0x20 && s[0] != 0x7f;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (n > len)
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates, beyond U+10FFFF, and the C1 controls. */
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f))
		return 0;
	return invisible_format(cp) ? 0 : n;
}

size_t bpftel_escape(char *out, size_t size, const char *in, size_t len, unsigned int flags)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *s = (const unsigned char *)in;
	size_t i = 0, o = 0, n, k, fit = 0;
	const char *unit;
	char esc[4];

	while (i < len) {
		n = utf8_ok(s + i, len - i);
		if (n && !(s[i] == '\\' && (flags & BPFTEL_ESC_BACKSLASH))) {
			unit = (const char *)s + i; /* a character, as it is */
			k = n;
		} else if (n) { /* a backslash */
			unit = "\\\\";
			k = 2;
		} else {
			esc[0] = '\\';
			esc[1] = 'x';
			esc[2] = hex[s[i] >> 4];
			esc[3] = hex[s[i] & 0xf];
			unit = esc;
			k = 4;
			n = 1;
		}
		/* Whole units only: a result cut short ends between characters and escapes,
		 * never inside one (half a UTF-8 sequence, a "\x" without its digits). */
		if (fit == o && o + k < size) {
			memcpy(out + o, unit, k);
			fit += k;
		}
		o += k;
		i += n;
	}
	if (size)
		out[fit] = '\0';
	return o;
}

char *bpftel_escape_dup(const char *s, unsigned int flags)
{
	size_t len = strlen(s), need = bpftel_escape(NULL, 0, s, len, flags);
	char *out = malloc(need + 1);

	if (out)
		bpftel_escape(out, need + 1, s, len, flags);
	return out;
}

bool bpftel_escape_needed(const char *s, unsigned int flags)
{
	size_t len = strlen(s);

	return bpftel_escape(NULL, 0, s, len, flags) != len;
}
