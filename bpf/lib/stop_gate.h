/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The stop gate of an object whose uprobes are torn down in the background.
 *
 * Detaching a uprobe waits for the kernel (on 6.18 ~80 ms each, serialized: 1.3 s for
 * the GPU module's 16), so the uprobe registry hands a stopping module's links to a
 * reaper thread instead (user/manager/reaper.c). Until the reaper gets to a link its
 * program still runs. The registry first sets bpftel_stopped, in a data section of its
 * own that userspace writes whole, and every gated program returns at once from then
 * on: nothing the old instance does after the stop reaches a map, a ring buffer or
 * the shared telemetry counters. A new start loads a new object, gate open.
 */
#ifndef BPFTEL_STOP_GATE_H
#define BPFTEL_STOP_GATE_H

/* Found by name (BPFTEL_STOP_GATE_SEC) in user/manager/reaper.c. */
__u32 bpftel_stopped SEC(".data.stop_gate") = 0;

#define BPFTEL_STOP_GATE()          \
	do {                        \
		if (bpftel_stopped) \
			return 0;   \
	} while (0)

#endif /* BPFTEL_STOP_GATE_H */
