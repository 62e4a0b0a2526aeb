// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* BPFTEL_FAULTS parsing (see faults.h). Nothing is armed unless the whole spec parses. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faults.h"
#include "user/manager/manager.h"
#include "user/manager/uprobe_multi.h"

#define MAX_FAULTS 16

static const struct {
	const char *name;
	int err;
} errno_names[] = {
	{"EPERM", EPERM},   {"ENOENT", ENOENT}, {"EIO", EIO},	      {"ENOEXEC", ENOEXEC},
	{"ENOMEM", ENOMEM}, {"EACCES", EACCES}, {"EBUSY", EBUSY},     {"EINVAL", EINVAL},
	{"ENOSPC", ENOSPC}, {"E2BIG", E2BIG},	{"ENOTSUP", ENOTSUP},   {"EOPNOTSUPP", EOPNOTSUPP},
};

static int parse_errno(const char *s)
{
	char *end;
	long v;
	size_t i;

	for (i = 0; i < sizeof(errno_names) / sizeof(errno_names[0]); i++) {
		if (!strcmp(s, errno_names[i].name))
			return errno_names[i].err;
	}
	errno = 0;
	v = strtol(s, &end, 10);
	return !errno && *s && !*end && v > 0 && v < 4096 ? (int)v : 0;
}

struct fault {
	struct bpftel_module *m; /* NULL: the uprobe_multi feature */
	char step[8];
	int err;
	unsigned int count;
};

/* One MODULE.STEP=ERRNO[*COUNT] item into f. */
static int parse_item(struct bpftel_manager *mgr, char *item, struct fault *f, char *err,
		      size_t errlen)
{
	char *dot, *eq, *star, *end;
	unsigned long count = 1;

	/* uprobe_multi=ERRNO: the kernel "has no" multi-uprobe links. */
	if (!strncmp(item, "uprobe_multi=", 13)) {
		f->m = NULL;
		f->err = parse_errno(item + 13);
		if (!f->err)
			snprintf(err, errlen, "'%.32s' is not an errno name or number", item + 13);
		return f->err ? 0 : -EINVAL;
	}
	dot = strchr(item, '.');
	eq = strchr(item, '=');
	if (!dot || !eq || dot > eq) {
		snprintf(err, errlen, "'%.64s' is not MODULE.STEP=ERRNO[*COUNT]", item);
		return -EINVAL;
	}
	*dot = *eq = '\0';
	star = strchr(eq + 1, '*');
	if (star) {
		*star = '\0';
		errno = 0;
		count = strtoul(star + 1, &end, 10);
		if (errno || !star[1] || *end || !count || count > 1000000) {
			snprintf(err, errlen, "count '%.32s' is not 1..1000000", star + 1);
			return -EINVAL;
		}
	}
	f->m = bpftel_manager__find(mgr, item);
	if (!f->m) {
		snprintf(err, errlen, "no module '%.64s'", item);
		return -EINVAL;
	}
	if (strcmp(dot + 1, "open") && strcmp(dot + 1, "load") && strcmp(dot + 1, "start") &&
	    strcmp(dot + 1, "stop")) {
		snprintf(err, errlen, "step '%.32s' is not open, load, start or stop", dot + 1);
		return -EINVAL;
	}
	snprintf(f->step, sizeof(f->step), "%s", dot + 1);
	f->err = parse_errno(eq + 1);
	if (!f->err) {
		snprintf(err, errlen, "'%.32s' is not an errno name (ENOMEM, EIO, ...) or number",
			 eq + 1);
		return -EINVAL;
	}
	f->count = (unsigned int)count;
	return 0;
}

int bpftel_faults_apply(struct bpftel_manager *mgr, const char *spec, char *err, size_t errlen)
{
	struct fault faults[MAX_FAULTS];
	char *copy, *item, *save = NULL;
	size_t n = 0, i;
	int ret = 0;

	copy = strdup(spec);
	if (!copy) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (item = strtok_r(copy, ",", &save); item && !ret; item = strtok_r(NULL, ",", &save)) {
		if (n == MAX_FAULTS) {
			snprintf(err, errlen, "more than %d faults", MAX_FAULTS);
			ret = -EINVAL;
		} else {
			ret = parse_item(mgr, item, &faults[n++], err, errlen);
		}
	}
	if (!ret && !n) {
		snprintf(err, errlen, "no fault in '%.64s'", spec);
		ret = -EINVAL;
	}
	for (i = 0; !ret && i < n; i++) {
		if (!faults[i].m)
			bpftel_uprobe_multi_set_fault(-faults[i].err);
		else
			ret = bpftel_module__inject_fault(faults[i].m, faults[i].step,
							  -faults[i].err, faults[i].count);
	}
	free(copy);
	return ret;
}
