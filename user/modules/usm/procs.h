/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What USM shows of a process beside its endpoint rows: its name, cgroup and
 * container (user/common/cgroup.h), read from /proc once, when the process first sends
 * or receives an HTTP message, outside every lock; forgotten when it exits. Bounded:
 * beyond USM_PROCS_MAX processes, new ones are shown without (counted).
 */
#ifndef BPFTEL_USM_PROCS_H
#define BPFTEL_USM_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "user/common/cgroup.h"

#define USM_PROCS_MAX 4096

struct usm_proc {
	uint32_t pid;
	char comm[16];
	struct bpftel_cgroup_info cgroup;
};

struct usm_procs;

struct usm_procs *usm_procs_new(void);
void usm_procs_free(struct usm_procs *p);
/* Learn pid if new (reads /proc without holding the table's lock). */
void usm_procs_note(struct usm_procs *p, uint32_t pid);
/* A copy of pid's entry: true if known. */
bool usm_procs_get(struct usm_procs *p, uint32_t pid, struct usm_proc *out);
/* Forget the processes for which alive(pid) is false. */
void usm_procs_sweep(struct usm_procs *p, bool (*alive)(uint32_t pid));
/* Processes not recorded because the table was full. */
uint64_t usm_procs_dropped(struct usm_procs *p);

#endif /* BPFTEL_USM_PROCS_H */
