// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "escape.h"
#include "log.h"

static bpftel_log_fn log_fn;

void bpftel_log_set_callback(bpftel_log_fn fn)
{
	__atomic_store_n(&log_fn, fn, __ATOMIC_RELEASE);
}

void bpftel_log(enum bpftel_log_level level, const char *fmt, ...)
{
	bpftel_log_fn fn = __atomic_load_n(&log_fn, __ATOMIC_ACQUIRE);
	static const char cut[] = " [cut]";
	char msg[1024], safe[1024];
	va_list ap;
	size_t len;
	int n;

	if (!fn)
		return;
	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	/* Messages carry paths and names from other processes: never a raw control
	 * character on the operator's terminal or in the journal, and read as everywhere
	 * else (a backslash doubled: "\x1B" in a path is not an escape). A long one ends
	 * on a whole character or escape, and says it was cut. */
	len = bpftel_escape(safe, sizeof(safe) - sizeof(cut) + 1, msg, strnlen(msg, sizeof(msg)),
			    BPFTEL_ESC_BACKSLASH);
	if (len >= sizeof(safe) - sizeof(cut) + 1 || (size_t)n >= sizeof(msg))
		strcat(safe, cut);
	fn(level, safe);
}
