// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ELF symbol resolver: offsets of the fixture library (argv[1], built with a version script)
 * and of the system's libssl.so.3 cross-checked against where the dynamic loader maps them
 * (dlsym/dlvsym + /proc/self/maps), and bad files that must fail cleanly without leaking.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

#define LIBSSL "/lib/x86_64-linux-gnu/libssl.so.3"

static char fixture[PATH_MAX];
static char tmpdir[] = "/tmp/test_elfsym.XXXXXX";
static const char *const tmpnames[] = {"libssl.so.3", "empty.so", "cut.so", "patched.so", "fifo"};

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
	};

	if (argc < 2 || !realpath(argv[1], fixture)) {
		fprintf(stderr, "usage: %s PATH_TO_libelfsym_fixture.so\n", argv[0]);
		return 2;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
