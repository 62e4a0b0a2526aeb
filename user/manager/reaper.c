// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Background teardown of links whose programs no longer matter (see bpf/lib/stop_gate.h
 * and the uprobe registry's idle files).
 *
 * Destroying a uprobe link waits for the kernel: on 6.18 ~45 ms for a multi-uprobe link
 * and ~80 ms for a perf-event one, almost all of it an RCU grace period.
 *
 * Raw links (fds: multi-uprobe links) destroyed from several threads at once share
 * their grace periods (64 of them: 2.9 s from one thread, 0.26 s from 16), so they go
 * to a small pool: each gets a thread of its own, up to BPFTEL_REAPER_THREADS.
 * libbpf links (perf-event uprobes, tracepoints) gain little that way: their teardown
 * holds the kernel's trace event mutex across its grace period, and so would every new
 * attach queued behind a pile of them (a restart with per-probe links went from ~30 ms
 * to 2.5 s). They are destroyed one at a time, in order, by one thread.
 *
 * Threads exit when their queue is empty; a later release starts them again. Nothing
 * waits for them but bpftel_links_settle().
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
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

/* One queue: its items, and the threads that drain it. */
struct queue {
	struct node *head, **tail;
	size_t pending;	    /* queued or being destroyed */
	size_t nthreads;    /* running threads */
	size_t max_threads; /* 1: in order */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t idle;
	struct queue parallel; /* raw link fds */
	struct queue serial;   /* libbpf links */
	uint64_t released;     /* links handed over, ever */
} reaper = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.idle = PTHREAD_COND_INITIALIZER,
	.parallel = {.tail = &reaper.parallel.head, .max_threads = BPFTEL_REAPER_THREADS},
	.serial = {.tail = &reaper.serial.head, .max_threads = 1},
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
	struct queue *q = arg;
	struct node *n;

	/* Named: short-lived, they come and go with releases (`top -H`, and the tests
	 * that count a component's own threads leave them out). */
	pthread_setname_np(pthread_self(), BPFTEL_REAPER_THREAD_NAME);
	pthread_mutex_lock(&reaper.lock);
	while ((n = q->head)) {
		q->head = n->next;
		if (!q->head)
			q->tail = &q->head;
		pthread_mutex_unlock(&reaper.lock);
		destroy(n);
		pthread_mutex_lock(&reaper.lock);
		q->pending--;
	}
	q->nthreads--;
	pthread_cond_broadcast(&reaper.idle);
	pthread_mutex_unlock(&reaper.lock);
	return NULL;
}

/* With reaper.lock: one more thread for q if it holds more than its threads take. */
static void spawn_locked(struct queue *q)
{
	pthread_attr_t attr;
	pthread_t th;
	int err;

	if (q->nthreads >= q->max_threads || q->nthreads >= q->pending)
		return;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024); /* a close(2) and a callback */
	err = pthread_create(&th, &attr, reaper_main, q);
	pthread_attr_destroy(&attr);
	if (!err)
		q->nthreads++;
	else if (!q->nthreads)
		pr_warn("reaper: cannot start a thread (%s): destroying in place", strerror(err));
}

static void release(struct bpf_link *link, int fd, bpftel_release_done_fn done, void *ctx,
		    bool first)
{
	struct queue *q = link ? &reaper.serial : &reaper.parallel;
	struct node *n;

	if (!link && fd < 0) {
		if (done)
			done(ctx);
		return;
	}
	__atomic_add_fetch(&reaper.released, 1, __ATOMIC_RELAXED);
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
	if (first) {
		n->next = q->head;
		q->head = n;
		if (q->tail == &q->head)
			q->tail = &n->next;
	} else {
		*q->tail = n;
		q->tail = &n->next;
	}
	q->pending++;
	spawn_locked(q);
	if (q->nthreads) {
		pthread_mutex_unlock(&reaper.lock);
		return;
	}
	/* No thread could start and none runs: the queue holds only n. */
	q->head = NULL;
	q->tail = &q->head;
	q->pending--;
	pthread_mutex_unlock(&reaper.lock);
	destroy(n);
}

void bpftel_release(struct bpf_link *link, int fd, bpftel_release_done_fn done, void *ctx)
{
	release(link, fd, done, ctx, false);
}

void bpftel_release_first(struct bpf_link *link, int fd, bpftel_release_done_fn done, void *ctx)
{
	release(link, fd, done, ctx, true);
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
	n = reaper.parallel.pending + reaper.serial.pending;
	pthread_mutex_unlock(&reaper.lock);
	return n;
}

uint64_t bpftel_links_released(void)
{
	return __atomic_load_n(&reaper.released, __ATOMIC_RELAXED);
}

void bpftel_links_settle(void)
{
	pthread_mutex_lock(&reaper.lock);
	while (reaper.parallel.pending || reaper.parallel.nthreads || reaper.serial.pending ||
	       reaper.serial.nthreads)
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
