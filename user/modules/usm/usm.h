/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * USM module: HTTP/1.x endpoints (method, normalized path, status) with request counts
 * and latency histograms, from TLS plaintext (uprobes on every OpenSSL and GnuTLS the
 * shared-libraries watcher finds, libset "crypto") and from plaintext packets (a
 * socket filter on an AF_PACKET socket, every interface). A module like any other:
 * registered with the manager, its uprobes attached per file by the uprobe registry,
 * its ring buffer consumed through the event pipeline. Payload bytes are parsed on
 * arrival and dropped; only endpoint names and numbers are kept.
 */
#ifndef BPFTEL_USM_MODULE_H
#define BPFTEL_USM_MODULE_H

#include <linux/types.h>

#include "bpf/usm.h"
#include "endpoints.h"

#define BPFTEL_USM_MODULE "usm"

struct bpftel_usm;
struct bpftel_manager;
struct bpftel_module;
struct bpftel_uprobes;

/* Register the module with mgr, its uprobes with up, its subscription to the crypto
 * libset. Not started. On failure *out is still set: free it after the manager. */
int bpftel_usm__new(struct bpftel_manager *mgr, struct bpftel_uprobes *up, struct bpftel_usm **out);
void bpftel_usm__free(struct bpftel_usm *u);
struct bpftel_module *bpftel_usm__module(struct bpftel_usm *u);

/* Endpoint rows (see endpoints.h); malloc'd, count returned. Kept across restarts. */
size_t bpftel_usm__rows(struct bpftel_usm *u, struct usm_endpoint_row **out);

struct bpftel_usm_counters {
	__u64 kernel[USM_CNT__COUNT]; /* summed over CPUs, cumulative over restarts */
	__u64 unparsed;		      /* events whose prefix was not an HTTP start after all */
	__u64 malformed;	      /* records of a wrong size */
	struct usm_endpoints_stats endpoints;
};
void bpftel_usm__counters(struct bpftel_usm *u, struct bpftel_usm_counters *out);

/* Fold the rows of exited processes together; drop their pending requests. */
int bpftel_usm__sweep(struct bpftel_usm *u);

const char *bpftel_usm_counter_name(enum usm_counter c);

/* The module's report ops (usm_report.c): the `http` command and its /metrics families. */
struct json_t;
struct bpftel_prom;
struct json_t *usm_report(struct bpftel_module *m, struct json_t *req);
void usm_metrics(struct bpftel_module *m, struct bpftel_prom *w);

#endif /* BPFTEL_USM_MODULE_H */
