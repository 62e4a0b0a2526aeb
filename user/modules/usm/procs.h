/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What USM shows of a process beside its endpoint rows: its name, cgroup and
 * container (user/common/cgroup.h), read from /proc once, when the process first sends
 * or receives an HTTP message, outside every lock; forgotten a grace period after it
 * exits (its rows fold into "(exited)" then, not before). Bounded:
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
	uint64_t gone_ns; /* when it was first seen gone (the caller's clock), or 0 */
};

struct usm_procs;

struct usm_procs *usm_procs_new(void);
void usm_procs_free(struct usm_procs *p);
/* Learn pid if new (reads /proc without holding the table's lock). */
void usm_procs_note(struct usm_procs *p, uint32_t pid);
/* A copy of pid's entry: true if known. */
bool usm_procs_get(struct usm_procs *p, uint32_t pid, struct usm_proc *out);
/*
 * Is pid still to be shown as itself at now_ns? While it runs; and once gone, for
 * grace_ns after the first call that found it gone, so that a short-lived client (a
 * curl) can still be read under its pid and name a moment after it exited. A pid the
 * table does not know is shown as itself only while it runs.
 */
bool usm_procs_shown(struct usm_procs *p, uint32_t pid, uint64_t now_ns, uint64_t grace_ns);
/* Forget the processes gone for grace_ns or more at now_ns. */
void usm_procs_sweep(struct usm_procs *p, uint64_t now_ns, uint64_t grace_ns);
/* Processes not recorded because the table was full. */
uint64_t usm_procs_dropped(struct usm_procs *p);

#endif /* BPFTEL_USM_PROCS_H */
