/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What a process's /proc/<pid>/mountinfo says, read from a stream: which mounts are
 * FUSE, and which device a mount id has. The lines are the process's own mounts, which
 * an unprivileged user can shape (in a user namespace): paths come escaped by the
 * kernel, but a line may be longer than any buffer (MOUNTINFO_LINE_MAX).
 */
#ifndef BPFTEL_SHAREDLIBS_MOUNTINFO_H
#define BPFTEL_SHAREDLIBS_MOUNTINFO_H

#include <stdio.h>
#include <sys/types.h>

/* What the mounts say of FUSE: dev is a FUSE file system (or a line too long to read
 * whole is dev's: taken as one), another mount is, or none. */
enum bpftel_fuse_view {
	BPFTEL_FUSE_NONE,
	BPFTEL_FUSE_ELSEWHERE,
	BPFTEL_FUSE_DEV,
};

enum bpftel_fuse_view bpftel_mountinfo_fuse(FILE *f, dev_t dev);

/* The device of mount mnt_id's file system (from the line's first fields, which the
 * kernel writes: a line too long is read in part). 0, -ENOENT (no such mount) or
 * -ENOMEM. */
int bpftel_mountinfo_dev(FILE *f, unsigned int mnt_id, dev_t *dev);

#endif /* BPFTEL_SHAREDLIBS_MOUNTINFO_H */
