/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The agent's housekeeping thread: each module's housekeeping op at its interval
 * (user/manager/manager.h), whatever state the module is in. Its work is slow (/proc,
 * sweeps) and happens under no lock that the control socket or /metrics needs.
 */
#ifndef BPFTEL_AGENT_HOUSEKEEPING_H
#define BPFTEL_AGENT_HOUSEKEEPING_H

struct bpftel_manager;
struct bpftel_housekeeping;

/* tick(ctx), if set, runs after the modules' housekeeping on each pass (about every
 * second): the agent's own periodic work (the self-overhead budget, throttle.h). */
int bpftel_housekeeping__start(struct bpftel_manager *mgr, void (*tick)(void *ctx), void *ctx,
			       struct bpftel_housekeeping **out);
/* Wakes the thread, waits for the op in progress to return. NULL is a no-op. */
void bpftel_housekeeping__stop(struct bpftel_housekeeping *hk);

#endif /* BPFTEL_AGENT_HOUSEKEEPING_H */
