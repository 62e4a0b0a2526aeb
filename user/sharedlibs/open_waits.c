// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Opens in flight, and those abandoned that still wait, by identity (open_waits.h). */
#include <pthread.h>

#include "open_waits.h"
#include "user/common/deadline_call.h"

/* Opens in time are few at once (a thread or two open files); those abandoned are at
 * most BPFTEL_DEADLINE_STUCK_MAX. */
#define OPEN_WAITS_MAX (BPFTEL_DEADLINE_STUCK_MAX * 4)

struct open_wait {
	__u64 ticket; /* 0: a free entry */
	dev_t dev;
	__u64 ino;
	__u64 owner;
	bool abandoned;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct open_wait waits[OPEN_WAITS_MAX];
static __u64 last_ticket;

__u64 bpftel_open_waits_begin(dev_t dev, __u64 ino, __u64 owner)
{
	__u64 ticket = 0;
	size_t i;

	if (!ino)
		return 0;
	pthread_mutex_lock(&lock);
	for (i = 0; i < OPEN_WAITS_MAX && !ticket; i++) {
		if (!waits[i].ticket) {
			ticket = ++last_ticket;
			waits[i] = (struct open_wait){
				.ticket = ticket, .dev = dev, .ino = ino, .owner = owner};
		}
	}
	pthread_mutex_unlock(&lock);
	return ticket;
}

static struct open_wait *find_locked(__u64 ticket)
{
	size_t i;

	for (i = 0; ticket && i < OPEN_WAITS_MAX; i++) {
		if (waits[i].ticket == ticket)
			return &waits[i];
	}
	return NULL;
}

void bpftel_open_waits_abandon(__u64 ticket)
{
	struct open_wait *w;

	pthread_mutex_lock(&lock);
	w = find_locked(ticket);
	if (w) /* else its thread has ended meanwhile */
		w->abandoned = true;
	pthread_mutex_unlock(&lock);
}

void bpftel_open_waits_end(__u64 ticket)
{
	struct open_wait *w;

	pthread_mutex_lock(&lock);
	w = find_locked(ticket);
	if (w)
		w->ticket = 0;
	pthread_mutex_unlock(&lock);
}

bool bpftel_open_waits_stalled(dev_t dev, __u64 ino, __u64 owner)
{
	bool stalled = false;
	size_t i;

	pthread_mutex_lock(&lock);
	for (i = 0; i < OPEN_WAITS_MAX && !stalled; i++)
		stalled = waits[i].ticket && waits[i].abandoned && waits[i].dev == dev &&
			  waits[i].ino == ino && waits[i].owner == owner;
	pthread_mutex_unlock(&lock);
	return stalled;
}
