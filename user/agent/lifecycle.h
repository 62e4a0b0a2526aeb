/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The agent's lifecycle thread: module start/stop/restart requests and configuration
 * reloads, run one at a time, in order, off the control socket's thread (see agent.h).
 * A request queued right behind an identical one (same action, same module) that waits
 * is answered by the same run: a storm of restarts costs as many as the thread can do,
 * not one each. Never across another request: each is answered by what ran after it.
 *
 * A second one answers the modules' own commands (bpftel gpu, http, libs): a report may
 * read other processes' files (the GPU module names kernels from their ELF objects, up
 * to a few seconds on a slow or hostile file system), which the control socket's
 * thread, serving every client and the signals, must never wait on.
 */
#ifndef BPFTEL_AGENT_LIFECYCLE_H
#define BPFTEL_AGENT_LIFECYCLE_H

#include <jansson.h>
#include <linux/types.h>

struct bpftel_agent;
struct bpftel_config;
struct bpftel_lifecycle;

int bpftel_lifecycle__start(struct bpftel_agent *agent, struct bpftel_lifecycle **out);
/* Module requests waiting at most (the one running aside). */
#define BPFTEL_LIFECYCLE_QUEUE_MAX 64

/* Queue a `module` request (copied); its answer goes to the control server's ticket.
 * -ESHUTDOWN once stopping, -EBUSY with BPFTEL_LIFECYCLE_QUEUE_MAX jobs waiting,
 * -ENOMEM. */
int bpftel_lifecycle__module(struct bpftel_lifecycle *lc, json_t *req, __u64 ticket);
/* Queue a query (copied: {"cmd": ...}, a module's command) to be answered by
 * bpftel_agent_query; errors as bpftel_lifecycle__module. */
int bpftel_lifecycle__query(struct bpftel_lifecycle *lc, json_t *req, __u64 ticket);
/* Queue a reload to next (copied). */
int bpftel_lifecycle__reload(struct bpftel_lifecycle *lc, const struct bpftel_config *next);
/* Take no more; answer what waits with "the agent is stopping"; wait for the job in
 * progress (the manager's shutdown cancels a start in it first). NULL is a no-op. */
void bpftel_lifecycle__stop(struct bpftel_lifecycle *lc);

#endif /* BPFTEL_AGENT_LIFECYCLE_H */
