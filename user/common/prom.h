/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Writer of the Prometheus text exposition format (0.0.4), which the agent hands to each
 * module's metrics op (user/manager/manager.h): modules write their own families without
 * knowing the format's rules. Label values are escaped here, once: first as escape.h
 * says (hostile bytes to \xNN), then as the format requires (backslash, double quote).
 *
 *	bpftel_prom_family(w, "bpftel_gpu_kernel_launches_total", "counter", "Help.");
 *	bpftel_prom_sample_u64(w, "", labels, 2, launches);
 *
 * A family's samples must follow its bpftel_prom_family() call, all together.
 */
#ifndef BPFTEL_PROM_H
#define BPFTEL_PROM_H

#include <stddef.h>
#include <stdio.h>
#include <linux/types.h>

struct bpftel_prom;

struct bpftel_prom_label {
	const char *name; /* ours: [a-zA-Z_][a-zA-Z0-9_]* */
	const char *value; /* anything; NULL reads as "" */
};

/* A writer onto out (an open_memstream, a file); free it before closing out. */
struct bpftel_prom *bpftel_prom_new(FILE *out);
void bpftel_prom_free(struct bpftel_prom *w);

/* # HELP and # TYPE (counter, gauge, histogram) of the family that samples go to. */
void bpftel_prom_family(struct bpftel_prom *w, const char *name, const char *type,
			const char *help);
/* name{labels} value, name being the family's name followed by suffix ("", "_sum"). */
void bpftel_prom_sample(struct bpftel_prom *w, const char *suffix,
			const struct bpftel_prom_label *labels, size_t n, double value);
void bpftel_prom_sample_u64(struct bpftel_prom *w, const char *suffix,
			    const struct bpftel_prom_label *labels, size_t n, __u64 value);
/* A family of one unlabelled sample: its # HELP, # TYPE and value. */
void bpftel_prom_scalar(struct bpftel_prom *w, const char *name, const char *type,
			const char *help, __u64 value);
/* A family of n samples, each labelled label="keys[i]", of value values[i]. */
void bpftel_prom_keyed(struct bpftel_prom *w, const char *name, const char *type,
		       const char *help, const char *label, const char *const *keys,
		       const __u64 *values, size_t n);
/*
 * One histogram series: counts[i] observations in (le[i-1], le[i]] for i < nle, and
 * counts[nle] above le[nle - 1]; written cumulative, with +Inf, _sum and _count.
 * labels must have room for one more (the "le" label) at labels[n].
 */
void bpftel_prom_histogram(struct bpftel_prom *w, struct bpftel_prom_label *labels, size_t n,
			   const double *le, const __u64 *counts, size_t nle, double sum);

/* Samples written so far (for tests and budgets). */
size_t bpftel_prom_samples(const struct bpftel_prom *w);

#endif /* BPFTEL_PROM_H */
