/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What USM shows of a process beside its endpoint rows: its name, cgroup and
 * container (user/common/cgroup.h), read from /proc once, when the process first sends
 * or receives an HTTP message, outside every lock; forgotten a grace period after it
 * exits (its rows fold into "(exited)" then). Bounded: with USM_PROCS_MAX processes
 * known, the one gone the longest gives a new one its place (its grace ends then);
 * with none gone, new ones are shown without (counted).
 *
 * A pid names a process only with its start time: once the process of an entry is
 * gone (its pid not running, or running with another start time, as the sweep reads
 * it), a message under the pid is another process's, which is learned at that message
 * and shown as itself, not as the one before.
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
	uint64_t start;	  /* its start time (bpftel_proc_start()), 0: unknown (gone first) */
	uint64_t noted;	  /* when start was read, on its clock (hooks.now; 0 without) */
	uint64_t gone_ns; /* when it was first seen gone (the caller's clock), or 0 */
};

/* What the table reads of processes: /proc (usm_procs_new), or a test's own. */
struct usm_procs_hooks {
	/* pid's start time, 0 when it is gone. */
	uint64_t (*start)(uint32_t pid);
	/* pid's name and cgroup into out->comm and out->cgroup. */
	void (*describe)(uint32_t pid, struct usm_proc *out);
	/* Does pid run? No /proc read: called under the endpoint table's lock. */
	bool (*runs)(uint32_t pid);
	/* The time now on start's clock, or NULL: a start time unread at a process's
	 * first message and read later is then the same process's if it is earlier. */
	uint64_t (*now)(void);
};

struct usm_procs;

struct usm_procs *usm_procs_new(void);
struct usm_procs *usm_procs_new_hooks(const struct usm_procs_hooks *hooks);
void usm_procs_free(struct usm_procs *p);
/*
 * Learn pid if new, or if its entry's process is gone: the pid may be another
 * process's now (reads /proc without holding the table's lock, and only then: a
 * running process known costs a lookup). True when the entry was a gone process's
 * and is now the new one's: what was recorded under the pid before is the old one's.
 */
bool usm_procs_note(struct usm_procs *p, uint32_t pid);
/* The same; *gone set when pid was new and already gone, nothing read of it ("?");
 * *evicted the pid of a gone process whose entry gave pid's its place (the table
 * full), else 0: its grace ends now, its rows are to fold into "(exited)" at once
 * (else a process given its pid later would be taken for it). */
bool usm_procs_note_gone(struct usm_procs *p, uint32_t pid, bool *gone, uint32_t *evicted);
/*
 * Name a process that was gone before anything was read of it (a curl that exited
 * before the agent read its first message) after what the watcher saw of it (its
 * connect or accept, its open of a library): comm, at most 15 bytes of it. Only such
 * a one: a name read from /proc is not replaced. True when named.
 */
bool usm_procs_name(struct usm_procs *p, uint32_t pid, const char *comm);
/* A copy of pid's entry: true if known. */
bool usm_procs_get(struct usm_procs *p, uint32_t pid, struct usm_proc *out);
/* pid's start time as noted (usm_proc.start), 0 when not known: per TLS message, without
 * copying the entry. */
uint64_t usm_procs_start(struct usm_procs *p, uint32_t pid);
/*
 * Is pid still to be shown as itself at now_ns? While it runs; and once gone, for
 * grace_ns after the first call that found it gone, so that a short-lived client (a
 * curl) can still be read under its pid and name a moment after it exited. A pid the
 * table does not know is shown as itself only while it runs. A process found gone
 * stays gone when its pid runs again with another start time: that is another
 * process, shown once noted (with the same start time, a failed read had found it
 * gone: a message of it makes it running again).
 */
bool usm_procs_shown(struct usm_procs *p, uint32_t pid, uint64_t now_ns, uint64_t grace_ns);
/* Find the processes that exited since the last sweep, by their start times (read
 * outside the lock: a pid that runs may be another process's); forget those gone for
 * grace_ns or more at now_ns. */
void usm_procs_sweep(struct usm_procs *p, uint64_t now_ns, uint64_t grace_ns);
/* Processes not recorded because the table was full: each once while it stays full
 * (the last 256 refused are remembered, and cost their later messages no /proc read). */
uint64_t usm_procs_dropped(struct usm_procs *p);

#endif /* BPFTEL_USM_PROCS_H */
