/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Multi-uprobe links (BPF_TRACE_UPROBE_MULTI, Linux >= 6.6): one link puts one program
 * on many offsets of one file, each with its own cookie (bpf_get_attach_cookie()), and
 * is detached with one synchronization instead of one per probe (~45 ms for the link
 * against ~80 ms per perf-event uprobe on 6.18). libbpf 1.1.2, Debian 12's, has no
 * wrapper, so this is the one bpf(2) call it needs: BPF_LINK_CREATE with the
 * link_create.uprobe_multi attributes of the kernel's uapi.
 *
 * A program attached this way must be loaded for it (bpftel_uprobe_multi_prepare before
 * load), and a program loaded for it cannot be attached as a perf-event uprobe: the
 * choice is made per object, before load, by bpftel_uprobe_multi_detect().
 */
#ifndef BPFTEL_MANAGER_UPROBE_MULTI_H
#define BPFTEL_MANAGER_UPROBE_MULTI_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

struct bpf_program;

/* enum bpf_attach_type BPF_TRACE_UPROBE_MULTI and BPF_F_UPROBE_MULTI_RETURN (uapi). */
#define BPFTEL_TRACE_UPROBE_MULTI     48
#define BPFTEL_F_UPROBE_MULTI_RETURN  1U
/* The kernel's cap (MAX_UPROBE_MULTI_CNT would be 1 << 20); ours is per file and module. */
#define BPFTEL_UPROBE_MULTI_MAX	      64

/*
 * Does this kernel create multi-uprobe links? 0, or a negative errno with a one-line
 * reason in reason. Tried for real: a two-instruction program on a function of this
 * process's own binary, filtered to this process. The kernel's answer is cached (it
 * worked, or EINVAL, EOPNOTSUPP, ENOTSUPP, EPERM, ENOENT); another failure, of the
 * moment (out of fds or memory), is tried again at the next call. A fault set with
 * bpftel_uprobe_multi_set_fault() replaces it (tests).
 */
int bpftel_uprobe_multi_detect(char *reason, size_t len);
/* Make detection answer err (a negative errno), as a kernel without them would; 0
 * removes the fault. For tests of the per-probe fallback (BPFTEL_FAULTS). */
void bpftel_uprobe_multi_set_fault(int err);

/*
 * File offset of fn, a function of this process's own binary (/proc/self/exe), from
 * its executable mapping in /proc/self/maps: works on a stripped binary too. Where a
 * uprobe on /proc/self/exe must go to fire on fn. -errno if it is not mapped so.
 */
long bpftel_uprobe_self_offset(const void *fn);

/* Before load: make prog loadable for multi-uprobe links. 0 or -errno. */
int bpftel_uprobe_multi_prepare(struct bpf_program *prog);

/*
 * Link prog_fd (loaded after _prepare) to cnt (<= BPFTEL_UPROBE_MULTI_MAX) file offsets
 * of the file at path, offsets[i] with cookies[i], at function return when retprobe.
 * pid > 0 limits it to that process. Returns the link's fd (close it to detach), or a
 * negative errno.
 */
int bpftel_uprobe_multi_attach(int prog_fd, const char *path, const unsigned long *offsets,
			       const __u64 *cookies, size_t cnt, bool retprobe, int pid);

#endif /* BPFTEL_MANAGER_UPROBE_MULTI_H */
