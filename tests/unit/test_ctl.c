// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Control socket: request framing and parsing, and the agent's server driven by a real
 * client over a real Unix socket, including the bad clients it must survive.
 */
#include <errno.h>
#include <pthread.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "user/agent/control.h"
#include "user/common/ctl.h"

static void test_frame_one_line(void **state)
{
	struct bpftel_ctl_frame *f = calloc(1, sizeof(*f));

	(void)state;
	assert_int_equal(bpftel_ctl_frame__feed(f, "{\"cmd\":", 7), BPFTEL_CTL_FRAME_MORE);
	assert_int_equal(bpftel_ctl_frame__feed(f, "\"stats\"}\nextra", 14), BPFTEL_CTL_FRAME_DONE);
	assert_int_equal(f->len, 15);
	assert_memory_equal(f->buf, "{\"cmd\":\"stats\"}", 15);
	free(f);
}

static void test_frame_too_big(void **state)
{
	struct bpftel_ctl_frame *f = calloc(1, sizeof(*f));
	char chunk[1000];
	int i, st = BPFTEL_CTL_FRAME_MORE;

	(void)state;
	memset(chunk, 'x', sizeof(chunk));
	for (i = 0; i < 100 && st == BPFTEL_CTL_FRAME_MORE; i++)
		st = bpftel_ctl_frame__feed(f, chunk, sizeof(chunk));
	assert_int_equal(st, BPFTEL_CTL_FRAME_TOO_BIG);
	assert_true(f->len <= BPFTEL_CTL_REQ_MAX);
	assert_int_equal(i, BPFTEL_CTL_REQ_MAX / 1000 + 1);
	free(f);
}

static void expect_bad_request(const char *text, const char *reason)
{
	char err[256] = "";

	assert_null(bpftel_ctl_parse_request(text, strlen(text), err, sizeof(err)));
	assert_non_null(strstr(err, reason));
}

static void test_parse_request(void **state)
{
	const char *ok = "{\"cmd\": \"stats\", \"x\": 1}";
	char err[256];
	json_t *req;

	(void)state;
	req = bpftel_ctl_parse_request(ok, strlen(ok), err, sizeof(err));
	assert_non_null(req);
	assert_string_equal(json_string_value(json_object_get(req, "cmd")), "stats");
	json_decref(req);

	expect_bad_request("garbage\x01\x02", "malformed request");
	expect_bad_request("", "malformed request");
	expect_bad_request("[1,2]", "expected a JSON object");
	expect_bad_request("{\"x\": 1}", "\"cmd\" must be a non-empty string");
	expect_bad_request("{\"cmd\": 7}", "\"cmd\" must be a non-empty string");
	expect_bad_request("{\"cmd\": \"\"}", "\"cmd\" must be a non-empty string");
	expect_bad_request("{\"cmd\": \"a\", \"cmd\": \"b\"}", "malformed request");
}

static void test_json_str_invalid_utf8(void **state)
{
	json_t *s = bpftel_json_str("py\xff\xfethon");

	(void)state;
	assert_non_null(s);
	assert_string_equal(json_string_value(s), "py??thon");
	json_decref(s);
}

/* ---- server driven by real clients ---- */

struct server_ctx {
	struct bpftel_ctl_server *srv;
	volatile int stop;
	int handled;
	pthread_t thread;
	char path[108];
};

static json_t *echo_handler(struct bpftel_ctl_request *r, void *ctx)
{
	const char *cmd = bpftel_ctl_request__cmd(r);
	json_t *req = bpftel_ctl_request__json(r);
	struct server_ctx *sc = ctx;

	sc->handled++;
	if (!strcmp(cmd, "fail"))
		return bpftel_ctl_error("failed on purpose");
	return json_pack("{s:s, s:O}", "echo", cmd, "req", req);
}

static void *server_loop(void *arg)
{
	struct server_ctx *sc = arg;
	struct pollfd pfd = {.fd = bpftel_ctl_server__fd(sc->srv), .events = POLLIN};

	while (!sc->stop) {
		if (poll(&pfd, 1, 20) > 0)
			bpftel_ctl_server__process(sc->srv);
		bpftel_ctl_server__tick(sc->srv);
	}
	return NULL;
}

static int server_setup(void **state)
{
	struct server_ctx *sc = calloc(1, sizeof(*sc));

	snprintf(sc->path, sizeof(sc->path), "/tmp/bpftel-test-%d/sub/ctl.sock", getpid());
	if (bpftel_ctl_server__new(sc->path, echo_handler, sc, &sc->srv))
		return -1;
	pthread_create(&sc->thread, NULL, server_loop, sc);
	*state = sc;
	return 0;
}

static int server_teardown(void **state)
{
	struct server_ctx *sc = *state;
	char dir[128];

	sc->stop = 1;
	pthread_join(sc->thread, NULL);
	bpftel_ctl_server__free(sc->srv);
	snprintf(dir, sizeof(dir), "/tmp/bpftel-test-%d/sub", getpid());
	rmdir(dir);
	snprintf(dir, sizeof(dir), "/tmp/bpftel-test-%d", getpid());
	rmdir(dir);
	free(sc);
	return 0;
}

static json_t *call(const char *path, const char *cmd)
{
	json_t *req = json_pack("{s:s}", "cmd", cmd), *resp = NULL;
	char err[256];

	assert_int_equal(bpftel_ctl_call(path, req, 2000, &resp, err, sizeof(err)), 0);
	json_decref(req);
	return resp;
}

static int raw_connect(const char *path)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	strcpy(addr.sun_path, path);
	assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	return fd;
}

/* Send raw bytes, shut down writing, read the whole answer. */
static json_t *raw_exchange(const char *path, const char *data, size_t len)
{
	static char buf[4096];
	int fd = raw_connect(path);
	size_t got = 0;
	ssize_t n;

	while (len) {
		n = send(fd, data, len, MSG_NOSIGNAL);
		if (n <= 0)
			break; /* the server may close early on an oversized request */
		data += n;
		len -= n;
	}
	shutdown(fd, SHUT_WR);
	while ((n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0)
		got += n;
	close(fd);
	buf[got] = '\0';
	return json_loads(buf, 0, NULL);
}

static void test_server_answers(void **state)
{
	struct server_ctx *sc = *state;
	struct stat st;
	json_t *resp;

	assert_int_equal(stat(sc->path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_true(S_ISSOCK(st.st_mode));

	resp = call(sc->path, "stats");
	assert_true(json_is_true(json_object_get(resp, "ok")));
	assert_string_equal(json_string_value(json_object_get(resp, "echo")), "stats");
	json_decref(resp);

	resp = call(sc->path, "fail");
	assert_true(json_is_false(json_object_get(resp, "ok")));
	assert_string_equal(json_string_value(json_object_get(resp, "error")), "failed on purpose");
	json_decref(resp);
}

static void test_server_survives_bad_clients(void **state)
{
	struct server_ctx *sc = *state;
	char *big = malloc(BPFTEL_CTL_REQ_MAX + 100);
	int silent = raw_connect(sc->path);
	json_t *resp;

	/* A silent, half-open client holds a slot but blocks nobody. */
	resp = raw_exchange(sc->path, "this is not json\n", 17);
	assert_non_null(resp);
	assert_true(json_is_false(json_object_get(resp, "ok")));
	assert_non_null(strstr(json_string_value(json_object_get(resp, "error")), "malformed"));
	json_decref(resp);

	memset(big, 'a', BPFTEL_CTL_REQ_MAX + 100);
	resp = raw_exchange(sc->path, big, BPFTEL_CTL_REQ_MAX + 100);
	assert_non_null(resp);
	assert_non_null(strstr(json_string_value(json_object_get(resp, "error")), "larger than"));
	json_decref(resp);
	free(big);

	/* Without a newline, closing the write side ends the request. */
	resp = raw_exchange(sc->path, "{\"cmd\":\"ping\"}", 14);
	assert_string_equal(json_string_value(json_object_get(resp, "echo")), "ping");
	json_decref(resp);

	resp = call(sc->path, "stats");
	assert_true(json_is_true(json_object_get(resp, "ok")));
	json_decref(resp);
	close(silent);
}

static void test_second_server_refused(void **state)
{
	struct server_ctx *sc = *state;
	struct bpftel_ctl_server *other;

	assert_int_equal(bpftel_ctl_server__new(sc->path, echo_handler, sc, &other), -EADDRINUSE);
	assert_null(other);
	/* ...and the refused one did not remove the live socket. */
	json_decref(call(sc->path, "ping"));
}

static void test_stale_socket_replaced(void **state)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	struct bpftel_ctl_server *srv;
	char path[64];
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/bpftel-stale-%d.sock", getpid());
	strcpy(addr.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	close(fd); /* bound, never listened: what a killed agent leaves */
	assert_int_equal(bpftel_ctl_server__new(path, echo_handler, NULL, &srv), 0);
	bpftel_ctl_server__free(srv);
	assert_int_equal(access(path, F_OK), -1);
}

static void test_non_socket_not_removed(void **state)
{
	struct bpftel_ctl_server *srv;
	char path[64];
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/bpftel-file-%d.sock", getpid());
	f = fopen(path, "w");
	fputs("precious", f);
	fclose(f);
	assert_int_equal(bpftel_ctl_server__new(path, echo_handler, NULL, &srv), -EEXIST);
	assert_int_equal(access(path, F_OK), 0);
	unlink(path);
}

static void test_client_errors(void **state)
{
	char err[256], longpath[200];
	json_t *req = json_pack("{s:s}", "cmd", "stats"), *resp;

	(void)state;
	assert_int_equal(
		bpftel_ctl_call("/nonexistent/bpftel.sock", req, 500, &resp, err, sizeof(err)),
		-ENOENT);
	assert_null(resp);
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	assert_int_equal(bpftel_ctl_call(longpath, req, 500, &resp, err, sizeof(err)),
			 -ENAMETOOLONG);
	assert_non_null(strstr(err, "longer than"));
	json_decref(req);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frame_one_line),
		cmocka_unit_test(test_frame_too_big),
		cmocka_unit_test(test_parse_request),
		cmocka_unit_test(test_json_str_invalid_utf8),
		cmocka_unit_test_setup_teardown(test_server_answers, server_setup, server_teardown),
		cmocka_unit_test_setup_teardown(test_server_survives_bad_clients, server_setup,
						server_teardown),
		cmocka_unit_test_setup_teardown(test_second_server_refused, server_setup,
						server_teardown),
		cmocka_unit_test(test_stale_socket_replaced),
		cmocka_unit_test(test_non_socket_not_removed),
		cmocka_unit_test(test_client_errors),
	};

	return cmocka_run_group_tests_name("ctl", tests, NULL, NULL);
}
