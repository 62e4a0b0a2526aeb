// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The floor of the uprobe experiments: empty programs on a function's entry and return.
 * What a probe of ours costs over them is what our code costs; the traps themselves
 * are the kernel's.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("uprobe")
int floor_entry(void *ctx)
{
	return 0;
}

SEC("uretprobe")
int floor_return(void *ctx)
{
	return 0;
}
