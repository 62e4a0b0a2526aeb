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

#define USM_METHOD_MAX 8   /* "OPTIONS" + NUL; "_OTHER" for any non-standard method */
#define USM_PATH_MAX   128 /* normalized path, NUL included */
#define USM_METHOD_OTHER "_OTHER" /* OpenTelemetry's name for a method outside the set */

enum usm_http_kind {
	USM_HTTP_NONE = 0, /* not the start of an HTTP/1.x message */
	USM_HTTP_REQUEST,
	USM_HTTP_RESPONSE,
	USM_HTTP_ANSWERING, /* HTTP/2: a response begun, to end later (h2_sessions.c) */
};

/* Why a line that looked like an HTTP/1.x start was not one (for counting). */
enum usm_http_reject {
	USM_HTTP_REJECT_NONE = 0,
	USM_HTTP_REJECT_SYNTAX,	   /* not a request or status line */
	USM_HTTP_REJECT_STATUS,	   /* a status line whose code is outside 100..599 */
	USM_HTTP__REJECT_COUNT,
};

struct usm_http_start {
	enum usm_http_kind kind;
	char method[USM_METHOD_MAX]; /* a standard method, or USM_METHOD_OTHER */
	char path[USM_PATH_MAX];     /* normalized; raw bytes kept (escaped on output) */
	int status;		     /* responses: 100..599 */
	int version;		     /* 10 or 11 (HTTP/1.0, 1.1), as the line says; 11 if cut */
	bool truncated;		     /* the request line did not fit in the prefix */
	bool grpc;		     /* HTTP/2 only: a gRPC call (content-type application/grpc*) */
	int grpc_status;	     /* gRPC responses: grpc-status 0..16, -1 none or another */
	enum usm_http_reject reject; /* with USM_HTTP_NONE: why */
};

/*
 * Parse the start of data[0..len). Returns out->kind; USM_HTTP_NONE for anything else
 * (other protocols, bodies, garbage), with out->reject saying why when the line looked
 * like HTTP: a status outside 100..599 is rejected (USM_HTTP_REJECT_STATUS). Methods:
 * the standard ones (GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH) as
 * they are; any other token of 1..20 upper-case letters, '-' or '_' becomes "_OTHER".
 * Request targets may hold bytes >= 0x80 (kept as they are: every output escapes them);
 * a control character or a space ends the target as the line's syntax says.
 */
enum usm_http_kind usm_http_parse(const char *data, size_t len, struct usm_http_start *out);

/*
 * A 1xx status other than 101: an interim response (100 Continue to a request sent with
 * "Expect: 100-continue", 103 Early Hints); the exchange's final response follows. 101
 * Switching Protocols is the last HTTP/1 response on its connection: final for pairing.
 */
static inline bool usm_http_interim(int status)
{
	return status >= 100 && status < 200 && status != 101;
}

/* The method's name if it is one usm_http_parse() knows (GET ... PATCH), else NULL: HTTP/2
 * takes the same set, so that odd methods cannot multiply endpoint rows. */
const char *usm_http_method(const char *s, size_t len);
/* out (USM_METHOD_MAX bytes) = that name, or USM_METHOD_OTHER. A copy of a name known
 * to fit: on every message's path, where snprintf's format parse showed in profiles. */
void usm_http_method_set(char *out, const char *s, size_t len);

/*
 * Normalize a request target into out (size >= 2): drop the query and fragment, and
 * each segment's ";params" (path parameters: jsessionid and the like); turn an
 * absolute-form URI into its path; replace by '*' the segments that name an instance
 * or carry a secret, not an endpoint: numbers, UUIDs, long hex strings, and
 * high-entropy tokens (long base64/base64url, JWT-shaped a.b.c, e-mail-like, mixed
 * letters and digits of 16+ characters); with truncated set, the last (incomplete)
 * segment becomes '*' too. A result longer than size ends in "/...". "" becomes "/".
 */
void usm_path_normalize(const char *target, size_t len, bool truncated, char *out, size_t size);

/*
 * A gRPC route to keep as sent: "/package.Service/Method", the service's names and the
 * method identifiers ([A-Za-z_][A-Za-z0-9_]*), none shaped like an instance or a secret
 * (what usm_path_normalize() would replace by '*'). Anything else claiming
 * content-type application/grpc is normalized like any path.
 */
bool usm_grpc_route_ok(const char *s, size_t n);

#endif /* BPFTEL_USM_HTTP_H */
