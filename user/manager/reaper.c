// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Background teardown of links whose programs no longer do anything (see
 * bpf/lib/stop_gate.h). Destroying a uprobe link waits for the kernel: on 6.18 ~25 ms
 * to release the BPF link and ~55 ms to unregister the uprobe, serialized in the
 * kernel (16 threads destroying 16 links take as long as one thread). A module stop
 * that waited for that would take 1.3 s for the GPU module's 16 probes; a restart
 * would too. One thread destroys queued links in order; it runs while the queue is
 * not empty and exits when it is (a later release starts another).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>

#include "manager.h"
#include "user/common/log.h"

struct node {
	struct node *next;
	struct bpf_link *link;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t idle;
	struct node *head, **tail;
	size_t pending; /* queued or being destroyed */
	bool running;	/* a thread drains the queue */
	bool joinable;	/* th was started and not joined yet */
	pthread_t th;
} reaper = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.idle = PTHREAD_COND_INITIALIZER,
	.tail = &reaper.head,
};

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
		bpf_link__destroy(n->link);
		free(n);
		pthread_mutex_lock(&reaper.lock);
		reaper.pending--;
	}
	reaper.running = false;
	pthread_cond_broadcast(&reaper.idle);
	pthread_mutex_unlock(&reaper.lock);
	return NULL;
}

void bpftel_link_release(struct bpf_link *link)
{
	struct node *n;
	int err;

	if (!link)
		return;
	n = malloc(sizeof(*n));
	if (!n) {
		bpf_link__destroy(link); /* in place: slow, not lost */
		return;
	}
	n->next = NULL;
	n->link = link;
	pthread_mutex_lock(&reaper.lock);
	*reaper.tail = n;
	reaper.tail = &n->next;
	reaper.pending++;
	if (!reaper.running) {
		/* The last thread set running = false and touches nothing after unlocking:
		 * joining it here cannot wait for long or deadlock. */
		if (reaper.joinable)
			pthread_join(reaper.th, NULL);
		err = pthread_create(&reaper.th, NULL, reaper_main, NULL);
		reaper.joinable = !err;
		reaper.running = !err;
		if (err) {
			/* No thread ran since the queue was empty: it holds only n. */
			reaper.head = NULL;
			reaper.tail = &reaper.head;
			reaper.pending--;
			pthread_mutex_unlock(&reaper.lock);
			pr_warn("reaper: cannot start a thread (%s): destroying a link in place",
				strerror(err));
			bpf_link__destroy(link);
			free(n);
			return;
		}
	}
	pthread_mutex_unlock(&reaper.lock);
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
	while (reaper.running)
		pthread_cond_wait(&reaper.idle, &reaper.lock);
	if (reaper.joinable) {
		pthread_join(reaper.th, NULL);
		reaper.joinable = false;
	}
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
