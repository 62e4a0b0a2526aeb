/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* File descriptors a module duplicates to walk its maps with no lock held. */
#ifndef BPFTEL_COMMON_FD_H
#define BPFTEL_COMMON_FD_H

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

/* A close-on-exec duplicate of fd, above the standard streams; -1 with errno set when
 * fd is none (EBADF) or no duplicate could be made. */
static inline int bpftel_fd_dup(int fd)
{
	if (fd < 0) {
		errno = EBADF;
		return -1;
	}
	return fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

/* Close *fd if it is open, and mark it closed (-1). */
static inline void bpftel_fd_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

#endif /* BPFTEL_COMMON_FD_H */
