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
	char msg[1024], safe[1024];
	va_list ap;
	int n;

	if (!fn)
		return;
	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	/* Messages carry paths and names from other processes: never a raw control
	 * character on the operator's terminal or in the journal. */
	bpftel_escape(safe, sizeof(safe), msg, strnlen(msg, sizeof(msg)), 0);
	fn(level, safe);
}
