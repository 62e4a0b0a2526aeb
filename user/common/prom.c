// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "prom.h"

struct bpftel_prom {
	FILE *out;
	char family[128];
	size_t samples;
	char *buf; /* escaped label value, grown as needed */
	size_t cap;
};

struct bpftel_prom *bpftel_prom_new(FILE *out)
{
	struct bpftel_prom *w = calloc(1, sizeof(*w));

	if (w)
		w->out = out;
	return w;
}

void bpftel_prom_free(struct bpftel_prom *w)
{
	if (!w)
		return;
	free(w->buf);
	free(w);
}

void bpftel_prom_family(struct bpftel_prom *w, const char *name, const char *type,
			const char *help)
{
	snprintf(w->family, sizeof(w->family), "%s", name);
	fprintf(w->out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void put_value(struct bpftel_prom *w, const char *v)
{
	size_t len = strlen(v), need = bpftel_escape(NULL, 0, v, len, BPFTEL_ESC_BACKSLASH);
	const char *p;
	char *grown;

	if (need + 1 > w->cap) {
		grown = realloc(w->buf, need + 1);
		if (!grown) {
			fputs("(unrepresentable)", w->out);
			return;
		}
		w->buf = grown;
		w->cap = need + 1;
	}
	bpftel_escape(w->buf, w->cap, v, len, BPFTEL_ESC_BACKSLASH);
	/* The exposition format's own escapes: \\ and \" (newlines are \x0A by now). */
	for (p = w->buf; *p; p++) {
		if (*p == '\\' || *p == '"')
			fputc('\\', w->out);
		fputc(*p, w->out);
	}
}

static void put_series(struct bpftel_prom *w, const char *suffix,
		       const struct bpftel_prom_label *labels, size_t n)
{
	size_t i;

	fputs(w->family, w->out);
	fputs(suffix ? suffix : "", w->out);
	if (n) {
		fputc('{', w->out);
		for (i = 0; i < n; i++) {
			fprintf(w->out, "%s%s=\"", i ? "," : "", labels[i].name);
			put_value(w, labels[i].value ? labels[i].value : "");
			fputc('"', w->out);
		}
		fputc('}', w->out);
	}
	w->samples++;
}

void bpftel_prom_sample(struct bpftel_prom *w, const char *suffix,
			const struct bpftel_prom_label *labels, size_t n, double value)
{
	put_series(w, suffix, labels, n);
	fprintf(w->out, " %.10g\n", value);
}

void bpftel_prom_sample_u64(struct bpftel_prom *w, const char *suffix,
			    const struct bpftel_prom_label *labels, size_t n, __u64 value)
{
	put_series(w, suffix, labels, n);
	fprintf(w->out, " %llu\n", (unsigned long long)value);
}

void bpftel_prom_scalar(struct bpftel_prom *w, const char *name, const char *type,
			const char *help, __u64 value)
{
	bpftel_prom_family(w, name, type, help);
	bpftel_prom_sample_u64(w, "", NULL, 0, value);
}

void bpftel_prom_keyed(struct bpftel_prom *w, const char *name, const char *type,
		       const char *help, const char *label, const char *const *keys,
		       const __u64 *values, size_t n)
{
	struct bpftel_prom_label l;
	size_t i;

	bpftel_prom_family(w, name, type, help);
	for (i = 0; i < n; i++) {
		l = (struct bpftel_prom_label){label, keys[i]};
		bpftel_prom_sample_u64(w, "", &l, 1, values[i]);
	}
}

void bpftel_prom_histogram(struct bpftel_prom *w, struct bpftel_prom_label *labels, size_t n,
			   const double *le, const __u64 *counts, size_t nle, double sum)
{
	__u64 cum = 0;
	char bound[32];
	size_t i;

	labels[n].name = "le";
	labels[n].value = bound;
	for (i = 0; i <= nle; i++) {
		cum += counts[i];
		if (i < nle)
			snprintf(bound, sizeof(bound), "%g", le[i]);
		else
			snprintf(bound, sizeof(bound), "+Inf");
		bpftel_prom_sample_u64(w, "_bucket", labels, n + 1, cum);
	}
	bpftel_prom_sample(w, "_sum", labels, n, sum);
	bpftel_prom_sample_u64(w, "_count", labels, n, cum);
}

size_t bpftel_prom_samples(const struct bpftel_prom *w)
{
	return w->samples;
}
