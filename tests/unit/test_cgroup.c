// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* A process's cgroup and container, from real-shaped /proc/<pid>/cgroup texts. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
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

/* Our own process: whatever this machine's cgroups are, the call works and the id is
 * the inode of a real directory when the path is not the root. */
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
		cmocka_unit_test(test_self),
	};

	return cmocka_run_group_tests_name("cgroup", tests, NULL, NULL);
}
