/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Shared-libraries watcher (userspace side of bpf/shared_libraries.bpf.c).
 *
 * Loads and attaches the open/openat/openat2 tracepoints, consumes their ring buffer and
 * keeps a bounded table of detections: which process opened which library. The caller
 * owns the event loop: add bpftel_sharedlibs__epoll_fd() to it and call
 * bpftel_sharedlibs__consume() when it is readable. Not thread-safe: one thread drives
 * one watcher.
 *
 * Int functions return 0 or a negative errno; errors are reported through bpftel_log().
 */
#ifndef BPFTEL_SHAREDLIBS_H
#define BPFTEL_SHAREDLIBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <linux/types.h>

#include "bpf/shared_libraries.h"

struct bpftel_sharedlibs;

struct bpftel_sharedlibs_opts {
	size_t sz;	       /* sizeof(struct bpftel_sharedlibs_opts) */
	__u32 libsets;	       /* SHLIB_LIBSET_BIT()s; 0 = all */
	size_t max_detections; /* table bound; 0 = 1024; oldest evicted first */
};

struct bpftel_shlib_detection {
	__u32 pid;
	__u32 tid;
	enum shlib_lib lib;
	enum shlib_libset libset;
	enum shlib_syscall syscall;
	char comm[SHLIB_COMM_LEN];
	char *path;	 /* as the process named it */
	char *host_path; /* the same file as seen from the agent (via /proc/<pid>/root, cwd) */
	__u64 opens;	 /* times this (pid, path) was opened */
	time_t first_seen;
	time_t last_seen;
};

/* One BPF program of the watcher, for `bpftel stats`. */
struct bpftel_prog_info {
	const char *name;
	const char *attach; /* e.g. "tracepoint:syscalls/sys_enter_openat" */
	__u32 id;	    /* kernel program id */
	bool attached;
};

/* Open, load and attach. Returns 0 and *out, or -errno (e.g. -EPERM without privileges). */
int bpftel_sharedlibs__new(const struct bpftel_sharedlibs_opts *opts,
			   struct bpftel_sharedlibs **out);
/* Detach everything, close every fd, free the table. NULL is a no-op. */
void bpftel_sharedlibs__free(struct bpftel_sharedlibs *sl);

int bpftel_sharedlibs__epoll_fd(const struct bpftel_sharedlibs *sl);
/* Drain the ring buffer; returns events consumed or -errno. */
int bpftel_sharedlibs__consume(struct bpftel_sharedlibs *sl);

/* Change which libsets match, live (a config-map write, no reload). */
int bpftel_sharedlibs__set_libsets(struct bpftel_sharedlibs *sl, __u32 libsets);

/* Detections, oldest first; valid until the next consume or free. */
size_t bpftel_sharedlibs__detections(const struct bpftel_sharedlibs *sl,
				     const struct bpftel_shlib_detection **out);
size_t bpftel_sharedlibs__progs(const struct bpftel_sharedlibs *sl,
				const struct bpftel_prog_info **out);

/* Kernel-side counters summed over CPUs (enum shlib_counter), plus userspace ones. */
struct bpftel_sharedlibs_counters {
	__u64 kernel[SHLIB_CNT__COUNT];
	__u64 received;	 /* events read from the ring buffer */
	__u64 malformed; /* records of a wrong size, dropped */
	__u64 evicted;	 /* detections pushed out of the bounded table */
};
int bpftel_sharedlibs__counters(const struct bpftel_sharedlibs *sl,
				struct bpftel_sharedlibs_counters *out);

const char *bpftel_shlib_lib_name(enum shlib_lib lib);
const char *bpftel_shlib_libset_name(enum shlib_libset set);
const char *bpftel_shlib_counter_name(enum shlib_counter counter);

/*
 * Parse one ring-buffer record into a detection's fields (path not copied). Returns 0,
 * or -EINVAL for a record whose size does not match its path_len. Exposed for tests.
 */
int bpftel_shlib_event_check(const void *data, size_t size);

/*
 * Host path for a path opened by pid: "/proc/<pid>/root" + path when absolute, + the
 * process's cwd + path when relative. Writes at most size bytes; -ENAMETOOLONG if it
 * does not fit, -errno if the cwd cannot be read.
 */
int bpftel_shlib_host_path(__u32 pid, const char *path, char *buf, size_t size);

#endif /* BPFTEL_SHAREDLIBS_H */
