// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Whose the connections to /metrics are, and their shares (metrics_peers.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>

#include "metrics_peers.h"

/* An address as IPv6 (IPv4 mapped), and its port; false for another family. */
static bool as_v6(const struct sockaddr_storage *ss, struct in6_addr *a, __be16 *port)
{
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;

		*a = s6->sin6_addr;
		*port = s6->sin6_port;
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

/* The uid of the TCP socket whose own end is (src, sport) and other end (dst, dport),
 * in the agent's network namespace: the client's, as the kernel answers sock_diag. */
static int socket_uid(const struct in6_addr *src, __be16 sport, const struct in6_addr *dst,
		      __be16 dport, __u32 *uid)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req = {
		.nlh = {.nlmsg_len = sizeof(req), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
			.nlmsg_flags = NLM_F_REQUEST},
		.r = {.sdiag_protocol = IPPROTO_TCP, .idiag_states = ~0u,
		      .id = {.idiag_sport = sport, .idiag_dport = dport,
			     .idiag_cookie = {INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE}}},
	};
	union {
		struct nlmsghdr nlh;
		char buf[1024];
	} resp;
	const struct inet_diag_msg *msg;
	bool v4 = IN6_IS_ADDR_V4MAPPED(src) && IN6_IS_ADDR_V4MAPPED(dst);
	ssize_t n;
	int fd, err = -ENOENT;

	req.r.sdiag_family = v4 ? AF_INET : AF_INET6;
	memcpy(req.r.id.idiag_src, v4 ? &src->s6_addr[12] : src->s6_addr, v4 ? 4 : 16);
	memcpy(req.r.id.idiag_dst, v4 ? &dst->s6_addr[12] : dst->s6_addr, v4 ? 4 : 16);
	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -errno;
	/* The kernel answers within the send: the reply is queued when it returns. */
	if (send(fd, &req, sizeof(req), 0) != (ssize_t)sizeof(req)) {
		err = -errno;
		goto out;
	}
	n = recv(fd, &resp, sizeof(resp), MSG_DONTWAIT);
	if (n >= (ssize_t)NLMSG_LENGTH(sizeof(*msg)) && NLMSG_OK(&resp.nlh, (__u32)n) &&
	    resp.nlh.nlmsg_type == SOCK_DIAG_BY_FAMILY) {
		msg = NLMSG_DATA(&resp.nlh);
		*uid = msg->idiag_uid;
		err = 0;
	}
out:
	close(fd);
	return err;
}

int metrics_peer_of(int fd, struct metrics_peer *p)
{
	struct sockaddr_storage peer, self;
	socklen_t plen = sizeof(peer), slen = sizeof(self);
	struct in6_addr self_addr;
	__be16 pport, sport;

	memset(p, 0, sizeof(*p));
	if (getpeername(fd, (struct sockaddr *)&peer, &plen) ||
	    getsockname(fd, (struct sockaddr *)&self, &slen))
		return -errno;
	if (!as_v6(&peer, &p->addr, &pport) || !as_v6(&self, &self_addr, &sport))
		return -EAFNOSUPPORT;
	/* The client's socket: its own end is the peer, its other end ours. */
	p->by_uid = !socket_uid(&p->addr, pport, &self_addr, sport, &p->uid);
	if (p->by_uid)
		memset(&p->addr, 0, sizeof(p->addr));
	return 0;
}

static bool same_owner(const struct metrics_peer *a, const struct metrics_peer *b)
{
	if (a->by_uid != b->by_uid)
		return false;
	return a->by_uid ? a->uid == b->uid : !memcmp(&a->addr, &b->addr, sizeof(a->addr));
}

int metrics_shares_take(struct metrics_shares *s, const struct metrics_peer *p)
{
	int i, free_slot = -1;

	for (i = 0; i < (int)METRICS_CONNECTIONS; i++) {
		if (!s->held[i].n) {
			if (free_slot < 0)
				free_slot = i;
		} else if (same_owner(&s->held[i].who, p)) {
			if (s->held[i].n >= METRICS_CONNECTIONS_SHARE)
				return -1;
			s->held[i].n++;
			return i;
		}
	}
	if (free_slot < 0)
		return -1; /* as many owners as connections: libmicrohttpd's limit holds */
	s->held[free_slot].who = *p;
	s->held[free_slot].n = 1;
	return free_slot;
}

void metrics_shares_give(struct metrics_shares *s, int idx)
{
	if (idx >= 0 && idx < (int)METRICS_CONNECTIONS && s->held[idx].n)
		s->held[idx].n--;
}
