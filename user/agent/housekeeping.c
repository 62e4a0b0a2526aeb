// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The agent's housekeeping thread (housekeeping.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "housekeeping.h"
#include "user/common/ctl.h"
#include "user/manager/manager.h"

#define MAX_MODULES 16

struct bpftel_housekeeping {
	struct bpftel_manager *mgr;
	void (*tick)(void *ctx);
	void *ctx;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* CLOCK_MONOTONIC */
	bool stopping;
	pthread_t th;
	long long due[MAX_MODULES];
};

static void run_due(struct bpftel_housekeeping *hk, long long now)
{
	struct bpftel_module *mods[MAX_MODULES];
	const struct bpftel_module_ops *ops;
	size_t n, i;

	n = bpftel_manager__modules(hk->mgr, mods, MAX_MODULES);
	for (i = 0; i < n; i++) {
		ops = bpftel_module__ops(mods[i]);
		if (!ops->housekeeping || now < hk->due[i])
			continue;
		hk->due[i] = now + (ops->housekeeping_ms ?: BPFTEL_HOUSEKEEPING_MS);
		ops->housekeeping(mods[i]);
	}
}

static void *housekeeping_main(void *arg)
{
	struct bpftel_housekeeping *hk = arg;
	struct timespec until;
	long long now;

	pthread_mutex_lock(&hk->lock);
	while (!hk->stopping) {
		pthread_mutex_unlock(&hk->lock);
		now = bpftel_mono_ms();
		run_due(hk, now);
		if (hk->tick)
			hk->tick(hk->ctx);
		pthread_mutex_lock(&hk->lock);
		/* A tick a second is the finest interval a module may ask for. */
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += 1;
		while (!hk->stopping &&
		       pthread_cond_timedwait(&hk->wake, &hk->lock, &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&hk->lock);
	return NULL;
}

int bpftel_housekeeping__start(struct bpftel_manager *mgr, void (*tick)(void *ctx), void *ctx,
			       struct bpftel_housekeeping **out)
{
	struct bpftel_housekeeping *hk = calloc(1, sizeof(*hk));
	pthread_condattr_t ca;
	int err;

	if (!hk)
		return -ENOMEM;
	hk->mgr = mgr;
	hk->tick = tick;
	hk->ctx = ctx;
	pthread_mutex_init(&hk->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&hk->wake, &ca);
	pthread_condattr_destroy(&ca);
	err = pthread_create(&hk->th, NULL, housekeeping_main, hk);
	if (err) {
		pthread_cond_destroy(&hk->wake);
		pthread_mutex_destroy(&hk->lock);
		free(hk);
		return -err;
	}
	*out = hk;
	return 0;
}

void bpftel_housekeeping__stop(struct bpftel_housekeeping *hk)
{
	if (!hk)
		return;
	pthread_mutex_lock(&hk->lock);
	hk->stopping = true;
	pthread_cond_signal(&hk->wake);
	pthread_mutex_unlock(&hk->lock);
	pthread_join(hk->th, NULL);
	pthread_cond_destroy(&hk->wake);
	pthread_mutex_destroy(&hk->lock);
	free(hk);
}
