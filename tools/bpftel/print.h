/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Table printers of the commands that live in their own file. */
#ifndef BPFTEL_CLI_PRINT_H
#define BPFTEL_CLI_PRINT_H

#include <stdbool.h>
#include <jansson.h>

void print_gpu(json_t *resp);  /* gpu.c */
void print_http(json_t *resp); /* http.c */

/* `bpftel top`: its own loop (top.c). Returns the exit status. */
int bpftel_top(const char *sock, bool json);

#endif /* BPFTEL_CLI_PRINT_H */
