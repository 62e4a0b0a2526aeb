/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Escaping of strings that come from other processes (process names, paths, HTTP
 * fields) before they reach a terminal, a log line, JSON or a Prometheus label.
 *
 * One rule everywhere: a control character (below 0x20, 0x7f, and U+0080..U+009F, the
 * C1 controls some terminals obey), a character that reorders or hides text or shows
 * as nothing (Unicode's default-ignorable set: bidirectional overrides and isolates,
 * zero-width characters, the soft hyphen, Hangul fillers, variation selectors, tags;
 * and U+2028/9, U+FFF9..B), and every
 * byte that is not part of valid UTF-8, becomes the four characters \xNN (upper-case
 * hex), byte by byte; with BPFTEL_ESC_BACKSLASH a
 * backslash becomes \\, so that every backslash in the result starts one of these
 * escapes. Valid UTF-8 text passes unchanged. The same byte reads the same in
 * `bpftel ... --json`, in a table and in /metrics (where the exposition format adds
 * its own escaping on top).
 */
#ifndef BPFTEL_ESCAPE_H
#define BPFTEL_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>

#define BPFTEL_ESC_BACKSLASH 1U

/*
 * Escape len bytes of in (NULs included: they are control characters) into out, at
 * most size bytes with the terminating NUL. Returns the length the whole result
 * needs, without the NUL (as snprintf): the result was cut if it is >= size, and then
 * ends before the first character or escape that did not fit whole.
 */
size_t bpftel_escape(char *out, size_t size, const char *in, size_t len, unsigned int flags);
/* The escaped copy of the NUL-terminated s, malloc'd; NULL when out of memory. */
char *bpftel_escape_dup(const char *s, unsigned int flags);
/* Does s need escaping (would bpftel_escape change it)? */
bool bpftel_escape_needed(const char *s, unsigned int flags);
/* The terminal columns escaped text s takes: CJK and fullwidth characters two,
 * combining marks none, others one (for aligning tables). */
size_t bpftel_columns(const char *s);
/* A malloc'd copy of escaped text s in at most max columns: whole when it fits, else
 * its first and last characters with "..." between them (the start of an HTTP path,
 * the file name of a library's), no escape split; NULL when out of memory. */
char *bpftel_elide_dup(const char *s, size_t max);
/* "label: msg" into out (size bytes), one line (control characters become '?'). Where
 * it does not fit, the label's start gives way ("...tail: msg"), never the message: a
 * refusal's reason outlives a long path (the file name, at its end, stays too). An
 * empty label: msg alone. */
void bpftel_labeled(char *out, size_t size, const char *label, const char *msg);

#endif /* BPFTEL_ESCAPE_H */
