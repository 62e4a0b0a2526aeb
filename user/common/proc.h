/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* What /proc says of another process that modules show beside their rows. */
#ifndef BPFTEL_PROC_H
#define BPFTEL_PROC_H

#include <stddef.h>
#include <linux/types.h>

/* pid's name from /proc/<pid>/comm, without the newline the kernel ends it with; "?"
 * when it cannot be read (gone). The name is the process's own choice, newlines
 * included: escape it on output. */
void bpftel_proc_comm(__u32 pid, char *comm, size_t size);

/* Fields field .. field + n - 1 of /proc/<pid>/stat (numbered as in proc(5), from 3:
 * those after the name) into out: n, or 0 when the process is gone or they cannot be
 * read. */
int bpftel_proc_stat(__u32 pid, int field, int n, unsigned long long *out);
/* The same from a stat line's text (NUL-terminated). */
int bpftel_proc_stat_parse(const char *text, int field, int n, unsigned long long *out);

/* pid's start time, in clock ticks after boot (field 22 of /proc/<pid>/stat): with the
 * pid, it names one process, whatever process has the pid later. 0 when it is gone or
 * cannot be read. */
__u64 bpftel_proc_start(__u32 pid);

/* pid's real user id (the first of /proc/<pid>/status's "Uid:", as this process's user
 * namespace maps it): the user who runs it, which it cannot change to another's without
 * privilege. 0 or -errno (-ENOENT: gone). */
int bpftel_proc_uid(__u32 pid, __u32 *uid);

/*
 * The user accountable for pid: its real uid, or for a process in a user namespace (a
 * container, rootless or not) the uid that created the outermost one below this
 * process's own namespace. A rootless container runs its processes as many host uids
 * (the user's subordinate range, /etc/subuid): they all answer to the user who made
 * it. 0 or -errno (-ENOENT: gone).
 */
int bpftel_proc_owner(__u32 pid, __u32 *uid);

#endif /* BPFTEL_PROC_H */
