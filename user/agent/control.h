/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The agent's control-socket server (protocol in user/common/ctl.h).
 *
 * Non-blocking: the caller polls bpftel_ctl_server__fd() (an epoll fd) with its own
 * loop, calls __process() when it is readable and __tick() at least once a second to
 * drop clients that stay silent past BPFTEL_CTL_TIMEOUT_MS. A slow, silent, garbage-
 * sending or oversized client costs one slot of at most BPFTEL_CTL_MAX_CLIENTS and never
 * blocks the agent. The handler runs on the caller's thread.
 */
#ifndef BPFTEL_CONTROL_H
#define BPFTEL_CONTROL_H

#include <jansson.h>

#define BPFTEL_CTL_MAX_CLIENTS 64

struct bpftel_ctl_server;

/* Returns the answer (new reference); the server adds "ok": true if it is absent. */
typedef json_t *(*bpftel_ctl_handler_fn)(const char *cmd, json_t *req, void *ctx);

/*
 * Listen on path (parents created, mode 0600). A stale socket left by a dead agent is
 * replaced; a live one is -EADDRINUSE; a non-socket file there is -EEXIST.
 */
int bpftel_ctl_server__new(const char *path, bpftel_ctl_handler_fn fn, void *ctx,
			   struct bpftel_ctl_server **out);
void bpftel_ctl_server__free(struct bpftel_ctl_server *srv);
int bpftel_ctl_server__fd(const struct bpftel_ctl_server *srv);
void bpftel_ctl_server__process(struct bpftel_ctl_server *srv);
void bpftel_ctl_server__tick(struct bpftel_ctl_server *srv);

#endif /* BPFTEL_CONTROL_H */
