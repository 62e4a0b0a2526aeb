/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The btrfs subvolume an inode is in, as the kernel knows it.
 *
 * On btrfs the super block's device (i_sb->s_dev) is the file system's; stat() gives a
 * file the device of its subvolume instead (btrfs_getattr: the subvolume root's
 * anon_dev), and files of two subvolumes (two snapshots of one image, two containers)
 * have the same s_dev and inode number yet are two inodes. Userspace tells them apart
 * by that device (user/sharedlibs/uprobes.c, lib_file.sdev); with it in the events, a
 * new process mapping a file the registry holds is answered from the row, without
 * opening the file again to learn which subvolume it is of.
 *
 * Read through CO-RE, so the object loads on kernels without btrfs (the type is
 * absent: the branch is dead and never verified) and with btrfs as a module (libbpf
 * looks in the modules' BTF; a module loaded after the object was, is not seen: its
 * files' events say 0, and userspace opens the file to tell, as it did before).
 *
 * Include after vmlinux.h and bpf_core_read.h.
 */
#ifndef BPFTEL_LIB_BTRFS_SUBVOL_H
#define BPFTEL_LIB_BTRFS_SUBVOL_H

#define BTRFS_SUPER_MAGIC 0x9123683E

/* inode's subvolume device (kernel encoding), or 0 when it is not on btrfs. */
static __always_inline __u32 btrfs_subvol_dev(struct inode *inode)
{
	struct btrfs_inode *bi;

	if (!bpf_core_type_exists(struct btrfs_inode) ||
	    BPF_CORE_READ(inode, i_sb, s_magic) != BTRFS_SUPER_MAGIC)
		return 0;
	/* container_of(inode, struct btrfs_inode, vfs_inode), read, never dereferenced */
	bi = (void *)inode - bpf_core_field_offset(struct btrfs_inode, vfs_inode);
	return BPF_CORE_READ(bi, root, anon_dev);
}

#endif /* BPFTEL_LIB_BTRFS_SUBVOL_H */
