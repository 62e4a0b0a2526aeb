/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* What /proc says of another process that modules show beside their rows. */
#ifndef BPFTEL_PROC_H
#define BPFTEL_PROC_H

#include <stddef.h>
#include <sys/types.h>
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
/* pid's whole stat line into buf (NUL-terminated), from procfd's <pid>/stat (a /proc
 * directory's descriptor; AT_FDCWD: /proc's): its length, or -errno. */
ssize_t bpftel_proc_stat_text(int procfd, __u32 pid, char *buf, size_t size);

/* pid's start time, in clock ticks after boot (field 22 of /proc/<pid>/stat): with the
 * pid, it names one process, whatever process has the pid later. 0 when it is gone or
 * cannot be read. */
__u64 bpftel_proc_start(__u32 pid);
/* The time now on bpftel_proc_start()'s clock (ticks after boot, floored): a process
 * whose start is earlier ran at this call. 0 if the clock cannot be read. */
__u64 bpftel_proc_ticks_now(void);

/* A start time of bpftel_proc_start()'s on the clock of BPF's stamps (bpf_ktime_get_ns:
 * CLOCK_MONOTONIC, which stops while the host is suspended; the ticks count from boot
 * and do not): never later than the process's true start, the tick floored and the
 * clocks' gap taken as it is now, the widest it has been. 0 when start is 0. */
__u64 bpftel_proc_start_mono_ns(__u64 start);

/* pid's real user id (the first of /proc/<pid>/status's "Uid:", as this process's user
 * namespace maps it): the user who runs it, which it cannot change to another's without
 * privilege. 0 or -errno (-ENOENT: gone). */
int bpftel_proc_uid(__u32 pid, __u32 *uid);

/*
 * Who is accountable for pid, as a key (bpftel_deadline_call's owner):
 * - its real uid (below 1 << 32), in this process's own user namespace;
 * - in a user namespace a user made (a rootless container, whose processes run as many
 *   uids of the user's subordinate range, /etc/subuid): that user's uid, whatever
 *   namespaces they made below it;
 * - in one root made (a container runtime's, one per container or pod: Kubernetes'
 *   user namespaces, Docker's userns-remap): BPFTEL_PROC_OWNER_NS | the namespace's
 *   inode number, so that one container's processes answer for themselves, not for
 *   root's.
 * The outermost namespace below this process's own is the one that counts. 0 or -errno
 * (-ENOENT: gone).
 */
#define BPFTEL_PROC_OWNER_NS (1ULL << 32)
int bpftel_proc_owner(__u32 pid, __u64 *owner);

#endif /* BPFTEL_PROC_H */
