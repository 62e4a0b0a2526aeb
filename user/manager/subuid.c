// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Ranges of uids granted to users, from /etc/subuid (subuid.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bpf/fair_share_defs.h"
#include "subuid.h"

#define NAME_MAX_LEN 64 /* a user's name longer than this is no user of ours */

/* A range as read, its owner named until passwd says who. */
struct pending {
	char name[NAME_MAX_LEN + 1];
	bool named; /* owner is known */
	size_t line; /* which: of two that begin at one uid, the earlier is kept */
	struct fair_share_range r;
};

/* The next line of text [*at, end): its start and length, *at past its newline. */
static bool next_line(const char *text, size_t len, size_t *at, const char **line,
		      size_t *n)
{
	const char *nl;

	if (*at >= len)
		return false;
	*line = text + *at;
	nl = memchr(*line, '\n', len - *at);
	*n = nl ? (size_t)(nl - *line) : len - *at;
	*at += *n + (nl ? 1 : 0);
	return true;
}

/* A decimal in [s, s + n), at most max: false when it is none. */
static bool parse_u32(const char *s, size_t n, __u64 max, __u32 *out)
{
	__u64 v = 0;
	size_t i;

	if (!n || n > 10)
		return false;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (__u64)(s[i] - '0');
	}
	if (v > max)
		return false;
	*out = (__u32)v;
	return true;
}

/* Field i (from 0) of a ':'-separated line: its start and length; false if none. */
static bool field(const char *line, size_t n, int i, const char **f, size_t *fn)
{
	const char *end = line + n, *p = line, *c;

	for (; i > 0; i--) {
		c = memchr(p, ':', (size_t)(end - p));
		if (!c)
			return false;
		p = c + 1;
	}
	c = memchr(p, ':', (size_t)(end - p));
	*f = p;
	*fn = c ? (size_t)(c - p) : (size_t)(end - p);
	return true;
}

/* One subuid line into *p: false when it is malformed. */
static bool parse_range(const char *line, size_t n, struct pending *p)
{
	const char *f;
	size_t fn;
	__u32 count;

	if (!field(line, n, 0, &f, &fn) || !fn || fn > NAME_MAX_LEN)
		return false;
	memcpy(p->name, f, fn);
	p->name[fn] = '\0';
	/* A uid for a name: that uid (never -1). */
	p->named = parse_u32(f, fn, 0xfffffffeu, &p->r.owner);
	/* Uid 0 is no one's to grant: the host's root is never counted (lib/fair_share.h). */
	if (!field(line, n, 1, &f, &fn) || !parse_u32(f, fn, 0xfffffffeu, &p->r.first) ||
	    !p->r.first || !field(line, n, 2, &f, &fn) ||
	    !parse_u32(f, fn, 0xffffffffu, &count) || !count ||
	    (__u64)p->r.first + count - 1 > 0xfffffffeu)
		return false;
	p->r.count = count;
	return true;
}

/* Name the owners of pending[0, n) from passwd's lines (name:password:uid:...). */
static void name_owners(const char *passwd, size_t plen, struct pending *pending, size_t n)
{
	const char *line, *name, *f;
	size_t at = 0, ln, nn, fn, i;
	__u32 uid;

	while (next_line(passwd, plen, &at, &line, &ln)) {
		if (!field(line, ln, 0, &name, &nn) || !nn || nn > NAME_MAX_LEN ||
		    !field(line, ln, 2, &f, &fn) || !parse_u32(f, fn, 0xfffffffeu, &uid))
			continue;
		for (i = 0; i < n; i++) { /* a user may have several ranges */
			if (pending[i].named || strlen(pending[i].name) != nn ||
			    memcmp(pending[i].name, name, nn))
				continue;
			pending[i].r.owner = uid;
			pending[i].named = true;
		}
	}
}

static int by_first(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;

	if (x->r.first != y->r.first)
		return x->r.first < y->r.first ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

int subuid_parse(const char *subuid, size_t len, const char *passwd, size_t plen,
		     struct fair_share_ranges *out)
{
	/* Room for twice the table: overlaps, left out once sorted, may take some. */
	struct pending *pending = calloc(2 * FAIR_SHARE_RANGES, sizeof(*pending));
	size_t at = 0, ln, n = 0, i;
	const char *line;
	int skipped = 0;

	memset(out, 0, sizeof(*out));
	if (!pending)
		return -ENOMEM;
	while (next_line(subuid, len, &at, &line, &ln)) {
		if (!ln || line[0] == '#')
			continue;
		if (n == 2 * FAIR_SHARE_RANGES || !parse_range(line, ln, &pending[n])) {
			skipped++;
			continue;
		}
		pending[n].line = n;
		n++;
	}
	name_owners(passwd, plen, pending, n);
	qsort(pending, n, sizeof(*pending), by_first);
	for (i = 0; i < n; i++) {
		struct fair_share_range *last = out->n ? &out->r[out->n - 1] : NULL;

		if (out->n == FAIR_SHARE_RANGES ||
		    (last && pending[i].r.first - last->first < last->count)) {
			skipped++; /* full, or it overlaps the one before */
			continue;
		}
		/* Root's ranges, and an unknown user's: an owner per block of them. */
		if (!pending[i].named)
			pending[i].r.owner = 0;
		out->r[out->n++] = pending[i].r;
	}
	free(pending);
	return skipped;
}

const char *subuid_path(void)
{
	const char *p = getenv("BPFTEL_SUBUID");

	return p && *p ? p : SUBUID_PATH;
}

static void stamp_of(const char *path, struct subuid_stamp *s)
{
	struct stat st;

	memset(s, 0, sizeof(*s));
	if (stat(path, &st))
		return;
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	s->size = (__u64)st.st_size;
	s->mtime_ns = (__u64)st.st_mtim.tv_sec * 1000000000ull + (__u64)st.st_mtim.tv_nsec;
}

bool subuid_changed(const struct subuid_files *seen)
{
	struct subuid_files now;

	stamp_of(subuid_path(), &now.subuid);
	stamp_of(SUBUID_PASSWD_PATH, &now.passwd);
	return memcmp(&now, seen, sizeof(now)) != 0;
}

/* Up to SUBUID_FILE_MAX bytes of path into a new buffer (*len); -ENOENT if none.
 * Root's files in /etc: a regular file, opened without following a FIFO's wait. */
static int slurp(const char *path, char **buf, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), err = 0;
	struct stat st;
	size_t max;
	ssize_t r;

	*buf = NULL;
	*len = 0;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		err = -EINVAL;
		goto out;
	}
	/* Its size now, and a little room should it grow meanwhile: up to the cap. */
	max = (size_t)st.st_size + 4096 < SUBUID_FILE_MAX ? (size_t)st.st_size + 4096
							       : SUBUID_FILE_MAX;
	*buf = malloc(max);
	if (!*buf) {
		err = -ENOMEM;
		goto out;
	}
	while (*len < max) {
		r = read(fd, *buf + *len, max - *len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			break;
		}
		if (!r)
			break;
		*len += (size_t)r;
	}
	/* Cut at the cap: its last line, cut too, is not read (a uid of 1000 is not 10). */
	if (!err && *len == SUBUID_FILE_MAX)
		while (*len && (*buf)[*len - 1] != '\n')
			(*len)--;
out:
	close(fd);
	if (err) {
		free(*buf);
		*buf = NULL;
		*len = 0;
	}
	return err;
}

int subuid_read(struct fair_share_ranges *out, unsigned int *skipped,
		    struct subuid_files *seen)
{
	char *subuid = NULL, *passwd = NULL;
	size_t len, plen;
	int err;

	memset(out, 0, sizeof(*out));
	*skipped = 0;
	stamp_of(subuid_path(), &seen->subuid);
	stamp_of(SUBUID_PASSWD_PATH, &seen->passwd);
	err = slurp(subuid_path(), &subuid, &len);
	if (err == -ENOENT)
		return 0; /* no range granted */
	if (err)
		return err;
	/* No names (no passwd, or none readable): numeric ones name their users, and the
	 * others' ranges are an owner per block, as an unknown user's. */
	if (slurp(SUBUID_PASSWD_PATH, &passwd, &plen))
		plen = 0;
	err = subuid_parse(subuid, len, passwd ? passwd : "", plen, out);
	free(subuid);
	free(passwd);
	if (err < 0)
		return err;
	*skipped = (unsigned int)err;
	return 0;
}
