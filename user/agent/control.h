/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The agent's control-socket server (protocol in user/common/ctl.h).
 *
 * Non-blocking: the caller polls bpftel_ctl_server__fd() (an epoll fd) with its own
 * loop, calls __process() when it is readable and __tick() at least once a second to
 * drop clients that stay silent past BPFTEL_CTL_TIMEOUT_MS. A slow, silent, garbage-
 * sending or oversized client costs one slot of at most BPFTEL_CTL_MAX_CLIENTS and never
 * blocks the agent. The handler runs on the caller's thread.
 *
 * Deferred answers, for commands too slow to run on the caller's thread (a module
 * restart loads and attaches BPF programs): the handler calls
 * bpftel_ctl_request__defer(), hands the ticket to a worker and returns NULL. The
 * client stays connected and keeps its slot while the server serves others. The worker
 * passes the answer to bpftel_ctl_server__complete() from any thread; that wakes the
 * epoll fd and the next __process() sends it ("ok": true added when absent, as for a
 * synchronous answer). A deferred client waits at most BPFTEL_CTL_DEFER_TIMEOUT_MS and
 * is dropped at once if it hangs up; complete() for it then returns -ENOENT.
 */
#ifndef BPFTEL_CONTROL_H
#define BPFTEL_CONTROL_H

#include <stdbool.h>
#include <jansson.h>
#include <linux/types.h>

#include "user/common/ctl.h"

#define BPFTEL_CTL_MAX_CLIENTS 64
/* A deferred answer's deadline, from the deferral: a little past the CLI's own wait for
 * slow commands, so that the CLI, not the server, is the one that gives up. */
#define BPFTEL_CTL_DEFER_TIMEOUT_MS (BPFTEL_CTL_SLOW_TIMEOUT_MS + BPFTEL_CTL_TIMEOUT_MS)

struct bpftel_ctl_server;
/* One request, valid only during the handler's call. */
struct bpftel_ctl_request;

/*
 * Returns the answer (new reference); the server adds "ok": true if it is absent.
 * Returns NULL after bpftel_ctl_request__defer(): the answer comes later through
 * __complete(). NULL without a deferral answers "internal error". A handler that
 * deferred may still return an answer (say its worker queue is full): that answer is
 * sent now and the ticket is cancelled (a later __complete() is -ENOENT).
 */
typedef json_t *(*bpftel_ctl_handler_fn)(struct bpftel_ctl_request *r, void *ctx);

/* The request's "cmd", a non-empty string. */
const char *bpftel_ctl_request__cmd(const struct bpftel_ctl_request *r);
/* The parsed request object (borrowed: a worker copies what it needs, json_deep_copy). */
json_t *bpftel_ctl_request__json(const struct bpftel_ctl_request *r);
/* Answer later: returns the request's ticket (never 0; the same one if called again). */
__u64 bpftel_ctl_request__defer(struct bpftel_ctl_request *r);

/*
 * One agent per socket: lock path + ".lock" (parents created; flock, never through a
 * symlink) for as long as the fd returned is open, or -EADDRINUSE when another process
 * holds it, or another -errno. Taken before anything is loaded, and held until all is
 * unloaded: a socket is refused to a connect() as a stale one is while its agent has
 * bound it and not yet listens, and a second agent starting then would remove it and
 * run too, every probe attached twice (every count doubled). The file stays: one
 * removed could be another agent's, locked since its open.
 */
int bpftel_ctl_lock(const char *path);

/*
 * Listen on path (parents created, mode 0600), the caller holding bpftel_ctl_lock(path).
 * A stale socket left by a dead agent is replaced; a live one is -EADDRINUSE; a
 * non-socket file there is -EEXIST.
 */
int bpftel_ctl_server__new(const char *path, bpftel_ctl_handler_fn fn, void *ctx,
			   struct bpftel_ctl_server **out);
/* Drops deferred clients and answers not sent yet. Stop the threads that call
 * __complete() first: it must not race __free(). */
void bpftel_ctl_server__free(struct bpftel_ctl_server *srv);
int bpftel_ctl_server__fd(const struct bpftel_ctl_server *srv);
void bpftel_ctl_server__process(struct bpftel_ctl_server *srv);
void bpftel_ctl_server__tick(struct bpftel_ctl_server *srv);
/* Tests: how long an accept that failed for want of fds waits before a tick tries again
 * (1000 ms by default). */
void bpftel_ctl_server__set_accept_retry_ms(struct bpftel_ctl_server *srv, long long ms);

/*
 * Answer a deferred request; any thread, never waits for the server's loop. Takes the
 * reference of resp (NULL answers "internal error"). 0, or -ENOENT when the ticket is
 * not waiting (unknown, already completed, or its client hung up or timed out): resp
 * is dropped.
 */
int bpftel_ctl_server__complete(struct bpftel_ctl_server *srv, __u64 ticket, json_t *resp);
/* Whether a client still waits for ticket's answer (it did not hang up, nor was it
 * answered): a report nobody waits for need not be made. */
bool bpftel_ctl_server__waiting(struct bpftel_ctl_server *srv, __u64 ticket);

#endif /* BPFTEL_CONTROL_H */
