// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A module's consumer: one thread polling the module's ring buffers and running their
 * callbacks. consumer_start returns once the thread runs; consumer_stop wakes it
 * through an eventfd and joins it, so no callback runs after it returns.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "internal.h"
#include "user/common/log.h"

#define WAKE_TAG 1
#define RB_TAG	 2

static void *consumer_main(void *arg)
{
	struct consumer *c = arg;
	struct epoll_event evs[2];
	int n, i;

	pthread_mutex_lock(&c->lock);
	c->running = true;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);

	for (;;) {
		n = epoll_wait(c->epoll_fd, evs, 2, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (i = 0; i < n; i++) {
			if (evs[i].data.u32 == WAKE_TAG)
				return NULL;
			ring_buffer__consume(c->rb);
		}
	}
	return NULL;
}

static int epoll_add(int epfd, int fd, __u32 tag)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = tag};

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

int consumer_start(struct bpftel_module *m)
{
	struct consumer *c = &m->consumer;
	struct bpf_map *map;
	size_t i;
	int err;

	memset(c, 0, sizeof(*c));
	c->epoll_fd = c->wake_fd = -1;
	if (!m->nringbufs)
		return 0;
	for (i = 0; i < m->nringbufs; i++) {
		map = bpf_object__find_map_by_name(m->obj, m->ringbufs[i].map);
		if (!map) {
			pr_err("module '%s': no ring buffer map '%s'", m->ops->name,
			       m->ringbufs[i].map);
			return -ENOENT;
		}
		if (!c->rb) {
			c->rb = ring_buffer__new(bpf_map__fd(map), m->ringbufs[i].cb,
						 m->ringbufs[i].ctx, NULL);
			err = c->rb ? 0 : -errno;
		} else {
			err = ring_buffer__add(c->rb, bpf_map__fd(map), m->ringbufs[i].cb,
					       m->ringbufs[i].ctx);
		}
		if (err) {
			pr_err("module '%s': ring buffer '%s': %s", m->ops->name,
			       m->ringbufs[i].map, strerror(-err));
			return err;
		}
	}
	c->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->epoll_fd < 0 || c->wake_fd < 0)
		return -errno;
	err = epoll_add(c->epoll_fd, c->wake_fd, WAKE_TAG);
	if (!err)
		err = epoll_add(c->epoll_fd, ring_buffer__epoll_fd(c->rb), RB_TAG);
	if (err)
		return err;

	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	err = -pthread_create(&c->thread, NULL, consumer_main, c);
	if (err) {
		pr_err("module '%s': cannot start consumer thread: %s", m->ops->name,
		       strerror(-err));
		return err;
	}
	c->thread_started = true;
	pthread_mutex_lock(&c->lock);
	while (!c->running)
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

void consumer_stop(struct bpftel_module *m)
{
	struct consumer *c = &m->consumer;
	__u64 one = 1;

	if (c->thread_started) {
		if (write(c->wake_fd, &one, sizeof(one)) != sizeof(one))
			pr_warn("module '%s': waking consumer: %s", m->ops->name, strerror(errno));
		pthread_join(c->thread, NULL);
		pthread_cond_destroy(&c->cond);
		pthread_mutex_destroy(&c->lock);
		c->thread_started = false;
	}
	ring_buffer__free(c->rb);
	c->rb = NULL;
	if (c->epoll_fd >= 0)
		close(c->epoll_fd);
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	c->epoll_fd = c->wake_fd = -1;
}
