// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * tls_pattern LIBRARY MODE [N]: dlopen a libssl or libgnutls (the stubs the tests build,
 * tests/usm/stub_tls.c), print "loaded PID", wait for a line on stdin (the test lets
 * the uprobes attach first), make MODE's calls, print what they returned and "done",
 * then wait for stdin to close so that the test can look while the process lives.
 *
 * http:     one request and its response through SSL_write and SSL_read
 * http_ex:  the same through SSL_write_ex and SSL_read_ex
 * gnutls:   the same through gnutls_record_send and gnutls_record_recv
 * badlen N: N SSL_read_ex of a response whose `readbytes` pointer is unmapped
 * badbuf N: N SSL_write_ex of 64 bytes from an unmapped buffer
 * bio:      http on a session with its own BIO (no SSL_set_fd, stub_bio.h) on a TCP
 *           connection to itself over loopback; prints "bio FD CLIENT_PORT SERVER_PORT"
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "stub_bio.h"

static const char request[] = "GET /items/42 HTTP/1.1\r\nHost: stub\r\n\r\n";
static struct {
	char opaque[64];
} session; /* what the library would have given: its address names the connection */

static void *sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);

	if (!p) {
		fprintf(stderr, "tls_pattern: %s: %s\n", name, dlerror());
		exit(1);
	}
	return p;
}

static void http(void *lib)
{
	int (*wr)(void *, const void *, int) = sym(lib, "SSL_write");
	int (*rd)(void *, void *, int) = sym(lib, "SSL_read");
	char buf[256];

	printf("write %d\n", wr(&session, request, (int)strlen(request)));
	printf("read %d\n", rd(&session, buf, sizeof(buf)));
}

static void http_ex(void *lib)
{
	int (*wr)(void *, const void *, size_t, size_t *) = sym(lib, "SSL_write_ex");
	int (*rd)(void *, void *, size_t, size_t *) = sym(lib, "SSL_read_ex");
	size_t written = 0, got = 0;
	char buf[256];
	int rc;

	rc = wr(&session, request, strlen(request), &written);
	printf("write_ex %d %zu\n", rc, written);
	rc = rd(&session, buf, sizeof(buf), &got);
	printf("read_ex %d %zu\n", rc, got);
}

static void gnutls(void *lib)
{
	ssize_t (*send)(void *, const void *, size_t) = sym(lib, "gnutls_record_send");
	ssize_t (*recv)(void *, void *, size_t) = sym(lib, "gnutls_record_recv");
	char buf[256];

	printf("send %zd\n", send(&session, request, strlen(request)));
	printf("recv %zd\n", recv(&session, buf, sizeof(buf)));
}

/* A TCP connection to itself over loopback: the client end, whose connect the watcher
 * sees, with a byte waiting on it; its ports in *cport, *sport. */
static int loopback_conn(int *cport, int *sport)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int l, c, s;

	l = socket(AF_INET, SOCK_STREAM, 0);
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || c < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &len))
		exit(1);
	*sport = ntohs(a.sin_port);
	if (connect(c, (struct sockaddr *)&a, sizeof(a)))
		exit(1);
	s = accept(l, NULL, NULL);
	len = sizeof(a);
	if (s < 0 || send(s, "x", 1, 0) != 1 || getsockname(c, (struct sockaddr *)&a, &len))
		exit(1);
	*cport = ntohs(a.sin_port);
	return c;
}

static void bio(void *lib)
{
	struct stub_bio_session *s = (struct stub_bio_session *)&session;
	int cport, sport;

	s->fd = loopback_conn(&cport, &sport);
	s->magic = STUB_BIO_MAGIC;
	http(lib);
	printf("bio %d %d %d\n", s->fd, cport, sport);
}

/* A page that was mapped and no longer is. */
static void *unmapped(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || munmap(p, 4096))
		exit(1);
	return p;
}

static void badlen(void *lib, long n)
{
	int (*rd)(void *, void *, size_t, size_t *) = sym(lib, "SSL_read_ex");
	size_t *bad = unmapped();
	char buf[256];
	long i, ok = 0;

	for (i = 0; i < n; i++)
		ok += rd(&session, buf, sizeof(buf), bad) == 1;
	printf("read_ex %ld ok %ld\n", n, ok);
}

static void badbuf(void *lib, long n)
{
	int (*wr)(void *, const void *, size_t, size_t *) = sym(lib, "SSL_write_ex");
	const char *bad = unmapped();
	size_t written;
	long i, ok = 0;

	for (i = 0; i < n; i++)
		ok += wr(&session, bad, 64, &written) == 1;
	printf("write_ex %ld ok %ld\n", n, ok);
}

int main(int argc, char **argv)
{
	char line[64];
	void *lib;
	char c;

	if (argc < 3) {
		fprintf(stderr,
			"usage: tls_pattern LIBRARY http|http_ex|gnutls|bio|badlen N|badbuf N\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "tls_pattern: %s\n", dlerror());
		return 1;
	}
	printf("loaded %d\n", getpid());
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	if (!strcmp(argv[2], "http"))
		http(lib);
	else if (!strcmp(argv[2], "http_ex"))
		http_ex(lib);
	else if (!strcmp(argv[2], "gnutls"))
		gnutls(lib);
	else if (!strcmp(argv[2], "bio"))
		bio(lib);
	else if (!strcmp(argv[2], "badlen") && argc > 3)
		badlen(lib, atol(argv[3]));
	else if (!strcmp(argv[2], "badbuf") && argc > 3)
		badbuf(lib, atol(argv[3]));
	else
		return 2;
	printf("done\n");
	while (read(STDIN_FILENO, &c, 1) > 0)
		;
	return 0;
}
