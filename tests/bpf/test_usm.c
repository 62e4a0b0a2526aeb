// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * BPF_PROG_TEST_RUN tests of bpf/usm.bpf.c: the socket filter on crafted packets
 * (IPv4, IPv6, TCP options, split and truncated segments, non-HTTP, no payload), and
 * the TLS probe bodies on synthetic registers and buffers, and their HTTP/2 frame walk
 * (what is copied, skipped and cut; calls split anywhere; detection and restarts).
 * Each case checks the ring buffers and the counters.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <linux/types.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "harness.h"
#include "uprobe_hits.h"
#include "usm.h"
#include "bpf/fair_share_defs.h" /* before the skeleton: its .bss has its types */
#include "usm_harness.skel.h"
#include "user/modules/usm/tls_retry.h"
#include "user/modules/usm/fair_share.h"

/* bpf/lib/usm_socket.h's USM_H2C_SERVER_SEGMENTS. */
#define USM_H2C_SERVER_SEGMENTS_TEST 4

static struct usm_harness *skel;
static struct bpftel_rb_capture cap;

/* ---- packets ---- */

struct pkt {
	unsigned char b[1600];
	size_t len;
};

static const uint8_t ip4_client[4] = {10, 0, 0, 1}, ip4_server[4] = {10, 0, 0, 2};
static const uint8_t ip6_client[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t ip6_server[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

/* Ethernet + IPv4 or IPv6 + TCP (with opt_len bytes of options) + payload. from_client:
 * client 40000 -> server 80, else the reverse. tot_extra inflates the IP length. Each
 * packet built has a sequence number of its own: the same one run twice is a copy
 * (another device's, a retransmission). */
static void build(struct pkt *p, int family, bool from_client, size_t opt_len, const char *data,
		  size_t dlen, int tot_extra)
{
	static uint32_t next_seq = 1000;
	unsigned char *ip = p->b + 14, *tcp;
	size_t iphl = family == 4 ? 20 : 40, tcphl = 20 + opt_len;
	uint16_t sport = from_client ? 40000 : 80, dport = from_client ? 80 : 40000, v;
	uint32_t seq = htonl(next_seq), ack = htonl(next_seq ^ 0x5a5a5a5au);

	next_seq += 1000;
	memset(p, 0, sizeof(*p));
	p->b[12] = family == 4 ? 0x08 : 0x86;
	p->b[13] = family == 4 ? 0x00 : 0xdd;
	if (family == 4) {
		ip[0] = 0x45;
		v = htons((uint16_t)(iphl + tcphl + dlen + tot_extra));
		memcpy(ip + 2, &v, 2);
		ip[8] = 64;
		ip[9] = 6;
		memcpy(ip + 12, from_client ? ip4_client : ip4_server, 4);
		memcpy(ip + 16, from_client ? ip4_server : ip4_client, 4);
	} else {
		ip[0] = 0x60;
		v = htons((uint16_t)(tcphl + dlen + tot_extra));
		memcpy(ip + 4, &v, 2);
		ip[6] = 6;
		ip[7] = 64;
		memcpy(ip + 8, from_client ? ip6_client : ip6_server, 16);
		memcpy(ip + 24, from_client ? ip6_server : ip6_client, 16);
	}
	tcp = ip + iphl;
	v = htons(sport);
	memcpy(tcp, &v, 2);
	v = htons(dport);
	memcpy(tcp + 2, &v, 2);
	memcpy(tcp + 4, &seq, 4);
	memcpy(tcp + 8, &ack, 4);
	tcp[12] = (uint8_t)((tcphl / 4) << 4);
	tcp[13] = 0x18;		      /* PSH ACK */
	memset(tcp + 20, 1, opt_len); /* NOPs */
	memcpy(tcp + tcphl, data, dlen);
	p->len = 14 + iphl + tcphl + dlen;
}

static int run_packet(const struct pkt *p)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = p->b, .data_size_in = (__u32)p->len);

	assert_int_equal(
		bpf_prog_test_run_opts(bpf_program__fd(skel->progs.usm_http_socket), &opts), 0);
	assert_int_equal(opts.retval, 0); /* the socket itself never gets a packet */
	return bpftel_rb_capture__drain(&cap);
}

static __u64 counter(enum usm_counter c)
{
	return bpftel_test_percpu_sum(bpf_map__fd(skel->maps.usm_counters), c);
}

static const struct usm_event *event(int i)
{
	assert_int_equal(cap.rec[i].size, sizeof(struct usm_event));
	return cap.rec[i].data;
}

static void packet(int family, bool from_client, size_t opt, const char *s, int want)
{
	struct pkt p;

	build(&p, family, from_client, opt, s, strlen(s), 0);
	assert_int_equal(run_packet(&p), want);
}

static void test_ipv4_request_and_response(void **state)
{
	const char *req = "GET /items/42?x=1 HTTP/1.1\r\nHost: a\r\n\r\n";
	const struct usm_event *ev;
	uint32_t seq, ack;
	struct pkt p;

	(void)state;
	build(&p, 4, true, 0, req, strlen(req), 0);
	assert_int_equal(run_packet(&p), 1);
	ev = event(0);
	/* The segment's TCP numbers, which NAT leaves alone: how userspace knows a copy
	 * of it under other addresses. */
	memcpy(&seq, p.b + 14 + 20 + 4, 4);
	memcpy(&ack, p.b + 14 + 20 + 8, 4);
	assert_true(seq && ack);
	assert_int_equal(ev->conn, (uint64_t)ntohl(seq) << 32 | ntohl(ack));
	assert_int_equal(ev->source, USM_SRC_SOCKET);
	assert_int_equal(ev->kind, USM_KIND_REQUEST);
	assert_int_equal(ev->family, 4);
	assert_int_equal(ev->pid, 0);
	assert_int_equal(ev->client_port, 40000);
	assert_int_equal(ev->server_port, 80);
	assert_memory_equal(ev->client_addr, ip4_client, 4);
	assert_memory_equal(ev->server_addr, ip4_server, 4);
	assert_int_equal(ev->len, strlen(req));
	assert_int_equal(ev->prefix_len, strlen(req));
	assert_memory_equal(ev->prefix, req, strlen(req));
	assert_true(ev->ktime_ns > 0);
	/* The response flows server -> client: reported client side first all the same. */
	packet(4, false, 0, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 1);
	ev = event(0);
	assert_int_equal(ev->kind, USM_KIND_RESPONSE);
	assert_int_equal(ev->client_port, 40000);
	assert_int_equal(ev->server_port, 80);
	assert_memory_equal(ev->client_addr, ip4_client, 4);
	assert_int_equal(counter(USM_CNT_PACKETS), 2);
	assert_int_equal(counter(USM_CNT_PACKETS_HTTP), 2);
}

static void test_ipv6_request_and_response(void **state)
{
	const struct usm_event *ev;

	(void)state;
	packet(6, true, 0, "POST /api/v1/users HTTP/1.1\r\n\r\n", 1);
	ev = event(0);
	assert_int_equal(ev->family, 6);
	assert_memory_equal(ev->client_addr, ip6_client, 16);
	assert_memory_equal(ev->server_addr, ip6_server, 16);
	packet(6, false, 0, "HTTP/1.1 201 Created\r\n\r\n", 1);
	ev = event(0);
	assert_int_equal(ev->kind, USM_KIND_RESPONSE);
	assert_memory_equal(ev->client_addr, ip6_client, 16);
}

static void test_tcp_options_skipped(void **state)
{
	const struct usm_event *ev;

	(void)state;
	packet(4, true, 12, "GET /opt HTTP/1.1\r\n\r\n", 1); /* timestamps: doff 8 */
	ev = event(0);
	assert_memory_equal(ev->prefix, "GET /opt", 8);
	packet(6, false, 40, "HTTP/1.0 404 Not Found\r\n", 1); /* doff 15, the most */
	assert_memory_equal(event(0)->prefix, "HTTP/1.0 404", 12);
}

/* An IPv6 extension header of type `type` and len bytes (its own next header set to
 * what followed the fixed header) put right after the fixed header of p. */
static void ip6_ext(struct pkt *p, uint8_t type, const unsigned char *ext, size_t len)
{
	unsigned char *ip = p->b + 14;
	uint16_t plen;

	memmove(ip + 40 + len, ip + 40, p->len - 14 - 40);
	memcpy(ip + 40, ext, len);
	ip[40] = ip[6];
	ip[6] = type;
	memcpy(&plen, ip + 4, 2);
	plen = htons((uint16_t)(ntohs(plen) + len));
	memcpy(ip + 4, &plen, 2);
	p->len += len;
}

/* IPv6 with extension headers before TCP: walked (hop-by-hop, destination options,
 * routing, a first fragment, AH), up to 4; a later fragment holds no TCP header; past
 * 4, counted and not looked at; not TCP after them: nothing. */
static void test_ipv6_extension_headers(void **state)
{
	const char *req = "GET /ext HTTP/1.1\r\n\r\n";
	unsigned char hop[8] = {0, 0, 1, 4}, dst[16] = {0, 1, 1, 12};
	unsigned char rt[24] = {0, 2, 0, 0}, auth[16] = {0, 2};
	unsigned char frag[8] = {0, 0, 0, 1 /* offset 0, more fragments */, 0, 0, 0, 7};
	unsigned char later[8] = {0, 0, 0x05, 0x01 /* offset 160 */, 0, 0, 0, 7};
	unsigned char udp_hop[8] = {0};
	struct pkt p;

	(void)state;
	build(&p, 6, true, 0, req, strlen(req), 0);
	ip6_ext(&p, 60, dst, sizeof(dst));
	ip6_ext(&p, 0, hop, sizeof(hop));
	assert_int_equal(run_packet(&p), 1);
	assert_int_equal(event(0)->family, 6);
	assert_int_equal(event(0)->client_port, 40000);
	assert_int_equal(event(0)->len, strlen(req));
	assert_memory_equal(event(0)->prefix, req, strlen(req));
	assert_memory_equal(event(0)->client_addr, ip6_client, 16);
	/* Four: routing, a first fragment, AH, destination options. */
	build(&p, 6, false, 12, "HTTP/1.1 200 OK\r\n\r\n", 19, 0);
	ip6_ext(&p, 60, dst, sizeof(dst));
	ip6_ext(&p, 51, auth, sizeof(auth));
	ip6_ext(&p, 44, frag, sizeof(frag));
	ip6_ext(&p, 43, rt, sizeof(rt));
	assert_int_equal(run_packet(&p), 1);
	assert_int_equal(event(0)->kind, USM_KIND_RESPONSE);
	assert_int_equal(event(0)->len, 19);
	assert_int_equal(counter(USM_CNT_PACKETS), 2);
	/* A later fragment: its bytes are no TCP header, not looked at. */
	build(&p, 6, true, 0, req, strlen(req), 0);
	ip6_ext(&p, 44, later, sizeof(later));
	assert_int_equal(run_packet(&p), 0);
	assert_int_equal(counter(USM_CNT_PACKETS), 2);
	/* Five: counted, not looked at. */
	build(&p, 6, true, 0, req, strlen(req), 0);
	ip6_ext(&p, 60, dst, sizeof(dst));
	ip6_ext(&p, 60, dst, sizeof(dst));
	ip6_ext(&p, 43, rt, sizeof(rt));
	ip6_ext(&p, 60, dst, sizeof(dst));
	ip6_ext(&p, 0, hop, sizeof(hop));
	assert_int_equal(run_packet(&p), 0);
	assert_int_equal(counter(USM_CNT_PACKETS_IP6_DEEP), 1);
	/* UDP (17) after a hop-by-hop header: not ours, not counted. */
	build(&p, 6, true, 0, req, strlen(req), 0);
	p.b[14 + 6] = 17;
	ip6_ext(&p, 0, udp_hop, sizeof(udp_hop));
	assert_int_equal(run_packet(&p), 0);
	assert_int_equal(counter(USM_CNT_PACKETS), 2);
	assert_int_equal(counter(USM_CNT_PACKETS_IP6_DEEP), 1);
}

/* A request line across two segments: the first starts the message (recorded with
 * what it holds), the second starts nothing. */
static void test_split_request(void **state)
{
	const struct usm_event *ev;

	(void)state;
	packet(4, true, 0, "GET /items/12", 1);
	ev = event(0);
	assert_int_equal(ev->prefix_len, strlen("GET /items/12"));
	packet(4, true, 0, "34 HTTP/1.1\r\nHost: a\r\n\r\n", 0);
	assert_int_equal(counter(USM_CNT_PACKETS), 2);
	assert_int_equal(counter(USM_CNT_PACKETS_HTTP), 1);
}

/* Only USM_PREFIX bytes of a long message leave the kernel. */
static void test_long_request_prefix_only(void **state)
{
	char req[1200];

	(void)state;
	memset(req, 'a', sizeof(req) - 1);
	req[sizeof(req) - 1] = '\0';
	memcpy(req, "GET /", 5);
	packet(4, true, 0, req, 1);
	assert_int_equal(event(0)->prefix_len, USM_PREFIX);
	assert_int_equal(event(0)->len, strlen(req));
}

/* Methods other than the standard ones: 3 to 6 upper-case letters, a space and '/'
 * are forwarded (userspace reports them as _OTHER); anything else is not HTTP/1.x. */
static void test_other_methods(void **state)
{
	static const char *const yes[] = {"BRW /x HTTP/1.1\r\n", "PURGE /x HTTP/1.1\r\n",
					  "MKCOL /d HTTP/1.1\r\n", "UNLOCK /f HTTP/1.1\r\n",
					  "GETS /x HTTP/1.1\r\n"};
	static const char *const no[] = {"PROPFIND /x HTTP/1.1\r\n", "get /x HTTP/1.1\r\n",
					 "AB /x HTTP/1.1\r\n", "PURGE x HTTP/1.1\r\n",
					 "PUR\x01E /x HTTP/1.1\r\n", "PURGE  /x HTTP/1.1\r\n"};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		packet(4, true, 0, yes[i], 1);
	for (i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		packet(4, true, 0, no[i], 0);
	assert_int_equal(counter(USM_CNT_PACKETS), 11);
	assert_int_equal(counter(USM_CNT_PACKETS_HTTP), 5);
}

static void test_not_http_ignored(void **state)
{
	static const char tls_hello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
	struct pkt p;

	(void)state;
	packet(4, true, 0, "SSH-2.0-OpenSSH_9.2\r\n", 0);
	build(&p, 4, true, 0, tls_hello, sizeof(tls_hello) - 1, 0);
	assert_int_equal(run_packet(&p), 0);
	packet(4, false, 0, "HTTP/2.0 200\r\n", 0);
	packet(4, true, 0, "GET/x HTTP/1.1\r\n", 0);
	packet(4, true, 0, "GET", 0); /* shorter than a peek */
	assert_int_equal(counter(USM_CNT_PACKETS), 5);
	assert_int_equal(counter(USM_CNT_PACKETS_HTTP), 0);
	/* UDP with an HTTP-looking payload: not TCP. */
	build(&p, 4, true, 0, "GET / HTTP/1.1\r\n", 16, 0);
	p.b[14 + 9] = 17;
	assert_int_equal(run_packet(&p), 0);
	/* An ARP frame. */
	memset(&p, 0, sizeof(p));
	p.b[12] = 0x08;
	p.b[13] = 0x06;
	p.len = 60;
	assert_int_equal(run_packet(&p), 0);
	assert_int_equal(counter(USM_CNT_PACKETS), 5);
}

/* Only packets to or from this host: the kernel derives pkt_type from the destination
 * MAC (eth_type_trans on the test run's loopback device, whose address is zero), so a
 * frame for another MAC is PACKET_OTHERHOST, ff:ff:.. PACKET_BROADCAST and 01:00:5e:..
 * PACKET_MULTICAST; none of them is looked at, not even counted as a packet. */
static void test_pkt_type(void **state)
{
	static const uint8_t other[6] = {0x02, 0, 0, 0, 0, 0x01};
	static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	static const uint8_t mcast[6] = {0x01, 0x00, 0x5e, 0x00, 0x00, 0x01};
	const uint8_t *macs[] = {other, bcast, mcast};
	const char *req = "GET /a HTTP/1.1\r\n\r\n";
	struct pkt p;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(macs) / sizeof(macs[0]); i++) {
		build(&p, 4, true, 0, req, strlen(req), 0);
		memcpy(p.b, macs[i], 6);
		assert_int_equal(run_packet(&p), 0);
		build(&p, 6, true, 0, req, strlen(req), 0);
		memcpy(p.b, macs[i], 6);
		assert_int_equal(run_packet(&p), 0);
	}
	assert_int_equal(counter(USM_CNT_PACKETS), 0);
	/* The same frame for this host is seen, and counted once. */
	build(&p, 4, true, 0, req, strlen(req), 0);
	assert_int_equal(run_packet(&p), 1);
	assert_int_equal(counter(USM_CNT_PACKETS), 1);
	assert_int_equal(counter(USM_CNT_PACKETS_HTTP), 1);
}

/*
 * A packet socket on every device sees a packet once per device it crosses (a bond's
 * slave then the bond, a NIC then its VLAN) and a retransmission again: one message
 * each, the copies counted as duplicates. The same request again later, with its own
 * sequence number, is a request again; so is the same segment of another connection.
 */
static void test_duplicate_segments(void **state)
{
	const char *req = "GET /dup HTTP/1.1\r\n\r\n", *resp = "HTTP/1.1 200 OK\r\n\r\n";
	struct pkt p, r;

	(void)state;
	build(&p, 4, true, 0, req, strlen(req), 0);
	assert_int_equal(run_packet(&p), 1);
	assert_int_equal(run_packet(&p), 0); /* the bond's copy */
	assert_int_equal(run_packet(&p), 0); /* sent again */
	build(&r, 6, false, 0, resp, strlen(resp), 0);
	assert_int_equal(run_packet(&r), 1);
	assert_int_equal(run_packet(&r), 0);
	assert_int_equal(counter(USM_CNT_PACKETS_DUPLICATE), 3);
	assert_int_equal(counter(USM_CNT_PACKETS_HTTP), 2);
	build(&p, 4, true, 0, req, strlen(req), 0); /* the next request */
	assert_int_equal(run_packet(&p), 1);
	p.b[14 + 20 + 1] ^= 1; /* another client port, same sequence number */
	assert_int_equal(run_packet(&p), 1);
	assert_int_equal(counter(USM_CNT_PACKETS_HTTP), 4);
	assert_int_equal(counter(USM_CNT_PACKETS_DUPLICATE), 3);
	/* What is not a message start is never remembered (no map work per segment). */
	build(&p, 4, true, 0, "body bytes of a request", 23, 0);
	assert_int_equal(run_packet(&p), 0);
	assert_int_equal(run_packet(&p), 0);
	assert_int_equal(counter(USM_CNT_PACKETS_DUPLICATE), 3);
}

/* TCP Fast Open: a request carried by the SYN begins one past the SYN's sequence
 * number, where its resent copy (the server took no data with the SYN) begins: one
 * request, the copy a duplicate. A reset's payload is never a message. */
static void test_syn_and_reset_payloads(void **state)
{
	const char *req = "GET /tfo HTTP/1.1\r\n\r\n";
	unsigned char *tcp;
	struct pkt p, syn;
	uint32_t seq;

	(void)state;
	build(&p, 4, true, 0, req, strlen(req), 0);
	syn = p;
	tcp = syn.b + 14 + 20;
	memcpy(&seq, tcp + 4, 4);
	seq = htonl(ntohl(seq) - 1);
	memcpy(tcp + 4, &seq, 4);
	memset(tcp + 8, 0, 4); /* no acknowledgment yet */
	tcp[13] = 0x02;	       /* SYN */
	assert_int_equal(run_packet(&syn), 1);
	assert_int_equal(event(0)->kind, USM_KIND_REQUEST);
	assert_int_equal(event(0)->conn >> 32, ntohl(seq) + 1);
	assert_int_equal(run_packet(&p), 0); /* sent again after the SYN */
	assert_int_equal(counter(USM_CNT_PACKETS_DUPLICATE), 1);
	build(&p, 4, true, 0, req, strlen(req), 0);
	p.b[14 + 20 + 13] = 0x14; /* RST ACK */
	assert_int_equal(run_packet(&p), 0);
	assert_int_equal(counter(USM_CNT_PACKETS), 3);
	assert_int_equal(counter(USM_CNT_PACKETS_HTTP), 1);
}

/* An IP length of 0: a packet over 64 KiB (BIG TCP) the tap sees whole, its length
 * not in its header. Not looked into, and counted so. */
static void test_unsized_packets_counted(void **state)
{
	const char *req = "GET /big HTTP/1.1\r\n\r\n";
	struct pkt p;

	(void)state;
	build(&p, 4, true, 0, req, strlen(req), 0);
	memset(p.b + 14 + 2, 0, 2); /* tot_len */
	assert_int_equal(run_packet(&p), 0);
	build(&p, 6, true, 0, req, strlen(req), 0);
	memset(p.b + 14 + 4, 0, 2); /* payload_len: a jumbogram's */
	assert_int_equal(run_packet(&p), 0);
	assert_int_equal(counter(USM_CNT_PACKETS_UNREAD), 2);
	assert_int_equal(counter(USM_CNT_PACKETS_HTTP), 0);
	build(&p, 4, true, 0, req, strlen(req), 0);
	assert_int_equal(run_packet(&p), 1);
	assert_int_equal(counter(USM_CNT_PACKETS_UNREAD), 2);
}

static void test_no_payload(void **state)
{
	struct pkt p;

	(void)state;
	build(&p, 4, true, 0, "", 0, 0); /* a bare ACK */
	assert_int_equal(run_packet(&p), 0);
	build(&p, 6, true, 20, "", 0, 0);
	assert_int_equal(run_packet(&p), 0);
	assert_int_equal(counter(USM_CNT_PACKETS), 0);
}

/* Headers that promise more than the packet holds: nothing read past its end. */
static void test_truncated_packets(void **state)
{
	struct pkt p;

	(void)state;
	/* IP length says 100 bytes more payload than there is. */
	build(&p, 4, true, 0, "GET /x HTTP/1.1\r\n", 17, 100);
	p.len = 14 + 20 + 20 + 4; /* and only 4 payload bytes made it */
	assert_int_equal(run_packet(&p), 0);
	assert_int_equal(counter(USM_CNT_TRUNCATED), 1);
	/* Cut inside the TCP header. */
	build(&p, 4, true, 0, "GET /x HTTP/1.1\r\n", 17, 0);
	p.len = 14 + 20 + 10;
	assert_int_equal(run_packet(&p), 0);
	/* IPv6, cut inside the TCP header (test_run itself refuses a packet cut inside
	 * the IP header: it pulls that header before the program runs). */
	build(&p, 6, true, 0, "GET /x HTTP/1.1\r\n", 17, 0);
	p.len = 14 + 40 + 12;
	assert_int_equal(run_packet(&p), 0);
	assert_int_equal(counter(USM_CNT_PACKETS_HTTP), 0);
}

/* Cleartext HTTP/2 with prior knowledge: the client's preface segment and its next
 * two, the server's first four segments (its SETTINGS may come first); nothing else of
 * the connection, nothing of another. */
/* A copy of an h2c segment (another device's, a retransmission) is a duplicate, and
 * spends none of its connection's budget: the server's 4 segments are 4 real ones. */
static void test_h2c_copies_spend_nothing(void **state)
{
	static const unsigned char settings[15] = {0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100};
	static const unsigned char headers[14] = {0, 0, 5, 1, 4, 0, 0, 0, 1, 0x88, 1, 2, 3, 4};
	unsigned char first[64] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	struct pkt p, pre;
	int i;

	(void)state;
	memcpy(first + 24, settings, sizeof(settings));
	build(&pre, 6, true, 0, (const char *)first, 24 + 15, 0);
	assert_int_equal(run_packet(&pre), 1);
	for (i = 0; i < USM_H2C_SERVER_SEGMENTS_TEST; i++) {
		build(&p, 6, false, 0, (const char *)(i ? headers : settings), i ? 14 : 15, 0);
		assert_int_equal(run_packet(&p), 1);
		assert_int_equal(event(0)->kind, USM_KIND_H2C_SERVER);
		assert_int_equal(run_packet(&p), 0); /* its copy */
	}
	build(&p, 6, false, 0, (const char *)headers, 14, 0);
	assert_int_equal(run_packet(&p), 0); /* the budget spent: by the 4, not their copies */
	assert_int_equal(counter(USM_CNT_PACKETS_DUPLICATE), USM_H2C_SERVER_SEGMENTS_TEST);
	/* The client's: a copy of its next segment likewise. */
	build(&p, 6, true, 0, (const char *)headers, 14, 0);
	assert_int_equal(run_packet(&p), 1);
	assert_int_equal(run_packet(&p), 0);
	build(&p, 6, true, 0, (const char *)headers, 14, 0);
	assert_int_equal(run_packet(&p), 1);
	assert_int_equal(counter(USM_CNT_H2C_PACKETS), 1 + USM_H2C_SERVER_SEGMENTS_TEST + 2);
	/* Both budgets spent, the connection forgotten: a late copy of its preface does not
	 * start it over, and the client's next segment is not sent. */
	assert_int_equal(run_packet(&pre), 0);
	build(&p, 6, true, 0, (const char *)headers, 14, 0);
	assert_int_equal(run_packet(&p), 0);
	assert_int_equal(counter(USM_CNT_PACKETS_DUPLICATE), USM_H2C_SERVER_SEGMENTS_TEST + 2);
}

/* A connection's ports used again by the next (its server's budget spent, its
 * client's not, so the first one's entry stayed): the new preface gives the new
 * server its segments too, not only the client. */
static void test_h2c_ports_reused(void **state)
{
	static const unsigned char settings[15] = {0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100};
	unsigned char first[64] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	struct pkt p;
	int conn, i;

	(void)state;
	memcpy(first + 24, settings, sizeof(settings));
	for (conn = 0; conn < 2; conn++) {
		build(&p, 4, true, 0, (const char *)first, 24 + 15, 0);
		assert_int_equal(run_packet(&p), 1);
		assert_int_equal(event(0)->kind, USM_KIND_H2C_CLIENT);
		for (i = 0; i < USM_H2C_SERVER_SEGMENTS_TEST - conn; i++) {
			build(&p, 4, false, 0, (const char *)settings, sizeof(settings), 0);
			assert_int_equal(run_packet(&p), 1);
			assert_int_equal(event(0)->kind, USM_KIND_H2C_SERVER);
		}
		build(&p, 4, false, 0, (const char *)settings, sizeof(settings), 0);
		assert_int_equal(run_packet(&p), 0);
	}
	assert_int_equal(counter(USM_CNT_H2C_PACKETS), 2 + 2 * USM_H2C_SERVER_SEGMENTS_TEST - 1);
}

static void test_h2c_segments(void **state)
{
	static const unsigned char settings[15] = {0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100};
	static const unsigned char ack[9] = {0, 0, 0, 4, 1, 0, 0, 0, 0};
	static const unsigned char headers[14] = {0, 0, 5, 1, 4, 0, 0, 0, 1, 0x88, 1, 2, 3, 4};
	unsigned char first[96] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	const struct usm_event *ev;
	struct pkt p;
	int i;

	(void)state;
	memcpy(first + 24, settings, sizeof(settings));
	memcpy(first + 24 + 15, headers, sizeof(headers));
	/* The server's SETTINGS, before the client's preface arrived. */
	build(&p, 4, false, 0, (const char *)settings, sizeof(settings), 0);
	assert_int_equal(run_packet(&p), 1);
	ev = event(0);
	assert_int_equal(ev->kind, USM_KIND_H2C_SERVER);
	assert_int_equal(ev->client_port, 40000);
	assert_int_equal(ev->server_port, 80);
	assert_memory_equal(ev->client_addr, ip4_client, 4);
	assert_int_equal(ev->prefix_len, sizeof(settings));
	build(&p, 4, true, 0, (const char *)first, 24 + 15 + 14, 0);
	assert_int_equal(run_packet(&p), 1);
	ev = event(0);
	assert_int_equal(ev->kind, USM_KIND_H2C_CLIENT);
	assert_int_equal(ev->client_port, 40000);
	assert_int_equal(ev->prefix_len, 24 + 15 + 14);
	assert_memory_equal(ev->prefix, first, 24 + 15 + 14);
	/* Three more server segments, then no more. */
	for (i = 0; i < 3; i++) {
		build(&p, 4, false, 0, (const char *)(i ? headers : ack), i ? 14 : 9, 0);
		assert_int_equal(run_packet(&p), 1);
		assert_int_equal(event(0)->kind, USM_KIND_H2C_SERVER);
	}
	build(&p, 4, false, 0, (const char *)headers, 14, 0);
	assert_int_equal(run_packet(&p), 0);
	/* The client's next two segments (a HEADERS written apart from the preface), not
	 * a third. */
	for (i = 0; i < 2; i++) {
		build(&p, 4, true, 0, (const char *)headers, 14, 0);
		assert_int_equal(run_packet(&p), 1);
		assert_int_equal(event(0)->kind, USM_KIND_H2C_CLIENT);
		assert_int_equal(event(0)->client_port, 40000);
	}
	build(&p, 4, true, 0, (const char *)headers, 14, 0);
	assert_int_equal(run_packet(&p), 0);
	assert_int_equal(counter(USM_CNT_H2C_PACKETS), 7);
	assert_int_equal(counter(USM_CNT_PACKETS_HTTP), 0);
	/* Another connection's frames, without its start: nothing (IPv6 this time). */
	build(&p, 6, false, 0, (const char *)headers, 14, 0);
	assert_int_equal(run_packet(&p), 0);
	build(&p, 6, false, 0, (const char *)ack, 9, 0); /* an ACK starts nothing */
	assert_int_equal(run_packet(&p), 0);
	assert_int_equal(counter(USM_CNT_H2C_PACKETS), 7);
	/* Both budgets spent: the connection was forgotten, a new preface starts it again. */
	build(&p, 4, true, 0, (const char *)first, 24 + 15 + 14, 0);
	assert_int_equal(run_packet(&p), 1);
	assert_int_equal(event(0)->kind, USM_KIND_H2C_CLIENT);
}

/* ---- TLS ---- */

struct usm_test_call {
	struct test_regs regs;
	__u64 pid_tgid;
	__u64 now;
	__u32 probe;
	__u32 flags;
};

enum { SSL_WRITE, SSL_READ, SSL_WRITE_EX, SSL_READ_EX, GNUTLS_SEND, GNUTLS_RECV };

#define PID_TGID ((4242ull << 32) | 4243)
#define SSL_PTR	 0x55aa00001000ul
#define TLS_SP	 0x7ffd00010000ul /* a read's stack pointer at entry; its return's is 8 up */

static void tls_run_as(int probe, bool ret, struct test_regs *regs, __u64 now, __u64 pid_tgid)
{
	struct usm_test_call ctx = {
		.regs = *regs, .pid_tgid = pid_tgid, .now = now, .probe = (__u32)(probe * 2 + ret)};
	int retval = -1;

	assert_int_equal(bpftel_test_run(skel->progs.usm_test_tls, &ctx, sizeof(ctx), &retval), 0);
	assert_int_equal(retval, 0);
}

static void tls_run(int probe, bool ret, struct test_regs *regs, __u64 now)
{
	tls_run_as(probe, ret, regs, now, PID_TGID);
}

static bool is_read(int probe)
{
	return probe & 1;
}

/* One call as the module probes it: entry at t; a read also returns at t + 100 with rc
 * (a write has no return probe: rc is not looked at). Returns the events emitted. */
static int tls_call(int probe, const void *buf, size_t num, long rc, size_t *size_out, __u64 t)
{
	struct test_regs in = {.di = SSL_PTR,
			       .si = (uintptr_t)buf,
			       .dx = num,
			       .cx = (uintptr_t)size_out,
			       .sp = TLS_SP};
	struct test_regs out = {.ax = (unsigned long)rc, .sp = TLS_SP + 8};

	tls_run(probe, false, &in, t);
	if (is_read(probe))
		tls_run(probe, true, &out, t + 100);
	return bpftel_rb_capture__drain(&cap);
}

static void test_tls_write_request_read_response(void **state)
{
	const char *req = "GET /items/42?x=1 HTTP/1.1\r\nHost: a\r\n\r\n";
	const char *resp = "HTTP/1.1 200 OK\r\n\r\nhello";
	const struct usm_event *ev;

	(void)state;
	assert_int_equal(tls_call(SSL_WRITE, req, strlen(req), (long)strlen(req), NULL, 1000), 1);
	ev = event(0);
	assert_int_equal(ev->source, USM_SRC_OPENSSL);
	assert_int_equal(ev->kind, USM_KIND_REQUEST);
	assert_int_equal(ev->conn, SSL_PTR);
	assert_int_equal(ev->pid, 4242);
	assert_int_equal(ev->tid, 4243);
	assert_int_equal(ev->ktime_ns, 1000); /* a write: its entry */
	assert_int_equal(ev->prefix_len, strlen(req));
	assert_memory_equal(ev->prefix, req, strlen(req));
	assert_int_equal(tls_call(SSL_READ, resp, 4096, (long)strlen(resp), NULL, 2000), 1);
	ev = event(0);
	assert_int_equal(ev->kind, USM_KIND_RESPONSE);
	assert_int_equal(ev->ktime_ns, 2100); /* a read: its return */
	assert_int_equal(ev->len, strlen(resp));
	assert_int_equal(counter(USM_CNT_TLS_CALLS), 2);
	assert_int_equal(counter(USM_CNT_TLS_HTTP), 2);
}

/* Only the bytes the call moved are looked at, and at most USM_PREFIX of them. */
static void test_tls_lengths(void **state)
{
	char big[600];

	(void)state;
	memset(big, 'x', sizeof(big));
	memcpy(big, "GET /", 5);
	assert_int_equal(tls_call(SSL_WRITE, big, sizeof(big), sizeof(big), NULL, 1), 1);
	assert_int_equal(event(0)->prefix_len, USM_PREFIX);
	assert_int_equal(event(0)->len, sizeof(big));
	/* The read returned 20 bytes of a larger buffer: 20 copied. */
	assert_int_equal(
		tls_call(SSL_READ, "HTTP/1.1 200 OK\r\n\r\nrest-not-read", 4096, 20, NULL, 1), 1);
	assert_int_equal(event(0)->prefix_len, 20);
	/* Fewer bytes than a peek: not looked at. */
	assert_int_equal(tls_call(SSL_READ, "HTTP/1.1 200", 4096, 4, NULL, 1), 0);
}

/* A message start whose prefix runs into a page that is not there: the peek reads,
 * the prefix does not, and the record reserved for it is given back (without waking
 * the consumer: usm_event_discard), so nothing is emitted; the call is counted. The
 * same bytes with a length that stays inside the page are a message. */
static void test_tls_prefix_unreadable(void **state)
{
	const char *req = "GET / HTTP/1.1\r\n";
	long page = sysconf(_SC_PAGESIZE);
	char *map, *at;

	(void)state;
	map = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(map != MAP_FAILED);
	assert_int_equal(mprotect(map + page, page, PROT_NONE), 0);
	at = map + page - strlen(req);
	memcpy(at, req, strlen(req));
	assert_int_equal(tls_call(SSL_WRITE_EX, at, 100, 1, NULL, 1), 0);
	assert_int_equal(counter(USM_CNT_TLS_CALLS), 1);
	assert_int_equal(counter(USM_CNT_TLS_HTTP), 0);
	assert_int_equal(tls_call(SSL_WRITE_EX, at, strlen(req), 1, NULL, 1), 1);
	assert_int_equal(event(0)->prefix_len, strlen(req));
	assert_int_equal(counter(USM_CNT_TLS_HTTP), 1);
	munmap(map, 2 * page);
}

static void test_tls_errors_and_non_http(void **state)
{
	(void)state;
	assert_int_equal(tls_call(SSL_READ, "HTTP/1.1 200 OK\r\n", 4096, 0, NULL, 1), 0);
	assert_int_equal(tls_call(SSL_READ, "HTTP/1.1 200 OK\r\n", 4096, -1, NULL, 1), 0);
	/* int return: 0xffffffff in rax is -1, not 4 G bytes. */
	assert_int_equal(tls_call(SSL_READ, "HTTP/1.1 200 OK\r\n", 4096, 0xffffffffl, NULL, 1), 0);
	assert_int_equal(
		tls_call(GNUTLS_RECV, "HTTP/1.1 200 OK\r\n", 4096, -28 /* AGAIN */, NULL, 1), 0);
	/* Writes of nothing: an int size of -1 (0xffffffff in rdx), 0, GnuTLS's (NULL, 0). */
	assert_int_equal(tls_call(SSL_WRITE, "GET / HTTP/1.1\r\n", 0xffffffffl, 0, NULL, 1), 0);
	assert_int_equal(tls_call(SSL_WRITE_EX, "GET / HTTP/1.1\r\n", 0, 0, NULL, 1), 0);
	assert_int_equal(tls_call(GNUTLS_SEND, NULL, 0, 0, NULL, 1), 0);
	assert_int_equal(counter(USM_CNT_TLS_CALLS), 0);
	/* A body, JSON, binary: counted as calls, not emitted. */
	assert_int_equal(tls_call(SSL_READ, "{\"items\": [1, 2, 3]}", 4096, 20, NULL, 1), 0);
	assert_int_equal(tls_call(SSL_WRITE, "\x00\x01\x02\x03\x04\x05\x06\x07", 8, 8, NULL, 1), 0);
	assert_int_equal(counter(USM_CNT_TLS_CALLS), 2);
	assert_int_equal(counter(USM_CNT_TLS_HTTP), 0);
	/* A return without its entry (attached mid-call): nothing. */
	tls_run(SSL_READ, true, &(struct test_regs){.ax = 17}, 5);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 0);
}

/* A write is emitted at its entry, with the size it was asked to write, before it
 * returns; whatever it returns (a failure too) changes nothing: a return program run
 * for a write does nothing. */
static void test_tls_write_at_entry(void **state)
{
	const char *req = "POST /orders HTTP/1.1\r\nHost: a\r\n\r\n";
	struct test_regs in = {.di = SSL_PTR, .si = (uintptr_t)req, .dx = strlen(req)};
	int probe;

	(void)state;
	for (probe = SSL_WRITE; probe <= GNUTLS_SEND; probe += 2) {
		tls_run(probe, false, &in, 500);
		assert_int_equal(bpftel_rb_capture__drain(&cap), 1);
		assert_int_equal(event(0)->ktime_ns, 500);
		assert_int_equal(event(0)->len, strlen(req));
		assert_int_equal(event(0)->dir, USM_DIR_WRITE);
		assert_int_equal(event(0)->source,
				 probe == GNUTLS_SEND ? USM_SRC_GNUTLS : USM_SRC_OPENSSL);
		tls_run(probe, true, &(struct test_regs){.ax = (unsigned long)-1}, 600);
		tls_run(probe, true, &(struct test_regs){.ax = strlen(req)}, 700);
		assert_int_equal(bpftel_rb_capture__drain(&cap), 0);
	}
	assert_int_equal(counter(USM_CNT_TLS_CALLS), 3);
	assert_int_equal(counter(USM_CNT_TLS_HTTP), 3);
	/* A read's entry alone emits nothing: its bytes arrive with its return. */
	tls_run(SSL_READ, false, &in, 800);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 0);
	tls_run(SSL_READ, true, &(struct test_regs){.ax = 0}, 900); /* ends it: nothing read */
	assert_int_equal(bpftel_rb_capture__drain(&cap), 0);
}

/* _ex forms return 1 and write the byte count through their 4th argument. */
static void test_tls_ex_forms(void **state)
{
	const char *req = "PUT /v/1 HTTP/1.1\r\n\r\n";
	size_t n = strlen(req);

	(void)state;
	assert_int_equal(tls_call(SSL_WRITE_EX, req, n, 1, &n, 1), 1);
	assert_int_equal(event(0)->len, strlen(req));
	n = strlen(req);
	assert_int_equal(tls_call(SSL_READ_EX, req, 4096, 1, &n, 1), 1);
	assert_int_equal(event(0)->len, strlen(req));
	assert_int_equal(event(0)->dir, USM_DIR_READ);
	n = 0;
	assert_int_equal(tls_call(SSL_READ_EX, req, 4096, 0, &n, 1), 0); /* failed: rc 0 */
}

static void test_gnutls(void **state)
{
	const char *req = "GET /g HTTP/1.1\r\n\r\n";

	(void)state;
	assert_int_equal(tls_call(GNUTLS_SEND, req, strlen(req), (long)strlen(req), NULL, 1), 1);
	assert_int_equal(event(0)->source, USM_SRC_GNUTLS);
	assert_int_equal(event(0)->kind, USM_KIND_REQUEST);
}

/* A write's entry, as the module probes it (no return probe), by thread pid_tgid. */
static int write_call(int probe, __u64 ssl, const char *buf, size_t len, __u64 pid_tgid)
{
	tls_run_as(probe, false,
		   &(struct test_regs){.di = ssl, .si = (uintptr_t)buf, .dx = len}, 1, pid_tgid);
	return bpftel_rb_capture__drain(&cap);
}

/*
 * GnuTLS sends one record a call (16 KiB at most) and returns what it sent; the
 * application writes the rest from there. The rest was looked at with the first call:
 * counted, not looked at again, though a body's bytes there begin like a request. A
 * write that is no such rest (another session, thread, or end; the same buffer again)
 * is looked at. OpenSSL's partial-write mode does the same.
 */
static void test_tls_write_rest(void **state)
{
	static const char body_req[] = "GET /inside-a-body HTTP/1.1\r\n\r\n";
	static char buf[20000];
	const __u64 other_thread = PID_TGID + 1;
	int probe;

	(void)state;
	memset(buf, 'x', sizeof(buf));
	memcpy(buf, "POST /upload HTTP/1.1\r\nContent-Length: 19969\r\n\r\n", 48);
	memcpy(buf + 16384, body_req, strlen(body_req));
	assert_int_equal(write_call(GNUTLS_SEND, SSL_PTR, buf, sizeof(buf), PID_TGID), 1);
	assert_int_equal(event(0)->kind, USM_KIND_REQUEST);
	assert_int_equal(write_call(GNUTLS_SEND, SSL_PTR, buf + 16384, sizeof(buf) - 16384,
				    PID_TGID),
			 0);
	assert_int_equal(counter(USM_CNT_TLS_WRITE_RESTS), 1);
	assert_int_equal(counter(USM_CNT_TLS_CALLS), 2);
	/* Not a rest: another session, another thread, another end, less than a record
	 * in, or after the session was given a new connection. */
	assert_int_equal(write_call(GNUTLS_SEND, SSL_PTR, buf, sizeof(buf), PID_TGID), 1);
	assert_int_equal(write_call(GNUTLS_SEND, SSL_PTR + 8, buf + 16384, sizeof(buf) - 16384,
				    PID_TGID),
			 1);
	assert_int_equal(write_call(GNUTLS_SEND, SSL_PTR + 8, buf, sizeof(buf), PID_TGID), 1);
	assert_int_equal(write_call(GNUTLS_SEND, SSL_PTR + 8, buf + 16384, sizeof(buf) - 16384,
				    other_thread),
			 1);
	assert_int_equal(write_call(GNUTLS_SEND, SSL_PTR, buf, sizeof(buf), PID_TGID), 1);
	assert_int_equal(write_call(GNUTLS_SEND, SSL_PTR, buf + 16384, strlen(body_req),
				    PID_TGID),
			 1);
	memcpy(buf + 32, body_req, strlen(body_req)); /* end-aligned: 32 bytes in */
	assert_int_equal(write_call(GNUTLS_SEND, SSL_PTR, buf, sizeof(buf), PID_TGID), 1);
	assert_int_equal(write_call(GNUTLS_SEND, SSL_PTR, buf + 32, sizeof(buf) - 32, PID_TGID),
			 1);
	memcpy(buf + 32, "xxxxxxxx", 8);
	assert_int_equal(write_call(GNUTLS_SEND, SSL_PTR, buf, sizeof(buf), PID_TGID), 1);
	tls_run_as(USM_TLS_SSL_SET_FD, false, &(struct test_regs){.di = SSL_PTR, .si = 7}, 1,
		   PID_TGID);
	assert_int_equal(write_call(GNUTLS_SEND, SSL_PTR, buf + 16384, sizeof(buf) - 16384,
				    PID_TGID),
			 1);
	/* The same buffer again is a new message (a static response). */
	assert_int_equal(write_call(GNUTLS_SEND, SSL_PTR, buf + 16384, strlen(body_req),
				    PID_TGID),
			 1);
	assert_int_equal(counter(USM_CNT_TLS_WRITE_RESTS), 1);
	/* OpenSSL's partial writes: the rest in two calls. */
	for (probe = SSL_WRITE; probe <= SSL_WRITE_EX; probe += 2) {
		assert_int_equal(write_call(probe, SSL_PTR, buf, sizeof(buf), PID_TGID), 1);
		assert_int_equal(write_call(probe, SSL_PTR, buf + 16384, sizeof(buf) - 16384,
					    PID_TGID),
				 0);
		assert_int_equal(write_call(probe, SSL_PTR, buf + 19000, sizeof(buf) - 19000,
					    PID_TGID),
				 0);
	}
	assert_int_equal(counter(USM_CNT_TLS_WRITE_RESTS), 5);
}

/* A read's entry on session ssl, at stack pointer sp, and its return (sp + 8). */
static void read_enter(const char *buf, __u64 ssl, __u64 sp, __u64 t)
{
	struct test_regs in = {.di = ssl, .si = (uintptr_t)buf, .dx = 4096, .sp = sp};

	tls_run(SSL_READ, false, &in, t);
}

static int read_return(long rc, __u64 sp, __u64 t)
{
	struct test_regs out = {.ax = (unsigned long)rc, .sp = sp + 8};

	tls_run(SSL_READ, true, &out, t);
	return bpftel_rb_capture__drain(&cap);
}

/* Reads nest on one thread: curl through an HTTPS proxy reads the proxy's session from
 * inside its read of the end-to-end one. Each return is paired with its own entry by
 * the stack pointer; one left pending by a return never seen is reused. */
static void test_tls_nested_reads(void **state)
{
	const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	const char *rec = "\x17\x03\x03\x00\x40 an encrypted record";

	(void)state;
	read_enter(resp, SSL_PTR, TLS_SP, 100);		      /* the end-to-end read */
	read_enter(rec, SSL_PTR + 0x100, TLS_SP - 0x300, 110); /* the proxy's, inside */
	assert_int_equal(read_return((long)strlen(rec), TLS_SP - 0x300, 120), 0); /* not HTTP */
	assert_int_equal(read_return((long)strlen(resp), TLS_SP, 130), 1);
	assert_int_equal(event(0)->conn, SSL_PTR);
	assert_int_equal(event(0)->len, strlen(resp));
	assert_int_equal(event(0)->ktime_ns, 130);

	/* Four deep: each return finds its own entry, innermost first. */
	read_enter(resp, SSL_PTR + 1, TLS_SP, 200);
	read_enter(resp, SSL_PTR + 2, TLS_SP - 0x100, 210);
	read_enter(resp, SSL_PTR + 3, TLS_SP - 0x200, 220);
	read_enter(resp, SSL_PTR + 4, TLS_SP - 0x300, 230);
	assert_int_equal(read_return(10, TLS_SP - 0x300, 240), 1);
	assert_int_equal(event(0)->conn, SSL_PTR + 4);
	assert_int_equal(read_return(11, TLS_SP - 0x200, 250), 1);
	assert_int_equal(event(0)->conn, SSL_PTR + 3);
	assert_int_equal(read_return(12, TLS_SP - 0x100, 260), 1);
	assert_int_equal(event(0)->conn, SSL_PTR + 2);
	assert_int_equal(event(0)->len, 12);
	assert_int_equal(read_return(13, TLS_SP, 270), 1);
	assert_int_equal(event(0)->conn, SSL_PTR + 1);

	/* An entry whose return was never seen (the module stopped in between), then a
	 * read at the same depth: the new one is paired, the old slot reused. */
	assert_int_equal(counter(USM_CNT_TLS_READS_UNSEEN), 0);
	read_enter(resp, SSL_PTR + 5, TLS_SP, 300);
	read_enter(resp, SSL_PTR + 6, TLS_SP, 310);
	assert_int_equal(counter(USM_CNT_TLS_READS_UNSEEN), 1); /* the old one's bytes */
	assert_int_equal(read_return(14, TLS_SP, 320), 1);
	assert_int_equal(event(0)->conn, SSL_PTR + 6);
	assert_int_equal(read_return(14, TLS_SP, 330), 0); /* nothing else pending there */
	/* One pending below a read at a higher frame (a coroutine on another stack, or a
	 * longjmp out of it): counted too; nested ones, lower, are not. */
	read_enter(resp, SSL_PTR + 7, TLS_SP - 0x100, 400);
	read_enter(resp, SSL_PTR + 8, TLS_SP - 0x200, 410);
	assert_int_equal(counter(USM_CNT_TLS_READS_UNSEEN), 1);
	read_enter(resp, SSL_PTR + 9, TLS_SP, 420);
	assert_int_equal(counter(USM_CNT_TLS_READS_UNSEEN), 3);
	assert_int_equal(read_return(15, TLS_SP, 430), 1);
	assert_int_equal(event(0)->conn, SSL_PTR + 9);
}

/* recvfrom(2) on fd by thread pid_tgid with its stack pointer at sp. */
static void recv_run(__u64 pid_tgid, long fd, __u64 sp)
{
	struct {
		__u64 pid_tgid;
		__s64 fd;
		__u64 sp;
	} ctx = {pid_tgid, fd, sp};
	int retval = -1;

	assert_int_equal(bpftel_test_run(skel->progs.usm_test_recv, &ctx, sizeof(ctx), &retval), 0);
	assert_int_equal(retval, 0);
}

/* The fd usm_tls_fds keeps for session ssl of process tgid; -2: no entry. */
static int sess_fd(__u64 ssl, __u32 tgid)
{
	struct {
		__u64 conn;
		__u32 tgid, pad;
	} k = {ssl, tgid, 0};
	struct usm_tls_sess sess;

	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.usm_tls_fds), &k, &sess))
		return -2;
	return sess.fd;
}

/*
 * A session without SSL_set_fd (curl's own BIO) gets the fd of the first recvfrom(2)
 * made inside a read of it, the innermost read in flight on the thread, when that read
 * returns; a session's fd, once known, stays; recvfroms outside any read, above a
 * read's frame, or by another thread name nothing, and neither does a read that never
 * returns.
 */
static void test_tls_recv_fd(void **state)
{
	const __u64 me = (5353ull << 32) | 5354, other = (5353ull << 32) | 5355;
	const char *req = "GET /bio HTTP/1.1\r\n\r\n";
	const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	struct test_regs in = {.di = SSL_PTR, .si = (uintptr_t)resp, .dx = 4096, .sp = TLS_SP};
	struct test_regs out = {.ax = strlen(resp), .sp = TLS_SP + 8};
	struct test_regs w = {.di = SSL_PTR, .si = (uintptr_t)req, .dx = strlen(req)};

	(void)state;
	/* The request first: no fd yet. */
	tls_run_as(SSL_WRITE, false, &w, 1, me);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 1);
	assert_int_equal(event(0)->fd, -1);
	/* No read in flight: a recvfrom names nothing. */
	recv_run(me, 5, TLS_SP - 0x400);
	assert_int_equal(sess_fd(SSL_PTR, 5353), -1);
	/* Its response's read: the first recvfrom inside it names the session's socket
	 * when the read returns, and the response carries it; another thread's, one above
	 * the read's frame, and a second one of the read (another fd) count for nothing. */
	tls_run_as(SSL_READ, false, &in, 2, me);
	recv_run(other, 4, TLS_SP - 0x400);
	recv_run(me, 6, TLS_SP + 0x100);
	recv_run(me, 7, TLS_SP - 0x400);
	recv_run(me, 8, TLS_SP - 0x400);
	assert_int_equal(sess_fd(SSL_PTR, 5353), -1); /* not before the read returns */
	tls_run_as(SSL_READ, true, &out, 3, me);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 1);
	assert_int_equal(event(0)->fd, 7);
	assert_int_equal(event(0)->kind, USM_KIND_RESPONSE);
	assert_int_equal(sess_fd(SSL_PTR, 5353), 7);
	/* The next request has it at once; a later read's recvfrom keeps it. */
	tls_run_as(SSL_WRITE, false, &w, 4, me);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 1);
	assert_int_equal(event(0)->fd, 7);
	tls_run_as(SSL_READ, false, &in, 5, me);
	recv_run(me, 9, TLS_SP - 0x400);
	tls_run_as(SSL_READ, true, &out, 6, me);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 1);
	assert_int_equal(event(0)->fd, 7);

	/* A read that returns nothing (curl's non-blocking socket had no data: -1,
	 * SSL_ERROR_WANT_READ) still ran on that socket: it is the session's. */
	in.di = SSL_PTR + 0x180;
	tls_run_as(SSL_READ, false, &in, 6, me);
	recv_run(me, 21, TLS_SP - 0x400);
	tls_run_as(SSL_READ, true, &(struct test_regs){.ax = (unsigned long)-1, .sp = TLS_SP + 8},
		   6, me);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 0);
	assert_int_equal(sess_fd(SSL_PTR + 0x180, 5353), 21);

	/* A read whose return is never seen (the module stopped in between, a longjmp)
	 * gives its session nothing: the next read at its depth takes its slot. */
	in.di = SSL_PTR + 0x100;
	tls_run_as(SSL_READ, false, &in, 7, me);
	recv_run(me, 20, TLS_SP - 0x400);
	in.di = SSL_PTR + 0x140;
	tls_run_as(SSL_READ, false, &in, 8, me);
	tls_run_as(SSL_READ, true, &out, 9, me);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 1);
	assert_int_equal(event(0)->conn, SSL_PTR + 0x140);
	assert_int_equal(event(0)->fd, -1);
	assert_int_equal(sess_fd(SSL_PTR + 0x100, 5353), -2);

	/* SSL_set_fd's fd is the session's: a recvfrom inside its read does not change it. */
	tls_run_as(USM_TLS_SSL_SET_FD, false, &(struct test_regs){.di = SSL_PTR + 0x40, .si = 3},
		   10, me);
	in.di = SSL_PTR + 0x40;
	tls_run_as(SSL_READ, false, &in, 11, me);
	recv_run(me, 11, TLS_SP - 0x400);
	tls_run_as(SSL_READ, true, &out, 12, me);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 1);
	assert_int_equal(event(0)->fd, 3);
	assert_int_equal(sess_fd(SSL_PTR + 0x40, 5353), 3);

	/* Nested (curl through an HTTPS proxy): the proxy's session, the inner read, gets
	 * the socket; the end-to-end one, whose bytes come through it, none. */
	in.di = SSL_PTR + 0x80;
	tls_run_as(SSL_READ, false, &in, 13, me);
	in.di = SSL_PTR + 0xc0;
	in.sp = TLS_SP - 0x300;
	tls_run_as(SSL_READ, false, &in, 14, me);
	recv_run(me, 12, TLS_SP - 0x500);
	out.sp = TLS_SP - 0x300 + 8;
	tls_run_as(SSL_READ, true, &out, 15, me);
	assert_int_equal(sess_fd(SSL_PTR + 0xc0, 5353), 12);
	out.sp = TLS_SP + 8;
	tls_run_as(SSL_READ, true, &out, 16, me);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 2);
	assert_int_equal(event(0)->fd, 12);
	assert_int_equal(event(1)->fd, -1);
	/* The end-to-end session's entry, made by its HTTP/1 message, keeps no fd; a
	 * recvfrom now is inside no read. */
	assert_int_equal(sess_fd(SSL_PTR + 0x80, 5353), -1);
	recv_run(me, 13, TLS_SP - 0x500);
	/* A negative fd (the syscall's own argument, garbage) names nothing. */
	in.di = SSL_PTR + 0x80;
	in.sp = TLS_SP;
	tls_run_as(SSL_READ, false, &in, 17, me);
	recv_run(me, -1, TLS_SP - 0x400);
	tls_run_as(SSL_READ, true, &out, 18, me);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 1);
	assert_int_equal(event(0)->fd, -1);
	assert_int_equal(sess_fd(SSL_PTR + 0x80, 5353), -1);
}

/* One call of GnuTLS's internal read (UPROBE_TYPED_READ: _gnutls_recv_int(session,
 * type, data, size, ...)) with its stack pointer at entry: the return finds it 8 bytes
 * higher. Returns the events emitted. */
static int typed_run(bool ret, __u64 type, const void *buf, long rc, __u64 sp, __u64 t)
{
	struct usm_test_call ctx = {.pid_tgid = PID_TGID,
				    .now = t,
				    .probe = (__u32)(GNUTLS_RECV * 2 + ret),
				    .flags = UPROBE_TYPED_READ};
	int retval = -1;

	if (ret) {
		ctx.regs.ax = (unsigned long)rc;
		ctx.regs.sp = sp + 8;
	} else {
		ctx.regs.di = SSL_PTR;
		ctx.regs.si = type;
		ctx.regs.dx = (uintptr_t)buf;
		ctx.regs.cx = 4096;
		ctx.regs.sp = sp;
	}
	assert_int_equal(bpftel_test_run(skel->progs.usm_test_tls, &ctx, sizeof(ctx), &retval), 0);
	assert_int_equal(retval, 0);
	return bpftel_rb_capture__drain(&cap);
}

/* gnutls_record_recv's reads seen in _gnutls_recv_int: application data (type 23)
 * only, the buffer from the third argument, and a call of another type nested inside
 * a read (kept out at its entry) does not end that read at its own return. */
static void test_gnutls_typed_read(void **state)
{
	const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	const __u64 sp = 0x7ffc0000f000ull;

	(void)state;
	/* type 23: entry and return, one response of rc bytes */
	assert_int_equal(typed_run(false, USM_GNUTLS_APP_DATA, resp, 0, sp, 1000), 0);
	assert_int_equal(typed_run(true, 0, NULL, (long)strlen(resp), sp, 1100), 1);
	assert_int_equal(event(0)->source, USM_SRC_GNUTLS);
	assert_int_equal(event(0)->kind, USM_KIND_RESPONSE);
	assert_int_equal(event(0)->dir, USM_DIR_READ);
	assert_int_equal(event(0)->conn, SSL_PTR);
	assert_int_equal(event(0)->len, strlen(resp));
	assert_int_equal(event(0)->ktime_ns, 1100);
	assert_memory_equal(event(0)->prefix, resp, strlen(resp));

	/* type 22 (a handshake record, e.g. a TLS 1.3 ticket): nothing, even with bytes */
	assert_int_equal(typed_run(false, 22, resp, 0, sp, 2000), 0);
	assert_int_equal(typed_run(true, 0, NULL, (long)strlen(resp), sp, 2100), 0);

	/* A read, a handshake call nested in it (lower on the stack) that returns first,
	 * then the read's own return: one event, the read's. */
	assert_int_equal(typed_run(false, USM_GNUTLS_APP_DATA, resp, 0, sp, 3000), 0);
	assert_int_equal(typed_run(false, 22, "junk", 0, sp - 0x100, 3010), 0);
	assert_int_equal(typed_run(true, 0, NULL, 4, sp - 0x100, 3020), 0);
	assert_int_equal(typed_run(true, 0, NULL, 17, sp, 3100), 1);
	assert_int_equal(event(0)->len, 17);
	assert_int_equal(event(0)->ktime_ns, 3100);
	/* ... and that return ended it: a second return finds nothing pending */
	assert_int_equal(typed_run(true, 0, NULL, 17, sp, 3200), 0);

	/* GNUTLS_E_AGAIN (-28): nothing */
	assert_int_equal(typed_run(false, USM_GNUTLS_APP_DATA, resp, 0, sp, 4000), 0);
	assert_int_equal(typed_run(true, 0, NULL, -28, sp, 4100), 0);
	/* ... nor from _gnutls_ktls_recv_int, whose int return leaves rax's upper half
	 * zero: 0xffffffe4 is -28, not 4 GB read (the buffer's old bytes emitted again). */
	assert_int_equal(typed_run(false, USM_GNUTLS_APP_DATA, resp, 0, sp, 5000), 0);
	assert_int_equal(typed_run(true, 0, NULL, (long)0xffffffe4ul, sp, 5100), 0);
	assert_int_equal(counter(USM_CNT_TLS_CALLS), 2);
}

/* SSL_set_fd(ssl, fd) and gnutls_transport_set_int2(s, rfd, wfd) name the socket of a
 * session, per process: the events of that session carry it (and their direction);
 * another process's session at the same address, or a session never set, carry -1. */
static void test_tls_fd(void **state)
{
	const char *req = "GET /fd HTTP/1.1\r\n\r\n";
	const char *resp = "HTTP/1.1 204 No Content\r\n\r\n";
	struct test_regs set = {.di = SSL_PTR, .si = 7};
	struct test_regs set2 = {.di = SSL_PTR + 64, .si = 9, .dx = 11};

	(void)state;
	assert_int_equal(tls_call(SSL_WRITE, req, strlen(req), (long)strlen(req), NULL, 1), 1);
	assert_int_equal(event(0)->fd, -1); /* not set yet */
	assert_int_equal(event(0)->dir, USM_DIR_WRITE);

	tls_run(USM_TLS_SSL_SET_FD, false, &set, 2);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 0); /* naming a socket emits nothing */
	assert_int_equal(tls_call(SSL_WRITE, req, strlen(req), (long)strlen(req), NULL, 3), 1);
	assert_int_equal(event(0)->fd, 7);
	assert_int_equal(event(0)->dir, USM_DIR_WRITE);
	assert_int_equal(tls_call(SSL_READ, resp, 4096, (long)strlen(resp), NULL, 4), 1);
	assert_int_equal(event(0)->fd, 7);
	assert_int_equal(event(0)->dir, USM_DIR_READ);
	assert_int_equal(event(0)->kind, USM_KIND_RESPONSE);

	/* Set again (a session reused on another socket): the last one counts. */
	set.si = 8;
	tls_run(USM_TLS_SSL_SET_FD, false, &set, 5);
	assert_int_equal(tls_call(SSL_WRITE, req, strlen(req), (long)strlen(req), NULL, 6), 1);
	assert_int_equal(event(0)->fd, 8);

	/* GnuTLS: the receive fd names the connection. */
	tls_run(USM_TLS_GNUTLS_SET_INT2, false, &set2, 7);
	{
		struct test_regs in = {.di = SSL_PTR + 64, .si = (uintptr_t)req,
				       .dx = strlen(req)};
		struct test_regs out = {.ax = strlen(req)};

		tls_run(GNUTLS_SEND, false, &in, 8);
		tls_run(GNUTLS_SEND, true, &out, 9);
	}
	assert_int_equal(bpftel_rb_capture__drain(&cap), 1);
	assert_int_equal(event(0)->source, USM_SRC_GNUTLS);
	assert_int_equal(event(0)->fd, 9);

	/* Another process with a session at the same address knows nothing of that fd. */
	{
		struct test_regs in = {.di = SSL_PTR, .si = (uintptr_t)req, .dx = strlen(req)};
		struct test_regs out = {.ax = strlen(req)};

		tls_run_as(SSL_WRITE, false, &in, 10, (5151ull << 32) | 5151);
		tls_run_as(SSL_WRITE, true, &out, 11, (5151ull << 32) | 5151);
	}
	assert_int_equal(bpftel_rb_capture__drain(&cap), 1);
	assert_int_equal(event(0)->pid, 5151);
	assert_int_equal(event(0)->fd, -1);
}

/* ---- HTTP/2 over TLS: the frame walk (bpf/lib/usm_h2.h) ---- */

static struct bpftel_rb_capture h2cap;

#define PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

/* A frame: 9-byte header then plen bytes of fill (or payload, when given). */
static size_t frame(unsigned char *b, uint8_t type, uint8_t flags, uint32_t stream, size_t plen,
		    const void *payload, unsigned char fill)
{
	b[0] = (unsigned char)(plen >> 16);
	b[1] = (unsigned char)(plen >> 8);
	b[2] = (unsigned char)plen;
	b[3] = type;
	b[4] = flags;
	b[5] = (unsigned char)(stream >> 24);
	b[6] = (unsigned char)(stream >> 16);
	b[7] = (unsigned char)(stream >> 8);
	b[8] = (unsigned char)stream;
	if (payload)
		memcpy(b + 9, payload, plen);
	else
		memset(b + 9, fill, plen);
	return 9 + plen;
}

/* One TLS call on the HTTP/2 path; returns the records it sent (HTTP/1 events: none). */
static int h2_call(int probe, const void *buf, size_t n, __u64 t)
{
	assert_int_equal(tls_call(probe, buf, is_read(probe) ? 65536 : n, (long)n, NULL, t), 0);
	return bpftel_rb_capture__drain(&h2cap);
}

static const struct usm_h2_record *h2rec(int i)
{
	const struct usm_h2_record *r = h2cap.rec[i].data;

	assert_true(h2cap.rec[i].size >= USM_H2_RECORD_HDR);
	assert_int_equal(h2cap.rec[i].size, USM_H2_RECORD_HDR + r->data_len);
	return r;
}

/* Record i is the kernel's word that session conn of source ended: no bytes. */
static void assert_h2_closed(int i, __u64 conn, __u8 source)
{
	const struct usm_h2_record *r = h2rec(i);

	assert_int_equal(r->flags, USM_H2_F_CLOSED);
	assert_int_equal(r->conn, conn);
	assert_int_equal(r->source, source);
	assert_int_equal(r->pid, 4242);
	assert_int_equal(r->len, 0);
	assert_int_equal(r->nruns, 0);
	assert_int_equal(r->data_len, 0);
}

static __u64 h2_runs_total(const struct usm_h2_record *r, __u64 *copied)
{
	__u64 t = 0;
	int i;

	*copied = 0;
	for (i = 0; i < r->nruns; i++) {
		t += r->runs[i].copied + r->runs[i].skipped;
		*copied += r->runs[i].copied;
	}
	return t;
}

/* A client's first write: preface, SETTINGS, HEADERS, all copied as they are. */
static void test_h2_client_start_copied(void **state)
{
	unsigned char b[256];
	size_t n = 24, k;
	const struct usm_h2_record *r;
	__u64 copied;

	(void)state;
	memcpy(b, PREFACE, 24);
	n += frame(b + n, 4, 0, 0, 12, NULL, 0);
	n += frame(b + n, 1, 5, 1, 20, NULL, 0x82);
	assert_int_equal(h2_call(SSL_WRITE, b, n, 100), 1);
	r = h2rec(0);
	assert_int_equal(r->flags, USM_H2_F_NEW | USM_H2_F_PREFACE);
	assert_int_equal(r->offset, 0);
	assert_int_equal(r->len, n);
	assert_int_equal(r->walked, n);
	assert_int_equal(r->dir, USM_DIR_WRITE);
	assert_int_equal(r->conn, SSL_PTR);
	assert_int_equal(r->pid, 4242);
	assert_int_equal(r->ktime_ns, 100);
	assert_int_equal(r->nruns, 1);
	assert_int_equal(h2_runs_total(r, &copied), n);
	assert_int_equal(copied, n);
	assert_int_equal(r->data_len, n);
	assert_memory_equal(r->data, b, n);
	assert_int_equal(counter(USM_CNT_H2_CALLS), 1);
	assert_int_equal(counter(USM_CNT_TLS_HTTP), 0);
	/* The next write continues at offset n. */
	k = frame(b, 1, 5, 3, 4, NULL, 0x83);
	assert_int_equal(h2_call(SSL_WRITE, b, k, 200), 1);
	assert_int_equal(h2rec(0)->offset, n);
	assert_int_equal(h2rec(0)->flags, 0);
}

/* DATA payloads are skipped, their headers copied; frames after them copied. */
static void test_h2_data_payload_not_copied(void **state)
{
	unsigned char b[1024];
	size_t n = 0, hdrs;
	const struct usm_h2_record *r;
	__u64 copied;

	(void)state;
	/* The server's first write: SETTINGS. */
	n = frame(b, 4, 0, 0, 6, NULL, 0);
	assert_int_equal(h2_call(SSL_WRITE, b, n, 1), 1);
	assert_int_equal(h2rec(0)->flags, USM_H2_F_NEW | USM_H2_F_SETTINGS);
	/* HEADERS, DATA of 300 secret bytes, HEADERS (trailers). */
	n = frame(b, 1, 4, 1, 10, NULL, 0x88);
	hdrs = n;
	n += frame(b + n, 0, 0, 1, 300, NULL, 'S');
	n += frame(b + n, 1, 5, 1, 5, NULL, 0x40);
	assert_int_equal(h2_call(SSL_WRITE, b, n, 2), 1);
	r = h2rec(0);
	assert_int_equal(r->nruns, 2);
	assert_int_equal(r->runs[0].copied, hdrs + 9);
	assert_int_equal(r->runs[0].skipped, 300);
	assert_int_equal(r->runs[1].copied, 9 + 5);
	assert_int_equal(r->runs[1].skipped, 0);
	assert_int_equal(h2_runs_total(r, &copied), n);
	assert_int_equal(r->data_len, copied);
	assert_null(memchr(r->data, 'S', r->data_len));
	assert_memory_equal(r->data, b, hdrs + 9);
	assert_memory_equal(r->data + hdrs + 9, b + hdrs + 9 + 300, 14);
	assert_int_equal(counter(USM_CNT_H2_TRUNCATED), 0);
}

/* A frame header cut by the end of a call, a DATA payload over three calls. */
static void test_h2_split_over_calls(void **state)
{
	unsigned char b[4096];
	size_t n;
	const struct usm_h2_record *r;
	__u64 copied;

	(void)state;
	n = frame(b, 4, 0, 0, 0, NULL, 0); /* SETTINGS, empty */
	n += frame(b + n, 0, 1, 1, 2000, NULL, 'S');
	n += frame(b + n, 1, 4, 3, 7, NULL, 0x81);
	/* Read side: a client receiving. 13 bytes: SETTINGS and 4 of the DATA header. */
	assert_int_equal(h2_call(SSL_READ, b, 13, 1), 1);
	r = h2rec(0);
	assert_int_equal(r->flags, USM_H2_F_NEW | USM_H2_F_SETTINGS);
	assert_int_equal(r->dir, USM_DIR_READ);
	assert_int_equal(r->data_len, 13);
	/* The DATA header's other 5 bytes and 1000 of its payload. */
	assert_int_equal(h2_call(SSL_READ, b + 13, 1005, 2), 1);
	r = h2rec(0);
	assert_int_equal(r->offset, 13);
	assert_int_equal(r->nruns, 1);
	assert_int_equal(r->runs[0].copied, 5);
	assert_int_equal(r->runs[0].skipped, 1000);
	/* Payload only: nothing copied. */
	assert_int_equal(h2_call(SSL_READ, b + 1018, 999, 3), 1);
	r = h2rec(0);
	assert_int_equal(r->data_len, 0);
	assert_int_equal(r->runs[0].skipped, 999);
	/* The payload's last byte, then the HEADERS whole. */
	assert_int_equal(h2_call(SSL_READ, b + 2017, n - 2017, 4), 1);
	r = h2rec(0);
	assert_int_equal(r->offset, 2017);
	assert_int_equal(h2_runs_total(r, &copied), n - 2017);
	assert_int_equal(copied, 16);
	assert_int_equal(r->runs[0].copied, 0);
	assert_int_equal(r->runs[0].skipped, 1);
	assert_memory_equal(r->data, b + 2018, 16);
	/* Writes are another direction, with their own place: not HTTP/2-framed yet is
	 * fine, the session is known; a write starts at offset 0. */
	n = frame(b, 4, 1, 0, 0, NULL, 0); /* SETTINGS ACK */
	assert_int_equal(h2_call(SSL_WRITE, b, n, 5), 1);
	assert_int_equal(h2rec(0)->offset, 0);
	assert_int_equal(h2rec(0)->dir, USM_DIR_WRITE);
	assert_int_equal(h2rec(0)->data_len, 9);
}

/* A server writes its SETTINGS before it reads the client's preface: the session is
 * new at the write; the preface then starts the read direction, at its offset 0, and
 * is copied as it is, not taken for a frame header. */
static void test_h2_server_order(void **state)
{
	unsigned char b[256];
	size_t n;
	const struct usm_h2_record *r;

	(void)state;
	n = frame(b, 4, 0, 0, 12, NULL, 0);
	assert_int_equal(h2_call(SSL_WRITE, b, n, 1), 1);
	assert_int_equal(h2rec(0)->flags, USM_H2_F_NEW | USM_H2_F_SETTINGS);
	memcpy(b, PREFACE, 24);
	n = 24 + frame(b + 24, 4, 0, 0, 6, NULL, 0);
	n += frame(b + n, 1, 5, 1, 30, NULL, 0x82);
	assert_int_equal(h2_call(SSL_READ, b, n, 2), 1);
	r = h2rec(0);
	/* The direction's first call: NEW as well (both ends may start at once). */
	assert_int_equal(r->flags, USM_H2_F_NEW | USM_H2_F_PREFACE);
	assert_int_equal(r->offset, 0);
	assert_int_equal(r->nruns, 1);
	assert_int_equal(r->runs[0].copied, n);
	assert_memory_equal(r->data, b, n);
	/* The write direction kept its place; its second call is no start. */
	n = frame(b, 4, 1, 0, 0, NULL, 0);
	assert_int_equal(h2_call(SSL_WRITE, b, n, 3), 1);
	assert_int_equal(h2rec(0)->offset, 9 + 12);
	assert_int_equal(h2rec(0)->flags, 0);
}

/* The records of one call, drained: their runs and copies, joined, must be the call's
 * bytes; each record begins where the one before ended. Returns the bytes copied. */
static __u64 h2_records_join(int nrec, const unsigned char *b, size_t n, __u64 offset)
{
	__u64 at = offset, copied = 0, c;
	const unsigned char *p;
	const struct usm_h2_record *r;
	int i, k;

	for (i = 0; i < nrec; i++) {
		r = h2rec(i);
		assert_int_equal(r->offset, at);
		assert_int_equal(h2_runs_total(r, &c), r->walked);
		p = r->data;
		for (k = 0; k < r->nruns; k++) {
			/* What a run copied is the call's bytes at its place. */
			assert_memory_equal(p, b + (at - offset), r->runs[k].copied);
			p += r->runs[k].copied;
			at += r->runs[k].copied + r->runs[k].skipped;
		}
		at += r->len - r->walked;
		copied += c;
	}
	assert_int_equal(at - offset, n);
	return copied;
}

/* A frame larger than a record's copy (USM_H2_CAP) goes on in the call's next record,
 * whole; one larger than all the records a call may send is copied as far as they go,
 * the rest skipped and counted as cut; the framing holds, the frame after it is copied
 * from its first byte. */
static void test_h2_cap(void **state)
{
	static unsigned char b[USM_H2_CAP * (USM_H2_RECORDS + 1)];
	size_t n, big = USM_H2_CAP + 1000, huge = USM_H2_CAP * USM_H2_RECORDS + 500;
	const struct usm_h2_record *r;
	__u64 off;
	int i;

	(void)state;
	memcpy(b, PREFACE, 24);
	n = 24 + frame(b + 24, 1, 4, 1, big, NULL, 0x55);
	assert_int_equal(h2_call(SSL_WRITE, b, n, 1), 2);
	r = h2rec(0);
	assert_int_equal(r->flags, USM_H2_F_NEW | USM_H2_F_PREFACE);
	assert_int_equal(r->len, USM_H2_CAP);
	assert_int_equal(r->data_len, USM_H2_CAP);
	assert_int_equal(h2rec(1)->flags, 0);
	assert_int_equal(h2_records_join(2, b, n, 0), n);
	assert_int_equal(counter(USM_CNT_H2_TRUNCATED), 0);
	assert_int_equal(counter(USM_CNT_H2_CALLS), 1);
	assert_int_equal(counter(USM_CNT_H2_RECORDS), 2);
	off = n;

	n = frame(b, 1, 4, 3, huge, NULL, 0x66);
	assert_int_equal(h2_call(SSL_WRITE, b, n, 2), USM_H2_RECORDS);
	for (i = 0; i + 1 < USM_H2_RECORDS; i++)
		assert_int_equal(h2rec(i)->flags, 0);
	r = h2rec(USM_H2_RECORDS - 1);
	assert_int_equal(r->flags, USM_H2_F_CUT);
	assert_int_equal(r->data_len, USM_H2_CAP);
	assert_int_equal(h2_records_join(USM_H2_RECORDS, b, n, off), USM_H2_CAP * USM_H2_RECORDS);
	assert_int_equal(counter(USM_CNT_H2_TRUNCATED), 1);
	assert_int_equal(counter(USM_CNT_H2_RECORDS), 2 + USM_H2_RECORDS);
	off += n;

	n = frame(b, 8, 0, 0, 4, NULL, 0x01); /* WINDOW_UPDATE */
	assert_int_equal(h2_call(SSL_WRITE, b, n, 3), 1);
	r = h2rec(0);
	assert_int_equal(r->flags, 0);
	assert_int_equal(r->offset, off);
	assert_int_equal(r->data_len, n);
	assert_memory_equal(r->data, b, n);
}

/* More DATA frames in one call than a record has runs: the call goes on in more
 * records, each frame header copied, no framing lost (a server's write of many small
 * responses, a gRPC stream's messages). More than all the records of a call hold: the
 * direction's framing is lost, said once; nothing more of that direction is sent, the
 * other still is. */
static void test_h2_unframed(void **state)
{
	static unsigned char b[12 * USM_H2_RUNS * (USM_H2_RECORDS + 1)]; /* 12: a DATA frame of 3 */
	size_t n = 0;
	int i, nrec;

	(void)state;
	memcpy(b, PREFACE, 24);
	assert_int_equal(h2_call(SSL_WRITE, b, 24, 1), 1);
	for (i = 0; i < USM_H2_RUNS + 8; i++)
		n += frame(b + n, 0, 0, 1, 3, NULL, 'S');
	nrec = h2_call(SSL_WRITE, b, n, 2);
	assert_int_equal(nrec, 2);
	assert_int_equal(h2_records_join(nrec, b, n, 24), 9 * (USM_H2_RUNS + 8));
	for (i = 0; i < nrec; i++)
		assert_int_equal(h2rec(i)->flags, 0);
	assert_int_equal(counter(USM_CNT_H2_UNFRAMED), 0);

	n = 0;
	for (i = 0; i < USM_H2_RUNS * USM_H2_RECORDS + 2; i++)
		n += frame(b + n, 0, 0, 1, 3, NULL, 'S');
	nrec = h2_call(SSL_WRITE, b, n, 3);
	assert_int_equal(nrec, USM_H2_RECORDS);
	assert_true(h2rec(nrec - 1)->flags & USM_H2_F_UNFRAMED);
	assert_true(h2rec(nrec - 1)->walked < h2rec(nrec - 1)->len);
	assert_int_equal(counter(USM_CNT_H2_UNFRAMED), 1);
	assert_int_equal(h2_call(SSL_WRITE, b, 12, 4), 0);
	n = frame(b, 4, 0, 0, 0, NULL, 0);
	assert_int_equal(h2_call(SSL_READ, b, n, 5), 1);
	assert_int_equal(counter(USM_CNT_H2_UNFRAMED), 1);
}

/* Where member lies in the object's struct sname, from its BTF (bytes). */
static size_t btf_offset(const char *sname, const char *member)
{
	const struct btf *btf = bpf_object__btf(skel->obj);
	const struct btf_member *m;
	const struct btf_type *t;
	int id, i;

	id = btf__find_by_name_kind(btf, sname, BTF_KIND_STRUCT);
	assert_true(id > 0);
	t = btf__type_by_id(btf, id);
	m = btf_members(t);
	for (i = 0; i < btf_vlen(t); i++, m++) {
		if (!strcmp(btf__name_by_offset(btf, m->name_off), member))
			return btf_member_bit_offset(t, i) / 8;
	}
	fail_msg("%s has no member %s", sname, member);
	return 0;
}

/* The walk scratch's slots per CPU. */
static __u32 h2_slots(void)
{
	return bpf_map__max_entries(skel->maps.usm_h2_scratch);
}

/* The first `held` walk slots of every CPU: busy set (and a mark in its record's conn),
 * the others all clear; returns how many (CPU, slot) still held the mark and busy. */
static int h2_scratch_hold(__u32 held)
{
	int fd = bpf_map__fd(skel->maps.usm_h2_scratch), ncpu = libbpf_num_possible_cpus(), i,
	    marked = 0;
	size_t vsz = (bpf_map__value_size(skel->maps.usm_h2_scratch) + 7) / 8 * 8;
	size_t busy = btf_offset("usm_h2_scratch", "busy"),
	       conn = btf_offset("usm_h2_scratch", "rec") + offsetof(struct usm_h2_record, conn);
	unsigned char *v = calloc((size_t)ncpu, vsz);
	__u64 mark = 0xfeedull, one = 1;
	__u32 k;

	assert_non_null(v);
	for (k = 0; k < h2_slots(); k++) {
		assert_int_equal(bpf_map_lookup_elem(fd, &k, v), 0);
		for (i = 0; i < ncpu; i++) {
			unsigned char *s = v + (size_t)i * vsz;

			marked += !memcmp(s + busy, &one, 8) && !memcmp(s + conn, &mark, 8);
			if (k < held) {
				memcpy(s + busy, &one, 8);
				memcpy(s + conn, &mark, 8);
			} else {
				memset(s, 0, vsz);
			}
		}
		assert_int_equal(bpf_map_update_elem(fd, &k, v, BPF_ANY), 0);
	}
	free(v);
	return marked;
}

/* A walk that finds every slot of its CPU's scratch held (by walks it preempted, each
 * the one before, on a preemptible kernel: simulated here by holding every CPU's)
 * leaves them alone: one record of no bytes says the direction's framing is lost, and
 * nothing more of it is sent; the other direction goes on. A walk leaves its slot
 * free. */
static void test_h2_preempted_walk(void **state)
{
	const struct usm_h2_record *r;
	unsigned char b[64];
	size_t n;

	(void)state;
	memcpy(b, PREFACE, 24);
	assert_int_equal(h2_call(SSL_WRITE, b, 24, 1), 1);
	assert_int_equal(h2_scratch_hold(h2_slots()), 0); /* the walk cleared busy */
	n = frame(b, 1, 4, 1, 10, NULL, 0x82);
	assert_int_equal(h2_call(SSL_WRITE, b, n, 2), 1);
	r = h2rec(0);
	assert_int_equal(r->flags, USM_H2_F_UNFRAMED);
	assert_int_equal(r->conn, SSL_PTR);
	assert_int_equal(r->dir, USM_DIR_WRITE);
	assert_int_equal(r->offset, 24);
	assert_int_equal(r->len, n);
	assert_int_equal(r->walked, 0);
	assert_int_equal(r->data_len, 0);
	assert_int_equal(counter(USM_CNT_H2_NESTED), 1);
	assert_int_equal(counter(USM_CNT_H2_UNFRAMED), 0);
	assert_int_equal(counter(USM_CNT_H2_RECORDS), 2);
	/* The preempted walks' slots are as they left them. */
	assert_int_equal(h2_scratch_hold(0), libbpf_num_possible_cpus() * (int)h2_slots());
	/* Released: that direction stays lost, the other is walked. */
	assert_int_equal(h2_call(SSL_WRITE, b, n, 3), 0);
	n = frame(b, 4, 0, 0, 0, NULL, 0);
	assert_int_equal(h2_call(SSL_READ, b, n, 4), 1);
	assert_int_equal(h2rec(0)->flags, USM_H2_F_NEW);
	assert_int_equal(h2rec(0)->data_len, n);
	assert_int_equal(counter(USM_CNT_H2_NESTED), 1);
}

/* A walk that preempted another one (its CPU's first slot held) takes the next slot:
 * its bytes are walked and sent, nothing is lost, and the preempted walk's slot is as
 * it left it. One user's busy HTTP/2 loop, preempted by another user's server on
 * waking, cost that server its session when a CPU had one slot. */
static void test_h2_preempting_walk_next_slot(void **state)
{
	unsigned char b[64];
	size_t n;

	(void)state;
	assert_true(h2_slots() >= 2);
	memcpy(b, PREFACE, 24);
	assert_int_equal(h2_call(SSL_WRITE, b, 24, 1), 1);
	assert_int_equal(h2_scratch_hold(1), 0);
	n = frame(b, 1, 4, 1, 10, NULL, 0x82);
	assert_int_equal(h2_call(SSL_WRITE, b, n, 2), 1);
	assert_int_equal(h2rec(0)->flags, 0);
	assert_int_equal(h2rec(0)->walked, n);
	assert_int_equal(h2rec(0)->data_len, n);
	assert_int_equal(counter(USM_CNT_H2_NESTED), 0);
	assert_int_equal(h2_scratch_hold(0), libbpf_num_possible_cpus());
	assert_int_equal(h2_call(SSL_WRITE, b, n, 3), 1); /* still framed */
	assert_int_equal(h2rec(0)->walked, n);
}

/* A session that carried an HTTP/1 message stays HTTP/1: a body that begins like a
 * server's SETTINGS or a client's preface (an upload, in either direction) starts no
 * HTTP/2 session, and the session's next message is still seen. Counted. A frame-like
 * body is not a session joined mid-way either. SSL_set_fd (a new connection) or the
 * session's end clears the mark. */
static void test_h2_http1_session_stays(void **state)
{
	const char *req = "POST /upload HTTP/1.1\r\nContent-Length: 64\r\n\r\n";
	const char *next = "GET /next HTTP/1.1\r\n\r\n";
	struct fd_key {
		__u64 conn;
		__u32 tgid, pad;
	} k = {SSL_PTR, 4242, 0};
	struct usm_tls_sess sess;
	unsigned char b[64];
	size_t n;

	(void)state;
	assert_int_equal(tls_call(SSL_READ, req, strlen(req), (long)strlen(req), NULL, 1), 1);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.usm_tls_fds), &k, &sess), 0);
	assert_int_equal(sess.http1, 1);
	assert_int_equal(sess.fd, -1); /* no SSL_set_fd seen: curl's own BIO */
	n = frame(b, 4, 0, 0, 12, NULL, 0); /* SETTINGS-like body */
	assert_int_equal(h2_call(SSL_READ, b, n, 2), 0);
	assert_int_equal(h2_call(SSL_WRITE, b, n, 3), 0);
	memcpy(b, PREFACE, 24); /* preface-like body */
	assert_int_equal(h2_call(SSL_READ, b, 24, 4), 0);
	assert_int_equal(counter(USM_CNT_H2_START_REFUSED), 3);
	n = frame(b, 1, 4, 5, 20, NULL, 0x82); /* frame-like body */
	assert_int_equal(h2_call(SSL_READ, b, n, 5), 0);
	assert_int_equal(counter(USM_CNT_H2_MIDSTREAM), 0);
	assert_int_not_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.usm_h2_conns), &k, b), 0);
	assert_int_equal(tls_call(SSL_READ, next, strlen(next), (long)strlen(next), NULL, 6), 1);
	assert_int_equal(event(0)->kind, USM_KIND_REQUEST);
	assert_int_equal(counter(USM_CNT_H2_CALLS), 0);

	/* A new connection on the session (SSL_set_fd) may be HTTP/2. */
	tls_run(USM_TLS_SSL_SET_FD, false, &(struct test_regs){.di = SSL_PTR, .si = 9}, 7);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.usm_tls_fds), &k, &sess), 0);
	assert_int_equal(sess.http1, 0);
	assert_int_equal(sess.fd, 9);
	n = frame(b, 4, 0, 0, 12, NULL, 0);
	assert_int_equal(h2_call(SSL_WRITE, b, n, 8), 1);
	assert_int_equal(h2rec(0)->flags, USM_H2_F_NEW | USM_H2_F_SETTINGS);
	assert_int_equal(h2rec(0)->fd, 9);

	/* Its end clears it too: a session made at the freed address may be HTTP/2. */
	tls_run(USM_TLS_SSL_FREE, false, &(struct test_regs){.di = SSL_PTR}, 9);
	assert_int_equal(bpftel_rb_capture__drain(&h2cap), 1); /* its end */
	assert_int_equal(tls_call(SSL_WRITE, next, strlen(next), (long)strlen(next), NULL, 10), 1);
	tls_run(USM_TLS_SSL_FREE, false, &(struct test_regs){.di = SSL_PTR}, 11);
	assert_int_not_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.usm_tls_fds), &k, &sess), 0);
	memcpy(b, PREFACE, 24);
	assert_int_equal(h2_call(SSL_WRITE, b, 24, 12), 1);
	assert_int_equal(h2rec(0)->flags, USM_H2_F_NEW | USM_H2_F_PREFACE);
	assert_int_equal(counter(USM_CNT_H2_START_REFUSED), 3);
}

/* ---- Users' shares (bpf/lib/fair_share.h) ---- */

#define SHARE_USER   4321u
#define H2_SHARE     (USM_H2_CONNS_MAX / FAIR_SHARE_DIV)
#define SHARE_SSL(i) (SSL_PTR + 0x10000ul + (__u64)(i) * 0x100)

/* This thread's real uid becomes uid (0: root's again). The raw system call changes
 * this thread's only (glibc's would change every thread's), and the effective uid stays
 * 0: the test keeps its capabilities, while bpf_get_current_uid_gid() says uid. */
static void as_real_uid(__u32 uid)
{
	assert_int_equal(syscall(SYS_setresuid, uid, -1, -1), 0);
}

/* Session conn's first write is a preface, by process tgid: its records. */
static int h2_start_as(__u64 conn, __u32 tgid, __u64 t)
{
	struct test_regs in = {.di = conn, .si = (uintptr_t)PREFACE, .dx = 24, .sp = TLS_SP};

	tls_run_as(SSL_WRITE, false, &in, t, (__u64)tgid << 32 | tgid);
	return bpftel_rb_capture__drain(&h2cap);
}

static void ssl_free_as(__u64 conn, __u32 tgid)
{
	tls_run_as(USM_TLS_SSL_FREE, false, &(struct test_regs){.di = conn}, 1,
		   (__u64)tgid << 32 | tgid);
	bpftel_rb_capture__drain(&h2cap);
}

/* What uid holds of table as the programs count it, with the sweep's correction; -1
 * when no count is kept. */
static __s64 share_held(__u32 uid, __u32 table)
{
	struct fair_share_key k = {.uid = uid, .table = table};
	__s64 n = -1, adj = 0;

	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.fair_share), &k, &n))
		return -1;
	bpf_map_lookup_elem(bpf_map__fd(skel->maps.fair_share_adj), &k, &adj);
	return n + adj;
}

/* The user's HTTP/2 sessions as the programs see them. */
static __s64 share_count(__u32 uid)
{
	return share_held(uid, USM_SHARE_H2_CONNS);
}

/*
 * A user but root starts HTTP/2 sessions up to a quarter of usm_h2_conns; its next one
 * is refused and counted, and its frames are not a session joined mid-way. Root and
 * another user still start theirs; a session of the first that ends gives its place
 * back.
 */
static void test_h2_share_per_user(void **state)
{
	const char headers[9] = {0, 0, 5, 1, 0x4, 0, 0, 0, 1};
	struct test_regs in = {.di = SHARE_SSL(H2_SHARE), .si = (uintptr_t)headers, .dx = 9,
			       .sp = TLS_SP};
	int i, made = 0;

	(void)state;
	as_real_uid(SHARE_USER);
	for (i = 0; i < H2_SHARE; i++)
		made += h2_start_as(SHARE_SSL(i), 4242, i);
	assert_int_equal(made, H2_SHARE); /* one record each: all started */
	assert_int_equal(share_count(SHARE_USER), H2_SHARE);
	assert_int_equal(h2_start_as(SHARE_SSL(H2_SHARE), 4242, 1), 0);
	assert_int_equal(counter(USM_CNT_H2_OVER_SHARE), 1);
	/* Its frames: neither sent nor counted as a session whose start was missed. */
	tls_run(SSL_WRITE, false, &in, 2);
	assert_int_equal(bpftel_rb_capture__drain(&h2cap), 0);
	assert_int_equal(counter(USM_CNT_H2_MIDSTREAM), 0);
	/* Another process of the user's has no share of its own. */
	assert_int_equal(h2_start_as(SHARE_SSL(H2_SHARE + 1), 4343, 3), 0);
	assert_int_equal(counter(USM_CNT_H2_OVER_SHARE), 2);
	/* Another user, and root, are not refused. */
	as_real_uid(SHARE_USER + 1);
	assert_int_equal(h2_start_as(SHARE_SSL(H2_SHARE + 2), 4242, 4), 1);
	assert_int_equal(h2rec(0)->uid, SHARE_USER + 1); /* userspace's shares (h2_sessions.h) */
	assert_int_equal(share_count(SHARE_USER + 1), 1);
	as_real_uid(0);
	assert_int_equal(h2_start_as(SHARE_SSL(H2_SHARE + 3), 4242, 5), 1);
	assert_int_equal(share_count(0), -1); /* root's are not counted */
	/* A session of the user's ends: its place is free again. */
	as_real_uid(SHARE_USER);
	ssl_free_as(SHARE_SSL(0), 4242);
	assert_int_equal(share_count(SHARE_USER), H2_SHARE - 1);
	assert_int_equal(h2_start_as(SHARE_SSL(H2_SHARE + 1), 4343, 6), 1);
	assert_int_equal(share_count(SHARE_USER), H2_SHARE);
	assert_int_equal(counter(USM_CNT_H2_OVER_SHARE), 2);
	as_real_uid(0);
}

/*
 * The caps are userspace's to set (user_share_percent, usm_fair_share_cap), and apply to
 * the next entry: a lower one refuses the user's 4th start; none (100 %) admits it past
 * a quarter, counted all the same, so that a cap set again refuses a user already
 * over it.
 */
static void test_share_cap_set_live(void **state)
{
	const struct usm_share_map *t = &usm_share_tables[USM_SHARE_H2_CONNS];
	__s64 *cap = &skel->data->usm_share_cap[USM_SHARE_H2_CONNS];
	int i, made = 0;

	(void)state;
	assert_int_equal(usm_fair_share_cap(t, 0), H2_SHARE); /* the default: a quarter */
	assert_int_equal(usm_fair_share_cap(t, 25), H2_SHARE);
	assert_int_equal(usm_fair_share_cap(t, 50), USM_H2_CONNS_MAX / 2);
	assert_int_equal(usm_fair_share_cap(t, 1), USM_H2_CONNS_MAX / 100);
	assert_int_equal(usm_fair_share_cap(t, 100), 0);
	assert_int_equal(usm_fair_share_cap(&(struct usm_share_map){.max_entries = 50}, 1), 1);

	as_real_uid(SHARE_USER);
	*cap = 3;
	for (i = 0; i < 3; i++)
		assert_int_equal(h2_start_as(SHARE_SSL(i), 4242, i), 1);
	assert_int_equal(h2_start_as(SHARE_SSL(3), 4242, 3), 0);
	assert_int_equal(counter(USM_CNT_H2_OVER_SHARE), 1);
	*cap = 0;
	for (i = 3; i < H2_SHARE + 2; i++)
		made += h2_start_as(SHARE_SSL(i), 4242, i);
	assert_int_equal(made, H2_SHARE - 1);
	assert_int_equal(share_count(SHARE_USER), H2_SHARE + 2);
	assert_int_equal(counter(USM_CNT_H2_OVER_SHARE), 1);
	*cap = H2_SHARE;
	assert_int_equal(h2_start_as(SHARE_SSL(H2_SHARE + 2), 4242, 1), 0);
	assert_int_equal(counter(USM_CNT_H2_OVER_SHARE), 2);
	as_real_uid(0);
}

/* Session starts as a container's root: a child in a pid namespace of its own (the
 * helper's test fails there), moved into cgroup dir cg first when not NULL. How many
 * started (each start's records drained in the child), or -1. */
static int container_starts(__u64 first, int n, const char *cg)
{
	int status, made = 0, i, fd;
	pid_t p, q;

	fflush(NULL); /* nothing printed twice */
	p = fork();
	if (p < 0)
		return -1;
	if (!p) {
		if (unshare(CLONE_NEWPID))
			_exit(250);
		q = fork(); /* pid 1 of the new namespace */
		if (q < 0)
			_exit(251);
		if (!q) {
			if (cg) {
				char path[256];

				snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
				fd = open(path, O_WRONLY);
				if (fd < 0 || write(fd, "0", 1) != 1)
					_exit(252);
				close(fd);
			}
			/* No cmocka here: a failed assert would jump back into the
			 * parent's test runner, in this process. */
			for (i = 0; i < n; i++) {
				struct usm_test_call ctx = {
					.regs = {.di = SHARE_SSL(first + i),
						 .si = (uintptr_t)PREFACE,
						 .dx = 24,
						 .sp = TLS_SP},
					.pid_tgid = 4545ull << 32 | 4545,
					.now = i,
					.probe = SSL_WRITE * 2};
				int retval = -1;

				if (bpftel_test_run(skel->progs.usm_test_tls, &ctx, sizeof(ctx),
						    &retval) ||
				    retval)
					_exit(254);
				made += bpftel_rb_capture__drain(&h2cap);
			}
			_exit(made);
		}
		if (waitpid(q, &status, 0) != q || !WIFEXITED(status))
			_exit(253);
		_exit(WEXITSTATUS(status));
	}
	if (waitpid(p, &status, 0) != p || !WIFEXITED(status) || WEXITSTATUS(status) > n) {
		print_error("container_starts: child status %#x\n", status);
		return -1;
	}
	return WEXITSTATUS(status);
}

/* A cgroup's id, as bpf_get_current_cgroup_id() gives it: its directory's handle. */
static __u64 cgroup_id(const char *dir)
{
	struct file_handle *fh = calloc(1, sizeof(*fh) + sizeof(__u64));
	__u64 id = 0;
	int mnt;

	assert_non_null(fh);
	fh->handle_bytes = sizeof(__u64);
	if (!name_to_handle_at(AT_FDCWD, dir, fh, &mnt, 0))
		memcpy(&id, fh->f_handle, sizeof(id));
	free(fh);
	return id;
}

/* Remove cgroup dir, which its reaped process may still populate a moment: tried again
 * until it goes, for up to a generous 30 s (a condition, not a time, is waited for). */
static bool cgroup_remove(const char *dir)
{
	struct timespec ts, step = {.tv_nsec = 10 * 1000 * 1000};
	time_t until;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	until = ts.tv_sec + 30;
	for (;;) {
		if (!rmdir(dir))
			return true;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		if (errno != EBUSY || ts.tv_sec > until)
			return false;
		nanosleep(&step, NULL);
	}
}

/* How many owners of HTTP/2 sessions are containers' roots. */
static int container_owners(void)
{
	int fd = bpf_map__fd(skel->maps.fair_share), n = 0;
	struct fair_share_key k, *prev = NULL, next;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		k = next;
		prev = &k;
		n += k.table == USM_SHARE_H2_CONNS && (k.uid & FAIR_SHARE_CONTAINER);
	}
	return n;
}

static __s64 owner_count(__u32 owner)
{
	struct fair_share_key k = {.uid = owner, .table = USM_SHARE_H2_CONNS};
	__s64 n = -1;

	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.fair_share), &k, &n))
		return -1;
	return n;
}

/*
 * Uid 0 in a pid namespace other than the agent's is a container's root: bounded like a
 * user, one share per cgroup (v2), where the host's root is not bounded. Two such
 * "containers" in cgroups of their own (a cgroup2 mount of the test's) each start their
 * share of 3 sessions, and are refused their 4th and 5th, under owners that name their
 * cgroups; the test's own thread, the host's root, starts 5 uncounted.
 */
static char cg_mnt[] = "/tmp/bpftel-cg2-XXXXXX", cg[2][64];
static bool cg_made;

static void test_share_container_root(void **state)
{
	char *mnt = cg_mnt;
	__u32 owner[2];
	int i;

	(void)state;
	assert_int_not_equal(skel->rodata->fair_share_pidns_ino, 0);
	skel->data->usm_share_cap[USM_SHARE_H2_CONNS] = 3;
	for (i = 0; i < 5; i++)
		assert_int_equal(h2_start_as(SHARE_SSL(i), 4242, i), 1);
	assert_int_equal(counter(USM_CNT_H2_OVER_SHARE), 0);
	assert_int_equal(container_owners(), 0); /* nor counted as a container's */
	/* The helper takes the kernel's dev_t, not stat's (they differ past minor 255). */
	assert_int_equal(fair_share_kernel_dev(makedev(259, 300)), 259ull << 20 | 300);
	assert_int_equal(fair_share_kernel_dev(makedev(0, 4)), 4);

	assert_non_null(mkdtemp(mnt));
	cg_made = true;
	assert_int_equal(mount("none", mnt, "cgroup2", 0, NULL), 0);
	for (i = 0; i < 2; i++) {
		snprintf(cg[i], sizeof(cg[i]), "%s/bpftel-test-%d-%d", mnt, (int)getpid(), i);
		assert_int_equal(mkdir(cg[i], 0755), 0);
		owner[i] = FAIR_SHARE_CONTAINER | ((__u32)cgroup_id(cg[i]) & ~FAIR_SHARE_CONTAINER);
	}
	assert_int_not_equal(owner[0], owner[1]);
	assert_int_equal(container_starts(100, 5, cg[0]), 3);
	assert_int_equal(container_starts(200, 5, cg[1]), 3);
	assert_int_equal(container_owners(), 2);
	for (i = 0; i < 2; i++) {
		assert_int_equal(owner_count(owner[i]), 3);
		/* Its process reaped; the kernel may still hold the cgroup a moment. */
		assert_true(cgroup_remove(cg[i]));
	}
	assert_int_equal(umount(mnt), 0);
	assert_int_equal(rmdir(mnt), 0);
	assert_int_equal(counter(USM_CNT_H2_OVER_SHARE), 4);
}

/* What a failed test_share_container_root left: its cgroups and mount. */
static int container_root_teardown(void **state)
{
	int i;

	(void)state;
	if (!cg_made)
		return 0;
	for (i = 0; i < 2; i++)
		if (cg[i][0])
			cgroup_remove(cg[i]);
	umount(cg_mnt);
	rmdir(cg_mnt);
	return 0;
}

/* The HTTP/2 sessions' owner of a start made as uid (the thread's real uid). */
static __u32 owner_as(__u32 uid, __u64 conn)
{
	struct fair_share_key k, *prev = NULL, next;
	int fd = bpf_map__fd(skel->maps.fair_share);
	__u32 found = 0;

	while (!bpf_map_get_next_key(fd, NULL, &next)) /* no count but this one's */
		assert_int_equal(bpf_map_delete_elem(fd, &next), 0);
	as_real_uid(uid);
	assert_int_equal(h2_start_as(conn, 4242, 1), 1);
	as_real_uid(0);
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		k = next;
		prev = &k;
		assert_int_equal(found, 0); /* one owner */
		found = k.uid;
	}
	return found;
}

/*
 * A uid of a range granted to a user (/etc/subuid, in the table userspace makes live)
 * is that user's; one just outside, its own. 256 ranges, the table full: the binary
 * search finds each; tables of 3, 1 and no ranges; a range of no one user's is an
 * owner per block.
 */
static void test_share_subuid_ranges(void **state)
{
	struct fair_share_ranges *t = &skel->bss->fair_share_ranges[1];
	__u32 i, conn = FAIR_SHARE_RANGES;

	(void)state;
	for (i = 0; i < FAIR_SHARE_RANGES; i++)
		t->r[i] = (struct fair_share_range){.first = 1000000 + i * 1000, .count = 100,
						    .owner = 5000 + i};
	t->n = FAIR_SHARE_RANGES;
	/* Not live yet: each uid is its own. */
	assert_int_equal(owner_as(1000050, SHARE_SSL(conn++)), 1000050);
	skel->bss->fair_share_ranges_live = 1;
	for (i = 0; i < FAIR_SHARE_RANGES; i++) /* each one found */
		assert_int_equal(owner_as(1000000 + i * 1000 + 50, SHARE_SSL(i)), 5000 + i);
	assert_int_equal(owner_as(1000000, SHARE_SSL(conn++)), 5000);
	assert_int_equal(owner_as(1000099, SHARE_SSL(conn++)), 5000);
	assert_int_equal(owner_as(1000100, SHARE_SSL(conn++)), 1000100); /* just past */
	assert_int_equal(owner_as(999999, SHARE_SSL(conn++)), 999999);	  /* just before */
	assert_int_equal(owner_as(1127000, SHARE_SSL(conn++)), 5127);
	assert_int_equal(owner_as(1128042, SHARE_SSL(conn++)), 5128);
	assert_int_equal(owner_as(1255099, SHARE_SSL(conn++)), 5255);
	assert_int_equal(owner_as(1255100, SHARE_SSL(conn++)), 1255100);
	assert_int_equal(owner_as(4000000, SHARE_SSL(conn++)), 4000000);
	/* Tables of 3 ranges, of one, of none. */
	t->n = 3;
	for (i = 0; i < 4; i++)
		assert_int_equal(owner_as(1000000 + i * 1000 + 99, SHARE_SSL(conn++)),
				 i < 3 ? 5000 + i : 1003099);
	t->n = 1;
	assert_int_equal(owner_as(1000001, SHARE_SSL(conn++)), 5000);
	assert_int_equal(owner_as(1001001, SHARE_SSL(conn++)), 1001001);
	t->n = 0;
	assert_int_equal(owner_as(1000001, SHARE_SSL(conn++)), 1000001);
	/* A range of no one user's (root's, podman's "containers"): an owner per block of
	 * FAIR_SHARE_RANGE_BLOCK uids, named by its first. */
	t->r[0] = (struct fair_share_range){.first = 100000, .count = 3 * FAIR_SHARE_RANGE_BLOCK};
	t->n = 1;
	assert_int_equal(owner_as(100005, SHARE_SSL(conn++)), 100000);
	assert_int_equal(owner_as(100000 + FAIR_SHARE_RANGE_BLOCK - 1, SHARE_SSL(conn++)), 100000);
	assert_int_equal(owner_as(100000 + FAIR_SHARE_RANGE_BLOCK + 7, SHARE_SSL(conn++)),
			 100000 + FAIR_SHARE_RANGE_BLOCK);
	assert_int_equal(owner_as(100000 + 3 * FAIR_SHARE_RANGE_BLOCK - 1, SHARE_SSL(conn++)),
			 100000 + 2 * FAIR_SHARE_RANGE_BLOCK);
	assert_int_equal(owner_as(100000 + 3 * FAIR_SHARE_RANGE_BLOCK, SHARE_SSL(conn++)),
			 100000 + 3 * FAIR_SHARE_RANGE_BLOCK); /* past it: its own */
}

static void set_fd_as(__u64 conn, int fd, __u32 tgid)
{
	tls_run_as(USM_TLS_SSL_SET_FD, false, &(struct test_regs){.di = conn, .si = (__u64)fd}, 1,
		   (__u64)tgid << 32 | tgid);
	bpftel_rb_capture__drain(&h2cap);
}

static __s64 fds_share_count(__u32 uid)
{
	struct fair_share_key k = {.uid = uid, .table = USM_SHARE_TLS_FDS};
	__s64 n = -1;

	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.fair_share), &k, &n))
		return -1;
	return n;
}

/*
 * The sessions' sockets and HTTP/1 marks (usm_tls_fds) are shared out too: a user past
 * a quarter of the table keeps its new sessions without (counted); a new connection on
 * a session it keeps takes no more; root and the others are not refused; a session
 * that ends gives its place back.
 */
static void test_tls_sess_share_per_user(void **state)
{
	const int share = USM_TLS_FDS_MAX / FAIR_SHARE_DIV;
	const char *req = "GET / HTTP/1.1\r\n\r\n";
	struct test_regs w = {.di = SHARE_SSL(share), .si = (uintptr_t)req, .dx = strlen(req),
			      .sp = TLS_SP};
	int i;

	(void)state;
	as_real_uid(SHARE_USER);
	for (i = 0; i < share; i++)
		set_fd_as(SHARE_SSL(i), 100 + i % 1000, 4242);
	assert_int_equal(sess_fd(SHARE_SSL(share - 1), 4242), 100 + (share - 1) % 1000);
	assert_int_equal(fds_share_count(SHARE_USER), share);
	assert_int_equal(counter(USM_CNT_TLS_SESS_OVER_SHARE), 0);
	set_fd_as(SHARE_SSL(share), 7, 4343); /* another process of the user's */
	assert_int_equal(sess_fd(SHARE_SSL(share), 4343), -2);
	assert_int_equal(counter(USM_CNT_TLS_SESS_OVER_SHARE), 1);
	/* Its message is still emitted, without a socket, and no mark is kept either. */
	tls_run_as(SSL_WRITE, false, &w, 2, (4343ull << 32) | 4343);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 1);
	assert_int_equal(event(0)->fd, -1);
	assert_int_equal(counter(USM_CNT_TLS_SESS_OVER_SHARE), 2);
	/* A new connection on a session kept: in place, no more of the share. */
	set_fd_as(SHARE_SSL(0), 9, 4242);
	assert_int_equal(sess_fd(SHARE_SSL(0), 4242), 9);
	assert_int_equal(fds_share_count(SHARE_USER), share);
	/* Root's and another user's are kept. */
	as_real_uid(SHARE_USER + 1);
	set_fd_as(SHARE_SSL(share + 1), 5, 4242);
	assert_int_equal(sess_fd(SHARE_SSL(share + 1), 4242), 5);
	as_real_uid(0);
	set_fd_as(SHARE_SSL(share + 2), 6, 4242);
	assert_int_equal(sess_fd(SHARE_SSL(share + 2), 4242), 6);
	assert_int_equal(counter(USM_CNT_TLS_SESS_OVER_SHARE), 2);
	/* A session of the user's ends: its place is free again. */
	as_real_uid(SHARE_USER);
	ssl_free_as(SHARE_SSL(1), 4242);
	assert_int_equal(sess_fd(SHARE_SSL(1), 4242), -2);
	assert_int_equal(fds_share_count(SHARE_USER), share - 1);
	set_fd_as(SHARE_SSL(share), 7, 4343);
	assert_int_equal(sess_fd(SHARE_SSL(share), 4343), 7);
	as_real_uid(0);
}

/* With the counts' map full (a user with a uid per entry), a new user's sessions are
 * made uncounted, not refused: no user locks the others out. */
static void test_share_counts_full(void **state)
{
	int counts = bpf_map__fd(skel->maps.fair_share);
	struct fair_share_key k = {.table = USM_SHARE_TLS_FDS};
	__s64 one = 1;
	__u32 i;

	(void)state;
	for (i = 0; i < FAIR_SHARE_KEYS; i++) {
		k.uid = 200000 + i;
		assert_int_equal(bpf_map_update_elem(counts, &k, &one, BPF_NOEXIST), 0);
	}
	as_real_uid(SHARE_USER);
	assert_int_equal(h2_start_as(SHARE_SSL(0), 4242, 1), 1);
	as_real_uid(0);
	assert_int_equal(share_count(SHARE_USER), -1);
	assert_int_equal(counter(USM_CNT_H2_OVER_SHARE), 0);
}

static bool tgid_alive(__u32 tgid)
{
	return tgid == (__u32)getpid();
}

/*
 * The sweep (user/modules/usm/fair_share.c): the sessions of processes gone are
 * deleted, and each user's count corrected to the sessions it holds, whatever the
 * count said (evictions and ends the programs never saw), the programs' later takes
 * and gives on top; a user with none loses its count.
 */
static void test_h2_share_sweep(void **state)
{
	int fd = bpf_map__fd(skel->maps.usm_h2_conns), counts = bpf_map__fd(skel->maps.fair_share);
	int adj = bpf_map__fd(skel->maps.fair_share_adj);
	struct usm_share_map t = usm_share_tables[USM_SHARE_H2_CONNS];
	struct fair_share_key gone = {.uid = SHARE_USER + 2, .table = USM_SHARE_H2_CONNS};
	__u32 self = (__u32)getpid();
	__s64 stale = 77;
	__u64 deleted = 0;
	int i;

	(void)state;
	t.fd = fd;
	/* Nothing to recount while only root holds sessions: nothing is deleted. */
	assert_int_equal(h2_start_as(SHARE_SSL(0), 4242, 1), 1);
	assert_int_equal(usm_fair_share_sweep(counts, adj, &t, tgid_alive, &deleted, NULL), 0);
	assert_int_equal(deleted, 0);
	as_real_uid(SHARE_USER);
	for (i = 1; i <= 5; i++) /* 3 of this process, 2 of one gone */
		assert_int_equal(h2_start_as(SHARE_SSL(i), i <= 3 ? self : 4242, i), 1);
	as_real_uid(0);
	assert_int_equal(share_count(SHARE_USER), 5);
	/* Counts gone wrong: the user's too high (an eviction not seen), another user's
	 * without sessions. */
	stale = 40;
	gone.uid = SHARE_USER;
	assert_int_equal(bpf_map_update_elem(counts, &gone, &stale, BPF_ANY), 0);
	gone.uid = SHARE_USER + 2;
	assert_int_equal(bpf_map_update_elem(counts, &gone, &stale, BPF_ANY), 0);
	assert_int_equal(usm_fair_share_sweep(counts, adj, &t, tgid_alive, &deleted, NULL), 0);
	assert_int_equal(deleted, 3); /* root's session and the user's two, of 4242 */
	assert_int_equal(share_count(SHARE_USER), 3);
	assert_int_equal(share_count(SHARE_USER + 2), -1);
	/* The programs' takes and gives count on top of the correction. */
	as_real_uid(SHARE_USER);
	assert_int_equal(h2_start_as(SHARE_SSL(6), self, 6), 1);
	assert_int_equal(share_count(SHARE_USER), 4);
	ssl_free_as(SHARE_SSL(1), self);
	ssl_free_as(SHARE_SSL(2), self);
	as_real_uid(0);
	assert_int_equal(share_count(SHARE_USER), 2);
	assert_int_equal(usm_fair_share_sweep(counts, adj, &t, tgid_alive, &deleted, NULL), 0);
	assert_int_equal(share_count(SHARE_USER), 2);
	assert_int_equal(deleted, 3);
	for (i = 1; i <= 6; i++) { /* what is left: the process's 3rd and 6th */
		struct usm_fd_key k = {.conn = SHARE_SSL(i), .tgid = i <= 3 ? self : 4242};
		struct usm_h2_state v;

		if (i == 6)
			k.tgid = self;
		assert_int_equal(bpf_map_lookup_elem(fd, &k, &v), i == 3 || i == 6 ? 0 : -ENOENT);
		if (i == 3 || i == 6)
			assert_int_equal(v.uid, SHARE_USER);
	}
}

/* The count of SHARE_USER's sessions moves while the sweep walks: the first time it asks
 * whether a process lives, after reading the table, as the programs count a session made
 * after the walk began that the walk read (a count taken twice, corrected once). */
static int walk_moves;

static bool alive_count_moves(__u32 tgid)
{
	struct fair_share_key k = {.uid = SHARE_USER, .table = USM_SHARE_H2_CONNS};
	int counts = bpf_map__fd(skel->maps.fair_share);
	__s64 n;

	if (walk_moves && walk_moves--) {
		assert_int_equal(bpf_map_lookup_elem(counts, &k, &n), 0);
		n++;
		assert_int_equal(bpf_map_update_elem(counts, &k, &n, BPF_EXIST), 0);
	}
	return tgid_alive(tgid);
}

/* A count that moved during the walk is not corrected by what the walk half saw: the
 * sweep walks again, and the user's count is what it holds. */
static void test_share_sweep_walks_again(void **state)
{
	struct usm_share_map t = usm_share_tables[USM_SHARE_H2_CONNS];
	int counts = bpf_map__fd(skel->maps.fair_share);
	int adj = bpf_map__fd(skel->maps.fair_share_adj);
	__u32 self = (__u32)getpid();
	__u64 deleted = 0;
	int i;

	(void)state;
	t.fd = bpf_map__fd(skel->maps.usm_h2_conns);
	as_real_uid(SHARE_USER);
	for (i = 1; i <= 3; i++)
		assert_int_equal(h2_start_as(SHARE_SSL(i), self, i), 1);
	as_real_uid(0);
	assert_int_equal(share_count(SHARE_USER), 3);
	walk_moves = 1;
	assert_int_equal(usm_fair_share_sweep(counts, adj, &t, alive_count_moves, &deleted, NULL),
			 0);
	assert_int_equal(walk_moves, 0);
	assert_int_equal(share_count(SHARE_USER), 3);
}

/*
 * The sweep names who holds the most of a table (bpftel http's shares): the 4 owners
 * holding the most, most first, of two holding as many the lower uid; none while only
 * root holds some, or once the users' entries are gone.
 */
static void test_share_holders(void **state)
{
	struct usm_share_map t = usm_share_tables[USM_SHARE_H2_CONNS];
	int counts = bpf_map__fd(skel->maps.fair_share);
	int adj = bpf_map__fd(skel->maps.fair_share_adj);
	struct fair_share_holders top = {.n = 99};
	__u32 self = (__u32)getpid(), held[] = {1, 4, 6, 3, 3, 5};
	__u64 deleted = 0, conn = 0;
	__u32 u, i;

	(void)state;
	t.fd = bpf_map__fd(skel->maps.usm_h2_conns);
	assert_int_equal(h2_start_as(SHARE_SSL(conn++), self, 1), 1); /* root's */
	assert_int_equal(usm_fair_share_sweep(counts, adj, &t, tgid_alive, &deleted, &top), 0);
	assert_int_equal(top.n, 0);
	for (u = 0; u < 6; u++) {
		as_real_uid(SHARE_USER + u);
		for (i = 0; i < held[u]; i++, conn++)
			assert_int_equal(h2_start_as(SHARE_SSL(conn), self, conn), 1);
	}
	as_real_uid(0);
	assert_int_equal(usm_fair_share_sweep(counts, adj, &t, tgid_alive, &deleted, &top), 0);
	assert_int_equal(top.n, FAIR_SHARE_HOLDERS);
	assert_int_equal(top.v[0].owner, SHARE_USER + 2);
	assert_int_equal(top.v[0].held, 6);
	assert_int_equal(top.v[1].owner, SHARE_USER + 5);
	assert_int_equal(top.v[1].held, 5);
	assert_int_equal(top.v[2].owner, SHARE_USER + 1);
	assert_int_equal(top.v[2].held, 4);
	assert_int_equal(top.v[3].owner, SHARE_USER + 3); /* not + 4: as many, seen later */
	assert_int_equal(top.v[3].held, 3);
	/* The users' sessions end: no holder is left. */
	for (conn = 1, u = 0; u < 6; u++) {
		as_real_uid(SHARE_USER + u);
		for (i = 0; i < held[u]; i++)
			ssl_free_as(SHARE_SSL(conn++), self);
	}
	as_real_uid(0);
	assert_int_equal(usm_fair_share_sweep(counts, adj, &t, tgid_alive, &deleted, &top), 0);
	assert_int_equal(top.n, 0);
	assert_int_equal(deleted, 0);
}

/* A session whose start was missed: a call that looks like a frame header counts it,
 * once; nothing is sent, and the session's HTTP/1 is untouched (a binary body can look
 * like a frame header too). */
static void test_h2_midstream_counted_once(void **state)
{
	const char *req = "GET /after HTTP/1.1\r\n\r\n";
	unsigned char b[64];
	size_t n;

	(void)state;
	n = frame(b, 1, 4, 5, 20, NULL, 0x82); /* HEADERS of stream 5 */
	assert_int_equal(h2_call(SSL_WRITE, b, n, 1), 0);
	assert_int_equal(counter(USM_CNT_H2_MIDSTREAM), 1);
	n = frame(b, 0, 0, 5, 30, NULL, 'S'); /* its DATA */
	assert_int_equal(h2_call(SSL_WRITE, b, n, 2), 0);
	assert_int_equal(h2_call(SSL_READ, b, n, 3), 0);
	assert_int_equal(counter(USM_CNT_H2_MIDSTREAM), 1);
	assert_int_equal(counter(USM_CNT_H2_CALLS), 0);
	/* Another process's session at the same address is another session. */
	{
		struct test_regs in = {.di = SSL_PTR, .si = (uintptr_t)b, .dx = n};

		tls_run_as(SSL_WRITE, false, &in, 4, (4343ull << 32) | 4343);
	}
	assert_int_equal(counter(USM_CNT_H2_MIDSTREAM), 2);
	/* Not frame-like: JSON, a length over 16 KiB, an undefined type, a reserved bit. */
	assert_int_equal(h2_call(SSL_WRITE, "{\"a\": 1}", 8, 5), 0);
	frame(b, 0, 0, 1, 0, NULL, 0);
	b[1] = 0x4e; /* a length of 20000 */
	b[2] = 0x20;
	assert_int_equal(h2_call(SSL_WRITE, b, 16, 6), 0);
	frame(b, 10, 0, 1, 4, NULL, 0);
	assert_int_equal(h2_call(SSL_WRITE, b, 13, 7), 0);
	frame(b, 0, 0, 0x80000001u, 4, NULL, 0);
	assert_int_equal(h2_call(SSL_WRITE, b, 13, 8), 0);
	assert_int_equal(counter(USM_CNT_H2_MIDSTREAM), 2);
	/* The counted session's HTTP/1 still goes through. */
	assert_int_equal(tls_call(SSL_WRITE, req, strlen(req), (long)strlen(req), NULL, 9), 1);
	assert_int_equal(event(0)->kind, USM_KIND_REQUEST);
}

/* Not HTTP/2: other bytes start nothing, and HTTP/1 goes on as before. SSL_set_fd
 * forgets a session's state; a preface on a known session restarts it. */
static void test_h2_detection(void **state)
{
	const char *req = "GET /h1 HTTP/1.1\r\n\r\n";
	unsigned char b[64];
	size_t n;

	(void)state;
	n = frame(b, 4, 1, 0, 0, NULL, 0); /* a SETTINGS ACK does not start a session */
	assert_int_equal(h2_call(SSL_WRITE, b, n, 1), 0);
	n = frame(b, 4, 0, 0, 7, NULL, 0); /* a length that is no whole setting */
	assert_int_equal(h2_call(SSL_WRITE, b, n, 1), 0);
	assert_int_equal(h2_call(SSL_WRITE, "PRI * HTTP/2.0\r\n", 16, 1), 0); /* short */
	assert_int_equal(tls_call(SSL_WRITE, req, strlen(req), (long)strlen(req), NULL, 1), 1);
	assert_int_equal(bpftel_rb_capture__drain(&h2cap), 0);
	assert_int_equal(counter(USM_CNT_H2_CALLS), 0);

	/* That session carried HTTP/1 (test_h2_http1_session_stays): a preface is a new
	 * session's, at the address once the old one is freed. */
	tls_run(USM_TLS_SSL_FREE, false, &(struct test_regs){.di = SSL_PTR}, 2);
	memcpy(b, PREFACE, 24);
	assert_int_equal(h2_call(SSL_WRITE, b, 24, 2), 1);
	n = frame(b, 0, 0, 1, 10, NULL, 'S');
	assert_int_equal(h2_call(SSL_WRITE, b, 9, 3), 1); /* a DATA header, payload to come */
	tls_run(USM_TLS_SSL_SET_FD, false, &(struct test_regs){.di = SSL_PTR, .si = 5}, 4);
	assert_int_equal(bpftel_rb_capture__drain(&h2cap), 1); /* userspace is told */
	assert_h2_closed(0, SSL_PTR, USM_SRC_OPENSSL);
	/* Forgotten: the payload is no HTTP/2 start, and no HTTP/1 either. */
	assert_int_equal(tls_call(SSL_WRITE, b + 9, 10, 10, NULL, 5), 0);
	assert_int_equal(bpftel_rb_capture__drain(&h2cap), 0);
	/* A new connection on the session: its preface starts it again, at offset 0. */
	memcpy(b, PREFACE, 24);
	assert_int_equal(h2_call(SSL_WRITE, b, 24, 6), 1);
	assert_int_equal(h2rec(0)->offset, 0);
	assert_int_equal(h2rec(0)->fd, 5);
	assert_int_equal(h2rec(0)->flags, USM_H2_F_NEW | USM_H2_F_PREFACE);
	n = 24 + frame(b + 24, 4, 0, 0, 0, NULL, 0);
	assert_int_equal(h2_call(SSL_WRITE, b, n, 7), 1); /* and again, at a frame boundary */
	assert_int_equal(h2rec(0)->offset, 0);
	assert_int_equal(h2rec(0)->flags, USM_H2_F_NEW | USM_H2_F_PREFACE);
	/* An HTTP/1 start inside a DATA payload is payload. */
	n = frame(b, 0, 0, 1, strlen(req), NULL, 0);
	assert_int_equal(h2_call(SSL_WRITE, b, 9, 8), 1);
	assert_int_equal(tls_call(SSL_WRITE, req, strlen(req), (long)strlen(req), NULL, 9), 0);
	assert_int_equal(bpftel_rb_capture__drain(&h2cap), 1);
	assert_int_equal(counter(USM_CNT_TLS_HTTP), 1);
}

/*
 * SSL_free and gnutls_deinit: what the kernel keeps by the session goes with it, its
 * fd and its HTTP/2 state. A session made later at the freed address is new: its
 * HTTP/1 request is one (not bytes of the old HTTP/2 stream) and carries no old fd.
 * Another process's session at the same address keeps its own.
 */
static void test_tls_free(void **state)
{
	const char *req = "GET /after HTTP/1.1\r\n\r\n";
	struct test_regs ssl = {.di = SSL_PTR, .si = 7}, gnu = {.di = SSL_PTR + 64, .si = 9};
	struct fd_key {
		__u64 conn;
		__u32 tgid, pad;
	} k = {SSL_PTR, 4242, 0}; /* struct usm_fd_key */
	struct usm_tls_sess sess;
	unsigned char b[64];
	size_t n;

	(void)state;
	tls_run(USM_TLS_SSL_SET_FD, false, &ssl, 1);
	tls_run_as(USM_TLS_SSL_SET_FD, false, &ssl, 1, (5151ull << 32) | 5151);
	tls_run(USM_TLS_GNUTLS_SET_INT2, false, &gnu, 1);
	memcpy(b, PREFACE, 24);
	assert_int_equal(h2_call(SSL_WRITE, b, 24, 2), 1);
	n = frame(b, 0, 0, 1, strlen(req) + 4, NULL, 0); /* a DATA header, payload to come */
	assert_int_equal(h2_call(SSL_WRITE, b, n - strlen(req) - 4, 3), 1);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.usm_h2_conns), &k, b), 0);

	tls_run(USM_TLS_SSL_FREE, false, &(struct test_regs){.di = SSL_PTR}, 4);
	assert_int_equal(bpftel_rb_capture__drain(&h2cap), 1);
	assert_h2_closed(0, SSL_PTR, USM_SRC_OPENSSL);
	assert_int_not_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.usm_h2_conns), &k, b), 0);
	assert_int_not_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.usm_tls_fds), &k, &sess), 0);
	assert_int_equal(tls_call(SSL_WRITE, req, strlen(req), (long)strlen(req), NULL, 5), 1);
	assert_int_equal(event(0)->kind, USM_KIND_REQUEST);
	assert_int_equal(event(0)->fd, -1);
	assert_int_equal(bpftel_rb_capture__drain(&h2cap), 0);
	k.tgid = 5151; /* the other process's session stays */
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.usm_tls_fds), &k, &sess), 0);
	assert_int_equal(sess.fd, 7);
	assert_int_equal(sess.http1, 0);

	tls_run(USM_TLS_GNUTLS_DEINIT, false, &(struct test_regs){.di = SSL_PTR + 64}, 6);
	k = (struct fd_key){SSL_PTR + 64, 4242, 0};
	assert_int_not_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.usm_tls_fds), &k, &sess), 0);
	tls_run(USM_TLS_SSL_FREE, false, &(struct test_regs){.di = 0}, 7); /* SSL_free(NULL) */
	assert_int_equal(bpftel_rb_capture__drain(&cap), 0);
}

/* ---- OpenSSL writes retried after SSL_get_error (bpf/lib/usm_tls_retry.h) ---- */

/* SSL_get_error(ssl, ret), as the application asks it. */
static void get_error(__u64 ssl, long ret, __u64 pid_tgid)
{
	tls_run_as(USM_TLS_SSL_GET_ERROR, false, &(struct test_regs){.di = ssl, .si = ret}, 1,
		   pid_tgid);
}

/* A write on ssl of len bytes from buf, as pid_tgid: the events it emitted. */
static int write_as(__u64 ssl, const char *buf, size_t len, __u64 pid_tgid)
{
	tls_run_as(SSL_WRITE_EX, false,
		   &(struct test_regs){.di = ssl, .si = (uintptr_t)buf, .dx = len}, 1, pid_tgid);
	return bpftel_rb_capture__drain(&cap);
}

static __u64 retry_marks(void)
{
	return __atomic_load_n(&skel->bss->usm_tls_retry_marks, __ATOMIC_SEQ_CST);
}

static __s64 retry_share_count(__u32 uid)
{
	struct fair_share_key k = {.uid = uid, .table = USM_SHARE_TLS_RETRY};
	__s64 n = -1;

	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.fair_share), &k, &n))
		return -1;
	return n;
}

/* A mark of session conn of process tgid, for another write, made as by another
 * thread of it under uid: its count taken. */
static void retry_mark_put(__u64 conn, __u32 tgid, __u32 uid)
{
	struct usm_fd_key key = {.conn = conn, .tgid = tgid};
	struct usm_tls_retry_mark m = {.buf = 1, .len = 1, .at_ns = 1, .uid = uid};
	struct fair_share_key k = {.uid = uid, .table = USM_SHARE_TLS_RETRY};
	__s64 n = retry_share_count(uid);

	assert_int_equal(bpf_map_update_elem(bpf_map__fd(skel->maps.usm_tls_retry), &key, &m,
					     BPF_NOEXIST),
			 0);
	n = n < 0 ? 1 : n + 1;
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(skel->maps.fair_share), &k, &n, BPF_ANY),
			 0);
	__atomic_fetch_add(&skel->bss->usm_tls_retry_marks, 1, __ATOMIC_SEQ_CST);
}

/*
 * The marks of writes to be retried are shared out too: a user past a quarter of them
 * is not marked (counted), and its retry is then a new message; root and other users
 * are marked; a mark taken away (the retry, SSL_free) gives its place back.
 */
static void test_tls_retry_share_per_user(void **state)
{
	const int share = USM_TLS_RETRY_MAX / FAIR_SHARE_DIV;
	const char *req = "GET /r HTTP/1.1\r\n\r\n", *req2 = "GET /2 HTTP/1.1\r\n\r\n",
		   *req3 = "GET /3 HTTP/1.1\r\n\r\n";
	size_t n = strlen(req), n2 = strlen(req2), n3 = strlen(req3);
	__u64 user = (4242ull << 32) | 4242;
	int i;

	(void)state;
	as_real_uid(SHARE_USER);
	for (i = 0; i <= share; i++) { /* one more than the share */
		write_as(SHARE_SSL(i), req, n, user);
		get_error(SHARE_SSL(i), 0, user);
	}
	assert_int_equal(retry_marks(), share);
	assert_int_equal(retry_share_count(SHARE_USER), share);
	assert_int_equal(counter(USM_CNT_TLS_RETRY_OVER_SHARE), 1);
	/* The one not marked: its retry is a new message. The first's is not. */
	assert_int_equal(write_as(SHARE_SSL(share), req, n, user), 1);
	assert_int_equal(write_as(SHARE_SSL(0), req, n, user), 0);
	assert_int_equal(retry_marks(), share - 1);
	assert_int_equal(retry_share_count(SHARE_USER), share - 1);
	/* Another user's and root's are marked. */
	as_real_uid(SHARE_USER + 1);
	write_as(SHARE_SSL(share + 1), req, n, user);
	get_error(SHARE_SSL(share + 1), 0, user);
	as_real_uid(0);
	write_as(SHARE_SSL(share + 2), req, n, user);
	get_error(SHARE_SSL(share + 2), 0, user);
	assert_int_equal(retry_marks(), share + 1);
	/* The user's place, given back by its retry, is taken again; freed, given back. */
	as_real_uid(SHARE_USER);
	write_as(SHARE_SSL(share + 3), req, n, user);
	get_error(SHARE_SSL(share + 3), 0, user);
	assert_int_equal(retry_share_count(SHARE_USER), share);
	ssl_free_as(SHARE_SSL(1), 4242);
	assert_int_equal(retry_share_count(SHARE_USER), share - 1);
	assert_int_equal(counter(USM_CNT_TLS_RETRY_OVER_SHARE), 1);
	/* Another thread of the process marked the session's failed write meanwhile (its
	 * SSL_get_error first), under the user's uid; this thread's write failed too,
	 * under another uid (the process changed it): the mark takes this write, and
	 * stays the user's, whose count it holds, which its retry gives back. */
	as_real_uid(SHARE_USER + 1);
	write_as(SHARE_SSL(share + 4), req2, n2, user);
	retry_mark_put(SHARE_SSL(share + 4), 4242, SHARE_USER);
	assert_int_equal(retry_share_count(SHARE_USER), share);
	get_error(SHARE_SSL(share + 4), 0, user);
	assert_int_equal(retry_share_count(SHARE_USER), share);
	assert_int_equal(retry_share_count(SHARE_USER + 1), 1);
	assert_int_equal(write_as(SHARE_SSL(share + 4), req2, n2, user), 0); /* its retry */
	assert_int_equal(retry_share_count(SHARE_USER), share - 1);
	assert_int_equal(retry_share_count(SHARE_USER + 1), 1);
	/* Likewise at the user's share: the mark takes the write, not refused. */
	as_real_uid(SHARE_USER);
	write_as(SHARE_SSL(share + 5), req3, n3, user);
	get_error(SHARE_SSL(share + 5), 0, user);
	assert_int_equal(retry_share_count(SHARE_USER), share);
	write_as(SHARE_SSL(share + 5), req2, n2, user); /* unmarks, then fails too */
	retry_mark_put(SHARE_SSL(share + 5), 4242, SHARE_USER);
	get_error(SHARE_SSL(share + 5), 0, user);
	assert_int_equal(counter(USM_CNT_TLS_RETRY_OVER_SHARE), 1);
	assert_int_equal(write_as(SHARE_SSL(share + 5), req2, n2, user), 0); /* its retry */
	assert_int_equal(retry_share_count(SHARE_USER), share - 1);
	as_real_uid(0);
}

/* A write that failed (SSL_get_error asked with ret <= 0 just after it) is seen once:
 * its retry, the session's next write of the same buffer and size, is counted and not
 * looked at again, however many times it fails. */
static void test_tls_write_retry(void **state)
{
	const char *req = "POST /upload HTTP/1.1\r\nContent-Length: 9\r\n\r\n123456789";
	size_t n = strlen(req);

	(void)state;
	assert_int_equal(write_as(SSL_PTR, req, n, PID_TGID), 1);
	get_error(SSL_PTR, 0, PID_TGID); /* SSL_write_ex's failure: 0 */
	assert_int_equal(retry_marks(), 1);
	assert_int_equal(write_as(SSL_PTR, req, n, PID_TGID), 0);
	get_error(SSL_PTR, -1, PID_TGID); /* failed again (SSL_write's -1) */
	get_error(SSL_PTR, -1, PID_TGID); /* asked twice: still one mark */
	assert_int_equal(retry_marks(), 1);
	assert_int_equal(write_as(SSL_PTR, req, n, PID_TGID), 0);
	assert_int_equal(retry_marks(), 0);
	assert_int_equal(counter(USM_CNT_TLS_RETRIES), 2);
	assert_int_equal(counter(USM_CNT_TLS_CALLS), 3);
	assert_int_equal(counter(USM_CNT_TLS_HTTP), 1);
	/* It went: the same bytes again are the next request (a static buffer). */
	assert_int_equal(write_as(SSL_PTR, req, n, PID_TGID), 1);
	/* Asked after a success (ret > 0): nothing marked. */
	get_error(SSL_PTR, 1, PID_TGID);
	assert_int_equal(retry_marks(), 0);
	assert_int_equal(write_as(SSL_PTR, req, n, PID_TGID), 1);
	assert_int_equal(counter(USM_CNT_TLS_RETRIES), 2);
}

/*
 * A retry from another buffer of the same bytes is the retry: OpenSSL takes one where
 * the application set SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER (CPython does), and a
 * program handing the same bytes from a new object retries so. The same size from
 * another buffer with other first or last bytes (32 of each compared) is the next
 * message; a write shorter than that is compared whole.
 */
static void test_tls_write_retry_moved_buffer(void **state)
{
	const char *req = "POST /upload HTTP/1.1\r\nContent-Length: 9\r\n\r\n123456789";
	char moved[128], other[128], tail[128], tiny[2][8] = {"\x17\x03\x03x"};
	size_t n = strlen(req);

	(void)state;
	memcpy(moved, req, n + 1);
	memcpy(other, req, n + 1);
	memcpy(tail, req, n + 1);
	other[11] = 'D'; /* POST /uploaD: within the first bytes */
	tail[n - 1] = '8'; /* its body's last byte */
	assert_int_equal(write_as(SSL_PTR, req, n, PID_TGID), 1);
	get_error(SSL_PTR, -1, PID_TGID);
	assert_int_equal(write_as(SSL_PTR, moved, n, PID_TGID), 0);
	assert_int_equal(counter(USM_CNT_TLS_RETRIES), 1);
	assert_int_equal(retry_marks(), 0);
	/* Failed again; the next write is other bytes from elsewhere: a message. */
	assert_int_equal(write_as(SSL_PTR, req, n, PID_TGID), 1);
	get_error(SSL_PTR, -1, PID_TGID);
	assert_int_equal(write_as(SSL_PTR, other, n, PID_TGID), 1);
	assert_int_equal(counter(USM_CNT_TLS_RETRIES), 1);
	assert_int_equal(retry_marks(), 0);
	assert_int_equal(write_as(SSL_PTR, req, n, PID_TGID), 1);
	get_error(SSL_PTR, -1, PID_TGID);
	assert_int_equal(write_as(SSL_PTR, tail, n, PID_TGID), 1); /* only its end differs */
	assert_int_equal(counter(USM_CNT_TLS_RETRIES), 1);
	assert_int_equal(retry_marks(), 0);
	/* Four bytes, moved: four others are not the retry, the same four are. */
	write_as(SSL_PTR, tiny[0], 4, PID_TGID);
	get_error(SSL_PTR, -1, PID_TGID);
	write_as(SSL_PTR, moved, 4, PID_TGID); /* "POST" */
	assert_int_equal(counter(USM_CNT_TLS_RETRIES), 1);
	write_as(SSL_PTR, tiny[0], 4, PID_TGID);
	get_error(SSL_PTR, -1, PID_TGID);
	memcpy(tiny[1], tiny[0], sizeof(tiny[0]));
	write_as(SSL_PTR, tiny[1], 4, PID_TGID);
	assert_int_equal(counter(USM_CNT_TLS_RETRIES), 2);
	assert_int_equal(retry_marks(), 0);
}

/* Only a failure of the thread's last TLS call, a write on that very session, marks;
 * a mark is of one session of one process, and only a write of the same buffer and
 * size is its retry. */
static void test_tls_write_retry_which(void **state)
{
	const char *req = "GET /a HTTP/1.1\r\n\r\n", *other = "GET /bb HTTP/1.1\r\n\r\n";
	const char *resp = "HTTP/1.1 200 OK\r\n\r\n";
	__u64 other_proc = (5151ull << 32) | 5151;

	(void)state;
	/* A read came after the write: its failure is the read's. */
	assert_int_equal(write_as(SSL_PTR, req, strlen(req), PID_TGID), 1);
	assert_int_equal(tls_call(SSL_READ, resp, 4096, -1, NULL, 2), 0);
	get_error(SSL_PTR, -1, PID_TGID);
	assert_int_equal(retry_marks(), 0);
	assert_int_equal(write_as(SSL_PTR, req, strlen(req), PID_TGID), 1);
	/* A write of nothing in between: a failure asked then is not the earlier write's. */
	assert_int_equal(write_as(SSL_PTR, req, 0, PID_TGID), 0);
	get_error(SSL_PTR, 0, PID_TGID);
	assert_int_equal(retry_marks(), 0);
	assert_int_equal(write_as(SSL_PTR, req, strlen(req), PID_TGID), 1);
	/* Asked of another session, or by another process: not this write's. */
	get_error(SSL_PTR + 64, -1, PID_TGID);
	get_error(SSL_PTR, -1, other_proc);
	assert_int_equal(retry_marks(), 0);
	/* Marked; the session's next write is other bytes: emitted, and the mark gone. */
	get_error(SSL_PTR, -1, PID_TGID);
	assert_int_equal(retry_marks(), 1);
	assert_int_equal(write_as(SSL_PTR, other, strlen(other), PID_TGID), 1);
	assert_int_equal(retry_marks(), 0);
	/* Marked; another process's session at the same address writes the same bytes:
	 * not a retry, and the mark stays for its own session. */
	get_error(SSL_PTR, -1, PID_TGID);
	assert_int_equal(write_as(SSL_PTR, other, strlen(other), other_proc), 1);
	assert_int_equal(retry_marks(), 1);
	/* Another thread of the process retries (a task moved): still the retry. */
	assert_int_equal(write_as(SSL_PTR, other, strlen(other), PID_TGID + 1), 0);
	assert_int_equal(retry_marks(), 0);
	/* Marked, then freed: the next session at that address starts clean. */
	assert_int_equal(write_as(SSL_PTR, req, strlen(req), PID_TGID), 1);
	get_error(SSL_PTR, 0, PID_TGID);
	tls_run(USM_TLS_SSL_FREE, false, &(struct test_regs){.di = SSL_PTR}, 3);
	assert_int_equal(retry_marks(), 0);
	assert_int_equal(write_as(SSL_PTR, req, strlen(req), PID_TGID), 1);
	/* Marked, then given another socket (SSL_set_fd): likewise. */
	get_error(SSL_PTR, 0, PID_TGID);
	tls_run(USM_TLS_SSL_SET_FD, false, &(struct test_regs){.di = SSL_PTR, .si = 5}, 4);
	assert_int_equal(retry_marks(), 0);
	assert_int_equal(write_as(SSL_PTR, req, strlen(req), PID_TGID), 1);
	assert_int_equal(counter(USM_CNT_TLS_RETRIES), 1);
}

static pid_t sweep_dead;

static bool sweep_alive(__u32 tgid)
{
	return tgid != (__u32)sweep_dead;
}

static __u64 mono_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* bpf_ktime_get_ns()'s clock */
	return (__u64)ts.tv_sec * 1000000000ull + (__u64)ts.tv_nsec;
}

static int sweep(__u64 now_ns)
{
	return usm_tls_retry_sweep(bpf_map__fd(skel->maps.usm_tls_retry),
				   &skel->bss->usm_tls_retry_marks, sweep_alive, now_ns);
}

/* Userspace's sweep (user/modules/usm/tls_retry.c) deletes the mark of a process that
 * died between a failed write and its retry, and a mark older than 10 s (a write never
 * retried, or a failure that was not the write's); writes then stop looking marks up. */
static void test_tls_write_retry_sweep(void **state)
{
	const char *req = "GET /a HTTP/1.1\r\n\r\n";
	__u64 dead = (4343ull << 32) | 4343, now = mono_now_ns();

	(void)state;
	sweep_dead = 4343;
	assert_int_equal(write_as(SSL_PTR, req, strlen(req), PID_TGID), 1);
	get_error(SSL_PTR, 0, PID_TGID);
	assert_int_equal(write_as(SSL_PTR + 64, req, strlen(req), dead), 1);
	get_error(SSL_PTR + 64, 0, dead);
	assert_int_equal(retry_marks(), 2);
	assert_int_equal(sweep(now), 1);
	assert_int_equal(retry_marks(), 1);
	/* The live one's stays, and is its retry. */
	assert_int_equal(write_as(SSL_PTR, req, strlen(req), PID_TGID), 0);
	assert_int_equal(retry_marks(), 0);
	assert_int_equal(sweep(now), 0);
	/* A live process's mark, never retried: kept within 10 s, gone past them. */
	assert_int_equal(write_as(SSL_PTR, req, strlen(req), PID_TGID), 1);
	get_error(SSL_PTR, 0, PID_TGID);
	now = mono_now_ns();
	assert_int_equal(sweep(now + USM_TLS_RETRY_MAX_AGE_NS / 2), 0);
	assert_int_equal(retry_marks(), 1);
	assert_int_equal(sweep(now + USM_TLS_RETRY_MAX_AGE_NS + 1000000000ull), 1);
	assert_int_equal(retry_marks(), 0);
	assert_int_equal(write_as(SSL_PTR, req, strlen(req), PID_TGID), 1); /* not skipped */
}

/* ---- Go's crypto/tls (bpf/lib/usm_go.h): register ABI, pairing by goroutine ---- */

/* A *tls.Conn as Go lays it out (lib/usm_go_conn.h): conn.data -> net.conn ->
 * netFD.pfd, whose Sysfd is at 16. */
struct go_conn {
	__u64 tls[2];	/* tls.Conn: the net.Conn interface (itab, data) */
	__u64 tcp[1];	/* net.TCPConn{conn{fd *netFD}} */
	__u64 netfd[4]; /* poll.FD: fdMutex (16 bytes), Sysfd */
};

static void go_conn_init(struct go_conn *c, long sysfd)
{
	c->tls[0] = 0x1234; /* an itab: not looked at */
	c->tls[1] = (uintptr_t)c->tcp;
	c->tcp[0] = (uintptr_t)c->netfd;
	memset(c->netfd, 0, sizeof(c->netfd));
	c->netfd[2] = (__u64)sysfd;
}

#define G1 0xc000001a00ul
#define G2 0xc000001d40ul

static void go_run(enum usm_go_fn fn, struct test_regs *regs, __u64 now, __u64 pid_tgid)
{
	struct usm_test_call ctx = {
		.regs = *regs, .pid_tgid = pid_tgid, .now = now, .probe = fn};
	int retval = -1;

	assert_int_equal(bpftel_test_run(skel->progs.usm_test_go, &ctx, sizeof(ctx), &retval), 0);
	assert_int_equal(retval, 0);
}

/* (*Conn).Write(b): receiver in RAX, b's pointer and length in RBX and RCX. */
static int go_write(struct go_conn *c, const char *b, long len, __u64 g, __u64 t)
{
	struct test_regs r = {.ax = (uintptr_t)c, .bx = (uintptr_t)b, .cx = (unsigned long)len,
			      .di = (unsigned long)len, .r14 = g};

	go_run(USM_GO_WRITE, &r, t, PID_TGID);
	return bpftel_rb_capture__drain(&cap);
}

/* (*Conn).Read(b) entering on thread tid, returning n on thread rtid. */
static void go_read_enter(struct go_conn *c, void *b, long cap_, __u64 g, __u64 tid, __u64 t)
{
	struct test_regs r = {.ax = (uintptr_t)c, .bx = (uintptr_t)b, .cx = (unsigned long)cap_,
			      .di = (unsigned long)cap_, .r14 = g};

	go_run(USM_GO_READ, &r, t, (4242ull << 32) | tid);
}

static int go_read_ret(long n, __u64 g, __u64 tid, __u64 t)
{
	/* At a RET: n in RAX, the error's itab in RBX (nil), the goroutine in R14. */
	struct test_regs r = {.ax = (unsigned long)n, .bx = 0, .r14 = g};

	go_run(USM_GO_READ_RET, &r, t, (4242ull << 32) | tid);
	return bpftel_rb_capture__drain(&cap);
}

static void test_go_write_request(void **state)
{
	const char *req = "GET /go/items/1 HTTP/1.1\r\nHost: a\r\n\r\n";
	struct go_conn c;

	(void)state;
	go_conn_init(&c, 11);
	assert_int_equal(go_write(&c, req, (long)strlen(req), G1, 100), 1);
	assert_int_equal(event(0)->source, USM_SRC_GO);
	assert_int_equal(event(0)->dir, USM_DIR_WRITE);
	assert_int_equal(event(0)->kind, USM_KIND_REQUEST);
	assert_int_equal(event(0)->conn, (uintptr_t)&c);
	assert_int_equal(event(0)->fd, 11); /* through conn.data -> fd -> pfd.Sysfd */
	assert_int_equal(event(0)->pid, 4242);
	assert_int_equal(event(0)->len, strlen(req));
	assert_memory_equal(event(0)->prefix, req, strlen(req));
	assert_int_equal(event(0)->ktime_ns, 100);
	/* Nothing to write (len 0, or a negative length): no call counted. */
	assert_int_equal(go_write(&c, req, 0, G1, 101), 0);
	assert_int_equal(go_write(&c, req, -5, G1, 102), 0);
	assert_int_equal(counter(USM_CNT_TLS_CALLS), 1);
	assert_int_equal(counter(USM_CNT_TLS_HTTP), 1);
}

static void test_go_conn_chain(void **state)
{
	const char *req = "POST /x HTTP/1.1\r\n\r\n";
	struct go_conn c;

	(void)state;
	/* A socket fd read anew at each call: the Conn's address may be reused. */
	go_conn_init(&c, 3);
	assert_int_equal(go_write(&c, req, (long)strlen(req), G1, 1), 1);
	assert_int_equal(event(0)->fd, 3);
	c.netfd[2] = 12;
	assert_int_equal(go_write(&c, req, (long)strlen(req), G1, 2), 1);
	assert_int_equal(event(0)->fd, 12);
	/* A closed FD (Sysfd -1), a nil data word, a nil netFD: the message, no socket. */
	c.netfd[2] = (__u64)-1;
	assert_int_equal(go_write(&c, req, (long)strlen(req), G1, 3), 1);
	assert_int_equal(event(0)->fd, -1);
	c.tls[1] = 0;
	assert_int_equal(go_write(&c, req, (long)strlen(req), G1, 4), 1);
	assert_int_equal(event(0)->fd, -1);
	go_conn_init(&c, 3);
	c.tcp[0] = 0;
	assert_int_equal(go_write(&c, req, (long)strlen(req), G1, 5), 1);
	assert_int_equal(event(0)->fd, -1);
	/* An fd over 32 bits is no fd. */
	go_conn_init(&c, 1l << 40);
	assert_int_equal(go_write(&c, req, (long)strlen(req), G1, 6), 1);
	assert_int_equal(event(0)->fd, -1);
}

static void test_go_read_paired_by_goroutine(void **state)
{
	char b1[256] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	char b2[256] = "HTTP/1.1 404 Not Found\r\n\r\n";
	struct go_conn c1, c2;

	(void)state;
	go_conn_init(&c1, 5);
	go_conn_init(&c2, 6);
	/* Two goroutines enter Read on one thread (the first parked), and return on two
	 * others: each return finds its own buffer and Conn. */
	go_read_enter(&c1, b1, sizeof(b1), G1, 4243, 10);
	go_read_enter(&c2, b2, sizeof(b2), G2, 4243, 11);
	assert_int_equal(go_read_ret((long)strlen(b2), G2, 4300, 12), 1);
	assert_int_equal(event(0)->fd, 6);
	assert_int_equal(event(0)->conn, (uintptr_t)&c2);
	assert_int_equal(event(0)->dir, USM_DIR_READ);
	assert_int_equal(event(0)->kind, USM_KIND_RESPONSE);
	assert_memory_equal(event(0)->prefix, b2, strlen(b2));
	assert_int_equal(event(0)->len, strlen(b2));
	assert_int_equal(event(0)->ktime_ns, 12);
	assert_int_equal(go_read_ret((long)strlen(b1), G1, 4301, 13), 1);
	assert_int_equal(event(0)->fd, 5);
	assert_memory_equal(event(0)->prefix, b1, strlen(b1));
	/* Returned: forgotten. Another RET of G1 pairs with nothing. */
	assert_int_equal(counter(USM_CNT_GO_UNPAIRED), 0);
	assert_int_equal(go_read_ret((long)strlen(b1), G1, 4301, 14), 0);
	assert_int_equal(counter(USM_CNT_GO_UNPAIRED), 1);
	/* The same goroutine id in another process is another goroutine. */
	go_read_enter(&c1, b1, sizeof(b1), G1, 4243, 15);
	{
		struct test_regs r = {.ax = strlen(b1), .r14 = G1};

		go_run(USM_GO_READ_RET, &r, 16, (5151ull << 32) | 5151);
	}
	assert_int_equal(bpftel_rb_capture__drain(&cap), 0);
	assert_int_equal(counter(USM_CNT_GO_UNPAIRED), 2);
	assert_int_equal(go_read_ret((long)strlen(b1), G1, 4243, 17), 1);
}

/* Read(nil) (for the handshake's sake) keeps nothing: its return lost nothing, not
 * unpaired; and it takes no stale entry of its key (a Read whose return went unseen),
 * which would give the next Read's return that one's buffer. */
static void test_go_read_nil(void **state)
{
	char b1[256] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	char b2[256] = "HTTP/1.1 404 Not Found\r\n\r\n";
	struct go_conn c1, c2;

	(void)state;
	go_conn_init(&c1, 5);
	go_conn_init(&c2, 6);
	go_read_enter(&c1, NULL, 0, G1, 4243, 10);
	assert_int_equal(go_read_ret(0, G1, 4243, 11), 0);
	assert_int_equal(counter(USM_CNT_GO_UNPAIRED), 0);
	/* A Read of c1 whose return was missed, then Read(nil) at the same key, then a
	 * Read of c2 whose return is missed... its own entry, not c1's stale one. */
	go_read_enter(&c1, b1, sizeof(b1), G1, 4243, 12);
	go_read_enter(&c1, NULL, 0, G1, 4243, 13);
	assert_int_equal(go_read_ret(0, G1, 4243, 14), 0);
	assert_int_equal(go_read_ret((long)strlen(b2), G1, 4243, 15), 0); /* none kept */
	assert_int_equal(counter(USM_CNT_GO_UNPAIRED), 1);
	go_read_enter(&c2, b2, sizeof(b2), G1, 4243, 16);
	assert_int_equal(go_read_ret((long)strlen(b2), G1, 4243, 17), 1);
	assert_int_equal(event(0)->fd, 6);
	assert_memory_equal(event(0)->prefix, b2, strlen(b2));
}

#define G3 0xc000002000ul
#define G4 0xc000002340ul

/* A user's Reads in flight stay within its share of usm_go_reads: past it a Read is not
 * kept (counted), and its return pairs with nothing; another user's and root's are
 * kept; a return gives the place back. */
static void test_go_reads_share_per_user(void **state)
{
	char b[256] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	struct go_conn c;

	(void)state;
	go_conn_init(&c, 5);
	skel->data->usm_share_cap[USM_SHARE_GO_READS] = 2;
	as_real_uid(SHARE_USER);
	go_read_enter(&c, b, sizeof(b), G1, 4243, 1);
	go_read_enter(&c, b, sizeof(b), G2, 4243, 2);
	assert_int_equal(share_held(SHARE_USER, USM_SHARE_GO_READS), 2);
	go_read_enter(&c, b, sizeof(b), G3, 4243, 3); /* past the share */
	assert_int_equal(counter(USM_CNT_GO_READS_OVER_SHARE), 1);
	assert_int_equal(share_held(SHARE_USER, USM_SHARE_GO_READS), 2);
	as_real_uid(SHARE_USER + 1);
	go_read_enter(&c, b, sizeof(b), G4, 4244, 4);
	assert_int_equal(share_held(SHARE_USER + 1, USM_SHARE_GO_READS), 1);
	as_real_uid(0);
	/* G3's return finds nothing; G1's its own, and gives its place back. */
	assert_int_equal(go_read_ret((long)strlen(b), G3, 4243, 5), 0);
	assert_int_equal(counter(USM_CNT_GO_UNPAIRED), 1);
	assert_int_equal(go_read_ret((long)strlen(b), G1, 4243, 6), 1);
	assert_int_equal(share_held(SHARE_USER, USM_SHARE_GO_READS), 1);
	as_real_uid(SHARE_USER);
	go_read_enter(&c, b, sizeof(b), G3, 4243, 7);
	assert_int_equal(share_held(SHARE_USER, USM_SHARE_GO_READS), 2);
	assert_int_equal(counter(USM_CNT_GO_READS_OVER_SHARE), 1);
	as_real_uid(0);
	assert_int_equal(go_read_ret((long)strlen(b), G3, 4243, 8), 1);
	assert_int_equal(go_read_ret((long)strlen(b), G4, 4244, 9), 1);
	assert_int_equal(share_held(SHARE_USER + 1, USM_SHARE_GO_READS), 0);
	/* Root's are kept, uncounted. */
	go_read_enter(&c, b, sizeof(b), G1, 4243, 10);
	assert_int_equal(share_held(0, USM_SHARE_GO_READS), -1);
	assert_int_equal(go_read_ret((long)strlen(b), G1, 4243, 11), 1);
	/* G2 never returns: its process is gone (tgid_alive), and the sweep deletes its
	 * Read and forgets the user's count. */
	{
		struct usm_share_map t = usm_share_tables[USM_SHARE_GO_READS];
		__u64 deleted = 0;

		t.fd = bpf_map__fd(skel->maps.usm_go_reads);
		assert_int_equal(share_held(SHARE_USER, USM_SHARE_GO_READS), 1);
		assert_int_equal(usm_fair_share_sweep(bpf_map__fd(skel->maps.fair_share),
						      bpf_map__fd(skel->maps.fair_share_adj), &t,
						      tgid_alive, &deleted, NULL),
				 0);
		assert_int_equal(deleted, 1);
		assert_int_equal(share_held(SHARE_USER, USM_SHARE_GO_READS), -1);
	}
}

/* A Read whose return went unseen leaves its entry: the goroutine's next Read at that
 * depth replaces it, at its owner's share or not, without taking more of the share; its
 * return reads its own buffer, never the old one's. */
static void test_go_reads_left_over(void **state)
{
	char old[256] = "HTTP/1.1 500 Old\r\n\r\n";
	char b[256] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	struct go_conn c;

	(void)state;
	go_conn_init(&c, 5);
	skel->data->usm_share_cap[USM_SHARE_GO_READS] = 2;
	as_real_uid(SHARE_USER);
	go_read_enter(&c, old, sizeof(old), G1, 4243, 1); /* its return never comes */
	go_read_enter(&c, b, sizeof(b), G1, 4243, 2);
	assert_int_equal(share_held(SHARE_USER, USM_SHARE_GO_READS), 1);
	assert_int_equal(go_read_ret((long)strlen(b), G1, 4243, 3), 1);
	assert_memory_equal(event(0)->prefix, b, strlen(b));
	assert_int_equal(share_held(SHARE_USER, USM_SHARE_GO_READS), 0);
	/* At the share (one): the goroutine's own left-over entry is replaced all the same. */
	skel->data->usm_share_cap[USM_SHARE_GO_READS] = 1;
	go_read_enter(&c, old, sizeof(old), G1, 4243, 4);
	go_read_enter(&c, b, sizeof(b), G1, 4243, 5);
	assert_int_equal(counter(USM_CNT_GO_READS_OVER_SHARE), 0);
	assert_int_equal(share_held(SHARE_USER, USM_SHARE_GO_READS), 1);
	assert_int_equal(go_read_ret((long)strlen(b), G1, 4243, 6), 1);
	assert_memory_equal(event(0)->prefix, b, strlen(b));
	as_real_uid(0);
}

static void test_go_read_nothing(void **state)
{
	char b[64] = "HTTP/1.1 200 OK\r\n\r\n";
	struct go_conn c;

	(void)state;
	go_conn_init(&c, 5);
	/* n == 0 (EOF) and n < 0: no bytes, no message; the entry is gone either way. */
	go_read_enter(&c, b, sizeof(b), G1, 4243, 1);
	assert_int_equal(go_read_ret(0, G1, 4243, 2), 0);
	go_read_enter(&c, b, sizeof(b), G1, 4243, 3);
	assert_int_equal(go_read_ret(-1, G1, 4243, 4), 0);
	assert_int_equal(go_read_ret((long)strlen(b), G1, 4243, 5), 0);
	assert_int_equal(counter(USM_CNT_GO_UNPAIRED), 1);
	/* No goroutine in R14 (not Go code) or nothing to read into: not remembered. */
	go_read_enter(&c, b, sizeof(b), 0, 4243, 6);
	assert_int_equal(go_read_ret((long)strlen(b), 0, 4243, 7), 0);
	go_read_enter(&c, b, 0, G2, 4243, 8);
	assert_int_equal(go_read_ret((long)strlen(b), G2, 4243, 9), 0);
	assert_int_equal(counter(USM_CNT_GO_UNPAIRED), 3);
	assert_int_equal(counter(USM_CNT_TLS_CALLS), 0);
	/* Bytes that start no HTTP message: a call counted, nothing sent. */
	memcpy(b, "\x17\x03\x03 binary", 10);
	go_read_enter(&c, b, sizeof(b), G1, 4243, 10);
	assert_int_equal(go_read_ret(10, G1, 4243, 11), 0);
	assert_int_equal(counter(USM_CNT_TLS_CALLS), 1);
	assert_int_equal(counter(USM_CNT_TLS_HTTP), 0);
}

/* An entry probe on the stack check's JBE: the pass whose compare says "grow the
 * stack" (CF or ZF set) is ignored; the function restarts and passes again. */
static void test_go_stack_check(void **state)
{
	const char *req = "GET /grown HTTP/1.1\r\n\r\n";
	char b[64] = "HTTP/1.1 200 OK\r\n\r\n";
	struct go_conn c;
	struct test_regs r;
	unsigned long flags[] = {0x001, 0x040, 0x041}; /* CF, ZF, both: taken */
	size_t i;

	(void)state;
	go_conn_init(&c, 8);
	r = (struct test_regs){.ax = (uintptr_t)&c, .bx = (uintptr_t)req, .cx = strlen(req),
			       .r14 = G1};
	for (i = 0; i < 3; i++) {
		r.flags = flags[i] | 0x202; /* IF and the reserved bit, as in any EFLAGS */
		go_run(USM_GO_WRITE | UPROBE_GO_STACK_CHECK, &r, 1, PID_TGID);
		assert_int_equal(bpftel_rb_capture__drain(&cap), 0);
	}
	r.flags = 0x202 | 0x080 | 0x004; /* above: SF, PF only, the branch not taken */
	go_run(USM_GO_WRITE | UPROBE_GO_STACK_CHECK, &r, 2, PID_TGID);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 1);
	assert_memory_equal(event(0)->prefix, req, strlen(req));
	assert_int_equal(counter(USM_CNT_TLS_CALLS), 1);
	/* Read's entry likewise: the growing pass remembers nothing. */
	r = (struct test_regs){.ax = (uintptr_t)&c, .bx = (uintptr_t)b, .cx = sizeof(b),
			       .r14 = G2, .flags = 0x203};
	go_run(USM_GO_READ | UPROBE_GO_STACK_CHECK, &r, 3, PID_TGID);
	assert_int_equal(go_read_ret((long)strlen(b), G2, 4243, 4), 0);
	assert_int_equal(counter(USM_CNT_GO_UNPAIRED), 1);
	r.flags = 0x202;
	go_run(USM_GO_READ | UPROBE_GO_STACK_CHECK, &r, 5, PID_TGID);
	assert_int_equal(go_read_ret((long)strlen(b), G2, 4243, 6), 1);
	assert_int_equal(event(0)->kind, USM_KIND_RESPONSE);
	/* Without the flag (a function with no stack check), EFLAGS are not looked at. */
	r = (struct test_regs){.ax = (uintptr_t)&c, .bx = (uintptr_t)req, .cx = strlen(req),
			       .r14 = G1, .flags = 0x243};
	go_run(USM_GO_WRITE, &r, 7, PID_TGID);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 1);
}

/* Go's net/http server reads a byte in the background while a handler runs: a request
 * arriving meanwhile is split, "G" then "ET /...". The byte is put back in front. */
static void test_go_background_byte(void **state)
{
	char g[8] = "G", rest[128] = "ET /go/items/9 HTTP/1.1\r\nHost: a\r\n\r\n", bin[16] = "xyz";
	const char *want = "GET /go/items/9 HTTP/1.1\r\nHost: a\r\n\r\n";
	struct go_conn c;

	(void)state;
	go_conn_init(&c, 4);
	go_read_enter(&c, g, 1, G1, 4243, 1);
	assert_int_equal(go_read_ret(1, G1, 4243, 2), 0);
	go_read_enter(&c, rest, sizeof(rest), G2, 4244, 3); /* another goroutine, thread */
	assert_int_equal(go_read_ret((long)strlen(rest), G2, 4244, 4), 1);
	assert_int_equal(event(0)->kind, USM_KIND_REQUEST);
	assert_int_equal(event(0)->dir, USM_DIR_READ);
	assert_int_equal(event(0)->fd, 4);
	assert_int_equal(event(0)->len, strlen(want));
	assert_int_equal(event(0)->prefix_len, strlen(want));
	assert_memory_equal(event(0)->prefix, want, strlen(want));
	assert_int_equal(counter(USM_CNT_TLS_CALLS), 2);
	assert_int_equal(counter(USM_CNT_TLS_HTTP), 1);
	/* Used once: the next read stands alone. */
	go_read_enter(&c, rest, sizeof(rest), G2, 4244, 5);
	assert_int_equal(go_read_ret((long)strlen(rest), G2, 4244, 6), 0);
	/* A byte and bytes that make no message together: nothing; a whole request after. */
	go_read_enter(&c, g, 1, G1, 4243, 7);
	assert_int_equal(go_read_ret(1, G1, 4243, 8), 0);
	go_read_enter(&c, bin, sizeof(bin), G1, 4243, 9);
	assert_int_equal(go_read_ret(10, G1, 4243, 10), 0);
	go_read_enter(&c, (void *)want, strlen(want), G1, 4243, 11);
	assert_int_equal(go_read_ret((long)strlen(want), G1, 4243, 12), 1);
	assert_memory_equal(event(0)->prefix, want, strlen(want));
	/* A byte, then the connection ends (a read returns 0, EOF): the byte goes with it.
	 * A request on the next connection at that Conn's address stands alone, not
	 * "GGET". */
	{
		static const struct {
			int in;    /* 0: g, 1: rest, 2: want */
			long ret;  /* what the read returns */
			int event; /* records it emits */
		} reads[] = {{0, 1, 0}, {1, 0, 0}, {2, 37, 1}};
		char *bufs[] = {g, rest, (char *)want};
		size_t sizes[] = {1, sizeof(rest), strlen(want)}, i;

		assert_int_equal(strlen(want), 37);
		for (i = 0; i < 3; i++) {
			go_read_enter(&c, bufs[reads[i].in], sizes[reads[i].in], G1, 4243,
				      13 + 2 * i);
			assert_int_equal(go_read_ret(reads[i].ret, G1, 4243, 14 + 2 * i),
					 reads[i].event);
		}
	}
	assert_int_equal(event(0)->len, strlen(want));
	assert_memory_equal(event(0)->prefix, want, strlen(want));
}

/* TLS inside TLS on one goroutine (net/http through an https:// proxy): the outer
 * Conn's Read reads its records through the inner Conn's Read. Each return pairs with
 * its own entry, by how deep in the goroutine's stack it runs (g.stack.hi - RSP): the
 * outer Read's response is seen, and nothing is unpaired. */
static void test_go_read_nested(void **state)
{
	static struct {
		__u64 lo, hi; /* a g begins with its stack's bounds */
	} g = {0x7f0000010000ull, 0x7f0000020000ull};
	const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	char outer_buf[128], inner_buf[64];
	struct go_conn outer, inner;
	struct test_regs r;

	(void)state;
	go_conn_init(&outer, 4);
	go_conn_init(&inner, 5);
	memset(inner_buf, 0x17, sizeof(inner_buf)); /* a TLS record's bytes: no HTTP */
	memcpy(outer_buf, resp, strlen(resp));
	r = (struct test_regs){.ax = (uintptr_t)&outer, .bx = (uintptr_t)outer_buf,
			       .cx = sizeof(outer_buf), .r14 = (uintptr_t)&g, .sp = g.hi - 0x400};
	go_run(USM_GO_READ, &r, 1, (4242ull << 32) | 4243);
	r = (struct test_regs){.ax = (uintptr_t)&inner, .bx = (uintptr_t)inner_buf,
			       .cx = sizeof(inner_buf), .r14 = (uintptr_t)&g, .sp = g.hi - 0x900};
	go_run(USM_GO_READ, &r, 2, (4242ull << 32) | 4243);
	r = (struct test_regs){.ax = sizeof(inner_buf), .r14 = (uintptr_t)&g, .sp = g.hi - 0x900};
	go_run(USM_GO_READ_RET, &r, 3, (4242ull << 32) | 4243);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 0);
	/* The outer Read returns on another thread: the goroutine moved. */
	r = (struct test_regs){.ax = strlen(resp), .r14 = (uintptr_t)&g, .sp = g.hi - 0x400};
	go_run(USM_GO_READ_RET, &r, 4, (4242ull << 32) | 4250);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 1);
	assert_int_equal(event(0)->kind, USM_KIND_RESPONSE);
	assert_int_equal(event(0)->fd, 4);
	assert_int_equal(event(0)->len, strlen(resp));
	assert_int_equal(counter(USM_CNT_GO_UNPAIRED), 0);
}

/* A Read into a buffer on its goroutine's own stack, parked while the GC moves the
 * stack: the return reads the buffer where the stack is now, not where it was (the
 * old stack's memory holds something else by then). */
static void test_go_read_stack_moved(void **state)
{
	static char old_stack[4096], new_stack[4096];
	static struct {
		__u64 lo, hi;
	} g;
	const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	struct go_conn c;
	struct test_regs r;

	(void)state;
	go_conn_init(&c, 7);
	g.lo = (uintptr_t)old_stack;
	g.hi = (uintptr_t)old_stack + sizeof(old_stack);
	r = (struct test_regs){.ax = (uintptr_t)&c, .bx = g.hi - 512, .cx = 256,
			       .r14 = (uintptr_t)&g, .sp = g.hi - 0x800};
	go_run(USM_GO_READ, &r, 1, (4242ull << 32) | 4243);
	/* The stack moved, the bytes read into its copy; the old one reused. */
	memset(old_stack, 0x17, sizeof(old_stack));
	memcpy(new_stack + sizeof(new_stack) - 512, resp, strlen(resp));
	g.lo = (uintptr_t)new_stack;
	g.hi = (uintptr_t)new_stack + sizeof(new_stack);
	r = (struct test_regs){.ax = strlen(resp), .r14 = (uintptr_t)&g, .sp = g.hi - 0x800};
	go_run(USM_GO_READ_RET, &r, 2, (4242ull << 32) | 4250);
	assert_int_equal(bpftel_rb_capture__drain(&cap), 1);
	assert_int_equal(event(0)->kind, USM_KIND_RESPONSE);
	assert_int_equal(event(0)->fd, 7);
	assert_memory_equal(event(0)->prefix, resp, strlen(resp));
	assert_int_equal(counter(USM_CNT_GO_UNPAIRED), 0);
}

static void go_close(struct go_conn *c, __u64 t)
{
	struct test_regs r = {.ax = (uintptr_t)c, .r14 = G1};

	go_run(USM_GO_CLOSE | UPROBE_GO_STACK_CHECK, &r, t, PID_TGID);
}

/* (*Conn).Close drops what the kernel keeps by the Conn: an HTTP/2 session left inside
 * a DATA payload, a kept byte. The next connection at that Conn's address starts its
 * own session (its preface not skipped as the old one's payload), its own message. */
static void test_go_close(void **state)
{
	struct fd_key {
		__u64 conn;
		__u32 tgid, pad;
	} k = {0, PID_TGID >> 32, 0}; /* struct usm_fd_key */
	const char *req = "GET /next HTTP/1.1\r\n\r\n";
	static unsigned char b[9 + 1000];
	unsigned char v[64];
	struct go_conn c;
	char g[8] = "G";

	(void)state;
	go_conn_init(&c, 5);
	k.conn = (uintptr_t)&c;
	memcpy(b, PREFACE, 24);
	assert_int_equal(go_write(&c, (const char *)b, 24, G1, 1), 0);
	frame(b, 0, 0, 1, 1000, NULL, 0); /* a DATA header, its payload to come */
	assert_int_equal(go_write(&c, (const char *)b, 9, G1, 2), 0);
	assert_int_equal(bpftel_rb_capture__drain(&h2cap), 2);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.usm_h2_conns), &k, v), 0);

	go_close(&c, 3);
	assert_int_not_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.usm_h2_conns), &k, v), 0);
	assert_int_equal(bpftel_rb_capture__drain(&h2cap), 1);
	assert_h2_closed(0, (uintptr_t)&c, USM_SRC_GO);
	memcpy(b, PREFACE, 24);
	assert_int_equal(go_write(&c, (const char *)b, 24, G1, 4), 0);
	assert_int_equal(bpftel_rb_capture__drain(&h2cap), 1);
	assert_int_equal(h2rec(0)->flags, USM_H2_F_NEW | USM_H2_F_PREFACE);
	assert_int_equal(h2rec(0)->offset, 0);
	assert_int_equal(h2rec(0)->data_len, 24);
	go_close(&c, 5);
	assert_int_equal(bpftel_rb_capture__drain(&h2cap), 1);
	assert_h2_closed(0, (uintptr_t)&c, USM_SRC_GO);

	/* A byte kept for the next message, then Close: the next connection's request
	 * stands alone. */
	go_read_enter(&c, g, 1, G1, 4243, 6);
	assert_int_equal(go_read_ret(1, G1, 4243, 7), 0);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.usm_go_byte), &k, v), 0);
	go_close(&c, 8);
	assert_int_not_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.usm_go_byte), &k, v), 0);
	go_read_enter(&c, (void *)req, strlen(req), G1, 4243, 9);
	assert_int_equal(go_read_ret((long)strlen(req), G1, 4243, 10), 1);
	assert_int_equal(event(0)->len, strlen(req));
	assert_memory_equal(event(0)->prefix, req, strlen(req));
}

/* A Go connection that carried HTTP/1 stays HTTP/1 (test_h2_http1_session_stays): a
 * SETTINGS-like body is refused. A read of nothing (a deadline passed, as net/http's
 * background read at every request, or EOF) leaves the mark; Close clears it: a Conn
 * at that address may then start HTTP/2. */
static void test_go_http1_mark(void **state)
{
	struct fd_key {
		__u64 conn;
		__u32 tgid, pad;
	} k = {0, PID_TGID >> 32, 0}; /* struct usm_fd_key */
	const char *req = "POST /up HTTP/1.1\r\nContent-Length: 21\r\n\r\n";
	struct usm_tls_sess sess;
	unsigned char b[64];
	struct go_conn c;
	size_t n;

	(void)state;
	go_conn_init(&c, 5);
	k.conn = (uintptr_t)&c;
	assert_int_equal(go_write(&c, req, (long)strlen(req), G1, 1), 1);
	assert_int_equal(event(0)->fd, 5); /* from the Conn, not the map */
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.usm_tls_fds), &k, &sess), 0);
	assert_int_equal(sess.http1, 1);
	n = frame(b, 4, 0, 0, 12, NULL, 0);
	assert_int_equal(go_write(&c, (const char *)b, (long)n, G1, 2), 0);
	assert_int_equal(bpftel_rb_capture__drain(&h2cap), 0);
	assert_int_equal(counter(USM_CNT_H2_START_REFUSED), 1);

	go_read_enter(&c, b, sizeof(b), G1, 4243, 3);
	assert_int_equal(go_read_ret(0, G1, 4243, 4), 0); /* (0, timeout) */
	go_read_enter(&c, b, sizeof(b), G1, 4243, 5);
	assert_int_equal(go_read_ret(-1, G1, 4243, 6), 0);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.usm_tls_fds), &k, &sess), 0);
	assert_int_equal(sess.http1, 1);
	assert_int_equal(go_write(&c, (const char *)b, (long)n, G1, 7), 0);
	assert_int_equal(bpftel_rb_capture__drain(&h2cap), 0);
	assert_int_equal(counter(USM_CNT_H2_START_REFUSED), 2);

	go_close(&c, 8);
	assert_int_not_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.usm_tls_fds), &k, &sess),
			     0);
	assert_int_equal(go_write(&c, (const char *)b, (long)n, G1, 9), 0);
	assert_int_equal(bpftel_rb_capture__drain(&h2cap), 1);
	assert_int_equal(h2rec(0)->flags, USM_H2_F_NEW | USM_H2_F_SETTINGS);
	go_close(&c, 10);
	assert_int_equal(bpftel_rb_capture__drain(&h2cap), 1); /* its end */
	assert_int_equal(counter(USM_CNT_H2_START_REFUSED), 2);
}

/* Go's HTTP/2 client: preface, SETTINGS and WINDOW_UPDATE in one Write; the server's
 * SETTINGS read back. Records carry the Go source and the socket from the Conn. */
static void test_go_h2(void **state)
{
	unsigned char w[128], rd[64];
	size_t n = 0, m;
	struct go_conn c;

	(void)state;
	go_conn_init(&c, 9);
	memcpy(w, PREFACE, 24);
	n = 24;
	n += frame(w + n, 4, 0, 0, 18, NULL, 0);
	n += frame(w + n, 8, 0, 0, 4, "\0\0\0\1", 0);
	assert_int_equal(go_write(&c, (const char *)w, (long)n, G1, 20), 0);
	assert_int_equal(bpftel_rb_capture__drain(&h2cap), 1);
	assert_int_equal(h2rec(0)->source, USM_SRC_GO);
	assert_int_equal(h2rec(0)->fd, 9);
	assert_int_equal(h2rec(0)->dir, USM_DIR_WRITE);
	assert_true(h2rec(0)->flags & USM_H2_F_PREFACE);
	assert_int_equal(h2rec(0)->len, n);
	m = frame(rd, 4, 0, 0, 6, NULL, 0);
	go_read_enter(&c, rd, sizeof(rd), G2, 4243, 21);
	assert_int_equal(go_read_ret((long)m, G2, 4243, 22), 0);
	assert_int_equal(bpftel_rb_capture__drain(&h2cap), 1);
	assert_int_equal(h2rec(0)->source, USM_SRC_GO);
	assert_int_equal(h2rec(0)->dir, USM_DIR_READ);
	assert_int_equal(h2rec(0)->len, m);
	assert_int_equal(counter(USM_CNT_H2_CALLS), 2);
	/* A cookie the module never sets does nothing. */
	{
		struct test_regs r = {.ax = (uintptr_t)&c, .bx = (uintptr_t)w, .cx = n, .r14 = G1};
		struct usm_test_call ctx = {.regs = r, .pid_tgid = PID_TGID, .probe = 7};
		int retval = 0;

		assert_int_equal(
			bpftel_test_run(skel->progs.usm_test_go, &ctx, sizeof(ctx), &retval), 0);
		assert_int_equal(retval, -1);
	}
}

static int case_setup(void **state)
{
	(void)state;
	as_real_uid(0); /* a failed case may have left another */
	/* ... and uid ranges (test_share_subuid_ranges) ... */
	skel->bss->fair_share_ranges_live = 0;
	skel->bss->fair_share_ranges[0].n = 0;
	skel->bss->fair_share_ranges[1].n = 0;
	/* ... and caps of its own (test_share_cap_set_live). */
	skel->data->usm_share_cap[USM_SHARE_H2_CONNS] = USM_H2_CONNS_MAX / FAIR_SHARE_DIV;
	skel->data->usm_share_cap[USM_SHARE_TLS_FDS] = USM_TLS_FDS_MAX / FAIR_SHARE_DIV;
	skel->data->usm_share_cap[USM_SHARE_TLS_RETRY] = USM_TLS_RETRY_MAX / FAIR_SHARE_DIV;
	skel->data->usm_share_cap[USM_SHARE_GO_READS] = USM_GO_READS_MAX / FAIR_SHARE_DIV;
	assert_int_equal(
		bpftel_test_percpu_clear(bpf_map__fd(skel->maps.usm_counters), USM_CNT__COUNT), 0);
	bpftel_rb_capture__drain(&cap);
	bpftel_rb_capture__drain(&h2cap);
	/* Each case starts with every CPU's walk scratch free (a failed
	 * test_h2_preempted_walk leaves it held) and no HTTP/2 session known. */
	h2_scratch_hold(0);
	{
		struct { __u64 conn; __u32 tgid, pad; } k = {SSL_PTR, 4242, 0};

		bpf_map_delete_elem(bpf_map__fd(skel->maps.usm_h2_conns), &k);
		bpf_map_delete_elem(bpf_map__fd(skel->maps.usm_h2_midstream), &k);
		k.tgid = 4343;
		bpf_map_delete_elem(bpf_map__fd(skel->maps.usm_h2_midstream), &k);
	}
	/* ... (the Go cases' sessions are on the stack) and no Go read in flight, and no
	 * session's socket or HTTP/1 mark. */
	{
		int fds[] = {bpf_map__fd(skel->maps.usm_h2_conns),
			     bpf_map__fd(skel->maps.usm_go_reads),
			     bpf_map__fd(skel->maps.usm_go_byte),
			     bpf_map__fd(skel->maps.usm_tls_fds),
			     bpf_map__fd(skel->maps.usm_h2_midstream),
			     bpf_map__fd(skel->maps.fair_share),
			     bpf_map__fd(skel->maps.fair_share_adj)};
		unsigned char key[16];
		size_t i;

		for (i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
			while (!bpf_map_get_next_key(fds[i], NULL, key))
				assert_int_equal(bpf_map_delete_elem(fds[i], key), 0);
	}
	/* ... and no segment seen. */
	{
		int fd = bpf_map__fd(skel->maps.usm_pkt_seen);
		unsigned char key[40];

		while (!bpf_map_get_next_key(fd, NULL, key))
			assert_int_equal(bpf_map_delete_elem(fd, key), 0);
	}
	/* ... and no write to be retried. */
	{
		int fd = bpf_map__fd(skel->maps.usm_tls_retry);
		unsigned char key[16];

		while (!bpf_map_get_next_key(fd, NULL, key))
			assert_int_equal(bpf_map_delete_elem(fd, key), 0);
		skel->bss->usm_tls_retry_marks = 0;
	}
	/* ... and no h2c connection. */
	{
		int fd = bpf_map__fd(skel->maps.usm_h2c_conns);
		unsigned char key[40];

		while (!bpf_map_get_next_key(fd, NULL, key))
			assert_int_equal(bpf_map_delete_elem(fd, key), 0);
	}
	return 0;
}

static int group_setup(void **state)
{
	cpu_set_t one;

	(void)state;
	/* On one CPU: a write's entry leaves it in its CPU's slot, for SSL_get_error to
	 * find (bpf/lib/usm_tls_retry.h); the programs run on the CPU of the test. */
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		return -1;
	skel = usm_harness__open();
	if (!skel)
		return -1;
	/* The agent's pid namespace is the test's (test_share_container_root). */
	if (fair_share_pidns(&skel->rodata->fair_share_pidns_dev,
				 &skel->rodata->fair_share_pidns_ino) ||
	    usm_harness__load(skel))
		return -1;
	return bpftel_rb_capture__open(&cap, bpf_map__fd(skel->maps.usm_events)) ?:
	       bpftel_rb_capture__open(&h2cap, bpf_map__fd(skel->maps.usm_h2_events));
}

static int group_teardown(void **state)
{
	(void)state;
	bpftel_rb_capture__close(&cap);
	bpftel_rb_capture__close(&h2cap);
	usm_harness__destroy(skel);
	return 0;
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup(fn, case_setup)
	const struct CMUnitTest tests[] = {
		T(test_ipv4_request_and_response),
		T(test_ipv6_request_and_response),
		T(test_tcp_options_skipped),
		T(test_ipv6_extension_headers),
		T(test_split_request),
		T(test_long_request_prefix_only),
		T(test_not_http_ignored),
		T(test_other_methods),
		T(test_pkt_type),
		T(test_duplicate_segments),
		T(test_no_payload),
		T(test_syn_and_reset_payloads),
		T(test_unsized_packets_counted),
		T(test_truncated_packets),
		T(test_h2c_segments),
		T(test_h2c_ports_reused),
		T(test_h2c_copies_spend_nothing),
		T(test_tls_write_request_read_response),
		T(test_tls_write_at_entry),
		T(test_tls_lengths),
		T(test_tls_prefix_unreadable),
		T(test_tls_errors_and_non_http),
		T(test_tls_ex_forms),
		T(test_tls_nested_reads),
		T(test_tls_recv_fd),
		T(test_gnutls),
		T(test_tls_write_rest),
		T(test_gnutls_typed_read),
		T(test_tls_fd),
		T(test_h2_client_start_copied),
		T(test_h2_data_payload_not_copied),
		T(test_h2_split_over_calls),
		T(test_h2_server_order),
		T(test_h2_cap),
		T(test_h2_unframed),
		T(test_h2_preempted_walk),
		T(test_h2_preempting_walk_next_slot),
		T(test_h2_detection),
		T(test_tls_free),
		T(test_tls_write_retry),
		T(test_tls_write_retry_which),
		T(test_tls_write_retry_moved_buffer),
		T(test_tls_write_retry_sweep),
		T(test_h2_http1_session_stays),
		T(test_h2_midstream_counted_once),
		T(test_h2_share_per_user),
		T(test_h2_share_sweep),
		T(test_share_sweep_walks_again),
		T(test_share_holders),
		T(test_share_counts_full),
		T(test_share_cap_set_live),
		T(test_share_subuid_ranges),
		cmocka_unit_test_setup_teardown(test_share_container_root, case_setup,
						container_root_teardown),
		T(test_tls_sess_share_per_user),
		T(test_tls_retry_share_per_user),
		T(test_go_write_request),
		T(test_go_conn_chain),
		T(test_go_read_paired_by_goroutine),
		T(test_go_read_nil),
		T(test_go_reads_share_per_user),
		T(test_go_reads_left_over),
		T(test_go_read_nothing),
		T(test_go_h2),
		T(test_go_background_byte),
		T(test_go_close),
		T(test_go_http1_mark),
		T(test_go_read_nested),
		T(test_go_read_stack_moved),
		T(test_go_stack_check),
	};

	bpftel_test_require_bpf();
	return cmocka_run_group_tests_name("usm", tests, group_setup, group_teardown);
}
