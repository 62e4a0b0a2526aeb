/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Host preparation the agent needs before loading BPF: tracefs at /sys/kernel/tracing
 * (tracepoint ids are read from it), mounted if absent; bpffs at /sys/fs/bpf, mounted if
 * absent where it can be, for the tools users inspect our objects with (bpftool): the
 * agent pins nothing, so a container without it (or with it read-only) runs all the
 * same. Mounts are left in place at exit: other tools share them.
 */
#ifndef BPFTEL_SYSTEM_H
#define BPFTEL_SYSTEM_H

#define BPFTEL_BPFFS_PATH   "/sys/fs/bpf"
#define BPFTEL_TRACEFS_PATH "/sys/kernel/tracing"

/* 0 when tracefs is mounted (now or before), -errno otherwise (logged); bpffs not
 * mounted is only warned of. */
int bpftel_system_ensure_mounts(void);

#endif /* BPFTEL_SYSTEM_H */
