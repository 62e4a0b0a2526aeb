/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Tests of files written in place: the content of one file copied over another's
 * (created if need be) through open(O_TRUNC) and write, as `cp` does to an existing
 * file, so that it keeps its inode. Include after <cmocka.h>.
 */
#ifndef BPFTEL_TESTS_COPY_OVER_H
#define BPFTEL_TESTS_COPY_OVER_H

#include <fcntl.h>
#include <unistd.h>

static inline void copy_over(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	ssize_t n;

	assert_true(in >= 0 && out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, n), n);
	assert_int_equal(n, 0);
	close(in);
	close(out);
}

#endif /* BPFTEL_TESTS_COPY_OVER_H */
