// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Shared-libraries watcher: notices successful read-only opens of the libraries that
 * modules care about (libssl, libcudart, ...) and reports them through a ring buffer.
 *
 * One program per open, at its exit (fexit on do_sys_openat2 where the kernel allows,
 * else the sys_exit tracepoints of open, openat and openat2). It looks at the file the
 * open returned, not at the path: the dentry's name is in kernel memory, so rejecting
 * a non-library costs a few loads (no helper call, no user-memory read, no state kept
 * between enter and exit). Only a match reads the path the process passed, and emits
 * it with the file's identity (device, inode). The code is in bpf/lib/shlib_probe.h.
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

TLM_PROG_KEY(shlib_fexit_open);
TLM_PROG_KEY(shlib_exit_openat);
TLM_PROG_KEY(shlib_exit_open);
TLM_PROG_KEY(shlib_exit_openat2);
TLM_PROG_KEY(shlib_exit_connect);
TLM_PROG_KEY(shlib_exit_accept);
TLM_PROG_KEY(shlib_exit_accept4);
TLM_PROG_KEY(shlib_exec);

/* All of open, openat and openat2 reach do_sys_openat2: one program for the three. */
SEC("fexit/do_sys_openat2")
int BPF_PROG(shlib_fexit_open, int dfd, const char *filename, struct open_how *how, long ret)
{
	TLM_PROG(shlib_fexit_open);

	if (ret < 0)
		return 0;
	return shlib_on_open(TLM_ARG, bpf_get_current_task_btf(), ret, filename, dfd,
			     bpf_get_current_pid_tgid(), SHLIB_SYS_ANY);
}

SEC("tracepoint/syscalls/sys_exit_openat")
int shlib_exit_openat(struct trace_event_raw_sys_exit *ctx)
{
	TLM_PROG(shlib_exit_openat);

	return shlib_on_sys_exit(TLM_ARG, ctx->ret, SHLIB_SYS_OPENAT);
}

SEC("tracepoint/syscalls/sys_exit_open")
int shlib_exit_open(struct trace_event_raw_sys_exit *ctx)
{
	TLM_PROG(shlib_exit_open);

	return shlib_on_sys_exit(TLM_ARG, ctx->ret, SHLIB_SYS_OPEN);
}

SEC("tracepoint/syscalls/sys_exit_openat2")
int shlib_exit_openat2(struct trace_event_raw_sys_exit *ctx)
{
	TLM_PROG(shlib_exit_openat2);

	return shlib_on_sys_exit(TLM_ARG, ctx->ret, SHLIB_SYS_OPENAT2);
}

/* Socket owners (lib/shlib_sockets.h), for subscribers that ask for them. */

SEC("tracepoint/syscalls/sys_exit_connect")
int shlib_exit_connect(struct trace_event_raw_sys_exit *ctx)
{
	struct pt_regs *regs;

	TLM_PROG(shlib_exit_connect);
	/* A non-blocking connect returns EINPROGRESS with its ports already chosen. */
	if (ctx->ret && ctx->ret != -SHLIB_EINPROGRESS)
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	return shlib_on_sock(TLM_ARG, (int)PT_REGS_PARM1_SYSCALL(regs), false); /* connect(fd, ...) */
}

SEC("tracepoint/syscalls/sys_exit_accept")
int shlib_exit_accept(struct trace_event_raw_sys_exit *ctx)
{
	TLM_PROG(shlib_exit_accept);

	return shlib_on_sock(TLM_ARG, ctx->ret, true);
}

SEC("tracepoint/syscalls/sys_exit_accept4")
int shlib_exit_accept4(struct trace_event_raw_sys_exit *ctx)
{
	TLM_PROG(shlib_exit_accept4);

	return shlib_on_sock(TLM_ARG, ctx->ret, true);
}

/* Execs (lib/shlib_exec.h), for subscribers that ask: new Go programs. */
SEC("tracepoint/sched/sched_process_exec")
int shlib_exec(struct trace_event_raw_sched_process_exec *ctx)
{
	TLM_PROG(shlib_exec);

	return shlib_on_exec(TLM_ARG, bpf_get_current_task_btf(),
			     (const char *)ctx + (ctx->__data_loc_filename & 0xffff),
			     bpf_get_current_pid_tgid());
}
