/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The label set a series is exported under in /metrics: its family (side, HTTP or gRPC)
 * and its label values as they are printed. Series are grouped by this key and nothing
 * else: two rows whose fields differ but whose labels print the same (a gRPC call's
 * HTTP method or status, which its labels do not show; versions 0 and 1.1) are one
 * series, or the exposition would hold the same label set twice.
 *
 * Keys are zeroed whole before they are filled: compared and hashed bytewise.
 */
#ifndef BPFTEL_USM_SERIES_KEY_H
#define BPFTEL_USM_SERIES_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "user/common/cgroup.h"
#include "endpoints.h"

enum usm_family {
	USM_FAM_HTTP_SERVER,
	USM_FAM_HTTP_CLIENT,
	USM_FAM_RPC_SERVER,
	USM_FAM_RPC_CLIENT,
	USM_FAM__COUNT,
};

#define USM_CONTAINER_MAX BPFTEL_CONTAINER_KEY_MAX /* bpftel_cgroup_container_key */

struct usm_series_key {
	uint32_t family;		   /* enum usm_family */
	char route[USM_PATH_MAX];	   /* http_route, or rpc_service */
	char method[USM_PATH_MAX];	   /* http_request_method, or rpc_method */
	char status[12];		   /* http_response_status_code or rpc_grpc_status_code */
	char version[4];		   /* network_protocol_version; "" in RPC families */
	char container[USM_CONTAINER_MAX]; /* bpftel_cgroup_container_key: "" when none or not labelled */
};

/* "2", "1.0", or "1.1" (HTTP/1.1, and versions not known). */
const char *usm_version_name(int version);

/* A gRPC route "/package.Service/Method" as service and method: the route itself and ""
 * when it has another shape. service has ssize bytes; *method points into route. */
void usm_rpc_names(const char *route, char *service, size_t ssize, const char **method);

/* The key of a paired response's series (side server or client), container NULL or ""
 * for none. A response counted in an overflow row goes to its family's overflow series
 * (HTTP's keeps the row's version). */
void usm_series_key_of(struct usm_series_key *k, const struct usm_paired *p, const char *container);

/* The key of the overflow series of a family: HTTP's route "(overflow)", method _OTHER,
 * no status, version 1.1; gRPC's service "(overflow)", no method, no status. */
void usm_series_key_overflow(struct usm_series_key *k, enum usm_family family);

/* The family of a side (server or client), HTTP or gRPC. */
enum usm_family usm_family_of(enum usm_side side, bool rpc);

int usm_series_key_cmp(const struct usm_series_key *a, const struct usm_series_key *b);

#endif /* BPFTEL_USM_SERIES_KEY_H */
