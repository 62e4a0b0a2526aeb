/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Logging for bpftel's library code. Library code never prints: it calls bpftel_log(),
 * which hands the formatted line to the callback the program installed (the daemon
 * writes to stderr with a level prefix; tests may capture). No callback: dropped.
 */
#ifndef BPFTEL_LOG_H
#define BPFTEL_LOG_H

enum bpftel_log_level {
	BPFTEL_LOG_ERROR = 0,
	BPFTEL_LOG_WARN = 1,
	BPFTEL_LOG_INFO = 2,
	BPFTEL_LOG_DEBUG = 3,
};

typedef void (*bpftel_log_fn)(enum bpftel_log_level level, const char *msg);

void bpftel_log_set_callback(bpftel_log_fn fn);
void bpftel_log(enum bpftel_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define pr_err(...)   bpftel_log(BPFTEL_LOG_ERROR, __VA_ARGS__)
#define pr_warn(...)  bpftel_log(BPFTEL_LOG_WARN, __VA_ARGS__)
#define pr_info(...)  bpftel_log(BPFTEL_LOG_INFO, __VA_ARGS__)
#define pr_debug(...) bpftel_log(BPFTEL_LOG_DEBUG, __VA_ARGS__)

#endif /* BPFTEL_LOG_H */
