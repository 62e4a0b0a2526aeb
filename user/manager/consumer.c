// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A module's consumers: its ring buffers feed an event pipeline (user/events): one
 * consumer thread, BPFTEL_CONSUMER_WORKERS worker threads running the callbacks,
 * bounded queues, every drop counted. consumer_start returns once all of them run;
 * consumer_stop returns once they are joined, so no callback runs after it. Drop
 * counts survive the pipeline (it is rebuilt on each start).
 */
#include <errno.h>
#include <string.h>

#include "internal.h"
#include "user/common/log.h"
#include "user/events/events.h"

#define BPFTEL_CONSUMER_WORKERS	  1
#define BPFTEL_CONSUMER_QUEUE_LEN 1024

/* Pipeline callbacks add the worker index; ring_buffer_sample_fn does not take it. */
static int deliver(void *ctx, const void *data, size_t size, unsigned int worker)
{
	struct ringbuf_sub *rs = ctx;

	(void)worker;
	return rs->cb(rs->ctx, (void *)data, size) < 0 ? -EINVAL : 0;
}

int consumer_start(struct bpftel_module *m)
{
	unsigned int workers = __atomic_load_n(&m->mgr->pipeline.workers, __ATOMIC_RELAXED);
	unsigned int queue_len = __atomic_load_n(&m->mgr->pipeline.queue_len, __ATOMIC_RELAXED);
	struct bpftel_events_opts opts = {
		.sz = sizeof(opts),
		.workers = workers ? workers : BPFTEL_CONSUMER_WORKERS,
		.queue_len = queue_len ? queue_len : BPFTEL_CONSUMER_QUEUE_LEN,
		.max_record = BPFTEL_RINGBUF_MAX_RECORD,
	};
	struct consumer *c = &m->consumer;
	struct bpftel_events *ev;
	struct bpf_map *map;
	size_t i;
	int err;

	/* c->ev is NULL here (consumer_stop left it so, under report_lock: readers sum
	 * its counters from other threads). */
	if (!m->nringbufs)
		return 0;
	err = bpftel_events__new(&opts, &ev);
	if (err)
		return err;
	pthread_mutex_lock(&m->report_lock); /* readers sum its counters */
	c->ev = ev;
	pthread_mutex_unlock(&m->report_lock);
	for (i = 0; i < m->nringbufs; i++) {
		map = bpf_object__find_map_by_name(m->obj, m->ringbufs[i].map);
		if (!map) {
			pr_err("module '%s': no ring buffer map '%s'", m->ops->name,
			       m->ringbufs[i].map);
			return -ENOENT;
		}
		err = bpftel_events__add_ringbuf(c->ev, bpf_map__fd(map), deliver, &m->ringbufs[i]);
		if (err < 0) {
			pr_err("module '%s': ring buffer '%s': %s", m->ops->name,
			       m->ringbufs[i].map, strerror(-err));
			return err;
		}
	}
	err = bpftel_events__start(c->ev);
	if (err)
		pr_err("module '%s': cannot start its consumers: %s", m->ops->name, strerror(-err));
	return err;
}

void consumer_stop(struct bpftel_module *m)
{
	struct consumer *c = &m->consumer;
	struct bpftel_events_stats st;

	struct bpftel_events *ev = c->ev;

	if (!ev)
		return;
	bpftel_events__stop(ev); /* joins threads: not under report_lock */
	bpftel_events__stats(ev, &st);
	pthread_mutex_lock(&m->report_lock);
	c->lost_queue_full += st.drop_queue_full;
	c->lost_too_big += st.drop_too_big;
	c->lost_parse += st.drop_parse;
	c->processed += st.processed;
	c->ev = NULL;
	pthread_mutex_unlock(&m->report_lock);
	bpftel_events__free(ev);
}

void bpftel_module__event_stats(struct bpftel_module *m, struct bpftel_module_event_stats *out)
{
	struct consumer *c = &m->consumer;
	struct bpftel_events_stats st;

	pthread_mutex_lock(&m->report_lock);
	out->processed = c->processed;
	out->lost_queue_full = c->lost_queue_full;
	out->lost_too_big = c->lost_too_big;
	out->lost_parse = c->lost_parse;
	if (c->ev) {
		bpftel_events__stats(c->ev, &st);
		out->processed += st.processed;
		out->lost_queue_full += st.drop_queue_full;
		out->lost_too_big += st.drop_too_big;
		out->lost_parse += st.drop_parse;
	}
	pthread_mutex_unlock(&m->report_lock);
}

int bpftel_module__hold_consumer(struct bpftel_module *m, bool hold)
{
	int err = -ENOENT;

	/* The lifecycle lock: the pipeline cannot be stopped and freed meanwhile. */
	pthread_mutex_lock(&m->lock);
	if (m->consumer.ev)
		err = bpftel_events__hold_consumer(m->consumer.ev, hold);
	pthread_mutex_unlock(&m->lock);
	return err;
}
