/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Whose the connections to /metrics are, and each owner's share of them.
 *
 * libmicrohttpd serves 32 connections at once and closes one after 10 s with nothing
 * received: any local user could hold all 32 (open them, send a byte every few
 * seconds) and keep Prometheus from scraping for as long as it liked. So each owner
 * holds at most a quarter of them; a connection past its owner's share is closed at
 * once, and counted. The owner: for a client on this host, in the agent's network
 * namespace (loopback, the default address), the uid of its socket, as the kernel's
 * sock_diag tells it; for any other, its address (a container, a remote scraper).
 */
#ifndef BPFTEL_AGENT_METRICS_PEERS_H
#define BPFTEL_AGENT_METRICS_PEERS_H

#include <stdbool.h>
#include <netinet/in.h>
#include <linux/types.h>

#define METRICS_CONNECTIONS	  32u /* libmicrohttpd's limit */
#define METRICS_CONNECTIONS_SHARE 8u  /* an owner's */

struct metrics_peer {
	bool by_uid;
	__u32 uid;		/* by_uid: its socket's owner */
	struct in6_addr addr;	/* else its address (IPv4 as mapped) */
};

/* The owner of the client end of connection fd, accepted by the agent. 0, or -errno:
 * not a TCP connection with addresses. */
int metrics_peer_of(int fd, struct metrics_peer *p);

/* The connections held, by owner. Used from libmicrohttpd's one thread only. */
struct metrics_shares {
	struct {
		struct metrics_peer who;
		unsigned int n; /* 0: a free slot */
	} held[METRICS_CONNECTIONS];
};

/* A connection of p: its slot's index, or -1 when p holds its share already. */
int metrics_shares_take(struct metrics_shares *s, const struct metrics_peer *p);
/* The connection taken at idx (metrics_shares_take's) is closed. */
void metrics_shares_give(struct metrics_shares *s, int idx);

#endif /* BPFTEL_AGENT_METRICS_PEERS_H */
