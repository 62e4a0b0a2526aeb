/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Entries of a directory, "." and ".." and hidden ones aside: a test's fds
 * (/proc/self/fd) or threads (/proc/self/task). Include after <cmocka.h>. */
#ifndef BPFTEL_TESTS_COUNT_DIR_H
#define BPFTEL_TESTS_COUNT_DIR_H

#include <dirent.h>

static inline int count_dir(const char *path)
{
	struct dirent *d;
	DIR *dir = opendir(path);
	int n = 0;

	assert_non_null(dir);
	while ((d = readdir(dir)))
		n += d->d_name[0] != '.';
	closedir(dir);
	return n;
}

#endif /* BPFTEL_TESTS_COUNT_DIR_H */
