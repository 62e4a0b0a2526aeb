// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The label set a series is exported under (series_key.h). */
#include <stdio.h>
#include <string.h>

#include "series_key.h"

const char *usm_version_name(int version)
{
	return version == 20 ? "2" : version == 10 ? "1.0" : "1.1";
}

void usm_rpc_names(const char *route, char *service, size_t ssize, const char **method)
{
	const char *slash = strrchr(route, '/');

	if (route[0] == '/' && slash && slash > route + 1 && slash[1]) {
		snprintf(service, ssize, "%.*s", (int)(slash - route - 1), route + 1);
		*method = slash + 1;
	} else {
		snprintf(service, ssize, "%s", route);
		*method = "";
	}
}

enum usm_family usm_family_of(enum usm_side side, bool rpc)
{
	if (rpc)
		return side == USM_SIDE_SERVER ? USM_FAM_RPC_SERVER : USM_FAM_RPC_CLIENT;
	return side == USM_SIDE_SERVER ? USM_FAM_HTTP_SERVER : USM_FAM_HTTP_CLIENT;
}

/* An absent status (0 in HTTP rows, -1 in gRPC ones) prints as "". */
static void status_str(char *out, size_t size, int status, bool known)
{
	if (known)
		snprintf(out, size, "%d", status);
}

void usm_series_key_of_row(struct usm_series_key *k, const struct usm_endpoint_row *r,
			   const char *container)
{
	const char *method;

	memset(k, 0, sizeof(*k));
	k->family = usm_family_of(r->side, r->grpc);
	if (r->grpc) {
		usm_rpc_names(r->path, k->route, sizeof(k->route), &method);
		snprintf(k->method, sizeof(k->method), "%s", method);
		status_str(k->status, sizeof(k->status), r->grpc_status, r->grpc_status >= 0);
	} else {
		snprintf(k->route, sizeof(k->route), "%s", r->path);
		snprintf(k->method, sizeof(k->method), "%s", r->method);
		status_str(k->status, sizeof(k->status), r->status, r->status != 0);
		snprintf(k->version, sizeof(k->version), "%s", usm_version_name(r->version));
	}
	if (container)
		snprintf(k->container, sizeof(k->container), "%s", container);
}

void usm_series_key_overflow(struct usm_series_key *k, enum usm_family family)
{
	memset(k, 0, sizeof(*k));
	k->family = family;
	snprintf(k->route, sizeof(k->route), "%s", USM_ROUTE_OVERFLOW);
	if (family == USM_FAM_HTTP_SERVER || family == USM_FAM_HTTP_CLIENT) {
		snprintf(k->method, sizeof(k->method), "%s", USM_METHOD_OTHER);
		snprintf(k->version, sizeof(k->version), "%s", usm_version_name(11));
	}
}

int usm_series_key_cmp(const struct usm_series_key *a, const struct usm_series_key *b)
{
	return memcmp(a, b, sizeof(*a));
}
