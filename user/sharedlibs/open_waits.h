/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Opens of other processes' files, and walks of their paths, in flight (procfile.c), by
 * the identity the kernel reported for the file. One abandoned at its deadline stays
 * here, marked, until its thread ends (the file system answered, or its daemon died);
 * another open or walk to that file is then refused at once, with no thread of its own.
 * So a stalled file holds one thread however often, and by however many processes, it
 * is opened: each new process that opened it used to leave one more walk waiting (and
 * the registry's refusal cache forgets a file after 10 s), until they stopped every
 * new open (BPFTEL_DEADLINE_STUCK_MAX, then 16; now also _PER_OWNER).
 *
 * By owner too (deadline_call.h's, whose process the open was for): what stalled may be
 * the path, not the file. A user's walk through a FUSE symlink of its own to the
 * system's libgnutls stalls where the file itself would not; keyed by the file alone,
 * every user's opens of libgnutls were refused for as long as that user's daemon kept
 * its stall. So a stall holds back its owner's opens of the file, one thread each.
 */
#ifndef BPFTEL_SHAREDLIBS_OPEN_WAITS_H
#define BPFTEL_SHAREDLIBS_OPEN_WAITS_H

#include <stdbool.h>
#include <sys/types.h>
#include <linux/types.h>

/* An open of (dev, ino) for owner begins: its ticket, 0 when not kept (no identity,
 * table full). */
__u64 bpftel_open_waits_begin(dev_t dev, __u64 ino, __u64 owner);
/* It was abandoned at its deadline: it waits until its end. */
void bpftel_open_waits_abandon(__u64 ticket);
/* It ended (in time or not): gone. 0 is no ticket. */
void bpftel_open_waits_end(__u64 ticket);
/* Does an abandoned open of (dev, ino) for owner still wait? */
bool bpftel_open_waits_stalled(dev_t dev, __u64 ino, __u64 owner);

#endif /* BPFTEL_SHAREDLIBS_OPEN_WAITS_H */
