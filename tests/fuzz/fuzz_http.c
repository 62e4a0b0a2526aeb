// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* libFuzzer target: usm_http_parse() on any prefix, as the USM module feeds it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "user/modules/usm/http.h"

static void check_request(const struct usm_http_start *m)
{
	/* A standard method or "_OTHER": odd methods cannot multiply rows. */
	if (!memchr(m->method, '\0', sizeof(m->method)))
		abort();
	if (strcmp(m->method, USM_METHOD_OTHER) && !usm_http_method(m->method, strlen(m->method)))
		abort();
	/* A bounded route: rooted (or "*"), no query, fragment, parameters or control
	 * bytes; bytes >= 0x80 may stay. */
	if (!memchr(m->path, '\0', sizeof(m->path)))
		abort();
	if ((m->path[0] != '/' && strcmp(m->path, "*")) || strpbrk(m->path, "?#;"))
		abort();
	for (const char *p = m->path; *p; p++) {
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct usm_http_start m;
	enum usm_http_kind k;

	if (size > 160) /* USM_PREFIX: the module never hands it more */
		size = 160;
	k = usm_http_parse((const char *)data, size, &m);
	if (k != m.kind || m.reject >= USM_HTTP__REJECT_COUNT)
		abort();
	if (k != USM_HTTP_NONE && (m.reject || (m.version != 10 && m.version != 11)))
		abort();
	/* Only a status line can have a bad status. */
	if (m.reject == USM_HTTP_REJECT_STATUS && (size < 5 || memcmp(data, "HTTP/", 5)))
		abort();
	if (k == USM_HTTP_REQUEST) {
		check_request(&m);
	} else if (k == USM_HTTP_RESPONSE) {
		if (m.status < 100 || m.status > 599 || m.truncated)
			abort();
	}
	return 0;
}
