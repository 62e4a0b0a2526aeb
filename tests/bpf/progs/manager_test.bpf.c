// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Programs for the manager's tests: one candidate of every attach type the fallback
 * chain walks (fentry -> kprobe -> tracepoint on the openat path), an event source
 * for consumer tests (getppid from the test's own process, chosen through .rodata),
 * a uprobe, and maps to resize, share and use as a subscription config.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* inputs */
const volatile __u32 target_tgid = 0;

/* outputs */
__u64 openat_hits = 0;
__u64 uprobe_hits = 0;

struct mt_event {
	__u64 seq;
	__u32 tgid;
	__u32 __pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} mt_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} mt_resizable SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} mt_shared SEC(".maps");

static __u64 seq;
__u64 getppid_hits;

SEC("fentry/do_sys_openat2")
int BPF_PROG(mt_fentry, int dfd)
{
	__sync_fetch_and_add(&openat_hits, 1);
	return 0;
}

SEC("kprobe/do_sys_openat2")
int mt_kprobe(void *ctx)
{
	__sync_fetch_and_add(&openat_hits, 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_openat")
int mt_tp_openat(void *ctx)
{
	if ((bpf_get_current_pid_tgid() >> 32) == target_tgid)
		__sync_fetch_and_add(&openat_hits, 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int mt_getppid(void *ctx)
{
	struct mt_event ev = {};
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (tgid != target_tgid)
		return 0;
	__sync_fetch_and_add(&getppid_hits, 1);
	ev.seq = __sync_fetch_and_add(&seq, 1);
	ev.tgid = tgid;
	bpf_ringbuf_output(&mt_events, &ev, sizeof(ev), 0);
	return 0;
}

SEC("uprobe")
int mt_uprobe(void *ctx)
{
	if ((bpf_get_current_pid_tgid() >> 32) == target_tgid)
		__sync_fetch_and_add(&uprobe_hits, 1);
	return 0;
}
