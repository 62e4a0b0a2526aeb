// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "table.h"

struct table {
	int ncols;
	size_t nrows, cap;
	char **cells; /* nrows * ncols, row 0 is the header */
	size_t width[TABLE_MAX_COLS];
};

struct table *table_new(int ncols, const char *const *headers)
{
	struct table *t;

	if (ncols <= 0 || ncols > TABLE_MAX_COLS)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->ncols = ncols;
	table_add(t, headers);
	return t;
}

void table_add(struct table *t, const char *const *cells)
{
	char **grown, *esc;
	size_t len;
	int i;

	if (!t)
		return;
	if (t->nrows == t->cap) {
		grown = realloc(t->cells, (t->cap ? t->cap * 2 : 16) * t->ncols * sizeof(char *));
		if (!grown)
			return;
		t->cells = grown;
		t->cap = t->cap ? t->cap * 2 : 16;
	}
	for (i = 0; i < t->ncols; i++) {
		/* The agent escapes what it got from other processes; a terminal gets no
		 * control character from us whatever the answer held. */
		esc = bpftel_escape_dup(cells[i] ? cells[i] : "-", 0);
		/* Nor a cell so wide that every row of the table wraps: an HTTP path or a
		 * file name is anyone's to choose (--json has them whole). */
		t->cells[t->nrows * t->ncols + i] = esc ? bpftel_elide_dup(esc, TABLE_CELL_COLS) : NULL;
		free(esc);
		/* Columns, not bytes: "café" is 5 bytes and 4 columns. */
		len = t->cells[t->nrows * t->ncols + i]
			      ? bpftel_columns(t->cells[t->nrows * t->ncols + i])
			      : 1;
		if (len > t->width[i])
			t->width[i] = len;
	}
	t->nrows++;
}

void table_print(const struct table *t, FILE *out)
{
	const char *cell;
	size_t r;
	int i;

	if (!t)
		return;
	for (r = 0; r < t->nrows; r++) {
		for (i = 0; i < t->ncols; i++) {
			cell = t->cells[r * t->ncols + i];
			if (!cell)
				cell = "?";
			if (i == t->ncols - 1)
				fprintf(out, "%s\n", cell);
			else /* printf pads by bytes: by columns here */
				fprintf(out, "%s%*s  ", cell,
					(int)(t->width[i] - bpftel_columns(cell)), "");
		}
	}
}

void table_free(struct table *t)
{
	size_t i;

	if (!t)
		return;
	for (i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
}

void table_print_section(struct table *t, const char *title, FILE *out)
{
	if (!t)
		return;
	fprintf(out, "\n%s:\n", title);
	table_print(t, out);
	table_free(t);
}
