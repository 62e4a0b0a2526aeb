/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * USM endpoints: pair each HTTP request with the next response on its connection, and
 * aggregate (process, protocol, method, normalized path, status) -> count and latency
 * histogram. Everything is bounded: pending requests (oldest evicted), rows, and
 * distinct paths per process (the rest land on the path "(other)"); every eviction and
 * overflow is counted. Thread-safe.
 */
#ifndef BPFTEL_USM_ENDPOINTS_H
#define BPFTEL_USM_ENDPOINTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "histogram.h"
#include "http.h"

#define USM_PID_NONE   0u	   /* no process context: plaintext seen in packets */
#define USM_PID_EXITED 0xffffffffu /* rows of processes that exited, folded together */

enum usm_proto {
	USM_PROTO_HTTPS = 0,
	USM_PROTO_HTTP = 1,
};

/* A connection, as the producer names it: TLS by (pid, session pointer), packets by
 * their addresses and ports, client first. Compared bytewise: zero unused fields. */
struct usm_conn_key {
	uint32_t pid;
	uint8_t source; /* enum usm_source */
	uint8_t family;
	uint16_t client_port;
	uint64_t conn;
	uint8_t client_addr[16];
	uint8_t server_addr[16];
	uint16_t server_port;
	uint16_t __pad[3];
};

struct usm_endpoint_row {
	uint32_t pid;
	enum usm_proto proto;
	char method[USM_METHOD_MAX];
	char path[USM_PATH_MAX];
	int status;
	struct usm_hist latency;
};

struct usm_endpoints_stats {
	uint64_t requests, responses;
	uint64_t paired;	   /* responses matched with their request */
	uint64_t unanswered;	   /* a request replaced by the next before its response */
	uint64_t orphan_responses; /* a response with no request pending */
	uint64_t evicted;	   /* pending requests pushed out by newer connections */
	uint64_t path_overflow;	   /* counted under "(other)": too many paths */
	uint64_t row_overflow;	   /* dropped: no room for a new row */
	size_t pending, rows;
};

struct usm_endpoints;

struct usm_endpoints *usm_endpoints_new(size_t max_pending, size_t max_rows, size_t max_paths);
void usm_endpoints_free(struct usm_endpoints *e);

/* A message start on a connection, at t_ns (its first byte). */
void usm_endpoints_message(struct usm_endpoints *e, const struct usm_conn_key *key,
			   enum usm_proto proto, uint64_t t_ns, const struct usm_http_start *msg);

/* Copy of every row, malloc'd; returns the count. */
size_t usm_endpoints_rows(struct usm_endpoints *e, struct usm_endpoint_row **out);
void usm_endpoints_stats(struct usm_endpoints *e, struct usm_endpoints_stats *out);

/* Fold the rows of processes for which alive(pid) is false into USM_PID_EXITED, and
 * drop their pending requests. Returns the processes folded. */
int usm_endpoints_sweep(struct usm_endpoints *e, bool (*alive)(uint32_t pid));

#endif /* BPFTEL_USM_ENDPOINTS_H */
