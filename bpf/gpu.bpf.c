// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * GPU module: one uprobe and one uretprobe program for every probed function of the CUDA
 * runtime (libcudart, any soname), attached per library file by the uprobe registry,
 * each attachment's cookie naming its function (enum gpu_func) and the slot that counts
 * the calls of its file (bpf/uprobe_hits.h): as one multi-uprobe link per file and
 * direction where the kernel has them, else one link per function. The bodies are in
 * bpf/lib/gpu_probes.h.
 */
/*
 * No CO-RE here, on purpose: this object reads only layouts that are ABI (the x86-64
 * user register frame in struct pt_regs), so it needs no kernel BTF at load. That
 * saves libbpf reading and searching the kernel's 5 MiB of BTF on every start: ~45 ms
 * of a module restart. test_unit_core_free checks that the object carries no CO-RE
 * relocation.
 */
#define BPF_NO_PRESERVE_ACCESS_INDEX
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "gpu.h"
#include "telemetry/telemetry.bpf.h"
#include "lib/gpu_probes.h"
#include "lib/file_hits.h"
#include "lib/stop_gate.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

TLM_PROG_KEY(gpu_uprobe);
TLM_PROG_KEY(gpu_uretprobe);
TLM_PROG_KEY(gpu_task_exit);
TLM_PROG_KEY(gpu_exec);
TLM_PROG_KEY(gpu_slot_free); /* it makes no fallible call: a key as every program has */
TLM_PROG_KEY(gpu_exec_drop);

/* The clock for every call but the launches (kernel and graph), which need no time: on
 * this VM reading it was ~5 % of a cudaLaunchKernel under both probes (perf,
 * BENCHMARKS.md). */
static __always_inline __u64 gpu_now(__u64 fn)
{
	return gpu_fn_entry_only(fn) ? 0 : bpf_ktime_get_ns();
}

SEC("uprobe")
int gpu_uprobe(struct pt_regs *ctx)
{
	TLM_PROG(gpu_uprobe);
	__u64 fn;

	BPFTEL_STOP_GATE();
	fn = uprobe_file_hit(bpf_get_attach_cookie(ctx));

	return gpu_enter_body(TLM_ARG, ctx, bpf_get_current_pid_tgid(), gpu_now(fn), fn);
}

SEC("uretprobe")
int gpu_uretprobe(struct pt_regs *ctx)
{
	TLM_PROG(gpu_uretprobe);
	__u64 fn;

	BPFTEL_STOP_GATE();
	fn = uprobe_file_hit(bpf_get_attach_cookie(ctx));

	return gpu_ret_body(TLM_ARG, ctx, bpf_get_current_pid_tgid(), gpu_now(fn), fn);
}

SEC("tracepoint/sched/sched_process_exit")
int gpu_task_exit(void *ctx)
{
	TLM_PROG(gpu_task_exit);
	BPFTEL_STOP_GATE();

	return gpu_task_exit_body(TLM_ARG, bpf_get_current_pid_tgid());
}

SEC("tracepoint/sched/sched_process_exec")
int gpu_exec(void *ctx)
{
	TLM_PROG(gpu_exec);
	BPFTEL_STOP_GATE();

	return gpu_exec_body(TLM_ARG, bpf_get_current_pid_tgid());
}

/*
 * Run by userspace's sweep (BPF_PROG_TEST_RUN, user/modules/gpu/gpu.c) for the slot of a
 * thread gone without an exit: freed with a compare-and-swap, as the probes take and
 * free slots, so that a slot another thread took since the sweep read it stays that
 * thread's. Returns 1 when freed.
 */
SEC("syscall")
int gpu_slot_free(struct gpu_slot_free_args *a)
{
	__u32 idx = a->idx;
	__u64 owner = a->owner;
	struct gpu_thread_slot *s = bpf_map_lookup_elem(&gpu_thread_slots, &idx);

	return s && gpu_thread_slot_release(s, owner);
}

/*
 * Run by userspace (user/modules/gpu/gpu_gap.c) for a process that exec'd in a
 * restart's gap, when no program of the module was on the exec tracepoint: what
 * gpu_exec would have done then. Returns 1 when the process had a row.
 */
SEC("syscall")
int gpu_exec_drop(struct gpu_exec_drop_args *a)
{
	TLM_PROG(gpu_exec_drop);
	__u32 tgid = a->tgid;
	bool had = bpf_map_lookup_elem(&gpu_procs, &tgid);

	gpu_exec_body(TLM_ARG, (__u64)tgid << 32);
	return had;
}
