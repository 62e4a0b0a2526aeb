/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Library-path matching for the shared-libraries watcher, shared by the real
 * tracepoint programs and the BPF_PROG_TEST_RUN harness.
 *
 *   int shlib_match_event(struct shlib_event *ev, __u32 len, struct shlib_config *cfg)
 *
 * ev->path holds a string of len bytes. Returns the index of the stem of cfg that the
 * basename names, or -1. A basename matches when it is a stem ("libssl") + ".so",
 * optionally followed by "." and a version of digits and single dots that starts and
 * ends with a digit ("libssl.so.3", "libcudart.so.12.1.105"). Stems come from the
 * config map, which userspace rewrites when subscriptions change.
 *
 * The path is parsed backwards from its end, so the work is bounded by the longest
 * library name (~45 bytes), not by the path, and the verifier sees one short loop
 * instead of a scan for the last '/' (which made loading take seconds). Most opens
 * are rejected by the first test: a library name ends in 'o' or a digit.
 */
#ifndef BPFTEL_SHLIB_MATCH_H
#define BPFTEL_SHLIB_MATCH_H

#include "../shared_libraries.h"

#define SHLIB_IDX(i) ((i) & (SHLIB_PATH_MAX - 1))

/* path[end - n .. end) == s. n and s are constants after inlining. */
static __always_inline bool shlib_ends_with(const char *path, __u32 end, const char *s, __u32 n)
{
	__u32 i;

	if (end < n)
		return false;
	for (i = 0; i < n; i++) {
		if (path[SHLIB_IDX(end - n + i)] != s[i])
			return false;
	}
	return true;
}

/*
 * Strip a version suffix ".1.1" off path[0..end). Returns the new end (just after
 * ".so"), end itself when the name ends in 'o', or 0 when the suffix is malformed.
 */
static __always_inline __u32 shlib_strip_version(const char *path, __u32 end)
{
	bool after_digit = false;
	__u32 i;
	char c;

	if (path[SHLIB_IDX(end - 1)] == 'o')
		return end;
	/* Walk back over [0-9.]: the run must be "." then digits and single dots. */
	for (i = 1; i <= SHLIB_VERSION_MAX + 1; i++) {
		if (i >= end)
			return 0;
		c = path[SHLIB_IDX(end - i)];
		if (c >= '0' && c <= '9') {
			after_digit = true;
		} else if (c == '.') {
			if (!after_digit)
				return 0; /* ".." or a dot at the very end */
			after_digit = false;
		} else {
			/* First byte before the run: it must have started with a dot. */
			if (i < 3 || path[SHLIB_IDX(end - i + 1)] != '.')
				return 0;
			return end - i + 1;
		}
	}
	return 0;
}

/* path[end - n .. end) == stem->name, with a '/' or the start of the path before it. */
static __always_inline bool shlib_stem_at(const char *path, __u32 end,
					  const struct shlib_stem *stem)
{
	__u32 n = stem->len, i;

	if (n == 0 || n > SHLIB_STEM_MAX || end < n)
		return false;
	for (i = 0; i < SHLIB_STEM_MAX; i++) {
		if (i >= n)
			break;
		if (path[SHLIB_IDX(end - n + i)] != stem->name[i])
			return false;
	}
	return end == n || path[SHLIB_IDX(end - n - 1)] == '/';
}

/*
 * A global (non-inline) function: the verifier checks it once, for any len, instead of
 * once per state of every caller. Keeps the programs' load time in milliseconds.
 * Returns the index of the matching stem in cfg (enabled libset or not), or -1.
 */
__noinline int shlib_match_event(struct shlib_event *ev, __u32 len, struct shlib_config *cfg)
{
	const char *path;
	__u32 end, i;
	char c;

	if (!ev || !cfg || len == 0 || len >= SHLIB_PATH_MAX)
		return -1;
	path = ev->path;
	c = path[SHLIB_IDX(len - 1)];
	/* One letter after the version's last digit: the real file of a RHEL-family
	 * OpenSSL 1.x ("libssl.so.1.1.1k", "libssl.so.1.0.2k"), which its libssl.so.1.1
	 * and libssl.so.10 link to. */
	if (c >= 'a' && c <= 'z' && len > 1) {
		char prev = path[SHLIB_IDX(len - 2)];

		if (prev >= '0' && prev <= '9') { /* "1.1.1o" too: ".so" has an 's' there */
			len--;
			c = prev;
		} else if (c != 'o') {
			return -1;
		}
	}
	if (c != 'o' && (c < '0' || c > '9'))
		return -1;
	/*
	 * The mask costs nothing at run time (end < SHLIB_PATH_MAX already) but gives every
	 * exit of the version loop the same range, so the verifier prunes what follows
	 * after one walk instead of one per exit.
	 */
	end = SHLIB_IDX(shlib_strip_version(path, len));
	if (!end || !shlib_ends_with(path, end, ".so", 3))
		return -1;
	end -= 3;
	for (i = 0; i < SHLIB_MAX_STEMS; i++) {
		if (i >= cfg->nstems)
			break;
		if (shlib_stem_at(path, end, &cfg->stems[i]))
			return (int)i;
	}
	return -1;
}

#endif /* BPFTEL_SHLIB_MATCH_H */
