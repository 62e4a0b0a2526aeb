// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* libFuzzer target: usm_http_parse() on any prefix, as the USM module feeds it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "user/modules/usm/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct usm_http_start m;
	enum usm_http_kind k;

	if (size > 160) /* USM_PREFIX: the module never hands it more */
		size = 160;
	k = usm_http_parse((const char *)data, size, &m);
	if (k != m.kind)
		abort();
	if (k == USM_HTTP_REQUEST) {
		/* A bounded, NUL-terminated endpoint name without query or control bytes. */
		if (!m.method[0] || !memchr(m.method, '\0', sizeof(m.method)))
			abort();
		if (!m.path[0] || !memchr(m.path, '\0', sizeof(m.path)) || strchr(m.path, '?'))
			abort();
		for (const char *p = m.path; *p; p++) {
			if ((unsigned char)*p <= ' ')
				abort();
		}
	} else if (k == USM_HTTP_RESPONSE) {
		if (m.status < 100 || m.status > 599)
			abort();
	}
	return 0;
}
