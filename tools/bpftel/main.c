// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * bpftel: the CLI. Sends one request to the agent's control socket and prints the
 * answer as tables, or as the agent's JSON document with --json.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "user/common/jsonfmt.h"
#include "print.h"
#include "user/common/cli_section.h"
#include "user/common/table.h"
#include "user/common/ctl.h"

/* What modules and shared components show: their commands and their part of stats. */
extern const struct bpftel_cli_section bpftel_sharedlibs_cli, bpftel_gpu_cli, bpftel_usm_cli;
static const struct bpftel_cli_section *const sections[] = {
	&bpftel_sharedlibs_cli,
	&bpftel_gpu_cli,
	&bpftel_usm_cli,
};
#define NSECTIONS (sizeof(sections) / sizeof(sections[0]))

static const char usage_text[] =
	"Usage: bpftel [--socket PATH] [--timeout SECS] <command> [--json]\n"
	"\n"
	"Query a running bpftel-agent.\n"
	"\n"
	"Commands:\n"
	"  stats     agent uptime; programs: how they attach, runs, average ns per run,\n"
	"            CPU % of one CPU since load; event counters; map occupancy;\n"
	"            shared libraries detected (pid, library, path)\n"
	"  modules   modules and shared components: state, restarts, subscribers, why\n"
	"            the last start failed\n"
	"  probes    every probe: the attach candidate that won, and why each other one\n"
	"            was rejected (errno and reason)\n"
	"  errors    failed map operations and helper calls in the agent's eBPF code, by\n"
	"            module, program, map or helper, operation and errno\n"
	"  top       live view, redrawn every second (q quits): per module events/s,\n"
	"            lost/s, errors/s; per program runs/s, average ns, CPU %, and OVHD %\n"
	"            (run time plus the uprobe traps the runs cost). Without a\n"
	"            terminal, or with --json: one sample over one second\n"
	"  module start|stop|restart NAME\n"
	"            drive a module live (gpu, usm); shared components (sharedlibs) run\n"
	"            while a module needs them\n";

static const char usage_tail[] =
	"\n"
	"Options (before or after the command):\n"
	"  -s, --socket PATH   agent control socket (default " BPFTEL_CTL_SOCKET_DEFAULT ")\n"
	"  -j, --json          print the agent's answer as one JSON document\n"
	"  -t, --timeout SECS  how long to wait for the agent's answer, 1 to 3600\n"
	"                      (default 5; bpftel module 120): more on a busy host\n"
	"  -h, --help          this text\n"
	"  -V, --version       print the version and exit\n"
	"\n"
	"Exit status: 0 success, 1 agent unreachable or command failed, 2 usage error.\n"
	"\n"
	"Examples:\n"
	"  bpftel stats\n"
	"  bpftel stats --json | python3 -m json.tool\n"
	"  bpftel probes\n"
	"  bpftel module restart usm\n";

static void usage(FILE *out)
{
	size_t i;

	fputs(usage_text, out);
	for (i = 0; i < NSECTIONS; i++) {
		if (sections[i]->command)
			fprintf(out, "  %-9s %s", sections[i]->command, sections[i]->help + 12);
	}
	fputs(usage_tail, out);
}

struct command {
	const char *name;
	void (*print)(json_t *resp);
	int nargs; /* positional arguments after the command */
};


/* Runs and times: exact, or "~" estimates when run stats are sampled. OVERHEAD S: run
 * time plus, for uprobe programs, the traps (runs x the calibrated cost). */
static void print_programs(json_t *progs)
{
	static const char *const hdr[] = {"PROGRAM", "ID",	   "COMPONENT", "RUNS",
					  "AVG NS",  "CPU %", "OVERHEAD S", "ATTACH"};
	struct table *t = table_new(8, hdr);
	char id[24], runs[24], avg[24], cpu[24], ovh[24];
	const char *est;
	json_t *p, *o;
	size_t i;

	json_array_foreach (progs, i, p) {
		est = json_is_true(json_object_get(p, "sampled")) ? "~" : "";
		o = json_object_get(p, "overhead_seconds");
		snprintf(id, sizeof(id), "%lld", jint(p, "id"));
		snprintf(runs, sizeof(runs), "%s%lld", est, jint(p, "run_cnt"));
		snprintf(avg, sizeof(avg), "%.0f", jnum(p, "avg_ns"));
		snprintf(cpu, sizeof(cpu), "%s%.4f", est, jnum(p, "cpu_percent"));
		if (json_is_number(o))
			snprintf(ovh, sizeof(ovh), "%s%.3f", est, json_number_value(o));
		else
			snprintf(ovh, sizeof(ovh), "unknown");
		table_add(t, (const char *const[]){jstr(p, "name"), id, jstr(p, "component"), runs,
						   avg, cpu, ovh, jstr(p, "attach")});
	}
	table_print(t, stdout);
	table_free(t);
}

/* What a uprobe costs on this host, as calibrated at start. */
static void print_traps(json_t *agent)
{
	json_t *tc = json_object_get(agent, "trap_cost");

	if (json_is_true(json_object_get(tc, "known")))
		printf("Uprobe traps: %.1f us per call at entry (%.1f us on an instruction the "
		       "kernel emulates), %.1f us at return alone, %.1f us for both (calibrated "
		       "at start on %s links, %.0f ms); in OVERHEAD S as runs x trap\n",
		       jnum(tc, "uprobe_ns") / 1e3,
		       json_is_number(json_object_get(tc, "uprobe_emulated_ns"))
			       ? jnum(tc, "uprobe_emulated_ns") / 1e3
			       : jnum(tc, "uprobe_ns") / 1e3,
		       jnum(tc, "uretprobe_ns") / 1e3, jnum(tc, "pair_ns") / 1e3, jstr(tc, "link"),
		       jnum(tc, "took_ms"));
	else
		printf("Uprobe traps: cost unknown (%s): overhead of uprobe programs unknown\n",
		       jstr(tc, "error"));
}

/* One line on how run counts and times are collected. */
static void print_run_stats(json_t *agent)
{
	json_t *rs = json_object_get(agent, "run_stats_detail");
	const char *mode = jstr(agent, "run_stats");

	if (!strcmp(mode, "sampled"))
		printf("Run stats: sampled, on %g s of every %g s (%.1f %% of the time, %lld "
		       "windows): runs and times marked ~ are estimates (run_stats = always "
		       "for exact counts)",
		       jnum(rs, "on_s"), jnum(rs, "period_s"), 100 * jnum(rs, "on_fraction"),
		       jint(rs, "windows"));
	else if (!strcmp(mode, "always"))
		printf("Run stats: always on (exact counts; BPF_ENABLE_STATS costs every BPF "
		       "program on the host two clock reads per run)");
	else
		printf("Run stats: off (counts stay where they were)");
	if (json_is_string(json_object_get(rs, "error")))
		printf("; BPF_ENABLE_STATS refused: %s", jstr(rs, "error"));
	printf("\n");
}

static void print_maps(json_t *maps)
{
	static const char *const hdr[] = {"MODULE",   "MAP",   "TYPE",	"ENTRIES",
					  "CAPACITY", "USE %", "MEMORY KiB"};
	struct table *t = table_new(7, hdr);
	char entries[24], cap[24], use[24], mem[24];
	long long total = 0;
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
		if (json_is_integer(json_object_get(m, "memory_bytes"))) {
			total += jint(m, "memory_bytes");
			snprintf(mem, sizeof(mem), "%.1f", jint(m, "memory_bytes") / 1024.0);
		} else {
			snprintf(mem, sizeof(mem), "-");
		}
		table_add(t, (const char *const[]){jstr(m, "module"), jstr(m, "map"),
						   jstr(m, "type"), entries, cap, use, mem});
	}
	table_print(t, stdout);
	table_free(t);
	/* Not in the agent's resident memory: what it costs the kernel. */
	printf("Maps hold %.1f MiB of kernel memory.\n", total / (1024.0 * 1024.0));
}

static void print_stats(json_t *resp)
{
	json_t *agent = json_object_get(resp, "agent"), *progs = json_object_get(resp, "programs");
	const char *maddr;
	json_t *val;
	char up[32];
	size_t i;

	fmt_duration(up, sizeof(up), json_number_value(json_object_get(agent, "uptime_s")));
	printf("Agent: bpftel-agent %s, pid %lld, up %s", jstr(agent, "version"),
	       jint(agent, "pid"), up);
	maddr = json_string_value(json_object_get(agent, "metrics_addr"));
	if (maddr && *maddr) /* the agent's own: an address it bound, not another's text */
		printf(", metrics at http://%s/metrics", maddr);
	else
		printf(", no metrics endpoint");
	if (jint(agent, "links_releasing"))
		printf(", %lld links of stopped modules being detached",
		       jint(agent, "links_releasing"));
	/* What its own process costs (its maps' kernel memory: under Maps). */
	if (json_is_number(json_object_get(agent, "cpu_seconds")))
		printf("; CPU %.2f s, RSS %.1f MiB",
		       json_number_value(json_object_get(agent, "cpu_seconds")),
		       jint(agent, "rss_bytes") / 1048576.0);
	printf("\n");
	print_run_stats(agent);
	print_traps(agent);
	printf("\n");
	printf("Programs (%zu):\n", json_array_size(progs));
	print_programs(progs);
	printf("\nEvents lost by stage:");
	json_array_foreach (json_object_get(resp, "losses"), i, val) {
		printf(" %s: kernel %lld, queue_full %lld, too_big %lld, parse %lld (of %lld "
		       "processed);",
		       jstr(val, "module"), jint(val, "kernel"), jint(val, "queue_full"),
		       jint(val, "too_big"), jint(val, "parse"), jint(val, "processed"));
	}
	printf("\n\nMaps:\n");
	print_maps(json_object_get(resp, "maps"));
	/* What modules add to stats, each printed by its own section. */
	for (i = 0; i < NSECTIONS; i++) {
		if (sections[i]->print_stats)
			sections[i]->print_stats(resp);
	}
}

/* Self-overhead budgets, and why a throttled module sheds load. */
static void print_budgets(json_t *mods)
{
	json_t *m, *b, *th, *f;
	char since[32];
	struct tm tm;
	time_t when;
	size_t i, k;

	json_array_foreach (mods, i, m) {
		b = json_object_get(m, "budget");
		th = json_object_get(m, "throttled");
		if (!json_is_object(b))
			continue;
		printf("\n%s: budget %.2f %% of one CPU, last window %s%.2f %%, %lld throttle "
		       "episodes",
		       jstr(m, "name"), jnum(b, "max_cpu_percent"),
		       json_is_number(json_object_get(b, "cpu_percent")) ? "" : "(none yet) ",
		       jnum(b, "cpu_percent"), jint(m, "throttle_episodes"));
		if (!json_is_object(th)) {
			printf("\n");
			continue;
		}
		when = (time_t)jint(th, "since");
		/* A time no calendar holds (whatever answered on --socket sent it): "?". */
		if (!localtime_r(&when, &tm) || !strftime(since, sizeof(since), "%H:%M:%S", &tm))
			snprintf(since, sizeof(since), "?");
		printf("\n  throttled since %s: %s\n", since, jstr(th, "reason"));
		json_array_foreach (json_object_get(th, "files"), k, f)
			printf("  shed: %s\n", json_string_value(f) ? json_string_value(f) : "?");
	}
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
	json_array_foreach (json_object_get(resp, "modules"), i, m) {
		size_t k;

		json_array_foreach (json_object_get(m, "stop_errors"), k, e)
			printf("%s: its last stop reported: %s\n", jstr(m, "name"),
			       json_string_value(e) ? json_string_value(e) : "?");
	}
	print_budgets(json_object_get(resp, "modules"));
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
			else if (json_is_string(json_object_get(c, "attached_to")))
				snprintf(result, sizeof(result), "%s (%s)", jstr(c, "result"),
					 jstr(c, "attached_to"));
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

static void print_module(json_t *resp)
{
	printf("module %s: %s (restarts %lld)\n", jstr(resp, "module"), jstr(resp, "state"),
	       jint(resp, "restarts"));
	if (json_is_string(json_object_get(resp, "stop_error")))
		printf("  its stop reported an error: %s (bpftel modules)\n",
		       jstr(resp, "stop_error"));
}

static const struct command commands[] = {
	{"stats", print_stats},	  {"modules", print_modules},  {"probes", print_probes},
	{"errors", print_errors}, {"module", print_module, 2}, {"top", NULL},
};

static const struct command *find_command(const char *name)
{
	static struct command section_cmd;
	size_t i;

	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	}
	for (i = 0; i < NSECTIONS; i++) {
		if (sections[i]->command && !strcmp(sections[i]->command, name)) {
			section_cmd = (struct command){sections[i]->command, sections[i]->print};
			return &section_cmd;
		}
	}
	return NULL;
}

static int report_connect_error(int err, const char *path, const char *msg)
{
	char reason[768];

	bpftel_cli_connect_reason(err, path, msg, reason, sizeof(reason));
	fprintf(stderr, "bpftel: %s\n", reason);
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"socket", required_argument, NULL, 's'},
		{"json", no_argument, NULL, 'j'},
		{"timeout", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{},
	};
	const char *socket_path = BPFTEL_CTL_SOCKET_DEFAULT;
	const struct command *cmd;
	const char *args[2] = {};
	json_t *req, *resp;
	int c, json = 0, err, nargs = 0, timeout_ms = 0;
	char errbuf[512], *end;
	long secs;

	/* A reader that went away (`bpftel http | head -1`): the write fails with EPIPE
	 * and the exit status says so (bpftel_cli_flushed), not a signal's death. */
	signal(SIGPIPE, SIG_IGN);
	/* Options anywhere, before the command or after it (`bpftel stats --socket S`):
	 * getopt puts the others, the command and its arguments, last, in order. */
	while ((c = getopt_long(argc, argv, "s:jt:hV", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			socket_path = optarg;
			break;
		case 't':
			errno = 0;
			secs = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || secs < 1 || secs > 3600) {
				fprintf(stderr, "bpftel: --timeout: '%s' is not a number of "
						"seconds from 1 to 3600\n", optarg);
				return 2;
			}
			timeout_ms = (int)secs * 1000;
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("bpftel %s\n", BPFTEL_VERSION);
			return 0;
		default: /* getopt said which: one line, not the whole usage over it */
			fprintf(stderr, "bpftel: see bpftel --help for the options\n");
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "bpftel: no command given\n\n");
		usage(stderr);
		return 2;
	}
	cmd = find_command(argv[optind]);
	if (!cmd) {
		if (!strcmp(argv[optind], "help")) {
			usage(stdout);
			return 0;
		}
		fprintf(stderr, "bpftel: unknown command '%s' (see bpftel --help)\n", argv[optind]);
		return 2;
	}
	for (optind++; optind < argc; optind++) {
		if (nargs == cmd->nargs) {
			fprintf(stderr, "bpftel %s: unexpected argument '%s'\n", cmd->name,
				argv[optind]);
			return 2;
		}
		args[nargs++] = argv[optind];
	}
	if (nargs < cmd->nargs) {
		if (!strcmp(cmd->name, "module"))
			fprintf(stderr, "bpftel module: needs an action and a module: bpftel module "
					"start|stop|restart NAME (NAME as bpftel modules lists them)\n");
		else
			fprintf(stderr, "bpftel %s: missing arguments (see bpftel --help)\n",
				cmd->name);
		return 2;
	}

	if (!timeout_ms)
		timeout_ms = strcmp(cmd->name, "module") ? BPFTEL_CTL_TIMEOUT_MS
							 : BPFTEL_CTL_SLOW_TIMEOUT_MS;
	if (!strcmp(cmd->name, "top"))
		return bpftel_top(socket_path, json, timeout_ms);
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
		/* A name that is not UTF-8 has no JSON string: said so, not sent without. */
		if (json_object_set_new(req, "name", json_string(args[1]))) {
			fprintf(stderr, "bpftel module: the module name is not valid UTF-8 "
					"(bpftel modules lists them)\n");
			json_decref(req);
			return 2;
		}
	}
	err = bpftel_ctl_call(socket_path, req, timeout_ms, &resp, errbuf, sizeof(errbuf));
	json_decref(req);
	if (err)
		return report_connect_error(err, socket_path, errbuf);
	/* JSON's own encoding escapes C0 controls but not C1 ones nor bidi overrides: what
	 * answered may not be our agent, whose strings this leaves as they are. */
	bpftel_cli_escape_strings(resp);
	if (!json_is_true(json_object_get(resp, "ok"))) {
		fprintf(stderr, "bpftel: agent: %s\n", jstr(resp, "error"));
		json_decref(resp);
		return 1;
	}
	if (json) {
		json_object_del(resp, "ok");
		err = json_dumpf(resp, stdout,
				 JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(9));
		putchar('\n');
	} else {
		cmd->print(resp);
	}
	json_decref(resp);
	return bpftel_cli_flushed(err);
}

