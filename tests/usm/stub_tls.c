// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Stand-ins for the TLS libraries the USM module probes, built twice by the tests:
 * libssl.so.3 (OpenSSL's SSL_write, SSL_read, SSL_write_ex, SSL_read_ex, symbol version
 * OPENSSL_3.0.0) and, with STUB_GNUTLS, libgnutls.so.30 (gnutls_record_send/recv,
 * GNUTLS_3_4). Real ELF shared objects with the real sonames and signatures and no
 * crypto: a write "sends" its bytes (returns them all), a read "receives" a canned
 * HTTP response. So the uprobe registry attaches to them by symbol, as to the real
 * ones, and a test process drives each probe point with exactly the bytes it wants.
 *
 * A session whose first bytes say STUB_BIO_MAGIC reads its socket (the int after it)
 * with recv(2) from inside SSL_read, as curl's own BIO does (tls_pattern's bio mode).
 *
 * The _ex forms store their byte count with process_vm_writev: a `written` or
 * `readbytes` pointer the process cannot write (unmapped) is left alone and the call
 * still succeeds, the one way tests make the USM uretprobe's read of the count fail.
 */
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "stub_bio.h"

#define EXPORT __attribute__((visibility("default"), noinline))

static const char response[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

static size_t receive(void *buf, size_t num)
{
	size_t n = num < sizeof(response) - 1 ? num : sizeof(response) - 1;

	memcpy(buf, response, n);
	return n;
}

#ifndef STUB_GNUTLS
typedef struct ssl_st SSL;

/* *where = n, or nothing where the process cannot write (EFAULT, not a crash). */
static void store(size_t *where, size_t n)
{
	struct iovec local = {&n, sizeof(n)}, remote = {where, sizeof(n)};

	process_vm_writev(getpid(), &local, 1, &remote, 1, 0);
}

EXPORT int SSL_write(SSL *ssl, const void *buf, int num)
{
	(void)ssl, (void)buf;
	return num;
}

/* A bio-mode session's BIO: what arrived on its socket (the bytes do not matter). */
static void bio_recv(const void *ssl)
{
	const struct stub_bio_session *s = ssl;
	char b[16];

	if (s->magic == STUB_BIO_MAGIC)
		(void)recv(s->fd, b, sizeof(b), MSG_DONTWAIT);
}

EXPORT int SSL_read(SSL *ssl, void *buf, int num)
{
	bio_recv(ssl);
	return (int)receive(buf, (size_t)num);
}

EXPORT int SSL_write_ex(SSL *ssl, const void *buf, size_t num, size_t *written)
{
	(void)ssl, (void)buf;
	store(written, num);
	return 1;
}

EXPORT int SSL_read_ex(SSL *ssl, void *buf, size_t num, size_t *readbytes)
{
	(void)ssl;
	store(readbytes, receive(buf, num));
	return 1;
}
#else
typedef struct gnutls_session_int *gnutls_session_t;

EXPORT ssize_t gnutls_record_send(gnutls_session_t session, const void *data, size_t data_size)
{
	(void)session, (void)data;
	return (ssize_t)data_size;
}

EXPORT ssize_t gnutls_record_recv(gnutls_session_t session, void *data, size_t data_size)
{
	(void)session;
	return (ssize_t)receive(data, data_size);
}
#endif
