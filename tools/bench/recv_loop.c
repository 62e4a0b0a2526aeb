// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * recv_loop: recv(2) on an empty socket (a UNIX socket pair, MSG_DONTWAIT: EAGAIN at
 * once) for SECONDS, and print the mean ns per call. The workload of bench.py's
 * recv_loop: every recvfrom(2) of the host runs USM's tracepoint program (a session
 * with its own BIO gets its socket there), and this is what it costs a process that
 * calls it in no TLS read, the case of nearly every recvfrom on a host.
 *
 *   recv_loop -d SECONDS
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_common.h"

int main(int argc, char **argv)
{
	double secs = argc == 3 && !strcmp(argv[1], "-d") ? strtod(argv[2], NULL) : 0, t0, t1;
	char b[16];
	long i = 0;
	int sv[2], k;

	if (secs <= 0) {
		fprintf(stderr, "usage: recv_loop -d SECONDS\n");
		return 2;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		fprintf(stderr, "recv_loop: socketpair: %s\n", strerror(errno));
		return 1;
	}
	t0 = now_ns();
	do {
		/* The clock is read every 1024 calls: a few ns of each call's hundreds. */
		for (k = 0; k < 1024; k++, i++) {
			if (recv(sv[0], b, sizeof(b), MSG_DONTWAIT) != -1 || errno != EAGAIN) {
				fprintf(stderr, "recv_loop: recv: not EAGAIN on an empty socket\n");
				return 1;
			}
		}
		t1 = now_ns();
	} while (t1 - t0 < secs * 1e9);
	printf("%.1f\n", (t1 - t0) / i);
	return 0;
}
