// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * user/manager/goexe.c, gopclntab.c, goret.c: Go executables, on a real Go program the
 * build made with Debian's golang-go (tests/go/tlsapp, plain and -ldflags=-s -w), on
 * copies of it with one field broken, and on crafted function tables and code.
 *
 * Usage: test_unit_goexe PLAIN STRIPPED GOVERSION
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "user/manager/elfsym.h"
#include "user/manager/goexe.h"

static const char *plain, *stripped, *goversion, *pie;

#define WRITE "crypto/tls.(*Conn).Write"
#define READ  "crypto/tls.(*Conn).Read"

static int inspect(const char *path, struct bpftel_go_exe *exe, struct bpftel_go_func *f, size_t n,
		   char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int ret;

	assert_true(fd >= 0);
	ret = bpftel_go_inspect_fd(fd, path, exe, f, n, err, errlen);
	close(fd);
	return ret;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *b;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	b = malloc(st.st_size);
	assert_non_null(b);
	assert_int_equal(pread(fd, b, st.st_size, 0), st.st_size);
	close(fd);
	*len = st.st_size;
	return b;
}

/* RET mnemonics objdump (binutils, another decoder) sees in [start, stop). */
static int objdump_rets(const char *path, uint64_t start, uint64_t stop)
{
	char cmd[512], line[512];
	int n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd),
		 "objdump -d --no-show-raw-insn --start-address=%#llx --stop-address=%#llx '%s'",
		 (unsigned long long)start, (unsigned long long)stop, path);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		char *tab = strchr(line, '\t');

		if (tab && (!strcmp(tab, "\tret\n") || !strncmp(tab, "\tret ", 5)))
			n++;
	}
	assert_int_equal(pclose(p), 0);
	return n;
}

static void check_func(const char *path, const struct bpftel_go_func *f, const uint8_t *file)
{
	size_t i;

	assert_true(f->offset > 0);
	assert_true(f->nrets >= 1);
	for (i = 0; i < f->nrets; i++) {
		assert_true(f->rets[i] > f->offset &&
			    f->rets[i] < f->offset + (long)(f->end - f->addr));
		assert_int_equal(file[f->rets[i]], 0xc3);
	}
	assert_int_equal(objdump_rets(path, f->addr, f->end), (int)f->nrets);
	/* On the stack check's JBE (0f 86 rel32 or 76 rel8), after its compare with
	 * 0x10(%r14) (4d/49 3b 66 10). */
	assert_true(f->check > f->offset && f->check < f->offset + 24);
	assert_true((file[f->check] == 0x0f && file[f->check + 1] == 0x86) ||
		    file[f->check] == 0x76);
	assert_true(file[f->check - 4] == 0x4d || file[f->check - 4] == 0x49);
	assert_memory_equal(file + f->check - 3, "\x3b\x66\x10", 3);
}

static void test_plain(void **state)
{
	struct bpftel_go_func f[] = {{.name = WRITE}, {.name = READ}, {.name = "no.such.Func"}};
	struct bpftel_go_exe exe;
	char err[256] = "";
	uint8_t *file;
	size_t len;

	(void)state;
	assert_int_equal(inspect(plain, &exe, f, 3, err, sizeof(err)), 0);
	assert_string_equal(exe.version, goversion);
	assert_int_equal(exe.major, 1);
	assert_true(exe.minor >= 17);
	assert_true(exe.has_symtab);
	/* The function table agrees with the ELF symbol table. */
	assert_int_equal(f[0].offset, bpftel_elf_sym_offset(plain, WRITE, err, sizeof(err)));
	assert_int_equal(f[1].offset, bpftel_elf_sym_offset(plain, READ, err, sizeof(err)));
	assert_int_equal(f[2].offset, -ENOENT);
	assert_int_equal(f[2].nrets, 0);
	file = slurp(plain, &len);
	check_func(plain, &f[0], file);
	check_func(plain, &f[1], file);
	free(file);
}

static void test_stripped(void **state)
{
	struct bpftel_go_func p[] = {{.name = WRITE}, {.name = READ}};
	struct bpftel_go_func s[] = {{.name = WRITE}, {.name = READ}};
	struct bpftel_go_exe pe, se;
	char err[256] = "";
	size_t i, j;

	(void)state;
	assert_int_equal(bpftel_elf_sym_offset(stripped, WRITE, err, sizeof(err)), -ENOENT);
	assert_int_equal(inspect(plain, &pe, p, 2, err, sizeof(err)), 0);
	assert_int_equal(inspect(stripped, &se, s, 2, err, sizeof(err)), 0);
	assert_false(se.has_symtab);
	assert_string_equal(se.version, goversion);
	/* -s -w drops symbols and DWARF, not code: the same places. */
	for (i = 0; i < 2; i++) {
		assert_int_equal(s[i].offset, p[i].offset);
		assert_int_equal(s[i].check, p[i].check);
		assert_int_equal(s[i].nrets, p[i].nrets);
		for (j = 0; j < s[i].nrets; j++)
			assert_int_equal(s[i].rets[j], p[i].rets[j]);
	}
}

/* -buildmode=pie, as distributions build Go programs: the table is in
 * .data.rel.ro.gopclntab, and its addresses are the link's, as in the plain build. */
static void test_pie(void **state)
{
	struct bpftel_go_func f[] = {{.name = WRITE}, {.name = READ}};
	struct bpftel_go_exe exe;
	char err[256] = "";
	uint8_t *file;
	size_t len;

	(void)state;
	assert_int_equal(inspect(pie, &exe, f, 2, err, sizeof(err)), 0);
	assert_string_equal(exe.version, goversion);
	assert_int_equal(f[0].offset, bpftel_elf_sym_offset(pie, WRITE, err, sizeof(err)));
	assert_int_equal(f[1].offset, bpftel_elf_sym_offset(pie, READ, err, sizeof(err)));
	file = slurp(pie, &len);
	check_func(pie, &f[0], file);
	check_func(pie, &f[1], file);
	free(file);
}

static void test_not_go(void **state)
{
	struct bpftel_go_func f[] = {{.name = WRITE}};
	struct bpftel_go_exe exe;
	char err[256] = "";

	(void)state;
	assert_int_equal(inspect("/proc/self/exe", &exe, f, 1, err, sizeof(err)), -ENOEXEC);
	assert_non_null(strstr(err, "no .go.buildinfo"));
}

/* The n bytes at b (freed) written to a new file, grown sparse to n + grow bytes: its
 * path, until the next call. */
static char *written(uint8_t *b, size_t n, size_t grow)
{
	static char path[64];
	int fd;

	strcpy(path, "/tmp/bpftel-goexe-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, b, n), (ssize_t)n);
	if (grow)
		assert_int_equal(ftruncate(fd, n + grow), 0);
	close(fd);
	free(b);
	return path;
}

/* A copy of the plain binary with len bytes at the first match of what replaced. */
static char *patched(const void *what, size_t wlen, size_t at, const void *with, size_t len)
{
	uint8_t *b, *hit;
	size_t n;

	b = slurp(plain, &n);
	hit = memmem(b, n, what, wlen);
	assert_non_null(hit);
	memcpy(hit + at, with, len);
	return written(b, n, 0);
}

/* The section header called name in the plain binary's copy b (ELF64). */
static uint8_t *section_named(uint8_t *b, size_t n, const char *name)
{
	uint64_t shoff, stroff;
	uint16_t entsize, num, ndx, i;
	uint32_t nm;

	memcpy(&shoff, b + 0x28, 8); /* e_shoff, e_shentsize, e_shnum, e_shstrndx */
	memcpy(&entsize, b + 0x3a, 2);
	memcpy(&num, b + 0x3c, 2);
	memcpy(&ndx, b + 0x3e, 2);
	assert_true(shoff + (uint64_t)num * entsize <= n && ndx < num);
	memcpy(&stroff, b + shoff + (uint64_t)ndx * entsize + 0x18, 8);
	for (i = 0; i < num; i++) {
		memcpy(&nm, b + shoff + (uint64_t)i * entsize, 4); /* sh_name */
		if (stroff + nm + strlen(name) < n && !strcmp((char *)b + stroff + nm, name))
			return b + shoff + (uint64_t)i * entsize;
	}
	fail_msg("no section %s", name);
	return NULL;
}

/* A copy of the plain binary whose section called name says it holds size bytes. */
static char *section_resized(const char *name, uint64_t size)
{
	size_t n;
	uint8_t *b = slurp(plain, &n);

	memcpy(section_named(b, n, name) + 0x20, &size, 8); /* sh_size */
	return written(b, n, 0);
}

/* A copy of the plain binary whose executable segment (the first PT_LOAD with PF_X)
 * says it starts at file offset off. */
static char *text_segment_at(uint64_t off)
{
	uint64_t phoff;
	uint16_t entsize, num, i;
	uint32_t type, flags;
	size_t n;
	uint8_t *b = slurp(plain, &n), *ph;

	memcpy(&phoff, b + 0x20, 8); /* e_phoff, e_phentsize, e_phnum */
	memcpy(&entsize, b + 0x36, 2);
	memcpy(&num, b + 0x38, 2);
	for (i = 0; i < num; i++) {
		ph = b + phoff + (uint64_t)i * entsize;
		memcpy(&type, ph, 4);
		memcpy(&flags, ph + 4, 4);
		if (type == 1 /* PT_LOAD */ && (flags & 1 /* PF_X */)) {
			memcpy(ph + 8, &off, 8); /* p_offset */
			return written(b, n, 0);
		}
	}
	fail_msg("no executable segment");
	return NULL;
}

/* A copy of the plain binary grown sparse by 32 MiB, one section made to reach its end:
 * the section names' table (type 0), or the first section of type. */
static char *grown_section(uint32_t type)
{
	uint64_t shoff, sh_off, size;
	uint16_t entsize, num, ndx, i;
	uint32_t t;
	uint8_t *b, *sh = NULL;
	size_t n;

	b = slurp(plain, &n);
	memcpy(&shoff, b + 0x28, 8); /* ELF64: e_shoff, e_shentsize, e_shnum, e_shstrndx */
	memcpy(&entsize, b + 0x3a, 2);
	memcpy(&num, b + 0x3c, 2);
	memcpy(&ndx, b + 0x3e, 2);
	assert_true(shoff + (uint64_t)num * entsize <= n);
	for (i = 0; i < num && !sh; i++) {
		memcpy(&t, b + shoff + (uint64_t)i * entsize + 4, 4); /* sh_type */
		if (type ? t == type : i == ndx)
			sh = b + shoff + (uint64_t)i * entsize;
	}
	assert_non_null(sh);
	memcpy(&sh_off, sh + 0x18, 8); /* sh_offset, then sh_size */
	size = n + (32u << 20) - sh_off;
	memcpy(sh + 0x20, &size, 8);
	return written(b, n, 32u << 20);
}

/* The section names' table (e_shstrndx) claims 32 MiB: refused before libelf reads it
 * (elf_strptr reads a table whole). */
static void test_huge_section_names(void **state)
{
	struct bpftel_go_func f[] = {{.name = WRITE}};
	struct bpftel_go_exe exe;
	char err[256] = "", *path;

	(void)state;
	path = grown_section(0);
	assert_int_equal(inspect(path, &exe, f, 1, err, sizeof(err)), -E2BIG);
	assert_non_null(strstr(err, "section names too large"));
	unlink(path);
}

/* A .symtab over the symbol tables' cap (16 MiB) does not matter to a Go program's
 * inspection, which never reads it: the functions come from .gopclntab. */
static void test_huge_symtab_not_read(void **state)
{
	struct bpftel_go_func f[] = {{.name = WRITE}, {.name = READ}};
	struct bpftel_go_exe exe;
	char err[256] = "", *path;

	(void)state;
	path = grown_section(2 /* SHT_SYMTAB */);
	assert_int_equal(inspect(path, &exe, f, 2, err, sizeof(err)), 0);
	assert_true(exe.has_symtab);
	assert_true(f[0].offset > 0 && f[1].offset > 0);
	unlink(path);
}

static const char bi_magic[] = "\xff Go buildinf:";

static void test_old_version(void **state)
{
	struct bpftel_go_func f[] = {{.name = WRITE}};
	struct bpftel_go_exe exe;
	char err[256] = "";
	char *path;

	(void)state;
	/* The inline version: a length byte at 32, then "go1.NN...". */
	path = patched(bi_magic, 14, 33, "go1.16", 6);
	assert_int_equal(inspect(path, &exe, f, 1, err, sizeof(err)), -ENOTSUP);
	assert_non_null(strstr(err, "before 1.17"));
	assert_int_equal(strncmp(exe.version, "go1.16", 6), 0);
	unlink(path);
}

/* Its buildinfo claims a Go whose pclntab layout is not the one it holds (a 1.19
 * build claiming 1.22, or 1.16): refused for that, not probed by the wrong version's
 * ABI. */
static void test_version_layout_mismatch(void **state)
{
	struct bpftel_go_func f[] = {{.name = WRITE}, {.name = READ}};
	struct bpftel_go_exe exe;
	char err[256] = "";
	char *path;

	(void)state;
	assert_int_equal(inspect(plain, &exe, f, 2, err, sizeof(err)), 0);
	assert_int_equal(exe.pclntab_magic, exe.minor >= 20 ? 0xfffffff1u : 0xfffffff0u);
	path = patched(bi_magic, 14, 33, exe.minor >= 20 ? "go1.18" : "go1.22", 6);
	assert_int_equal(inspect(path, &exe, f, 2, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "pclntab layout"));
	unlink(path);
}

/* The agent's refusal buffer is 128 bytes: a binary at a path longer than that keeps
 * its reason (the path's start gives way), where "path: reason" kept only the path. */
static void test_long_path_keeps_reason(void **state)
{
	struct bpftel_go_func f[] = {{.name = WRITE}};
	char err[128] = "", label[200];
	struct bpftel_go_exe exe;
	char *path;
	int fd;

	(void)state;
	path = patched(bi_magic, 14, 33, "go1.16", 6);
	memset(label, 'x', sizeof(label));
	strcpy(label + sizeof(label) - 8, "/server");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(bpftel_go_inspect_fd(fd, label, &exe, f, 1, err, sizeof(err)), -ENOTSUP);
	close(fd);
	assert_non_null(strstr(err, "/server: "));
	assert_non_null(strstr(err, "before 1.17"));
	unlink(path);
}

static void test_bad_buildinfo(void **state)
{
	struct bpftel_go_func f[] = {{.name = WRITE}};
	struct bpftel_go_exe exe;
	char err[256] = "";
	uint8_t big = 0x7f;
	char *path;

	(void)state;
	path = patched(bi_magic, 14, 1, "X", 1);
	assert_int_equal(inspect(path, &exe, f, 1, err, sizeof(err)), -ENOEXEC);
	unlink(path);
	/* A version length past what is read. */
	path = patched(bi_magic, 14, 32, &big, 1);
	assert_int_equal(inspect(path, &exe, f, 1, err, sizeof(err)), -EINVAL);
	unlink(path);
	/* A 32-bit pointer size. */
	big = 4;
	path = patched(bi_magic, 14, 14, &big, 1);
	assert_int_equal(inspect(path, &exe, f, 1, err, sizeof(err)), -ENOTSUP);
	unlink(path);
	/* A version length whose varint never ends (10 bytes with the high bit), a byte,
	 * then a version: malformed, not "go1.22.0" read one byte on. */
	path = patched(bi_magic, 14, 32,
		       "\x88\x80\x80\x80\x80\x80\x80\x80\x80\x80Jgo1.22.0", 19);
	assert_int_equal(inspect(path, &exe, f, 1, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "version length without its end"));
	unlink(path);
	/* A section shorter than its 32-byte header: refused, with its reason. */
	path = section_resized(".go.buildinfo", 16);
	err[0] = '\0';
	assert_int_equal(inspect(path, &exe, f, 1, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ".go.buildinfo: 16 bytes"));
	unlink(path);
}

/* The code's segment claims an offset that, added to a function's place in it, wraps
 * past 2^64 to bytes 4 KiB before the code: refused, no RET taken from them. */
static void test_segment_offset_wraps(void **state)
{
	struct bpftel_go_func f[] = {{.name = WRITE}};
	struct bpftel_go_exe exe;
	char err[256] = "", *path;

	(void)state;
	path = text_segment_at(0xfffffffffffff000ull);
	assert_int_equal(inspect(path, &exe, f, 1, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "lies outside the file"));
	unlink(path);
}

/* The 1.18-1.19 (f0) or 1.20+ (f1) pclntab header of x86-64. */
static const uint8_t pcln_118[] = {0xf0, 0xff, 0xff, 0xff, 0, 0, 1, 8};
static const uint8_t pcln_120[] = {0xf1, 0xff, 0xff, 0xff, 0, 0, 1, 8};

static void test_bad_pclntab(void **state)
{
	const uint8_t *hdr = pcln_118;
	struct bpftel_go_func f[] = {{.name = WRITE}};
	uint8_t huge[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f};
	struct bpftel_go_exe exe;
	char err[256] = "";
	size_t n;
	uint8_t *b = slurp(plain, &n);
	char *path;

	(void)state;
	if (!memmem(b, n, hdr, 8))
		hdr = pcln_120;
	free(b);
	path = patched(hdr, 8, 0, "\x01\x02\x03\x04", 4);
	assert_int_equal(inspect(path, &exe, f, 1, err, sizeof(err)), -ENOTSUP);
	assert_non_null(strstr(err, "magic 0x4030201"));
	unlink(path);
	path = patched(hdr, 8, 8, huge, 8); /* nfunc */
	assert_int_equal(inspect(path, &exe, f, 1, err, sizeof(err)), -EINVAL);
	unlink(path);
}

/* A crafted function table: header, name table, function table, _func records. */
struct craft {
	uint8_t b[512];
	size_t len;
};

static void put(uint8_t *p, uint64_t v, unsigned int n)
{
	while (n--) {
		*p++ = (uint8_t)v;
		v >>= 8;
	}
}

/* Functions "a.F" at 0x1000, "b.G" at 0x1040, end 0x1100; rel: the 1.18+ layout with
 * textStart 0x400000, else 1.16's. */
static void craft(struct craft *c, bool rel)
{
	unsigned int fw = rel ? 4 : 8, words = rel ? 3 : 2;
	uint64_t names = 128, pcln = 160, text = rel ? 0x400000 : 0;
	uint64_t ent[3] = {0x1000, 0x1040, 0x1100};
	int i;

	memset(c, 0, sizeof(*c));
	put(c->b, rel ? 0xfffffff0 : 0xfffffffa, 4);
	c->b[6] = 1;
	c->b[7] = 8;
	put(c->b + 8, 2, 8); /* nfunc */
	if (rel)
		put(c->b + 24, text, 8);
	put(c->b + 8 + words * 8, names, 8);
	put(c->b + 8 + (words + 4) * 8, pcln, 8);
	memcpy(c->b + names, "a.F\0b.G\0", 8);
	for (i = 0; i < 3; i++) {
		uint64_t rec = 3 * 2 * fw + i * (fw + 4); /* records after the table */

		put(c->b + pcln + i * 2 * fw, ent[i], fw);
		put(c->b + pcln + i * 2 * fw + fw, rec, fw);
		if (i < 2) {
			put(c->b + pcln + rec, ent[i], fw);
			put(c->b + pcln + rec + fw, i * 4, 4); /* name offset */
		}
	}
	c->len = pcln + 3 * 2 * fw + 2 * (fw + 4);
}

static void test_craft_layouts(void **state)
{
	struct bpftel_go_func f[] = {{.name = "b.G"}, {.name = "a.F"}, {.name = "c.H"}};
	struct craft c;
	uint32_t magic;
	char err[128];
	int rel;

	(void)state;
	for (rel = 0; rel < 2; rel++) {
		uint64_t text = rel ? 0x400000 : 0;

		craft(&c, rel);
		assert_int_equal(bpftel_go_pclntab_find(c.b, c.len, &magic, f, 3, err, sizeof(err)),
				 0);
		assert_int_equal(magic, rel ? 0xfffffff0 : 0xfffffffa);
		assert_int_equal(f[1].addr, text + 0x1000);
		assert_int_equal(f[1].end, text + 0x1040);
		assert_int_equal(f[0].addr, text + 0x1040);
		assert_int_equal(f[0].end, text + 0x1100);
		assert_int_equal(f[2].addr, 0);
	}
}

static void test_craft_hostile(void **state)
{
	struct bpftel_go_func f[] = {{.name = "a.F"}, {.name = "b.G"}};
	struct craft c;
	uint32_t magic;
	char err[128];
	size_t cut;

	(void)state;
	/* Cut anywhere: an error or fewer functions, never a read outside. */
	craft(&c, true);
	for (cut = 0; cut < c.len; cut++) {
		int ret = bpftel_go_pclntab_find(c.b, cut, &magic, f, 2, err, sizeof(err));

		assert_true(ret == 0 || ret == -EINVAL);
		if (cut < 8)
			assert_int_equal(ret, -EINVAL);
	}
	/* A name offset outside the table: that function is not found. */
	craft(&c, true);
	put(c.b + 160 + 24 + 4, 100000, 4);
	assert_int_equal(bpftel_go_pclntab_find(c.b, c.len, &magic, f, 2, err, sizeof(err)), 0);
	assert_int_equal(f[0].addr, 0);
	assert_int_equal(f[1].addr, 0x401040);
	/* A name that does not end inside the table. */
	craft(&c, true);
	memset(c.b + 128, 'x', c.len - 128);
	put(c.b + 8 + 5 * 8, c.len - 4, 8); /* names at the last 4 bytes */
	assert_int_equal(bpftel_go_pclntab_find(c.b, c.len, &magic, f, 2, err, sizeof(err)), 0);
	assert_int_equal(f[0].addr + f[1].addr, 0);
	/* A function that ends before it begins. */
	craft(&c, true);
	put(c.b + 160 + 8, 0x0f00, 4);
	assert_int_equal(bpftel_go_pclntab_find(c.b, c.len, &magic, f, 2, err, sizeof(err)),
			 -EINVAL);
	/* A text start that makes a function wrap past the end of the address space
	 * (found by fuzz_goexe). */
	craft(&c, true);
	put(c.b + 24, 0xffffffffffffff00ull, 8);
	assert_int_equal(bpftel_go_pclntab_find(c.b, c.len, &magic, f, 2, err, sizeof(err)),
			 -EINVAL);
	/* Pointer size 3, a pad byte set. */
	craft(&c, true);
	c.b[7] = 3;
	assert_int_equal(bpftel_go_pclntab_find(c.b, c.len, &magic, f, 2, err, sizeof(err)),
			 -EINVAL);
	craft(&c, true);
	c.b[4] = 1;
	assert_int_equal(bpftel_go_pclntab_find(c.b, c.len, &magic, f, 2, err, sizeof(err)),
			 -EINVAL);
}

struct rcase {
	const char *name;
	uint8_t code[32];
	size_t len;
	int want; /* RETs, or -errno */
	long at;  /* the first RET's offset */
	long check; /* -1: none */
};

static const struct rcase rcases[] = {
	/* mov $0xc3,%eax; ret: the immediate's 0xc3 is no RET */
	{"imm", {0xb8, 0xc3, 0, 0, 0, 0xc3}, 6, 1, 5, -1},
	/* lea 0xc3(%rip),%rax; ret; int3 int3 */
	{"disp", {0x48, 0x8d, 0x05, 0xc3, 0, 0, 0, 0xc3, 0xcc, 0xcc}, 10, 1, 7, -1},
	/* ret $8 (c2 iw) */
	{"ret imm16", {0xc2, 0x08, 0x00}, 3, 1, 0, -1},
	/* mov %eax,%ebx (89 c3: ModRM 0xc3); no RET */
	{"modrm", {0x89, 0xc3, 0x90}, 3, 0, 0, -1},
	/* Go's big-frame stack check: lea -0x68(%rsp),%r12; cmp 0x10(%r14),%r12;
	 * jbe rel32; sub $8,%rsp; ret */
	{"stack check rel32",
	 {0x4c, 0x8d, 0x64, 0x24, 0x98, 0x4d, 0x3b, 0x66, 0x10, 0x0f,
	  0x86, 0x10, 0,    0,	  0,	0x48, 0x83, 0xec, 0x08, 0xc3},
	 20,
	 1,
	 19,
	 9},
	/* the small-frame one: cmp 0x10(%r14),%rsp; jbe rel8; ret */
	{"stack check rel8", {0x49, 0x3b, 0x66, 0x10, 0x76, 0x05, 0xc3}, 7, 1, 6, 4},
	/* the same compare on r15: not the goroutine's guard */
	{"not r14", {0x49, 0x3b, 0x67, 0x10, 0x76, 0x05, 0xc3}, 7, 1, 6, -1},
	/* the compare without its JBE */
	{"no jbe", {0x49, 0x3b, 0x66, 0x10, 0x75, 0x05, 0xc3}, 7, 1, 6, -1},
	/* an instruction cut at the end */
	{"cut", {0xc3, 0x48, 0x8d, 0x05, 0xc3}, 5, -EILSEQ, 0, -1},
	/* push %es: invalid in 64-bit mode */
	{"invalid", {0x90, 0x06, 0xc3}, 3, -EILSEQ, 0, -1},
};

static void test_rets(void **state)
{
	long out[BPFTEL_GO_MAX_RETS], check;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(rcases) / sizeof(rcases[0]); i++) {
		const struct rcase *r = &rcases[i];
		int n = bpftel_go_find_rets(r->code, r->len, 1000, out, BPFTEL_GO_MAX_RETS, &check);

		print_message("%s\n", r->name);
		assert_int_equal(n, r->want);
		if (n > 0)
			assert_int_equal(out[0], 1000 + r->at);
		if (n >= 0)
			assert_int_equal(check, r->check < 0 ? -1 : 1000 + r->check);
	}
}

static void test_rets_cap(void **state)
{
	uint8_t code[BPFTEL_GO_MAX_RETS + 1];
	long out[BPFTEL_GO_MAX_RETS], check;

	(void)state;
	memset(code, 0xc3, sizeof(code));
	assert_int_equal(
		bpftel_go_find_rets(code, BPFTEL_GO_MAX_RETS, 0, out, BPFTEL_GO_MAX_RETS, &check),
		BPFTEL_GO_MAX_RETS);
	assert_int_equal(out[BPFTEL_GO_MAX_RETS - 1], BPFTEL_GO_MAX_RETS - 1);
	assert_int_equal(bpftel_go_find_rets(code, sizeof(code), 0, out, BPFTEL_GO_MAX_RETS, &check),
			 -E2BIG);
}

static void test_version_parse(void **state)
{
	unsigned int ma, mi;

	(void)state;
	assert_true(bpftel_go_version_parse("go1.19.8", &ma, &mi));
	assert_int_equal(ma * 100 + mi, 119);
	assert_true(bpftel_go_version_parse("go1.17", &ma, &mi));
	assert_true(bpftel_go_version_parse("go1.21rc2", &ma, &mi));
	assert_int_equal(mi, 21);
	assert_true(bpftel_go_version_parse("devel go1.23-abcdef", &ma, &mi));
	assert_int_equal(ma * 100 + mi, 123);
	assert_true(bpftel_go_version_parse("go1.21.0 X:boringcrypto", &ma, &mi));
	/* Stack arguments: an old source build, and the register ABI turned off. */
	assert_false(bpftel_go_version_parse("devel +b7a1ed5 Tue Feb 16 2021", &ma, &mi));
	assert_false(bpftel_go_version_parse("go1.17.13 X:noregabi", &ma, &mi));
	assert_false(bpftel_go_version_parse("go1.17.13 X:fieldtrack,noregabiargs", &ma, &mi));
	assert_false(bpftel_go_version_parse("go1.16.15", &ma, &mi));
	assert_false(bpftel_go_version_parse("go1", &ma, &mi));
	assert_false(bpftel_go_version_parse("gox.1", &ma, &mi));
	assert_false(bpftel_go_version_parse("", &ma, &mi));
	assert_false(bpftel_go_version_parse("go99999999999999999999.1", &ma, &mi));
	/* strtoul's spaces and signs are no version. */
	assert_false(bpftel_go_version_parse("go1.-18446744073709551599", &ma, &mi));
	assert_false(bpftel_go_version_parse("go 1.17", &ma, &mi));
	assert_false(bpftel_go_version_parse("go1. 17", &ma, &mi));
	assert_false(bpftel_go_version_parse("go+1.17", &ma, &mi));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain),	      cmocka_unit_test(test_stripped),
		cmocka_unit_test(test_pie),
		cmocka_unit_test(test_not_go),	      cmocka_unit_test(test_old_version),
		cmocka_unit_test(test_long_path_keeps_reason),
		cmocka_unit_test(test_version_layout_mismatch),
		cmocka_unit_test(test_bad_buildinfo), cmocka_unit_test(test_bad_pclntab),
		cmocka_unit_test(test_craft_layouts), cmocka_unit_test(test_craft_hostile),
		cmocka_unit_test(test_rets),	      cmocka_unit_test(test_rets_cap),
		cmocka_unit_test(test_version_parse), cmocka_unit_test(test_huge_section_names),
		cmocka_unit_test(test_huge_symtab_not_read),
		cmocka_unit_test(test_segment_offset_wraps),
	};

	if (argc != 5) {
		fprintf(stderr, "usage: %s PLAIN STRIPPED GOVERSION PIE\n", argv[0]);
		return 2;
	}
	plain = argv[1];
	stripped = argv[2];
	goversion = argv[3];
	pie = argv[4];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
