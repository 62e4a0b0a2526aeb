/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Ranges of uids granted to users (/etc/subuid, subuid(5)). A rootless container's
 * user namespace maps them, and Debian's useradd grants every new user 65536: with
 * newuidmap installed (podman's, rootless docker's), a user may run processes under
 * any of them. Each would be a user of its own to the kernel's shares
 * (bpf/lib/fair_share.h), and one user could hold 65537 shares. So a range's uids are
 * counted as the user's it was granted to.
 */
#ifndef BPFTEL_SUBUID_H
#define BPFTEL_SUBUID_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

struct fair_share_ranges;

#define SUBUID_PATH "/etc/subuid"
#define SUBUID_PASSWD_PATH "/etc/passwd"
/* The most of either file read (both are root's own): what is past it is left out. */
#define SUBUID_FILE_MAX (1u << 20)

/*
 * Parse subuid (len bytes of lines NAME:FIRST:COUNT, NAME a user's name or uid) into
 * out, sorted by first uid, naming users by passwd (plen bytes of /etc/passwd's lines).
 * Left out, and counted in the return value: a malformed line, a first uid of 0, a
 * count of 0, a range past uid 2^32 - 2, the ranges past the file's first
 * 2 * FAIR_SHARE_RANGES, then (sorted) one overlapping the one before, those past
 * FAIR_SHARE_RANGES. A range of a user not in passwd, or of root, is no one user's:
 * owner 0, each FAIR_SHARE_RANGE_BLOCK uids of it an owner of its own. -ENOMEM: none.
 */
int subuid_parse(const char *subuid, size_t len, const char *passwd, size_t plen,
		     struct fair_share_ranges *out);

/* What the files were when last read: a change is read again. */
struct subuid_stamp {
	__u64 dev, ino, size, mtime_ns; /* all 0: the file was missing */
};

struct subuid_files {
	struct subuid_stamp subuid, passwd;
};

/* The subuid file (BPFTEL_SUBUID in the environment, a test aid, else /etc/subuid). */
const char *subuid_path(void);

/* Whether either file changed since *seen (true the first time: *seen all 0). */
bool subuid_changed(const struct subuid_files *seen);

/*
 * Read both files into out (no subuid file: no range; no passwd: no names), how many
 * ranges were left out into *skipped, and what the files were into *seen. 0, or
 * -errno when the subuid file exists and cannot be read (out left empty).
 */
int subuid_read(struct fair_share_ranges *out, unsigned int *skipped,
		    struct subuid_files *seen);

#endif /* BPFTEL_SUBUID_H */
