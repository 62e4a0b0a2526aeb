// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Event pipeline: shared round-robin tickets, per-worker bounded MPSC rings, workers
 * that sleep on a futex when idle, a consumer thread for ring buffer maps. The contract
 * and the locking design are in events.h.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <bpf/libbpf.h>

#include "events.h"
#include "user/common/log.h"

#define CACHELINE	   64
#define TICKETS_CLOSED	   (1ULL << 63)
#define SPIN_PAUSE	   128	   /* idle polls (~30 ns pause each) before napping */
#define NAP_NS		   1000000 /* a napping worker looks again after this long */
#define WAKE_BATCH	   256	   /* records queued that end a nap early */
#define DEFAULT_WORKERS	   2
#define DEFAULT_QUEUE_LEN  4096
#define DEFAULT_MAX_RECORD 4160
#define MAX_QUEUE_LEN	   (1UL << 24)
#define MAX_RECORD	   (1UL << 20)

#define __cacheline __attribute__((aligned(CACHELINE)))

struct ev_slot {
	__u64 seq; /* lap of the position it holds; +1 once published */
	__u32 source;
	__u32 size;
	unsigned char data[];
};

struct ev_worker {
	/* producers: next position to claim */
	__u64 enq_pos __cacheline;
	/* read by producers after each publish; written when the worker sleeps or wakes */
	__u32 sleeping __cacheline; /* futex word: AWAKE, NAPPING, ASLEEP */
	__u64 nap_pos;		    /* where a napping worker will look first */
	__u64 wake_batch;	    /* records queued that end a nap */
	__u64 drop_full;	    /* producers, drop path only */
	/* written by the worker, read by stats */
	__u64 processed __cacheline;
	__u64 drop_parse;
	/* the worker's while it runs, start/stop's otherwise */
	__u64 deq_pos;
	unsigned char *slots;
	__u64 mask;
	size_t stride;
	struct bpftel_events *ev;
	unsigned int id;
	bool started;
	pthread_t thread;
};

struct ev_source {
	struct bpftel_events *ev;
	bpftel_event_fn fn;
	void *ctx;
	int id;
};

/* A worker with nothing to do naps (timed) if it saw records lately, else sleeps. */
enum {
	AWAKE = 0,
	NAPPING = 1, /* producers wake it once wake_batch records wait; else it wakes itself */
	ASLEEP = 2,  /* producers wake it on the first record */
};

enum {
	EPOLL_WAKE = 1,
	EPOLL_RB = 2,
};

struct bpftel_events {
	/* shared round-robin counter; TICKETS_CLOSED while not running */
	__u64 tickets __cacheline;
	__u64 drop_too_big __cacheline;
	/* read-mostly: every dispatch reads these */
	unsigned int nworkers __cacheline;
	unsigned int nsources;
	size_t max_record;
	struct ev_worker *workers;
	/* set by stop before workers drain: tickets handed out over all runs */
	__u64 tickets_closed;
	__u32 stopping;

	struct ev_source sources[BPFTEL_EVENTS_MAX_SOURCES];
	size_t map_len;
	void *map;

	/* lifecycle */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	enum bpftel_events_state state;
	bool cancel;
	unsigned int nrunning;

	/* ring buffer consumer */
	struct ring_buffer *rb;
	int epoll_fd, wake_fd;
	bool consumer_started;
	pthread_t consumer;
	/* bpftel_events__hold_consumer (tests): asked, and seen by the consumer (atomics) */
	bool hold, held;
	bool hold_start; /* bpftel_events__hold_start (tests), under lock */
};

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Returns true if it timed out. */
static bool futex_wait(__u32 *word, __u32 val, const struct timespec *timeout)
{
	return syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, timeout, NULL, 0) &&
	       errno == ETIMEDOUT;
}

static void futex_wake(__u32 *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static struct ev_slot *slot_at(const struct ev_worker *w, __u64 pos)
{
	return (struct ev_slot *)(w->slots + (pos & w->mask) * w->stride);
}

/*
 * After publishing position pos (or dropping: force): wake w if it sleeps, or if it
 * naps and a batch is waiting. The seq_cst publish before the seq_cst load here, and
 * the worker's seq_cst store of `sleeping` before its seq_cst re-check of the slot,
 * make sure one of the two sees the other.
 */
static void worker_kick(struct ev_worker *w, __u64 pos, bool force)
{
	__u32 st = __atomic_load_n(&w->sleeping, __ATOMIC_SEQ_CST);

	if (st == AWAKE)
		return;
	if (st == NAPPING && !force &&
	    pos + 1 - __atomic_load_n(&w->nap_pos, __ATOMIC_RELAXED) < w->wake_batch)
		return;
	if (__atomic_exchange_n(&w->sleeping, AWAKE, __ATOMIC_SEQ_CST) != AWAKE)
		futex_wake(&w->sleeping);
}

/*
 * Slot i holds positions i, i + len, i + 2 len...; its seq is the lap (pos & ~mask) of
 * the position it is free for, lap + 1 once that position is published, and lap + len
 * once consumed. Zeroed memory is therefore an empty ring. Returns the position used,
 * or -1 if the queue is full.
 */
static __s64 queue_push(struct ev_worker *w, __u32 source, const void *data, size_t size)
{
	__u64 pos = __atomic_load_n(&w->enq_pos, __ATOMIC_RELAXED), lap;
	struct ev_slot *s;
	__s64 dif;

	for (;;) {
		s = slot_at(w, pos);
		lap = pos & ~w->mask;
		dif = (__s64)(__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) - lap);
		if (dif == 0) {
			if (__atomic_compare_exchange_n(&w->enq_pos, &pos, pos + 1, true,
							__ATOMIC_RELAXED, __ATOMIC_RELAXED))
				break;
		} else if (dif < 0) {
			return -1;
		} else {
			pos = __atomic_load_n(&w->enq_pos, __ATOMIC_RELAXED);
		}
	}
	s->source = source;
	s->size = (__u32)size;
	memcpy(s->data, data, size);
	__atomic_store_n(&s->seq, lap + 1, __ATOMIC_SEQ_CST);
	return (__s64)pos;
}

int bpftel_events__dispatch(struct bpftel_events *ev, int source, const void *data, size_t size)
{
	struct ev_worker *w;
	__s64 pos;
	__u64 t;

	if (source < 0 || (unsigned int)source >= __atomic_load_n(&ev->nsources, __ATOMIC_ACQUIRE))
		return -EINVAL;
	if (size > ev->max_record) {
		if (__atomic_load_n(&ev->tickets, __ATOMIC_RELAXED) & TICKETS_CLOSED)
			return -ESHUTDOWN;
		__atomic_fetch_add(&ev->drop_too_big, 1, __ATOMIC_RELAXED);
		return -EMSGSIZE;
	}
	t = __atomic_fetch_add(&ev->tickets, 1, __ATOMIC_RELAXED);
	if (t & TICKETS_CLOSED)
		return -ESHUTDOWN;
	w = &ev->workers[t % ev->nworkers];
	pos = queue_push(w, (__u32)source, data, size);
	if (pos < 0) {
		__atomic_fetch_add(&w->drop_full, 1, __ATOMIC_SEQ_CST);
		worker_kick(w, 0, true);
		return -ENOBUFS;
	}
	worker_kick(w, (__u64)pos, false);
	return 0;
}

static void thread_running(struct bpftel_events *ev)
{
	pthread_mutex_lock(&ev->lock);
	ev->nrunning++;
	pthread_cond_broadcast(&ev->cond);
	pthread_mutex_unlock(&ev->lock);
}

/* Stopping, and every ticket of w's is dequeued or dropped: no producer can write. */
static bool worker_drained(const struct ev_worker *w, __u64 pos)
{
	const struct bpftel_events *ev = w->ev;
	__u64 total, expect;

	if (!__atomic_load_n(&ev->stopping, __ATOMIC_SEQ_CST))
		return false;
	total = __atomic_load_n(&ev->tickets_closed, __ATOMIC_RELAXED);
	expect = total / ev->nworkers + (w->id < total % ev->nworkers);
	return pos + __atomic_load_n(&w->drop_full, __ATOMIC_SEQ_CST) >= expect;
}

static void *worker_main(void *arg)
{
	const struct timespec nap = {.tv_sec = NAP_NS / 1000000000, .tv_nsec = NAP_NS % 1000000000};
	struct ev_worker *w = arg;
	struct bpftel_events *ev = w->ev;
	__u64 pos = w->deq_pos, lap, processed, parse;
	const struct ev_source *src;
	unsigned int idle = 0;
	bool deep = true;
	struct ev_slot *s;
	__u32 mode;

	processed = __atomic_load_n(&w->processed, __ATOMIC_RELAXED);
	parse = __atomic_load_n(&w->drop_parse, __ATOMIC_RELAXED);
	thread_running(ev);
	for (;;) {
		s = slot_at(w, pos);
		lap = pos & ~w->mask;
		if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) == lap + 1) {
			src = &ev->sources[s->source];
			if (src->fn(src->ctx, s->data, s->size, w->id) < 0)
				__atomic_store_n(&w->drop_parse, ++parse, __ATOMIC_RELAXED);
			else
				__atomic_store_n(&w->processed, ++processed, __ATOMIC_RELAXED);
			__atomic_store_n(&s->seq, lap + w->mask + 1, __ATOMIC_RELEASE);
			pos++;
			idle = 0;
			deep = false;
			continue;
		}
		if (worker_drained(w, pos))
			break;
		if (idle < SPIN_PAUSE) {
			idle++;
			cpu_relax();
			continue;
		}
		/* Nap while records came lately; sleep once a nap found nothing. */
		mode = deep ? ASLEEP : NAPPING;
		__atomic_store_n(&w->nap_pos, pos, __ATOMIC_RELAXED);
		__atomic_store_n(&w->sleeping, mode, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&s->seq, __ATOMIC_SEQ_CST) != lap + 1 &&
		    !worker_drained(w, pos))
			deep = futex_wait(&w->sleeping, mode, deep ? NULL : &nap);
		__atomic_store_n(&w->sleeping, AWAKE, __ATOMIC_RELAXED);
		idle = 0;
	}
	w->deq_pos = pos;
	return NULL;
}

static int rb_sample(void *ctx, void *data, size_t size)
{
	struct ev_source *src = ctx;

	bpftel_events__dispatch(src->ev, src->id, data, size);
	return 0;
}

/* The consumer reads nothing until the pipeline runs: the tickets open only then, and
 * a record read before would be given back as refused (-ESHUTDOWN) and lost uncounted
 * (the module's probes attach first, and a busy program's records wait in the ring
 * buffer). False: the start was cancelled or failed. */
static bool wait_running(struct bpftel_events *ev)
{
	bool run;

	pthread_mutex_lock(&ev->lock);
	while (ev->state == BPFTEL_EVENTS_STARTING && !ev->cancel)
		pthread_cond_wait(&ev->cond, &ev->lock);
	run = ev->state == BPFTEL_EVENTS_RUNNING;
	pthread_mutex_unlock(&ev->lock);
	return run;
}

static void *consumer_main(void *arg)
{
	struct bpftel_events *ev = arg;
	struct epoll_event evs[2];
	int n, i;

	thread_running(ev);
	if (!wait_running(ev))
		return NULL;
	for (;;) {
		n = epoll_wait(ev->epoll_fd, evs, 2, BPFTEL_EVENTS_POLL_MS);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			pr_err("events: consumer: epoll_wait: %s", strerror(errno));
			return NULL;
		}
		for (i = 0; i < n; i++) {
			if (evs[i].data.u32 != EPOLL_WAKE)
				continue;
			/* Stopping: what the ring buffer holds goes to the workers, whose
			 * tickets close after this thread is done (a held consumer, for
			 * tests of loss, leaves it there). */
			if (!__atomic_load_n(&ev->hold, __ATOMIC_ACQUIRE))
				ring_buffer__consume(ev->rb);
			return NULL;
		}
		if (__atomic_load_n(&ev->hold, __ATOMIC_ACQUIRE)) {
			struct pollfd wake = {.fd = ev->wake_fd, .events = POLLIN};

			/* Held (tests of loss): read nothing, wait for a stop or a release. */
			__atomic_store_n(&ev->held, true, __ATOMIC_RELEASE);
			if (poll(&wake, 1, BPFTEL_EVENTS_POLL_MS) > 0)
				return NULL;
			continue;
		}
		__atomic_store_n(&ev->held, false, __ATOMIC_RELEASE);
		/* Also on a timeout: records submitted without a wake-up. */
		ring_buffer__consume(ev->rb);
	}
}

int bpftel_events__hold_consumer(struct bpftel_events *ev, bool hold)
{
	struct timespec ms = {0, 1000000};
	int tries;

	if (!ev->rb)
		return -ENOENT;
	__atomic_store_n(&ev->hold, hold, __ATOMIC_RELEASE);
	/* 30 s at most: the consumer notices within one of its waits. */
	for (tries = 0; hold && !__atomic_load_n(&ev->held, __ATOMIC_ACQUIRE); tries++) {
		if (tries == 30000)
			return -ETIMEDOUT;
		nanosleep(&ms, NULL);
	}
	return 0;
}

static int epoll_add(int epfd, int fd, __u32 tag)
{
	struct epoll_event e = {.events = EPOLLIN, .data.u32 = tag};

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e) ? -errno : 0;
}

static void consumer_free(struct bpftel_events *ev)
{
	ring_buffer__free(ev->rb);
	if (ev->epoll_fd >= 0)
		close(ev->epoll_fd);
	if (ev->wake_fd >= 0)
		close(ev->wake_fd);
	ev->rb = NULL;
	ev->epoll_fd = ev->wake_fd = -1;
}

static int consumer_init(struct bpftel_events *ev)
{
	int err;

	ev->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (ev->epoll_fd < 0)
		return -errno;
	ev->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ev->wake_fd < 0)
		return -errno;
	err = epoll_add(ev->epoll_fd, ev->wake_fd, EPOLL_WAKE);
	if (!err)
		err = epoll_add(ev->epoll_fd, ring_buffer__epoll_fd(ev->rb), EPOLL_RB);
	return err;
}

/* Option `f` if the caller's struct has it and it is non-zero, else `def`. */
#define OPT(opts, f, def)                                                                      \
	((opts) && (opts)->sz >= offsetof(struct bpftel_events_opts, f) + sizeof((opts)->f) && \
			 (opts)->f                                                             \
		 ? (opts)->f                                                                   \
		 : (def))

static int opts_check(const struct bpftel_events_opts *opts)
{
	const char *p = (const char *)opts;
	size_t i;

	if (!opts)
		return 0;
	if (opts->sz < sizeof(size_t))
		return -EINVAL;
	for (i = sizeof(*opts); i < opts->sz; i++) {
		if (p[i])
			return -EINVAL;
	}
	return 0;
}

int bpftel_events__new(const struct bpftel_events_opts *opts, struct bpftel_events **out)
{
	unsigned int nworkers, i;
	size_t qlen, maxrec, stride, wsize;
	struct bpftel_events *ev;
	struct ev_worker *w;
	void *map;

	*out = NULL;
	if (opts_check(opts)) {
		pr_err("events: unknown options (sz %zu)", opts->sz);
		return -EINVAL;
	}
	nworkers = OPT(opts, workers, DEFAULT_WORKERS);
	qlen = OPT(opts, queue_len, DEFAULT_QUEUE_LEN);
	maxrec = OPT(opts, max_record, DEFAULT_MAX_RECORD);
	if (nworkers > BPFTEL_EVENTS_MAX_WORKERS || qlen > MAX_QUEUE_LEN || (qlen & (qlen - 1)) ||
	    maxrec > MAX_RECORD) {
		pr_err("events: bad options: workers %u (max %d), queue_len %zu (a power of two, "
		       "max %lu), max_record %zu (max %lu)",
		       nworkers, BPFTEL_EVENTS_MAX_WORKERS, qlen, MAX_QUEUE_LEN, maxrec,
		       MAX_RECORD);
		return -EINVAL;
	}
	stride = (sizeof(struct ev_slot) + maxrec + CACHELINE - 1) & ~(size_t)(CACHELINE - 1);
	wsize = sizeof(*w) * nworkers;

	ev = aligned_alloc(CACHELINE, sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	memset(ev, 0, sizeof(*ev));
	ev->workers = aligned_alloc(CACHELINE, wsize);
	map = mmap(NULL, nworkers * qlen * stride, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!ev->workers || map == MAP_FAILED) {
		pr_err("events: cannot allocate %u queues of %zu x %zu bytes", nworkers, qlen,
		       stride);
		if (map != MAP_FAILED)
			munmap(map, nworkers * qlen * stride);
		free(ev->workers);
		free(ev);
		return -ENOMEM;
	}
	/* One slot per page with the default sizes: huge pages spare a TLB miss a record. */
	madvise(map, nworkers * qlen * stride, MADV_HUGEPAGE);
	memset(ev->workers, 0, wsize);
	ev->map = map;
	ev->map_len = nworkers * qlen * stride;
	ev->nworkers = nworkers;
	ev->max_record = maxrec;
	ev->tickets = TICKETS_CLOSED;
	ev->epoll_fd = ev->wake_fd = -1;
	for (i = 0; i < nworkers; i++) {
		w = &ev->workers[i];
		w->slots = (unsigned char *)map + i * qlen * stride;
		w->mask = qlen - 1;
		w->stride = stride;
		w->wake_batch = qlen / 4 < WAKE_BATCH ? qlen / 4 : WAKE_BATCH;
		if (!w->wake_batch)
			w->wake_batch = 1;
		w->ev = ev;
		w->id = i;
	}
	pthread_mutex_init(&ev->lock, NULL);
	pthread_cond_init(&ev->cond, NULL);
	*out = ev;
	return 0;
}

void bpftel_events__free(struct bpftel_events *ev)
{
	if (!ev)
		return;
	bpftel_events__stop(ev);
	consumer_free(ev);
	pthread_cond_destroy(&ev->cond);
	pthread_mutex_destroy(&ev->lock);
	munmap(ev->map, ev->map_len);
	free(ev->workers);
	free(ev);
}

/* With ev->lock held and the pipeline not running. */
static int source_new(struct bpftel_events *ev, bpftel_event_fn fn, void *ctx)
{
	struct ev_source *src;

	if (!fn)
		return -EINVAL;
	if (ev->state != BPFTEL_EVENTS_STOPPED)
		return -EBUSY;
	if (ev->nsources >= BPFTEL_EVENTS_MAX_SOURCES) {
		pr_err("events: more than %d sources", BPFTEL_EVENTS_MAX_SOURCES);
		return -E2BIG;
	}
	src = &ev->sources[ev->nsources];
	src->ev = ev;
	src->fn = fn;
	src->ctx = ctx;
	src->id = (int)ev->nsources;
	return src->id;
}

int bpftel_events__add_source(struct bpftel_events *ev, bpftel_event_fn fn, void *ctx)
{
	int id;

	pthread_mutex_lock(&ev->lock);
	id = source_new(ev, fn, ctx);
	if (id >= 0)
		__atomic_store_n(&ev->nsources, id + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&ev->lock);
	return id;
}

int bpftel_events__add_ringbuf(struct bpftel_events *ev, int map_fd, bpftel_event_fn fn, void *ctx)
{
	struct ev_source *src;
	int id, err;

	pthread_mutex_lock(&ev->lock);
	id = source_new(ev, fn, ctx);
	if (id < 0)
		goto out;
	src = &ev->sources[id];
	if (!ev->rb) {
		ev->rb = ring_buffer__new(map_fd, rb_sample, src, NULL);
		err = ev->rb ? consumer_init(ev) : -errno;
		if (err)
			consumer_free(ev);
	} else {
		err = ring_buffer__add(ev->rb, map_fd, rb_sample, src);
	}
	if (err) {
		pr_err("events: ring buffer map fd %d: %s", map_fd, strerror(-err));
		id = err;
		goto out;
	}
	__atomic_store_n(&ev->nsources, id + 1, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&ev->lock);
	return id;
}

/*
 * Stop what start started: the consumer first (what it read gets dispatched), then
 * close the tickets, then let the workers drain their tickets and join them.
 */
static void pipeline_teardown(struct bpftel_events *ev)
{
	__u64 one = 1, t;
	unsigned int i;

	if (ev->consumer_started) {
		if (write(ev->wake_fd, &one, sizeof(one)) != sizeof(one))
			pr_err("events: waking consumer: %s", strerror(errno));
		pthread_join(ev->consumer, NULL);
		if (read(ev->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			pr_err("events: resetting wake fd: %s", strerror(errno));
		ev->consumer_started = false;
	}
	t = __atomic_fetch_or(&ev->tickets, TICKETS_CLOSED, __ATOMIC_SEQ_CST);
	if (!(t & TICKETS_CLOSED))
		__atomic_store_n(&ev->tickets_closed, t, __ATOMIC_RELAXED);
	__atomic_store_n(&ev->stopping, 1, __ATOMIC_SEQ_CST);
	for (i = 0; i < ev->nworkers; i++) {
		if (!ev->workers[i].started)
			continue;
		__atomic_store_n(&ev->workers[i].sleeping, AWAKE, __ATOMIC_SEQ_CST);
		futex_wake(&ev->workers[i].sleeping);
	}
	for (i = 0; i < ev->nworkers; i++) {
		if (!ev->workers[i].started)
			continue;
		pthread_join(ev->workers[i].thread, NULL);
		ev->workers[i].started = false;
	}
}

int bpftel_events__start(struct bpftel_events *ev)
{
	unsigned int i, nthreads = 0;
	int err = 0;

	pthread_mutex_lock(&ev->lock);
	if (ev->state == BPFTEL_EVENTS_STARTING || ev->state == BPFTEL_EVENTS_RUNNING)
		err = -EALREADY;
	else if (ev->state == BPFTEL_EVENTS_STOPPING)
		err = -EBUSY;
	if (err) {
		pthread_mutex_unlock(&ev->lock);
		return err;
	}
	ev->state = BPFTEL_EVENTS_STARTING;
	ev->cancel = false;
	ev->nrunning = 0;
	pthread_mutex_unlock(&ev->lock);

	__atomic_store_n(&ev->stopping, 0, __ATOMIC_SEQ_CST);
	for (i = 0; i < ev->nworkers && !err; i++) {
		__atomic_store_n(&ev->workers[i].sleeping, AWAKE, __ATOMIC_RELAXED);
		err = -pthread_create(&ev->workers[i].thread, NULL, worker_main, &ev->workers[i]);
		ev->workers[i].started = !err;
		nthreads += !err;
	}
	if (!err && ev->rb) {
		err = -pthread_create(&ev->consumer, NULL, consumer_main, ev);
		ev->consumer_started = !err;
		nthreads += !err;
	}
	if (err)
		pr_err("events: cannot start threads: %s", strerror(-err));

	pthread_mutex_lock(&ev->lock);
	while (!err && !ev->cancel && (ev->nrunning < nthreads || ev->hold_start))
		pthread_cond_wait(&ev->cond, &ev->lock);
	if (!err && ev->cancel)
		err = -ECANCELED;
	if (!err) {
		/* Open the tickets where the last run closed them. */
		__atomic_store_n(&ev->tickets,
				 __atomic_load_n(&ev->tickets_closed, __ATOMIC_RELAXED),
				 __ATOMIC_SEQ_CST);
		ev->state = BPFTEL_EVENTS_RUNNING;
		pthread_cond_broadcast(&ev->cond);
		pthread_mutex_unlock(&ev->lock);
		return 0;
	}
	ev->state = BPFTEL_EVENTS_STOPPING;
	pthread_cond_broadcast(&ev->cond); /* a consumer waiting for the run: it will not */
	pthread_mutex_unlock(&ev->lock);

	pipeline_teardown(ev);

	pthread_mutex_lock(&ev->lock);
	ev->state = BPFTEL_EVENTS_STOPPED;
	pthread_cond_broadcast(&ev->cond);
	pthread_mutex_unlock(&ev->lock);
	return err;
}

void bpftel_events__hold_start(struct bpftel_events *ev, bool hold)
{
	pthread_mutex_lock(&ev->lock);
	ev->hold_start = hold;
	pthread_cond_broadcast(&ev->cond);
	pthread_mutex_unlock(&ev->lock);
}

int bpftel_events__stop(struct bpftel_events *ev)
{
	pthread_mutex_lock(&ev->lock);
	for (;;) {
		if (ev->state == BPFTEL_EVENTS_STARTING) {
			ev->cancel = true;
			pthread_cond_broadcast(&ev->cond);
		} else if (ev->state != BPFTEL_EVENTS_STOPPING) {
			break;
		}
		pthread_cond_wait(&ev->cond, &ev->lock);
	}
	if (ev->state == BPFTEL_EVENTS_STOPPED) {
		pthread_mutex_unlock(&ev->lock);
		return 0;
	}
	ev->state = BPFTEL_EVENTS_STOPPING;
	pthread_mutex_unlock(&ev->lock);

	pipeline_teardown(ev);

	pthread_mutex_lock(&ev->lock);
	ev->state = BPFTEL_EVENTS_STOPPED;
	pthread_cond_broadcast(&ev->cond);
	pthread_mutex_unlock(&ev->lock);
	return 0;
}

enum bpftel_events_state bpftel_events__state(struct bpftel_events *ev)
{
	enum bpftel_events_state st;

	pthread_mutex_lock(&ev->lock);
	st = ev->state;
	pthread_mutex_unlock(&ev->lock);
	return st;
}

void bpftel_events__stats(struct bpftel_events *ev, struct bpftel_events_stats *out)
{
	struct ev_worker *w;
	unsigned int i;
	__u64 t;

	memset(out, 0, sizeof(*out));
	t = __atomic_load_n(&ev->tickets, __ATOMIC_SEQ_CST);
	if (t & TICKETS_CLOSED)
		t = __atomic_load_n(&ev->tickets_closed, __ATOMIC_RELAXED);
	out->drop_too_big = __atomic_load_n(&ev->drop_too_big, __ATOMIC_RELAXED);
	out->dispatched = t + out->drop_too_big;
	out->workers = ev->nworkers;
	for (i = 0; i < ev->nworkers; i++) {
		w = &ev->workers[i];
		out->per_worker[i] = __atomic_load_n(&w->processed, __ATOMIC_RELAXED);
		out->processed += out->per_worker[i];
		out->drop_parse += __atomic_load_n(&w->drop_parse, __ATOMIC_RELAXED);
		out->drop_queue_full += __atomic_load_n(&w->drop_full, __ATOMIC_RELAXED);
	}
}
