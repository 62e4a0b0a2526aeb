/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The agent's own process on /metrics, under the names every Prometheus client
 * library's process collector uses (process_cpu_seconds_total, ...), so that the
 * dashboards and alerts made for any exporter's cost work on this one: what running
 * the agent costs in CPU, memory and fds. (What its BPF programs cost is in
 * bpftel_ebpf_program_*; its maps' kernel memory in bpftel_ebpf_map_memory_bytes.)
 */
#ifndef BPFTEL_AGENT_PROCESS_METRICS_H
#define BPFTEL_AGENT_PROCESS_METRICS_H

#include "user/common/prom.h"

/* From /proc/self: each family left out that cannot be read. */
void bpftel_process_metrics(struct bpftel_prom *w);

/* The agent's CPU time (user and system, s) and resident memory (bytes), for bpftel
 * stats and top: 0, or -1 when /proc/self/stat cannot be read. */
int bpftel_process_usage(double *cpu_s, __u64 *rss_bytes);

#endif /* BPFTEL_AGENT_PROCESS_METRICS_H */
