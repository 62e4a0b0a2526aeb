/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The CLI's commands that live in their own file. */
#ifndef BPFTEL_CLI_PRINT_H
#define BPFTEL_CLI_PRINT_H

#include <stdbool.h>
#include <jansson.h>

/* `bpftel top`: its own loop (top.c). Returns the exit status. */
int bpftel_top(const char *sock, bool json);

#endif /* BPFTEL_CLI_PRINT_H */
