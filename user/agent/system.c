// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/vfs.h>

#include "system.h"
#include "user/common/log.h"

#define BPF_FS_MAGIC  0xcafe4a11
#define TRACEFS_MAGIC 0x74726163

static int ensure_mount(const char *path, const char *type, unsigned long magic, bool needed)
{
	struct statfs st;

	if (!statfs(path, &st) && (unsigned long)st.f_type == magic)
		return 0;
	if (mount(type, path, type, 0, NULL)) {
		int err = -errno;

		if (needed)
			pr_err("cannot mount %s at %s: %s", type, path, strerror(-err));
		else
			pr_warn("cannot mount %s at %s: %s (nothing of ours is pinned there: going on)",
				type, path, strerror(-err));
		return err;
	}
	pr_info("mounted %s at %s", type, path);
	return 0;
}

int bpftel_system_ensure_mounts(void)
{
	ensure_mount(BPFTEL_BPFFS_PATH, "bpf", BPF_FS_MAGIC, false);
	return ensure_mount(BPFTEL_TRACEFS_PATH, "tracefs", TRACEFS_MAGIC, true);
}
