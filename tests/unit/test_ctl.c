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
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "user/agent/control.h"
#include "user/common/ctl.h"
#include "user/common/log.h"
#include "user/common/escape.h"
#include "user/common/table.h"

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

/* Bytes another process chose, as every surface shows them (user/common/escape.h). */
static void test_json_str_escapes(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"python3", "python3"},
		{"py\xff\xfethon", "py\\xFF\\xFEthon"},	/* not UTF-8 */
		{"/caf\xc3\xa9/x", "/caf\xc3\xa9/x"},	/* UTF-8 stays */
		{"/caf\xe9/x", "/caf\\xE9/x"},		/* Latin-1 does not */
		{"\x1b" "[2Jtop", "\\x1B[2Jtop"},		/* a terminal escape */
		{"a\\b", "a\\\\b"},			/* backslash doubled */
		{"\xc2\x9b" "1m", "\\xC2\\x9B1m"},		/* C1 control (CSI) */
		{"\xed\xa0\x80", "\\xED\\xA0\\x80"},	/* a surrogate */
		{"\xc0\xaf", "\\xC0\\xAF"},		/* overlong '/' */
		{"tab\there", "tab\\x09here"},
		/* Format characters that reorder or hide what follows ("Trojan Source"). */
		{"/x/\xe2\x80\xae" "os.3lssbil", "/x/\\xE2\\x80\\xAEos.3lssbil"}, /* U+202E */
		{"a\xe2\x81\xa6" "b", "a\\xE2\\x81\\xA6b"},			/* U+2066 */
		{"a\xe2\x80\x8f" "b", "a\\xE2\\x80\\x8Fb"},			/* U+200F */
		{"a\xe2\x80\xa8" "b", "a\\xE2\\x80\\xA8b"},			/* U+2028 */
		{"a\xef\xbb\xbf" "b", "a\\xEF\\xBB\\xBFb"},			/* U+FEFF */
		/* Characters that show as nothing: "nginx" beside the real nginx. */
		{"nginx\xe3\x85\xa4", "nginx\\xE3\\x85\\xA4"},		/* U+3164 */
		{"a\xf3\xa0\x80\x81", "a\\xF3\\xA0\\x80\\x81"},	/* U+E0001, a tag */
		{"a\xc2\xad" "b", "a\\xC2\\xADb"},			/* U+00AD */
		{"a\xef\xb8\x8f" "b", "a\\xEF\\xB8\\x8Fb"},		/* U+FE0F */
		{"a\xef\xbf\xb9" "b", "a\\xEF\\xBF\\xB9b"},		/* U+FFF9 */
		{"a\xe2\x80\x90" "b", "a\xe2\x80\x90" "b"}, /* U+2010, a hyphen, stays */
		{"a\xc2\xac" "b", "a\xc2\xac" "b"},	/* U+00AC, the sign before U+00AD */
		{"a\xe3\x85\xa3" "b", "a\xe3\x85\xa3" "b"}, /* U+3163, a Hangul vowel */
	};
	json_t *s;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		s = bpftel_json_str(cases[i].in);
		assert_non_null(s);
		assert_string_equal(json_string_value(s), cases[i].out);
		json_decref(s);
	}
}

/* Tables align by terminal columns: "café" (5 bytes) and "数据" (6 bytes, 4 columns)
 * pad like the ASCII of their width; a combining accent takes none. */
static void test_table_columns(void **state)
{
	static const char *const hdr[] = {"NAME", "NEXT"};
	char *buf = NULL, *line, *save = NULL;
	struct table *t = table_new(2, hdr);
	size_t size = 0, at = 0;
	FILE *f;

	(void)state;
	assert_int_equal(bpftel_columns("caf\xc3\xa9"), 4);
	assert_int_equal(bpftel_columns("\xe6\x95\xb0\xe6\x8d\xae"), 4);
	assert_int_equal(bpftel_columns("e\xcc\x81"), 1);
	assert_int_equal(bpftel_columns("\\xFF"), 4);
	table_add(t, (const char *const[]){"caf\xc3\xa9", "x"});
	table_add(t, (const char *const[]){"cafe", "y"});
	table_add(t, (const char *const[]){"\xe6\x95\xb0\xe6\x8d\xae", "z"});
	table_add(t, (const char *const[]){"e\xcc\x81", "w"});
	f = open_memstream(&buf, &size);
	assert_non_null(f);
	table_print(t, f);
	fclose(f);
	table_free(t);
	/* Every row's second column starts at the header's: column 6 ("NAME" + 2). */
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *last = strrchr(line, ' ');

		assert_non_null(last);
		*last = '\0';
		assert_int_equal(bpftel_columns(line) + 1, 6);
		at++;
	}
	assert_int_equal(at, 5);
	free(buf);
}

/* A cell wider than TABLE_CELL_COLS (an HTTP path of 126 bytes 0xFF: 504 columns
 * escaped) is shown as its start and end around "...", in TABLE_CELL_COLS columns, so
 * that the other rows do not pad to it; no escape is split; what fits is whole. */
static void test_table_cell_elided(void **state)
{
	static const char *const hdr[] = {"PATH", "COUNT"};
	char path[1 + 126 + 4 + 1], *buf = NULL, *line, *save = NULL, *e;
	struct table *t = table_new(2, hdr);
	size_t size = 0, rows = 0;
	FILE *f;

	(void)state;
	path[0] = '/';
	memset(path + 1, 0xff, 126);
	strcpy(path + 127, "/end");
	table_add(t, (const char *const[]){path, "7"});
	table_add(t, (const char *const[]){"/ok", "8"});
	f = open_memstream(&buf, &size);
	assert_non_null(f);
	table_print(t, f);
	fclose(f);
	table_free(t);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save), rows++) {
		/* Every row pads its first cell to the elided one's width, at most the cap. */
		assert_true(bpftel_columns(line) <= TABLE_CELL_COLS + 2 + strlen("COUNT"));
		assert_true(bpftel_columns(line) > TABLE_CELL_COLS - 8);
		if (rows == 1) {
			assert_non_null(strstr(line, "/\\xFF"));
			assert_non_null(strstr(line, "\\xFF...\\xFF"));
			assert_non_null(strstr(line, "\\xFF/end  7"));
		}
	}
	assert_int_equal(rows, 3);
	free(buf);

	e = bpftel_elide_dup("/\\xFF\\xFF\\xFF\\xFF/lib/libssl.so.3", 20);
	assert_non_null(e);
	assert_string_equal(e, "/\\xFF...bssl.so.3"); /* 5 + 3 + 9 columns: escapes whole */
	free(e);
	e = bpftel_elide_dup("abcdefgh", 8);
	assert_string_equal(e, "abcdefgh");
	free(e);
	e = bpftel_elide_dup("abcdefghi", 8);
	assert_string_equal(e, "ab...ghi");
	free(e);
	/* BPFTEL_ESC_BACKSLASH's escaped backslash is not split either. */
	e = bpftel_elide_dup("a\\\\bbbbbbbbbb", 8);
	assert_string_equal(e, "a...bbb");
	free(e);
}

/* A result cut short ends on a whole character or escape, never inside one. */
static void test_escape_cut_whole(void **state)
{
	char out[8];

	(void)state;
	assert_int_equal(bpftel_escape(out, 5, "ab\x1b", 3, 0), 6);
	assert_string_equal(out, "ab"); /* not "ab\\x" */
	assert_int_equal(bpftel_escape(out, 5, "abc\xc3\xa9", 5, 0), 5);
	assert_string_equal(out, "abc"); /* not half of the e acute */
	assert_int_equal(bpftel_escape(out, 3, "a\\", 2, BPFTEL_ESC_BACKSLASH), 3);
	assert_string_equal(out, "a");
	assert_int_equal(bpftel_escape(out, 6, "ab\x1b", 3, 0), 6);
	assert_string_equal(out, "ab"); /* 6 bytes with the NUL: the escape still not */
	assert_int_equal(bpftel_escape(out, 7, "ab\x1b", 3, 0), 6);
	assert_string_equal(out, "ab\\x1B");
}

static char logged[2048];

static void log_capture(enum bpftel_log_level level, const char *msg)
{
	(void)level;
	snprintf(logged, sizeof(logged), "%s", msg);
}

/* The log reads as every other surface: a backslash doubled, so that a path holding
 * the text "\x1B" does not log as one holding an ESC; a message too long for a line
 * is cut on a whole character and says so. */
/* "label: msg" as the ELF readers' refusals write it: the reason whole past a label
 * too long for the buffer (its end kept, after "..."), one line, no UTF-8 split. */
static void test_labeled_keeps_reason(void **state)
{
	static const char msg[] = "Go before 1.17 (go1.16): not supported";
	char label[300], out[128];
	size_t i;

	(void)state;
	bpftel_labeled(out, sizeof(out), "/usr/bin/x", msg);
	assert_string_equal(out, "/usr/bin/x: Go before 1.17 (go1.16): not supported");
	bpftel_labeled(out, sizeof(out), "", msg);
	assert_string_equal(out, msg);
	bpftel_labeled(out, sizeof(out), "a\nb\x1b[31m", "why");
	assert_string_equal(out, "a?b?[31m: why");

	memset(label, 'd', sizeof(label));
	memcpy(label + sizeof(label) - 12, "/go-server", 11); /* ends the string */
	bpftel_labeled(out, sizeof(out), label, msg);
	assert_int_equal(strlen(out), sizeof(out) - 1);
	assert_memory_equal(out, "...ddd", 6);
	assert_non_null(strstr(out, "/go-server: Go before 1.17 (go1.16): not supported"));

	/* A two-byte character where the cut falls: skipped whole, not split. */
	for (i = 0; i + 1 < sizeof(label) - 12; i += 2)
		memcpy(label + i, "\xc3\xa9", 2);
	for (i = 0; i < 2; i++) {
		bpftel_labeled(out, sizeof(out) - i, label, msg);
		assert_memory_equal(out, "...", 3);
		assert_int_equal((unsigned char)out[3] & 0xc0, 0xc0); /* a sequence's start */
		assert_true(strlen(out) < sizeof(out) - i);
	}

	/* A message longer than the buffer: cut, with no label at all. */
	bpftel_labeled(out, 8, label, msg);
	assert_string_equal(out, "Go befo");
}

static void test_log_escapes(void **state)
{
	char ascii_then_e[1100];
	char first[sizeof(logged)];
	json_t *js;

	(void)state;
	bpftel_log_set_callback(log_capture);
	pr_warn("path %s", "a\\x1Bb");
	snprintf(first, sizeof(first), "%s", logged);
	pr_warn("path %s", "a\x1b" "b");
	assert_string_equal(first, "path a\\\\x1Bb");
	assert_string_equal(logged, "path a\\x1Bb");
	memset(ascii_then_e, 'a', 1020);
	memcpy(ascii_then_e + 1020, "\xc3\xa9\xc3\xa9", 5);
	pr_warn("%s", ascii_then_e);
	assert_true(strlen(logged) < 1024);
	assert_non_null(strstr(logged, " [cut]"));
	assert_int_equal(strlen(strstr(logged, " [cut]")), strlen(" [cut]"));
	js = json_string(logged); /* valid UTF-8, or jansson refuses it */
	assert_non_null(js);
	json_decref(js);
	bpftel_log_set_callback(NULL);
}

/* ---- server driven by real clients ---- */

/* Generous: the tests wait on conditions, and must pass on a machine 10x slower. */
#define WAIT_MS 30000

struct server_ctx {
	struct bpftel_ctl_server *srv;
	int stop; /* __atomic: the test thread sets it, the loop reads it */
	int handled;
	bool threaded; /* a loop thread serves; else the test calls __process() itself */
	pthread_t thread;
	char path[108];
	/* Requests the handler deferred, in order, with the "id" each carried. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int ndeferred;
	struct {
		__u64 ticket;
		json_int_t id;
	} deferred[BPFTEL_CTL_MAX_CLIENTS];
};

/* "slow": take a ticket and leave the answer to the test (the agent's worker). */
static void record_deferral(struct server_ctx *sc, struct bpftel_ctl_request *r)
{
	__u64 ticket = bpftel_ctl_request__defer(r);

	assert_true(ticket != 0);
	assert_true(bpftel_ctl_request__defer(r) == ticket);
	pthread_mutex_lock(&sc->lock);
	sc->deferred[sc->ndeferred].ticket = ticket;
	sc->deferred[sc->ndeferred].id =
		json_integer_value(json_object_get(bpftel_ctl_request__json(r), "id"));
	sc->ndeferred++;
	pthread_cond_broadcast(&sc->cond);
	pthread_mutex_unlock(&sc->lock);
}

static json_t *echo_handler(struct bpftel_ctl_request *r, void *ctx)
{
	const char *cmd = bpftel_ctl_request__cmd(r);
	json_t *req = bpftel_ctl_request__json(r);
	struct server_ctx *sc = ctx;

	sc->handled++;
	if (!strcmp(cmd, "fail"))
		return bpftel_ctl_error("failed on purpose");
	if (!strcmp(cmd, "slow")) {
		record_deferral(sc, r);
		return NULL;
	}
	if (!strcmp(cmd, "slow-then-fail")) {
		/* Deferred, then answered after all (say the worker queue was full). */
		record_deferral(sc, r);
		return bpftel_ctl_error("changed its mind");
	}
	return json_pack("{s:s, s:O}", "echo", cmd, "req", req);
}

static void *server_loop(void *arg)
{
	struct server_ctx *sc = arg;
	struct pollfd pfd = {.fd = bpftel_ctl_server__fd(sc->srv), .events = POLLIN};

	while (!__atomic_load_n(&sc->stop, __ATOMIC_ACQUIRE)) {
		if (poll(&pfd, 1, 20) > 0)
			bpftel_ctl_server__process(sc->srv);
		bpftel_ctl_server__tick(sc->srv);
	}
	return NULL;
}

static struct server_ctx *server_start(bool threaded)
{
	struct server_ctx *sc = calloc(1, sizeof(*sc));

	pthread_mutex_init(&sc->lock, NULL);
	pthread_cond_init(&sc->cond, NULL);
	snprintf(sc->path, sizeof(sc->path), "/tmp/bpftel-test-%d/sub/ctl.sock", getpid());
	if (bpftel_ctl_server__new(sc->path, echo_handler, sc, &sc->srv))
		return NULL;
	sc->threaded = threaded;
	if (threaded)
		pthread_create(&sc->thread, NULL, server_loop, sc);
	return sc;
}

static int server_setup(void **state)
{
	*state = server_start(true);
	return *state ? 0 : -1;
}

/* The test thread drives the server: it knows when the server has seen an event. */
static int server_setup_manual(void **state)
{
	*state = server_start(false);
	return *state ? 0 : -1;
}

static int server_teardown(void **state)
{
	struct server_ctx *sc = *state;
	char dir[128];

	if (sc->threaded) {
		__atomic_store_n(&sc->stop, 1, __ATOMIC_RELEASE);
		pthread_join(sc->thread, NULL);
	}
	/* Drops what is still deferred: leaks would show under ASan. */
	bpftel_ctl_server__free(sc->srv);
	pthread_cond_destroy(&sc->cond);
	pthread_mutex_destroy(&sc->lock);
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

	assert_int_equal(bpftel_ctl_call(path, req, WAIT_MS, &resp, err, sizeof(err)), 0);
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

static void send_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void send_line(int fd, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	assert_int_equal(send(fd, line, len, MSG_NOSIGNAL), len);
}

static bool readable(int fd)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	return poll(&pfd, 1, 0) > 0;
}

/* One answer line from a raw client; NULL if none came in WAIT_MS. */
static json_t *recv_answer(int fd)
{
	long long deadline = bpftel_mono_ms() + WAIT_MS;
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	char buf[4096];
	size_t got = 0;
	ssize_t n;

	while (got < sizeof(buf) - 1 && !memchr(buf, '\n', got) && bpftel_mono_ms() < deadline) {
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
		if (n <= 0)
			break;
		got += n;
	}
	buf[got] = '\0';
	return json_loads(buf, 0, NULL);
}

/* Threaded server: wait until the handler has deferred n requests. */
static void wait_deferred(struct server_ctx *sc, int n)
{
	struct timespec until;
	int got;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += WAIT_MS / 1000;
	pthread_mutex_lock(&sc->lock);
	while (sc->ndeferred < n && !pthread_cond_timedwait(&sc->cond, &sc->lock, &until))
		;
	got = sc->ndeferred;
	pthread_mutex_unlock(&sc->lock);
	assert_int_equal(got, n);
}

static __u64 deferred_ticket(struct server_ctx *sc, int i)
{
	__u64 ticket;

	pthread_mutex_lock(&sc->lock);
	ticket = sc->deferred[i].ticket;
	pthread_mutex_unlock(&sc->lock);
	return ticket;
}

/* Manual server: process whatever is ready now (an event is ready once its syscall
 * returned: a connect, a close). A server that never settles fails, not hangs. */
static void pump(struct server_ctx *sc)
{
	struct pollfd pfd = {.fd = bpftel_ctl_server__fd(sc->srv), .events = POLLIN};
	int rounds = 0;

	while (poll(&pfd, 1, 0) > 0 && rounds++ < 1000)
		bpftel_ctl_server__process(sc->srv);
	assert_true(rounds <= 1000);
}

/* Manual server: serve until the handler has deferred n requests. */
static void pump_until_deferred(struct server_ctx *sc, int n)
{
	struct pollfd pfd = {.fd = bpftel_ctl_server__fd(sc->srv), .events = POLLIN};
	long long deadline = bpftel_mono_ms() + WAIT_MS;

	while (sc->ndeferred < n && bpftel_mono_ms() < deadline) {
		if (poll(&pfd, 1, 100) > 0)
			bpftel_ctl_server__process(sc->srv);
	}
	assert_int_equal(sc->ndeferred, n);
}

/* The agent's worker: answers a deferred request once the test lets it. */
struct worker {
	struct bpftel_ctl_server *srv;
	__u64 ticket;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool go;
	int ret;
};

static void *worker_run(void *arg)
{
	struct worker *w = arg;

	pthread_mutex_lock(&w->lock);
	while (!w->go)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
	w->ret = bpftel_ctl_server__complete(w->srv, w->ticket,
					     json_pack("{s:s, s:i}", "done", "slow", "id", 7));
	return NULL;
}

static void test_deferred_answer_from_worker(void **state)
{
	struct server_ctx *sc = *state;
	struct worker w = {.srv = sc->srv, .ret = 1};
	pthread_t thread;
	json_t *resp;
	int slow;

	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	slow = raw_connect(sc->path);
	send_line(slow, "{\"cmd\": \"slow\", \"id\": 7}\n");
	wait_deferred(sc, 1);
	w.ticket = deferred_ticket(sc, 0);
	pthread_create(&thread, NULL, worker_run, &w);

	/* The slow command waits: another client is served meanwhile. */
	resp = call(sc->path, "stats");
	assert_string_equal(json_string_value(json_object_get(resp, "echo")), "stats");
	json_decref(resp);
	assert_false(readable(slow));

	pthread_mutex_lock(&w.lock);
	w.go = true;
	pthread_cond_signal(&w.cond);
	pthread_mutex_unlock(&w.lock);
	resp = recv_answer(slow);
	assert_non_null(resp);
	assert_true(json_is_true(json_object_get(resp, "ok")));
	assert_string_equal(json_string_value(json_object_get(resp, "done")), "slow");
	assert_int_equal(json_integer_value(json_object_get(resp, "id")), 7);
	json_decref(resp);
	pthread_join(thread, NULL);
	assert_int_equal(w.ret, 0);
	close(slow);
	pthread_cond_destroy(&w.cond);
	pthread_mutex_destroy(&w.lock);
}

static void test_deferred_client_hangs_up(void **state)
{
	struct server_ctx *sc = *state;
	int fds[BPFTEL_CTL_MAX_CLIENTS + 1];
	char why[128];
	ssize_t n;
	int i;

	fds[0] = raw_connect(sc->path);
	send_line(fds[0], "{\"cmd\": \"slow\", \"id\": 1}\n");
	pump_until_deferred(sc, 1);
	close(fds[0]);
	pump(sc);
	assert_int_equal(bpftel_ctl_server__complete(sc->srv, sc->deferred[0].ticket,
						     json_pack("{s:i}", "id", 1)),
			 -ENOENT);

	/* Its slot is free again: all of them take a client, and one more is refused. */
	for (i = 0; i <= BPFTEL_CTL_MAX_CLIENTS; i++) {
		fds[i] = raw_connect(sc->path);
		pump(sc);
	}
	for (i = 0; i < BPFTEL_CTL_MAX_CLIENTS; i++)
		assert_false(readable(fds[i]));
	/* Refused, and told why before the close: an answer as any other. */
	assert_true(readable(fds[BPFTEL_CTL_MAX_CLIENTS]));
	n = recv(fds[BPFTEL_CTL_MAX_CLIENTS], why, sizeof(why) - 1, MSG_WAITALL);
	assert_true(n > 0);
	why[n] = '\0';
	assert_string_equal(why, "{\"ok\": false, \"error\": \"the agent serves 64 clients at "
				 "once: try again\"}\n");
	for (i = 0; i <= BPFTEL_CTL_MAX_CLIENTS; i++)
		close(fds[i]);
	pump(sc);
}

/*
 * Out of descriptors with a client waiting: accept() fails (EMFILE) and leaves it in
 * the queue. The server must not stay ready, or its loop wakes at once, for ever
 * (pump() gives up after 1000 rounds); its next tick tries again, and the client is
 * answered once descriptors are free.
 */
static void test_accept_out_of_fds(void **state)
{
	struct server_ctx *sc = *state;
	struct pollfd pfd = {.fd = bpftel_ctl_server__fd(sc->srv), .events = POLLIN};
	int fd = raw_connect(sc->path), fill[256], nfill = 0, i;
	struct pollfd answer = {.fd = fd, .events = POLLIN};
	struct rlimit old, low;
	long long deadline;
	json_t *resp;

	send_line(fd, "{\"cmd\": \"stats\"}\n");
	/* Tried again an hour later: no tick below comes that late, however slow the
	 * machine. */
	bpftel_ctl_server__set_accept_retry_ms(sc->srv, 3600 * 1000);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = (rlim_t)fd + 32;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	while (nfill < 256 && (fill[nfill] = dup(fd)) >= 0)
		nfill++;
	assert_int_equal(errno, EMFILE);
	pump(sc);
	assert_int_equal(poll(&pfd, 1, 0), 0);
	/* The loop ticks after every wake-up: a tick at once does not take the queued
	 * client back, which would wake the loop again at once (a spin). */
	bpftel_ctl_server__tick(sc->srv);
	assert_int_equal(poll(&pfd, 1, 0), 0);

	for (i = 0; i < nfill; i++)
		close(fill[i]);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	/* A tick once the wait is over tries again. */
	bpftel_ctl_server__set_accept_retry_ms(sc->srv, 0);
	deadline = bpftel_mono_ms() + WAIT_MS;
	while (poll(&answer, 1, 10) == 0 && bpftel_mono_ms() < deadline) {
		bpftel_ctl_server__tick(sc->srv);
		pump(sc);
	}
	resp = recv_answer(fd);
	assert_non_null(resp);
	assert_string_equal(json_string_value(json_object_get(resp, "echo")), "stats");
	json_decref(resp);
	close(fd);
	pump(sc);
}

/* Teardown frees a server holding a deferred client and an answer not sent yet: no
 * leak (ASan), and both clients see the connection close. */
static void test_free_drops_deferred(void **state)
{
	struct server_ctx *sc = *state;
	int a = raw_connect(sc->path), b = raw_connect(sc->path);

	send_line(a, "{\"cmd\": \"slow\", \"id\": 1}\n");
	send_line(b, "{\"cmd\": \"slow\", \"id\": 2}\n");
	pump_until_deferred(sc, 2);
	assert_int_equal(bpftel_ctl_server__complete(sc->srv, sc->deferred[0].ticket,
						     json_pack("{s:s}", "big", "answer")),
			 0);
	bpftel_ctl_server__free(sc->srv);
	sc->srv = NULL;
	assert_null(recv_answer(a));
	assert_null(recv_answer(b));
	close(a);
	close(b);
}

static void test_complete_unknown_or_twice(void **state)
{
	struct server_ctx *sc = *state;
	json_t *resp;
	__u64 ticket;
	int fd;

	assert_int_equal(bpftel_ctl_server__complete(sc->srv, 0, json_object()), -ENOENT);
	assert_int_equal(bpftel_ctl_server__complete(sc->srv, 12345, json_object()), -ENOENT);

	fd = raw_connect(sc->path);
	send_line(fd, "{\"cmd\": \"slow\", \"id\": 3}\n");
	wait_deferred(sc, 1);
	ticket = deferred_ticket(sc, 0);
	assert_int_equal(bpftel_ctl_server__complete(sc->srv, ticket, json_pack("{s:i}", "id", 3)),
			 0);
	assert_int_equal(bpftel_ctl_server__complete(sc->srv, ticket, json_pack("{s:i}", "id", 9)),
			 -ENOENT);
	resp = recv_answer(fd);
	assert_non_null(resp);
	assert_int_equal(json_integer_value(json_object_get(resp, "id")), 3);
	json_decref(resp);
	close(fd);

	/* Deferred, then answered by the handler after all: the ticket is void. */
	fd = raw_connect(sc->path);
	send_line(fd, "{\"cmd\": \"slow-then-fail\", \"id\": 4}\n");
	resp = recv_answer(fd);
	assert_non_null(resp);
	assert_string_equal(json_string_value(json_object_get(resp, "error")), "changed its mind");
	json_decref(resp);
	wait_deferred(sc, 2);
	assert_int_equal(
		bpftel_ctl_server__complete(sc->srv, deferred_ticket(sc, 1), json_object()),
		-ENOENT);
	close(fd);
}

#define MANY_DEFERRED 32

static void test_many_deferred_reverse_order(void **state)
{
	struct server_ctx *sc = *state;
	int fds[MANY_DEFERRED], i;
	json_int_t id;
	json_t *resp;

	for (i = 0; i < MANY_DEFERRED; i++) {
		fds[i] = raw_connect(sc->path);
		send_line(fds[i], "{\"cmd\": \"slow\", \"id\": %d}\n", 100 + i);
	}
	wait_deferred(sc, MANY_DEFERRED);
	/* Answer each with the id its request carried, the last deferred first. */
	for (i = MANY_DEFERRED - 1; i >= 0; i--) {
		pthread_mutex_lock(&sc->lock);
		id = sc->deferred[i].id;
		pthread_mutex_unlock(&sc->lock);
		assert_int_equal(bpftel_ctl_server__complete(sc->srv, deferred_ticket(sc, i),
							     json_pack("{s:I}", "id", id)),
				 0);
	}
	for (i = 0; i < MANY_DEFERRED; i++) {
		resp = recv_answer(fds[i]);
		assert_non_null(resp);
		assert_true(json_is_true(json_object_get(resp, "ok")));
		assert_int_equal(json_integer_value(json_object_get(resp, "id")), 100 + i);
		json_decref(resp);
		close(fds[i]);
	}
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

/*
 * Another agent starting: its lock held, its socket bound, not yet listening (a
 * connect() is refused as by a stale socket). A second agent is refused its lock, and
 * the socket stays; once the first has let go, the lock is the next one's and the
 * socket a stale one, replaced.
 */
static void test_starting_agent_not_replaced(void **state)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	struct bpftel_ctl_server *srv;
	char lockfile[sizeof(addr.sun_path) + 8];
	int fd, lock, again;

	(void)state;
	snprintf(addr.sun_path, sizeof(addr.sun_path), "/tmp/bpftel-starting-%d/s.sock",
		 getpid());
	lock = bpftel_ctl_lock(addr.sun_path); /* its directory made */
	assert_true(lock >= 0);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	assert_int_equal(bpftel_ctl_lock(addr.sun_path), -EADDRINUSE);
	assert_int_equal(access(addr.sun_path, F_OK), 0);
	close(lock); /* that agent gone, its socket left behind */
	close(fd);
	again = bpftel_ctl_lock(addr.sun_path);
	assert_true(again >= 0);
	assert_int_equal(bpftel_ctl_server__new(addr.sun_path, echo_handler, NULL, &srv), 0);
	bpftel_ctl_server__free(srv);
	assert_int_equal(access(addr.sun_path, F_OK), -1);
	close(again);
	snprintf(lockfile, sizeof(lockfile), "%s.lock", addr.sun_path);
	assert_int_equal(unlink(lockfile), 0); /* left by the agents, as documented */
	*strrchr(addr.sun_path, '/') = '\0';
	assert_int_equal(rmdir(addr.sun_path), 0);
}

/* The lock is never taken through a symlink: a file the link names is not touched. */
static void test_lock_not_through_symlink(void **state)
{
	char sock[64], lock[80], target[64];
	struct stat st;

	(void)state;
	snprintf(sock, sizeof(sock), "/tmp/bpftel-lnk-%d.sock", getpid());
	snprintf(lock, sizeof(lock), "%s.lock", sock);
	snprintf(target, sizeof(target), "/tmp/bpftel-lnk-%d.target", getpid());
	unlink(target);
	assert_int_equal(symlink(target, lock), 0);
	assert_int_equal(bpftel_ctl_lock(sock), -ELOOP);
	assert_int_equal(lstat(target, &st), -1); /* not made through the link */
	unlink(lock);
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

/* A listening socket at addr that never accepts, its queue filled by the connections
 * in fds (closed by the caller, with the listener it returns). */
static int listen_full(struct sockaddr_un *addr, const char *name, int fds[64], int *n)
{
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(addr->sun_path, sizeof(addr->sun_path), "/tmp/bpftel-test-%s-%d.sock", name,
		 getpid());
	unlink(addr->sun_path);
	assert_int_equal(bind(lfd, (struct sockaddr *)addr, sizeof(*addr)), 0);
	assert_int_equal(listen(lfd, 0), 0);
	for (*n = 0;;) {
		assert_true(*n < 64);
		fds[*n] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (connect(fds[*n], (struct sockaddr *)addr, sizeof(*addr))) {
			assert_int_equal(errno, EAGAIN);
			close(fds[*n]);
			break;
		}
		(*n)++;
	}
	return lfd;
}

/* A live agent that does not accept, its queue full, holds the socket: a second one
 * is refused at once, not stuck in a connect() that waits for ever (the alarm kills
 * the test if it is), and leaves the socket where it is. */
static void test_wedged_server_not_replaced(void **state)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	struct bpftel_ctl_server *srv;
	int fds[64], n, i, lfd;

	(void)state;
	lfd = listen_full(&addr, "wedged", fds, &n);
	alarm(20);
	assert_int_equal(bpftel_ctl_server__new(addr.sun_path, echo_handler, NULL, &srv),
			 -EADDRINUSE);
	alarm(0);
	assert_null(srv);
	assert_int_equal(access(addr.sun_path, F_OK), 0);
	for (i = 0; i < n; i++)
		close(fds[i]);
	close(lfd);
	unlink(addr.sun_path);
}

/* An agent that does not accept (stopped, or out of descriptors) with its listen queue
 * full: a call times out by its deadline, not in a connect() that waits for ever (the
 * alarm kills the test if it does). */
static void test_client_connect_times_out(void **state)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	json_t *req = json_pack("{s:s}", "cmd", "stats"), *resp;
	int fds[64], n, i, lfd;
	char err[256];

	(void)state;
	lfd = listen_full(&addr, "full", fds, &n);
	alarm(20);
	assert_int_equal(bpftel_ctl_call(addr.sun_path, req, 300, &resp, err, sizeof(err)),
			 -ETIMEDOUT);
	alarm(0);
	assert_null(resp);
	assert_non_null(strstr(err, "timed out"));
	for (i = 0; i < n; i++)
		close(fds[i]);
	close(lfd);
	unlink(addr.sun_path);
	json_decref(req);
}

/* A server that refuses its one client as the agent does when full: says why, closes,
 * never reading the request. */
static void *refuse_one(void *arg)
{
	static const char why[] = "{\"ok\": false, \"error\": \"too many\"}\n";
	int lfd = *(int *)arg, fd = accept(lfd, NULL, NULL);

	assert_true(fd >= 0);
	assert_int_equal(send(fd, why, sizeof(why) - 1, MSG_NOSIGNAL), sizeof(why) - 1);
	close(fd);
	return NULL;
}

/* Refused before its request went: a request bigger than the socket's buffer cannot
 * go whole once the server closed (EPIPE), and the answer the server left is read all
 * the same: the user is told why, not "Broken pipe". */
static void test_client_reads_a_refusal(void **state)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	static char big[1 << 20];
	json_t *req, *resp = NULL;
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char err[256] = "";
	pthread_t th;

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	req = json_pack("{s:s, s:s}", "cmd", "stats", "pad", big);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "/tmp/bpftel-test-refuse-%d.sock",
		 getpid());
	unlink(addr.sun_path);
	assert_int_equal(bind(lfd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	assert_int_equal(listen(lfd, 1), 0);
	assert_int_equal(pthread_create(&th, NULL, refuse_one, &lfd), 0);
	alarm(20);
	assert_int_equal(bpftel_ctl_call(addr.sun_path, req, 10000, &resp, err, sizeof(err)), 0);
	alarm(0);
	pthread_join(th, NULL);
	assert_non_null(resp);
	assert_false(json_is_true(json_object_get(resp, "ok")));
	assert_string_equal(json_string_value(json_object_get(resp, "error")), "too many");
	json_decref(resp);
	json_decref(req);
	close(lfd);
	unlink(addr.sun_path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frame_one_line),
		cmocka_unit_test(test_frame_too_big),
		cmocka_unit_test(test_parse_request),
		cmocka_unit_test(test_json_str_escapes),
		cmocka_unit_test(test_escape_cut_whole),
		cmocka_unit_test(test_table_columns),
		cmocka_unit_test(test_table_cell_elided),
		cmocka_unit_test(test_labeled_keeps_reason),
		cmocka_unit_test(test_log_escapes),
		cmocka_unit_test_setup_teardown(test_server_answers, server_setup, server_teardown),
		cmocka_unit_test_setup_teardown(test_server_survives_bad_clients, server_setup,
						server_teardown),
		cmocka_unit_test_setup_teardown(test_second_server_refused, server_setup,
						server_teardown),
		cmocka_unit_test_setup_teardown(test_deferred_answer_from_worker, server_setup,
						server_teardown),
		cmocka_unit_test_setup_teardown(test_deferred_client_hangs_up, server_setup_manual,
						server_teardown),
		cmocka_unit_test_setup_teardown(test_accept_out_of_fds, server_setup_manual,
						server_teardown),
		cmocka_unit_test_setup_teardown(test_free_drops_deferred, server_setup_manual,
						server_teardown),
		cmocka_unit_test_setup_teardown(test_complete_unknown_or_twice, server_setup,
						server_teardown),
		cmocka_unit_test_setup_teardown(test_many_deferred_reverse_order, server_setup,
						server_teardown),
		cmocka_unit_test(test_stale_socket_replaced),
		cmocka_unit_test(test_starting_agent_not_replaced),
		cmocka_unit_test(test_lock_not_through_symlink),
		cmocka_unit_test(test_non_socket_not_removed),
		cmocka_unit_test(test_wedged_server_not_replaced),
		cmocka_unit_test(test_client_errors),
		cmocka_unit_test(test_client_connect_times_out),
		cmocka_unit_test(test_client_reads_a_refusal),
	};

	return cmocka_run_group_tests_name("ctl", tests, NULL, NULL);
}
