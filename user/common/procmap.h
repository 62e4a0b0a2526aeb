/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The mapping of another process's address space that holds an address (procmap.c):
 * asked of the kernel with PROCMAP_QUERY (Linux 6.11+: one ioctl on /proc/<pid>/maps,
 * a lookup in the process's VMA tree), else found by reading /proc/<pid>/maps line by
 * line. A process may hold 65,530 mappings (vm.max_map_count): ~3 MB of text that the
 * kernel writes out and we parse for each address, where the query costs the same for
 * any count.
 */
#ifndef BPFTEL_COMMON_PROCMAP_H
#define BPFTEL_COMMON_PROCMAP_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>
#include <linux/types.h>

/* What a reader of another process's maps text reads of it at most: a hostile process
 * can hold 65,530 mappings of a file whose path is 4 KiB (~268 MB of text). */
#define BPFTEL_MAPS_MAX_LINES 100000
#define BPFTEL_MAPS_MAX_BYTES (8u << 20)

struct bpftel_procmap_vma {
	__u64 start, end; /* [start, end): "start-end" names it in /proc/<pid>/map_files */
	__u64 offset;	  /* the file offset of the address */
	dev_t dev;	  /* the file's device and inode as maps shows them */
	__u64 ino;
};

/*
 * The file-backed mapping of pid holding addr, in *vma: 0, -ENOENT when none holds it
 * or the one that does maps no file, another -errno when pid's maps cannot be read
 * (gone, or not ours to read).
 */
int bpftel_procmap_find(__u32 pid, __u64 addr, struct bpftel_procmap_vma *vma);

/*
 * Another process's maps text, line by line, within BPFTEL_MAPS_MAX_LINES and _BYTES:
 * every reader of it (this file's, the uprobe registry's scan and mapping lookup).
 */
struct bpftel_maps_text {
	FILE *f;
	size_t lines, bytes;
	bool long_line; /* the last line did not fit: its head given, the rest skipped */
	bool cut;	/* a bound was reached: nothing more is read */
};

/* The next line into line (size bytes): true, or false at the end of the text or
 * once a bound is reached (m->cut; m->bytes >= BPFTEL_MAPS_MAX_BYTES when that one). */
bool bpftel_maps_text_next(struct bpftel_maps_text *m, char *line, size_t size);

/* Tests and benches: read the text even where the kernel answers queries. */
void bpftel_procmap_force_text(bool on);

#endif /* BPFTEL_COMMON_PROCMAP_H */
