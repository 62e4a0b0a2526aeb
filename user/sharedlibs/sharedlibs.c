// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/sysmacros.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sharedlibs_internal.h"
#include "shared_libraries.skel.h"
#include "procfile.h"
#include "uprobes.h"
#include "user/common/ctl.h"
#include "user/common/kdev.h"
#include "user/common/log.h"
#include "user/manager/manager.h"

/* An open of a path of SHLIB_PATH_MAX - 1 bytes is a record the consumer must take. */
_Static_assert(sizeof(struct shlib_event) <= BPFTEL_RINGBUF_MAX_RECORD,
	       "shlib_event larger than the consumer's largest record");

#define DEFAULT_MAX_DETECTIONS 1024

/* Libsets and their stems: what the watcher matches, by subscribers' masks. */
static const struct {
	enum shlib_lib lib;
	enum shlib_libset libset;
} stems[] = {
	{SHLIB_LIB_SSL, SHLIB_LIBSET_CRYPTO},	 {SHLIB_LIB_CRYPTO, SHLIB_LIBSET_CRYPTO},
	{SHLIB_LIB_GNUTLS, SHLIB_LIBSET_CRYPTO}, {SHLIB_LIB_CUDART, SHLIB_LIBSET_GPU},
	{SHLIB_LIB_CUDA, SHLIB_LIBSET_GPU},
};

_Static_assert(sizeof(stems) / sizeof(stems[0]) <= SHLIB_MAX_STEMS, "too many stems");

void bpftel_shlib_config(struct shlib_config *cfg, __u32 libsets)
{
	const char *name;
	size_t i;

	memset(cfg, 0, sizeof(*cfg));
	cfg->libsets = libsets & SHLIB_LIBSET_ALL;
	for (i = 0; i < sizeof(stems) / sizeof(stems[0]); i++) {
		name = bpftel_shlib_lib_name(stems[i].lib);
		memcpy(cfg->stems[i].name, name, strlen(name));
		cfg->stems[i].len = strlen(name);
		cfg->stems[i].lib = stems[i].lib;
		cfg->stems[i].libset = stems[i].libset;
	}
	cfg->nstems = i;
	cfg->flags = (libsets & SHLIB_SUB_SOCKETS ? SHLIB_CFG_SOCKETS : 0) |
		     (libsets & SHLIB_SUB_EXECS ? SHLIB_CFG_EXECS : 0);
}

int bpftel_shlib_event_check(const void *data, size_t size)
{
	const struct shlib_event *ev = data;

	if (size < SHLIB_EVENT_HDR_SIZE + 1 || size > sizeof(*ev))
		return -EINVAL;
	if (ev->path_len >= SHLIB_PATH_MAX || size != SHLIB_EVENT_HDR_SIZE + ev->path_len + 1)
		return -EINVAL;
	if (ev->path[ev->path_len] != '\0' || memchr(ev->path, '\0', ev->path_len))
		return -EINVAL;
	if (ev->lib >= SHLIB_LIB__COUNT || ev->libset >= SHLIB_LIBSET__COUNT)
		return -EINVAL;
	return 0;
}

static void detection_clear(struct bpftel_shlib_detection *d)
{
	free(d->path);
	free(d->host_path);
	memset(d, 0, sizeof(*d));
}

/* The row of this process's opens of path: a reused pid is another process, with rows
 * of its own. */
static struct bpftel_shlib_detection *detection_find(struct bpftel_sharedlibs *sl,
						     const struct shlib_event *ev)
{
	struct bpftel_shlib_detection *d;
	size_t i;

	for (i = 0; i < sl->det_len; i++) {
		d = &sl->det[(sl->det_head + i) % sl->det_cap];
		if (d->pid == ev->pid && d->start_ns == ev->start_ns && !strcmp(d->path, ev->path))
			return d;
	}
	return NULL;
}

static struct bpftel_shlib_detection *detection_add(struct bpftel_sharedlibs *sl)
{
	if (sl->det_len == sl->det_cap) {
		detection_clear(&sl->det[sl->det_head]);
		sl->det_head = (sl->det_head + 1) % sl->det_cap;
		sl->det_len--;
		sl->evicted++;
	}
	sl->det_len++;
	return &sl->det[(sl->det_head + sl->det_len - 1) % sl->det_cap];
}


/*
 * The directory a reported path starts from, as the kernel took it: the process chose
 * ev->dirfd, any int, and the kernel looks at it only for a relative path. An absolute
 * path starts at the process's root whatever it says; a negative one other than
 * AT_FDCWD is no directory (its open failed with EBADF), and never one of procfile.h's
 * own values (BPFTEL_PROCFILE_MAPPED, _EXE), which would walk /proc/<pid>/map_files/
 * without the process's root around the walk.
 */
static int event_dirfd(const struct shlib_event *ev)
{
	if (ev->path[0] == '/')
		return AT_FDCWD;
	if (ev->dirfd < 0 && ev->dirfd != AT_FDCWD)
		return -EBADF;
	return ev->dirfd;
}

/*
 * An exec the kernel side reported (bpf/lib/shlib_exec.h): the registry looks into the
 * executable, and attaches to it if it is a Go program; one that is not is not
 * reported again while its ctime is the one of the file the registry read
 * (shlib_exe_skip): rewritten in place, it is reported and read again. Not a
 * detection: the table lists the libraries processes opened, not every program started.
 */
static int handle_exec(struct bpftel_sharedlibs *sl, const struct shlib_event *ev)
{
	struct bpftel_shlib_detection d = {
		.pid = ev->pid,
		.tid = ev->tid,
		.lib = SHLIB_LIB_GO,
		.libset = ev->libset,
		.syscall = SHLIB_SYS_EXEC,
		.dirfd = event_dirfd(ev),
		.dev = bpftel_kdev(ev->dev),
		.ino = ev->ino,
		.sdev = bpftel_kdev(ev->sdev),
		.start_ns = ev->start_ns,
		.ctime = {.tv_sec = ev->ctime_sec, .tv_nsec = ev->ctime_nsec},
		.path = (char *)ev->path,
	};
	struct shlib_file_key key = {.ino = ev->ino, .dev = ev->dev};
	struct shlib_exe_skip_val val = {};
	struct bpftel_uprobes *registry;
	struct shlib_go_exec *ge;
	struct timespec ctime;
	int go, fd = -1;

	pthread_mutex_lock(&sl->lock);
	sl->execs++;
	registry = sl->registry;
	pthread_mutex_unlock(&sl->lock);
	go = registry ? bpftel_uprobes__exec(registry, &d, &ctime) : -ENOENT;
	if (go == 1) {
		/* A Go program: named as run, for when it is gone before its first message
		 * is read (a short-lived client, kubectl). */
		pthread_mutex_lock(&sl->lock);
		ge = &sl->go_execs[sl->go_execs_next++ % SHLIB_GO_EXECS];
		ge->pid = ev->pid;
		ge->start_ns = ev->start_ns;
		memcpy(ge->comm, ev->comm, sizeof(ge->comm));
		ge->comm[sizeof(ge->comm) - 1] = '\0';
		pthread_mutex_unlock(&sl->lock);
	}
	if (go)
		return 0;
	/* The ctime of the file read, not the exec's: written since the exec, the file
	 * the verdict is on is the newer one. */
	val.ctime_sec = ctime.tv_sec;
	val.ctime_nsec = (__u32)ctime.tv_nsec;
	pthread_mutex_lock(&sl->lock);
	if (sl->loaded)
		fd = bpf_map__fd(sl->skel->maps.shlib_exe_skip);
	if (fd >= 0 && !bpf_map_update_elem(fd, &key, &val, BPF_ANY))
		sl->execs_skipped++;
	pthread_mutex_unlock(&sl->lock);
	return 0;
}

/* Ring-buffer callback, on the module's consumer thread. */
static int handle_event(void *ctx, void *data, size_t size)
{
	struct bpftel_sharedlibs *sl = ctx;
	const struct shlib_event *ev = data;
	struct bpftel_shlib_detection *d, copy;
	time_t now = time(NULL);
	char *path, *host_path;

	if (bpftel_shlib_event_check(data, size)) {
		pthread_mutex_lock(&sl->lock);
		sl->received++;
		sl->malformed++;
		pthread_mutex_unlock(&sl->lock);
		pr_warn("sharedlibs: dropped malformed event of %zu bytes", size);
		return -EINVAL; /* counted by the pipeline as a parse drop too */
	}
	if (ev->syscall == SHLIB_SYS_EXEC) {
		pthread_mutex_lock(&sl->lock);
		sl->received++;
		pthread_mutex_unlock(&sl->lock);
		return handle_exec(sl, ev);
	}
	pthread_mutex_lock(&sl->lock);
	sl->received++;
	d = detection_find(sl, ev);
	if (d) {
		d->opens++;
		d->last_seen = now;
		copy = *d;
		copy.path = (char *)ev->path;
		copy.host_path = NULL;
		copy.dirfd = event_dirfd(ev); /* this open's, not the first one's */
		copy.dev = bpftel_kdev(ev->dev);
		copy.ino = ev->ino;
		copy.sdev = bpftel_kdev(ev->sdev);
		pthread_mutex_unlock(&sl->lock);
		/* Still tell the listener: the registry may have let the file go since (an
		 * eviction, a module's restart), and answers a process it holds from its row. */
		if (sl->listener)
			sl->listener(sl->listener_ctx, &copy);
		return 0;
	}
	pthread_mutex_unlock(&sl->lock);
	/* A new (process, path): where it leads, for display. Outside the lock: it walks
	 * /proc. A repeat (a process opening the same file in a loop) never gets here. */
	host_path = bpftel_procfile_host_path(&(struct bpftel_procfile_target){
		.pid = ev->pid,
		.dirfd = event_dirfd(ev),
		.path = ev->path,
		.dev = bpftel_kdev(ev->dev),
		.ino = ev->ino,
	});
	path = strdup(ev->path);
	pthread_mutex_lock(&sl->lock);
	if (!path || detection_find(sl, ev)) {
		pthread_mutex_unlock(&sl->lock);
		free(host_path);
		free(path);
		return 0;
	}
	d = detection_add(sl);
	sl->detected[ev->libset]++; /* libset < SHLIB_LIBSET__COUNT: checked above */
	d->path = path;
	d->host_path = host_path;
	d->pid = ev->pid;
	d->tid = ev->tid;
	d->start_ns = ev->start_ns;
	d->lib = ev->lib;
	d->libset = ev->libset;
	d->syscall = ev->syscall;
	d->dirfd = event_dirfd(ev);
	d->dev = bpftel_kdev(ev->dev); /* kernel dev_t -> st_dev */
	d->ino = ev->ino;
	d->sdev = bpftel_kdev(ev->sdev);
	memcpy(d->comm, ev->comm, sizeof(d->comm));
	d->comm[sizeof(d->comm) - 1] = '\0';
	d->opens = 1;
	d->first_seen = d->last_seen = now;
	copy = *d;
	copy.path = (char *)ev->path;
	copy.host_path = NULL;
	pthread_mutex_unlock(&sl->lock);
	if (sl->listener)
		sl->listener(sl->listener_ctx, &copy);
	pr_debug("sharedlibs: pid %u opened %s %s", ev->pid, bpftel_shlib_lib_name(ev->lib),
		 ev->path);
	return 0;
}

/* ---- the module ---- */

/*
 * One probe per open, at its exit. fexit on do_sys_openat2 sees open, openat and openat2
 * at once; where the kernel refuses it (EPERM here), the sys_exit tracepoints do, and
 * the open/openat2 ones are skipped when the fexit won.
 */
#define SYS_EXIT_TP(probe, prog, tp, pol)                                               \
	{                                                                               \
		.name = probe, .policy = pol, .ncand = 1,                               \
		.cand = {{BPFTEL_ATTACH_TRACEPOINT, prog, tp}}, .covered_by = "openat", \
		.covered_by_cand = 0,                                                   \
	}

#define SOCK_TP(probe, prog, tp)                                       \
	{                                                              \
		.name = probe, .policy = BPFTEL_PROBE_BEST_EFFORT, .ncand = 1, \
		.cand = {{BPFTEL_ATTACH_TRACEPOINT, prog, tp}},        \
	}

static const struct bpftel_probe_spec probe_specs[] = {
	{
		.name = "openat",
		.policy = BPFTEL_PROBE_REQUIRED,
		.ncand = 2,
		.cand = {{BPFTEL_ATTACH_FEXIT, "shlib_fexit_open", "do_sys_openat2"},
			 {BPFTEL_ATTACH_TRACEPOINT, "shlib_exit_openat",
			  "syscalls/sys_exit_openat"}},
	},
	/* open(2) does not exist on every arch; openat2(2) needs 5.6. */
	SYS_EXIT_TP("open", "shlib_exit_open", "syscalls/sys_exit_open", BPFTEL_PROBE_BEST_EFFORT),
	SYS_EXIT_TP("openat2", "shlib_exit_openat2", "syscalls/sys_exit_openat2",
		    BPFTEL_PROBE_BEST_EFFORT),
	/* Execs, for subscribers that ask (SHLIB_SUB_EXECS): new Go programs. */
	{
		.name = "exec",
		.policy = BPFTEL_PROBE_BEST_EFFORT,
		.ncand = 1,
		.cand = {{BPFTEL_ATTACH_TRACEPOINT, "shlib_exec", "sched/sched_process_exec"}},
	},
	/* Socket owners, for subscribers that ask (SHLIB_SUB_SOCKETS). */
	SOCK_TP("connect", "shlib_exit_connect", "syscalls/sys_exit_connect"),
	SOCK_TP("accept", "shlib_exit_accept", "syscalls/sys_exit_accept"),
	SOCK_TP("accept4", "shlib_exit_accept4", "syscalls/sys_exit_accept4"),
};

static int shlib_open(struct bpftel_module *m)
{
	struct bpftel_sharedlibs *sl = bpftel_module__priv(m);
	struct shared_libraries *skel;
	size_t i;
	int err;

	skel = shared_libraries__open();
	if (!skel)
		return -errno;
	skel->rodata->shlib_self_tgid = getpid();
	pthread_mutex_lock(&sl->lock);
	sl->skel = skel;
	pthread_mutex_unlock(&sl->lock);
	bpftel_module__set_object(m, skel->obj);
	for (i = 0; i < sizeof(probe_specs) / sizeof(probe_specs[0]); i++) {
		err = bpftel_module__add_probe(m, &probe_specs[i]);
		if (err)
			return err;
	}
	/* Execs apart (bpf/lib/shlib_probe.h), through the same handler. */
	return bpftel_module__add_ringbuf(m, "shlib_events", handle_event, sl) ?:
	       bpftel_module__add_ringbuf(m, "shlib_exec_events", handle_event, sl);
}

static int shlib_load(struct bpftel_module *m)
{
	struct bpftel_sharedlibs *sl = bpftel_module__priv(m);

	int err = shared_libraries__load(sl->skel);

	if (!err) {
		pthread_mutex_lock(&sl->lock);
		sl->loaded = true;
		pthread_mutex_unlock(&sl->lock);
	}
	return err;
}

/* Under sl->lock, loaded. */
static void read_kernel_counters(struct bpftel_sharedlibs *sl, __u64 *out)
{
	bpftel_percpu_counters_read(bpf_map__fd(sl->skel->maps.shlib_counters), SHLIB_CNT__COUNT,
				    out, sl->live_last);
}

static void shlib_close(struct bpftel_module *m)
{
	struct bpftel_sharedlibs *sl = bpftel_module__priv(m);
	__u64 last[SHLIB_CNT__COUNT] = {};
	struct shared_libraries *skel;
	int i;

	/* Under sl->lock: a concurrent bpftel_sharedlibs__counters reads these maps. */
	pthread_mutex_lock(&sl->lock);
	if (sl->loaded) {
		read_kernel_counters(sl, last);
		for (i = 0; i < SHLIB_CNT__COUNT; i++)
			sl->retired[i] += last[i];
	}
	memset(sl->live_last, 0, sizeof(sl->live_last)); /* the next object's start at 0 */
	sl->loaded = false;
	sl->sockets_on = false; /* the next load's maps start empty, recording off */
	sl->reported = 0;
	skel = sl->skel;
	sl->skel = NULL;
	pthread_mutex_unlock(&sl->lock);
	/* Its fds closed, its memory unmapped: not under the lock, which USM's workers
	 * take for their socket lookups while this module stops. */
	shared_libraries__destroy(skel);
}

static int shlib_set_subscriptions(struct bpftel_module *m, __u64 mask)
{
	struct bpftel_sharedlibs *sl = bpftel_module__priv(m);
	struct shlib_config cfg;
	__u32 zero = 0, reported;

	bpftel_shlib_config(&cfg, (__u32)mask);
	reported = cfg.libsets | (cfg.flags & SHLIB_CFG_EXECS ? SHLIB_SUB_EXECS : 0);
	/* Stamped before the programs record again: an entry made after is of a
	 * connection they saw made. */
	pthread_mutex_lock(&sl->lock);
	if ((cfg.flags & SHLIB_CFG_SOCKETS) && !sl->sockets_on)
		sl->sockets_since_ns = bpftel_mono_ns();
	sl->sockets_on = cfg.flags & SHLIB_CFG_SOCKETS;
	pthread_mutex_unlock(&sl->lock);
	if (bpf_map_update_elem(bpf_map__fd(sl->skel->maps.shlib_config), &zero, &cfg, BPF_ANY)) {
		int err = -errno;

		pr_err("sharedlibs: cannot write config map: %s", strerror(-err));
		return err;
	}
	/* What was off is read from /proc by a scan begun after this (housekeeping). */
	pthread_mutex_lock(&sl->lock);
	if (reported & ~sl->reported)
		sl->gained_ms = bpftel_mono_ms();
	sl->reported = reported;
	pthread_mutex_unlock(&sl->lock);
	return 0;
}

int bpftel_sharedlibs__new(struct bpftel_manager *mgr, const struct bpftel_sharedlibs_opts *opts,
			   struct bpftel_sharedlibs **out)
{
	size_t max_det = DEFAULT_MAX_DETECTIONS;
	struct bpftel_sharedlibs *sl;
	int err;

	*out = NULL;
	if (opts && opts->sz >= sizeof(*opts) && opts->max_detections)
		max_det = opts->max_detections;
	sl = calloc(1, sizeof(*sl));
	if (!sl)
		return -ENOMEM;
	sl->det_cap = max_det;
	sl->det = calloc(max_det, sizeof(*sl->det));
	if (!sl->det) {
		free(sl);
		return -ENOMEM;
	}
	pthread_mutex_init(&sl->lock, NULL);
	sl->ops = (struct bpftel_module_ops){
		.name = BPFTEL_SHAREDLIBS_MODULE,
		.open = shlib_open,
		.load = shlib_load,
		.close = shlib_close,
		.set_subscriptions = shlib_set_subscriptions,
		.shared = true,
		.command = "libs",
		.report = sharedlibs_report,
		.stats = sharedlibs_stats,
		.metrics = sharedlibs_metrics,
		.housekeeping = sharedlibs_housekeeping,
	};
	err = bpftel_manager__register(mgr, &sl->ops, sl, &sl->module);
	if (err) {
		bpftel_sharedlibs__free(sl);
		return err;
	}
	*out = sl;
	return 0;
}

void bpftel_sharedlibs__free(struct bpftel_sharedlibs *sl)
{
	size_t i;

	if (!sl)
		return;
	for (i = 0; i < sl->det_cap; i++)
		detection_clear(&sl->det[i]);
	free(sl->det);
	pthread_mutex_destroy(&sl->lock);
	free(sl);
}

void bpftel_sharedlibs__set_listener(struct bpftel_sharedlibs *sl, bpftel_shlib_listener_fn fn,
				     void *ctx)
{
	sl->listener = fn;
	sl->listener_ctx = ctx;
}

void bpftel_sharedlibs__set_registry(struct bpftel_sharedlibs *sl, struct bpftel_uprobes *u)
{
	bpftel_sharedlibs__set_listener(sl, bpftel_uprobes__listener, u);
	sl->registry = u;
}

int bpftel_sharedlibs__comm_of(struct bpftel_sharedlibs *sl, __u32 pid, __u64 now_ticks,
			       char comm[SHLIB_COMM_LEN])
{
	/* /proc's start times are clock ticks, the kernel's nanoseconds cut to them. */
	long hz = sysconf(_SC_CLK_TCK);
	__u64 ns_per_tick = hz > 0 ? 1000000000ull / (__u64)hz : 10000000ull;
	const struct bpftel_shlib_detection *d;
	const struct shlib_go_exec *ge;
	const char *name = NULL;
	__u64 start = 0;
	size_t i;

	pthread_mutex_lock(&sl->lock);
	for (i = sl->det_len; i-- > 0 && !name;) {
		d = &sl->det[(sl->det_head + i) % sl->det_cap];
		if (d->pid == pid && d->comm[0] &&
		    !(now_ticks && d->start_ns && d->start_ns / ns_per_tick == now_ticks)) {
			name = d->comm;
			start = d->start_ns;
		}
	}
	/* Or the Go executable it ran (which opened no library): the newer process's of
	 * the two, when both hold the pid (one gone before the other started). */
	for (i = 0; i < SHLIB_GO_EXECS; i++) {
		ge = &sl->go_execs[(sl->go_execs_next - 1 - i) % SHLIB_GO_EXECS];
		if (ge->pid == pid && ge->comm[0] &&
		    !(now_ticks && ge->start_ns && ge->start_ns / ns_per_tick == now_ticks)) {
			if (!name || ge->start_ns > start)
				name = ge->comm;
			break;
		}
	}
	if (name) {
		memcpy(comm, name, SHLIB_COMM_LEN);
		comm[SHLIB_COMM_LEN - 1] = '\0';
	}
	pthread_mutex_unlock(&sl->lock);
	return name ? 0 : -ENOENT;
}

size_t bpftel_sharedlibs__detections(struct bpftel_sharedlibs *sl,
				     struct bpftel_shlib_detection **out)
{
	struct bpftel_shlib_detection *copy, *d;
	size_t i, n;

	pthread_mutex_lock(&sl->lock);
	copy = calloc(sl->det_len ? sl->det_len : 1, sizeof(*copy));
	for (n = 0; copy && n < sl->det_len; n++) {
		d = &sl->det[(sl->det_head + n) % sl->det_cap];
		copy[n] = *d;
		copy[n].path = strdup(d->path);
		copy[n].host_path = d->host_path ? strdup(d->host_path) : NULL;
		if (!copy[n].path) {
			free(copy[n].host_path);
			break;
		}
	}
	pthread_mutex_unlock(&sl->lock);
	for (i = 0; copy && i < n; i++) {
		if (!copy[i].path) {
			n = i;
			break;
		}
	}
	*out = copy;
	return copy ? n : 0;
}

void bpftel_shlib_detections_free(struct bpftel_shlib_detection *det, size_t n)
{
	size_t i;

	for (i = 0; det && i < n; i++) {
		free(det[i].path);
		free(det[i].host_path);
	}
	free(det);
}

int bpftel_sharedlibs__counters(struct bpftel_sharedlibs *sl,
				struct bpftel_sharedlibs_counters *out)
{
	__u64 live[SHLIB_CNT__COUNT] = {};
	int i;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&sl->lock);
	/* Loaded maps only; close takes this lock before destroying them. */
	if (sl->loaded)
		read_kernel_counters(sl, live);
	for (i = 0; i < SHLIB_CNT__COUNT; i++)
		out->kernel[i] = sl->retired[i] + live[i];
	out->received = sl->received;
	out->malformed = sl->malformed;
	out->evicted = sl->evicted;
	out->execs = sl->execs;
	out->execs_skipped = sl->execs_skipped;
	memcpy(out->detected, sl->detected, sizeof(out->detected));
	pthread_mutex_unlock(&sl->lock);
	return 0;
}

/* Look key up in map (of the watcher's object, while it is loaded) into out. */
static int skel_lookup(struct bpftel_sharedlibs *sl, bool fds, const void *key, void *out)
{
	int fd, err = -ENOENT;

	pthread_mutex_lock(&sl->lock);
	fd = !sl->loaded ? -1
	     : fds   ? bpf_map__fd(sl->skel->maps.shlib_fd_socks)
		     : bpf_map__fd(sl->skel->maps.shlib_sock_owners);
	if (fd >= 0)
		err = bpf_map_lookup_elem(fd, key, out) ? -errno : 0;
	pthread_mutex_unlock(&sl->lock);
	return err;
}

int bpftel_sharedlibs__sock_owner(struct bpftel_sharedlibs *sl, const struct shlib_sock_key *key,
				  struct shlib_sock_owner *out)
{
	return skel_lookup(sl, false, key, out);
}

int bpftel_sharedlibs__fd_sock(struct bpftel_sharedlibs *sl, __u32 pid, int fd, __u64 at_ns,
			       __u64 born_ns, struct shlib_sock_key *out)
{
	struct shlib_fd_key key = {.pid = pid, .fd = fd};
	struct shlib_fd_sock fs;
	__u64 since;
	int err;

	err = skel_lookup(sl, true, &key, &fs);
	if (err)
		return err;
	pthread_mutex_lock(&sl->lock);
	since = sl->sockets_since_ns;
	pthread_mutex_unlock(&sl->lock);
	/* An entry older than the process holding the pid is its pid's earlier process's. */
	if (born_ns > since)
		since = born_ns;
	/* Made before recording last went on: the fd may hold another connection now,
	 * made while it was off (a module that wants sockets stopped and started again):
	 * not known (-ENODATA), as a connection made before the agent watched. */
	if (fs.since_ns < since)
		return -ENODATA;
	if (fs.since_ns <= at_ns) {
		*out = fs.conn;
		return 0;
	}
	if (fs.prev_since_ns && fs.prev_since_ns >= since && fs.prev_since_ns <= at_ns) {
		*out = fs.prev;
		return 0;
	}
	return -ESTALE;
}
