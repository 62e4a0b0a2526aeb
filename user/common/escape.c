// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <ctype.h>
#include <stdlib.h>
#include <stdio.h>
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

/* Code points a terminal shows in two columns (East Asian Wide and Fullwidth: CJK,
 * Hangul, kana, fullwidth forms, most emoji), and those it shows in none (combining
 * marks): the blocks that names and paths use, not the whole of Unicode. */
static int columns_of(unsigned int cp)
{
	static const struct {
		unsigned int lo, hi;
	} wide[] = {
		{0x1100, 0x115f},   {0x231a, 0x231b},	{0x2329, 0x232a},   {0x23e9, 0x23ec},
		{0x25fd, 0x25fe},   {0x2614, 0x2615},	{0x2648, 0x2653},   {0x26aa, 0x26ab},
		{0x2e80, 0x303e},   {0x3041, 0x33ff},	{0x3400, 0x4dbf},   {0x4e00, 0x9fff},
		{0xa000, 0xa4cf},   {0xa960, 0xa97f},	{0xac00, 0xd7a3},   {0xf900, 0xfaff},
		{0xfe10, 0xfe19},   {0xfe30, 0xfe6f},	{0xff00, 0xff60},   {0xffe0, 0xffe6},
		{0x16fe0, 0x16fe4}, {0x17000, 0x18cff}, {0x1b000, 0x1b2ff}, {0x1f300, 0x1f64f},
		{0x1f680, 0x1f6ff}, {0x1f900, 0x1f9ff}, {0x1fa70, 0x1faff}, {0x20000, 0x3fffd},
	}, none[] = {
		{0x0300, 0x036f}, {0x0483, 0x0489}, {0x0591, 0x05bd}, {0x0610, 0x061a},
		{0x064b, 0x065f}, {0x0e31, 0x0e31}, {0x0e34, 0x0e3a}, {0x0e47, 0x0e4e},
		{0x1ab0, 0x1aff}, {0x1dc0, 0x1dff}, {0x20d0, 0x20ff}, {0xfe20, 0xfe2f},
	};
	size_t i;

	if (cp < 0x300)
		return 1;
	for (i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
		if (cp >= none[i].lo && cp <= none[i].hi)
			return 0;
	}
	for (i = 0; i < sizeof(wide) / sizeof(wide[0]); i++) {
		if (cp >= wide[i].lo && cp <= wide[i].hi)
			return 2;
	}
	return 1;
}

/* The bytes of the character or escape at p (left > 0 bytes on), and its columns in
 * *cols: an escape \xNN is one piece of four, and BPFTEL_ESC_BACKSLASH's \\ one of
 * two, as a cut must not split one. */
static size_t piece_at(const unsigned char *p, size_t left, size_t *cols)
{
	size_t n, i;
	unsigned int cp;

	if (left >= 4 && p[0] == '\\' && p[1] == 'x' && isxdigit(p[2]) && isxdigit(p[3])) {
		*cols = 4;
		return 4;
	}
	if (left >= 2 && p[0] == '\\' && p[1] == '\\') {
		*cols = 2;
		return 2;
	}
	n = utf8_ok(p, left);
	if (!n) { /* not escaped text: a byte a column, as its escape would be */
		*cols = 1;
		return 1;
	}
	cp = n == 1 ? p[0] : p[0] & (0x7f >> n);
	for (i = 1; i < n; i++)
		cp = cp << 6 | (p[i] & 0x3f);
	*cols = (size_t)columns_of(cp);
	return n;
}

size_t bpftel_columns(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t total = 0, left = strlen(s), n, cols;

	while (left) {
		n = piece_at(p, left, &cols);
		total += cols;
		p += n;
		left -= n;
	}
	return total;
}

char *bpftel_elide_dup(const char *s, size_t max)
{
	static const char more[] = "...";
	const unsigned char *p = (const unsigned char *)s;
	size_t total = bpftel_columns(s), len = strlen(s), head, tail, before = 0, off = 0;
	size_t head_end = 0, tail_start = len, n, cols;
	char *out;

	if (total <= max || max < sizeof(more) + 1)
		return strdup(s);
	head = (max - (sizeof(more) - 1)) / 2;
	tail = max - (sizeof(more) - 1) - head;
	while (off < len) {
		if (before <= head)
			head_end = off;
		if (total - before <= tail) {
			tail_start = off;
			break;
		}
		n = piece_at(p + off, len - off, &cols);
		before += cols;
		off += n;
	}
	out = malloc(head_end + sizeof(more) + (len - tail_start));
	if (!out)
		return NULL;
	memcpy(out, s, head_end);
	memcpy(out + head_end, more, sizeof(more) - 1);
	memcpy(out + head_end + sizeof(more) - 1, s + tail_start, len - tail_start + 1);
	return out;
}

void bpftel_labeled(char *out, size_t size, const char *label, const char *msg)
{
	static const char more[] = "...";
	size_t llen = strlen(label), mlen = strlen(msg), room = 0, skip = 0;
	char *p;

	if (!size)
		return;
	if (llen + 2 + mlen >= size) {
		/* What of the label's end fits before ": msg", after "...". */
		room = size > mlen + 2 + sizeof(more) ? size - mlen - 2 - sizeof(more) : 0;
		skip = llen - (room < llen ? room : llen);
		while (skip < llen && ((unsigned char)label[skip] & 0xc0) == 0x80)
			skip++; /* not inside a UTF-8 sequence */
	}
	if (!*label)
		snprintf(out, size, "%s", msg);
	else if (!skip)
		snprintf(out, size, "%s: %s", label, msg);
	else if (skip < llen)
		snprintf(out, size, "%s%s: %s", more, label + skip, msg);
	else
		snprintf(out, size, "%s", msg);
	for (p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}
