/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Shared-libraries watcher (userspace side of bpf/shared_libraries.bpf.c), a shared
 * module of the manager: subscribers' libset masks decide what it matches; the first
 * subscriber starts it, the last stops it. Its ring-buffer callback runs on the
 * manager's consumer thread and keeps a bounded table of detections (which process
 * opened which library); readers get copies. Thread-safe: one mutex guards the table,
 * the counters and the skeleton pointer.
 *
 * Int functions return 0 or a negative errno; errors are reported through bpftel_log().
 */
#ifndef BPFTEL_SHAREDLIBS_H
#define BPFTEL_SHAREDLIBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/types.h>
#include <linux/types.h>

#include "bpf/shared_libraries.h"

struct bpftel_sharedlibs;
struct bpftel_manager;

#define BPFTEL_SHAREDLIBS_MODULE "sharedlibs"

struct bpftel_sharedlibs_opts {
	size_t sz;	       /* sizeof(struct bpftel_sharedlibs_opts) */
	size_t max_detections; /* table bound; 0 = 1024; oldest evicted first */
};

struct bpftel_shlib_detection {
	__u32 pid;
	__u32 tid;
	__u64 start_ns; /* the process's start, the kernel's clock (0: not known) */
	enum shlib_lib lib;
	enum shlib_libset libset;
	enum shlib_syscall syscall;
	int dirfd; /* a relative path starts there (AT_FDCWD: the cwd) */
	dev_t dev; /* the file the open returned: its super block's device ... */
	__u64 ino;
	dev_t sdev; /* ... and on btrfs its subvolume's, as stat() reports it (0: not btrfs) */
	struct timespec ctime; /* execs: the file's change time at the exec; opens: 0 */
	char comm[SHLIB_COMM_LEN];
	char *path;	 /* as the process named it */
	char *host_path; /* the same file as seen from the agent (via /proc/<pid>/root, cwd) */
	__u64 opens;	 /* times this (pid, path) was opened */
	time_t first_seen;
	time_t last_seen;
};

/*
 * Create the watcher's state and register it with mgr as the shared module
 * BPFTEL_SHAREDLIBS_MODULE. Subscribers pass SHLIB_LIBSET_BIT()s as their mask
 * (bpftel_manager__subscribe or __bind_shared); the first starts it, the last stops it.
 * The detection table and counters outlive the module's restarts.
 */
int bpftel_sharedlibs__new(struct bpftel_manager *mgr, const struct bpftel_sharedlibs_opts *opts,
			   struct bpftel_sharedlibs **out);
/* After bpftel_manager__free(). NULL is a no-op. */
void bpftel_sharedlibs__free(struct bpftel_sharedlibs *sl);

/*
 * Called on the watcher's consumer thread for each new (process, path) detection, after
 * it is in the table. Set before the watcher starts. d is valid during the call only.
 */
typedef void (*bpftel_shlib_listener_fn)(void *ctx, const struct bpftel_shlib_detection *d);
void bpftel_sharedlibs__set_listener(struct bpftel_sharedlibs *sl, bpftel_shlib_listener_fn fn,
				     void *ctx);

/*
 * Feed the uprobe registry u with the detections (its listener), and report it: the
 * watcher's `libs` command shows u's files and refusals, and its housekeeping sweeps
 * u and rescans /proc after a loss. Before the watcher starts.
 */
struct bpftel_uprobes;
void bpftel_sharedlibs__set_registry(struct bpftel_sharedlibs *sl, struct bpftel_uprobes *u);

/*
 * Socket owners, for a subscriber whose mask has SHLIB_SUB_SOCKETS (shared_libraries.h):
 * who holds the TCP connection key as its local end, and which connection a process's
 * fd is. 0, or -ENOENT when not known (connected before the watcher ran, closed, or
 * the watcher is not running). Any thread.
 */
int bpftel_sharedlibs__sock_owner(struct bpftel_sharedlibs *sl, const struct shlib_sock_key *key,
				  struct shlib_sock_owner *out);
/*
 * The connection process pid's fd held at at_ns (bpf_ktime_get_ns(), a message's stamp):
 * its connection, or the one before if it was given that after at_ns (the message is of
 * the one before, closed, whose number was reused); -ENOENT when none is known, -ESTALE
 * when the message is older than both, -ENODATA when the fd's entry was made before
 * socket recording last went on (the fd may have been given another unseen since), or
 * before born_ns, when the process now holding the pid started (the same clock; 0: not
 * known): the entry is an earlier process's of that pid, and the fd one this process
 * was given (an inetd or systemd socket, one passed over a UNIX socket).
 */
int bpftel_sharedlibs__fd_sock(struct bpftel_sharedlibs *sl, __u32 pid, int fd, __u64 at_ns,
			       __u64 born_ns, struct shlib_sock_key *out);

/*
 * The name of process pid when it last opened a library the watcher reported (the
 * newest such detection), or else when it ran a Go executable (one of the last 256
 * the registry took for Go), into comm: 0, or -ENOENT when none is left of it. For a
 * process gone before anything else could be read of it: a detection of the process
 * that holds the pid now (started at now_ticks, bpftel_proc_start(); 0: none) is
 * another's, and skipped.
 */
int bpftel_sharedlibs__comm_of(struct bpftel_sharedlibs *sl, __u32 pid, __u64 now_ticks,
			       char comm[SHLIB_COMM_LEN]);

/* A copy of the detections, oldest first; free with bpftel_shlib_detections_free. */
size_t bpftel_sharedlibs__detections(struct bpftel_sharedlibs *sl,
				     struct bpftel_shlib_detection **out);
void bpftel_shlib_detections_free(struct bpftel_shlib_detection *det, size_t n);

/* Counters, cumulative over the module's restarts. */
struct bpftel_sharedlibs_counters {
	__u64 kernel[SHLIB_CNT__COUNT]; /* summed over CPUs */
	__u64 received;			/* events read from the ring buffer */
	__u64 malformed;		/* records of a wrong size, dropped */
	__u64 evicted;			/* detections pushed out of the bounded table */
	__u64 detected[SHLIB_LIBSET__COUNT]; /* new (process, path) detections by libset */
	__u64 execs;			     /* execs reported (SHLIB_SUB_EXECS) */
	__u64 execs_skipped; /* executables found not Go: not reported again */
};
int bpftel_sharedlibs__counters(struct bpftel_sharedlibs *sl,
				struct bpftel_sharedlibs_counters *out);

/* The config map's content for these libsets: every known stem, libsets enabled. */
void bpftel_shlib_config(struct shlib_config *cfg, __u32 libsets);

const char *bpftel_shlib_lib_name(enum shlib_lib lib);
const char *bpftel_shlib_libset_name(enum shlib_libset set);
const char *bpftel_shlib_counter_name(enum shlib_counter counter);

/*
 * Validate one ring-buffer record: size matching its path_len, NUL-terminated path
 * without embedded NULs, known lib and libset. Returns 0 or -EINVAL. Exposed for tests.
 */
int bpftel_shlib_event_check(const void *data, size_t size);

#endif /* BPFTEL_SHAREDLIBS_H */
