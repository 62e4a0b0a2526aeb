// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * gnutls_loop N: a GnuTLS client and server in one process over memory (no sockets),
 * exchanging N HTTP request/response pairs: per pair 2 gnutls_record_send and 2
 * gnutls_record_recv calls with data, every one an HTTP message's start. The read
 * side of tls_loop.py's pairs, on the other TLS library the USM module probes.
 * Prints "loaded", waits for a line on stdin (so that an agent can attach first), then
 * prints ns per pair. A workload of bench_tls_write.py. PSK credentials: nothing to
 * generate, the handshake is not what is measured.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <gnutls/gnutls.h>

/* One direction of the transport: bytes written by one end, not yet read by the other. */
struct pipe {
	unsigned char buf[1 << 16];
	size_t len;
};

struct end {
	gnutls_session_t s;
	struct pipe *in, *out;
};

static ssize_t push(gnutls_transport_ptr_t p, const void *data, size_t n)
{
	struct end *e = p;

	if (n > sizeof(e->out->buf) - e->out->len) {
		gnutls_transport_set_errno(e->s, EAGAIN);
		return -1;
	}
	memcpy(e->out->buf + e->out->len, data, n);
	e->out->len += n;
	return (ssize_t)n;
}

static ssize_t pull(gnutls_transport_ptr_t p, void *data, size_t n)
{
	struct end *e = p;

	if (!e->in->len) {
		gnutls_transport_set_errno(e->s, EAGAIN);
		return -1;
	}
	if (n > e->in->len)
		n = e->in->len;
	memcpy(data, e->in->buf, n);
	memmove(e->in->buf, e->in->buf + n, e->in->len - n);
	e->in->len -= n;
	return (ssize_t)n;
}

static int psk_key(gnutls_session_t s, const char *user, gnutls_datum_t *key)
{
	(void)s, (void)user;
	key->data = gnutls_malloc(16);
	if (!key->data)
		return -1;
	memset(key->data, 0x42, 16);
	key->size = 16;
	return 0;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "gnutls_loop: %s: %s\n", what, gnutls_strerror(err));
	exit(1);
}

static void init_end(struct end *e, unsigned int flags, struct pipe *in, struct pipe *out,
		     void *cred)
{
	int err;

	e->in = in;
	e->out = out;
	if ((err = gnutls_init(&e->s, flags)) ||
	    (err = gnutls_priority_set_direct(e->s, "NORMAL:-KX-ALL:+ECDHE-PSK:+PSK", NULL)) ||
	    (err = gnutls_credentials_set(e->s, GNUTLS_CRD_PSK, cred)))
		die("session", err);
	gnutls_transport_set_ptr(e->s, e);
	gnutls_transport_set_push_function(e->s, push);
	gnutls_transport_set_pull_function(e->s, pull);
}

/* Read until a record with data arrives (a TLS 1.3 ticket comes first, once). */
static void recv_data(struct end *e, char *buf, size_t size)
{
	ssize_t n;

	do
		n = gnutls_record_recv(e->s, buf, size);
	while (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED);
	if (n <= 0)
		die("recv", (int)n);
}

static void send_all(struct end *e, const char *msg)
{
	ssize_t n = gnutls_record_send(e->s, msg, strlen(msg));

	if (n != (ssize_t)strlen(msg))
		die("send", (int)n);
}

int main(int argc, char **argv)
{
	static const char req[] = "GET /items/42 HTTP/1.1\r\nHost: bench\r\n\r\n";
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	static struct pipe c2s, s2c;
	gnutls_psk_client_credentials_t ccred;
	gnutls_psk_server_credentials_t scred;
	gnutls_datum_t key = {(unsigned char *)"BBBBBBBBBBBBBBBB", 16};
	struct end client, server;
	struct timespec t0, t1;
	long n, i, rc, rs;
	char buf[4096], line[16];

	n = argc > 1 ? atol(argv[1]) : 0;
	if (n <= 0) {
		fprintf(stderr, "usage: gnutls_loop N\n");
		return 2;
	}
	if (gnutls_psk_allocate_client_credentials(&ccred) ||
	    gnutls_psk_set_client_credentials(ccred, "bench", &key, GNUTLS_PSK_KEY_RAW) ||
	    gnutls_psk_allocate_server_credentials(&scred))
		die("credentials", 0);
	gnutls_psk_set_server_credentials_function(scred, psk_key);
	init_end(&client, GNUTLS_CLIENT | GNUTLS_NONBLOCK, &s2c, &c2s, ccred);
	init_end(&server, GNUTLS_SERVER | GNUTLS_NONBLOCK, &c2s, &s2c, scred);
	for (i = 0, rc = rs = GNUTLS_E_AGAIN; i < 100 && (rc || rs); i++) {
		if (rc)
			rc = gnutls_handshake(client.s);
		if (rs)
			rs = gnutls_handshake(server.s);
		if ((rc && rc != GNUTLS_E_AGAIN) || (rs && rs != GNUTLS_E_AGAIN))
			die("handshake", rc && rc != GNUTLS_E_AGAIN ? (int)rc : (int)rs);
	}
	if (rc || rs)
		die("handshake", GNUTLS_E_AGAIN);
	/* One exchange first (the ticket, the first reads' own costs), not HTTP: an agent
	 * already on the library would count it. */
	send_all(&client, "warm up\n");
	recv_data(&server, buf, sizeof(buf));
	send_all(&server, "warm up\n");
	recv_data(&client, buf, sizeof(buf));

	printf("loaded\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < n; i++) {
		send_all(&client, req);
		recv_data(&server, buf, sizeof(buf));
		send_all(&server, resp);
		recv_data(&client, buf, sizeof(buf));
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%.1f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n);
	gnutls_deinit(client.s);
	gnutls_deinit(server.s);
	gnutls_psk_free_client_credentials(ccred);
	gnutls_psk_free_server_credentials(scred);
	return 0;
}
