// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libFuzzer target: kernel names demangled (user/modules/gpu/gpu_demangle.c). A name
 * comes from another process's ELF symbols or its cuModuleGetFunction call; the first
 * input byte picks the size of the output (as the module's labels or smaller), the
 * rest is the name.
 *
 * What must hold besides "no crash, no sanitizer report": the output is NUL-terminated
 * within its size; a name that is not an Itanium C++ one is copied as snprintf would;
 * and the work is bounded by the output (libFuzzer's -timeout and -rss_limit_mb catch a
 * name whose demangling is built whole: 250 bytes can make gigabytes).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "user/modules/gpu/gpu_demangle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[512], out[256], want[256];
	size_t n, osize;

	if (!size)
		return 0;
	osize = 1 + data[0] % sizeof(out);
	n = size - 1 < sizeof(name) - 1 ? size - 1 : sizeof(name) - 1;
	memcpy(name, data + 1, n);
	name[n] = '\0';
	memset(out, 0x55, sizeof(out));
	bpftel_gpu_demangle(name, out, osize);
	if (strnlen(out, osize) >= osize)
		abort(); /* not terminated within its size */
	if (strncmp(name, "_Z", 2)) {
		snprintf(want, osize, "%s", name);
		if (strcmp(out, want))
			abort(); /* not a C++ name: copied */
	}
	return 0;
}
