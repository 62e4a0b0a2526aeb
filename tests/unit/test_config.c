// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The agent's configuration file parser: values, defaults, and errors with file:line. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "telemetry/telemetry.h"
#include "user/agent/config.h"
#include "user/agent/module_table.h"
#include "user/sharedlibs/sharedlibs.h"

/* Modules by their place in the agent's table. */
#define GPU bpftel_agent_module_index("gpu")
#define USM bpftel_agent_module_index("usm")

static int parse(const char *text, struct bpftel_config *c, char *err)
{
	bpftel_config_defaults(c);
	return bpftel_config_parse("t.conf", text, strlen(text), c, err, 256);
}

static void test_defaults_and_values(void **state)
{
	struct bpftel_config c;
	char err[256] = "";

	(void)state;
	assert_int_equal(parse("", &c, err), 0);
	assert_string_equal(c.metrics_addr, "127.0.0.1:9464");
	assert_true(c.modules[GPU] && c.modules[USM]);
	assert_int_equal(c.libsets, SHLIB_LIBSET_ALL);
	assert_int_equal(c.run_stats, BPFTEL_RUN_STATS_SAMPLED);
	assert_int_equal(c.run_stats_on_s, 1);
	assert_int_equal(c.run_stats_period_s, 10);
	assert_true(c.max_cpu_percent[GPU] == 0 && c.max_cpu_percent[USM] == 0);
	assert_int_equal(c.max_cpu_window_s, 2);
	assert_false(c.gpu_launch_shared_mem);
	assert_false(c.tls_recv_fd);
	assert_int_equal(c.user_share_percent, 25);
	assert_int_equal(parse("user_share_percent = 100\n", &c, err), 0);
	assert_int_equal(c.user_share_percent, 100);
	assert_int_equal(parse("user_share_percent = 1\n", &c, err), 0);
	assert_int_equal(c.user_share_percent, 1);
	assert_int_equal(c.new_files_per_user, 256);
	assert_int_equal(parse("new_files_per_user = 0\n", &c, err), 0);
	assert_int_equal(c.new_files_per_user, 0);
	assert_int_equal(parse("new_files_per_user = 100000\n", &c, err), 0);
	assert_int_equal(c.new_files_per_user, 100000);
	assert_int_equal(parse("tls_recv_fd = on\n", &c, err), 0);
	assert_true(c.tls_recv_fd);
	assert_int_equal(parse("tls_recv_fd = off\n", &c, err), 0);
	assert_false(c.tls_recv_fd);
	assert_int_equal(parse("gpu_launch_shared_mem = on\n", &c, err), 0);
	assert_true(c.gpu_launch_shared_mem);
	assert_int_equal(parse("gpu_launch_shared_mem = on\ngpu_launch_shared_mem = off\n", &c,
			       err),
			 0);
	assert_false(c.gpu_launch_shared_mem);
	assert_int_equal(parse("# comment\n\n  socket = /tmp/a.sock  # trailing\n"
			       "metrics_addr=[::1]:9000\nmodules = usm\nlibsets = gpu\n"
			       "run_stats = off\nworkers = 2\nqueue_len = 4096\nringbuf_kib = 1024",
			       &c, err),
			 0);
	assert_string_equal(c.socket, "/tmp/a.sock");
	assert_string_equal(c.metrics_addr, "[::1]:9000");
	assert_false(c.modules[GPU]);
	assert_true(c.modules[USM]);
	assert_int_equal(c.libsets, SHLIB_LIBSET_BIT(SHLIB_LIBSET_GPU));
	assert_int_equal(c.run_stats, BPFTEL_RUN_STATS_OFF);
	assert_int_equal(c.workers, 2);
	assert_int_equal(c.queue_len, 4096);
	assert_int_equal(c.ringbuf_kib, 1024);
	assert_int_equal(parse("metrics_addr = off\nmodules = none\nlibsets = none\n", &c, err), 0);
	assert_string_equal(c.metrics_addr, "");
	assert_false(c.modules[GPU] || c.modules[USM]);
	assert_int_equal(c.libsets, 0);
	assert_int_equal(parse("modules = gpu, usm\r\n", &c, err), 0); /* CRLF file */
	assert_true(c.modules[GPU] && c.modules[USM]);
	/* A host name is checked as one, not resolved: a reload is read on the control
	 * socket's thread, which must not wait on a name server (this one resolves
	 * nowhere: .invalid, RFC 6761). It is resolved when the endpoint starts. */
	assert_int_equal(parse("metrics_addr = metrics.host.invalid:9464\n", &c, err), 0);
	assert_string_equal(c.metrics_addr, "metrics.host.invalid:9464");
	assert_int_equal(parse("metrics_addr = my_service.invalid.:9464\n", &c, err), 0);
	/* At the slots' cap, in either order. */
	assert_int_equal(parse("workers = 16\nqueue_len = 4096\n", &c, err), 0);
	assert_int_equal(parse("queue_len = 65536\nworkers = 1\n", &c, err), 0);
	/* The values the file ends with count: an appended override makes it fit. */
	assert_int_equal(parse("workers = 64\nqueue_len = 2048\nworkers = 1\n", &c, err), 0);
	assert_int_equal(c.workers, 1);
	assert_int_equal(c.queue_len, 2048);
	assert_int_equal(parse("max_cpu_percent = .5\n", &c, err), 0);
	assert_true(c.max_cpu_percent[0] == 0.5 || c.max_cpu_percent[1] == 0.5);
}

static void test_run_stats_and_budgets(void **state)
{
	struct bpftel_config c;
	char err[256] = "";
	size_t i;

	(void)state;
	assert_int_equal(parse("run_stats = always\nrun_stats_duty = 2/30\n", &c, err), 0);
	assert_int_equal(c.run_stats, BPFTEL_RUN_STATS_ALWAYS);
	assert_int_equal(c.run_stats_on_s, 2);
	assert_int_equal(c.run_stats_period_s, 30);
	assert_int_equal(parse("run_stats = on\n", &c, err), 0); /* what `on` meant before */
	assert_int_equal(c.run_stats, BPFTEL_RUN_STATS_ALWAYS);
	assert_int_equal(parse("run_stats = sampled\n", &c, err), 0);
	assert_int_equal(c.run_stats, BPFTEL_RUN_STATS_SAMPLED);
	assert_int_equal(parse("max_cpu_percent = gpu:5, usm:0.5\nmax_cpu_window = 10\n", &c, err),
			 0);
	assert_true(c.max_cpu_percent[GPU] == 5 && c.max_cpu_percent[USM] == 0.5);
	assert_int_equal(c.max_cpu_window_s, 10);
	assert_int_equal(parse("max_cpu_percent = usm:3\n", &c, err), 0);
	assert_true(c.max_cpu_percent[GPU] == 0 && c.max_cpu_percent[USM] == 3);
	assert_int_equal(parse("max_cpu_percent = 2.5\n", &c, err), 0);
	assert_true(c.max_cpu_percent[GPU] == 2.5 && c.max_cpu_percent[USM] == 2.5);
	for (i = 0; i < bpftel_agent_nmodules; i++) /* shared components have none */
		assert_true(bpftel_agent_modules[i].selectable || c.max_cpu_percent[i] == 0);
	assert_int_equal(parse("max_cpu_percent = 2.5\nmax_cpu_percent = off\n", &c, err), 0);
	assert_true(c.max_cpu_percent[GPU] == 0 && c.max_cpu_percent[USM] == 0);
}

static void test_errors_name_file_and_line(void **state)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
		{"workers = 2\ncolour = blue\n", "t.conf:2: unknown key 'colour'"},
		{"\n\nworkers = 0\n", "t.conf:3: workers: '0' is not 1..64"},
		{"workers = 2x\n", "t.conf:1: workers: '2x' is not 1..64"},
		{"workers = -1\n", "t.conf:1: workers: '-1' is not 1..64"},
		{"queue_len = 99999999999999999999\n", "t.conf:1: queue_len:"},
		{"queue_len = 1000\n", "t.conf:1: queue_len: '1000' is not a power of two in 16..65536"},
		{"workers = 16\n\nqueue_len = 8192\n",
		 "t.conf:3: queue_len: 8192 x workers 16 is over 65536 records"},
		{"queue_len = 65536\nworkers = 2\n",
		 "t.conf:2: workers: 2 x queue_len 65536 is over 65536 records"},
		{"ringbuf_kib = 100\n", "t.conf:1: ringbuf_kib: '100' is not 0 or a power of two"},
		{"run_stats = yes\n", "t.conf:1: run_stats: 'yes' is not always, sampled or off"},
		{"run_stats_duty = 10/10\n", "t.conf:1: run_stats_duty: '10/10' is not ON/PERIOD"},
		{"run_stats_duty = 0/10\n", "t.conf:1: run_stats_duty: '0/10'"},
		{"run_stats_duty = 1/3601\n", "t.conf:1: run_stats_duty: '1/3601'"},
		{"run_stats_duty = 1\n", "t.conf:1: run_stats_duty: '1'"},
		{"max_cpu_percent = gpu:5, nfs:3\n", "t.conf:1: max_cpu_percent: 'nfs:3' is not"},
		{"max_cpu_percent = gpu:0\n", "t.conf:1: max_cpu_percent: 'gpu:0'"},
		{"max_cpu_percent = -1\n", "t.conf:1: max_cpu_percent: '-1'"},
		{"max_cpu_percent = sharedlibs:1\n", "t.conf:1: max_cpu_percent: 'sharedlibs:1'"},
		{"max_cpu_window = 0\n", "t.conf:1: max_cpu_window: '0' is not 1..60"},
		{"modules = gpu, nfs\n", "t.conf:1: modules: unknown module 'nfs' (gpu, usm, none)"},
		{"modules = sharedlibs\n", "t.conf:1: modules: unknown module 'sharedlibs'"},
		{"uprobe_grace = 3601\n", "t.conf:1: uprobe_grace: '3601' is not 0..3600"},
		{"new_files_per_user = 100001\n",
		 "t.conf:1: new_files_per_user: '100001' is not 0..100000"},
		{"new_files_per_user = -1\n", "t.conf:1: new_files_per_user: '-1' is not 0..100000"},
		{"libsets = crypto,,x\n", "t.conf:1: libsets: unknown libset"},
		/* An empty element is no "none": a stray comma must not turn all off. */
		{"modules = ,\n", "t.conf:1: modules: unknown module ''"},
		{"modules = gpu,,usm\n", "t.conf:1: modules: unknown module ''"},
		{"libsets = ,\n", "t.conf:1: libsets: unknown libset"},
		{"max_cpu_percent = ,\n", "t.conf:1: max_cpu_percent: '' is not"},
		{"max_cpu_percent = gpu:1,\n", "t.conf:1: max_cpu_percent: '' is not"},
		/* strtod's forms are no percentage. */
		{"max_cpu_percent = 0x10\n", "t.conf:1: max_cpu_percent: '0x10'"},
		{"max_cpu_percent = gpu:1e2\n", "t.conf:1: max_cpu_percent: 'gpu:1e2'"},
		{"max_cpu_percent = .\n", "t.conf:1: max_cpu_percent: '.'"},
		{"metrics_addr = 9464\n", "t.conf:1: metrics_addr: '9464' is not HOST:PORT"},
		{"metrics_addr = 127.0.0.1:http\n", "t.conf:1: metrics_addr:"},
		{"metrics_addr = host:70000\n", "t.conf:1: metrics_addr:"},
		{"metrics_addr = bad_host!:9464\n", "t.conf:1: metrics_addr:"},
		{"metrics_addr = -lead.example:9464\n", "t.conf:1: metrics_addr:"},
		{"metrics_addr = a..b:9464\n", "t.conf:1: metrics_addr:"},
		{"socket = relative.sock\n",
		 "t.conf:1: socket: 'relative.sock' is not an absolute"},
		{"just some words\n", "t.conf:1: expected 'key = value'"},
		{"= value\n", "t.conf:1: expected 'key = value'"},
		{"workers =\n", "t.conf:1: expected 'key = value'"},
		{"gpu_launch_shared_mem = 1\n",
		 "t.conf:1: gpu_launch_shared_mem: '1' is not on or off"},
		{"tls_recv_fd = yes\n", "t.conf:1: tls_recv_fd: 'yes' is not on or off"},
		{"user_share_percent = 0\n",
		 "t.conf:1: user_share_percent: '0' is not 1..100 (100: no bound)"},
		{"user_share_percent = 101\n", "t.conf:1: user_share_percent: '101' is not 1..100"},
		{"user_share_percent = 25%\n", "t.conf:1: user_share_percent: '25%' is not 1..100"},
	};
	struct bpftel_config c;
	char err[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = '\0';
		assert_int_equal(parse(cases[i].text, &c, err), -EINVAL);
		if (strncmp(err, cases[i].want, strlen(cases[i].want)))
			fail_msg("'%s': got '%s', want '%s...'", cases[i].text, err, cases[i].want);
	}
}

/* A file that fails leaves the configuration as it was: all or nothing. */
static void test_all_or_nothing(void **state)
{
	struct bpftel_config c;
	char err[256], line[1100];

	(void)state;
	bpftel_config_defaults(&c);
	assert_int_equal(
		bpftel_config_parse("t.conf", "workers = 7\nbogus = 1\n", 22, &c, err, sizeof(err)),
		-EINVAL);
	assert_int_equal(c.workers, 1);
	/* Lines too long, and NUL bytes, are errors too. */
	memset(line, 'a', sizeof(line));
	assert_int_equal(bpftel_config_parse("t.conf", line, sizeof(line), &c, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "t.conf:1: line longer than"));
	assert_int_equal(
		bpftel_config_parse("t.conf", "workers = 2\0x\n", 14, &c, err, sizeof(err)),
		-EINVAL);
	assert_non_null(strstr(err, "NUL byte"));
}

static void test_load_file(void **state)
{
	char path[] = "/tmp/bpftel-conf-XXXXXX", err[256];
	struct bpftel_config c;
	FILE *f;
	int fd;

	(void)state;
	assert_int_equal(bpftel_config_load("/nonexistent/bpftel.conf", &c, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/bpftel.conf"));
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs("modules = gpu\n", f);
	fclose(f);
	assert_int_equal(bpftel_config_load(path, &c, err, sizeof(err)), 0);
	assert_true(c.modules[GPU] && !c.modules[USM]);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults_and_values),
		cmocka_unit_test(test_run_stats_and_budgets),
		cmocka_unit_test(test_errors_name_file_and_line),
		cmocka_unit_test(test_all_or_nothing),
		cmocka_unit_test(test_load_file),
	};

	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
