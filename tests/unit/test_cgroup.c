// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* A process's cgroup and container, from real-shaped /proc/<pid>/cgroup texts. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "user/common/cgroup.h"

#define ID  "4f2b8a6c1d3e5f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8"
#define POD "pod1c7e3f1a_2b4d_4e6f_8a9b_0c1d2e3f4a5b"

static const struct {
	const char *name, *text;
	int ret;
	const char *runtime, *id, *path, *controllers;
} cases[] = {
	{"docker, systemd driver (v1)",
	 "12:pids:/system.slice/docker-" ID ".scope\n11:memory:/system.slice/docker-" ID
	 ".scope\n0::/\n",
	 0, "docker", ID, "/system.slice/docker-" ID ".scope", "pids"},
	{"docker, cgroupfs driver (v1)", "4:memory:/docker/" ID "\n3:cpuset:/docker/" ID "\n", 0,
	 "docker", ID, "/docker/" ID, "memory"},
	{"containerd under kubelet, systemd driver (v2)",
	 "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-" POD
	 ".slice/cri-containerd-" ID ".scope\n",
	 0, "containerd", ID, NULL, ""},
	{"containerd under kubelet, cgroupfs driver (v2)", "0::/kubepods/burstable/" POD "/" ID "\n",
	 0, "containerd", ID, "/kubepods/burstable/" POD "/" ID, ""},
	{"cri-o (v2)", "0::/kubepods.slice/kubepods-besteffort.slice/crio-" ID ".scope\n", 0,
	 "cri-o", ID, NULL, ""},
	{"cri-o's conmon is not the container", "0::/system.slice/crio-conmon-" ID ".scope\n", 0,
	 "", "", "/system.slice/crio-conmon-" ID ".scope", ""},
	{"podman, rootless (v2)",
	 "0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" ID ".scope\n", 0,
	 "podman", ID, NULL, ""},
	{"podman, cgroupfs (v1)", "9:pids:/libpod/" ID "\n", 0, "podman", ID, "/libpod/" ID,
	 "pids"},
	{"a login session (v2)", "0::/user.slice/user-1000.slice/session-2.scope\n", 0, "", "",
	 "/user.slice/user-1000.slice/session-2.scope", ""},
	{"v2 path wins over v1 ones", "4:memory:/a\n0::/b/c\n", 0, "", "", "/b/c", ""},
	{"this VM: v1, memory managed from outside",
	 "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/fc8de167a82ffd33f000d924c9468e56\n"
	 "1:cpu:/\n0::/\n",
	 0, "", "", "/process_api/fc8de167a82ffd33f000d924c9468e56", "memory"},
	{"everything at the root", "1:cpu:/\n0::/\n", -ENOENT, "", "", "/", ""},
	{"garbage", "no colons here\n::\n", -ENOENT, "", "", "/", ""},
	{"63 hex digits is not an id", "0::/docker/4f2b8a6c1d3e5f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f\n",
	 0, "", "", NULL, ""},
	{"upper-case hex is not an id", "0::/docker/4F2B8A6C1D3E5F708192A3B4C5D6E7F8091A2B3C4D5E6F708192A3B4C5D6E7F8\n",
	 0, "", "", NULL, ""},
	{"no newline at the end", "0::/docker/" ID, 0, "docker", ID, "/docker/" ID, ""},
};

static void test_parse(void **state)
{
	struct bpftel_cgroup_info info;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		printf("case: %s\n", cases[i].name);
		assert_int_equal(bpftel_cgroup_parse(cases[i].text, strlen(cases[i].text), &info),
				 cases[i].ret);
		assert_string_equal(info.runtime, cases[i].runtime);
		assert_string_equal(info.container_id, cases[i].id);
		if (cases[i].path)
			assert_string_equal(info.path, cases[i].path);
		assert_string_equal(info.controllers, cases[i].controllers);
	}
}

/* A path longer than the info holds (a delegated user's names, or nested containers'):
 * cut to end in "...", said so; the container in it is found all the same. */
static void test_long_path(void **state)
{
	char text[1200], seg[201];
	struct bpftel_cgroup_info info;
	size_t n;

	(void)state;
	memset(seg, 'a', sizeof(seg) - 1);
	seg[sizeof(seg) - 1] = '\0';
	n = (size_t)snprintf(text, sizeof(text), "0::/%s/%s/%s/cri-containerd-%s.scope\n", seg,
			     seg, seg, ID);
	assert_int_equal(bpftel_cgroup_parse(text, n, &info), 0);
	assert_true(info.path_cut);
	assert_int_equal(strlen(info.path), sizeof(info.path) - 1);
	assert_string_equal(info.path + sizeof(info.path) - 4, "...");
	assert_memory_equal(info.path, text + 3, sizeof(info.path) - 4);
	assert_string_equal(info.runtime, "containerd");
	assert_string_equal(info.container_id, ID);
	assert_int_equal(bpftel_cgroup_parse("0::/short\n", 10, &info), 0);
	assert_false(info.path_cut);
}

/* A writable hierarchy's root (v2, else v1's pids), or NULL. */
static const char *writable_root(void)
{
	static const char *const roots[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/pids"};
	char procs[64];
	size_t r;

	for (r = 0; r < 2; r++) {
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", roots[r]);
		if (!access(procs, W_OK))
			return roots[r];
	}
	return NULL;
}

/* A child moved into dir: its cgroup info in *info. false where the host refused the
 * move (a v2 hierarchy's domain rules). */
static bool cgroup_of_child_in(const char *dir, struct bpftel_cgroup_info *info)
{
	char procs[1100], pidtxt[16];
	bool moved;
	pid_t child;
	int fd;

	child = fork();
	assert_true(child >= 0);
	if (!child) {
		pause();
		_exit(0);
	}
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
	fd = open(procs, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	snprintf(pidtxt, sizeof(pidtxt), "%d", (int)child);
	moved = write(fd, pidtxt, strlen(pidtxt)) == (ssize_t)strlen(pidtxt);
	close(fd);
	if (moved)
		assert_int_equal(bpftel_cgroup_of((__u32)child, info), 0);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	return moved;
}

/* A process in a real cgroup whose path is longer than the info holds: its id is the
 * inode of that directory, from the whole path (the cut one would name no directory,
 * or a parent where the cut falls on a '/'). Made in the v2 hierarchy, else v1's
 * pids; skipped where neither lets root make one (a container's cgroup namespace). */
static void test_long_path_id(void **state)
{
	static const char *const roots[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/pids"};
	char dir[1024], procs[1100], seg[181];
	struct bpftel_cgroup_info info;
	struct stat st;
	size_t r, depth = 0;
	bool moved;
	int i;

	(void)state;
	memset(seg, 'b', sizeof(seg) - 1);
	seg[sizeof(seg) - 1] = '\0';
	for (r = 0; r < 2; r++) {
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", roots[r]);
		if (access(procs, W_OK))
			continue;
		snprintf(dir, sizeof(dir), "%s/bpftel-test-%d", roots[r], (int)getpid());
		for (depth = 0; depth < 3; depth++) {
			if (mkdir(dir, 0755) && errno != EEXIST)
				break;
			strcat(dir, "/");
			strcat(dir, seg);
		}
		if (depth == 3 && !mkdir(dir, 0755))
			break;
		depth = 0;
	}
	if (!depth) {
		printf("no cgroup hierarchy lets this process make one: skipped\n");
		return;
	}
	assert_int_equal(stat(dir, &st), 0);
	/* A host's cgroup rules may refuse the move (a v2 hierarchy's domain rules, a
	 * delegation): said, not failed, as where no hierarchy is writable. */
	moved = cgroup_of_child_in(dir, &info);
	printf("cgroup of %zu bytes: %s\n", strlen(dir) - strlen(roots[r]), dir);
	if (!moved) {
		printf("this host refused a process in it: the id not checked\n");
	} else if (strcmp(info.controllers, r ? "pids" : "")) {
		/* v1: the first hierarchy whose path is not "/" is taken, another here. */
		printf("the %s line is taken on this host, not pids': the id not checked\n",
		       info.controllers);
	} else {
		assert_true(info.path_cut);
		assert_int_equal((long long)info.cgroup_id, (long long)st.st_ino);
	}
	for (i = 0; i <= 3; i++) { /* the child gone, its cgroups go, deepest first */
		assert_int_equal(rmdir(dir), 0);
		*strrchr(dir, '/') = '\0';
	}
}

/* A user given a cgroup subtree (systemd's Delegate=, user@N.service) names its
 * cgroups as it likes: docker-<a root container's id>.scope too. Its processes are
 * that id's with the user's uid, never the root container's own: the key tells them
 * apart. A container whose directory root made is root's. */
static void test_container_owner(void **state)
{
	char top[256], root_ct[400], deleg[400], user_ct[500], key[BPFTEL_CONTAINER_KEY_MAX];
	const char *root = writable_root();
	struct bpftel_cgroup_info info;

	(void)state;
	if (!root) {
		printf("no cgroup hierarchy lets this process make one: skipped\n");
		return;
	}
	snprintf(top, sizeof(top), "%s/bpftel-owner-%d", root, (int)getpid());
	snprintf(root_ct, sizeof(root_ct), "%s/docker-%s.scope", top, ID);
	snprintf(deleg, sizeof(deleg), "%s/user@1000.service", top);
	snprintf(user_ct, sizeof(user_ct), "%s/docker-%s.scope", deleg, ID);
	assert_int_equal(mkdir(top, 0755), 0);
	assert_int_equal(mkdir(root_ct, 0755), 0);
	assert_int_equal(mkdir(deleg, 0755), 0);
	assert_int_equal(chown(deleg, 1000, 1000), 0); /* what systemd's delegation does */
	assert_int_equal(mkdir(user_ct, 0755), 0);
	assert_int_equal(chown(user_ct, 1000, 1000), 0);

	if (cgroup_of_child_in(root_ct, &info)) {
		assert_string_equal(info.container_id, ID);
		assert_false(info.container_user_owned);
		assert_int_equal(info.container_owner_uid, 0);
		assert_string_equal(bpftel_cgroup_container_key(&info, key, sizeof(key)), ID);
	} else {
		printf("this host refused a process in %s: not checked\n", root_ct);
	}
	if (cgroup_of_child_in(user_ct, &info)) {
		assert_string_equal(info.container_id, ID);
		assert_string_equal(info.runtime, "docker");
		assert_true(info.container_user_owned);
		assert_int_equal(info.container_owner_uid, 1000);
		assert_string_equal(bpftel_cgroup_container_key(&info, key, sizeof(key)),
				    ID "@uid1000");
	} else {
		printf("this host refused a process in %s: not checked\n", user_ct);
	}
	/* Parsed text alone says nothing of owners. */
	assert_int_equal(bpftel_cgroup_parse("0::/docker/" ID "\n", 12 + 64, &info), 0);
	assert_false(info.container_user_owned);
	assert_int_equal(rmdir(user_ct), 0);
	assert_int_equal(rmdir(deleg), 0);
	assert_int_equal(rmdir(root_ct), 0);
	assert_int_equal(rmdir(top), 0);
}

/* Our own process: whatever this machine's cgroups are, the call works and the id is
 * the inode of a real directory when the path is not the root. */
/* A path seen from another cgroup namespace climbs out of it: no directory of ours. */
static void test_path_climbs(void **state)
{
	static const char *const climbs[] = {"/../../kubepods.slice/x", "/a/..", "..", "/a/../b"};
	static const char *const stays[] = {"/", "/a..b/c", "/..a/b", "/a/b..", "/kubepods.slice"};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(climbs) / sizeof(climbs[0]); i++)
		assert_true(bpftel_cgroup_path_climbs(climbs[i], strlen(climbs[i])));
	for (i = 0; i < sizeof(stays) / sizeof(stays[0]); i++)
		assert_false(bpftel_cgroup_path_climbs(stays[i], strlen(stays[i])));
	/* Only the len bytes given: "/a/.." cut before its "..". */
	assert_false(bpftel_cgroup_path_climbs("/a/..", 3));
}

static void test_self(void **state)
{
	struct bpftel_cgroup_info info;

	(void)state;
	assert_int_equal(bpftel_cgroup_of((__u32)getpid(), &info), 0);
	assert_true(info.path[0] == '/');
	assert_int_equal(bpftel_cgroup_of(0x7ffffff0u, &info), -ESRCH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_path_climbs),
		cmocka_unit_test(test_self),
		cmocka_unit_test(test_long_path),
		cmocka_unit_test(test_long_path_id),
		cmocka_unit_test(test_container_owner),
	};

	return cmocka_run_group_tests_name("cgroup", tests, NULL, NULL);
}
