// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Go's function table (.gopclntab): function name to entry address, for the layouts
 * of Go 1.16-1.17, 1.18-1.19 and 1.20+ (src/runtime/symtab.go, src/debug/gosym in the
 * Go tree describe them). All three start with
 *
 *	u32 magic; u8 pad[2]; u8 minLC; u8 ptrSize; then ptrSize-wide words:
 *	nfunc, nfiles, [textStart: 1.18+], funcnameOffset, cuOffset, filetabOffset,
 *	pctabOffset, pclnOffset
 *
 * and the function table at pclnOffset: nfunc + 1 (entry, funcoff) pairs sorted by
 * entry, the last one the end of the text. 1.18+ stores entry and funcoff as u32, the
 * entry relative to textStart; 1.16-1.17 as ptrSize words, the entry absolute. A
 * function's _func record sits at pclnOffset + funcoff; its name offset (into the name
 * table at funcnameOffset) follows its entry field. A function ends where the next
 * entry begins (it includes the padding after it, INT3 on x86-64).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "user/manager/goexe.h"

#define MAGIC_116 0xfffffffaU
#define MAGIC_118 0xfffffff0U
#define MAGIC_120 0xfffffff1U

/* A name longer than this is no function we look for. */
#define NAME_MAX_LEN 256

struct tab {
	const uint8_t *p;
	size_t len;
	unsigned int ptr; /* 4 or 8 */
};

__attribute__((format(printf, 4, 5))) static int fail(char *err, size_t errlen, int ret,
						      const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return ret;
}

/* The n-byte value at off, if inside the table. */
static bool get(const struct tab *t, uint64_t off, unsigned int n, uint64_t *v)
{
	if (off > t->len || t->len - off < n)
		return false;
	*v = bpftel_go_le(t->p + off, n); /* x86-64 only: goexe.c checks */
	return true;
}

/* The NUL-terminated name at off, if it ends inside the table within NAME_MAX_LEN. */
static const char *name_at(const struct tab *t, uint64_t off)
{
	size_t max;

	if (off >= t->len)
		return NULL;
	max = t->len - off < NAME_MAX_LEN ? t->len - off : NAME_MAX_LEN;
	return memchr(t->p + off, '\0', max) ? (const char *)t->p + off : NULL;
}

int bpftel_go_pclntab_find(const uint8_t *p, size_t len, uint32_t *magic,
			   struct bpftel_go_func *funcs, size_t n, char *err, size_t errlen)
{
	struct tab t = {.p = p, .len = len};
	uint64_t nfunc, text = 0, nameoff, pcln, w;
	unsigned int words, fw; /* header words before funcnameOffset; functab field width */
	bool rel;
	size_t i, j;

	for (j = 0; j < n; j++)
		funcs[j].addr = funcs[j].end = 0;
	if (len < 8)
		return fail(err, errlen, -EINVAL, "pclntab: %zu bytes, no header", len);
	*magic = (uint32_t)bpftel_go_le(p, 4);
	if (*magic != MAGIC_116 && *magic != MAGIC_118 && *magic != MAGIC_120)
		return fail(err, errlen, -ENOTSUP, "pclntab: unknown layout (magic %#x)", *magic);
	t.ptr = p[7];
	if (p[4] || p[5] || (t.ptr != 4 && t.ptr != 8))
		return fail(err, errlen, -EINVAL, "pclntab: bad header (pointer size %u)", t.ptr);
	rel = *magic != MAGIC_116;
	words = rel ? 3 : 2; /* nfunc, nfiles[, textStart] */
	fw = rel ? 4 : t.ptr;
	if (!get(&t, 8, t.ptr, &nfunc) || (rel && !get(&t, 8 + 2 * t.ptr, t.ptr, &text)) ||
	    !get(&t, 8 + words * t.ptr, t.ptr, &nameoff) ||
	    !get(&t, 8 + (words + 4) * t.ptr, t.ptr, &pcln))
		return fail(err, errlen, -EINVAL, "pclntab: header cut short (%zu bytes)", len);
	/* The function table: nfunc + 1 pairs, inside the section. */
	if (pcln > len || nfunc >= (len - pcln) / (2 * fw))
		return fail(err, errlen, -EINVAL, "pclntab: %llu functions do not fit in %zu bytes",
			    (unsigned long long)nfunc, len);
	for (i = 0; i < nfunc; i++) {
		uint64_t ent = 0, fo = 0, next = 0, name;
		const char *s;

		get(&t, pcln + i * 2 * fw, fw, &ent);
		get(&t, pcln + i * 2 * fw + fw, fw, &fo);
		get(&t, pcln + (i + 1) * 2 * fw, fw, &next);
		/* The _func record: entry field (fw bytes), then its i32 name offset. */
		if (!get(&t, pcln + fo, fw, &w) || !get(&t, pcln + fo + fw, 4, &name))
			continue; /* a record outside the table: not a function we can name */
		if ((int32_t)name < 0 || !(s = name_at(&t, nameoff + (uint32_t)name)))
			continue;
		for (j = 0; j < n; j++) {
			if (funcs[j].addr || strcmp(s, funcs[j].name))
				continue;
			if (next <= ent)
				return fail(err, errlen, -EINVAL,
					    "pclntab: %s ends before it begins", s);
			if (rel && next > UINT64_MAX - text)
				return fail(err, errlen, -EINVAL,
					    "pclntab: %s ends past the address space", s);
			funcs[j].addr = (rel ? text : 0) + ent;
			funcs[j].end = (rel ? text : 0) + next;
		}
	}
	return 0;
}
