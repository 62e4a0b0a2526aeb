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

struct usm_procs {
	pthread_mutex_t lock;
	size_t n;
	struct usm_proc *procs; /* USM_PROCS_MAX */
	uint64_t dropped;
};

struct usm_procs *usm_procs_new(void)
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
	return p;
}

void usm_procs_free(struct usm_procs *p)
{
	if (!p)
		return;
	pthread_mutex_destroy(&p->lock);
	free(p->procs);
	free(p);
}

static struct usm_proc *find(struct usm_procs *p, uint32_t pid)
{
	size_t i;

	for (i = 0; i < p->n; i++) {
		if (p->procs[i].pid == pid)
			return &p->procs[i];
	}
	return NULL;
}

void usm_procs_note(struct usm_procs *p, uint32_t pid)
{
	struct usm_proc e = {.pid = pid};
	bool known;

	pthread_mutex_lock(&p->lock);
	known = find(p, pid) != NULL;
	pthread_mutex_unlock(&p->lock);
	if (known || !pid)
		return;
	bpftel_proc_comm(pid, e.comm, sizeof(e.comm));
	bpftel_cgroup_of(pid, &e.cgroup);
	pthread_mutex_lock(&p->lock);
	if (!find(p, pid)) {
		if (p->n < USM_PROCS_MAX)
			p->procs[p->n++] = e;
		else
			p->dropped++;
	}
	pthread_mutex_unlock(&p->lock);
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

static bool runs(uint32_t pid)
{
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

bool usm_procs_shown(struct usm_procs *p, uint32_t pid, uint64_t now_ns, uint64_t grace_ns)
{
	bool running = runs(pid), shown = running;
	struct usm_proc *e;

	pthread_mutex_lock(&p->lock);
	e = find(p, pid);
	if (e && running) {
		e->gone_ns = 0; /* a new process with the pid: not yet swept */
	} else if (e) {
		if (!e->gone_ns)
			e->gone_ns = now_ns;
		shown = now_ns - e->gone_ns < grace_ns;
	}
	pthread_mutex_unlock(&p->lock);
	return shown;
}

void usm_procs_sweep(struct usm_procs *p, uint64_t now_ns, uint64_t grace_ns)
{
	size_t i;

	pthread_mutex_lock(&p->lock);
	for (i = 0; i < p->n;) {
		struct usm_proc *e = &p->procs[i];

		if (!e->gone_ns && !runs(e->pid))
			e->gone_ns = now_ns;
		if (e->gone_ns && now_ns - e->gone_ns >= grace_ns)
			*e = p->procs[--p->n];
		else
			i++;
	}
	pthread_mutex_unlock(&p->lock);
}

uint64_t usm_procs_dropped(struct usm_procs *p)
{
	uint64_t n;

	pthread_mutex_lock(&p->lock);
	n = p->dropped;
	pthread_mutex_unlock(&p->lock);
	return n;
}
