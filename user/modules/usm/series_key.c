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

/* src into dst (size bytes, zeroed), cut to fit: on every paired response's path, where
 * snprintf's format parse costs more than the copy. */
static void put(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);

	memcpy(dst, src, n < size ? n : size - 1);
}

/* A status code (0..999 here: HTTP's 100..599, gRPC's 0..16) into dst (zeroed). */
static void put_status(char *dst, int status)
{
	char digits[4];
	int n = 0;

	if (status < 0 || status > 999)
		return;
	do {
		digits[n++] = (char)('0' + status % 10);
		status /= 10;
	} while (status);
	while (n)
		*dst++ = digits[--n];
}

void usm_series_key_of(struct usm_series_key *k, const struct usm_paired *p, const char *container)
{
	const char *method;

	if (p->overflow != USM_OVERFLOW_NONE) {
		/* The overflow row keeps no route, status or gRPC-ness: the call still
		 * goes to its own family's overflow series (gRPC calls are in the RPC
		 * families only), HTTP's with the row's version. */
		usm_series_key_overflow(k, usm_family_of(p->side, p->grpc));
		if (!p->grpc) {
			memset(k->version, 0, sizeof(k->version));
			put(k->version, sizeof(k->version), usm_version_name(p->version));
		}
	} else if (p->grpc) {
		memset(k, 0, sizeof(*k));
		k->family = usm_family_of(p->side, true);
		usm_rpc_names(p->path, k->route, sizeof(k->route), &method);
		put(k->method, sizeof(k->method), method);
		if (p->grpc_status >= 0)
			put_status(k->status, p->grpc_status);
	} else {
		memset(k, 0, sizeof(*k));
		k->family = usm_family_of(p->side, false);
		put(k->route, sizeof(k->route), p->path);
		put(k->method, sizeof(k->method), p->method);
		if (p->status)
			put_status(k->status, p->status);
		put(k->version, sizeof(k->version), usm_version_name(p->version));
	}
	if (container)
		put(k->container, sizeof(k->container), container);
}

void usm_series_key_overflow(struct usm_series_key *k, enum usm_family family)
{
	memset(k, 0, sizeof(*k));
	k->family = family;
	put(k->route, sizeof(k->route), USM_ROUTE_OVERFLOW);
	if (family == USM_FAM_HTTP_SERVER || family == USM_FAM_HTTP_CLIENT) {
		put(k->method, sizeof(k->method), USM_METHOD_OTHER);
		put(k->version, sizeof(k->version), usm_version_name(11));
	}
}

int usm_series_key_cmp(const struct usm_series_key *a, const struct usm_series_key *b)
{
	return memcmp(a, b, sizeof(*a));
}
