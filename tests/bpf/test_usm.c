// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * BPF_PROG_TEST_RUN tests of bpf/usm.bpf.c: the socket filter on crafted packets
 * (IPv4, IPv6, TCP options, split and truncated segments, non-HTTP, no payload), and
 * the TLS probe bodies on synthetic registers and buffers. Each case checks the ring
 * buffer and the counters.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <linux/types.h>
#include <bpf/bpf.h>

#include "harness.h"
#include "usm.h"
#include "usm_harness.skel.h"

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
 * client 40000 -> server 80, else the reverse. tot_extra inflates the IP length. */
static void build(struct pkt *p, int family, bool from_client, size_t opt_len, const char *data,
		  size_t dlen, int tot_extra)
{
	unsigned char *ip = p->b + 14, *tcp;
	size_t iphl = family == 4 ? 20 : 40, tcphl = 20 + opt_len;
	uint16_t sport = from_client ? 40000 : 80, dport = from_client ? 80 : 40000, v;

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

	(void)state;
	packet(4, true, 0, req, 1);
	ev = event(0);
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

/* ---- TLS ---- */

struct usm_test_call {
	struct test_regs regs;
	__u64 pid_tgid;
	__u64 now;
	__u32 probe;
	__u32 __pad;
};

enum { SSL_WRITE, SSL_READ, SSL_WRITE_EX, SSL_READ_EX, GNUTLS_SEND, GNUTLS_RECV };

#define PID_TGID ((4242ull << 32) | 4243)
#define SSL_PTR	 0x55aa00001000ul

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
	struct test_regs in = {
		.di = SSL_PTR, .si = (uintptr_t)buf, .dx = num, .cx = (uintptr_t)size_out};
	struct test_regs out = {.ax = (unsigned long)rc};

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

static int case_setup(void **state)
{
	(void)state;
	assert_int_equal(
		bpftel_test_percpu_clear(bpf_map__fd(skel->maps.usm_counters), USM_CNT__COUNT), 0);
	bpftel_rb_capture__drain(&cap);
	return 0;
}

static int group_setup(void **state)
{
	(void)state;
	skel = usm_harness__open_and_load();
	if (!skel)
		return -1;
	return bpftel_rb_capture__open(&cap, bpf_map__fd(skel->maps.usm_events));
}

static int group_teardown(void **state)
{
	(void)state;
	bpftel_rb_capture__close(&cap);
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
		T(test_split_request),
		T(test_long_request_prefix_only),
		T(test_not_http_ignored),
		T(test_other_methods),
		T(test_pkt_type),
		T(test_no_payload),
		T(test_truncated_packets),
		T(test_tls_write_request_read_response),
		T(test_tls_write_at_entry),
		T(test_tls_lengths),
		T(test_tls_errors_and_non_http),
		T(test_tls_ex_forms),
		T(test_gnutls),
		T(test_tls_fd),
	};

	bpftel_test_require_bpf();
	return cmocka_run_group_tests_name("usm", tests, group_setup, group_teardown);
}
