// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * BPF_PROG_TEST_RUN harness for the GPU module's BPF code (bpf/lib/gpu_probes.h: the same
 * maps and probe bodies as bpf/gpu.bpf.c): a syscall program that runs one probe body
 * on a synthetic register set, as thread pid_tgid at time now. A syscall program runs
 * in the test's own process, so user pointers in the registers (cudaMalloc's devPtr,
 * the stack holding cudaLaunchKernel's sharedMem) point into the test's memory.
 */
#define BPF_NO_PRESERVE_ACCESS_INDEX
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "gpu.h"
#include "telemetry/telemetry.bpf.h"
#include "lib/gpu_probes.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* probe: GPU_TEST_ENTER + func, GPU_TEST_RET + func, GPU_TEST_TASK_EXIT or GPU_TEST_EXEC. */
#define GPU_TEST_ENTER	   0
#define GPU_TEST_RET	   GPU_FN__COUNT
#define GPU_TEST_TASK_EXIT (2 * GPU_FN__COUNT)
#define GPU_TEST_EXEC	   (2 * GPU_FN__COUNT + 1)

struct gpu_test_call {
	struct pt_regs regs;
	__u64 pid_tgid;
	__u64 now;
	__u32 probe;
	__u32 __pad;
};

SEC("syscall")
int gpu_test_call(struct gpu_test_call *ctx)
{
	__u32 __tlm_prog = 0, probe = ctx->probe;
	struct pt_regs *regs = &ctx->regs;
	__u64 pid_tgid = ctx->pid_tgid, now = ctx->now;

	if (probe == GPU_TEST_TASK_EXIT)
		return gpu_task_exit_body(TLM_ARG, pid_tgid);
	if (probe == GPU_TEST_EXEC)
		return gpu_exec_body(TLM_ARG, pid_tgid);
	if (probe >= GPU_TEST_RET && probe < GPU_TEST_RET + GPU_FN__COUNT)
		return gpu_ret_body(TLM_ARG, regs, pid_tgid, now, probe - GPU_TEST_RET);
	if (probe < GPU_TEST_ENTER + GPU_FN__COUNT)
		return gpu_enter_body(TLM_ARG, regs, pid_tgid, now, probe - GPU_TEST_ENTER);
	return -1;
}
