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
 * Per owner: its calls in flight or stuck, so that concurrent calls of one owner cannot
 * all pass its cap before any is stuck; and its strikes, the calls abandoned in its
 * current window of BPFTEL_DEADLINE_STRIKE_WINDOW_S, so that an owner who lets its
 * stalled calls end (its daemon answers at last) and stalls new ones cannot keep the
 * callers waiting out deadline after deadline. One entry per owner, live while it has
 * calls or strikes in its window: room for every stuck call's owner and as many
 * calls in flight as there are callers, a few (the watcher, the scan, a module
 * starting), and owners struck lately; a call that finds no room is refused as if the
 * whole were stuck.
 */
#define OWNERS_MAX  (BPFTEL_DEADLINE_STUCK_MAX * 2)
#define WINDOW_NS   (BPFTEL_DEADLINE_STRIKE_WINDOW_S * 1000000000ULL)

struct owner {
	__u64 owner;
	__u32 calls;
	__u32 strikes;
	__u64 window_ns; /* when its window began: its first strike in it */
};

static struct owner owners[OWNERS_MAX];

static __u64 monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + (__u64)ts.tv_nsec;
}

static __u64 (*now_ns)(void) = monotonic_ns;

void bpftel_deadline_set_clock(__u64 (*clock_ns)(void))
{
	pthread_mutex_lock(&lock);
	now_ns = clock_ns ? clock_ns : monotonic_ns;
	pthread_mutex_unlock(&lock);
}

/* Its strikes, once its window is over, are forgotten. */
static bool owner_live(struct owner *o, __u64 now)
{
	if (o->strikes && now - o->window_ns >= WINDOW_NS)
		o->strikes = 0;
	return o->calls || o->strikes;
}

/* owner's entry, or with add a free one made its own; NULL when none. */
static struct owner *owner_locked(__u64 owner, bool add)
{
	__u64 now = now_ns();
	int i, free_at = -1;

	for (i = 0; i < OWNERS_MAX; i++) {
		if (!owner_live(&owners[i], now)) {
			if (free_at < 0)
				free_at = i;
		} else if (owners[i].owner == owner) {
			return &owners[i];
		}
	}
	if (!add || free_at < 0)
		return NULL;
	owners[free_at] = (struct owner){.owner = owner};
	return &owners[free_at];
}

/* One of owner's calls ended: returned in time, never started, or its thread ended. */
static void owner_call_end(__u64 owner, bool locked)
{
	struct owner *o;

	if (!locked)
		pthread_mutex_lock(&lock);
	o = owner_locked(owner, false);
	if (o) /* always: the call counted itself in */
		o->calls--;
	if (!locked)
		pthread_mutex_unlock(&lock);
}

/* One of owner's calls was abandoned (under the lock): a strike in its window. */
static void owner_strike_locked(__u64 owner)
{
	struct owner *o = owner_locked(owner, false);
	__u64 now = now_ns();

	if (!o) /* cannot be: the call is still counted in */
		return;
	if (!o->strikes)
		o->window_ns = now;
	o->strikes++;
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
	struct owner *mine;
	int err = 0;

	pthread_mutex_lock(&lock);
	mine = owner_locked(c->owner, true);
	if (stats.stuck >= BPFTEL_DEADLINE_STUCK_MAX || !mine)
		err = -EBUSY;
	else if (mine->calls >= BPFTEL_DEADLINE_STUCK_PER_OWNER ||
		 mine->strikes >= BPFTEL_DEADLINE_STUCK_PER_OWNER)
		err = -EDQUOT;
	if (err) {
		stats.refused++;
		stats.refused_owner += err == -EDQUOT;
		pthread_mutex_unlock(&lock);
		return err;
	}
	mine->calls++;
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
		owner_strike_locked(c->owner);
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
