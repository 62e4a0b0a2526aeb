// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sharedlibs.h"
#include "shared_libraries.skel.h"
#include "user/common/log.h"

#define DEFAULT_MAX_DETECTIONS 1024

struct prog_spec {
	const char *category; /* tracefs category and name */
	const char *name;
	bool required; /* open and openat2 are absent on some arches/kernels */
};

struct bpftel_sharedlibs {
	struct shared_libraries *skel;
	struct ring_buffer *rb;
	struct bpf_link *links[6];
	struct bpftel_prog_info progs[6];
	char attach_names[6][64];
	size_t nprogs;

	/* Ring of detections, oldest at head. */
	struct bpftel_shlib_detection *det;
	size_t det_cap, det_head, det_len;
	struct bpftel_shlib_detection *det_view; /* contiguous copy for callers */

	__u64 received, malformed, evicted;
};

static const char *const lib_names[SHLIB_LIB__COUNT] = {
	[SHLIB_LIB_SSL] = "libssl",	  [SHLIB_LIB_CRYPTO] = "libcrypto",
	[SHLIB_LIB_GNUTLS] = "libgnutls", [SHLIB_LIB_CUDART] = "libcudart",
	[SHLIB_LIB_CUDA] = "libcuda",
};

static const char *const libset_names[SHLIB_LIBSET__COUNT] = {
	[SHLIB_LIBSET_CRYPTO] = "crypto",
	[SHLIB_LIBSET_GPU] = "gpu",
};

static const char *const counter_names[SHLIB_CNT__COUNT] = {
	[SHLIB_CNT_MATCHED] = "matched",	 [SHLIB_CNT_EMITTED] = "emitted",
	[SHLIB_CNT_OPEN_FAILED] = "open_failed", [SHLIB_CNT_LOST] = "lost",
	[SHLIB_CNT_TOO_LONG] = "path_too_long",	 [SHLIB_CNT_INFLIGHT_FULL] = "inflight_full",
};

const char *bpftel_shlib_lib_name(enum shlib_lib lib)
{
	return (unsigned)lib < SHLIB_LIB__COUNT ? lib_names[lib] : "unknown";
}

const char *bpftel_shlib_libset_name(enum shlib_libset set)
{
	return (unsigned)set < SHLIB_LIBSET__COUNT ? libset_names[set] : "unknown";
}

const char *bpftel_shlib_counter_name(enum shlib_counter counter)
{
	return (unsigned)counter < SHLIB_CNT__COUNT ? counter_names[counter] : "unknown";
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

int bpftel_shlib_host_path(__u32 pid, const char *path, char *buf, size_t size)
{
	int n;

	/* Magic links: resolve in the process's own root and cwd (containers included). */
	if (path[0] == '/')
		n = snprintf(buf, size, "/proc/%u/root%s", pid, path);
	else
		n = snprintf(buf, size, "/proc/%u/cwd/%s", pid, path);
	if (n < 0)
		return -EINVAL;
	return (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static void detection_clear(struct bpftel_shlib_detection *d)
{
	free(d->path);
	free(d->host_path);
	memset(d, 0, sizeof(*d));
}

static struct bpftel_shlib_detection *detection_find(struct bpftel_sharedlibs *sl, __u32 pid,
						     const char *path)
{
	struct bpftel_shlib_detection *d;
	size_t i;

	for (i = 0; i < sl->det_len; i++) {
		d = &sl->det[(sl->det_head + i) % sl->det_cap];
		if (d->pid == pid && !strcmp(d->path, path))
			return d;
	}
	return NULL;
}

static struct bpftel_shlib_detection *detection_add(struct bpftel_sharedlibs *sl)
{
	struct bpftel_shlib_detection *d;

	if (sl->det_len == sl->det_cap) {
		detection_clear(&sl->det[sl->det_head]);
		sl->det_head = (sl->det_head + 1) % sl->det_cap;
		sl->det_len--;
		sl->evicted++;
	}
	d = &sl->det[(sl->det_head + sl->det_len) % sl->det_cap];
	sl->det_len++;
	return d;
}

static char *resolve_host_path(__u32 pid, const char *path)
{
	char magic[PATH_MAX + 64];

	if (bpftel_shlib_host_path(pid, path, magic, sizeof(magic)))
		return NULL;
	/* Fails once the process is gone: the caller keeps the path as named. */
	return realpath(magic, NULL);
}

static int handle_event(void *ctx, void *data, size_t size)
{
	struct bpftel_sharedlibs *sl = ctx;
	const struct shlib_event *ev = data;
	struct bpftel_shlib_detection *d;
	time_t now = time(NULL);

	sl->received++;
	if (bpftel_shlib_event_check(data, size)) {
		sl->malformed++;
		pr_warn("sharedlibs: dropped malformed event of %zu bytes", size);
		return 0;
	}
	d = detection_find(sl, ev->pid, ev->path);
	if (d) {
		d->opens++;
		d->last_seen = now;
		return 0;
	}
	d = detection_add(sl);
	d->path = strdup(ev->path);
	if (!d->path) {
		sl->det_len--;
		return 0;
	}
	d->host_path = resolve_host_path(ev->pid, ev->path);
	d->pid = ev->pid;
	d->tid = ev->tid;
	d->lib = ev->lib;
	d->libset = ev->libset;
	d->syscall = ev->syscall;
	memcpy(d->comm, ev->comm, sizeof(d->comm));
	d->comm[sizeof(d->comm) - 1] = '\0';
	d->opens = 1;
	d->first_seen = d->last_seen = now;
	pr_debug("sharedlibs: pid %u (%s) opened %s %s", d->pid, d->comm,
		 bpftel_shlib_lib_name(d->lib), d->path);
	return 0;
}

int bpftel_sharedlibs__set_libsets(struct bpftel_sharedlibs *sl, __u32 libsets)
{
	struct shlib_config cfg = {.libsets = libsets & SHLIB_LIBSET_ALL};
	__u32 zero = 0;
	int err;

	err = bpf_map_update_elem(bpf_map__fd(sl->skel->maps.shlib_config), &zero, &cfg, BPF_ANY);
	if (err) {
		err = -errno;
		pr_err("sharedlibs: cannot write config map: %s", strerror(-err));
	}
	return err;
}

static const struct prog_spec prog_specs[] = {
	{"syscalls", "sys_enter_openat", true},	  {"syscalls", "sys_exit_openat", true},
	{"syscalls", "sys_enter_open", false},	  {"syscalls", "sys_exit_open", false},
	{"syscalls", "sys_enter_openat2", false}, {"syscalls", "sys_exit_openat2", false},
};

static struct bpf_program *spec_prog(struct shared_libraries *skel, size_t i)
{
	struct bpf_program *progs[] = {
		skel->progs.shlib_enter_openat,	 skel->progs.shlib_exit_openat,
		skel->progs.shlib_enter_open,	 skel->progs.shlib_exit_open,
		skel->progs.shlib_enter_openat2, skel->progs.shlib_exit_openat2,
	};
	return progs[i];
}

static int attach_all(struct bpftel_sharedlibs *sl)
{
	struct bpftel_prog_info *info;
	struct bpf_prog_info pinfo;
	struct bpf_program *prog;
	__u32 len;
	size_t i;
	int err;

	for (i = 0; i < sizeof(prog_specs) / sizeof(prog_specs[0]); i++) {
		prog = spec_prog(sl->skel, i);
		info = &sl->progs[sl->nprogs];
		snprintf(sl->attach_names[i], sizeof(sl->attach_names[i]), "tracepoint:%s/%s",
			 prog_specs[i].category, prog_specs[i].name);
		info->name = bpf_program__name(prog);
		info->attach = sl->attach_names[i];
		memset(&pinfo, 0, sizeof(pinfo));
		len = sizeof(pinfo);
		if (!bpf_obj_get_info_by_fd(bpf_program__fd(prog), &pinfo, &len))
			info->id = pinfo.id;

		sl->links[i] = bpf_program__attach_tracepoint(prog, prog_specs[i].category,
							      prog_specs[i].name);
		if (!sl->links[i]) {
			err = -errno;
			if (prog_specs[i].required) {
				pr_err("sharedlibs: prog '%s': cannot attach to %s: %s", info->name,
				       info->attach, strerror(-err));
				return err;
			}
			pr_info("sharedlibs: prog '%s': %s not available (%s), skipped", info->name,
				info->attach, strerror(-err));
		}
		info->attached = sl->links[i] != NULL;
		sl->nprogs++;
	}
	return 0;
}

int bpftel_sharedlibs__new(const struct bpftel_sharedlibs_opts *opts,
			   struct bpftel_sharedlibs **out)
{
	struct bpftel_sharedlibs *sl;
	__u32 libsets = SHLIB_LIBSET_ALL;
	size_t max_det = DEFAULT_MAX_DETECTIONS;
	int err;

	*out = NULL;
	if (opts && opts->sz >= sizeof(*opts)) {
		if (opts->libsets)
			libsets = opts->libsets;
		if (opts->max_detections)
			max_det = opts->max_detections;
	}

	sl = calloc(1, sizeof(*sl));
	if (!sl)
		return -ENOMEM;
	sl->det_cap = max_det;
	sl->det = calloc(max_det, sizeof(*sl->det));
	sl->det_view = calloc(max_det, sizeof(*sl->det_view));
	if (!sl->det || !sl->det_view) {
		err = -ENOMEM;
		goto fail;
	}

	sl->skel = shared_libraries__open();
	if (!sl->skel) {
		err = -errno;
		pr_err("sharedlibs: cannot open BPF object: %s", strerror(-err));
		goto fail;
	}
	err = shared_libraries__load(sl->skel);
	if (err) {
		pr_err("sharedlibs: cannot load BPF programs: %s%s", strerror(-err),
		       err == -EPERM ? " (needs root: CAP_BPF and CAP_PERFMON)" : "");
		goto fail;
	}
	err = bpftel_sharedlibs__set_libsets(sl, libsets);
	if (err)
		goto fail;
	sl->rb = ring_buffer__new(bpf_map__fd(sl->skel->maps.shlib_events), handle_event, sl, NULL);
	if (!sl->rb) {
		err = -errno;
		pr_err("sharedlibs: cannot open ring buffer: %s", strerror(-err));
		goto fail;
	}
	err = attach_all(sl);
	if (err)
		goto fail;
	*out = sl;
	return 0;
fail:
	bpftel_sharedlibs__free(sl);
	return err;
}

void bpftel_sharedlibs__free(struct bpftel_sharedlibs *sl)
{
	size_t i;

	if (!sl)
		return;
	for (i = 0; i < sizeof(sl->links) / sizeof(sl->links[0]); i++)
		bpf_link__destroy(sl->links[i]);
	ring_buffer__free(sl->rb);
	shared_libraries__destroy(sl->skel);
	for (i = 0; sl->det && i < sl->det_cap; i++)
		detection_clear(&sl->det[i]);
	free(sl->det);
	free(sl->det_view);
	free(sl);
}

int bpftel_sharedlibs__epoll_fd(const struct bpftel_sharedlibs *sl)
{
	return ring_buffer__epoll_fd(sl->rb);
}

int bpftel_sharedlibs__consume(struct bpftel_sharedlibs *sl)
{
	return ring_buffer__consume(sl->rb);
}

size_t bpftel_sharedlibs__detections(const struct bpftel_sharedlibs *sl,
				     const struct bpftel_shlib_detection **out)
{
	size_t i;

	for (i = 0; i < sl->det_len; i++)
		sl->det_view[i] = sl->det[(sl->det_head + i) % sl->det_cap];
	*out = sl->det_view;
	return sl->det_len;
}

size_t bpftel_sharedlibs__progs(const struct bpftel_sharedlibs *sl,
				const struct bpftel_prog_info **out)
{
	*out = sl->progs;
	return sl->nprogs;
}

int bpftel_sharedlibs__counters(const struct bpftel_sharedlibs *sl,
				struct bpftel_sharedlibs_counters *out)
{
	int ncpu = libbpf_num_possible_cpus(), fd, cpu;
	__u64 *vals;
	__u32 key;

	if (ncpu <= 0)
		return ncpu ? ncpu : -EINVAL;
	vals = calloc(ncpu, sizeof(*vals));
	if (!vals)
		return -ENOMEM;
	memset(out, 0, sizeof(*out));
	fd = bpf_map__fd(sl->skel->maps.shlib_counters);
	for (key = 0; key < SHLIB_CNT__COUNT; key++) {
		if (bpf_map_lookup_elem(fd, &key, vals))
			continue;
		for (cpu = 0; cpu < ncpu; cpu++)
			out->kernel[key] += vals[cpu];
	}
	free(vals);
	out->received = sl->received;
	out->malformed = sl->malformed;
	out->evicted = sl->evicted;
	return 0;
}
