// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What a request costs USM's endpoint table (user/modules/usm/endpoints.c), side by
 * side in one run: requests answered at once (the floor: a slot taken and given
 * back), and requests never answered, each on a new connection, with the pending
 * table full (each one evicts the request waiting longest: the flood any local user
 * can make by writing requests nobody answers). ns per request, the median of the
 * replicates, the configurations interleaved.
 *
 *   build/tests/bench_endpoints [-n requests] [-r replicates] [-p max_pending]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "user/modules/usm/endpoints.h"
#include "user/modules/usm/http.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct usm_conn_key key(uint64_t conn)
{
	struct usm_conn_key k;

	memset(&k, 0, sizeof(k));
	k.pid = 1000;
	k.conn = conn;
	k.side = USM_SIDE_CLIENT;
	return k;
}

/* ns per request: answered (each followed by its response) or not (table full). */
static double run(size_t max_pending, size_t n, int answered)
{
	struct usm_endpoints *e =
		usm_endpoints_new(&(struct usm_endpoints_limits){.max_pending = max_pending});
	struct usm_http_start req, resp;
	struct usm_conn_key k;
	uint64_t t0, conn = 1;
	size_t i;

	if (!e || usm_http_parse("GET /items/1 HTTP/1.1\r\n", 23, &req) != USM_HTTP_REQUEST ||
	    usm_http_parse("HTTP/1.1 200 OK\r\n", 17, &resp) != USM_HTTP_RESPONSE) {
		fprintf(stderr, "bench_endpoints: setup failed\n");
		exit(1);
	}
	for (i = 0; i < max_pending; i++, conn++) { /* full: a request waiting per slot */
		k = key(conn);
		usm_endpoints_message(e, &k, USM_PROTO_HTTPS, conn, &req, NULL);
	}
	t0 = now_ns();
	for (i = 0; i < n; i++, conn++) {
		k = key(answered ? 0 : conn);
		usm_endpoints_message(e, &k, USM_PROTO_HTTPS, conn, &req, NULL);
		if (answered)
			usm_endpoints_message(e, &k, USM_PROTO_HTTPS, conn, &resp, NULL);
	}
	t0 = now_ns() - t0;
	usm_endpoints_free(e);
	return (double)t0 / (double)n;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	size_t n = 200000, pending = 4096;
	int reps = 5, opt, r;
	double a[64], u[64];

	while ((opt = getopt(argc, argv, "n:r:p:")) != -1) {
		if (opt == 'n')
			n = strtoul(optarg, NULL, 10);
		else if (opt == 'r')
			reps = atoi(optarg);
		else if (opt == 'p')
			pending = strtoul(optarg, NULL, 10);
		else
			return fprintf(stderr, "usage: %s [-n requests] [-r replicates] "
					       "[-p max_pending]\n", argv[0]), 2;
	}
	if (reps < 1 || reps > 64 || !n || !pending)
		return fprintf(stderr, "bench_endpoints: bad arguments\n"), 2;
	for (r = 0; r < reps; r++) {
		a[r] = run(pending, n, 1);
		u[r] = run(pending, n, 0);
	}
	qsort(a, reps, sizeof(a[0]), cmp);
	qsort(u, reps, sizeof(u[0]), cmp);
	printf("endpoints, max_pending %zu, %zu requests x %d replicates (median ns/request)\n",
	       pending, n, reps);
	printf("answered at once (the floor)      %8.1f\n", a[reps / 2]);
	printf("never answered, table full        %8.1f  (%.2fx the floor)\n", u[reps / 2],
	       u[reps / 2] / a[reps / 2]);
	return 0;
}
