// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Run stats on a duty cycle (sampler.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>

#include "sampler.h"

#define MAX_PROGS 256

struct prog_est {
	__u32 id;
	struct bpftel_rs_est e;
};

struct bpftel_sampler {
	pthread_mutex_t lock;
	pthread_cond_t wake; /* CLOCK_MONOTONIC */
	pthread_t th;
	bool stopping;
	bpftel_rs_read_fn read;
	void *ctx;

	struct bpftel_run_stats_cfg cfg;
	int stats_fd;	  /* BPF_ENABLE_STATS, held while >= 0 */
	int error;	  /* the last time it was refused */
	bool in_window;	  /* sampled: a window is open; always: one always is */
	__u64 win_open;	  /* CLOCK_BOOTTIME ns */
	__u64 next_due;	  /* sampled: the next open; always: the next fold */
	__u64 windows;	  /* counted so far */
	__u64 mode_since; /* for on_fraction */
	__u64 on_ns;	  /* stats held since mode_since, closed windows */
	enum bpftel_run_stats_mode switch_from; /* during a switch */
	__u64 leave_ns; /* while always mode's last fold runs: when it began; else 0 */
	__u64 left_ns;	/* when always mode was last left (switch_one) */

	size_t n;
	struct prog_est progs[MAX_PROGS];
};

static __u64 boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static struct prog_est *find(struct bpftel_sampler *s, __u32 id)
{
	size_t i;

	for (i = 0; i < s->n; i++) {
		if (s->progs[i].id == id)
			return &s->progs[i];
	}
	return NULL;
}

static bool in_reading(const struct bpftel_rs_reading *r, size_t n, __u32 id)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (r[i].id == id)
			return true;
	}
	return false;
}

/*
 * Forget the programs the reading r[n] does not have: their module stopped. Only when
 * the table is full: a reading can miss a live program (the owner skips one whose
 * bpf_prog_info it could not get), and forgetting that one would drop its estimate, its
 * exported counters falling to 0, then counted again from its load.
 */
static void prune(struct bpftel_sampler *s, const struct bpftel_rs_reading *r, size_t n)
{
	size_t i, kept = 0;

	for (i = 0; i < s->n; i++) {
		if (in_reading(r, n, s->progs[i].id))
			s->progs[kept++] = s->progs[i];
	}
	s->n = kept;
}

/* The entry of r[i], a new one added (NULL when the table is full of this reading's). */
static struct prog_est *get(struct bpftel_sampler *s, const struct bpftel_rs_reading *r, size_t n,
			    size_t i)
{
	struct prog_est *p = find(s, r[i].id);

	if (p)
		return p;
	if (s->n == MAX_PROGS)
		prune(s, r, n);
	if (s->n == MAX_PROGS)
		return NULL;
	p = &s->progs[s->n++];
	p->id = r[i].id;
	bpftel_rs_init(&p->e, r[i].load_ns);
	return p;
}

/* With s->lock: read every program; each gets fn(p, reading, now). */
static void for_each_reading(struct bpftel_sampler *s,
			     void (*fn)(struct bpftel_sampler *s, struct prog_est *p,
					const struct bpftel_rs_reading *r, __u64 now))
{
	struct bpftel_rs_reading *r = NULL;
	struct prog_est *p;
	__u64 now = 0;
	int n, i;

	n = s->read(s->ctx, &r, &now);
	if (n < 0)
		return; /* nothing read: the next window will cover the time */
	for (i = 0; i < n; i++) {
		p = get(s, r, n, i);
		if (p)
			fn(s, p, &r[i], now);
	}
	free(r);
}

static void open_one(struct bpftel_sampler *s, struct prog_est *p,
		     const struct bpftel_rs_reading *r, __u64 now)
{
	(void)s;
	bpftel_rs_open(&p->e, &r->c, now);
}

static void close_one(struct bpftel_sampler *s, struct prog_est *p,
		      const struct bpftel_rs_reading *r, __u64 now)
{
	bpftel_rs_close(&p->e, &r->c, s->win_open, now);
	bpftel_rs_end(&p->e);
}

/* Exact mode: close the window at now and open the next one at once; the periodic fold
 * not a window shorter than ON (a reader may have folded a moment ago: the last window
 * is the current load for the budget and `top`), the fold that leaves the mode every
 * one. */
static void fold_one(struct bpftel_sampler *s, struct prog_est *p,
		     const struct bpftel_rs_reading *r, __u64 now)
{
	bpftel_rs_fold(&p->e, &r->c, now, s->leave_ns ? 0 : (__u64)s->cfg.on_ms * 1000000);
}

static int stats_on(struct bpftel_sampler *s)
{
	int fd;

	if (s->stats_fd >= 0)
		return 0;
	fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (fd < 0) {
		s->error = -errno;
		return s->error;
	}
	s->stats_fd = fd;
	s->error = 0; /* on again: no refusal stands */
	return 0;
}

static void stats_off(struct bpftel_sampler *s)
{
	if (s->stats_fd >= 0)
		close(s->stats_fd); /* the kernel turns stats off with its last holder */
	s->stats_fd = -1;
}

/* Sampled mode: a window opens. The counters are read once stats are on: before, they
 * did not move (unless another process held stats: those runs are not ours to count). */
static void window_open(struct bpftel_sampler *s)
{
	if (stats_on(s)) {
		/* Refused (capabilities?): try again next cycle. */
		s->next_due = boottime_ns() + (__u64)s->cfg.period_ms * 1000000;
		return;
	}
	s->win_open = boottime_ns();
	for_each_reading(s, open_one);
	s->in_window = true;
}

/* Random bits for where the next window opens (bpftel_rs_next_open): from the kernel,
 * so that a process cannot tell when the windows come and keep its runs out of them. */
static __u64 window_rnd(void)
{
	__u64 r;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = boottime_ns(); /* no entropy yet (early boot): the clock's low bits */
	return r;
}

/* Sampled mode: read, then let go of stats; the next window opens about a period after
 * this one, at a random point near it (runstats.h). */
static void window_close(struct bpftel_sampler *s)
{
	__u64 now, period = (__u64)s->cfg.period_ms * 1000000;
	__u64 on = (__u64)s->cfg.on_ms * 1000000;

	for_each_reading(s, close_one);
	now = boottime_ns();
	stats_off(s);
	s->in_window = false;
	s->on_ns += now - s->win_open;
	s->windows++;
	s->next_due = bpftel_rs_next_open(s->win_open, period, on, window_rnd());
	if (s->next_due < now)
		s->next_due = now + period - on;
}

/* Always mode: everything up to now, and rates over the time since the last fold. */
static void fold(struct bpftel_sampler *s)
{
	for_each_reading(s, fold_one);
	s->win_open = boottime_ns();
	s->windows++;
}

/*
 * A mode switch, for each program, in one reading: the estimate is brought to now (the
 * time since its last update at the last window's rate when stats were sampled until
 * then; as no runs when they were off, its counts having stayed where they were, and
 * when they were always on: counted exactly up to the fold that left that mode an
 * instant before, and the last window, folded by whichever reader came last, may be of
 * any length, a rate of a few runs in a few microseconds), and in always mode the one
 * window opens at that same instant, so that it stands for itself.
 */
static void switch_one(struct bpftel_sampler *s, struct prog_est *p,
		       const struct bpftel_rs_reading *r, __u64 now)
{
	/* From always, one the leaving fold did not reach (its reading failed, or skipped
	 * it): its stretch since its last fold at that fold's rate, as when sampled. */
	bool at_rate = s->switch_from == BPFTEL_RUN_STATS_SAMPLED ||
		       (s->switch_from == BPFTEL_RUN_STATS_ALWAYS && p->e.covered_to < s->left_ns);

	bpftel_rs_end(&p->e);
	bpftel_rs_cover(&p->e, now, at_rate);
	if (s->cfg.mode == BPFTEL_RUN_STATS_ALWAYS)
		bpftel_rs_open(&p->e, &r->c, now);
}

/* With s->lock: leave the current mode, keeping what was counted. */
static void leave_mode(struct bpftel_sampler *s)
{
	__u64 now = boottime_ns();

	if (s->cfg.mode == BPFTEL_RUN_STATS_ALWAYS) {
		s->leave_ns = s->left_ns = now;
		fold(s);
		s->leave_ns = 0;
		s->on_ns += now - s->mode_since;
	} else if (s->cfg.mode == BPFTEL_RUN_STATS_SAMPLED && s->in_window) {
		window_close(s);
	}
	stats_off(s);
	s->in_window = false;
	s->switch_from = s->cfg.mode;
}

static void enter_mode(struct bpftel_sampler *s, const struct bpftel_run_stats_cfg *cfg)
{
	s->cfg = *cfg;
	for_each_reading(s, switch_one);
	s->mode_since = boottime_ns();
	s->on_ns = 0;
	s->windows = 0;
	s->next_due = s->mode_since; /* sampled: the first window opens now */
	if (cfg->mode == BPFTEL_RUN_STATS_ALWAYS) {
		s->win_open = s->mode_since;
		s->in_window = true;
		s->next_due = s->mode_since + (__u64)cfg->period_ms * 1000000;
	}
}

static int valid(const struct bpftel_run_stats_cfg *cfg)
{
	if (cfg->mode > BPFTEL_RUN_STATS_SAMPLED)
		return -EINVAL;
	if (cfg->mode != BPFTEL_RUN_STATS_OFF && (!cfg->on_ms || cfg->period_ms <= cfg->on_ms))
		return -EINVAL;
	return 0;
}

int bpftel_sampler__set(struct bpftel_sampler *s, const struct bpftel_run_stats_cfg *cfg)
{
	struct bpftel_run_stats_cfg off = {.mode = BPFTEL_RUN_STATS_OFF};
	int err = valid(cfg);

	if (err)
		return err;
	pthread_mutex_lock(&s->lock);
	if (!memcmp(&s->cfg, cfg, sizeof(*cfg))) {
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	leave_mode(s);
	/* Always: on now, synchronously, so that a refusal is the caller's answer. */
	if (cfg->mode == BPFTEL_RUN_STATS_ALWAYS && (err = stats_on(s)))
		cfg = &off;
	enter_mode(s, cfg);
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
	return err;
}

/* Sleep until the boottime deadline (0: until woken). */
static void wait_until(struct bpftel_sampler *s, __u64 deadline)
{
	struct timespec until;
	__u64 now = boottime_ns(), delta;

	if (!deadline) {
		pthread_cond_wait(&s->wake, &s->lock);
		return;
	}
	if (deadline <= now)
		return;
	delta = deadline - now;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += delta / 1000000000ULL;
	until.tv_nsec += delta % 1000000000ULL;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&s->wake, &s->lock, &until);
}

static void *sampler_main(void *arg)
{
	struct bpftel_sampler *s = arg;
	__u64 now, deadline;

	pthread_mutex_lock(&s->lock);
	while (!s->stopping) {
		now = boottime_ns();
		deadline = 0;
		if (s->cfg.mode == BPFTEL_RUN_STATS_SAMPLED) {
			if (!s->in_window && now >= s->next_due)
				window_open(s);
			else if (s->in_window && now >= s->win_open + (__u64)s->cfg.on_ms * 1000000)
				window_close(s);
			deadline = s->in_window ? s->win_open + (__u64)s->cfg.on_ms * 1000000
						: s->next_due;
		} else if (s->cfg.mode == BPFTEL_RUN_STATS_ALWAYS) {
			if (now >= s->next_due) {
				fold(s);
				s->next_due = now + (__u64)s->cfg.period_ms * 1000000;
			}
			deadline = s->next_due;
		}
		wait_until(s, deadline);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int bpftel_sampler__new(bpftel_rs_read_fn read, void *ctx, struct bpftel_sampler **out)
{
	struct bpftel_sampler *s = calloc(1, sizeof(*s));
	pthread_condattr_t ca;
	int err;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->read = read;
	s->ctx = ctx;
	s->stats_fd = -1;
	s->mode_since = boottime_ns();
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->wake, &ca);
	pthread_condattr_destroy(&ca);
	err = pthread_create(&s->th, NULL, sampler_main, s);
	if (err) {
		pthread_cond_destroy(&s->wake);
		pthread_mutex_destroy(&s->lock);
		free(s);
		return -err;
	}
	*out = s;
	return 0;
}

void bpftel_sampler__free(struct bpftel_sampler *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->th, NULL);
	stats_off(s);
	pthread_cond_destroy(&s->wake);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void bpftel_sampler__info(struct bpftel_sampler *s, struct bpftel_run_stats_info *info)
{
	__u64 now = boottime_ns(), on, span;

	pthread_mutex_lock(&s->lock);
	memset(info, 0, sizeof(*info));
	info->cfg = s->cfg;
	info->stats_on = s->stats_fd >= 0;
	info->windows = s->windows;
	info->error = s->error;
	on = s->on_ns;
	if (s->cfg.mode == BPFTEL_RUN_STATS_ALWAYS && s->stats_fd >= 0)
		on = now - s->mode_since;
	else if (s->in_window)
		on += now - s->win_open;
	span = now - s->mode_since;
	info->on_fraction = span ? (double)on / span : 0;
	pthread_mutex_unlock(&s->lock);
}

bool bpftel_sampler__stats_on(struct bpftel_sampler *s)
{
	bool on;

	pthread_mutex_lock(&s->lock);
	on = s->stats_fd >= 0;
	pthread_mutex_unlock(&s->lock);
	return on;
}

void bpftel_sampler__estimates(struct bpftel_sampler *s, const struct bpftel_rs_reading *r,
			       size_t n, __u64 now, struct bpftel_rs_est *est,
			       struct bpftel_rs_count *cur)
{
	struct prog_est *p;
	size_t i;

	pthread_mutex_lock(&s->lock);
	for (i = 0; i < n; i++) {
		p = s->cfg.mode == BPFTEL_RUN_STATS_ALWAYS ? get(s, r, n, i) : find(s, r[i].id);
		if (p && s->cfg.mode == BPFTEL_RUN_STATS_ALWAYS && s->in_window)
			bpftel_rs_fold(&p->e, &r[i].c, now, (__u64)s->cfg.on_ms * 1000000);
		if (p)
			est[i] = p->e;
		else
			bpftel_rs_init(&est[i], r[i].load_ns);
		cur[i] = (struct bpftel_rs_count){est[i].cnt, est[i].ns};
		if (p && s->cfg.mode == BPFTEL_RUN_STATS_ALWAYS)
			bpftel_rs_peek(&p->e, &r[i].c, &cur[i]);
	}
	pthread_mutex_unlock(&s->lock);
}
