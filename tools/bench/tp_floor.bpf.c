// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The floor of the open_loop experiment: an empty program on the same tracepoint as
 * the watcher (sys_exit_openat); tp_floor attaches it, or with --recvfrom the one below. Whatever it costs, any syscall-tracepoint watcher
 * costs at least that: attaching one makes every syscall of every task take the
 * kernel's traced entry/exit path.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("tracepoint/syscalls/sys_exit_openat")
int floor_exit_openat(void *ctx)
{
	return 0;
}

/* The floor of the recv_loop experiment: USM's recvfrom tracepoint, empty. */
SEC("tracepoint/syscalls/sys_enter_recvfrom")
int floor_enter_recvfrom(void *ctx)
{
	return 0;
}
