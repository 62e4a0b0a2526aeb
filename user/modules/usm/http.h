/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * HTTP/1.x message starts: parse a request line or a status line out of a plaintext
 * prefix, and normalize request paths into bounded endpoint names. Pure functions on
 * caller buffers, no allocation: the fuzz targets and unit tests drive them directly.
 */
#ifndef BPFTEL_USM_HTTP_H
#define BPFTEL_USM_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#define USM_METHOD_MAX 8   /* "OPTIONS" + NUL */
#define USM_PATH_MAX   128 /* normalized path, NUL included */

enum usm_http_kind {
	USM_HTTP_NONE = 0, /* not the start of an HTTP/1.x message */
	USM_HTTP_REQUEST,
	USM_HTTP_RESPONSE,
};

struct usm_http_start {
	enum usm_http_kind kind;
	char method[USM_METHOD_MAX];
	char path[USM_PATH_MAX]; /* normalized */
	int status;		 /* responses: 100..599 */
	bool truncated;		 /* the request line did not fit in the prefix */
};

/* Parse the start of data[0..len). Returns out->kind; USM_HTTP_NONE for anything else
 * (other protocols, bodies, garbage, a status outside 100..599). */
enum usm_http_kind usm_http_parse(const char *data, size_t len, struct usm_http_start *out);

/* The method's name if it is one usm_http_parse() knows (GET ... PATCH), else NULL: HTTP/2
 * takes the same set, so that odd methods cannot multiply endpoint rows. */
const char *usm_http_method(const char *s, size_t len);

/*
 * Normalize a request target into out (size >= 2): drop the query and fragment; turn
 * an absolute-form URI into its path; replace segments that are numbers, UUIDs or
 * long hex strings by '*'; with truncated set, the last (incomplete) segment becomes
 * '*' too. A result longer than size ends in "/..." . "" becomes "/".
 */
void usm_path_normalize(const char *target, size_t len, bool truncated, char *out, size_t size);

#endif /* BPFTEL_USM_HTTP_H */
