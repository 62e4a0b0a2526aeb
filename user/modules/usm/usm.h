/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * USM module: HTTP/1.x and HTTP/2 endpoints (method, normalized path, status) with
 * request counts and latency histograms, from TLS plaintext (uprobes on every OpenSSL
 * and GnuTLS the shared-libraries watcher finds, libset "crypto"; HTTP/2 sessions
 * through h2_sessions.h) and from plaintext packets (a socket filter on an AF_PACKET
 * socket, every interface). A module like any other:
 * registered with the manager, its uprobes attached per file by the uprobe registry,
 * its ring buffer consumed through the event pipeline. Payload bytes are parsed on
 * arrival and dropped; only endpoint names and numbers are kept.
 */
#ifndef BPFTEL_USM_MODULE_H
#define BPFTEL_USM_MODULE_H

#include <linux/types.h>

#include "bpf/usm.h"
#include "endpoints.h"
#include "h2_sessions.h"
#include "h2c.h"
#include "procs.h"

#define BPFTEL_USM_MODULE "usm"

struct bpftel_usm;
struct bpftel_manager;
struct bpftel_module;
struct bpftel_uprobes;

struct bpftel_sharedlibs;

/* Register the module with mgr, its uprobes with up, its subscription to the crypto
 * libset and to socket owners (sl, which answers who holds a connection). Not started.
 * On failure *out is still set: free it after the manager. */
int bpftel_usm__new(struct bpftel_manager *mgr, struct bpftel_uprobes *up,
		    struct bpftel_sharedlibs *sl, struct bpftel_usm **out);

/* What the configuration sets (apply as they come, any time). */
struct bpftel_usm_settings {
	unsigned int series_max;    /* HTTP series in /metrics before "(overflow)"; 0: 2000 */
	unsigned int row_expiry_s;  /* rows and series idle this long go; 0: never */
	bool container_labels;	    /* /metrics labels series with container_id (a change
				     * starts the series over) */
	bool tls_recv_fd;	    /* the recvfrom tracepoint (bpf/lib/usm_tls.h): from
				     * the module's next open */
	unsigned int user_share_percent; /* of each table shared out by user
					  * (bpf/lib/fair_share.h), 1..100 (no bound);
					  * 0: the default, 25. Applies at once */
};
void bpftel_usm__configure(struct bpftel_usm *u, const struct bpftel_usm_settings *s);
/* Whether the recvfrom tracepoint (tls_recv_fd) is attached: asked for at the module's
 * last start, and attached (a later configuration waits for a restart). */
bool bpftel_usm__recv_fd(struct bpftel_usm *u);
void bpftel_usm__free(struct bpftel_usm *u);
struct bpftel_module *bpftel_usm__module(struct bpftel_usm *u);

/* Endpoint rows (see endpoints.h); malloc'd, count returned. The table is the module's,
 * not its BPF object's: it is kept across restarts (what a restart changes is only
 * what the kernel side sees meanwhile). */
size_t bpftel_usm__rows(struct bpftel_usm *u, struct usm_endpoint_row **out);
/* The /metrics series (series.h): malloc'd, count returned; whether they carry container
 * labels, and the requests the series budget sent to the overflow series. */
struct usm_series;
size_t bpftel_usm__series(struct bpftel_usm *u, struct usm_series **out, bool *containers,
			  uint64_t *series_budget);
/* What the module knows of a process (its name, cgroup, container): true if known. */
struct usm_proc;
bool bpftel_usm__proc(struct bpftel_usm *u, __u32 pid, struct usm_proc *out);
void bpftel_usm__settings(struct bpftel_usm *u, struct bpftel_usm_settings *out);
/* Who holds the most of each table shared out by user (enum usm_share_table), and
 * (refused_by, unless NULL) who was refused the most, as the last correction found
 * them, every 10 s (fair_share.h); none while not loaded. */
struct fair_share_holders;
struct fair_share_refusers;
void bpftel_usm__shares(struct bpftel_usm *u, struct fair_share_holders *out,
			struct fair_share_refusers *refused_by);
/* The uid ranges granted to users that count as their users' (subuid.h), as last read:
 * how many, how many left out, and the read's -errno (0: none). */
void bpftel_usm__ranges(struct bpftel_usm *u, unsigned int *ranges, unsigned int *skipped,
			int *err);

struct bpftel_usm_counters {
	__u64 kernel[USM_CNT__COUNT]; /* summed over CPUs, cumulative over restarts */
	__u64 unparsed;		      /* events whose prefix was not an HTTP start after all */
	__u64 rejected[USM_HTTP__REJECT_COUNT]; /* looked like HTTP, was not: why (status:
						 * HTTP/2's :status too, h2 and h2c) */
	__u64 malformed;	      /* records of a wrong size */
	__u64 unattributed;	      /* plaintext messages whose sockets' owners are unknown */
	__u64 nat_copies;	      /* plaintext exchanges not recorded: a NAT copy of theirs is */
	__u64 nat_copies_forgotten;   /* NAT copy groups replaced before both were answered */
	__u64 tls_no_conn;	      /* TLS messages whose connection (fd) is unknown */
	__u64 tls_conn_reused;	      /* ... whose fd holds one it was given after them */
	__u64 own;		      /* responses on the agent's own sockets: not recorded */
	__u64 ends_reversed; /* plaintext exchanges an end's socket says go the other way */
	__u64 procs_dropped;	      /* processes shown without name or cgroup: table full */
	struct usm_endpoints_stats endpoints;
	struct usm_h2_sessions_stats h2; /* HTTP/2 over TLS sessions and their decoding */
	struct usm_h2c_stats h2c;	 /* cleartext HTTP/2 (prior knowledge), from packets */
};
void bpftel_usm__counters(struct bpftel_usm *u, struct bpftel_usm_counters *out);

/*
 * A process that exited keeps its rows, pid and name for this long (from the first sweep
 * that finds it gone) before they fold into "(exited)": a short-lived client, a curl,
 * can still be found under its pid right after it ran. (BPFTEL_USM_EXIT_GRACE_S, a
 * testing knob, sets another.)
 */
#define USM_EXIT_GRACE_NS (30ull * 1000000000ull)

/* Fold the rows of processes gone for USM_EXIT_GRACE_NS together, drop their pending
 * requests and what is known of them; expire idle rows. */
int bpftel_usm__sweep(struct bpftel_usm *u);

const char *bpftel_usm_counter_name(enum usm_counter c);

/* The module's report ops (usm_report.c): the `http` command and its /metrics families. */
struct json_t;
struct bpftel_prom;
struct json_t *usm_report(struct bpftel_module *m, struct json_t *req);
void usm_metrics(struct bpftel_module *m, struct bpftel_prom *w);

#endif /* BPFTEL_USM_MODULE_H */
