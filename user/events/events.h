/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Event pipeline: sources hand records to a pool of N worker threads through bounded
 * per-worker queues; each worker runs the record's source callback.
 *
 *   ring buffer maps --(consumer thread, epoll)--+
 *                                                +--dispatch--> queue[w] --> worker w --> fn()
 *   caller-fed sources --(any thread)------------+
 *
 * Dispatch: one round-robin ticket counter shared by every source. Ticket t goes to
 * worker t % workers, so N records dispatched in any order by any sources land
 * ceil/floor(N / workers) on each worker, from the very first record.
 *
 * Lifecycle: STOPPED --start--> STARTING --> RUNNING --stop--> STOPPING --> STOPPED.
 *   start: starts the workers and, if there are ring buffers, the consumer thread;
 *          returns 0 once all of them run, -EALREADY if started, -EBUSY while a stop is
 *          in progress, -ECANCELED if stop was called meanwhile (everything it started
 *          is gone by then). A stopped pipeline may be started again.
 *   stop:  stops the consumer, refuses new records (dispatch returns -ESHUTDOWN), lets
 *          each worker finish the records already queued to it, joins every thread.
 *          After it returns no callback runs, and
 *            processed + drop_queue_full + drop_too_big + drop_parse == dispatched.
 *          Idempotent; from any thread, also while start runs (start then fails with
 *          -ECANCELED). Never from a callback. Records still in a kernel ring buffer
 *          when stop begins are left there.
 *
 * Memory: workers * queue_len slots, each holding one record of up to max_record bytes
 * (plus a 16-byte header, rounded to 64 bytes); mapped once at new (transparent huge
 * pages requested: with the default sizes every slot is on its own 4 KiB page),
 * faulted in as used.
 * A slot stays taken while its callback runs, so callbacks run on the queued copy.
 *
 * Locking:
 *   - Hot path (dispatch -> worker) is lock-free. The ticket counter is one atomic
 *     fetch-add; its top bit means "closed" (not running), so the ticket that admits a
 *     record and the check that the pipeline runs are the same atomic operation. Each
 *     worker queue is a bounded multi-producer/single-consumer ring with a sequence
 *     number per slot (Vyukov): producers claim a position with a CAS, copy, publish
 *     the slot with a release; the worker reads it with an acquire.
 *   - An idle worker polls briefly (~4 us), then naps: a futex wait of at most 1 ms
 *     that a producer ends early once min(256, queue_len / 4) records wait, so a busy
 *     stream costs one wake-up per batch, not per record. A nap that finds nothing
 *     becomes a sleep without timeout that the next record ends: an idle pipeline
 *     uses no CPU. Producers read the worker's futex word after publishing (or
 *     dropping); worker and producers use sequentially consistent accesses on both
 *     sides, so a sleeping worker is never missed. An idle worker notices a record
 *     within ~1 ms.
 *   - Stop closes the counter (fetch-or of the top bit), which fixes the number of
 *     tickets each worker was given; a worker exits once every one of its tickets was
 *     either dequeued or counted as a queue-full drop, i.e. once no producer can still
 *     write to its queue.
 *   - The consumer waits on the ring buffers' epoll with a timeout of
 *     BPFTEL_EVENTS_POLL_MS and drains them on every wake-up, timeout included: BPF
 *     code may submit with BPF_RB_NO_WAKEUP while the buffer is not filling up, and
 *     its records are still read within that interval.
 *   - A mutex and condition variable guard only the lifecycle (state, cancel flag,
 *     threads reporting that they run) and adding sources; never the hot path.
 *
 * Ints returned are 0 (or an id) or a negative errno. Errors are reported through
 * bpftel_log(). Dispatch, stats and state are thread-safe. Dispatch stays legal after
 * stop (-ESHUTDOWN) until free; free must not race anything, so join the threads that
 * dispatch first.
 */
#ifndef BPFTEL_EVENTS_H
#define BPFTEL_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

#define BPFTEL_EVENTS_MAX_WORKERS 64
#define BPFTEL_EVENTS_MAX_SOURCES 64
/* The consumer reads its ring buffers at least this often (see Locking). */
#define BPFTEL_EVENTS_POLL_MS 50

struct bpftel_events;

struct bpftel_events_opts {
	size_t sz;	      /* sizeof(struct bpftel_events_opts) */
	unsigned int workers; /* worker threads, 0 = 2 */
	size_t queue_len;     /* slots per worker, a power of two, 0 = 4096 */
	size_t max_record;    /* largest record copied, in bytes, 0 = 4160 */
};

/*
 * Runs on worker `worker` for each record of its source. data is valid only during
 * the call. Return 0 if processed, a negative errno if the record is malformed (counted
 * as a parse drop).
 */
typedef int (*bpftel_event_fn)(void *ctx, const void *data, size_t size, unsigned int worker);

/* opts may be NULL. */
int bpftel_events__new(const struct bpftel_events_opts *opts, struct bpftel_events **out);
/* Stops, then frees. NULL is a no-op. */
void bpftel_events__free(struct bpftel_events *ev);

/*
 * Sources, added while the pipeline is not running (-EBUSY otherwise). Return the
 * source id (>= 0).
 *   ringbuf: a BPF ring buffer map, consumed by the pipeline's consumer thread.
 *   source:  records handed in by the caller with bpftel_events__dispatch().
 */
int bpftel_events__add_ringbuf(struct bpftel_events *ev, int map_fd, bpftel_event_fn fn, void *ctx);
int bpftel_events__add_source(struct bpftel_events *ev, bpftel_event_fn fn, void *ctx);

/*
 * Hand one record of `source` to the next worker. Thread-safe, never blocks. Returns 0
 * when queued; -ENOBUFS (queue full) and -EMSGSIZE (over max_record) are counted drops;
 * -ESHUTDOWN (not running) and -EINVAL (no such source) are not counted.
 */
int bpftel_events__dispatch(struct bpftel_events *ev, int source, const void *data, size_t size);

int bpftel_events__start(struct bpftel_events *ev);
int bpftel_events__stop(struct bpftel_events *ev);

enum bpftel_events_state {
	BPFTEL_EVENTS_STOPPED = 0,
	BPFTEL_EVENTS_STARTING,
	BPFTEL_EVENTS_RUNNING,
	BPFTEL_EVENTS_STOPPING,
};

enum bpftel_events_state bpftel_events__state(struct bpftel_events *ev);

/* Totals since new, over every run. Exact once stopped; a snapshot while running. */
/*
 * For tests of loss: hold (true) or release (false) the consumer. Held, it reads no
 * ring buffer: records stay in the kernel, whose ring buffers then refuse (and their
 * programs count) what no longer fits. Holding returns once the consumer has stopped
 * reading (within BPFTEL_EVENTS_POLL_MS of its last read), -ENOENT without ring
 * buffers, -ETIMEDOUT if the consumer does not run. A stop ends a held consumer too.
 */
int bpftel_events__hold_consumer(struct bpftel_events *ev, bool hold);
/* Tests: a start (while hold is set) stays STARTING, its threads running, until a stop
 * cancels it or the hold is lifted. */
void bpftel_events__hold_start(struct bpftel_events *ev, bool hold);

struct bpftel_events_stats {
	__u64 dispatched; /* records handed to dispatch while running */
	__u64 processed;  /* callback returned >= 0 */
	__u64 drop_queue_full;
	__u64 drop_too_big;
	__u64 drop_parse; /* callback returned < 0 */
	unsigned int workers;
	__u64 per_worker[BPFTEL_EVENTS_MAX_WORKERS]; /* processed, by worker */
};

void bpftel_events__stats(struct bpftel_events *ev, struct bpftel_events_stats *out);

#endif /* BPFTEL_EVENTS_H */
