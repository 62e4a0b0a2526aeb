/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* A device number as the kernel encodes it (MKDEV: major << 20 | minor), in BPF records,
 * as userspace's dev_t, which stat() gives. 0 stays 0. */
#ifndef BPFTEL_COMMON_KDEV_H
#define BPFTEL_COMMON_KDEV_H

#include <sys/sysmacros.h>
#include <sys/types.h>
#include <linux/types.h>

static inline dev_t bpftel_kdev(__u32 dev)
{
	return makedev(dev >> 20, dev & ((1u << 20) - 1));
}

#endif /* BPFTEL_COMMON_KDEV_H */
