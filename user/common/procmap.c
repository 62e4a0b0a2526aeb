// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The mapping of another process that holds an address (procmap.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>

#include "procmap.h"

/* include/uapi/linux/fs.h of Linux 6.11; Debian 12's headers predate it. */
struct procmap_query_v1 {
	__u64 size;
	__u64 query_flags;
	__u64 query_addr;
	__u64 vma_start;
	__u64 vma_end;
	__u64 vma_flags;
	__u64 vma_page_size;
	__u64 vma_offset;
	__u64 inode;
	__u32 dev_major;
	__u32 dev_minor;
	__u32 vma_name_size;
	__u32 build_id_size;
	__u64 vma_name_addr;
	__u64 build_id_addr;
};

#define PROCMAP_QUERY_V1 _IOWR('f', 17, struct procmap_query_v1)
#define PROCMAP_QUERY_FILE_BACKED_VMA_V1 0x20

/* Lines of a maps file read at most, past vm.max_map_count's default (65,530); and
 * bytes: a process can map one file of a 4 KiB path 65,530 times (268 MB of text for
 * the kernel to make, and us to read, at every lookup: the reports' budget of names). A
 * process with more is not read further (-E2BIG). 8 MiB: 65,530 lines of 128 bytes. */
static bool force_text;

bool bpftel_maps_text_next(struct bpftel_maps_text *m, char *line, size_t size)
{
	int c;

	if (m->cut || !fgets(line, (int)size, m->f))
		return false;
	m->bytes += strlen(line);
	m->long_line = !strchr(line, '\n') && !feof(m->f);
	if (m->long_line) { /* a long path: skip the rest of it */
		while (m->bytes < BPFTEL_MAPS_MAX_BYTES && (c = fgetc(m->f)) != EOF && c != '\n')
			m->bytes++;
	}
	m->cut = ++m->lines > BPFTEL_MAPS_MAX_LINES || m->bytes >= BPFTEL_MAPS_MAX_BYTES;
	return !m->cut;
}

void bpftel_procmap_force_text(bool on)
{
	force_text = on;
}

/* -ENOTTY (or -EINVAL) when the kernel has no such query. */
static int query(int fd, __u64 addr, struct bpftel_procmap_vma *vma)
{
	struct procmap_query_v1 q = {
		.size = sizeof(q),
		.query_flags = PROCMAP_QUERY_FILE_BACKED_VMA_V1,
		.query_addr = addr,
	};

	if (ioctl(fd, PROCMAP_QUERY_V1, &q))
		return -errno;
	/* FILE_BACKED_VMA is "the covering VMA, if it maps a file" only without
	 * COVERING_OR_NEXT_VMA: the address must lie in it. */
	if (addr < q.vma_start || addr >= q.vma_end)
		return -ENOENT;
	*vma = (struct bpftel_procmap_vma){
		.start = q.vma_start,
		.end = q.vma_end,
		.offset = q.vma_offset + (addr - q.vma_start),
		.dev = makedev(q.dev_major, q.dev_minor),
		.ino = q.inode,
	};
	return 0;
}

static int scan(int fd, __u64 addr, struct bpftel_procmap_vma *vma)
{
	unsigned long start, end, pgoff, inode;
	struct bpftel_maps_text m = {0};
	unsigned int maj, min;
	char line[512];
	int err = -ENOENT;

	m.f = fdopen(fd, "re");
	if (!m.f) {
		err = -errno;
		close(fd);
		return err;
	}
	while (err == -ENOENT && bpftel_maps_text_next(&m, line, sizeof(line))) {
		if (sscanf(line, "%lx-%lx %*s %lx %x:%x %lu", &start, &end, &pgoff, &maj, &min,
			   &inode) != 6 ||
		    addr < start || addr >= end)
			continue;
		if (!inode)
			break; /* the mapping that holds it maps no file */
		*vma = (struct bpftel_procmap_vma){
			.start = start,
			.end = end,
			.offset = pgoff + (addr - start),
			.dev = makedev(maj, min),
			.ino = inode,
		};
		err = 0;
	}
	if (m.bytes >= BPFTEL_MAPS_MAX_BYTES)
		err = -E2BIG;
	fclose(m.f);
	return err;
}

int bpftel_procmap_find(__u32 pid, __u64 addr, struct bpftel_procmap_vma *vma)
{
	char path[64];
	int fd, err;

	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (!force_text) {
		err = query(fd, addr, vma);
		if (err != -ENOTTY && err != -EINVAL) {
			close(fd);
			return err;
		}
	}
	return scan(fd, addr, vma); /* closes fd */
}
