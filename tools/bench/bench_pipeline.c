// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Benchmark of the event pipeline (user/events), not a test. Producer threads dispatch
 * 64-byte records to 2 workers whose callback reads each record:
 *   - throughput with 1 and 2 producers, unthrottled and paced: offered events/s,
 *     events/s processed (dispatch to callback, drain at stop included) and loss;
 *   - start-up balance: M sources dispatching K records each, right after start. The
 *     "per-source" row routes with one counter per source (what a peer's receiver
 *     did; computed here, the library has no such mode), the "shared" row is what the
 *     library's workers processed.
 *
 * Usage: bench_pipeline [-d SECONDS] [-r EVENTS_PER_S] [-w WORKERS] [-b BALANCE_WORKERS]
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "user/events/events.h"

#define RECORD	   64
#define PACE_BATCH 64

static double duration = 2.0;
static double paced_rate = 2e6;
static unsigned int nworkers = 2;
static unsigned int balance_workers = 4;

struct sink {
	__u64 sum __attribute__((aligned(64)));
} sinks[BPFTEL_EVENTS_MAX_WORKERS];

static int read_cb(void *ctx, const void *data, size_t size, unsigned int worker)
{
	__u64 v;

	(void)ctx;
	if (size < sizeof(v))
		return -EINVAL;
	memcpy(&v, data, sizeof(v));
	sinks[worker].sum += v; /* one writer per worker */
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct producer {
	struct bpftel_events *ev;
	int source;
	double rate; /* events/s, 0 = unthrottled */
	double t0;
	int *go;
	bool *quit;
	__u64 sent;
	pthread_t thread;
};

static void sleep_until(double t)
{
	struct timespec ts = {.tv_sec = (time_t)t, .tv_nsec = (long)((t - (time_t)t) * 1e9)};

	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	unsigned char rec[RECORD];
	__u64 i;

	memset(rec, 0, sizeof(rec));
	while (!__atomic_load_n(p->go, __ATOMIC_ACQUIRE))
		;
	for (i = 0; !__atomic_load_n(p->quit, __ATOMIC_RELAXED); i++) {
		if (p->rate && i % PACE_BATCH == 0)
			sleep_until(p->t0 + i / p->rate);
		memcpy(rec, &i, sizeof(i));
		bpftel_events__dispatch(p->ev, p->source, rec, sizeof(rec));
	}
	p->sent = i;
	return NULL;
}

/* One run: nprod producers at `rate` events/s in total (0 = as fast as they can). */
static void run(unsigned int nprod, double rate)
{
	struct bpftel_events_opts opts = {.sz = sizeof(opts), .workers = nworkers};
	struct producer p[2] = {};
	struct bpftel_events_stats st;
	struct bpftel_events *ev;
	double t0, t1;
	bool quit = false;
	int go = 0, err;
	unsigned int i;
	char label[32];

	err = bpftel_events__new(&opts, &ev);
	if (err) {
		fprintf(stderr, "bpftel_events__new: %s\n", strerror(-err));
		exit(1);
	}
	for (i = 0; i < nprod; i++) {
		p[i].ev = ev;
		p[i].source = bpftel_events__add_source(ev, read_cb, NULL);
		p[i].rate = rate / nprod;
		p[i].go = &go;
		p[i].quit = &quit;
	}
	bpftel_events__start(ev);
	for (i = 0; i < nprod; i++)
		pthread_create(&p[i].thread, NULL, producer_main, &p[i]);
	t0 = now_s();
	for (i = 0; i < nprod; i++)
		p[i].t0 = t0;
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	sleep_until(t0 + duration);
	__atomic_store_n(&quit, true, __ATOMIC_RELAXED);
	for (i = 0; i < nprod; i++)
		pthread_join(p[i].thread, NULL);
	bpftel_events__stop(ev);
	t1 = now_s();
	bpftel_events__stats(ev, &st);

	if (rate)
		snprintf(label, sizeof(label), "paced %.1fM/s", rate / 1e6);
	else
		snprintf(label, sizeof(label), "unthrottled");
	printf("| %u | %u | %-14s | %8.2f | %9.2f | %7.3f%% | %10llu | %10llu |\n", nprod, nworkers,
	       label, st.dispatched / (t1 - t0) / 1e6, st.processed / (t1 - t0) / 1e6,
	       st.dispatched ? 100.0 * st.drop_queue_full / st.dispatched : 0.0,
	       (unsigned long long)st.per_worker[0], (unsigned long long)st.per_worker[1]);
	bpftel_events__free(ev);
}

static void print_counts(const char *label, int m, int k, const __u64 *per_worker)
{
	__u64 lo = ~0ULL, hi = 0;
	unsigned int w;

	printf("| %2d x %-2d | %-10s |", m, k, label);
	for (w = 0; w < balance_workers; w++) {
		printf(" %llu", (unsigned long long)per_worker[w]);
		lo = per_worker[w] < lo ? per_worker[w] : lo;
		hi = per_worker[w] > hi ? per_worker[w] : hi;
	}
	if (lo)
		printf(" | %llu | %.2f |\n", (unsigned long long)(hi - lo), (double)hi / lo);
	else
		printf(" | %llu | inf |\n", (unsigned long long)hi);
}

/* M sources, K records each, one after the other, right after start. */
static void startup_balance(int m, int k)
{
	struct bpftel_events_opts opts = {.sz = sizeof(opts), .workers = balance_workers};
	__u64 per_source[BPFTEL_EVENTS_MAX_WORKERS] = {};
	struct bpftel_events_stats st;
	unsigned char rec[RECORD] = {};
	struct bpftel_events *ev;
	int s, i;

	for (s = 0; s < m; s++) {
		for (i = 0; i < k; i++)
			per_source[i % balance_workers]++; /* source s's own counter is i */
	}
	print_counts("per-source", m, k, per_source);

	if (bpftel_events__new(&opts, &ev))
		exit(1);
	for (s = 0; s < m; s++)
		bpftel_events__add_source(ev, read_cb, NULL);
	bpftel_events__start(ev);
	for (s = 0; s < m; s++) {
		for (i = 0; i < k; i++)
			bpftel_events__dispatch(ev, s, rec, sizeof(rec));
	}
	bpftel_events__stop(ev);
	bpftel_events__stats(ev, &st);
	print_counts("shared", m, k, st.per_worker);
	bpftel_events__free(ev);
}

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [-d SECONDS] [-r EVENTS_PER_S] [-w WORKERS] [-b BALANCE_WORKERS]\n",
		prog);
	exit(2);
}

int main(int argc, char **argv)
{
	static const int mk[][2] = {{4, 3}, {7, 5}, {16, 1}, {16, 7}};
	char *end;
	int opt, i;

	while ((opt = getopt(argc, argv, "d:r:w:b:")) != -1) {
		errno = 0;
		switch (opt) {
		case 'd':
			duration = strtod(optarg, &end);
			break;
		case 'r':
			paced_rate = strtod(optarg, &end);
			break;
		case 'w':
			nworkers = strtoul(optarg, &end, 10);
			break;
		case 'b':
			balance_workers = strtoul(optarg, &end, 10);
			break;
		default:
			usage(argv[0]);
		}
		if (errno || *end || duration <= 0 || paced_rate <= 0 || nworkers < 2 ||
		    nworkers > BPFTEL_EVENTS_MAX_WORKERS || balance_workers < 1 ||
		    balance_workers > BPFTEL_EVENTS_MAX_WORKERS)
			usage(argv[0]);
	}

	printf("# command:");
	for (i = 0; i < argc; i++)
		printf(" %s", argv[i]);
	printf("\n# %ld online CPUs, %d-byte records, %.1f s per run\n\n",
	       sysconf(_SC_NPROCESSORS_ONLN), RECORD, duration);
	printf("| producers | workers | load | offered Mev/s | processed Mev/s | loss | worker 0 | "
	       "worker 1 |\n");
	printf("|---|---|---|---|---|---|---|---|\n");
	run(1, 0);
	run(2, 0);
	run(1, paced_rate);
	run(2, paced_rate);

	printf("\n# start-up balance, %u workers: M sources x K records each, in turn\n\n",
	       balance_workers);
	printf("| M x K | counter | per worker | max-min | max/min |\n");
	printf("|---|---|---|---|---|\n");
	for (i = 0; i < (int)(sizeof(mk) / sizeof(mk[0])); i++)
		startup_balance(mk[i][0], mk[i][1]);
	return 0;
}
