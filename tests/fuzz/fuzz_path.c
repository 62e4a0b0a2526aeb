// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* libFuzzer target: usm_path_normalize() with every output size and truncation flag. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "user/modules/usm/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char out[USM_PATH_MAX + 8], again[USM_PATH_MAX];
	size_t cap;
	bool truncated;

	if (size < 2)
		return 0;
	cap = 2 + data[0] % (USM_PATH_MAX - 1); /* 2..USM_PATH_MAX */
	truncated = data[1] & 1;
	memset(out, 'Z', sizeof(out));
	usm_path_normalize((const char *)data + 2, size - 2, truncated, out, cap);
	/* NUL-terminated inside cap, nothing written past it, never empty. */
	if (!memchr(out, '\0', cap) || out[cap] != 'Z' || !out[0])
		abort();
	/* A route: rooted (or OPTIONS' "*"), without query, fragment or parameters. */
	if ((out[0] != '/' && strcmp(out, "*")) || strpbrk(out, "?#;"))
		abort();
	/* A name normalizes to itself, unless cut to fit ("/..." keeps no meaning) or
	 * holding a NUL, which no caller passes (both parsers reject control bytes). */
	if (cap == USM_PATH_MAX && !strstr(out, "/...") && !memchr(data + 2, '\0', size - 2)) {
		usm_path_normalize(out, strlen(out), false, again, sizeof(again));
		if (strcmp(out, again))
			abort();
	}
	return 0;
}
