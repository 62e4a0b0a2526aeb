// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "http.h"

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

static bool starts_with(const char *data, size_t len, const char *s)
{
	size_t n = strlen(s);

	return len >= n && !memcmp(data, s, n);
}

/* A path segment that names an instance, not an endpoint: all digits, a UUID, or a
 * hex string of 8+ characters with a digit in it. */
static bool is_id_segment(const char *seg, size_t n)
{
	size_t i, digits = 0, hex = 0, dashes = 0;

	if (!n)
		return false;
	for (i = 0; i < n; i++) {
		if (isdigit((unsigned char)seg[i]))
			digits++;
		else if (isxdigit((unsigned char)seg[i]))
			hex++;
		else if (seg[i] == '-')
			dashes++;
		else
			return false;
	}
	if (digits == n)
		return true;
	if (n == 36 && dashes == 4 && seg[8] == '-' && seg[13] == '-' && seg[18] == '-' &&
	    seg[23] == '-')
		return true;
	return !dashes && n >= 8 && digits > 0;
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

void usm_path_normalize(const char *target, size_t len, bool truncated, char *out, size_t size)
{
	const char *p = target, *end, *q, *seg;
	size_t pos = 0, n;
	bool full = false;

	out[0] = '\0';
	/* Query and fragment go first: they never name an endpoint. */
	end = memchr(p, '?', len);
	q = memchr(p, '#', end ? (size_t)(end - p) : len);
	if (q)
		end = q;
	if (end) {
		len = end - p;
		truncated = false; /* what was cut off is gone anyway */
	}
	/* absolute-form: "http://host:port/path" */
	if (len > 7 && (q = memchr(p, ':', len)) && q + 2 < p + len && q[1] == '/' && q[2] == '/') {
		seg = memchr(q + 3, '/', p + len - (q + 3));
		if (!seg) {
			snprintf(out, size, "/");
			return;
		}
		len -= seg - p;
		p = seg;
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
		if ((truncated && !q) || is_id_segment(p, n))
			append(out, size, &pos, "*", 1, &full);
		else
			append(out, size, &pos, p, n, &full);
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

static enum usm_http_kind parse_status(const char *data, size_t len, struct usm_http_start *out)
{
	int status = 0, i;

	/* "HTTP/1.x NNN" */
	if (len < 12 || (data[7] != '0' && data[7] != '1') || data[8] != ' ')
		return USM_HTTP_NONE;
	for (i = 9; i < 12; i++) {
		if (!isdigit((unsigned char)data[i]))
			return USM_HTTP_NONE;
		status = status * 10 + (data[i] - '0');
	}
	if (status < 100 || status > 599 || (len > 12 && data[12] != ' ' && data[12] != '\r'))
		return USM_HTTP_NONE;
	out->status = status;
	return out->kind = USM_HTTP_RESPONSE;
}

enum usm_http_kind usm_http_parse(const char *data, size_t len, struct usm_http_start *out)
{
	const char *target, *sp;
	size_t i, n, tlen;

	memset(out, 0, sizeof(*out));
	if (starts_with(data, len, "HTTP/1."))
		return parse_status(data, len, out);
	for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		n = strlen(methods[i]);
		if (len > n && !memcmp(data, methods[i], n) && data[n] == ' ')
			break;
	}
	if (i == sizeof(methods) / sizeof(methods[0]))
		return USM_HTTP_NONE;
	target = data + n + 1;
	tlen = len - n - 1;
	if (!tlen || (*target != '/' && *target != '*' && !isalpha((unsigned char)*target)))
		return USM_HTTP_NONE;
	sp = memchr(target, ' ', tlen);
	if (sp) {
		/* The target ends at the space; HTTP/1.x must follow, as far as we have. */
		size_t rest = len - (sp + 1 - data);

		if (rest && memcmp(sp + 1, "HTTP/1.", rest < 7 ? rest : 7))
			return USM_HTTP_NONE;
		tlen = sp - target;
	} else {
		/* No space before the prefix ended: a target longer than the prefix. */
		if (memchr(target, '\r', tlen) || memchr(target, '\n', tlen))
			return USM_HTTP_NONE; /* HTTP/0.9 or garbage */
		out->truncated = true;
	}
	for (i = 0; i < tlen; i++) {
		if ((unsigned char)target[i] <= ' ' || target[i] == 0x7f)
			return USM_HTTP_NONE;
	}
	memcpy(out->method, data, n);
	usm_path_normalize(target, tlen, out->truncated, out->path, sizeof(out->path));
	return out->kind = USM_HTTP_REQUEST;
}
