// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libFuzzer target: the parsers of /proc texts whose content other processes shape: a
 * mountinfo (mount paths of a user's own namespace; user/sharedlibs/mountinfo.c), a
 * cgroup file (the names of a delegated cgroup tree; user/common/cgroup.c) and a stat
 * line (the process's name, which may hold ')', spaces and newlines;
 * user/common/proc.c). The input is read as each.
 *
 * What must hold besides "no crash, no leak, no sanitizer report": the answers are
 * among the documented ones, and a container id is 64 lower-case hex digits or none.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "user/common/cgroup.h"
#include "user/common/proc.h"
#include "user/sharedlibs/mountinfo.h"

static void check_mountinfo(const uint8_t *data, size_t size)
{
	FILE *f = fmemopen((void *)data, size, "r");
	enum bpftel_fuse_view v;
	dev_t dev = 0;
	int err;

	if (!f)
		return;
	v = bpftel_mountinfo_fuse(f, makedev(0, 44));
	if (v != BPFTEL_FUSE_NONE && v != BPFTEL_FUSE_ELSEWHERE && v != BPFTEL_FUSE_DEV)
		abort();
	rewind(f);
	err = bpftel_mountinfo_dev(f, 25, &dev);
	if (err && err != -ENOENT && err != -ENOMEM)
		abort();
	fclose(f);
}

static void check_cgroup(const uint8_t *data, size_t size)
{
	struct bpftel_cgroup_info c;
	size_t i, n;
	int err;

	err = bpftel_cgroup_parse((const char *)data, size, &c);
	if (err && err != -ENOENT)
		abort();
	if (!memchr(c.path, '\0', sizeof(c.path)) || !memchr(c.runtime, '\0', sizeof(c.runtime)) ||
	    !memchr(c.controllers, '\0', sizeof(c.controllers)) ||
	    !memchr(c.container_id, '\0', sizeof(c.container_id)))
		abort();
	n = strlen(c.container_id);
	if (n && n != 64)
		abort();
	for (i = 0; i < n; i++)
		if (!((c.container_id[i] >= '0' && c.container_id[i] <= '9') ||
		      (c.container_id[i] >= 'a' && c.container_id[i] <= 'f')))
			abort();
	if (!!n != !!c.runtime[0])
		abort();
}

static void check_stat(const uint8_t *data, size_t size)
{
	unsigned long long out[2];
	char *text = malloc(size + 1);
	int n;

	if (!text)
		return;
	memcpy(text, data, size);
	text[size] = '\0';
	n = bpftel_proc_stat_parse(text, 22, 1, out);
	if (n != 0 && n != 1)
		abort();
	n = bpftel_proc_stat_parse(text, 14, 2, out);
	if (n != 0 && n != 2)
		abort();
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_mountinfo(data, size);
	check_cgroup(data, size);
	check_stat(data, size);
	return 0;
}
