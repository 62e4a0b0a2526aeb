/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The file a mapping of the agent's own is of, as the kernel holds it
 * (bpf/real_file.bpf.c): on overlayfs the layer's file, the one uprobes attach to,
 * which stat and /proc no longer show on newer kernels. One iterator for the process,
 * loaded while a holder wants it (the uprobe registry, from its creation to its end).
 * Without it (a kernel before 6.1 or without BTF, a load refused), lookups say
 * -ENOENT and callers fall back to what stat shows (right on older kernels).
 */
#ifndef BPFTEL_SHAREDLIBS_REAL_FILE_H
#define BPFTEL_SHAREDLIBS_REAL_FILE_H

#include <stdbool.h>
#include <sys/types.h>
#include <linux/types.h>

struct bpftel_real_file {
	dev_t dev;
	__u64 ino;
	__u32 magic; /* its file system's (statfs f_type) */
	dev_t sdev;  /* on btrfs, its subvolume's device (what stat gives there); else 0 */
};

/* Hold the iterator, loading it if no one holds it yet. 0, or -errno when it could not
 * be loaded (logged once; lookups then say -ENOENT). Every call takes a put. */
int bpftel_real_files_get(void);
void bpftel_real_files_put(void);

/* The file mapped at addr, the first address of a mapping of this process. -ENOENT: no
 * iterator held, or no mapping of a file starts at addr. Safe from any thread. */
int bpftel_real_file_at(unsigned long addr, struct bpftel_real_file *out);

#endif /* BPFTEL_SHAREDLIBS_REAL_FILE_H */
