/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The agent's configuration file: `key = value` lines, `#` comments, blank lines.
 *
 *   socket       = /run/bpftel/bpftel.sock   control socket (a restart applies it)
 *   metrics_addr = 127.0.0.1:9464            HOST:PORT, [V6]:PORT, or off
 *   modules      = gpu, usm                  modules to run, or none
 *   libsets      = crypto, gpu               what `bpftel stats` inventories, or none
 *   run_stats    = sampled                   BPF_ENABLE_STATS: always (exact run counts
 *                                            and times), sampled (estimated from on-windows),
 *                                            or off; `on` is always
 *   run_stats_duty = 1/10                    sampled: stats on for 1 s of every 10 s
 *                                            (ON/PERIOD seconds, 1 <= ON < PERIOD <= 3600)
 *   max_cpu_percent = off                    self-overhead budget, % of one CPU: one value
 *                                            for every module, or gpu:5, usm:10 (modules not
 *                                            listed have none); off: no budget
 *   max_cpu_window = 2                       seconds over which the budget is measured (1..60)
 *   workers      = 1                         pipeline workers per module (1..64)
 *   queue_len    = 1024                      records per worker queue (16..65536)
 *   ringbuf_kib  = 0                         ring buffer size per module, a power of two
 *                                            4..65536 KiB; 0 keeps each module's own
 *   uprobe_grace = 30                        seconds an unused library file keeps its
 *                                            uprobes (0..3600): a new process reuses them
 *   new_files_per_user = 256                 library files new to the agent one user's
 *                                            processes may bring a minute (0 = no limit,
 *                                            ..100000); the rest are refused as
 *                                            over_budget until a later /proc rescan
 *   http_series_max = 2000                   HTTP series in /metrics (10..100000); the
 *                                            rest count under route "(overflow)"
 *   http_row_expiry = 600                    seconds an HTTP row with no request lives
 *                                            (0 = forever, ..86400)
 *   metrics_labels = none                    or container: HTTP series by container id
 *   tls_recv_fd  = off                       on: a tracepoint on recvfrom(2) gives TLS
 *                                            sessions with their own BIO (curl's) their
 *                                            socket; costs every recvfrom of the host
 *   user_share_percent = 25                  how much of the kernel's HTTP/2 and TLS
 *                                            session tables and retry marks (usm), which
 *                                            all processes share, one user or container's
 *                                            root may hold: % of each (1..100; 100 = no
 *                                            bound); the host's root has no bound;
 *                                            applies at once
 *
 * Pure parsing, no side effects: the agent applies a parsed configuration at start and
 * on SIGHUP. A malformed file is refused whole, with its path and line in the error.
 */
#ifndef BPFTEL_AGENT_CONFIG_H
#define BPFTEL_AGENT_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#define BPFTEL_CONFIG_DEFAULT "/etc/bpftel/bpftel.conf"

/* workers x queue_len at most: each slot of a pipeline's queues holds a record of up to
 * 4 KiB (user/events), so a pipeline maps at most ~280 MiB. */
#define BPFTEL_CFG_MAX_SLOTS 65536

/* Room for the agent's module table (module_table.h), which names the modules. */
#define BPFTEL_CFG_MAX_MODULES 16

struct bpftel_config {
	char socket[PATH_MAX];
	char metrics_addr[128]; /* "" = no metrics endpoint */
	/* By index in bpftel_agent_modules[]; only selectable modules are ever set. */
	bool modules[BPFTEL_CFG_MAX_MODULES];
	unsigned int libsets; /* SHLIB_LIBSET_BIT()s of the inventory subscription */
	unsigned int run_stats; /* enum bpftel_run_stats_mode */
	unsigned int run_stats_on_s, run_stats_period_s;
	/* By index in bpftel_agent_modules[]: % of one CPU; 0 = no budget. */
	double max_cpu_percent[BPFTEL_CFG_MAX_MODULES];
	unsigned int max_cpu_window_s;
	unsigned int workers, queue_len, ringbuf_kib;
	unsigned int uprobe_grace_s; /* an unused library keeps its uprobes this long */
	unsigned int new_files_per_user; /* a minute, per owner (file_budget.h); 0: no limit */
	unsigned int http_series_max;	/* HTTP series in /metrics before "(overflow)" */
	unsigned int http_row_expiry_s; /* HTTP rows idle this long go; 0: never */
	bool metrics_labels_container;	/* metrics_labels = container */
	bool gpu_launch_shared_mem;	/* sum launches' dynamic shared memory */
	bool tls_recv_fd;		/* USM: sessions with their own BIO get their socket */
	unsigned int user_share_percent; /* USM: a user's share of the kernel's tables */
};

void bpftel_config_defaults(struct bpftel_config *c);
/* A control socket's path: absolute and shorter than sun_path (108 bytes). */
bool bpftel_config_socket_ok(const char *path);

/*
 * Parse text (len bytes, need not be NUL-terminated) named `name` in messages into c,
 * which holds the values keys not in the text keep. 0, or -EINVAL with
 * "NAME:LINE: what" in err.
 */
int bpftel_config_parse(const char *name, const char *text, size_t len, struct bpftel_config *c,
			char *err, size_t errlen);

/* Read and parse a file (defaults first). -ENOENT if it does not exist (err says so),
 * other -errno if unreadable, -EINVAL if malformed. */
int bpftel_config_load(const char *path, struct bpftel_config *c, char *err, size_t errlen);

#endif /* BPFTEL_AGENT_CONFIG_H */
