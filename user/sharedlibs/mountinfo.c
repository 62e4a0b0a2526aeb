// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* What a process's mountinfo says (mountinfo.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "mountinfo.h"

/* A mount line this long is not read whole; most are under 200 bytes. */
#define MOUNTINFO_LINE_MAX 16384

/* The next line of a mountinfo file into line (MOUNTINFO_LINE_MAX bytes); of a longer
 * one, its start, the rest skipped, and *whole false. False at the end. */
static bool mountinfo_next(FILE *f, char *line, bool *whole)
{
	int c;

	if (!fgets(line, MOUNTINFO_LINE_MAX, f))
		return false;
	*whole = strchr(line, '\n') || feof(f);
	if (!*whole) {
		while ((c = fgetc(f)) != EOF && c != '\n')
			;
	}
	return true;
}

/* A FUSE file system's type: fuse, fuseblk, or either with a subtype (fuse.sshfs); not
 * fusectl, the FUSE connections' control file system systemd mounts on most hosts. */
static bool fuse_type(const char *type)
{
	size_t len = strcspn(type, " ");

	return (len == 4 && !strncmp(type, "fuse", 4)) || !strncmp(type, "fuse.", 5) ||
	       (len == 7 && !strncmp(type, "fuseblk", 7)) || !strncmp(type, "fuseblk.", 8);
}

/*
 * "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw": the file system
 * type follows " - ". A line too long to read whole is taken as FUSE, on dev if its
 * device is dev, elsewhere if not: refused rather than walked.
 */
enum bpftel_fuse_view bpftel_mountinfo_fuse(FILE *f, dev_t dev)
{
	enum bpftel_fuse_view view = BPFTEL_FUSE_NONE;
	unsigned int major, minor;
	char *line, *sep;
	bool whole, fuse, mine;

	line = malloc(MOUNTINFO_LINE_MAX);
	if (!line)
		return BPFTEL_FUSE_DEV;
	while (view != BPFTEL_FUSE_DEV && mountinfo_next(f, line, &whole)) {
		mine = sscanf(line, "%*u %*u %u:%u", &major, &minor) == 2 &&
		       makedev(major, minor) == dev;
		sep = strstr(line, " - ");
		fuse = !whole || (sep && fuse_type(sep + 3));
		if (fuse)
			view = mine ? BPFTEL_FUSE_DEV : BPFTEL_FUSE_ELSEWHERE;
	}
	free(line);
	return view;
}

int bpftel_mountinfo_dev(FILE *f, unsigned int mnt_id, dev_t *dev)
{
	unsigned int id, major, minor;
	int err = -ENOENT;
	bool whole;
	char *line;

	line = malloc(MOUNTINFO_LINE_MAX);
	if (!line)
		return -ENOMEM;
	while (err && mountinfo_next(f, line, &whole)) {
		if (sscanf(line, "%u %*u %u:%u", &id, &major, &minor) == 3 && id == mnt_id) {
			*dev = makedev(major, minor);
			err = 0;
		}
	}
	free(line);
	return err;
}
