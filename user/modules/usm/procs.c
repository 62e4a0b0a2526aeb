// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* USM's processes: name, cgroup, container (procs.h). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "procs.h"
#include "user/common/proc.h"

/* Pids refused while the table is full, remembered so that their later messages cost a
 * lookup, not /proc reads, and count once; forgotten once the table has room again. */
#define REFUSED_MAX 256

struct usm_procs {
	pthread_mutex_t lock;
	size_t n;
	struct usm_proc *procs; /* USM_PROCS_MAX, sorted by pid */
	uint64_t dropped;
	uint32_t refused[REFUSED_MAX];
	size_t nrefused, next_refused; /* entries used; the next one replaced when full */
	struct usm_procs_hooks hooks;
};

static uint64_t proc_start(uint32_t pid)
{
	return bpftel_proc_start(pid);
}

static void proc_describe(uint32_t pid, struct usm_proc *out)
{
	bpftel_proc_comm(pid, out->comm, sizeof(out->comm));
	bpftel_cgroup_of(pid, &out->cgroup);
}

static bool proc_runs(uint32_t pid)
{
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

static uint64_t proc_ticks_now(void)
{
	return bpftel_proc_ticks_now();
}

struct usm_procs *usm_procs_new_hooks(const struct usm_procs_hooks *hooks)
{
	struct usm_procs *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->procs = calloc(USM_PROCS_MAX, sizeof(*p->procs));
	if (!p->procs) {
		free(p);
		return NULL;
	}
	pthread_mutex_init(&p->lock, NULL);
	p->hooks = *hooks;
	return p;
}

struct usm_procs *usm_procs_new(void)
{
	static const struct usm_procs_hooks proc = {
		.start = proc_start,
		.describe = proc_describe,
		.runs = proc_runs,
		.now = proc_ticks_now,
	};

	return usm_procs_new_hooks(&proc);
}

void usm_procs_free(struct usm_procs *p)
{
	if (!p)
		return;
	pthread_mutex_destroy(&p->lock);
	free(p->procs);
	free(p);
}

/* Where pid is, or would go: the table is sorted by pid, so that a message (every one
 * looks its process up) costs a binary search, not a scan of up to USM_PROCS_MAX
 * entries, which any local user could fill with short-lived processes. */
static size_t slot(const struct usm_procs *p, uint32_t pid)
{
	size_t lo = 0, hi = p->n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (p->procs[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct usm_proc *find(struct usm_procs *p, uint32_t pid)
{
	size_t i = slot(p, pid);

	return i < p->n && p->procs[i].pid == pid ? &p->procs[i] : NULL;
}

/* The entry of the process found gone the longest ago, to make room; p->n if none is
 * gone. */
static size_t oldest_gone(const struct usm_procs *p)
{
	size_t i, old = p->n;

	for (i = 0; i < p->n; i++) {
		if (p->procs[i].gone_ns &&
		    (old == p->n || p->procs[i].gone_ns < p->procs[old].gone_ns))
			old = i;
	}
	return old;
}

/* Insert e (its pid not in the table); false when the table is full of running
 * processes. Full, a process gone gives way, the one gone the longest: its grace (its
 * rows under its own name) ends early, folded into "(exited)", rather than a running
 * process go undescribed (one user's stream of short-lived processes would otherwise
 * keep every other new process out for their grace). */
static bool insert(struct usm_procs *p, const struct usm_proc *e, uint32_t *evicted)
{
	size_t i;

	if (p->n == USM_PROCS_MAX) {
		i = oldest_gone(p);
		if (i == p->n)
			return false;
		*evicted = p->procs[i].pid;
		memmove(&p->procs[i], &p->procs[i + 1], (p->n - i - 1) * sizeof(*p->procs));
		p->n--;
	}
	i = slot(p, e->pid);
	memmove(&p->procs[i + 1], &p->procs[i], (p->n - i) * sizeof(*p->procs));
	p->procs[i] = *e;
	p->n++;
	return true;
}

/*
 * What pid is now, outside the lock. The name and cgroup are read between two reads
 * of the start time: equal, they are that process's, not of one that exited and gave
 * its pid to another meanwhile (else read again, a bounded number of times). A gone
 * process is not read: its name is "?".
 */
static void learn(struct usm_procs *p, uint32_t pid, struct usm_proc *e)
{
	uint64_t again;
	int tries = 0;

	do {
		memset(e, 0, sizeof(*e));
		e->pid = pid;
		snprintf(e->comm, sizeof(e->comm), "?");
		e->noted = p->hooks.now ? p->hooks.now() : 0;
		e->start = p->hooks.start(pid);
		if (!e->start)
			return;
		p->hooks.describe(pid, e);
		again = p->hooks.start(pid);
	} while (again != e->start && ++tries < 3);
	if (again != e->start)
		e->start = 0; /* cannot tell whose: learned again at its next message */
}

/*
 * Is the process whose start time is start (0: none) the one of entry e? The same start,
 * or e's unread (the read failed: gone, or the agent out of fds, say) and start earlier
 * than that read: the process ran then, and the message that made e was taken as its,
 * as a read that worked would have.
 */
static bool same_process(const struct usm_proc *e, uint64_t start)
{
	return start && (start == e->start || (!e->start && start < e->noted));
}

static bool refused_locked(const struct usm_procs *p, uint32_t pid)
{
	size_t i;

	for (i = 0; i < p->nrefused; i++)
		if (p->refused[i] == pid)
			return true;
	return false;
}

static void refuse_locked(struct usm_procs *p, uint32_t pid)
{
	if (refused_locked(p, pid))
		return;
	p->dropped++;
	p->refused[p->next_refused] = pid;
	p->next_refused = (p->next_refused + 1) % REFUSED_MAX;
	if (p->nrefused < REFUSED_MAX)
		p->nrefused++;
}

bool usm_procs_note(struct usm_procs *p, uint32_t pid)
{
	uint32_t evicted;

	return usm_procs_note_gone(p, pid, NULL, &evicted);
}

bool usm_procs_note_gone(struct usm_procs *p, uint32_t pid, bool *gone, uint32_t *evicted)
{
	struct usm_proc e, *was;
	bool known, reused = false;

	*evicted = 0;
	if (gone)
		*gone = false;
	if (!pid)
		return false;
	pthread_mutex_lock(&p->lock);
	was = find(p, pid);
	/* One noted gone before anything was read of it (start 0) is looked at again at
	 * each message until a sweep finds it gone: the pid may be a new process's. */
	known = (was && !was->gone_ns && was->start) || (!was && refused_locked(p, pid));
	pthread_mutex_unlock(&p->lock);
	if (known)
		return false;
	/* New, or its process gone: a late message of that process (then the pid runs
	 * nothing, or not yet another) or the first of a new process given the pid. */
	learn(p, pid, &e);
	pthread_mutex_lock(&p->lock);
	was = find(p, pid);
	if (!was) {
		if (!insert(p, &e, evicted))
			refuse_locked(p, pid);
		else if (gone)
			*gone = !e.start;
	} else if ((was->gone_ns || !was->start) && e.start && !same_process(was, e.start)) {
		*was = e;
		reused = true;
	} else if (!was->start && e.start) {
		/* Unread at its first message, started before it: the same process, read now,
		 * its rows kept (not folded as a gone one's). */
		*was = e;
	} else if (was->gone_ns && e.start) { /* e.start == was->start */
		/* The same process, running: the look that found it gone could not read it
		 * (the agent out of fds, say). Kept as running, its messages read nothing
		 * again, and its rows do not fold while it lives. */
		was->gone_ns = 0;
	}
	pthread_mutex_unlock(&p->lock);
	return reused;
}

bool usm_procs_name(struct usm_procs *p, uint32_t pid, const char *comm)
{
	struct usm_proc *e;
	bool named = false;

	pthread_mutex_lock(&p->lock);
	e = find(p, pid);
	if (e && !e->start && !strcmp(e->comm, "?") && comm[0]) {
		snprintf(e->comm, sizeof(e->comm), "%.*s", (int)sizeof(e->comm) - 1, comm);
		named = true;
	}
	pthread_mutex_unlock(&p->lock);
	return named;
}

bool usm_procs_get(struct usm_procs *p, uint32_t pid, struct usm_proc *out)
{
	struct usm_proc *e;

	pthread_mutex_lock(&p->lock);
	e = find(p, pid);
	if (e)
		*out = *e;
	pthread_mutex_unlock(&p->lock);
	return e != NULL;
}

uint64_t usm_procs_start(struct usm_procs *p, uint32_t pid)
{
	struct usm_proc *e;
	uint64_t start;

	pthread_mutex_lock(&p->lock);
	e = find(p, pid);
	start = e ? e->start : 0;
	pthread_mutex_unlock(&p->lock);
	return start;
}

bool usm_procs_shown(struct usm_procs *p, uint32_t pid, uint64_t now_ns, uint64_t grace_ns)
{
	bool running = p->hooks.runs(pid), shown = running;
	struct usm_proc *e;

	pthread_mutex_lock(&p->lock);
	e = find(p, pid);
	/* Found gone once, gone here: a process with the pid now is another one, which
	 * its first message will note (or the same one, its start time read again: a
	 * failed read had found it gone; usm_procs_note_gone() makes it running). */
	if (e && (!running || e->gone_ns)) {
		if (!e->gone_ns)
			e->gone_ns = now_ns;
		shown = now_ns - e->gone_ns < grace_ns;
	}
	pthread_mutex_unlock(&p->lock);
	return shown;
}

/* A running entry as the sweep read it: pid, the start time the entry has, and the
 * one the pid has now. */
struct proc_look {
	uint32_t pid;
	uint64_t start, now;
};

/* The running entries, copied under the lock; count, or 0 (none, or no memory: the
 * next sweep looks). */
static size_t running_entries(struct usm_procs *p, struct proc_look **out)
{
	struct proc_look *look;
	size_t i, n = 0;

	pthread_mutex_lock(&p->lock);
	look = p->n ? malloc(p->n * sizeof(*look)) : NULL;
	for (i = 0; look && i < p->n; i++) {
		if (!p->procs[i].gone_ns)
			look[n++] = (struct proc_look){p->procs[i].pid, p->procs[i].start, 0};
	}
	pthread_mutex_unlock(&p->lock);
	*out = look;
	return n;
}

void usm_procs_sweep(struct usm_procs *p, uint64_t now_ns, uint64_t grace_ns)
{
	size_t n, i, kept;
	struct proc_look *look;
	struct usm_proc *e;
	bool room = false;

	/* Start times read without the lock: /proc of other processes. */
	n = running_entries(p, &look);
	for (i = 0; i < n; i++)
		look[i].now = p->hooks.start(look[i].pid);
	pthread_mutex_lock(&p->lock);
	for (i = 0; i < n; i++) {
		e = find(p, look[i].pid);
		/* Gone, or its pid another process's (an entry of unknown start: unless the
		 * process with the pid ran when it was read, same_process()); unless noted
		 * anew meanwhile. */
		if (e && !e->gone_ns && e->start == look[i].start &&
		    !same_process(e, look[i].now))
			e->gone_ns = now_ns;
	}
	for (i = 0, kept = 0; i < p->n; i++) { /* in order: the table stays sorted */
		e = &p->procs[i];
		if (!e->gone_ns || now_ns - e->gone_ns < grace_ns)
			p->procs[kept++] = *e;
		room |= e->gone_ns != 0; /* a gone one gives way (insert()) */
	}
	p->n = kept;
	if (room || p->n < USM_PROCS_MAX)
		p->nrefused = p->next_refused = 0; /* learned at their next message */
	pthread_mutex_unlock(&p->lock);
	free(look);
}

uint64_t usm_procs_dropped(struct usm_procs *p)
{
	uint64_t n;

	pthread_mutex_lock(&p->lock);
	n = p->dropped;
	pthread_mutex_unlock(&p->lock);
	return n;
}
