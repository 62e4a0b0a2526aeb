// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* A process's cgroup and container (cgroup.h). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"

#define MAX_TEXT (16 * 1024) /* a process in a hundred hierarchies would need less */

static bool hex64(const char *s, size_t n)
{
	size_t i;

	if (n != 64)
		return false;
	for (i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]) && (s[i] < 'a' || s[i] > 'f'))
			return false;
	}
	return true;
}

/* The runtime whose naming a cgroup path's component (name, n bytes) follows, with
 * the id in *id; NULL if none. parent is the component before it ("" for none). */
static const char *runtime_of(const char *name, size_t n, const char *parent, size_t pn,
			      const char **id)
{
	static const struct {
		const char *prefix, *runtime;
	} scopes[] = {
		{"docker-", "docker"},	       {"cri-containerd-", "containerd"},
		{"crio-", "cri-o"},	       {"libpod-", "podman"},
	};
	size_t i, pl;

	if (n > 6 && !memcmp(name + n - 6, ".scope", 6)) {
		for (i = 0; i < sizeof(scopes) / sizeof(scopes[0]); i++) {
			pl = strlen(scopes[i].prefix);
			if (n - 6 > pl && !strncmp(name, scopes[i].prefix, pl) &&
			    hex64(name + pl, n - 6 - pl)) {
				*id = name + pl;
				return scopes[i].runtime;
			}
		}
		return NULL;
	}
	if (!hex64(name, n))
		return NULL;
	*id = name;
	if (pn == 6 && !memcmp(parent, "docker", 6))
		return "docker";
	if (pn == 6 && !memcmp(parent, "libpod", 6))
		return "podman";
	return "containerd"; /* a bare id under kubepods or containerd's own tree */
}

/* Find a container in path (n bytes): fills out, sets *at to the offset of the
 * component that names it and returns true. */
static bool find_container(const char *path, size_t n, struct bpftel_cgroup_info *out,
			   size_t *at)
{
	const char *p = path, *end = path + n, *seg, *parent = "", *id, *rt;
	size_t sl, pl = 0;

	while (p < end) {
		while (p < end && *p == '/')
			p++;
		seg = p;
		while (p < end && *p != '/')
			p++;
		sl = p - seg;
		if (!sl)
			break;
		rt = runtime_of(seg, sl, parent, pl, &id);
		if (rt) {
			snprintf(out->runtime, sizeof(out->runtime), "%s", rt);
			memcpy(out->container_id, id, 64);
			out->container_id[64] = '\0';
			*at = seg - path;
			return true;
		}
		parent = seg;
		pl = sl;
	}
	return false;
}

/* The path of the line taken (within the text parsed), whole, and where in it the
 * component naming a container starts (0: none). */
struct whole_path {
	const char *p;
	size_t len;
	size_t container_at;
};

static void take(struct bpftel_cgroup_info *out, const char *ctl, size_t cl, const char *path,
		 size_t len, struct whole_path *whole)
{
	snprintf(out->controllers, sizeof(out->controllers), "%.*s", (int)cl, ctl);
	out->path_cut = len >= sizeof(out->path);
	if (out->path_cut)
		snprintf(out->path, sizeof(out->path), "%.*s...", (int)sizeof(out->path) - 4, path);
	else
		snprintf(out->path, sizeof(out->path), "%.*s", (int)len, path);
	*whole = (struct whole_path){path, len, 0};
}

static int parse(const char *text, size_t len, struct bpftel_cgroup_info *out,
		 struct whole_path *whole)
{
	const char *line = text, *end = text + len, *nl, *c1, *c2;
	bool v2 = false, any = false;
	size_t at;

	memset(out, 0, sizeof(*out));
	snprintf(out->path, sizeof(out->path), "/");
	for (; line < end; line = nl + 1) {
		nl = memchr(line, '\n', end - line);
		if (!nl)
			nl = end;
		/* "hierarchy-id:controllers:path" */
		c1 = memchr(line, ':', nl - line);
		c2 = c1 ? memchr(c1 + 1, ':', nl - c1 - 1) : NULL;
		if (!c2 || nl - c2 - 1 <= 0)
			continue;
		if (find_container(c2 + 1, nl - c2 - 1, out, &at)) {
			take(out, c1 + 1, c2 - c1 - 1, c2 + 1, nl - c2 - 1, whole);
			whole->container_at = at;
			return 0;
		}
		if (nl - c2 - 1 == 1 && c2[1] == '/')
			continue; /* the root: says nothing */
		if (c2 == c1 + 1 && !v2) { /* "0::/path", the unified hierarchy */
			take(out, "", 0, c2 + 1, nl - c2 - 1, whole);
			v2 = any = true;
		} else if (!any) {
			take(out, c1 + 1, c2 - c1 - 1, c2 + 1, nl - c2 - 1, whole);
			any = true;
		}
	}
	return any ? 0 : -ENOENT;
}

int bpftel_cgroup_parse(const char *text, size_t len, struct bpftel_cgroup_info *out)
{
	struct whole_path whole;

	return parse(text, len, out, &whole);
}

bool bpftel_cgroup_path_climbs(const char *p, size_t len)
{
	size_t i;

	for (i = 0; i + 2 <= len; i++) {
		if (p[i] == '.' && p[i + 1] == '.' && (i == 0 || p[i - 1] == '/') &&
		    (i + 2 == len || p[i + 2] == '/'))
			return true;
	}
	return false;
}

const char *bpftel_cgroup_container_key(const struct bpftel_cgroup_info *c, char *buf,
					size_t size)
{
	if (!c->container_user_owned)
		snprintf(buf, size, "%s", c->container_id);
	else
		snprintf(buf, size, "%s@uid%u", c->container_id, c->container_owner_uid);
	return buf;
}

/* stat the directory of the cgroup path p (len bytes) of the hierarchy ctl ("" for
 * v2; "name=" dropped): v1 hierarchies are mounted under their controllers' names, v2
 * at /sys/fs/cgroup itself, or /sys/fs/cgroup/unified beside v1 ones. 0 or -1. */
static int stat_cgroup_dir(const char *ctl, const char *p, size_t len, struct stat *st)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "/sys/fs/cgroup/%s%.*s", *ctl ? ctl : "unified", (int)len,
		 p);
	if (!stat(path, st) && S_ISDIR(st->st_mode))
		return 0;
	if (*ctl)
		return -1;
	snprintf(path, sizeof(path), "/sys/fs/cgroup%.*s", (int)len, p);
	return !stat(path, st) && S_ISDIR(st->st_mode) ? 0 : -1;
}

int bpftel_cgroup_of(__u32 pid, struct bpftel_cgroup_info *out)
{
	char path[64], text[MAX_TEXT];
	struct whole_path whole = {"/", 1, 0};
	const char *ctl;
	struct stat st;
	ssize_t n;
	int fd, err;

	snprintf(path, sizeof(path), "/proc/%u/cgroup", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	n = read(fd, text, sizeof(text));
	close(fd);
	if (n < 0)
		return -errno;
	err = parse(text, (size_t)n, out, &whole);
	if (err)
		return err == -ENOENT ? 0 : err;
	if (whole.len > PATH_MAX)
		return 0; /* no directory has such a path: no id */
	/* Seen from a cgroup namespace of the agent's own (an unprivileged pod's), another
	 * process's path climbs out of it ("/../../kubepods.slice/..."): under
	 * /sys/fs/cgroup that would lead out of the cgroup tree, to some other directory's
	 * inode. No id. */
	if (bpftel_cgroup_path_climbs(whole.p, whole.len))
		return 0;
	/* The whole path: the one shown may be cut, and a cut at a '/' names the parent. */
	ctl = !strncmp(out->controllers, "name=", 5) ? out->controllers + 5 : out->controllers;
	if (!stat_cgroup_dir(ctl, whole.p, whole.len, &st))
		out->cgroup_id = st.st_ino;
	/* Whoever may write the directory above the container's made its name: root for
	 * a runtime run as root (runc hands a user-namespaced container its own cgroup,
	 * not the one above it), a user in a subtree systemd delegated to it. */
	if (whole.container_at && !stat_cgroup_dir(ctl, whole.p, whole.container_at, &st)) {
		out->container_owner_uid = st.st_uid;
		out->container_user_owned = st.st_uid != 0;
	}
	return 0;
}
