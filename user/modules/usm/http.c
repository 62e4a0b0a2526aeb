// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * HTTP/1.x message starts and endpoint names (http.h).
 *
 * Parsing. A status line is "HTTP/1.0" or "HTTP/1.1", a space, three digits, then the
 * end of the prefix, a space, CR or LF. A request line is a method token (1..20 of
 * A-Z, '-', '_'), one space, a target, then the end of the prefix or a space and
 * "HTTP/1.0" or "HTTP/1.1" (as much of it as the prefix holds) followed by CR, LF or the
 * end. The target starts with '/', is "*" alone, or starts with a letter (absolute-
 * and authority-form); it ends at a space, CR or LF. Any other control byte (< 0x20,
 * 0x7f) in it rejects the line; bytes >= 0x80 are kept. Once a line has shown its
 * method token and space, or "HTTP/", every failure is a rejection the caller counts:
 * USM_HTTP_REJECT_STATUS for a well-formed status line with a code outside 100..599,
 * USM_HTTP_REJECT_SYNTAX for the rest. truncated means the prefix ended inside the
 * target; a line cut after its target is complete, and its version reads 11.
 *
 * Normalization, in this order:
 *  1. The query and the fragment go: the target ends at the first '?' or '#'.
 *  2. "*" stays "*" (OPTIONS' asterisk-form). "scheme://authority/path" becomes its
 *     path, "/" without one; any other target not starting with '/' (authority-form)
 *     becomes "/": a host names no endpoint.
 *  3. Each segment (between '/') loses its ";params". Empty segments, "." and ".."
 *     stay as they are: nothing is resolved.
 *  4. A segment becomes '*' when it is
 *     - a number: digits only;
 *     - a UUID: 8-4-4-4-12 hex digits;
 *     - long hex: 8+ hex digits, one of them a decimal digit (keeps "deadbeef");
 *     - e-mail-like: something, '@' (or "%40"), then a domain: labels of letters,
 *       digits and '-' joined by dots, the last of letters only ("x@y.z"); not a pixel
 *       density ("logo@2x.png", "icon@1.5x.svg" stay);
 *     - JWT-shaped: three parts of [A-Za-z0-9_-] joined by two dots, the first two of
 *       8+ characters, the third empty or 8+, upper case, lower case and digits all in;
 *     - long base64/base64url: 16+ characters of [A-Za-z0-9+=_-], upper case, lower
 *       case and digits all in, whose class (upper, lower, digit, symbol) changes
 *       between neighbours at least every other character: random text changes two
 *       times in three, names far less ("getUser2FAStatus" stays);
 *     - mixed letters and digits: 16+ of them, 2+ digits, not all at one end (letters
 *       and digits alternate twice or more: "getUser2FAStatus" stays);
 *     - the last segment of a truncated target with no ';' seen in it (incomplete).
 *  5. A result that does not fit in size ends in "/..."; "" becomes "/".
 */
#include <stdio.h>
#include <string.h>

#include "http.h"

#define METHOD_TOKEN_MAX 20

static const char *const methods[] = {"GET",	 "HEAD",    "POST",  "PUT",  "DELETE",
				      "OPTIONS", "CONNECT", "TRACE", "PATCH"};

const char *usm_http_method(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		if (strlen(methods[i]) == len && !memcmp(s, methods[i], len))
			return methods[i];
	}
	return NULL;
}

_Static_assert(sizeof("OPTIONS") <= USM_METHOD_MAX && sizeof("CONNECT") <= USM_METHOD_MAX &&
		       sizeof(USM_METHOD_OTHER) <= USM_METHOD_MAX,
	       "every method name fits");

void usm_http_method_set(char *out, const char *s, size_t len)
{
	const char *m = usm_http_method(s, len);

	if (!m)
		m = USM_METHOD_OTHER;
	memcpy(out, m, strlen(m) + 1);
}

/* Character classes without the locale: the bytes are on the wire, not text. */
static bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static bool is_upper(unsigned char c)
{
	return c >= 'A' && c <= 'Z';
}

static bool is_lower(unsigned char c)
{
	return c >= 'a' && c <= 'z';
}

static bool is_alpha(unsigned char c)
{
	return is_upper(c) || is_lower(c);
}

static bool is_hex(unsigned char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool is_ctl(unsigned char c)
{
	return c < 0x20 || c == 0x7f;
}

/* Base64 and base64url together; '/' cannot occur inside a segment. */
static bool is_b64(unsigned char c)
{
	return is_alpha(c) || is_digit(c) || c == '+' || c == '=' || c == '-' || c == '_';
}

static bool is_number(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (!is_digit(s[i]))
			return false;
	}
	return n > 0;
}

static bool is_uuid(const char *s, size_t n)
{
	size_t i;

	if (n != 36)
		return false;
	for (i = 0; i < n; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (!is_hex(s[i])) {
			return false;
		}
	}
	return true;
}

static bool is_long_hex(const char *s, size_t n)
{
	size_t i, digits = 0;

	for (i = 0; i < n; i++) {
		if (!is_hex(s[i]))
			return false;
		digits += is_digit(s[i]);
	}
	return n >= 8 && digits;
}

/* "2x", "1.5x": the pixel density of "logo@2x.png", not a mail domain. */
static bool is_density(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i + 1 < n && (is_digit(s[i]) || s[i] == '.'); i++)
		;
	return i && i + 1 == n && s[i] == 'x';
}

/* local@domain.tld: the domain's labels made of letters, digits and '-', the last of
 * letters only. */
static bool is_email(const char *s, size_t n)
{
	size_t i, at = 0, dot = 0;
	bool letters = false; /* the label after the last dot has only letters so far */

	for (i = 1; i < n && !at; i++) {
		if (s[i] == '@')
			at = i + 1;
		else if (n - i >= 3 && !memcmp(s + i, "%40", 3))
			at = i + 3;
	}
	if (!at)
		return false;
	for (i = at; i < n; i++) {
		if (s[i] == '.') {
			if (i == at || s[i - 1] == '.')
				return false; /* an empty label */
			dot = i;
			letters = true;
		} else if (is_digit(s[i]) || s[i] == '-') {
			letters = false;
		} else if (!is_alpha(s[i])) {
			return false;
		}
	}
	return dot && dot + 1 < n && letters && !is_density(s + at, dot - at);
}

/* Which of upper, lower, digit, symbol a base64 character is: 0..3. */
static int b64_class(unsigned char c)
{
	return is_upper(c) ? 0 : is_lower(c) ? 1 : is_digit(c) ? 2 : 3;
}

static bool is_jwt(const char *s, size_t n)
{
	size_t i, part = 0, len[3] = {0, 0, 0};
	unsigned int seen = 0;

	for (i = 0; i < n; i++) {
		if (s[i] == '.') {
			if (++part > 2)
				return false;
			continue;
		}
		if (!is_b64(s[i]) || s[i] == '+' || s[i] == '=')
			return false;
		seen |= 1u << b64_class(s[i]);
		len[part]++;
	}
	return part == 2 && len[0] >= 8 && len[1] >= 8 && (!len[2] || len[2] >= 8) &&
	       (seen & 7) == 7;
}

static bool is_base64(const char *s, size_t n)
{
	size_t i, changes = 0;
	unsigned int seen = 0;

	if (n < 16)
		return false;
	for (i = 0; i < n; i++) {
		if (!is_b64(s[i]))
			return false;
		seen |= 1u << b64_class(s[i]);
		changes += i && b64_class(s[i]) != b64_class(s[i - 1]);
	}
	return (seen & 7) == 7 && 2 * changes >= n - 1;
}

static bool is_mixed_alnum(const char *s, size_t n)
{
	size_t i, digits = 0, changes = 0;

	if (n < 16)
		return false;
	for (i = 0; i < n; i++) {
		if (!is_alpha(s[i]) && !is_digit(s[i]))
			return false;
		digits += is_digit(s[i]);
		changes += i && is_digit(s[i]) != is_digit(s[i - 1]);
	}
	return digits >= 2 && digits < n && changes >= 2;
}

/* A segment that names an instance or carries a secret, not an endpoint. */
static bool is_instance(const char *s, size_t n)
{
	return is_number(s, n) || is_uuid(s, n) || is_long_hex(s, n) || is_email(s, n) ||
	       is_jwt(s, n) || is_base64(s, n) || is_mixed_alnum(s, n);
}

bool usm_grpc_route_ok(const char *s, size_t n)
{
	size_t i, start = 1, slashes = 0;

	if (n < 4 || s[0] != '/')
		return false;
	for (i = 1;; i++) {
		if (i < n && (is_alpha(s[i]) || s[i] == '_' || (is_digit(s[i]) && i > start)))
			continue;
		/* An identifier ends here: not empty, not shaped like an instance. */
		if (i == start || is_instance(s + start, i - start))
			return false;
		if (i == n)
			return slashes == 1;
		if (s[i] == '/')
			slashes++;
		if (slashes > 1 || (s[i] != '/' && (s[i] != '.' || slashes)))
			return false; /* dots only between the service's names */
		start = i + 1;
	}
}

static void append(char *out, size_t size, size_t *pos, const char *s, size_t n, bool *full)
{
	if (*full)
		return;
	if (*pos + n + 1 > size) {
		n = size - 1 - *pos; /* what fits; the caller marks the cut */
		*full = true;
	}
	memcpy(out + *pos, s, n);
	*pos += n;
	out[*pos] = '\0';
}

/* "scheme://": RFC 3986's scheme, then the authority's slashes. */
static size_t scheme_len(const char *p, size_t len)
{
	size_t i;

	if (!len || !is_alpha(p[0]))
		return 0;
	for (i = 1; i < len; i++) {
		if (is_alpha(p[i]) || is_digit(p[i]) || p[i] == '+' || p[i] == '-' || p[i] == '.')
			continue;
		return len - i >= 3 && !memcmp(p + i, "://", 3) ? i + 3 : 0;
	}
	return 0;
}

void usm_path_normalize(const char *target, size_t len, bool truncated, char *out, size_t size)
{
	const char *p = target, *q, *semi;
	size_t pos = 0, n, name;
	bool full = false;

	out[0] = '\0';
	/* Query and fragment go first: they never name an endpoint. */
	for (n = 0; n < len && p[n] != '?' && p[n] != '#'; n++)
		;
	if (n < len) {
		len = n;
		truncated = false; /* what was cut off is gone anyway */
	}
	if (len == 1 && *p == '*' && !truncated) {
		snprintf(out, size, "*");
		return;
	}
	if (len && *p != '/') {
		n = scheme_len(p, len);
		q = n ? memchr(p + n, '/', len - n) : NULL;
		if (!q) {
			snprintf(out, size, "/"); /* no path, or authority-form */
			return;
		}
		len -= q - p;
		p = q;
	}
	while (len && !full) {
		if (*p == '/') {
			append(out, size, &pos, "/", 1, &full);
			p++;
			len--;
			continue;
		}
		q = memchr(p, '/', len);
		n = q ? (size_t)(q - p) : len;
		semi = memchr(p, ';', n);
		name = semi ? (size_t)(semi - p) : n;
		if ((truncated && !q && !semi && name) || (name && is_instance(p, name)))
			append(out, size, &pos, "*", 1, &full);
		else
			append(out, size, &pos, p, name, &full);
		p += n;
		len -= n;
	}
	if (full && size > 5) {
		/* Too long for a name: keep what fits, mark the cut. */
		pos = strlen(out) < size - 5 ? strlen(out) : size - 5;
		snprintf(out + pos, size - pos, "/...");
	}
	if (!out[0])
		snprintf(out, size, "/");
}

/* data[0..len) against "HTTP/1.0" or "HTTP/1.1": 10 or 11, or 0. With partial, a
 * prefix of either is enough and reads 11. */
static int version_of(const char *data, size_t len, bool partial)
{
	static const char v[] = "HTTP/1.";

	if (len < sizeof(v))
		return partial && !memcmp(data, v, len) ? 11 : 0;
	if (memcmp(data, v, sizeof(v) - 1) || (data[7] != '0' && data[7] != '1'))
		return 0;
	return data[7] == '0' ? 10 : 11;
}

static enum usm_http_kind reject(struct usm_http_start *out, enum usm_http_reject why)
{
	out->kind = USM_HTTP_NONE;
	out->reject = why;
	return USM_HTTP_NONE;
}

static enum usm_http_kind parse_status(const char *data, size_t len, struct usm_http_start *out)
{
	int status = 0, i;

	/* "HTTP/1.x NNN" then the end, a reason phrase or the line's end. */
	out->version = version_of(data, len < 8 ? len : 8, false);
	if (!out->version || len < 12 || data[8] != ' ')
		return reject(out, USM_HTTP_REJECT_SYNTAX);
	for (i = 9; i < 12; i++) {
		if (!is_digit(data[i]))
			return reject(out, USM_HTTP_REJECT_SYNTAX);
		status = status * 10 + (data[i] - '0');
	}
	if (len > 12 && data[12] != ' ' && data[12] != '\r' && data[12] != '\n')
		return reject(out, USM_HTTP_REJECT_SYNTAX);
	if (status < 100 || status > 599)
		return reject(out, USM_HTTP_REJECT_STATUS);
	out->status = status;
	return out->kind = USM_HTTP_RESPONSE;
}

/* The method token's length when data starts with one and a space, else 0. */
static size_t method_len(const char *data, size_t len)
{
	size_t i;

	for (i = 0; i < len && i <= METHOD_TOKEN_MAX; i++) {
		if (data[i] == ' ')
			return i;
		if (!is_upper(data[i]) && data[i] != '-' && data[i] != '_')
			return 0;
	}
	return 0;
}

/* The rest of a request line after its target's space. */
static bool request_tail(const char *data, size_t len, struct usm_http_start *out)
{
	out->version = version_of(data, len < 8 ? len : 8, true);
	return out->version && (len <= 8 || data[8] == '\r' || data[8] == '\n');
}

enum usm_http_kind usm_http_parse(const char *data, size_t len, struct usm_http_start *out)
{
	const char *target;
	size_t n, tlen, i;

	memset(out, 0, sizeof(*out));
	if (len >= 5 && !memcmp(data, "HTTP/", 5))
		return parse_status(data, len, out);
	n = method_len(data, len);
	if (!n)
		return USM_HTTP_NONE; /* not even the look of a request */
	target = data + n + 1;
	tlen = len - n - 1;
	for (i = 0; i < tlen && target[i] != ' ' && target[i] != '\r' && target[i] != '\n'; i++) {
		if (is_ctl(target[i]))
			return reject(out, USM_HTTP_REJECT_SYNTAX);
	}
	if (!i || (*target != '/' && *target != '*' && !is_alpha(*target)) ||
	    (*target == '*' && i != 1))
		return reject(out, USM_HTTP_REJECT_SYNTAX);
	if (i == tlen) {
		/* The prefix ended inside the target; "*" cannot grow and stay valid. */
		out->truncated = *target != '*';
		out->version = 11;
	} else if (target[i] != ' ' || !request_tail(target + i + 1, tlen - i - 1, out)) {
		return reject(out, USM_HTTP_REJECT_SYNTAX); /* HTTP/0.9, HTTP/2.0, garbage */
	}
	usm_http_method_set(out->method, data, n);
	usm_path_normalize(target, i, out->truncated, out->path, sizeof(out->path));
	return out->kind = USM_HTTP_REQUEST;
}
