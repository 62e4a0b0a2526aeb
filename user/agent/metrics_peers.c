// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Whose the connections to /metrics are, and their shares (metrics_peers.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/tcp.h>

#include "metrics_peers.h"
#include "user/common/ctl.h"
#include "user/common/log.h"

/* How often the subuid files are looked at for a change, at most. */
#define SUBUID_LOOK_NS 1000000000ull

static int socket_uid(int nl, const struct in6_addr *src, __be16 sport, const struct in6_addr *dst,
		      __be16 dport, __u32 scope, __u32 *uid);

/* The subuid ranges read again, kept as they were if the file cannot be read (logged):
 * each subordinate uid would be an owner of its own. */
static void ranges_read(struct metrics_peers *p)
{
	struct fair_share_ranges *now = malloc(sizeof(*now));
	unsigned int skipped;
	int err;

	if (!now)
		return;
	err = subuid_read(now, &skipped, &p->seen);
	if (err)
		pr_warn("metrics: %s: %s: its ranges as they were", subuid_path(), strerror(-err));
	else
		p->ranges = *now;
	free(now);
}

void metrics_peers_init(struct metrics_peers *p)
{
	struct in6_addr any = IN6ADDR_ANY_INIT;
	__u32 uid;

	memset(p, 0, sizeof(*p));
	p->nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (p->nl < 0)
		pr_warn("metrics: no sock_diag (%s): local clients' connections share one "
			"owner's share", strerror(errno));
	/* A first request: the kernel loads its TCP modules now, not on the server's
	 * thread at a client's connection. */
	socket_uid(p->nl, &any, 0, &any, 0, 0, &uid);
	ranges_read(p);
	p->looked_ns = bpftel_mono_ns();
}

void metrics_peers_fini(struct metrics_peers *p)
{
	if (p->nl >= 0)
		close(p->nl);
	p->nl = -1;
}

/* The subuid ranges, read again when the files changed (looked at once a second). */
static const struct fair_share_ranges *ranges(struct metrics_peers *p)
{
	__u64 now = bpftel_mono_ns();

	if (now - p->looked_ns >= SUBUID_LOOK_NS) {
		p->looked_ns = now;
		if (subuid_changed(&p->seen))
			ranges_read(p);
	}
	return &p->ranges;
}

/* An address as IPv6 (IPv4 mapped), its port and scope; false for another family. */
static bool as_v6(const struct sockaddr_storage *ss, struct in6_addr *a, __be16 *port,
		  __u32 *scope)
{
	*scope = 0;
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;

		*a = s6->sin6_addr;
		*port = s6->sin6_port;
		*scope = s6->sin6_scope_id;
		return true;
	}
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;

		memset(a, 0, sizeof(*a));
		a->s6_addr[10] = a->s6_addr[11] = 0xff;
		memcpy(&a->s6_addr[12], &s4->sin_addr, 4);
		*port = s4->sin_port;
		return true;
	}
	return false;
}

/* The states of a client's socket still connected to the agent (the kernel falls back
 * to a listener of the port asked when no connection matches: not the client's). */
static bool connected(__u8 state)
{
	return state == TCP_ESTABLISHED || state == TCP_FIN_WAIT1 || state == TCP_FIN_WAIT2 ||
	       state == TCP_CLOSE_WAIT || state == TCP_LAST_ACK || state == TCP_CLOSING;
}

/* The uid of the TCP socket whose own end is (src, sport) and other end (dst, dport),
 * in the agent's network namespace: the client's, as the kernel answers sock_diag. */
static int socket_uid(int nl, const struct in6_addr *src, __be16 sport, const struct in6_addr *dst,
		      __be16 dport, __u32 scope, __u32 *uid)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req = {
		.nlh = {.nlmsg_len = sizeof(req), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
			.nlmsg_flags = NLM_F_REQUEST},
		.r = {.sdiag_protocol = IPPROTO_TCP, .idiag_states = ~0u,
		      .id = {.idiag_sport = sport, .idiag_dport = dport, .idiag_if = scope,
			     .idiag_cookie = {INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE}}},
	};
	union {
		struct nlmsghdr nlh;
		char buf[1024];
	} resp;
	const struct inet_diag_msg *msg;
	bool v4 = IN6_IS_ADDR_V4MAPPED(src) && IN6_IS_ADDR_V4MAPPED(dst);
	size_t alen = v4 ? 4 : 16;
	ssize_t n;

	if (nl < 0)
		return -ENOENT;
	req.r.sdiag_family = v4 ? AF_INET : AF_INET6;
	memcpy(req.r.id.idiag_src, v4 ? &src->s6_addr[12] : src->s6_addr, alen);
	memcpy(req.r.id.idiag_dst, v4 ? &dst->s6_addr[12] : dst->s6_addr, alen);
	/* Nothing left of an earlier answer (one cut short): each request stands alone. */
	while (recv(nl, &resp, sizeof(resp), MSG_DONTWAIT) > 0)
		;
	if (send(nl, &req, sizeof(req), 0) != (ssize_t)sizeof(req))
		return -errno;
	/* The kernel answers within the send: the reply is queued when it returns. */
	n = recv(nl, &resp, sizeof(resp), MSG_DONTWAIT);
	if (n < (ssize_t)NLMSG_LENGTH(sizeof(*msg)) || !NLMSG_OK(&resp.nlh, (__u32)n) ||
	    resp.nlh.nlmsg_type != SOCK_DIAG_BY_FAMILY)
		return -ENOENT;
	msg = NLMSG_DATA(&resp.nlh);
	/* The connection asked for, still connected: the ports of its ends (a listener has
	 * no other end). Not the addresses, which an AF_INET6 socket connected to an IPv4
	 * address answers v4-mapped. */
	if (!connected(msg->idiag_state) || msg->id.idiag_sport != sport ||
	    msg->id.idiag_dport != dport)
		return -ENOENT;
	*uid = msg->idiag_uid;
	return 0;
}

/* A client on this host: loopback, or the agent's own address (link-local is the LAN's
 * too). */
static bool local_peer(const struct in6_addr *peer, const struct in6_addr *self)
{
	return IN6_IS_ADDR_LOOPBACK(peer) ||
	       (IN6_IS_ADDR_V4MAPPED(peer) && peer->s6_addr[12] == 127) ||
	       !memcmp(peer, self, sizeof(*peer));
}

int metrics_peer_of(struct metrics_peers *p, int fd, struct metrics_peer *who)
{
	struct sockaddr_storage peer, self;
	socklen_t plen = sizeof(peer), slen = sizeof(self);
	struct in6_addr self_addr;
	__be16 pport, sport;
	__u32 scope, sscope, uid = 0;

	memset(who, 0, sizeof(*who));
	if (getpeername(fd, (struct sockaddr *)&peer, &plen) ||
	    getsockname(fd, (struct sockaddr *)&self, &slen))
		return -errno;
	if (!as_v6(&peer, &who->addr, &pport, &scope) ||
	    !as_v6(&self, &self_addr, &sport, &sscope))
		return -EAFNOSUPPORT;
	/* The client's socket: its own end is the peer, its other end ours. */
	if (!socket_uid(p->nl, &who->addr, pport, &self_addr, sport, scope, &uid)) {
		who->by_uid = true;
		who->uid = fair_share_ranges_owner(ranges(p), uid);
		memset(&who->addr, 0, sizeof(who->addr));
		return 0;
	}
	if (local_peer(&who->addr, &self_addr)) {
		/* Not named (no sock_diag, or gone meanwhile): one owner for all such, the
		 * unspecified address, which no client has. */
		memset(&who->addr, 0, sizeof(who->addr));
		return 0;
	}
	if (!IN6_IS_ADDR_V4MAPPED(&who->addr))
		memset(&who->addr.s6_addr[8], 0, 8); /* a host is given a /64 */
	return 0;
}

static bool same_owner(const struct metrics_peer *a, const struct metrics_peer *b)
{
	if (a->by_uid != b->by_uid)
		return false;
	return a->by_uid ? a->uid == b->uid : !memcmp(&a->addr, &b->addr, sizeof(a->addr));
}

int metrics_shares_take(struct metrics_peers *p, const struct metrics_peer *who)
{
	int i, free_slot = -1;

	for (i = 0; i < (int)METRICS_CONNECTIONS; i++) {
		if (!p->held[i].n) {
			if (free_slot < 0)
				free_slot = i;
		} else if (same_owner(&p->held[i].who, who)) {
			if (p->held[i].n >= METRICS_CONNECTIONS_SHARE)
				return -1;
			p->held[i].n++;
			return i;
		}
	}
	if (free_slot < 0)
		return -1; /* as many owners as connections: libmicrohttpd's limit holds */
	p->held[free_slot].who = *who;
	p->held[free_slot].n = 1;
	return free_slot;
}

void metrics_shares_give(struct metrics_peers *p, int idx)
{
	if (idx >= 0 && idx < (int)METRICS_CONNECTIONS && p->held[idx].n)
		p->held[idx].n--;
}
