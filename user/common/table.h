/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Aligned text tables for the CLI: add a header and rows of cells, then print. Cells
 * are escaped (escape.h): no control character reaches the terminal; and a cell wider
 * than TABLE_CELL_COLS is shown as its start and end with "..." between. */
#ifndef BPFTEL_TABLE_H
#define BPFTEL_TABLE_H

#include <stdio.h>

#define TABLE_MAX_COLS 12
#define TABLE_CELL_COLS 80

struct table;

struct table *table_new(int ncols, const char *const *headers);
/* Append a row of ncols cells (printf-style each: pass pre-formatted strings). */
void table_add(struct table *t, const char *const *cells);
/* Print with columns separated by two spaces; the last column is not padded. */
void table_print(const struct table *t, FILE *out);
void table_free(struct table *t);
/* A section made of rows that may not exist: nothing when t is NULL (no row was
 * added), else "\n<title>:" then the table. Frees t either way. */
void table_print_section(struct table *t, const char *title, FILE *out);

#endif /* BPFTEL_TABLE_H */
