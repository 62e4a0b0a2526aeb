/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * USM, plaintext side: a socket filter on an AF_PACKET socket (every interface,
 * loopback included). For TCP segments over IPv4 or IPv6 whose payload starts an
 * HTTP/1.x message, emit the first USM_PREFIX bytes with the connection's addresses,
 * client side first; userspace pairs requests and responses by that 4-tuple. The
 * first segments of cleartext HTTP/2 connections too (h2c, below). Every other packet
 * costs a few header loads and two hash lookups. Returns 0: the socket itself receives
 * nothing.
 *
 * Headers are read relative to the network header (skb_load_bytes_relative with
 * BPF_HDR_START_NET): a live packet socket's skb starts at the MAC header, the one
 * BPF_PROG_TEST_RUN builds at the network header; this reads the same bytes in both.
 * But the relative load reads only the skb's linear part, and a TCP payload often
 * sits in page fragments (loopback included): the payload is read with the plain
 * load, which follows fragments, at an offset found by locating the network header
 * from the start of the skb (0, or 14 after an Ethernet header).
 *
 * Header loads go through the telemetry wrappers too: one fails only on a packet
 * shorter than its own headers say, which errors telemetry then counts.
 *
 * Include after lib/usm_common.h.
 */
#ifndef BPFTEL_LIB_USM_SOCKET_H
#define BPFTEL_LIB_USM_SOCKET_H

#define USM_PACKET_HOST	    0
#define USM_PACKET_OUTGOING 4
#define USM_IPPROTO_TCP	    6
#define USM_IP_MF	    0x2000
#define USM_IP_OFFSET	    0x1fff
/* IPv6 extension headers walked to the transport header, at most USM_IP6_EXT_MAX. */
#define USM_IP6_HOPOPTS	    0
#define USM_IP6_ROUTING	    43
#define USM_IP6_FRAGMENT    44
#define USM_IP6_AUTH	    51
#define USM_IP6_DSTOPTS	    60
#define USM_IP6_FRAG_OFFSET 0xfff8
#define USM_IP6_EXT_MAX	    4

/* Loopback's ifindex (set by userspace): on it every packet is seen twice, once as
 * outgoing; only the incoming copy counts. */
const volatile __u32 usm_lo_ifindex = 1;

#define USM_TCP_SYN 0x02
#define USM_TCP_RST 0x04

struct usm_tcp_hdr {
	__be16 source;
	__be16 dest;
	__be32 seq;
	__be32 ack_seq;
	__u8 res1_doff; /* data offset in the high nibble */
	__u8 flags;
	__be16 window;
	__be16 check;
	__be16 urg_ptr;
};

/* Where the network header starts, from skb->data: the offset at which the first 20
 * bytes equal net (read relative to it). -1 if neither 0 nor ETH_HLEN. */
static __always_inline int usm_net_offset(TLM_PARAM, struct __sk_buff *skb, const __u32 *net)
{
	__u32 at[5];
	int off, i;

	for (off = 0; off <= 14; off += 14) {
		if (tlm_skb_load_bytes(skb, off, at, sizeof(at)))
			continue;
		for (i = 0; i < 5 && at[i] == net[i]; i++)
			;
		if (i == 5)
			return off;
	}
	return -1;
}

/*
 * Cleartext HTTP/2 with prior knowledge (h2c). A client's segment that begins with the
 * connection preface starts a connection (USM_KIND_H2C_CLIENT); userspace decodes the
 * first request from it and the client's next segments (clients often write the
 * preface and their first HEADERS apart), at most USM_H2C_CLIENT_SEGMENTS in all.
 * The server's answer needs its first segments too, and servers send their SETTINGS
 * without waiting for the client's preface: a segment that begins with a SETTINGS
 * frame (not an ACK), or comes back on a connection whose preface was seen, is sent as
 * USM_KIND_H2C_SERVER, at most USM_H2C_SERVER_SEGMENTS. State per connection in
 * usm_h2c_conns, keyed client side first. Everything later would need the HPACK state
 * of every header block before it: not sent, not decoded.
 */
#define USM_H2C_CLIENT_SEGMENTS 3
#define USM_H2C_SERVER_SEGMENTS 4

struct usm_h2c_key {
	__u8 client[16];
	__u8 server[16];
	__u16 client_port;
	__u16 server_port;
	__u32 family;
};

struct usm_h2c_left {
	__u32 client; /* segments still to send, each way */
	__u32 server;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct usm_h2c_key);
	__type(value, struct usm_h2c_left);
} usm_h2c_conns SEC(".maps");

TLM_MAP_KEY(usm_h2c_conns);

/*
 * Segments that began an HTTP message, by (addresses, ports, sequence number): a packet
 * socket bound to every device sees a packet once per device it crosses (a bond's
 * slave and the bond, a NIC and its VLAN, a bridge and its veth) and a retransmission
 * again; each is one message. LRU: a connection's next message has another sequence
 * number, so only recent ones need remembering.
 */
struct usm_pkt_key {
	__u8 src[16];
	__u8 dst[16];
	__be16 sport;
	__be16 dport;
	__be32 seq;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct usm_pkt_key);
	__type(value, __u8);
} usm_pkt_seen SEC(".maps");

TLM_MAP_KEY(usm_pkt_seen);

static __always_inline void usm_pkt_key_of(struct usm_pkt_key *k, const __u8 *src,
					   const __u8 *dst, const struct usm_tcp_hdr *tcp)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->sport = tcp->source;
	k->dport = tcp->dest;
	k->seq = tcp->seq;
	__builtin_memcpy(k->src, src, sizeof(k->src));
	__builtin_memcpy(k->dst, dst, sizeof(k->dst));
}

/* Was this segment seen before (on another device, or sent again)? Notes it if not. */
static __always_inline bool usm_pkt_again(TLM_PARAM, const __u8 *src, const __u8 *dst,
					  const struct usm_tcp_hdr *tcp)
{
	struct usm_pkt_key k;
	__u8 one = 1;

	usm_pkt_key_of(&k, src, dst, tcp);
	if (bpf_map_lookup_elem(&usm_pkt_seen, &k))
		return true;
	return tlm_map_insert(usm_pkt_seen, &k, &one) == -EEXIST; /* another CPU's copy */
}

/* ... without noting it: a copy must not spend an h2c connection's budget. */
static __always_inline bool usm_pkt_seen_before(const __u8 *src, const __u8 *dst,
						const struct usm_tcp_hdr *tcp)
{
	struct usm_pkt_key k;

	usm_pkt_key_of(&k, src, dst, tcp);
	return bpf_map_lookup_elem(&usm_pkt_seen, &k);
}

static __always_inline void usm_h2c_key_of(struct usm_h2c_key *key, const __u8 *client,
					   const __u8 *server, __u16 cport, __u16 sport,
					   __u8 family)
{
	__builtin_memset(key, 0, sizeof(*key));
	__builtin_memcpy(key->client, client, 16);
	__builtin_memcpy(key->server, server, 16);
	key->client_port = cport;
	key->server_port = sport;
	key->family = family;
}

/* One segment of the budget *left; the connection is forgotten when both are spent. */
static __always_inline bool usm_h2c_take(TLM_PARAM, struct usm_h2c_key *key,
					 struct usm_h2c_left *l, bool client)
{
	__u32 *n = client ? &l->client : &l->server;

	if (!*n)
		return false;
	/* Not atomic: two CPUs racing here send a segment more or less, no harm. */
	*n -= 1;
	if (!l->client && !l->server)
		tlm_map_take(usm_h2c_conns, key);
	return true;
}

#define USM_H2C_COPY (-2) /* a segment seen before: its budget was spent then */

/*
 * A segment that starts no HTTP/1 message, from src to dst: is it h2c? Returns
 * USM_KIND_H2C_CLIENT, USM_KIND_H2C_SERVER, USM_H2C_COPY (a copy of one that was:
 * another device's, a retransmission, which spends none of the connection's budget)
 * or -1.
 */
static __always_inline int usm_h2c_classify(TLM_PARAM, const char *peek, const __u8 *src,
					    const __u8 *dst, const struct usm_tcp_hdr *tcp,
					    __u8 family)
{
	struct usm_h2c_left init = {USM_H2C_CLIENT_SEGMENTS - 1, USM_H2C_SERVER_SEGMENTS}, *l;
	__u16 sport = bpf_ntohs(tcp->source), dport = bpf_ntohs(tcp->dest);
	struct usm_h2c_key key;

	/* Back from a server? */
	usm_h2c_key_of(&key, dst, src, dport, sport, family);
	l = bpf_map_lookup_elem(&usm_h2c_conns, &key);
	if (l && usm_pkt_seen_before(src, dst, tcp))
		return USM_H2C_COPY;
	if (l)
		return usm_h2c_take(TLM_ARG, &key, l, false) ? USM_KIND_H2C_SERVER : -1;
	usm_h2c_key_of(&key, src, dst, sport, dport, family);
	l = bpf_map_lookup_elem(&usm_h2c_conns, &key);
	if (l && !usm_h2_preface_start(peek) && usm_pkt_seen_before(src, dst, tcp))
		return USM_H2C_COPY;
	if (l && !usm_h2_preface_start(peek))
		return usm_h2c_take(TLM_ARG, &key, l, true) ? USM_KIND_H2C_CLIENT : -1;
	if (usm_h2_preface_start(peek)) {
		if (usm_pkt_seen_before(src, dst, tcp))
			return USM_H2C_COPY; /* it would start the connection's budget over */
		/* The server's SETTINGS may have been inserted on another CPU between the
		 * lookup and here (both ends write at once on connect): then its entry, with
		 * no client budget yet, is the one to give the client's segments to. */
		if (!l && tlm_map_insert(usm_h2c_conns, &key, &init) == -EEXIST)
			l = bpf_map_lookup_elem(&usm_h2c_conns, &key);
		/* After its server's SETTINGS; or an entry left by an earlier connection of
		 * these ports, its budget part spent (one side silent): the new connection's
		 * server gets its segments too, all but the one a SETTINGS first would
		 * have spent. */
		if (l) {
			l->client = USM_H2C_CLIENT_SEGMENTS - 1;
			if (l->server < USM_H2C_SERVER_SEGMENTS - 1)
				l->server = USM_H2C_SERVER_SEGMENTS - 1;
		}
		return USM_KIND_H2C_CLIENT;
	}
	if (!usm_h2_settings_start(peek))
		return -1;
	/* A server's SETTINGS before its client's preface: sent, and the state keyed as
	 * that connection (client side first), waiting for the preface. Lost to the
	 * preface's insert on another CPU: one segment of the entry it made. */
	usm_h2c_key_of(&key, dst, src, dport, sport, family);
	init.client = 0;
	init.server = USM_H2C_SERVER_SEGMENTS - 1;
	if (tlm_map_insert(usm_h2c_conns, &key, &init) == -EEXIST) {
		if (usm_pkt_seen_before(src, dst, tcp))
			return USM_H2C_COPY;
		l = bpf_map_lookup_elem(&usm_h2c_conns, &key);
		if (l && !usm_h2c_take(TLM_ARG, &key, l, false))
			return -1;
	}
	return USM_KIND_H2C_SERVER;
}

/*
 * Past an IPv6 packet's extension headers (hop-by-hop, routing, destination options,
 * fragment, authentication), up to USM_IP6_EXT_MAX: the offset of its transport header
 * from the network header's start in *l4, that header's protocol returned; -1 for a
 * packet not to look at (unreadable; a fragment after the first, with no TCP header;
 * ESP, whose rest is encrypted), counted when its chain is longer than walked.
 */
static __always_inline int usm_ip6_transport(TLM_PARAM, struct __sk_buff *skb, __u8 next,
					     __u32 *l4)
{
	__u32 off = sizeof(struct ipv6hdr);
	__u8 ext[4];
	int i;

	for (i = 0; i < USM_IP6_EXT_MAX; i++) {
		if (next != USM_IP6_HOPOPTS && next != USM_IP6_ROUTING &&
		    next != USM_IP6_FRAGMENT && next != USM_IP6_AUTH && next != USM_IP6_DSTOPTS)
			break;
		if (tlm_skb_load_bytes_relative(skb, off, ext, sizeof(ext), BPF_HDR_START_NET))
			return -1;
		if (next == USM_IP6_FRAGMENT) {
			if (((ext[2] << 8) | ext[3]) & USM_IP6_FRAG_OFFSET)
				return -1;
			off += 8;
		} else if (next == USM_IP6_AUTH) {
			off += (ext[1] + 2) * 4;
		} else {
			off += (ext[1] + 1) * 8;
		}
		next = ext[0];
	}
	if (next == USM_IP6_HOPOPTS || next == USM_IP6_ROUTING || next == USM_IP6_FRAGMENT ||
	    next == USM_IP6_AUTH || next == USM_IP6_DSTOPTS) {
		usm_count(USM_CNT_PACKETS_IP6_DEEP);
		return -1;
	}
	*l4 = off;
	return next;
}

/* An IP packet's TCP segment as the socket filter found it: addresses, where the TCP
 * header begins (from the network header) and how many bytes follow it. */
struct usm_seg {
	__u8 client[16]; /* the source's address (the client's for a request) */
	__u8 server[16]; /* the destination's */
	__u64 now;
	__u32 l4;
	__u32 plen;
	__u32 tlm_prog;
	__u8 family;
	__u8 __pad[3];
};

/*
 * The segment of an IPv4 or IPv6 packet whose header the socket filter read (sg): its
 * TCP header, payload, classification and record. A global function, verified once:
 * inlined, it was verified again along each of the paths that parsed an IP header,
 * most of what the verifier walked in the socket filter.
 */
__noinline int usm_segment(struct __sk_buff *skb, struct usm_seg *sg)
{
	__u32 __tlm_prog, l4, payload, plen, n, net[5];
	__u8 *client, *server, family;
	struct usm_tcp_hdr tcp;
	char peek[USM_PEEK];
	struct usm_event *ev;
	int net_off, kind;
	__u64 now;

	if (!sg)
		return 0;
	__tlm_prog = sg->tlm_prog;
	client = sg->client;
	server = sg->server;
	family = sg->family;
	/* Both from 16-bit header fields: the masks change nothing but give the verifier
	 * the bounds it knew when this was inlined. */
	l4 = sg->l4 & 0xffff;
	plen = sg->plen & 0xffff;
	now = sg->now;
	if (tlm_skb_load_bytes_relative(skb, 0, net, sizeof(net), BPF_HDR_START_NET))
		return 0;
	if (tlm_skb_load_bytes_relative(skb, l4, &tcp, sizeof(tcp), BPF_HDR_START_NET))
		return 0;
	n = (tcp.res1_doff >> 4) * 4; /* TCP header, options included */
	if (n < sizeof(tcp) || plen <= n)
		return 0; /* a bare ACK, SYN, FIN: no payload */
	plen -= n;
	payload = l4 + n;
	usm_count(USM_CNT_PACKETS);
	/* A reset's payload is no message (RFC 5961: a diagnostic, if anything). A SYN's
	 * (TCP Fast Open) begins one past its sequence number, where a resent copy of the
	 * same bytes begins: numbered so, the two are one message. */
	if (tcp.flags & USM_TCP_RST)
		return 0;
	if (tcp.flags & USM_TCP_SYN)
		tcp.seq = bpf_htonl(bpf_ntohl(tcp.seq) + 1);
	if (plen < USM_PEEK)
		return 0;
	net_off = usm_net_offset(TLM_ARG, skb, net);
	if (net_off < 0) {
		usm_count(USM_CNT_PACKETS_UNREAD);
		return 0;
	}
	payload += net_off;
	if (tlm_skb_load_bytes(skb, payload, peek, sizeof(peek))) {
		usm_count(USM_CNT_TRUNCATED); /* the IP header promised more than arrived */
		return 0;
	}
	kind = usm_classify(peek);
	if (kind < 0)
		kind = usm_h2c_classify(TLM_ARG, peek, client, server, &tcp, family);
	if (kind < 0 && kind != USM_H2C_COPY)
		return 0;
	if (kind == USM_H2C_COPY || usm_pkt_again(TLM_ARG, client, server, &tcp)) {
		usm_count(USM_CNT_PACKETS_DUPLICATE);
		return 0;
	}
	ev = usm_event_reserve(TLM_ARG);
	if (!ev)
		return 0;
	n = plen < USM_PREFIX ? plen : USM_PREFIX;
	if (tlm_skb_load_bytes(skb, payload, ev->prefix, n)) {
		usm_count(USM_CNT_TRUNCATED);
		usm_event_discard(ev);
		return 0;
	}
	/* What NAT leaves alone: a copy of this segment seen under other addresses (a
	 * container's, masqueraded out of the host) carries the same (usm.c, nat_copies.h). */
	ev->conn = (__u64)bpf_ntohl(tcp.seq) << 32 | bpf_ntohl(tcp.ack_seq);
	ev->pid = 0;
	ev->tid = 0;
	ev->source = USM_SRC_SOCKET;
	ev->family = family;
	ev->dir = 0;
	ev->fd = -1;
	ev->__pad3 = 0;
	/* A request goes client -> server; a response comes back. */
	if (kind == USM_KIND_REQUEST || kind == USM_KIND_H2C_CLIENT) {
		ev->client_port = bpf_ntohs(tcp.source);
		ev->server_port = bpf_ntohs(tcp.dest);
		__builtin_memcpy(ev->client_addr, client, 16);
		__builtin_memcpy(ev->server_addr, server, 16);
	} else {
		ev->client_port = bpf_ntohs(tcp.dest);
		ev->server_port = bpf_ntohs(tcp.source);
		__builtin_memcpy(ev->client_addr, server, 16);
		__builtin_memcpy(ev->server_addr, client, 16);
	}
	usm_event_submit(ev, now, kind, plen, n,
			 kind >= USM_KIND_H2C_CLIENT ? USM_CNT_H2C_PACKETS : USM_CNT_PACKETS_HTTP);
	return 0;
}

static __always_inline int usm_socket_body(TLM_PARAM, struct __sk_buff *skb, __u64 now)
{
	struct usm_seg sg = {.now = now, .tlm_prog = TLM_ARG};
	__u8 *client = sg.client, *server = sg.server, ver;
	__u32 l4, plen;

	/* Each packet once: ours (PACKET_HOST) or sent by this host (PACKET_OUTGOING), not
	 * other hosts' in promiscuous mode, broadcasts or multicast loopback; and on
	 * loopback, where a packet is both sent and received, only its receipt. */
	if (skb->pkt_type != USM_PACKET_HOST && skb->pkt_type != USM_PACKET_OUTGOING)
		return 0;
	if (skb->pkt_type == USM_PACKET_OUTGOING && skb->ifindex == usm_lo_ifindex)
		return 0;
	if (tlm_skb_load_bytes_relative(skb, 0, &ver, 1, BPF_HDR_START_NET))
		return 0;
	if ((ver >> 4) == 4) {
		struct iphdr ip;

		if (tlm_skb_load_bytes_relative(skb, 0, &ip, sizeof(ip), BPF_HDR_START_NET))
			return 0;
		if (ip.protocol != USM_IPPROTO_TCP || ip.ihl < 5 ||
		    (bpf_ntohs(ip.frag_off) & USM_IP_OFFSET))
			return 0;
		sg.family = 4;
		l4 = ip.ihl * 4;
		plen = bpf_ntohs(ip.tot_len);
		if (!plen) { /* over 64 KiB: BIG TCP (segmented later, or a GRO one) */
			usm_count(USM_CNT_PACKETS_UNREAD);
			return 0;
		}
		if (plen < l4)
			return 0;
		plen -= l4;
		__builtin_memcpy(client, &ip.saddr, 4);
		__builtin_memcpy(server, &ip.daddr, 4);
	} else if ((ver >> 4) == 6) {
		struct ipv6hdr ip6;

		if (tlm_skb_load_bytes_relative(skb, 0, &ip6, sizeof(ip6), BPF_HDR_START_NET))
			return 0;
		if (usm_ip6_transport(TLM_ARG, skb, ip6.nexthdr, &l4) != USM_IPPROTO_TCP)
			return 0;
		sg.family = 6;
		plen = bpf_ntohs(ip6.payload_len); /* the extension headers, then TCP's */
		if (!plen) { /* a jumbogram's: over 64 KiB (BIG TCP) */
			usm_count(USM_CNT_PACKETS_UNREAD);
			return 0;
		}
		if (plen < l4 - sizeof(ip6))
			return 0;
		plen -= l4 - sizeof(ip6);
		__builtin_memcpy(client, &ip6.saddr, 16);
		__builtin_memcpy(server, &ip6.daddr, 16);
	} else {
		return 0;
	}
	sg.l4 = l4;
	sg.plen = plen;
	usm_segment(skb, &sg);
	return 0; /* a socket filter's bytes to queue on the agent's socket: none, ever */
}

#endif /* BPFTEL_LIB_USM_SOCKET_H */
