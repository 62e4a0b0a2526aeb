/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Host preparation the agent needs before loading BPF: bpffs at /sys/fs/bpf and tracefs
 * at /sys/kernel/tracing (tracepoint ids are read from it), mounted if absent. Mounts
 * are left in place at exit: other tools share them.
 */
#ifndef BPFTEL_SYSTEM_H
#define BPFTEL_SYSTEM_H

#define BPFTEL_BPFFS_PATH   "/sys/fs/bpf"
#define BPFTEL_TRACEFS_PATH "/sys/kernel/tracing"

/* 0 when mounted (now or before), -errno otherwise (logged). */
int bpftel_system_ensure_mounts(void);

#endif /* BPFTEL_SYSTEM_H */
