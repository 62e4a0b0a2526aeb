/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Reading JSON answers (agent and CLI) and formatting values for tables. */
#ifndef BPFTEL_JSONFMT_H
#define BPFTEL_JSONFMT_H

#include <stddef.h>
#include <jansson.h>

/* obj[key] as a string ("-" when absent), an integer (0), a number (0.0). */
const char *jstr(json_t *obj, const char *key);
long long jint(json_t *obj, const char *key);
double jnum(json_t *obj, const char *key);

/* 12.8ms, 42.0s, 3m07s, 2h05m, 1d03h */
void fmt_duration(char *buf, size_t size, double secs);
/* 512 B, 4.0 KiB, 7.0 MiB, 1.5 GiB */
void fmt_bytes(char *buf, size_t size, double bytes);

#endif /* BPFTEL_JSONFMT_H */
