// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Background teardown of links whose programs no longer matter (see bpf/lib/stop_gate.h
 * and the uprobe registry's idle files).
 *
 * Destroying a uprobe link waits for the kernel: on 6.18 ~45 ms for a multi-uprobe link
 * and ~80 ms for a perf-event one, almost all of it an RCU grace period. Links destroyed
 * from several threads at once share their grace periods (64 multi-uprobe links: 2.9 s
 * from one thread, 0.26 s from 16; perf-event uprobes gain less, their teardown takes a
 * global mutex), so the reaper is a small pool: each queued link gets a thread of its
 * own up to BPFTEL_REAPER_THREADS, threads exit when the queue is empty, and a later
 * release starts them again. Nothing waits for them but bpftel_links_settle().
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "manager.h"
#include "user/common/log.h"

/* Enough to share grace periods among everything a stop releases at once. */
#define BPFTEL_REAPER_THREADS 16

struct node {
	struct node *next;
	struct bpf_link *link; /* or, when NULL, fd */
	int fd;
	bpftel_release_done_fn done;
	void *ctx;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t idle;
	struct node *head, **tail;
	size_t pending;	 /* queued or being destroyed */
	size_t nthreads; /* running reaper threads */
} reaper = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.idle = PTHREAD_COND_INITIALIZER,
	.tail = &reaper.head,
};

static void destroy(struct node *n)
{
	if (n->link)
		bpf_link__destroy(n->link);
	else if (n->fd >= 0)
		close(n->fd);
	if (n->done)
		n->done(n->ctx);
	free(n);
}

static void *reaper_main(void *arg)
{
	struct node *n;

	(void)arg;
	pthread_mutex_lock(&reaper.lock);
	while ((n = reaper.head)) {
		reaper.head = n->next;
		if (!reaper.head)
			reaper.tail = &reaper.head;
		pthread_mutex_unlock(&reaper.lock);
		destroy(n);
		pthread_mutex_lock(&reaper.lock);
		reaper.pending--;
	}
	reaper.nthreads--;
	pthread_cond_broadcast(&reaper.idle);
	pthread_mutex_unlock(&reaper.lock);
	return NULL;
}

/* With reaper.lock: one more thread if the queue holds more than the threads take. */
static void spawn_locked(void)
{
	pthread_attr_t attr;
	pthread_t th;
	int err;

	if (reaper.nthreads >= BPFTEL_REAPER_THREADS || reaper.nthreads >= reaper.pending)
		return;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024); /* a close(2) and a callback */
	err = pthread_create(&th, &attr, reaper_main, NULL);
	pthread_attr_destroy(&attr);
	if (!err)
		reaper.nthreads++;
	else if (!reaper.nthreads)
		pr_warn("reaper: cannot start a thread (%s): destroying in place", strerror(err));
}

void bpftel_release(struct bpf_link *link, int fd, bpftel_release_done_fn done, void *ctx)
{
	struct node *n;

	if (!link && fd < 0) {
		if (done)
			done(ctx);
		return;
	}
	n = malloc(sizeof(*n));
	if (!n) {
		struct node stack = {.link = link, .fd = fd, .done = done, .ctx = ctx};

		/* Slow, not lost. */
		if (link)
			bpf_link__destroy(link);
		else
			close(fd);
		if (stack.done)
			stack.done(stack.ctx);
		return;
	}
	*n = (struct node){.link = link, .fd = fd, .done = done, .ctx = ctx};
	pthread_mutex_lock(&reaper.lock);
	*reaper.tail = n;
	reaper.tail = &n->next;
	reaper.pending++;
	spawn_locked();
	if (reaper.nthreads) {
		pthread_mutex_unlock(&reaper.lock);
		return;
	}
	/* No thread could start and none runs: the queue holds only n. */
	reaper.head = NULL;
	reaper.tail = &reaper.head;
	reaper.pending--;
	pthread_mutex_unlock(&reaper.lock);
	destroy(n);
}

void bpftel_link_release(struct bpf_link *link)
{
	if (link)
		bpftel_release(link, -1, NULL, NULL);
}

size_t bpftel_links_pending(void)
{
	size_t n;

	pthread_mutex_lock(&reaper.lock);
	n = reaper.pending;
	pthread_mutex_unlock(&reaper.lock);
	return n;
}

void bpftel_links_settle(void)
{
	pthread_mutex_lock(&reaper.lock);
	while (reaper.pending || reaper.nthreads)
		pthread_cond_wait(&reaper.idle, &reaper.lock);
	pthread_mutex_unlock(&reaper.lock);
}

int bpftel_stop_gate_close(struct bpf_object *obj)
{
	struct bpf_map *map = obj ? bpf_object__find_map_by_name(obj, BPFTEL_STOP_GATE_SEC) : NULL;
	__u32 key = 0, one = 1;
	int fd;

	if (!map || bpf_map__value_size(map) != sizeof(one))
		return -ENOENT;
	fd = bpf_map__fd(map);
	if (fd < 0)
		return -ENOENT; /* not loaded */
	return bpf_map_update_elem(fd, &key, &one, BPF_ANY) ? -errno : 0;
}
