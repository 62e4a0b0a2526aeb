// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Whose a /metrics connection is, and each owner's share of them
 * (user/agent/metrics_peers.h): real loopback connections, and the shares' arithmetic. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "user/agent/metrics_peers.h"

/* A TCP connection over loopback of family (AF_INET, AF_INET6; AF_INET6 + 1: an IPv6
 * socket to ::ffff:127.0.0.1, a dual-stack listener's): *srv is the accepted end, *cli
 * the client's, made by a child as uid when uid is not -1 (*cli is then -1, and *child
 * the child, which holds it until killed, or dies with this process). -1 in *srv: the
 * child could not connect. */
static void loopback_pair_as(int family, int *srv, int *cli, int uid, pid_t *child)
{
	bool mapped = family == AF_INET6 + 1;
	struct sockaddr_storage ss = {.ss_family = mapped ? AF_INET6 : family};
	socklen_t len = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	int l = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), off = 0;
	struct pollfd pfd;

	if (family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else if (!mapped)
		((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
	assert_true(l >= 0);
	if (mapped)
		assert_int_equal(setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)), 0);
	assert_int_equal(bind(l, (struct sockaddr *)&ss, len), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&ss, &len), 0);
	if (mapped) /* to ::ffff:127.0.0.1 */
		inet_pton(AF_INET6, "::ffff:127.0.0.1", &((struct sockaddr_in6 *)&ss)->sin6_addr);
	if (uid >= 0) {
		*child = fork();
		assert_true(*child >= 0);
		if (!*child) {
			int c;

			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (setgid(uid) || setuid(uid))
				_exit(1);
			c = socket(ss.ss_family, SOCK_STREAM, 0);
			if (c < 0 || connect(c, (struct sockaddr *)&ss, len))
				_exit(1);
			pause();
			_exit(0);
		}
		*cli = -1;
	} else {
		*cli = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(*cli >= 0);
		assert_int_equal(connect(*cli, (struct sockaddr *)&ss, len), 0);
	}
	/* A child that could not connect exits: not waited on for ever. */
	pfd = (struct pollfd){.fd = l, .events = POLLIN};
	*srv = poll(&pfd, 1, 60000) == 1 ? accept4(l, NULL, NULL, SOCK_CLOEXEC) : -1;
	close(l);
}

static void loopback_pair(int family, int *srv, int *cli)
{
	loopback_pair_as(family, srv, cli, -1, NULL);
}

/* The accepted end of a loopback connection is owned by the uid of the client's
 * socket (this process's), over IPv4 and IPv6 alike; an AF_UNIX one is not told. */
static void test_peer_is_the_clients_uid(void **state)
{
	static const int families[] = {AF_INET, AF_INET6, AF_INET6 + 1};
	static struct metrics_peers peers;
	struct metrics_peer p;
	int srv, cli, sv[2];
	size_t i;

	(void)state;
	metrics_peers_init(&peers);
	for (i = 0; i < 3; i++) {
		loopback_pair(families[i], &srv, &cli);
		assert_true(srv >= 0);
		assert_int_equal(metrics_peer_of(&peers, srv, &p), 0);
		assert_true(p.by_uid);
		assert_int_equal(p.uid, getuid());
		close(srv);
		close(cli);
	}
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(metrics_peer_of(&peers, sv[0], &p), -EAFNOSUPPORT);
	close(sv[0]);
	close(sv[1]);
	assert_int_equal(metrics_peer_of(&peers, -1, &p), -EBADF);
	/* Without sock_diag local clients are one owner, the unspecified address. */
	metrics_peers_fini(&peers);
	loopback_pair(AF_INET, &srv, &cli);
	assert_true(srv >= 0);
	assert_int_equal(metrics_peer_of(&peers, srv, &p), 0);
	assert_false(p.by_uid);
	assert_true(IN6_IS_ADDR_UNSPECIFIED(&p.addr));
	close(srv);
	close(cli);
}

/* A client running as a uid of a user's subordinate range (/etc/subuid: a rootless
 * container's) is that user's: its subordinate uids are not more owners. */
static void test_peer_of_a_subuid_is_its_user(void **state)
{
	char path[] = "/tmp/bpftel-subuid-XXXXXX";
	static struct metrics_peers peers;
	struct metrics_peer p = {};
	int fd, srv, cli, err;
	pid_t child;

	(void)state;
	if (getuid())
		skip(); /* a child of another uid needs root */
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "65534:300000:65536\n", 19), 19);
	close(fd);
	setenv("BPFTEL_SUBUID", path, 1);
	metrics_peers_init(&peers);
	loopback_pair_as(AF_INET, &srv, &cli, 300123, &child);
	unsetenv("BPFTEL_SUBUID");
	unlink(path);
	err = srv >= 0 ? metrics_peer_of(&peers, srv, &p) : -1;
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	metrics_peers_fini(&peers);
	if (srv < 0)
		skip(); /* no process of that uid could connect here */
	close(srv);
	assert_int_equal(err, 0);
	assert_true(p.by_uid);
	assert_int_equal(p.uid, 65534);
}

/* Each owner holds METRICS_CONNECTIONS_SHARE at most; others are not affected; one
 * given back is taken again. An owner by uid and one by address never mix. */
static void test_shares_per_owner(void **state)
{
	struct metrics_peer a = {.by_uid = true, .uid = 1000}, b = {.by_uid = true, .uid = 1001},
			    ip = {.by_uid = false};
	static struct metrics_peers s;
	int idx[METRICS_CONNECTIONS_SHARE], i, j;

	(void)state;
	ip.addr.s6_addr[15] = 1; /* ::1 */
	for (i = 0; i < (int)METRICS_CONNECTIONS_SHARE; i++) {
		idx[i] = metrics_shares_take(&s, &a);
		assert_true(idx[i] >= 0);
	}
	assert_int_equal(metrics_shares_take(&s, &a), -1);
	for (i = 0; i < (int)METRICS_CONNECTIONS_SHARE; i++) {
		assert_true(metrics_shares_take(&s, &b) >= 0);
		assert_true(metrics_shares_take(&s, &ip) >= 0);
	}
	assert_int_equal(metrics_shares_take(&s, &b), -1);
	assert_int_equal(metrics_shares_take(&s, &ip), -1);
	metrics_shares_give(&s, idx[0]);
	j = metrics_shares_take(&s, &a);
	assert_int_equal(j, idx[0]);
	assert_int_equal(metrics_shares_take(&s, &a), -1);
	/* Given back whole, the slot is free for a new owner. */
	for (i = 0; i < (int)METRICS_CONNECTIONS_SHARE; i++)
		metrics_shares_give(&s, idx[i]);
	metrics_shares_give(&s, idx[0]); /* more than taken: no wrap */
	assert_int_equal(s.held[idx[0]].n, 0);
	metrics_shares_give(&s, -1); /* not shared out: nothing */
	metrics_shares_give(&s, METRICS_CONNECTIONS);
	assert_true(metrics_shares_take(&s, &(struct metrics_peer){.by_uid = true, .uid = 7}) >= 0);
}

/* As many owners as connections: each holds one, and one more owner has no slot. */
static void test_shares_owners_bounded(void **state)
{
	static struct metrics_peers s;
	struct metrics_peer p = {.by_uid = true};
	unsigned int i;

	(void)state;
	for (i = 0; i < METRICS_CONNECTIONS; i++) {
		p.uid = 2000 + i;
		assert_int_equal(metrics_shares_take(&s, &p), (int)i);
	}
	p.uid = 9999;
	assert_int_equal(metrics_shares_take(&s, &p), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_peer_is_the_clients_uid),
		cmocka_unit_test(test_peer_of_a_subuid_is_its_user),
		cmocka_unit_test(test_shares_per_owner),
		cmocka_unit_test(test_shares_owners_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
