/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The CLI's commands that live in their own file. */
#ifndef BPFTEL_CLI_PRINT_H
#define BPFTEL_CLI_PRINT_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

/* `bpftel top`: its own loop (top.c). Returns the exit status. */
int bpftel_top(const char *sock, bool json, int timeout_ms);
/* top's rates between two samples (stats and errors answers, taken at ta and tb s). */
json_t *bpftel_top_rates(json_t *stats_a, json_t *errors_a, double ta, json_t *stats_b,
			 json_t *errors_b, double tb);
/* The exit status once the output is written: 1 (said on stderr) when it could not be
 * (a full disk, a closed pipe), or when dumped (json_dumpf's result) is not 0. */
int bpftel_cli_flushed(int dumped);
/* Escape (user/common/escape.h) every string of an agent's answer, for a terminal. */
void bpftel_cli_escape_strings(json_t *v);
/* Why bpftel_ctl_call(path) failed (its err, its message msg), for stderr: escaped. */
void bpftel_cli_connect_reason(int err, const char *path, const char *msg, char *buf,
			       size_t size);

#endif /* BPFTEL_CLI_PRINT_H */
