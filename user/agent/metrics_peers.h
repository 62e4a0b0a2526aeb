/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Whose the connections to /metrics are, and each owner's share of them.
 *
 * libmicrohttpd serves 32 connections at once and closes one after 10 s with nothing
 * received: any local user could hold all 32 (open them, send a byte every few
 * seconds) and keep Prometheus from scraping for as long as it liked. So each owner
 * holds at most a quarter of them; a connection past its owner's share is closed at
 * once, and counted. The owner of a client on this host, in the agent's network
 * namespace: the user of its socket's uid, as the kernel's sock_diag tells it, a range
 * of /etc/subuid counted as the user's it was granted to (user/manager/subuid.h: a
 * user's subordinate uids are not more users). Local clients the kernel does not name
 * (no sock_diag) are one owner together; any other client's owner is its address (a
 * container, a remote scraper), an IPv6 one's /64.
 */
#ifndef BPFTEL_AGENT_METRICS_PEERS_H
#define BPFTEL_AGENT_METRICS_PEERS_H

#include <stdbool.h>
#include <netinet/in.h>
#include <linux/types.h>

#include "bpf/fair_share_defs.h"
#include "user/manager/subuid.h"

#define METRICS_CONNECTIONS	  32u /* libmicrohttpd's limit */
#define METRICS_CONNECTIONS_SHARE 8u  /* an owner's */

struct metrics_peer {
	bool by_uid;
	__u32 uid;	      /* by_uid: its socket's user */
	struct in6_addr addr; /* else its address (IPv4 as mapped; IPv6's /64) */
};

/* The server's: used from libmicrohttpd's one thread only, after metrics_peers_init. */
struct metrics_peers {
	int nl; /* NETLINK_SOCK_DIAG, opened at start (-1: none) */
	struct fair_share_ranges ranges;
	struct subuid_files seen;
	__u64 looked_ns; /* when the subuid files were last looked at */
	struct {
		struct metrics_peer who;
		unsigned int n; /* 0: a free slot */
	} held[METRICS_CONNECTIONS];
};

/* Open the sock_diag socket and ask it once (the kernel loads its modules then, not on
 * the server's thread at a client's connection), and read /etc/subuid. */
void metrics_peers_init(struct metrics_peers *p);
void metrics_peers_fini(struct metrics_peers *p);

/* The owner of the client end of connection fd, accepted by the agent. 0, or -errno:
 * not a TCP connection with addresses. */
int metrics_peer_of(struct metrics_peers *p, int fd, struct metrics_peer *who);

/* A connection of who: its slot's index, or -1 when who holds its share already. */
int metrics_shares_take(struct metrics_peers *p, const struct metrics_peer *who);
/* The connection taken at idx (metrics_shares_take's) is closed. */
void metrics_shares_give(struct metrics_peers *p, int idx);

#endif /* BPFTEL_AGENT_METRICS_PEERS_H */
