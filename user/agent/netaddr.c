// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* HOST:PORT parsing for the metrics address (command line and configuration file). */
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "netaddr.h"

/* HOST and PORT of addr into host (256 bytes) and *port. */
static int split(const char *addr, char *host, const char **port)
{
	const char *colon = strrchr(addr, ':');
	size_t hl;

	if (!colon || colon == addr || !colon[1])
		return -EINVAL;
	hl = colon - addr;
	if (addr[0] == '[' && colon[-1] == ']') { /* [::1]:9464 */
		addr++;
		hl -= 2;
	}
	if (strspn(colon + 1, "0123456789") != strlen(colon + 1) || strlen(colon + 1) > 5 ||
	    strtoul(colon + 1, NULL, 10) > 65535)
		return -EINVAL; /* getaddrinfo takes 70000 as 4464 */
	if (hl >= 256)
		return -ENAMETOOLONG;
	memcpy(host, addr, hl);
	host[hl] = '\0';
	*port = colon + 1;
	return 0;
}

/* A host name as resolvers take one: labels of letters, digits, hyphens and
 * underscores (RFC 1123, and the service names of container networks), a final dot
 * allowed. */
static bool host_name(const char *h)
{
	size_t label = 0;

	for (; *h; h++) {
		if (*h == '.') {
			if (!label)
				return false;
			if (!h[1])
				return true; /* a fully qualified name's root */
			label = 0;
		} else if (isalnum((unsigned char)*h) || *h == '_' || (*h == '-' && label)) {
			if (++label > 63)
				return false;
		} else {
			return false;
		}
	}
	return label > 0;
}

int bpftel_metrics_check_addr(const char *addr)
{
	struct addrinfo hints = {.ai_flags = AI_NUMERICSERV | AI_NUMERICHOST,
				 .ai_socktype = SOCK_STREAM},
			*res;
	const char *port;
	char host[256];
	int err = split(addr, host, &port);

	if (err)
		return err;
	if (!getaddrinfo(host, port, &hints, &res)) {
		freeaddrinfo(res);
		return 0;
	}
	/* A name: resolved when the endpoint starts, off the control socket's thread;
	 * its port checked on an address. */
	if (!host_name(host) || getaddrinfo("127.0.0.1", port, &hints, &res))
		return -EINVAL;
	freeaddrinfo(res);
	return 0;
}

int bpftel_metrics_parse_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *sslen)
{
	struct addrinfo hints = {.ai_flags = AI_NUMERICSERV, .ai_socktype = SOCK_STREAM}, *res;
	const char *port;
	char host[256];
	int err = split(addr, host, &port);

	if (err)
		return err;
	err = getaddrinfo(host, port, &hints, &res);
	if (err)
		return -EINVAL;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*sslen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}
