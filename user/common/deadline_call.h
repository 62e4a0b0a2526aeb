/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A call that may block for ever, run on a thread of its own and waited for up to a
 * deadline. For what touches another process's files: a file system that process
 * controls (FUSE, even beneath an overlay mount) can make any lookup, stat, open or read
 * wait for a daemon that never answers, and no flag of ours makes those calls give up.
 *
 * The caller allocates a struct bpftel_deadline_call (usually inside its own job
 * struct), sets run and release, and calls bpftel_deadline_call(). When the call
 * returned in time, the caller owns the job again and reads its results. When it did
 * not, the job is abandoned: the thread keeps waiting inside run, and when run returns
 * (the file system answered, or its daemon died and the kernel failed the request) the
 * thread calls release, which undoes what run did (closes its fds) and frees the job.
 * Abandoned threads are few and bounded: at most BPFTEL_DEADLINE_STUCK_MAX wait at once,
 * and at most BPFTEL_DEADLINE_STUCK_PER_OWNER of one owner (c->owner: whose file it
 * touches, the user of the process that opened it); beyond either, calls are refused
 * before they start. So one user who stalls many files stops the opens of their own
 * processes, not everyone's: it takes BPFTEL_DEADLINE_STUCK_MAX / _PER_OWNER users.
 * And an owner whose calls were abandoned _PER_OWNER times within
 * BPFTEL_DEADLINE_STRIKE_WINDOW_S is refused until that window ends, stuck calls or
 * not: one who lets them end and stalls new ones would have kept the caller waiting
 * out one deadline after another.
 */
#ifndef BPFTEL_COMMON_DEADLINE_CALL_H
#define BPFTEL_COMMON_DEADLINE_CALL_H

#include <pthread.h>
#include <stdbool.h>
#include <linux/types.h>

/* Threads left waiting on calls past their deadline, at most (each holds its stack, 256
 * KiB of address space, and what run holds), and of one owner: an owner who stalls more
 * files gets their calls refused at once, and others theirs only once the whole is
 * reached. */
#define BPFTEL_DEADLINE_STUCK_MAX	64
#define BPFTEL_DEADLINE_STUCK_PER_OWNER 4
/* How long an owner's abandoned calls count against it, from the first. */
#define BPFTEL_DEADLINE_STRIKE_WINDOW_S 60
/* The owner of calls nobody is known to own (the process was gone): one more owner,
 * capped like the others. */
#define BPFTEL_DEADLINE_NO_OWNER (~0ULL)

struct bpftel_deadline_call {
	int (*run)(struct bpftel_deadline_call *c);	/* on the thread: may block */
	void (*release)(struct bpftel_deadline_call *c); /* undo run's results, free c */
	__u64 owner; /* whose call: proc.h's bpftel_proc_owner(), or _NO_OWNER */
	int ret;					/* what run returned */
	/* private */
	pthread_cond_t cond;
	bool done, abandoned;
};

/*
 * Run c->run on a new thread and wait for it up to timeout_ms. Returns 0 when it
 * returned (its result in c->ret; the caller owns c), -ETIMEDOUT when it did not (c is
 * the thread's now: never touch it again), -EBUSY when BPFTEL_DEADLINE_STUCK_MAX calls
 * are still stuck, -EDQUOT when BPFTEL_DEADLINE_STUCK_PER_OWNER of c->owner's are, or
 * were abandoned in its window (run not called; the caller owns c), or another -errno
 * when no thread could start (the same).
 */
int bpftel_deadline_call(struct bpftel_deadline_call *c, unsigned int timeout_ms);

struct bpftel_deadline_stats {
	__u64 abandoned; /* calls given up at their deadline, all time */
	__u64 refused;	 /* calls refused: BPFTEL_DEADLINE_STUCK_MAX were stuck ... */
	__u64 refused_owner; /* ... or, of those, _PER_OWNER of the call's owner */
	__u32 stuck;	 /* of the abandoned, those whose run has not returned yet */
};

void bpftel_deadline_stats(struct bpftel_deadline_stats *s);

/* Tests: the monotonic clock the owners' windows are measured with (ns); NULL: the
 * real one. */
void bpftel_deadline_set_clock(__u64 (*clock_ns)(void));

#endif /* BPFTEL_COMMON_DEADLINE_CALL_H */
