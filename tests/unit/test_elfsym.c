// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ELF symbol resolver: offsets of the fixture library (argv[1], built with a version script)
 * and of the system's libssl.so.3 cross-checked against where the dynamic loader maps them
 * (dlsym/dlvsym + /proc/self/maps), and bad files that must fail cleanly without leaking.
 * Hostile files are the fixture with patched section headers, made huge by sparse
 * truncation: refused by the caps without the parse allocating (peak RSS of a child).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "user/manager/elfaddr.h"
#include "user/manager/elfsym.h"

#define LIBSSL "/lib/x86_64-linux-gnu/libssl.so.3"

static char fixture[PATH_MAX];
static char tmpdir[] = "/tmp/test_elfsym.XXXXXX";
/* Every file a test writes in tmpdir: teardown removes them, then tmpdir. */
static const char *const tmpnames[] = {"libssl.so.3",  "empty.so",	 "cut.so",
				       "patched.so",   "fifo",		 "crafted.so",
				       "fdfifo",       "long_names.so", "large_dynstr.so"};

static const char *tmp_path(const char *name)
{
	static char buf[PATH_MAX];

	snprintf(buf, sizeof(buf), "%s/%s", tmpdir, name);
	return buf;
}

static void *read_all(const char *path, size_t *len)
{
	struct stat st;
	char *buf;
	FILE *f = fopen(path, "rb");

	assert_non_null(f);
	assert_int_equal(fstat(fileno(f), &st), 0);
	buf = malloc(st.st_size);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, st.st_size, f), (size_t)st.st_size);
	fclose(f);
	*len = st.st_size;
	return buf;
}

static const char *write_tmp(const char *name, const void *data, size_t len)
{
	const char *path = tmp_path(name);
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	return path;
}

/* Expected file offset of a loaded address: addr - map start + map file offset. */
static long maps_offset(const void *addr, const char *lib)
{
	char real[PATH_MAX], line[PATH_MAX + 256];
	uintptr_t a = (uintptr_t)addr;
	long ret = -1;
	FILE *f;

	assert_non_null(addr);
	assert_non_null(realpath(lib, real));
	f = fopen("/proc/self/maps", "re");
	assert_non_null(f);
	while (ret < 0 && fgets(line, sizeof(line), f)) {
		unsigned long start, end, off;
		int pos = 0;

		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %n", &start, &end, &off, &pos) < 3 ||
		    !pos || a < start || a >= end)
			continue;
		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(line + pos, real))
			ret = (long)(a - start + off);
	}
	fclose(f);
	assert_true(ret >= 0);
	return ret;
}

static long off_of(const char *path, const char *name)
{
	return bpftel_elf_sym_offset(path, name, NULL, 0);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void test_fixture_plain(void **state)
{
	void *h = dlopen(fixture, RTLD_NOW | RTLD_LOCAL);
	char err[256];
	long off;

	(void)state;
	assert_non_null(h);
	off = bpftel_elf_sym_offset(fixture, "fixture_plain", err, sizeof(err));
	assert_int_equal(off, maps_offset(dlsym(h, "fixture_plain"), fixture));
	assert_string_equal(err, "");
	assert_int_equal(off_of(fixture, "fixture_other"),
			 maps_offset(dlsym(h, "fixture_other"), fixture));
	assert_int_equal(off_of(fixture, "fixture_plain@@VERS_1"), off);
	dlclose(h);
}

static void test_fixture_versioned_default(void **state)
{
	void *h = dlopen(fixture, RTLD_NOW | RTLD_LOCAL);
	long off;

	(void)state;
	assert_non_null(h);
	off = off_of(fixture, "fixture_versioned@@VERS_2");
	assert_int_equal(off, maps_offset(dlvsym(h, "fixture_versioned", "VERS_2"), fixture));
	assert_int_equal(off, maps_offset(dlsym(h, "fixture_versioned"), fixture));
	assert_int_equal(off_of(fixture, "fixture_versioned"), off);
	assert_int_equal(off_of(fixture, "fixture_versioned@VERS_2"), off);
	dlclose(h);
}

static void test_fixture_versioned_hidden(void **state)
{
	void *h = dlopen(fixture, RTLD_NOW | RTLD_LOCAL);
	char err[256];
	long off, ret;

	(void)state;
	assert_non_null(h);
	off = off_of(fixture, "fixture_versioned@VERS_1");
	assert_int_equal(off, maps_offset(dlvsym(h, "fixture_versioned", "VERS_1"), fixture));
	assert_int_not_equal(off, off_of(fixture, "fixture_versioned"));
	assert_int_equal(
		bpftel_elf_sym_offset(fixture, "fixture_versioned@@VERS_1", err, sizeof(err)),
		-ENOENT);
	assert_non_null(strstr(err, "not found"));
	assert_int_equal(off_of(fixture, "fixture_versioned@VERS_3"), -ENOENT);
	/* Local, so only in .symtab, which a stripped build would lack. */
	ret = off_of(fixture, "fixture_v1");
	assert_true(ret == off || ret == -ENOENT);
	dlclose(h);
}

static void test_libssl(void **state)
{
	void *h;
	long off;

	(void)state;
	if (access(LIBSSL, R_OK))
		skip();
	h = dlopen(LIBSSL, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(h);
	off = off_of(LIBSSL, "SSL_write");
	assert_true(off >= 0);
	assert_int_equal(off, maps_offset(dlsym(h, "SSL_write"), LIBSSL));
	assert_int_equal(off_of(LIBSSL, "SSL_write@@OPENSSL_3.0.0"), off);
	assert_int_equal(off_of(LIBSSL, "SSL_write@OPENSSL_3.0.0"), off);
	assert_int_equal(off_of(LIBSSL, "SSL_read_ex"),
			 maps_offset(dlsym(h, "SSL_read_ex"), LIBSSL));
	assert_int_equal(off_of(LIBSSL, "SSL_write@@OPENSSL_1_1_0"), -ENOENT);
	assert_int_equal(off_of(LIBSSL, "No_Such_Symbol"), -ENOENT);
	assert_int_equal(off_of(LIBSSL, "SSL_wri"), -ENOENT); /* prefix is not a match */
	dlclose(h);
}

static void test_libssl_batch(void **state)
{
	struct bpftel_elf_sym_req reqs[] = {
		{.name = "SSL_write"},
		{.name = "No_Such_Symbol"},
		{.name = "SSL_read_ex"},
	};

	(void)state;
	if (access(LIBSSL, R_OK))
		skip();
	assert_int_equal(bpftel_elf_resolve(LIBSSL, reqs, 3, NULL, 0), 0);
	assert_int_equal(reqs[0].offset, off_of(LIBSSL, "SSL_write"));
	assert_int_equal(reqs[1].offset, -ENOENT);
	assert_int_equal(reqs[2].offset, off_of(LIBSSL, "SSL_read_ex"));
	assert_true(reqs[0].offset >= 0 && reqs[2].offset >= 0);
	assert_int_not_equal(reqs[0].offset, reqs[2].offset);
	/* Both in the one executable segment, and no segment for what was not found. */
	assert_true(reqs[0].code_lo <= reqs[0].offset && reqs[0].offset < reqs[0].code_hi);
	assert_int_equal(reqs[2].code_lo, reqs[0].code_lo);
	assert_int_equal(reqs[2].code_hi, reqs[0].code_hi);
	assert_int_equal(reqs[1].code_lo, 0);
	assert_int_equal(reqs[1].code_hi, 0);
}

/* The fixture's program header of the executable PT_LOAD holding file offset off. */
static Elf64_Phdr *code_phdr(char *buf, long off)
{
	Elf64_Phdr *ph = (Elf64_Phdr *)(buf + ((Elf64_Ehdr *)buf)->e_phoff);
	size_t i;

	for (i = 0; i < ((Elf64_Ehdr *)buf)->e_phnum; i++, ph++) {
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && (long)ph->p_offset <= off &&
		    off < (long)(ph->p_offset + ph->p_filesz))
			return ph;
	}
	fail_msg("no executable PT_LOAD holds %#lx", off);
	return NULL;
}

/*
 * A symbol's executable segment (code_lo, code_hi: where a probe may move by a call's
 * displacement, codemove.h): the fixture's PF_X PT_LOAD as its program headers say;
 * none once that segment is not executable, or claims bytes past the file's end. The
 * offset is found the same in each.
 */
static void test_code_segment(void **state)
{
	struct bpftel_elf_sym_req req = {.name = "fixture_plain"};
	size_t len;
	char *buf = read_all(fixture, &len);
	long want = off_of(fixture, "fixture_plain");
	Elf64_Phdr *ph;

	(void)state;
	assert_true(want > 0);
	ph = code_phdr(buf, want);
	assert_int_equal(bpftel_elf_resolve(fixture, &req, 1, NULL, 0), 0);
	assert_int_equal(req.offset, want);
	assert_int_equal(req.code_lo, ph->p_offset);
	assert_int_equal(req.code_hi, ph->p_offset + ph->p_filesz);

	ph->p_flags &= ~PF_X;
	assert_int_equal(bpftel_elf_resolve(write_tmp("patched.so", buf, len), &req, 1, NULL, 0), 0);
	assert_int_equal(req.offset, want);
	assert_int_equal(req.code_lo, 0);
	assert_int_equal(req.code_hi, 0);

	ph->p_flags |= PF_X;
	ph->p_filesz = len - ph->p_offset + 1;
	assert_int_equal(bpftel_elf_resolve(write_tmp("patched.so", buf, len), &req, 1, NULL, 0), 0);
	assert_int_equal(req.offset, want);
	assert_int_equal(req.code_lo, 0);
	assert_int_equal(req.code_hi, 0);
	free(buf);
}

static void test_not_elf(void **state)
{
	static const char text[] = "This is not an ELF file, only text pretending to be one.\n";
	char err[256];

	(void)state;
	assert_int_equal(bpftel_elf_sym_offset(write_tmp("libssl.so.3", text, sizeof(text) - 1),
					       "SSL_write", err, sizeof(err)),
			 -ENOEXEC);
	assert_non_null(strstr(err, "not an ELF"));
	assert_null(strchr(err, '\n'));
	assert_int_equal(
		bpftel_elf_sym_offset(write_tmp("empty.so", "", 0), "SSL_write", err, sizeof(err)),
		-ENOEXEC);
	assert_non_null(strstr(err, "not an ELF"));
}

static void test_truncated(void **state)
{
	static const size_t cuts[] = {1, 16, 63, 64, 65, 1000, 4096};
	size_t len, i;
	char *buf = read_all(fixture, &len);
	char err[256];
	long ret;

	(void)state;
	for (i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		assert_true(cuts[i] < len);
		ret = bpftel_elf_sym_offset(write_tmp("cut.so", buf, cuts[i]), "fixture_plain", err,
					    sizeof(err));
		assert_true(ret == -ENOEXEC || ret == -ENOENT);
	}
	ret = bpftel_elf_sym_offset(write_tmp("cut.so", buf, len - 1), "fixture_plain", err,
				    sizeof(err));
	assert_int_equal(ret, -ENOEXEC);
	assert_non_null(strstr(err, "truncated"));
	free(buf);
}

static void test_bad_headers(void **state)
{
	size_t len;
	char *buf = read_all(fixture, &len);
	char err[256];

	(void)state;
	buf[16] = 1; /* e_type = ET_REL (little-endian x86-64) */
	buf[17] = 0;
	assert_int_equal(bpftel_elf_sym_offset(write_tmp("patched.so", buf, len), "fixture_plain",
					       err, sizeof(err)),
			 -ENOEXEC);
	assert_non_null(strstr(err, "ET_DYN"));
	free(buf);
}

/* Random byte damage to a copy of the fixture: any answer is fine, a crash or leak is not. */
static void test_corrupt_no_crash(void **state)
{
	struct bpftel_elf_sym_req reqs[] = {
		{.name = "fixture_plain"},
		{.name = "fixture_versioned@VERS_1"},
		{.name = "fixture_versioned"},
	};
	size_t len, i, k, pos;
	char *orig = read_all(fixture, &len);
	char *buf = malloc(len);
	unsigned int seed = 12345;
	int ret;

	(void)state;
	assert_non_null(buf);
	for (i = 0; i < 300; i++) {
		memcpy(buf, orig, len);
		for (k = 0; k < 1 + i % 16; k++) {
			seed = seed * 1103515245u + 12345u;
			/* Half the hits in the headers and tables at either end. */
			pos = (seed >> 8) % len;
			if (k % 2)
				pos = i % 2 ? pos % 4096 : len - 1 - pos % 2048;
			buf[pos] = (char)(seed >> 3);
		}
		ret = bpftel_elf_resolve(write_tmp("patched.so", buf, len), reqs, 3, NULL, 0);
		assert_true(ret == 0 || ret == -ENOEXEC || ret == -ENOMEM);
	}
	free(buf);
	free(orig);
}

static void test_bad_args(void **state)
{
	struct bpftel_elf_sym_req reqs[] = {{.name = "fixture_plain"}, {.name = NULL}};
	char longpath[5001], err[256];
	int fd;
	long ret;

	(void)state;
	assert_int_equal(bpftel_elf_sym_offset(tmpdir, "x", err, sizeof(err)), -EISDIR);
	assert_int_equal(bpftel_elf_sym_offset("/nonexistent/libfoo.so", "x", err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/libfoo.so"));
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	assert_int_equal(off_of(longpath, "x"), -ENAMETOOLONG);
	assert_int_equal(bpftel_elf_sym_offset(fixture, NULL, err, sizeof(err)), -EINVAL);
	assert_int_equal(off_of(NULL, "x"), -EINVAL);
	assert_int_equal(off_of(fixture, ""), -EINVAL);
	assert_int_equal(off_of(fixture, "@VERS_1"), -EINVAL);
	assert_int_equal(off_of(fixture, "fixture_versioned@"), -EINVAL);
	assert_int_equal(off_of(fixture, "fixture_versioned@@"), -EINVAL);
	assert_int_equal(bpftel_elf_resolve(fixture, reqs, 0, err, sizeof(err)), -EINVAL);
	assert_int_equal(bpftel_elf_resolve(fixture, NULL, 1, err, sizeof(err)), -EINVAL);
	assert_int_equal(bpftel_elf_resolve(fixture, reqs, 2, err, sizeof(err)), -EINVAL);
	assert_int_equal(reqs[0].offset, -EINVAL); /* whole-call failure reaches every request */
	assert_int_equal(bpftel_elf_resolve(fixture, reqs, 1, err, 0), 0);
	assert_true(reqs[0].offset >= 0);
	/* A FIFO must not block the open. */
	assert_int_equal(mkfifo(tmp_path("fifo"), 0600), 0);
	ret = off_of(tmp_path("fifo"), "x");
	assert_int_equal(ret, -ENOEXEC);
	/* An unreadable file, unless we are root. */
	fd = open(tmp_path("patched.so"), O_WRONLY | O_CREAT | O_TRUNC, 0);
	assert_true(fd >= 0);
	close(fd);
	if (geteuid())
		assert_int_equal(off_of(tmp_path("patched.so"), "x"), -EACCES);
}

static void test_no_fd_leak(void **state)
{
	struct bpftel_elf_sym_req reqs[] = {{.name = "fixture_plain"}, {.name = "nope"}};
	static const char text[] = "not ELF\n";
	const char *paths[5];
	size_t len;
	char *buf = read_all(fixture, &len);
	int before, i;

	(void)state;
	paths[0] = fixture;
	paths[1] = strdup(write_tmp("libssl.so.3", text, sizeof(text) - 1));
	paths[2] = strdup(write_tmp("cut.so", buf, 4096));
	paths[3] = tmpdir;
	paths[4] = "/nonexistent/libfoo.so";
	before = count_fds();
	for (i = 0; i < 200; i++) {
		if (i % 2)
			bpftel_elf_resolve(paths[i % 5], reqs, 2, NULL, 0);
		else
			off_of(paths[i % 5], "fixture_versioned@VERS_1");
	}
	assert_int_equal(count_fds(), before);
	free((void *)paths[1]);
	free((void *)paths[2]);
	free(buf);
}

/* Crafted files: the fixture (x86-64, so little-endian ELF64) with headers patched. */

/* Whole symbols: libelf refuses a symbol table that ends inside one, before reading it. */
#define SYMS_BYTES(bytes) ((bytes) / sizeof(Elf64_Sym) * sizeof(Elf64_Sym))

static Elf64_Ehdr *ehdr(char *buf)
{
	return (Elf64_Ehdr *)buf;
}

static Elf64_Shdr *shdr_at(char *buf, size_t ndx)
{
	return (Elf64_Shdr *)(buf + ehdr(buf)->e_shoff) + ndx;
}

static Elf64_Shdr *shdr_of(char *buf, uint32_t type)
{
	size_t i;

	for (i = 1; i < ehdr(buf)->e_shnum; i++)
		if (shdr_at(buf, i)->sh_type == type)
			return shdr_at(buf, i);
	fail_msg("fixture has no section of type %u", type);
	return NULL;
}

/* The patched bytes, then a hole up to size (sparse: costs no disk). */
static const char *write_sparse(const char *buf, size_t len, uint64_t size)
{
	const char *path = write_tmp("crafted.so", buf, len);

	if (size > len)
		assert_int_equal(truncate(path, (off_t)size), 0);
	return path;
}

/* Moves a table into the hole after the fixture's bytes: all zeros, size bytes. */
static uint64_t move_to_hole(char *buf, size_t len, uint32_t type, uint64_t at, uint64_t size)
{
	Elf64_Shdr *sh = shdr_of(buf, type);

	sh->sh_offset = len + at;
	sh->sh_size = size;
	return len + at + size;
}

struct child_result {
	long ret;
	long grew_kib; /* rise of the child's peak RSS (ru_maxrss) during the call */
};

/* Resolve in a forked child, so that its peak RSS measures this one call. */
static struct child_result resolve_in_child(const char *path, const char *name)
{
	struct child_result res = {0};
	struct rusage before, after;
	int pfd[2], status;
	pid_t pid;

	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		close(pfd[0]);
		getrusage(RUSAGE_SELF, &before);
		res.ret = off_of(path, name);
		getrusage(RUSAGE_SELF, &after);
		res.grew_kib = after.ru_maxrss - before.ru_maxrss;
		_exit(write(pfd[1], &res, sizeof(res)) == sizeof(res) ? 0 : 1);
	}
	close(pfd[1]);
	assert_int_equal(read(pfd[0], &res, sizeof(res)), sizeof(res));
	close(pfd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return res;
}

/* Huge claims in sparse files: refused by a cap, with nothing read or allocated. */
static void test_caps_no_allocation(void **state)
{
	static const struct {
		uint64_t file_size, dynsym_size;
		int want;
	} cases[] = {
		{4ULL << 30, SYMS_BYTES(3ULL << 30), -EFBIG},	  /* over the file cap */
		{900ULL << 20, SYMS_BYTES(800ULL << 20), -E2BIG}, /* table over its cap */
	};
	struct child_result res;
	size_t len, i;
	char *orig = read_all(fixture, &len);
	char *buf = malloc(len);

	(void)state;
	assert_non_null(buf);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(buf, orig, len);
		shdr_of(buf, SHT_DYNSYM)->sh_size = cases[i].dynsym_size;
		res = resolve_in_child(write_sparse(buf, len, cases[i].file_size), "fixture_plain");
		print_message("  %llu MiB file: %ld, peak RSS +%ld KiB\n",
			      (unsigned long long)(cases[i].file_size >> 20), res.ret,
			      res.grew_kib);
		assert_int_equal(res.ret, cases[i].want);
		assert_true(res.grew_kib < 64 * 1024);
	}
	free(buf);
	free(orig);
}

/* The fixture's dynamic symbol called name, or fail. */
static Elf64_Sym fixture_dynsym(char *buf, const char *name)
{
	Elf64_Shdr *ds = shdr_of(buf, SHT_DYNSYM), *str = shdr_at(buf, ds->sh_link);
	Elf64_Sym *sym = (Elf64_Sym *)(buf + ds->sh_offset);
	size_t i;

	for (i = 1; i < ds->sh_size / sizeof(*sym); i++)
		if (!strcmp(buf + str->sh_offset + sym[i].st_name, name))
			return sym[i];
	fail_msg("fixture has no dynamic symbol %s", name);
	return sym[0];
}

struct crafted_result {
	long offset;	       /* bpftel_elf_sym_offset() of fixture_plain */
	int named;	       /* bpftel_elf_symbolize_fd() at its offset */
	char name[BPFTEL_ELF_NAME_MAX];
};

/*
 * Tables as large as their caps that make per-symbol work expensive: BPFTEL_ELF_MAX_PHDRS
 * program headers (PT_NULLs, then the fixture's), a .dynsym of 16 MiB whose ~700,000
 * functions all sit at fixture_plain's address and all name the one string of a 16 MiB
 * .dynstr; .symtab the same. A scan of that name per symbol (to find its '@') was ~0.5
 * ms a symbol, ~6 minutes a table, on the thread that attaches uprobes; a walk of the
 * program headers per symbol was ~26 s per kernel name. Both resolvers run in a child
 * under a CPU limit of 10 s, ~100 times what they need here: finishing is what is
 * checked, not how fast.
 */
static void test_crafted_tables_bounded(void **state)
{
	const uint64_t table = BPFTEL_ELF_MAX_TABLE_BYTES;
	size_t len, nsym = table / sizeof(Elf64_Sym), i, total;
	char *orig = read_all(fixture, &len), *buf;
	struct bpftel_elf_addr_req req = {};
	struct crafted_result res = {};
	Elf64_Shdr *ds, *str;
	Elf64_Phdr *ph;
	Elf64_Sym plain, *sym;
	struct rlimit cpu = {10, 20}; /* SIGXCPU at 10 s of CPU */
	int pfd[2], status, fd;
	const char *path;
	long want = off_of(fixture, "fixture_plain");
	ssize_t got;
	pid_t pid;

	(void)state;
	total = len + BPFTEL_ELF_MAX_PHDRS * sizeof(*ph) + nsym * sizeof(*sym) + table;
	buf = calloc(1, total);
	assert_non_null(buf);
	memcpy(buf, orig, len);
	plain = fixture_dynsym(buf, "fixture_plain");
	ph = (Elf64_Phdr *)(buf + len); /* PT_NULLs (zeros), then the fixture's */
	memcpy(ph + BPFTEL_ELF_MAX_PHDRS - ehdr(buf)->e_phnum, buf + ehdr(buf)->e_phoff,
	       ehdr(buf)->e_phnum * sizeof(*ph));
	ehdr(buf)->e_phoff = len;
	ehdr(buf)->e_phnum = BPFTEL_ELF_MAX_PHDRS;
	ds = shdr_of(buf, SHT_DYNSYM);
	str = shdr_at(buf, ds->sh_link);
	ds->sh_offset = len + BPFTEL_ELF_MAX_PHDRS * sizeof(*ph);
	ds->sh_size = nsym * sizeof(*sym);
	sym = (Elf64_Sym *)(buf + ds->sh_offset);
	for (i = 1; i < nsym; i++)
		sym[i] = (Elf64_Sym){.st_name = 1, .st_info = plain.st_info,
				     .st_shndx = plain.st_shndx, .st_value = plain.st_value,
				     .st_size = 16};
	str->sh_offset = ds->sh_offset + ds->sh_size;
	str->sh_size = table;
	/* .symtab: the same symbols and names. */
	shdr_of(buf, SHT_SYMTAB)->sh_offset = ds->sh_offset;
	shdr_of(buf, SHT_SYMTAB)->sh_size = ds->sh_size;
	shdr_of(buf, SHT_SYMTAB)->sh_link = ds->sh_link;
	/* Index 0 holds the empty string, as in any string table; the name is the rest. */
	memset(buf + str->sh_offset + 1, 'a', table - 2);
	path = write_tmp("long_names.so", buf, total);
	free(buf);
	free(orig);

	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		close(pfd[0]);
		setrlimit(RLIMIT_CPU, &cpu);
		res.offset = off_of(path, "fixture_plain");
		req.offset = want;
		fd = open(path, O_RDONLY | O_CLOEXEC);
		res.named = bpftel_elf_symbolize_fd(fd, NULL, &req, 1, NULL, 0);
		close(fd);
		memcpy(res.name, req.name, sizeof(res.name));
		_exit(write(pfd[1], &res, sizeof(res)) == sizeof(res) ? 0 : 1);
	}
	close(pfd[1]);
	got = read(pfd[0], &res, sizeof(res));
	close(pfd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("the resolvers were killed by signal %d (%s: over 10 s of CPU)",
			 WTERMSIG(status), WTERMSIG(status) == SIGXCPU ? "SIGXCPU" : "not SIGXCPU");
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(got, sizeof(res));
	/* No table names fixture_plain now. */
	assert_int_equal(res.offset, -ENOENT);
	/* The first symbol at the offset names it, cut at the name's size. */
	assert_int_equal(res.named, 0);
	assert_int_equal(strlen(res.name), sizeof(req.name) - 1);
	assert_int_equal(strspn(res.name, "a"), sizeof(req.name) - 1);
}

/*
 * A string table over the cap of a table read whole (PyTorch's libtorch_cuda.so has 63
 * MiB of .symtab names): the resolver by name, which reads it whole, refuses the file;
 * the symbolizer, which reads only the chosen symbol's name, names the function.
 */
static void test_symbolize_large_string_table(void **state)
{
	const size_t table = BPFTEL_ELF_MAX_TABLE_BYTES + (4u << 20);
	size_t len, total;
	char *orig = read_all(fixture, &len), *buf;
	struct bpftel_elf_addr_req req = {.offset = off_of(fixture, "fixture_plain")};
	Elf64_Shdr *str;
	const char *path;
	char err[256];
	int fd;

	(void)state;
	total = len + table;
	buf = calloc(1, total);
	assert_non_null(buf);
	memcpy(buf, orig, len);
	str = shdr_at(buf, shdr_of(buf, SHT_DYNSYM)->sh_link);
	/* The same names at the same offsets, then zeros up to the new size. */
	memcpy(buf + len, orig + str->sh_offset, str->sh_size);
	str->sh_offset = len;
	str->sh_size = table;
	path = write_tmp("large_dynstr.so", buf, total);
	free(buf);
	free(orig);

	assert_int_equal(bpftel_elf_sym_offset(path, "fixture_plain", err, sizeof(err)), -E2BIG);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(bpftel_elf_symbolize_fd(fd, NULL, &req, 1, err, sizeof(err)), 0);
	close(fd);
	assert_string_equal(req.name, "fixture_plain");
}

static void patch_dynsym_past_end(char *buf, size_t len)
{
	shdr_of(buf, SHT_DYNSYM)->sh_size = len;
}

static void patch_dynstr_past_end(char *buf, size_t len)
{
	shdr_at(buf, shdr_of(buf, SHT_DYNSYM)->sh_link)->sh_offset = len;
}

static void patch_dynsym_entsize(char *buf, size_t len)
{
	(void)len;
	shdr_of(buf, SHT_DYNSYM)->sh_entsize = sizeof(Elf32_Sym);
}

static void patch_symtab_entsize(char *buf, size_t len)
{
	(void)len;
	shdr_of(buf, SHT_SYMTAB)->sh_entsize = 0;
}

static void patch_shnum(char *buf, size_t len)
{
	(void)len;
	ehdr(buf)->e_shnum = BPFTEL_ELF_MAX_SECTIONS + 1;
}

/* Extended numbering: e_shnum 0, the count in section 0's sh_size. */
static void patch_shnum_extended(char *buf, size_t len)
{
	(void)len;
	shdr_at(buf, 0)->sh_size = ehdr(buf)->e_shnum + BPFTEL_ELF_MAX_SECTIONS;
	ehdr(buf)->e_shnum = 0;
}

static void patch_phnum(char *buf, size_t len)
{
	(void)len;
	ehdr(buf)->e_phnum = BPFTEL_ELF_MAX_PHDRS + 1;
}

/* .symtab over the cap is refused even when .dynsym alone would answer. */
static void patch_symtab_over_cap(char *buf, size_t len)
{
	move_to_hole(buf, len, SHT_SYMTAB, 0,
		     SYMS_BYTES(BPFTEL_ELF_MAX_TABLE_BYTES) + sizeof(Elf64_Sym));
}

/* Malformed or over-cap headers; file_size 0 keeps the fixture's own size. */
static void test_bad_sections(void **state)
{
	static const uint64_t big_shdrs = 4ULL << 20, big_table = 32ULL << 20;
	static const struct {
		const char *what;
		void (*patch)(char *buf, size_t len);
		uint64_t file_size;
		int want;
		const char *msg;
	} cases[] = {
		{".dynsym past the end", patch_dynsym_past_end, 0, -ENOEXEC, "past the end"},
		{".dynstr past the end", patch_dynstr_past_end, 0, -ENOEXEC, "past the end"},
		{".dynsym entry size", patch_dynsym_entsize, 0, -ENOEXEC, "entry size"},
		{".symtab entry size", patch_symtab_entsize, 0, -ENOEXEC, "entry size"},
		{"e_shnum over the cap", patch_shnum, big_shdrs, -E2BIG, "sections"},
		{"extended e_shnum over the cap", patch_shnum_extended, big_shdrs, -E2BIG,
		 "sections"},
		{"e_phnum over the cap", patch_phnum, big_shdrs, -E2BIG, "program headers"},
		{".symtab over the table cap", patch_symtab_over_cap, big_table, -E2BIG, "cap"},
	};
	struct bpftel_elf_sym_req reqs[] = {{.name = "fixture_plain"}, {.name = "fixture_v1"}};
	size_t len, i;
	char *orig = read_all(fixture, &len);
	char *buf = malloc(len);
	char err[256];

	(void)state;
	assert_non_null(buf);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		print_message("  %s\n", cases[i].what);
		memcpy(buf, orig, len);
		cases[i].patch(buf, len);
		assert_int_equal(bpftel_elf_resolve(write_sparse(buf, len, cases[i].file_size),
						    reqs, 2, err, sizeof(err)),
				 cases[i].want);
		assert_int_equal(reqs[1].offset, cases[i].want);
		assert_non_null(strstr(err, cases[i].msg));
	}
	free(buf);
	free(orig);
}

/* The fd API answers as the path API does, and leaves the fd open where it was. */
static void test_fd_api(void **state)
{
	static const char *const names[] = {"fixture_plain", "fixture_versioned",
					    "fixture_versioned@VERS_1", "fixture_v1", "nope"};
	struct bpftel_elf_sym_req reqs[] = {{.name = "fixture_other"}, {.name = "nope"}};
	int fd = open(fixture, O_RDONLY | O_CLOEXEC);
	char err[256];
	size_t i;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(lseek(fd, 5, SEEK_SET), 5);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_int_equal(
			bpftel_elf_sym_offset_fd(fd, "fixture", names[i], err, sizeof(err)),
			off_of(fixture, names[i]));
	assert_non_null(strstr(err, "fixture: symbol 'nope' not found"));
	assert_int_equal(bpftel_elf_resolve_fd(fd, NULL, reqs, 2, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	assert_int_equal(reqs[0].offset, off_of(fixture, "fixture_other"));
	assert_int_equal(reqs[1].offset, -ENOENT);
	assert_int_equal(lseek(fd, 0, SEEK_CUR), 5);
	assert_int_equal(close(fd), 0); /* still open: the library did not close it */
}

static int open_fifo_rdwr(void)
{
	assert_int_equal(mkfifo(tmp_path("fdfifo"), 0600), 0);
	/* O_RDWR: open does not wait for a writer; reading it would block forever. */
	return open(tmp_path("fdfifo"), O_RDWR | O_NONBLOCK | O_CLOEXEC);
}

static int open_tmpdir(void)
{
	return open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static int open_dev_null(void)
{
	return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static int no_fd(void)
{
	return -1;
}

static void test_fd_not_regular(void **state)
{
	static const struct {
		const char *label;
		int (*open_fd)(void);
		int want;
		const char *msg;
	} cases[] = {
		{"a directory", open_tmpdir, -EISDIR, "a directory: is a directory"},
		{"a fifo", open_fifo_rdwr, -ENOEXEC, "a fifo: not a regular file"},
		{"/dev/null", open_dev_null, -ENOEXEC, "/dev/null: not a regular file"},
		{NULL, no_fd, -EBADF, "fd -1: bad file descriptor"},
	};
	char err[256];
	size_t i;
	int fd;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fd = cases[i].open_fd();
		assert_true(fd >= 0 || cases[i].want == -EBADF);
		assert_int_equal(
			bpftel_elf_sym_offset_fd(fd, cases[i].label, "x", err, sizeof(err)),
			cases[i].want);
		assert_string_equal(err, cases[i].msg);
		if (fd >= 0)
			assert_int_equal(close(fd), 0);
	}
}

/* Bytes this process has read through read(2)/pread(2) so far. */
static unsigned long long rchar(void)
{
	unsigned long long n = 0;
	FILE *f = fopen("/proc/self/io", "re");

	if (!f)
		return 0;
	if (fscanf(f, "rchar: %llu", &n) != 1)
		n = 0;
	fclose(f);
	return n;
}

/*
 * .symtab is read only when it can still change an answer. Seen from outside: with .symtab
 * moved into 8 MiB of zeros, a symbol .dynsym answers reads far less than 8 MiB; one it
 * cannot answer reads it all. On the real fixture, a local symbol is found in .symtab.
 */
static void test_symtab_only_when_needed(void **state)
{
	static const uint64_t symtab_size = SYMS_BYTES(8ULL << 20);
	struct bpftel_elf_sym_req reqs[] = {{.name = "fixture_plain"}, {.name = "fixture_v1"}};
	unsigned long long r0;
	size_t len;
	char *buf = read_all(fixture, &len);
	const char *path;
	long off;

	(void)state;
	if (!rchar())
		skip();
	path = write_sparse(buf, len, move_to_hole(buf, len, SHT_SYMTAB, 0, symtab_size));
	r0 = rchar();
	assert_int_equal(off_of(path, "fixture_plain"), off_of(fixture, "fixture_plain"));
	assert_true(rchar() - r0 < symtab_size / 8);
	r0 = rchar();
	assert_int_equal(off_of(path, "fixture_v1"), -ENOENT); /* .symtab is all zeros */
	assert_true(rchar() - r0 >= symtab_size);

	off = off_of(fixture, "fixture_versioned@VERS_1");
	assert_int_equal(off_of(fixture, "fixture_v1"), off); /* local: .symtab only */
	assert_int_equal(bpftel_elf_resolve(fixture, reqs, 2, NULL, 0), 0);
	assert_int_equal(reqs[0].offset, off_of(fixture, "fixture_plain"));
	assert_int_equal(reqs[1].offset, off);
	free(buf);
}

/*
 * .dynsym and .symtab of 12 MiB each, both read (the symbol is in neither): the peak holds
 * one of them, not both. Not under ASan, whose quarantine keeps freed memory resident,
 * nor TSan, whose shadow of every byte touched is resident too.
 */
static void test_one_table_at_a_time(void **state)
{
	static const uint64_t table = SYMS_BYTES(12ULL << 20);
	struct child_result res;
	uint64_t size;
	size_t len;
	char *buf;

	(void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	skip();
#endif
	buf = read_all(fixture, &len);
	move_to_hole(buf, len, SHT_DYNSYM, 0, table);
	size = move_to_hole(buf, len, SHT_SYMTAB, table, table);
	res = resolve_in_child(write_sparse(buf, len, size), "nope");
	print_message("  two 12 MiB tables: %ld, peak RSS +%ld KiB\n", res.ret, res.grew_kib);
	assert_int_equal(res.ret, -ENOENT);
	assert_true(res.grew_kib < (long)(table * 3 / 2 / 1024));
	free(buf);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(tmpnames) / sizeof(tmpnames[0]); i++)
		unlink(tmp_path(tmpnames[i]));
	return rmdir(tmpdir);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixture_plain),
		cmocka_unit_test(test_fixture_versioned_default),
		cmocka_unit_test(test_fixture_versioned_hidden),
		cmocka_unit_test(test_libssl),
		cmocka_unit_test(test_libssl_batch),
		cmocka_unit_test(test_not_elf),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_bad_headers),
		cmocka_unit_test(test_corrupt_no_crash),
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_no_fd_leak),
		cmocka_unit_test(test_caps_no_allocation),
		cmocka_unit_test(test_crafted_tables_bounded),
		cmocka_unit_test(test_code_segment),
		cmocka_unit_test(test_symbolize_large_string_table),
		cmocka_unit_test(test_bad_sections),
		cmocka_unit_test(test_fd_api),
		cmocka_unit_test(test_fd_not_regular),
		cmocka_unit_test(test_symtab_only_when_needed),
		cmocka_unit_test(test_one_table_at_a_time),
	};

	if (argc < 2 || !realpath(argv[1], fixture)) {
		fprintf(stderr, "usage: %s PATH_TO_libelfsym_fixture.so\n", argv[0]);
		return 2;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
