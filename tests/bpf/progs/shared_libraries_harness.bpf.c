// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * BPF_PROG_TEST_RUN harness for the shared-libraries watcher (bpf/lib/shlib_probe.h: the
 * same maps and inline code as bpf/shared_libraries.bpf.c): a syscall program that
 * plays the exit of one open as the probes see it: the fd it returned (opened for real
 * by the test, so the harness reads the test process's own fd table), the path pointer
 * and dirfd the process passed. A syscall program runs in the test's own process, so
 * filename is an ordinary pointer into the test's memory and bpf_probe_read_user_str
 * reads it as the real probe would.
 *
 * shlib_test_sock plays the exit of a connect or accept that left fd connected: the
 * same inline code as the sys_exit_connect/accept/accept4 programs, on the test's own
 * fd table and sockets.
 *
 * shlib_test_exec plays a sched_process_exec of the test's own executable (the task's
 * mm->exe_file), the path given to exec in its context, which the kernel copied: a
 * kernel pointer, as the tracepoint's.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "shared_libraries.h"
#include "lib/shlib_match.h"
#include "telemetry/telemetry.bpf.h"
#include "lib/shlib_probe.h"
#include "lib/shlib_sockets.h"
#include "lib/shlib_exec.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct shlib_test_open {
	__u64 filename;
	__s64 ret;
	__u64 pid_tgid;
	__s32 dirfd;
	__u32 syscall;
};

SEC("syscall")
int shlib_test_open(struct shlib_test_open *ctx)
{
	__u32 __tlm_prog = 0;

	if (ctx->ret < 0)
		return 0; /* as the probes: a failed open is not looked at */
	return shlib_on_open(TLM_ARG, bpf_get_current_task_btf(), ctx->ret,
			     (const char *)ctx->filename, ctx->dirfd, ctx->pid_tgid, ctx->syscall);
}

/* Returns shlib_match_event() of the path alone, without config or maps. */
SEC("syscall")
int shlib_test_match(struct shlib_test_open *ctx)
{
	struct shlib_config *cfg;
	struct shlib_event *ev;
	__u32 zero = 0, __tlm_prog = 0;
	long len;
	int ret;

	cfg = bpf_map_lookup_elem(&shlib_config, &zero);
	if (!cfg)
		return -2;
	ev = shlib_scratch_get();
	if (!ev)
		return -2;
	len = shlib_read_path(TLM_ARG, ev, (const char *)ctx->filename);
	ret = len < 0 ? -3 : shlib_match_event(ev, len, cfg);
	shlib_scratch_put(ev);
	return ret;
}

struct shlib_test_sock {
	__s64 fd;
	__u64 accepted;
};

SEC("syscall")
int shlib_test_sock(struct shlib_test_sock *ctx)
{
	__u32 __tlm_prog = 0;

	return shlib_on_sock(TLM_ARG, ctx->fd, ctx->accepted);
}

struct shlib_test_exec {
	__u64 pid_tgid;
	char filename[64];
};

SEC("syscall")
int shlib_test_exec(struct shlib_test_exec *ctx)
{
	__u32 __tlm_prog = 0;

	return shlib_on_exec(TLM_ARG, bpf_get_current_task_btf(), ctx->filename, ctx->pid_tgid);
}
