/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#ifndef BPFTEL_AGENT_NETADDR_H
#define BPFTEL_AGENT_NETADDR_H

#include <sys/socket.h>

#define BPFTEL_METRICS_ADDR_DEFAULT "127.0.0.1:9464"

/* "HOST:PORT" or "[V6]:PORT", numeric port, HOST a name or an address; 0 or -EINVAL
 * (-ENAMETOOLONG for a host over 255 bytes). A name is resolved (getaddrinfo: DNS,
 * which may take long): for the endpoint's start only. */
int bpftel_metrics_parse_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *sslen);
/* The same, checked without resolving: an address, or a name spelled as DNS names
 * are. For the configuration and the command line: a reload (SIGHUP) is read on the
 * control socket's thread, which must not wait on a name server. */
int bpftel_metrics_check_addr(const char *addr);

#endif /* BPFTEL_AGENT_NETADDR_H */
