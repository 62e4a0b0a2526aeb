// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What a mapping of the agent's own is of, as the kernel holds it: a task_vma iterator
 * over the agent's own mappings that writes, for each one of a file, the mapped
 * inode's number, device and file system (struct real_file_rec).
 *
 * Why not stat: on overlayfs the kernel maps (and attaches uprobes to) the file
 * underneath, in a layer, while on newer kernels (6.18 here) stat, /proc/<pid>/maps and
 * /proc/<pid>/map_files all show the overlay's file: two overlays of one image layer
 * (two containers) show two files that are one for uprobes, and a layer on FUSE shows
 * as overlayfs. vma->vm_file is the file mapped (on newer kernels a backing file whose
 * inode is the layer's; on older ones the layer's file itself, which stat showed too).
 * On btrfs also its subvolume's device, which no stat through an overlay shows.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "real_file.h"
#include "lib/btrfs_subvol.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The agent's pid. The iterator walks its main thread only (6.1's filter); this keeps
 * the program right whatever it is handed. */
const volatile __u32 self_tgid;

SEC("iter/task_vma")
int real_file_vmas(struct bpf_iter__task_vma *ctx)
{
	struct vm_area_struct *vma = ctx->vma;
	struct task_struct *task = ctx->task;
	struct real_file_rec r = {};
	struct inode *inode;
	struct file *file;

	if (!task || !vma || BPF_CORE_READ(task, tgid) != self_tgid)
		return 0;
	file = BPF_CORE_READ(vma, vm_file);
	if (!file)
		return 0;
	inode = BPF_CORE_READ(file, f_inode);
	r.start = BPF_CORE_READ(vma, vm_start);
	r.ino = BPF_CORE_READ(inode, i_ino);
	r.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	r.magic = BPF_CORE_READ(inode, i_sb, s_magic);
	r.sdev = btrfs_subvol_dev(inode);
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}
