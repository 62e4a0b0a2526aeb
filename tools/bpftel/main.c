// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * bpftel: the CLI. Sends one request to the agent's control socket and prints the
 * answer as tables, or as the agent's JSON document with --json.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "print.h"
#include "table.h"
#include "user/common/ctl.h"

static const char usage_text[] =
	"Usage: bpftel [--socket PATH] <command> [--json]\n"
	"\n"
	"Query a running bpftel-agent.\n"
	"\n"
	"Commands:\n"
	"  stats     agent uptime; programs: how they attach, runs, average ns per run,\n"
	"            CPU %% of one CPU since load; event counters; map occupancy;\n"
	"            shared libraries detected (pid, library, path)\n"
	"  modules   modules and shared components: state, restarts, subscribers, why\n"
	"            the last start failed\n"
	"  probes    every probe: the attach candidate that won, and why each other one\n"
	"            was rejected (errno and reason)\n"
	"  libs      library files in use: processes, each module's uprobes attached,\n"
	"            and attach failures (symbol, errno)\n"
	"  errors    failed map operations and helper calls in the agent's eBPF code, by\n"
	"            module, program, map or helper, operation and errno\n"
	"  gpu       per process using the CUDA runtime: kernel launches and threads,\n"
	"            device memory outstanding and peak, allocation ages (leaks), memcpy\n"
	"            bytes by direction, sync wait, CUDA errors by function\n"
	"  top       live view, redrawn every second (q quits): per module events/s,\n"
	"            lost/s, errors/s; per program runs/s, average ns, CPU %%. Without a\n"
	"            terminal, or with --json: one sample over one second\n"
	"  module start|stop|restart NAME\n"
	"            drive a module live (gpu, usm); shared components (sharedlibs) run\n"
	"            while a module needs them\n"
	"  http      HTTP endpoints (method, normalized path, status) per process, from\n"
	"            TLS (OpenSSL, GnuTLS) and plaintext packets: count, mean, p50, p99\n"
	"\n"
	"Options:\n"
	"  -s, --socket PATH   agent control socket (default " BPFTEL_CTL_SOCKET_DEFAULT ")\n"
	"  -j, --json          print the agent's answer as one JSON document\n"
	"  -h, --help          this text\n"
	"  -V, --version       print the version and exit\n"
	"\n"
	"Exit status: 0 success, 1 agent unreachable or command failed, 2 usage error.\n"
	"\n"
	"Examples:\n"
	"  bpftel stats\n"
	"  bpftel stats --json | python3 -m json.tool\n"
	"  bpftel probes\n";

struct command {
	const char *name;
	void (*print)(json_t *resp);
	int nargs; /* positional arguments after the command */
};

static void print_programs(json_t *progs)
{
	static const char *const hdr[] = {"PROGRAM", "ID",    "COMPONENT", "RUNS",
					  "AVG NS",  "CPU %", "ATTACH"};
	struct table *t = table_new(7, hdr);
	char id[24], runs[24], avg[24], cpu[24];
	json_t *p;
	size_t i;

	json_array_foreach (progs, i, p) {
		snprintf(id, sizeof(id), "%lld", jint(p, "id"));
		snprintf(runs, sizeof(runs), "%lld", jint(p, "run_cnt"));
		snprintf(avg, sizeof(avg), "%.0f", json_number_value(json_object_get(p, "avg_ns")));
		snprintf(cpu, sizeof(cpu), "%.4f",
			 json_number_value(json_object_get(p, "cpu_percent")));
		table_add(t, (const char *const[]){jstr(p, "name"), id, jstr(p, "component"), runs,
						   avg, cpu, jstr(p, "attach")});
	}
	table_print(t, stdout);
	table_free(t);
}

static void print_maps(json_t *maps)
{
	static const char *const hdr[] = {"MODULE", "MAP", "TYPE", "ENTRIES", "CAPACITY", "USE %"};
	struct table *t = table_new(6, hdr);
	char entries[24], cap[24], use[24];
	json_t *m, *e;
	size_t i;

	json_array_foreach (maps, i, m) {
		e = json_object_get(m, "entries");
		snprintf(cap, sizeof(cap), "%lld", jint(m, "capacity"));
		if (json_is_integer(e)) {
			snprintf(entries, sizeof(entries), "%lld", json_integer_value(e));
			snprintf(use, sizeof(use), "%.1f",
				 jint(m, "capacity")
					 ? 100.0 * json_integer_value(e) / jint(m, "capacity")
					 : 0.0);
		} else {
			snprintf(entries, sizeof(entries), "-");
			snprintf(use, sizeof(use), "-");
		}
		table_add(t, (const char *const[]){jstr(m, "module"), jstr(m, "map"),
						   jstr(m, "type"), entries, cap, use});
	}
	table_print(t, stdout);
	table_free(t);
}

static void print_libraries(json_t *libs)
{
	static const char *const hdr[] = {"PID",   "COMM",    "LIBRARY", "LIBSET",
					  "OPENS", "PROCESS", "PATH"};
	struct table *t = table_new(7, hdr);
	char pid[24], opens[24];
	json_t *l;
	size_t i;

	json_array_foreach (libs, i, l) {
		snprintf(pid, sizeof(pid), "%lld", jint(l, "pid"));
		snprintf(opens, sizeof(opens), "%lld", jint(l, "opens"));
		table_add(t,
			  (const char *const[]){
				  pid, jstr(l, "comm"), jstr(l, "lib"), jstr(l, "libset"), opens,
				  json_is_true(json_object_get(l, "alive")) ? "running" : "exited",
				  jstr(l, "path")});
	}
	table_print(t, stdout);
	table_free(t);
}

static void print_stats(json_t *resp)
{
	json_t *agent = json_object_get(resp, "agent"), *events = json_object_get(resp, "events");
	json_t *progs = json_object_get(resp, "programs"),
	       *libs = json_object_get(resp, "libraries");
	const char *key;
	char up[32];
	json_t *val;
	int first = 1;
	size_t i;

	fmt_duration(up, sizeof(up), json_number_value(json_object_get(agent, "uptime_s")));
	printf("Agent: bpftel-agent %s, pid %lld, up %s", jstr(agent, "version"),
	       jint(agent, "pid"), up);
	if (jint(agent, "links_releasing"))
		printf(", %lld links of stopped modules being detached",
		       jint(agent, "links_releasing"));
	printf("\n\n");
	printf("Programs (%zu):\n", json_array_size(progs));
	print_programs(progs);
	printf("\nEvents:");
	json_object_foreach (events, key, val) {
		if (!json_is_integer(val))
			continue; /* "detected": by libset, below */
		printf("%s %s %lld", first ? "" : ",", key, (long long)json_integer_value(val));
		first = 0;
	}
	json_object_foreach (json_object_get(events, "detected"), key, val)
		printf(", detected %s %lld", key, (long long)json_integer_value(val));
	printf("\n\nEvents lost by stage:");
	json_array_foreach (json_object_get(resp, "losses"), i, val) {
		printf(" %s: kernel %lld, queue_full %lld, too_big %lld, parse %lld (of %lld "
		       "processed);",
		       jstr(val, "module"), jint(val, "kernel"), jint(val, "queue_full"),
		       jint(val, "too_big"), jint(val, "parse"), jint(val, "processed"));
	}
	printf("\n\nMaps:\n");
	print_maps(json_object_get(resp, "maps"));
	printf("\nLibraries detected (%zu):\n", json_array_size(libs));
	if (json_array_size(libs))
		print_libraries(libs);
	else
		printf("none yet: start a process that loads libssl or libcudart\n");
}

static void print_modules(json_t *resp)
{
	static const char *const hdr[] = {"MODULE",	 "STATE",	   "RESTARTS",
					  "SUBSCRIBERS", "START FAILURES", "LAST ERROR"};
	struct table *t = table_new(6, hdr);
	char restarts[24], subs[24], fails[24], last[160];
	json_t *m, *e;
	size_t i;

	json_array_foreach (json_object_get(resp, "modules"), i, m) {
		snprintf(restarts, sizeof(restarts), "%lld", jint(m, "restarts"));
		snprintf(subs, sizeof(subs), "%lld", jint(m, "subscribers"));
		snprintf(fails, sizeof(fails), "%lld", jint(m, "start_failures"));
		e = json_object_get(m, "last_error");
		if (json_is_object(e))
			snprintf(last, sizeof(last), "%s: %s", jstr(e, "step"), jstr(e, "message"));
		else
			snprintf(last, sizeof(last), "-");
		table_add(t, (const char *const[]){jstr(m, "name"), jstr(m, "state"), restarts,
						   subs, fails, last});
	}
	table_print(t, stdout);
	table_free(t);
}

/* One row per candidate; module, probe and policy only on a probe's first row. */
static void print_probes(json_t *resp)
{
	static const char *const hdr[] = {"MODULE", "PROBE", "POLICY", "CANDIDATE", "RESULT"};
	struct table *t = table_new(5, hdr);
	char result[512];
	json_t *p, *c;
	size_t i, j;

	json_array_foreach (json_object_get(resp, "probes"), i, p) {
		json_array_foreach (json_object_get(p, "candidates"), j, c) {
			if (json_object_get(c, "errno"))
				snprintf(result, sizeof(result), "rejected: %s (%s)",
					 jstr(c, "errno_name"), jstr(c, "reason"));
			else if (json_is_string(json_object_get(p, "covered_by")))
				snprintf(result, sizeof(result), "covered by probe '%s'",
					 jstr(p, "covered_by"));
			else
				snprintf(result, sizeof(result), "%s", jstr(c, "result"));
			table_add(t, (const char *const[]){j ? "" : jstr(p, "module"),
							   j ? "" : jstr(p, "probe"),
							   j ? "" : jstr(p, "policy"),
							   jstr(c, "attach"), result});
		}
	}
	table_print(t, stdout);
	table_free(t);
}

/* Non-zero error counters, largest first. */
static int cmp_count(const void *a, const void *b)
{
	long long ca = jint(*(json_t *const *)a, "count"), cb = jint(*(json_t *const *)b, "count");

	return ca < cb ? 1 : ca > cb ? -1 : 0;
}

static void print_errors(json_t *resp)
{
	static const char *const hdr[] = {"MODULE", "PROGRAM", "MAP/HELPER",
					  "OP",	    "ERRNO",   "COUNT"};
	json_t *errs = json_object_get(resp, "errors"), *lost, **rows;
	struct table *t;
	char count[24], err[48];
	size_t i, n = json_array_size(errs);

	lost = json_object_get(resp, "telemetry_lost");
	if (!n) {
		printf("No eBPF map or helper errors.\n");
	} else {
		rows = calloc(n, sizeof(*rows));
		for (i = 0; rows && i < n; i++)
			rows[i] = json_array_get(errs, i);
		if (rows)
			qsort(rows, n, sizeof(*rows), cmp_count);
		t = table_new(6, hdr);
		for (i = 0; rows && i < n; i++) {
			snprintf(count, sizeof(count), "%lld", jint(rows[i], "count"));
			snprintf(err, sizeof(err), "%s (%lld)", jstr(rows[i], "errno_name"),
				 jint(rows[i], "errno"));
			table_add(t, (const char *const[]){jstr(rows[i], "module"),
							   jstr(rows[i], "program"),
							   json_object_get(rows[i], "map")
								   ? jstr(rows[i], "map")
								   : jstr(rows[i], "helper"),
							   jstr(rows[i], "op"), err, count});
		}
		table_print(t, stdout);
		table_free(t);
		free(rows);
	}
	if (jint(lost, "map_errors") || jint(lost, "helper_errors"))
		printf("\nTelemetry could not record %lld map and %lld helper errors (its maps "
		       "were "
		       "full).\n",
		       jint(lost, "map_errors"), jint(lost, "helper_errors"));
}

static void print_libs(json_t *resp)
{
	static const char *const hdr[] = {"LIBRARY", "PROCS",  "MODULE",
					  "UPROBES", "FAILED", "PATH"};
	json_t *libs = json_object_get(resp, "libs"), *l, *fl;
	char procs[24], att[24], failed[256];
	struct table *t;
	size_t i, j;
	int off;

	if (!json_array_size(libs)) {
		printf("No watched library is in use.\n");
		return;
	}
	t = table_new(6, hdr);
	json_array_foreach (libs, i, l) {
		snprintf(procs, sizeof(procs), "%lld", jint(l, "processes"));
		snprintf(att, sizeof(att), "%lld", jint(l, "attached"));
		off = snprintf(failed, sizeof(failed), "%lld", jint(l, "failed"));
		json_array_foreach (json_object_get(l, "failures"), j, fl) {
			if (off > 0 && (size_t)off < sizeof(failed))
				off += snprintf(failed + off, sizeof(failed) - off, "%s%s:%s",
						j ? "," : " (", jstr(fl, "symbol"),
						jstr(fl, "errno_name"));
		}
		if (json_array_size(json_object_get(l, "failures")) && off > 0 &&
		    (size_t)off < sizeof(failed) - 1)
			strcat(failed, ")");
		table_add(t, (const char *const[]){jstr(l, "lib"), procs, jstr(l, "module"), att,
						   failed, jstr(l, "path")});
	}
	table_print(t, stdout);
	table_free(t);
}

static void print_module(json_t *resp)
{
	printf("module %s: %s (restarts %lld)\n", jstr(resp, "module"), jstr(resp, "state"),
	       jint(resp, "restarts"));
}

static const struct command commands[] = {
	{"stats", print_stats},	  {"modules", print_modules},  {"probes", print_probes},
	{"errors", print_errors}, {"libs", print_libs},	       {"gpu", print_gpu},
	{"http", print_http},	  {"module", print_module, 2}, {"top", NULL},
};

static const struct command *find_command(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	}
	return NULL;
}

static int report_connect_error(int err, const char *path, const char *msg)
{
	switch (-err) {
	case ENOENT:
	case ECONNREFUSED:
		fprintf(stderr,
			"bpftel: no agent is running at %s (start one with: bpftel-agent)\n", path);
		break;
	case EACCES:
	case EPERM:
		fprintf(stderr,
			"bpftel: permission denied on %s: the control socket is root-only, run as "
			"root\n",
			path);
		break;
	default:
		fprintf(stderr, "bpftel: %s\n", msg);
	}
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"socket", required_argument, NULL, 's'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{},
	};
	const char *socket_path = BPFTEL_CTL_SOCKET_DEFAULT;
	const struct command *cmd;
	const char *args[2] = {};
	json_t *req, *resp;
	int c, json = 0, err, nargs = 0;
	char errbuf[512];

	while ((c = getopt_long(argc, argv, "+s:jhV", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			socket_path = optarg;
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case 'V':
			printf("bpftel %s\n", BPFTEL_VERSION);
			return 0;
		default:
			fputs(usage_text, stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "bpftel: no command given\n\n%s", usage_text);
		return 2;
	}
	cmd = find_command(argv[optind]);
	if (!cmd) {
		if (!strcmp(argv[optind], "help")) {
			fputs(usage_text, stdout);
			return 0;
		}
		fprintf(stderr, "bpftel: unknown command '%s' (see bpftel --help)\n", argv[optind]);
		return 2;
	}
	for (optind++; optind < argc; optind++) {
		if (!strcmp(argv[optind], "--json") || !strcmp(argv[optind], "-j")) {
			json = 1;
		} else if (!strcmp(argv[optind], "--help") || !strcmp(argv[optind], "-h")) {
			fputs(usage_text, stdout);
			return 0;
		} else if (nargs < cmd->nargs) {
			args[nargs++] = argv[optind];
		} else {
			fprintf(stderr, "bpftel %s: unexpected argument '%s'\n", cmd->name,
				argv[optind]);
			return 2;
		}
	}
	if (nargs < cmd->nargs) {
		fprintf(stderr, "bpftel %s: missing arguments (see bpftel --help)\n", cmd->name);
		return 2;
	}

	if (!strcmp(cmd->name, "top"))
		return bpftel_top(socket_path, json);
	req = json_pack("{s:s}", "cmd", cmd->name);
	if (!strcmp(cmd->name, "module")) {
		if (strcmp(args[0], "start") && strcmp(args[0], "stop") &&
		    strcmp(args[0], "restart")) {
			fprintf(stderr,
				"bpftel module: unknown action '%s' (start, stop, restart)\n",
				args[0]);
			json_decref(req);
			return 2;
		}
		json_object_set_new(req, "action", json_string(args[0]));
		json_object_set_new(req, "name", json_string(args[1]));
	}
	err = bpftel_ctl_call(socket_path, req,
			      strcmp(cmd->name, "module") ? BPFTEL_CTL_TIMEOUT_MS
							  : BPFTEL_CTL_SLOW_TIMEOUT_MS,
			      &resp, errbuf, sizeof(errbuf));
	json_decref(req);
	if (err)
		return report_connect_error(err, socket_path, errbuf);
	if (!json_is_true(json_object_get(resp, "ok"))) {
		fprintf(stderr, "bpftel: agent: %s\n", jstr(resp, "error"));
		json_decref(resp);
		return 1;
	}
	if (json) {
		json_object_del(resp, "ok");
		json_dumpf(resp, stdout, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(9));
		putchar('\n');
	} else {
		cmd->print(resp);
	}
	json_decref(resp);
	return 0;
}
