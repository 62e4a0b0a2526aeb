/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The files the agent's own mappings are of, as the kernel holds them: the records
 * bpf/real_file.bpf.c writes, one per file-backed mapping, read by
 * user/sharedlibs/real_file.c. Included after vmlinux.h or <linux/types.h>.
 */
#ifndef BPFTEL_REAL_FILE_H
#define BPFTEL_REAL_FILE_H

struct real_file_rec {
	__u64 start; /* the mapping's first address */
	__u64 ino;   /* the mapped inode's number */
	__u32 dev;   /* its super block's device, as the kernel encodes it (major << 20) */
	__u32 magic; /* its file system's magic (FUSE: 0x65735546) */
	__u32 sdev;  /* on btrfs its subvolume's device, as dev (lib/btrfs_subvol.h); else 0 */
	__u32 __pad;
};

_Static_assert(sizeof(struct real_file_rec) == 32, "real_file_rec layout");

#endif /* BPFTEL_REAL_FILE_H */
