// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* HOST:PORT parsing for the metrics address (command line and configuration file). */
#include <errno.h>
#include <netdb.h>
#include <string.h>
#include <sys/socket.h>

#include "netaddr.h"

int bpftel_metrics_parse_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *sslen)
{
	struct addrinfo hints = {.ai_flags = AI_NUMERICSERV, .ai_socktype = SOCK_STREAM}, *res;
	char host[256];
	const char *colon = strrchr(addr, ':');
	size_t hl;
	int err;

	if (!colon || colon == addr || !colon[1])
		return -EINVAL;
	hl = colon - addr;
	if (addr[0] == '[' && colon[-1] == ']') { /* [::1]:9464 */
		addr++;
		hl -= 2;
	}
	if (hl >= sizeof(host))
		return -ENAMETOOLONG;
	memcpy(host, addr, hl);
	host[hl] = '\0';
	err = getaddrinfo(host, colon + 1, &hints, &res);
	if (err)
		return -EINVAL;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*sslen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}
