// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * usm.bpf.o's programs, each through its own entry: the socket filter of the
 * production object (loaded by the real USM module, not the harness) run by
 * BPF_PROG_TEST_RUN on crafted packets; the TLS uprobe and uretprobe on the stub
 * libssl.so.3 and libgnutls.so.30 the tests build (tests/usm/), attached by the uprobe
 * registry once the watcher saw tls_pattern open them, the calls made by tls_pattern.
 * Each case asserts the program's effect (records, counters, endpoints), its telemetry
 * key and, where one can be made, an error counted under its name. The last case checks
 * that every program of the object ran.
 *
 * usm_tls_recv runs on the recvfrom(2) of the stub's SSL_read on a session with its own
 * BIO (tls_pattern bio); usm_go_uprobe on tests/go/tlsapp, a Go server and client.
 *
 *   test_bpf_prog_usm TLS_PATTERN STUB_LIBSSL STUB_LIBGNUTLS GO_TLSAPP
 */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <bpf/bpf.h>

#include "prog_common.h"
#include "bpf/fair_share_defs.h" /* before the skeleton: its .bss has its types */
#include "usm.skel.h"

static char *tls_bin, *ssl_lib, *gnutls_lib, *go_app;

static struct prog_case cases[] = {
	{"usm_tls_uprobe", "real uprobe on the stub libssl.so.3 and libgnutls.so.30",
	 "probe_read_user EFAULT (SSL_write_ex of an unmapped buffer)"},
	{"usm_tls_uretprobe", "real uretprobe on the stub libssl.so.3 and libgnutls.so.30",
	 "probe_read_user EFAULT (SSL_read_ex with an unmapped `readbytes`)"},
	{"usm_http_socket", "BPF_PROG_TEST_RUN of the production object on crafted packets",
	 "skb_load_bytes(_relative) EFAULT (truncated packets)"},
	{"usm_tls_recv",
	 "real tracepoint: recvfrom(2) inside the stub SSL_read of a session with its own BIO",
	 NULL,
	 "no fallible call: a task-storage lookup without create, and a store into the "
	 "thread's own slot (the read's return gives the fd to its session)"},
	{"usm_go_uprobe",
	 "real uprobes on tests/go/tlsapp (Go's crypto/tls: entries on the stack check, RETs)",
	 NULL,
	 "its fallible calls read a live Go process's own Conn and buffers, and a map that "
	 "evicts (LRU) rather than fails; test_bpf_usm feeds it broken chains"},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

struct fixture {
	struct prog_env *env;
	struct prog_child child;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	const char *only[] = {ssl_lib, gnutls_lib, NULL};

	f->env = prog_env_new();
	prog_env_only(f->env, only);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	prog_child_stop(&f->child);
	prog_env_free(f->env);
	free(f);
	return 0;
}

static struct bpf_object *usm_obj(struct fixture *f)
{
	return bpftel_module__object(f->env->usm_mod);
}

/* Ethernet, IPv4, TCP 10.0.0.1:40000 -> 10.0.0.2:80, data; the IP length claims
 * `extra` more bytes than there are. Returns the packet's length. */
static size_t packet(unsigned char *b, const char *data, size_t extra)
{
	static const uint8_t client[4] = {10, 0, 0, 1}, server[4] = {10, 0, 0, 2};
	unsigned char *ip = b + 14, *tcp = ip + 20;
	size_t dlen = strlen(data);
	uint16_t v;

	memset(b, 0, 14 + 40 + dlen);
	b[12] = 0x08; /* ETH_P_IP */
	ip[0] = 0x45;
	v = htons((uint16_t)(40 + dlen + extra));
	memcpy(ip + 2, &v, 2);
	ip[8] = 64;
	ip[9] = 6; /* TCP */
	memcpy(ip + 12, client, 4);
	memcpy(ip + 16, server, 4);
	v = htons(40000);
	memcpy(tcp, &v, 2);
	v = htons(80);
	memcpy(tcp + 2, &v, 2);
	tcp[12] = 5 << 4;
	tcp[13] = 0x18; /* PSH ACK */
	memcpy(tcp + 20, data, dlen);
	return 14 + 40 + dlen;
}

/* Run the production socket filter on b; returns the records it emitted. */
static int run_packet(struct fixture *f, struct bpftel_rb_capture *cap, unsigned char *b,
		      size_t len)
{
	struct bpf_program *prog = bpf_object__find_program_by_name(usm_obj(f), "usm_http_socket");
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = b, .data_size_in = (__u32)len);

	assert_int_equal(bpf_prog_test_run_opts(bpf_program__fd(prog), &opts), 0);
	assert_int_equal(opts.retval, 0); /* the socket itself never gets a packet */
	return bpftel_rb_capture__drain(cap);
}

static void test_usm_http_socket_on_packets(void **state)
{
	const char *req = "GET /items/42 HTTP/1.1\r\nHost: a\r\n\r\n";
	struct fixture *f = *state;
	struct bpftel_rb_capture cap;
	const struct usm_event *ev;
	unsigned char b[256];
	int i, counters;

	/* Loaded, not started: no live socket, only the packets this test hands it. */
	assert_int_equal(bpftel_module__open(f->env->usm_mod), 0);
	assert_int_equal(bpftel_module__load(f->env->usm_mod), 0);
	assert_true(prog_rodata_u32(usm_obj(f), "tlm_key_prog_usm_http_socket") > 0);
	counters = bpf_map__fd(bpf_object__find_map_by_name(usm_obj(f), "usm_counters"));
	assert_int_equal(bpftel_rb_capture__open(&cap, bpf_map__fd(bpf_object__find_map_by_name(
							       usm_obj(f), "usm_events"))),
			 0);
	assert_int_equal(run_packet(f, &cap, b, packet(b, req, 0)), 1);
	ev = cap.rec[0].data;
	assert_int_equal(ev->source, USM_SRC_SOCKET);
	assert_int_equal(ev->kind, USM_KIND_REQUEST);
	assert_int_equal(ev->client_port, 40000);
	assert_int_equal(ev->server_port, 80);
	assert_memory_equal(ev->prefix, req, strlen(req));
	assert_int_equal(bpftel_test_percpu_sum(counters, USM_CNT_PACKETS_HTTP), 1);
	prog_ran(cases, NCASES, "usm_http_socket");

	/* Cut inside the TCP header: its load fails, once per packet. */
	for (i = 0; i < 3; i++)
		assert_int_equal(run_packet(f, &cap, b, packet(b, req, 0) - strlen(req) - 10), 0);
	assert_int_equal(prog_errors(f->env, "usm", "usm_http_socket", "skb_load_bytes_relative",
				     "call", EFAULT),
			 3);
	/* The IP length promises 100 bytes more than arrived: the payload load fails. */
	assert_int_equal(run_packet(f, &cap, b, packet(b, "GET /x HTTP/1.1\r\n", 100) - 13), 0);
	assert_int_equal(
		prog_errors(f->env, "usm", "usm_http_socket", "skb_load_bytes", "call", EFAULT), 1);
	assert_int_equal(bpftel_test_percpu_sum(counters, USM_CNT_TRUNCATED), 1);
	prog_error_counted(cases, NCASES, "usm_http_socket");
	bpftel_rb_capture__close(&cap);
}

/* How many requests of pid the module counted as a GET of /items/(number), 200, over TLS. */
static __u64 endpoint_count(struct fixture *f, pid_t pid)
{
	struct usm_endpoint_row *rows;
	__u64 count = 0;
	size_t n, i;

	n = bpftel_usm__rows(f->env->usm, &rows);
	for (i = 0; i < n; i++) {
		if (rows[i].pid == (uint32_t)pid && rows[i].proto == USM_PROTO_HTTPS &&
		    !strcmp(rows[i].method, "GET") && !strcmp(rows[i].path, "/items/*") &&
		    rows[i].status == 200)
			count += rows[i].latency.count;
	}
	free(rows);
	return count;
}

/* tls_pattern LIB MODE [N], once the USM module's nprobes uprobes are on LIB. */
static void start_pattern(struct fixture *f, char *lib, char *mode, char *n, size_t nprobes)
{
	char *argv[] = {tls_bin, lib, mode, n, NULL};

	assert_int_equal(bpftel_module__run(f->env->usm_mod), 0);
	prog_child_start(&f->child, argv);
	if (!WAIT_FOR(prog_attached(f->env, BPFTEL_USM_MODULE, f->child.pid) == nprobes))
		fail_msg("%zu of %zu uprobes attached for pid %d",
			 prog_attached(f->env, BPFTEL_USM_MODULE, f->child.pid), nprobes,
			 (int)f->child.pid);
}

/* One request written and its response read through lib's MODE functions: the write's
 * entry probe emits the request, the read's entry keeps its buffer and its return
 * emits the response; the pair is one GET. */
static void tls_exchange(struct fixture *f, char *lib, char *mode, size_t nprobes)
{
	const char *progs[] = {"usm_tls_uprobe", "usm_tls_uretprobe"};
	__u64 runs[2];
	int i;

	start_pattern(f, lib, mode, NULL, nprobes);
	for (i = 0; i < 2; i++) {
		char var[64];

		snprintf(var, sizeof(var), TLM_KEY_PROG_PREFIX "%s", progs[i]);
		assert_true(prog_rodata_u32(usm_obj(f), var) > 0);
		runs[i] = prog_run_cnt(usm_obj(f), progs[i]);
	}
	prog_child_play(&f->child, NULL, 0);
	if (!WAIT_FOR(endpoint_count(f, f->child.pid) >= 1))
		fail_msg("no GET /items/* 200 of pid %d", (int)f->child.pid);
	assert_int_equal(endpoint_count(f, f->child.pid), 1);
	/* Only this process maps the stubs: two entries (the write, the read) and one
	 * return (the read's: writes have none). */
	for (i = 0; bpftel_telemetry__stats_enabled(f->env->tlm) && i < 2; i++)
		assert_int_equal(prog_run_cnt(usm_obj(f), progs[i]) - runs[i], 2 - i);
	for (i = 0; i < 2; i++)
		prog_ran(cases, NCASES, progs[i]);
}

static void test_usm_tls_ssl_write_read(void **state)
{
	tls_exchange(*state, ssl_lib, "http", 6);
}

static void test_usm_tls_ssl_ex_forms(void **state)
{
	tls_exchange(*state, ssl_lib, "http_ex", 6);
}

static void test_usm_tls_gnutls_send_recv(void **state)
{
	tls_exchange(*state, gnutls_lib, "gnutls", 3);
}

/* The connection of the /items/ row of pid into *conn: 1, or 0 (none). */
static int endpoint_conn(struct fixture *f, pid_t pid, struct usm_conn_addr *conn)
{
	struct usm_endpoint_row *rows;
	int found = 0;
	size_t n, i;

	n = bpftel_usm__rows(f->env->usm, &rows);
	for (i = 0; i < n; i++) {
		if (rows[i].pid == (uint32_t)pid && !strcmp(rows[i].path, "/items/*")) {
			*conn = rows[i].conn;
			found = 1;
		}
	}
	free(rows);
	return found;
}

/*
 * A session with its own BIO (curl's kind: no SSL_set_fd) on a TCP connection: the
 * recvfrom(2) inside its SSL_read gives the session its socket (usm_tls_recv), so
 * the response, and the row, carry the connection's addresses. The request, written
 * before any read, has none.
 */
static void test_usm_tls_recv_bio_session(void **state)
{
	struct fixture *f = *state;
	struct bpftel_usm_counters cnt;
	struct usm_conn_addr conn;
	int fd, cport, sport;
	char out[128];
	__u64 runs;

	start_pattern(f, ssl_lib, "bio", NULL, 6);
	assert_true(prog_rodata_u32(usm_obj(f), TLM_KEY_PROG_PREFIX "usm_tls_recv") > 0);
	runs = prog_run_cnt(usm_obj(f), "usm_tls_recv");
	prog_child_play(&f->child, out, sizeof(out));
	assert_int_equal(sscanf(out, "bio %d %d %d", &fd, &cport, &sport), 3);
	if (!WAIT_FOR(endpoint_count(f, f->child.pid) >= 1))
		fail_msg("no GET /items/* 200 of pid %d", (int)f->child.pid);
	assert_int_equal(endpoint_count(f, f->child.pid), 1);
	assert_true(endpoint_conn(f, f->child.pid, &conn));
	assert_int_equal(conn.family, 4);
	assert_int_equal(conn.client_port, cport);
	assert_int_equal(conn.server_port, sport);
	assert_memory_equal(conn.client_addr, "\x7f\0\0\1", 4);
	assert_memory_equal(conn.server_addr, "\x7f\0\0\1", 4);
	bpftel_usm__counters(f->env->usm, &cnt);
	assert_int_equal(cnt.tls_no_conn, 1); /* the request */
	if (bpftel_telemetry__stats_enabled(f->env->tlm))
		assert_true(prog_run_cnt(usm_obj(f), "usm_tls_recv") > runs);
	prog_ran(cases, NCASES, "usm_tls_recv");
}

/* SSL_read_ex succeeds without storing its count (`readbytes` unmapped): the return
 * probe's read of it fails, counted under usm_tls_uretprobe, once per call. */
static void test_usm_tls_uretprobe_bad_count_counted(void **state)
{
	struct fixture *f = *state;
	char out[128];

	start_pattern(f, ssl_lib, "badlen", "4", 6);
	prog_child_play(&f->child, out, sizeof(out));
	assert_string_equal(out, "read_ex 4 ok 4");
	assert_int_equal(
		prog_errors(f->env, "usm", "usm_tls_uretprobe", "probe_read_user", "call", EFAULT),
		4);
	assert_int_equal(endpoint_count(f, f->child.pid), 0);
	prog_error_counted(cases, NCASES, "usm_tls_uretprobe");
}

/* SSL_write_ex of a buffer the process does not map: the entry probe's peek at it
 * fails, counted under usm_tls_uprobe, once per call; nothing is emitted. */
static void test_usm_tls_uprobe_bad_buffer_counted(void **state)
{
	struct fixture *f = *state;
	char out[128];

	start_pattern(f, ssl_lib, "badbuf", "3", 6);
	prog_child_play(&f->child, out, sizeof(out));
	assert_string_equal(out, "write_ex 3 ok 3");
	assert_int_equal(
		prog_errors(f->env, "usm", "usm_tls_uprobe", "probe_read_user", "call", EFAULT), 3);
	assert_int_equal(endpoint_count(f, f->child.pid), 0);
	prog_error_counted(cases, NCASES, "usm_tls_uprobe");
}

/* A Go program: fork, exec, a pipe each way; its first line read into line. */
static pid_t go_start(int *in, FILE **out, char *const argv[], char *line, size_t len)
{
	int pin[2], pout[2];
	pid_t pid;

	assert_int_equal(pipe2(pin, O_CLOEXEC), 0);
	assert_int_equal(pipe2(pout, O_CLOEXEC), 0);
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(pin[0], STDIN_FILENO);
		dup2(pout[1], STDOUT_FILENO);
		execv(argv[0], argv);
		_exit(127);
	}
	assert_true(pid > 0);
	close(pin[0]);
	close(pout[1]);
	*in = pin[1];
	*out = fdopen(pout[0], "r");
	assert_non_null(*out);
	if (!fgets(line, (int)len, *out))
		fail_msg("%s printed nothing", argv[0]);
	return pid;
}

static void go_stop(pid_t pid, int in, FILE *out)
{
	int status;

	close(in);
	fclose(out);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
}

/* A Go HTTPS server and a Go client, both started after the module (found at exec by
 * the watcher): the client's 3 HTTP/2 GETs counted on both sides, each side's bytes
 * from Go's own crypto/tls, its Write at entry and its Read at its RETs. */
static void test_usm_go_uprobe(void **state)
{
	struct fixture *f = *state;
	char dir[] = "/tmp/bpftel-go-XXXXXX", cmd[512], line[128], url[96], cert[64], key[64];
	char *srv_argv[] = {go_app, "server", "0", cert, key, NULL};
	char *cli_argv[] = {go_app, "client", url, "3", "wait", NULL};
	pid_t srv, cli;
	FILE *sout, *cout;
	int sin, cin, i;
	__u64 runs;

	assert_non_null(mkdtemp(dir));
	snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	snprintf(cmd, sizeof(cmd),
		 "openssl req -x509 -newkey rsa:2048 -nodes -keyout %s -out %s -days 1 "
		 "-subj /CN=localhost >/dev/null 2>&1",
		 key, cert);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(bpftel_module__run(f->env->usm_mod), 0);
	runs = prog_run_cnt(usm_obj(f), "usm_go_uprobe");
	srv = go_start(&sin, &sout, srv_argv, line, sizeof(line));
	assert_int_equal(strncmp(line, "ready ", 6), 0);
	snprintf(url, sizeof(url), "https://127.0.0.1:%d/items/1", atoi(line + 6));
	/* Write, Read, and Read's RETs. */
	if (!WAIT_FOR(prog_attached(f->env, BPFTEL_USM_MODULE, srv) >= 3))
		fail_msg("the Go server's probes: %zu attached",
			 prog_attached(f->env, BPFTEL_USM_MODULE, srv));
	cli = go_start(&cin, &cout, cli_argv, line, sizeof(line));
	assert_string_equal(line, "started\n");
	if (!WAIT_FOR(prog_attached(f->env, BPFTEL_USM_MODULE, cli) >= 3))
		fail_msg("the Go client's probes: %zu attached",
			 prog_attached(f->env, BPFTEL_USM_MODULE, cli));
	assert_int_equal(write(cin, "go\n", 3), 3);
	for (i = 0; i < 3; i++) {
		assert_non_null(fgets(line, sizeof(line), cout));
		assert_string_equal(line, "200 HTTP/2.0\n");
	}
	if (!WAIT_FOR(endpoint_count(f, srv) >= 3 && endpoint_count(f, cli) >= 3))
		fail_msg("Go server %llu, client %llu", (unsigned long long)endpoint_count(f, srv),
			 (unsigned long long)endpoint_count(f, cli));
	assert_int_equal(endpoint_count(f, srv), 3);
	assert_int_equal(endpoint_count(f, cli), 3);
	if (bpftel_telemetry__stats_enabled(f->env->tlm))
		assert_true(prog_run_cnt(usm_obj(f), "usm_go_uprobe") > runs);
	prog_ran(cases, NCASES, "usm_go_uprobe");
	go_stop(cli, cin, cout);
	go_stop(srv, sin, sout);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_keys_assigned_and_distinct(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(bpftel_module__run(f->env->usm_mod), 0);
	assert_int_equal(bpftel_module__run(f->env->gpu_mod), 0);
	assert_int_equal(prog_assert_keys_distinct(f->env),
			 8 + 6 + 5); /* the watcher's programs, the GPU's, the USM's */
}

static void test_every_program_run(void **state)
{
	struct usm *skel = usm__open();

	(void)state;
	assert_non_null(skel);
	prog_coverage("usm.bpf.o", skel->obj, cases, NCASES);
	usm__destroy(skel);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_usm_http_socket_on_packets),
		T(test_usm_tls_ssl_write_read),
		T(test_usm_tls_ssl_ex_forms),
		T(test_usm_tls_gnutls_send_recv),
		T(test_usm_tls_recv_bio_session),
		T(test_usm_tls_uretprobe_bad_count_counted),
		T(test_usm_tls_uprobe_bad_buffer_counted),
		T(test_usm_go_uprobe),
		T(test_keys_assigned_and_distinct),
#undef T
		cmocka_unit_test(test_every_program_run),
	};

	if (argc != 5) {
		fprintf(stderr, "usage: test_bpf_prog_usm TLS_PATTERN STUB_LIBSSL STUB_LIBGNUTLS "
				"GO_TLSAPP\n");
		return 2;
	}
	tls_bin = argv[1];
	ssl_lib = argv[2];
	gnutls_lib = argv[3];
	go_app = argv[4];
	bpftel_test_require_bpf();
	return cmocka_run_group_tests_name("prog_usm", tests, NULL, NULL);
}
