// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* A blocking call on a thread of its own, waited for up to a deadline (deadline_call.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "deadline_call.h"

/* One lock for every call: taken three times per call, for a few instructions, never
 * across run. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct bpftel_deadline_stats stats;

/*
 * The owners of the calls in flight or stuck, with how many each: so that concurrent
 * calls of one owner cannot all pass its cap before any is stuck. One entry per owner;
 * room for every stuck call's owner and as many calls in flight as there are callers,
 * a few (the watcher, the scan, a module starting): a call that finds no room is refused
 * as if the whole were stuck.
 */
#define OWNERS_MAX (BPFTEL_DEADLINE_STUCK_MAX * 2)

static struct {
	__u32 owner;
	__u32 calls; /* 0: a free entry */
} owners[OWNERS_MAX];

/* owner's count of calls, or with add a free entry made its own; NULL when none. */
static __u32 *owner_calls_locked(__u32 owner, bool add)
{
	int i, free_at = -1;

	for (i = 0; i < OWNERS_MAX; i++) {
		if (owners[i].calls && owners[i].owner == owner)
			return &owners[i].calls;
		if (!owners[i].calls && free_at < 0)
			free_at = i;
	}
	if (!add || free_at < 0)
		return NULL;
	owners[free_at].owner = owner;
	return &owners[free_at].calls;
}

/* One of owner's calls ended: returned in time, never started, or its thread ended. */
static void owner_call_end(__u32 owner, bool locked)
{
	__u32 *n;

	if (!locked)
		pthread_mutex_lock(&lock);
	n = owner_calls_locked(owner, false);
	if (n) /* always: the call counted itself in */
		--*n;
	if (!locked)
		pthread_mutex_unlock(&lock);
}

static void *call_thread(void *arg)
{
	struct bpftel_deadline_call *c = arg;
	int ret = c->run(c);
	bool abandoned;

	pthread_mutex_lock(&lock);
	c->ret = ret;
	c->done = true;
	abandoned = c->abandoned;
	if (abandoned) {
		stats.stuck--;
		owner_call_end(c->owner, true);
	} else
		pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&lock);
	if (abandoned) {
		/* Nobody waits for c any more: the caller returned long ago. */
		pthread_cond_destroy(&c->cond);
		c->release(c);
	}
	return NULL;
}

static void deadline_at(struct timespec *ts, unsigned int timeout_ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += timeout_ms / 1000;
	ts->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

int bpftel_deadline_call(struct bpftel_deadline_call *c, unsigned int timeout_ms)
{
	pthread_condattr_t cattr;
	pthread_attr_t attr;
	struct timespec ts;
	pthread_t thread;
	__u32 *mine;
	int err = 0;

	pthread_mutex_lock(&lock);
	mine = owner_calls_locked(c->owner, true);
	if (stats.stuck >= BPFTEL_DEADLINE_STUCK_MAX || !mine)
		err = -EBUSY;
	else if (*mine >= BPFTEL_DEADLINE_STUCK_PER_OWNER)
		err = -EDQUOT;
	if (err) {
		stats.refused++;
		stats.refused_owner += err == -EDQUOT;
		pthread_mutex_unlock(&lock);
		return err;
	}
	++*mine;
	pthread_mutex_unlock(&lock);

	c->done = false;
	c->abandoned = false;
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &cattr);
	pthread_condattr_destroy(&cattr);
	/* Detached: an abandoned thread is never joined. A small stack (sanitizer builds
	 * and static TLS included): what runs there is a few syscalls, and a stuck thread
	 * keeps it. */
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	err = -pthread_create(&thread, &attr, call_thread, c);
	pthread_attr_destroy(&attr);
	if (err) {
		pthread_cond_destroy(&c->cond);
		owner_call_end(c->owner, false);
		return err;
	}

	deadline_at(&ts, timeout_ms);
	pthread_mutex_lock(&lock);
	while (!c->done && !err)
		err = -pthread_cond_timedwait(&c->cond, &lock, &ts);
	if (!c->done) {
		c->abandoned = true;
		stats.abandoned++;
		stats.stuck++;
		pthread_mutex_unlock(&lock);
		return -ETIMEDOUT; /* its owner's count goes when its thread ends */
	}
	owner_call_end(c->owner, true);
	pthread_mutex_unlock(&lock);
	pthread_cond_destroy(&c->cond);
	return 0;
}

void bpftel_deadline_stats(struct bpftel_deadline_stats *s)
{
	pthread_mutex_lock(&lock);
	*s = stats;
	pthread_mutex_unlock(&lock);
}
