/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Opening a file on behalf of another process, safely. The path, the file at its end
 * and every directory on the way belong to that process, which may be an unprivileged
 * user's or a container's, and may have crafted them. So an open
 *
 *   - never blocks: the path is resolved with O_PATH (the file is not opened), and only
 *     a regular file is opened for reading, through our own /proc/self/fd/N, with
 *     O_NONBLOCK | O_NOCTTY; a file on a FUSE filesystem (whose daemon could stall any
 *     lookup) is refused before its path is touched;
 *   - never leaves the process's root: an absolute path is resolved inside
 *     /proc/<pid>/root with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS), a relative
 *     one beneath the process's cwd or directory fd (RESOLVE_BENEATH); a path that
 *     would leave it is refused (the caller then finds the file by its mapping,
 *     /proc/<pid>/map_files, which names the mapped file itself). On kernels without
 *     openat2 (before 5.6) the path is opened with O_PATH through the same magic links:
 *     it may then escape the root, but only to the very file identity the kernel
 *     reported, which is checked before anything is read;
 *   - reads only the file the kernel saw: its (device, inode) must be the one expected;
 *   - and, since a FUSE file system can hide beneath others (an overlayfs lower layer on
 *     a FUSE mount unmounted since: no mount of the process shows FUSE), is done on a
 *     thread of its own, waited for up to BPFTEL_PROCFILE_TIMEOUT_MS
 *     (user/common/deadline_call.h): past that the file is refused as slow_fs and its
 *     thread left to end when the file system answers. A file whose mapping lies on FUSE
 *     all the same (statfs of what the kernel maps) is refused too (slow_fs): later
 *     reads of it, and the kernel's own when it attaches a uprobe, could wait.
 *
 * Refusals are returned with their reason, for the caller to count and show.
 */
#ifndef BPFTEL_SHAREDLIBS_PROCFILE_H
#define BPFTEL_SHAREDLIBS_PROCFILE_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <linux/types.h>

#include "mountinfo.h"

/* Why a file was not used; the names are what `bpftel libs` and /metrics show. */
enum bpftel_refusal {
	BPFTEL_REFUSED_NOT_REGULAR = 0,	 /* a FIFO, device, socket or directory */
	BPFTEL_REFUSED_IDENTITY_CHANGED, /* the path leads to another file than was opened */
	BPFTEL_REFUSED_OUTSIDE_ROOT,	 /* the path leaves the process's root (or cwd) */
	BPFTEL_REFUSED_SLOW_FS,		 /* on FUSE: a lookup could block */
	BPFTEL_REFUSED_TOO_LARGE,	 /* over BPFTEL_ELF_MAX_FILE_BYTES */
	BPFTEL_REFUSED_NOT_ELF,		 /* not ELF, truncated or malformed */
	BPFTEL_REFUSED_TABLES_TOO_LARGE, /* a symbol table or header count over its cap */
	BPFTEL_REFUSED_REGISTRY_FULL,	 /* the uprobe registry holds its maximum of files */
	BPFTEL_REFUSED_UNSUPPORTED,	 /* a Go executable of a version or layout not probed */
	BPFTEL_REFUSED_OVER_BUDGET,	 /* its user's new files this minute (file_budget.h) */
	BPFTEL_REFUSED__COUNT,
};

const char *bpftel_refusal_name(enum bpftel_refusal why);

/* How long an open (or a host path's walk) waits for the file system: a local one answers
 * in microseconds, a network one within its own timeouts. */
#define BPFTEL_PROCFILE_TIMEOUT_MS 2000

/* That, or the environment's BPFTEL_PROCFILE_TIMEOUT_MS (1..600000), read once: tests
 * that hold an agent's open on a stalled file system for as long as they need set it,
 * so that what they check is not a race with the deadline. (A stop waits for a report
 * in progress: up to that long per file it opens.) */
unsigned int bpftel_procfile_timeout_ms(void);

/* dirfd value for a target reached through /proc/<pid>/map_files/<path>. */
#define BPFTEL_PROCFILE_MAPPED (-1000)
/* dirfd value for pid's executable, through /proc/<pid>/exe (path: a label). For a
 * script, the interpreter the kernel runs: what an exec's identity names. */
#define BPFTEL_PROCFILE_EXE (-1001)

struct bpftel_procfile_target {
	__u32 pid;
	int dirfd;	  /* AT_FDCWD, a directory fd of pid, BPFTEL_PROCFILE_MAPPED or _EXE */
	const char *path; /* as pid named it; "start-end" for BPFTEL_PROCFILE_MAPPED */
	dev_t dev;	  /* the file expected (st_dev, st_ino), or ino 0: any regular file */
	__u64 ino;
	dev_t sdev;	  /* with it, on btrfs, its subvolume's device (0: not known) */
	/* pid is the agent's own, walking a path for a process gone since: whose it was is
	 * not known, and the walk is charged to no owner (deadline_call.h), never to
	 * root's share, which a user's stalled paths would otherwise use up. */
	bool owner_gone;
};

/*
 * Open t's file for reading as described above. Returns an fd (O_RDONLY | O_CLOEXEC) and
 * its stat in *st, or a negative errno: with *why set (< BPFTEL_REFUSED__COUNT) when it
 * is a refusal (*st then says what the path led to, if it led anywhere, else it is
 * zero; for a file on FUSE, never opened, or one whose file system did not answer in
 * time (-ETIMEDOUT), or not tried (-EBUSY: too many opens still wait; -EINPROGRESS: an
 * earlier open of this file, by t's identity, still waits), it holds t's device and
 * inode), else *why = BPFTEL_REFUSED__COUNT (the process or the file is
 * gone: -ENOENT, -ESRCH, ...; or no thread could start).
 */
int bpftel_procfile_open(const struct bpftel_procfile_target *t, struct stat *st,
			 enum bpftel_refusal *why);

/* The same, and the identity of what the file maps (as bpftel_procfile_real_identity()
 * gives it, found on the way) in *real_dev, *real_ino when it returns an fd; on btrfs
 * its subvolume's device in *real_sdev (the kernel's where it can say, else stat's),
 * elsewhere *real_dev. */
int bpftel_procfile_open_mapped(const struct bpftel_procfile_target *t, struct stat *st,
				enum bpftel_refusal *why, dev_t *real_dev, __u64 *real_ino,
				dev_t *real_sdev);

/*
 * The identity of the file a mapping of fd is of: on overlayfs the file underneath, in
 * its layer, which is what the kernel attaches uprobes to. Elsewhere the file itself.
 * Asked of the kernel through real_file.h's iterator where it is held (the uprobe
 * registry holds it); else what stat of the mapping shows, which on newer kernels is
 * the overlay's file. 0 or -errno.
 */
int bpftel_procfile_real_identity(int fd, dev_t *dev, __u64 *ino);

/* A one-line reason for a refusal of bpftel_procfile_open (st as it filled it). */
void bpftel_procfile_explain(enum bpftel_refusal why, const struct stat *st, int err, char *buf,
			     size_t len);

/* Where t's path leads, as the agent sees it (for display), resolved as an open would
 * be; malloc'd, or NULL (refused, gone, out of memory, or, t's identity known, no
 * longer the file it names). */
char *bpftel_procfile_host_path(const struct bpftel_procfile_target *t);

/* What pid's mounts (/proc/<pid>/mountinfo) say of FUSE (mountinfo.h); NONE when it is
 * gone. */
enum bpftel_fuse_view bpftel_procfile_fuse(__u32 pid, dev_t dev);

#endif /* BPFTEL_SHAREDLIBS_PROCFILE_H */
