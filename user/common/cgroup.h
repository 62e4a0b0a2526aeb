/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A process's cgroup and, where its cgroup path names one, its container: from
 * /proc/<pid>/cgroup, cgroup v2 ("0::/path") or v1 ("N:controllers:/path"). The
 * container id is the 64-hex id the runtimes put in their cgroup names:
 *
 *   docker      .../docker-<id>.scope (systemd driver), .../docker/<id> (cgroupfs)
 *   containerd  .../cri-containerd-<id>.scope, .../kubepods*.../<id> (cgroupfs)
 *   cri-o       .../crio-<id>.scope (not crio-conmon-<id>: that is its monitor)
 *   podman      .../libpod-<id>.scope, .../libpod/<id>
 *
 * The path comes from the kernel, but a process with a delegated cgroup chooses its
 * names: it is escaped on output like any string from another process.
 */
#ifndef BPFTEL_CGROUP_H
#define BPFTEL_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

struct bpftel_cgroup_info {
	/* As /proc/<pid>/cgroup shows it ("" if none); one longer (nested containers' paths
	 * run past 300 bytes, a delegated user's as long as it likes) is cut to end in
	 * "..." (path_cut). The id and container are taken from the whole path. */
	char path[512];
	bool path_cut;
	char controllers[64]; /* its v1 hierarchy ("pids", "name=systemd"); "" for v2 */
	char runtime[16];     /* "docker", "containerd", "cri-o", "podman", or "" */
	char container_id[65]; /* 64 lower-case hex digits, or "" */
	/* Who could have named the container: the owner of the directory that holds the
	 * container's cgroup. Root's for a runtime run as root; a user's for a rootless
	 * container, or for a name that user made up in a cgroup delegated to it
	 * (user@1000.service/.../docker-<a root container's id>.scope): the id alone
	 * does not tell them apart. Set by bpftel_cgroup_of only (0, false otherwise, and
	 * where the directory could not be read). */
	__u32 container_owner_uid;
	bool container_user_owned; /* container_owner_uid is not root */
	__u64 cgroup_id;       /* the inode of its directory under /sys/fs/cgroup, or 0 */
};

/* Does the cgroup path p (len bytes) hold a ".." component? (A process outside the
 * reader's cgroup namespace shows one.) */
bool bpftel_cgroup_path_climbs(const char *p, size_t len);

/*
 * Parse the text of a /proc/<pid>/cgroup (len bytes): the line whose path names a
 * container, else the v2 line if its path is not "/", else the first v1 line whose
 * path is not "/". 0, or -ENOENT when no line has a path (out holds "/" then).
 */
int bpftel_cgroup_parse(const char *text, size_t len, struct bpftel_cgroup_info *out);

/* The same for a live process, with the cgroup's id (the inode of its directory under
 * /sys/fs/cgroup) and its container's owner. 0 or -errno (-ESRCH: gone). Reads at
 * most 16 KiB. */
int bpftel_cgroup_of(__u32 pid, struct bpftel_cgroup_info *out);

/* The container as a label value: its id, "<id>@uid<N>" for one a user owns (so that
 * no user's processes add to the series of a root container whose id it copied), ""
 * for none. buf of BPFTEL_CONTAINER_KEY_MAX bytes. */
#define BPFTEL_CONTAINER_KEY_MAX (64 + sizeof("@uid4294967295"))
const char *bpftel_cgroup_container_key(const struct bpftel_cgroup_info *c, char *buf,
					size_t size);

#endif /* BPFTEL_CGROUP_H */
