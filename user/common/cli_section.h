/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What a module (or shared component) shows in the `bpftel` CLI: the table of its own
 * command, and its part of `bpftel stats`, both from the agent's JSON answers. Each
 * module folder defines one (e.g. user/modules/gpu/gpu_print.c); the CLI lists them in
 * one table (tools/bpftel/main.c) and knows nothing else of them.
 */
#ifndef BPFTEL_CLI_SECTION_H
#define BPFTEL_CLI_SECTION_H

#include <jansson.h>

struct bpftel_cli_section {
	const char *command; /* the agent's command, e.g. "gpu"; NULL: stats part only */
	const char *help;    /* lines for `bpftel --help`, each indented by 12 spaces */
	void (*print)(json_t *resp);	   /* the command's answer as tables */
	void (*print_stats)(json_t *stats); /* its members of the `stats` answer */
};

#endif /* BPFTEL_CLI_SECTION_H */
