/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The agent's Prometheus endpoint (see metrics.c). */
#ifndef BPFTEL_AGENT_METRICS_H
#define BPFTEL_AGENT_METRICS_H

#include <stddef.h>
#include <sys/socket.h>

#include "netaddr.h"

struct bpftel_agent;
struct bpftel_metrics;

/* Serve /metrics on addr from a thread of its own. -EINVAL for a bad address,
 * -EADDRINUSE (or another errno) when it cannot listen. */
int bpftel_metrics__start(struct bpftel_agent *agent, const char *addr,
			  struct bpftel_metrics **out);
void bpftel_metrics__stop(struct bpftel_metrics *m);
/* "HOST:PORT" it listens on, the port resolved when 0 was asked for. */
const char *bpftel_metrics__addr(const struct bpftel_metrics *m);

/* The exposition text, malloc'd; NULL on allocation failure. Any thread. */
char *bpftel_metrics_render(struct bpftel_agent *agent, size_t *len);

#endif /* BPFTEL_AGENT_METRICS_H */
