// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The shared-libraries watcher in the CLI: `bpftel libs` (the uprobe registry's files,
 * what is attached to each and what was refused) and its part of `bpftel stats` (the
 * watcher's event counters and the libraries it detected).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "user/common/cli_section.h"
#include "user/common/jsonfmt.h"
#include "user/common/table.h"

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
	json_t *events = json_object_get(resp, "events"), *libs = json_object_get(resp, "libraries");
	const char *key;
	json_t *val;
	int first = 1;

	printf("\nEvents:");
	json_object_foreach (events, key, val) {
		if (!json_is_integer(val))
			continue; /* "detected": by libset, below */
		printf("%s %s %lld", first ? "" : ",", key, (long long)json_integer_value(val));
		first = 0;
	}
	json_object_foreach (json_object_get(events, "detected"), key, val)
		printf(", detected %s %lld", key, (long long)json_integer_value(val));
	printf("\n\nLibraries detected (%zu):\n", json_array_size(libs));
	if (json_array_size(libs))
		print_libraries(libs);
	else
		printf("none yet: start a process that loads libssl or libcudart\n");
}

/* "12 (SSL_write:ENOENT,...)" */
static void fmt_failed(char *buf, size_t size, json_t *l)
{
	json_t *fails = json_object_get(l, "failures"), *fl;
	size_t j;
	int off;

	off = snprintf(buf, size, "%lld", jint(l, "failed"));
	json_array_foreach (fails, j, fl) {
		if (off > 0 && (size_t)off < size)
			off += snprintf(buf + off, size - off, "%s%s:%s", j ? "," : " (",
					jstr(fl, "symbol"), jstr(fl, "errno_name"));
	}
	if (json_array_size(fails) && off > 0 && (size_t)off < size - 1)
		strcat(buf, ")");
}

/* What the module's probes on the file saw since attached: "7 (1 stepped)" entries, and
 * returns; "-" for a module that does not count per file (JSON calls: null). The
 * stepped ones paid the costly trap (bpftel stats: trap costs). */
static void fmt_calls(char *entries, size_t esize, char *returns, size_t rsize, json_t *l)
{
	json_t *c = json_object_get(l, "calls");

	if (!json_is_object(c)) {
		snprintf(entries, esize, "-");
		snprintf(returns, rsize, "-");
		return;
	}
	if (jint(c, "single_stepped_entries"))
		snprintf(entries, esize, "%lld (%lld stepped)", jint(c, "entries"),
			 jint(c, "single_stepped_entries"));
	else
		snprintf(entries, esize, "%lld", jint(c, "entries"));
	snprintf(returns, rsize, "%lld", jint(c, "returns"));
}

static void print_files(json_t *libs)
{
	static const char *const hdr[] = {"LIBRARY", "PROCS",   "MODULE",  "UPROBES", "LINKS",
					  "ENTRIES", "RETURNS", "FAILED", "STATE",   "PATH"};
	char procs[24], att[24], links[48], entries[64], returns[24], failed[256];
	struct table *t;
	json_t *l;
	size_t i;

	t = table_new(10, hdr);
	json_array_foreach (libs, i, l) {
		snprintf(procs, sizeof(procs), "%lld", jint(l, "processes"));
		/* Detached for the module's overhead budget (bpftel modules says why). */
		snprintf(att, sizeof(att), "%lld%s", jint(l, "attached"),
			 json_is_true(json_object_get(l, "throttled")) ? " throttled" : "");
		if (json_is_string(json_object_get(l, "link_mode")))
			snprintf(links, sizeof(links), "%lld %s", jint(l, "links"),
				 jstr(l, "link_mode"));
		else
			snprintf(links, sizeof(links), "-");
		fmt_calls(entries, sizeof(entries), returns, sizeof(returns), l);
		fmt_failed(failed, sizeof(failed), l);
		table_add(t, (const char *const[]){jstr(l, "lib"), procs, jstr(l, "module"), att,
						   links, entries, returns, failed,
						   jstr(l, "state"), jstr(l, "path")});
	}
	table_print(t, stdout);
	table_free(t);
}

static void print_refusals(json_t *resp)
{
	static const char *const hdr[] = {"PID", "LIBRARY", "REASON", "TIMES", "DETAIL", "PATH"};
	json_t *counts = json_object_get(resp, "refused"), *recent, *r, *v;
	char pid[24], times[24];
	const char *k;
	struct table *t;
	int first = 1;
	size_t i;

	printf("\nRefused files:");
	json_object_foreach (counts, k, v) {
		if (!json_integer_value(v))
			continue;
		printf("%s %s %lld", first ? "" : ",", k, (long long)json_integer_value(v));
		first = 0;
	}
	if (!first && jint(resp, "refused_cached"))
		printf(" (%lld of them repeats, refused from the cache)",
		       jint(resp, "refused_cached"));
	printf("%s\n", first ? " none" : "");
	recent = json_object_get(resp, "recent_refusals");
	if (!json_array_size(recent))
		return;
	t = table_new(6, hdr);
	json_array_foreach (recent, i, r) {
		snprintf(pid, sizeof(pid), "%lld", jint(r, "pid"));
		snprintf(times, sizeof(times), "%lld", jint(r, "times"));
		table_add(t, (const char *const[]){pid, jstr(r, "lib"), jstr(r, "reason"), times,
						   jstr(r, "detail"), jstr(r, "path")});
	}
	table_print(t, stdout);
	table_free(t);
}

/* The points not attached because another spec's probe, on a function both call,
 * covers them (uprobes.h: shares_callee): why UPROBES is lower than the spec count. */
static void print_folded(json_t *libs)
{
	json_t *l, *fo;
	size_t i, k;
	bool any = false;

	json_array_foreach (libs, i, l) {
		json_array_foreach (json_object_get(l, "folded"), k, fo) {
			if (!any)
				printf("\nFolded (one probe on the function both call):\n");
			any = true;
			printf("  %-10s %-6s %s %s with %s, at file offset 0x%llx\n", jstr(l, "lib"),
			       jstr(l, "module"), jstr(fo, "symbol"),
			       json_is_true(json_object_get(fo, "return")) ? "return" : "entry",
			       jstr(fo, "with"), (unsigned long long)jint(fo, "callee_offset"));
		}
	}
}

/* The points moved to the internal reads their function hands reads to (uprobes.h:
 * typed_read): where a probe on gnutls_record_recv really is. */
static void print_moved(json_t *libs)
{
	json_t *l, *mv, *at;
	size_t i, k, j;
	bool any = false;

	json_array_foreach (libs, i, l) {
		json_array_foreach (json_object_get(l, "tail_reads"), k, mv) {
			if (!any)
				printf("\nTail reads (on the internal reads the function hands its "
				       "reads to, one record type kept):\n");
			any = true;
			printf("  %-10s %-6s %s %s, type %lld, at file offset", jstr(l, "lib"),
			       jstr(l, "module"), jstr(mv, "symbol"),
			       json_is_true(json_object_get(mv, "return")) ? "return" : "entry",
			       jint(mv, "record_type"));
			json_array_foreach (json_object_get(mv, "offsets"), j, at)
				printf("%s 0x%llx", j ? "," : "",
				       (unsigned long long)json_integer_value(at));
			printf("\n");
		}
	}
}

/* Files whose probes went because the file was written in place (uprobes.h). */
static void print_written(json_t *resp)
{
	long long written = jint(resp, "released_modified"), unwatched = jint(resp, "unwatched");

	if (!written && !unwatched)
		return;
	printf("\nWritten in place while probed: %lld (their probes released at once)", written);
	if (unwatched)
		printf("; not watched for writes: %lld (released once unused, no grace)",
		       unwatched);
	printf("\n");
}

/* Opens that waited past their deadline (procfile.h), once any did. */
static void print_timeouts(json_t *resp)
{
	long long n = jint(resp, "open_timeouts"), busy = jint(resp, "opens_not_tried");

	if (!n && !busy)
		return;
	printf("\nOpens past their %lld ms deadline: %lld (still waiting: %lld); not tried "
	       "while too many waited: %lld (%lld of them while %lld of the process's user "
	       "did)\n",
	       jint(resp, "open_timeout_ms"), n, jint(resp, "open_timeouts_waiting"), busy,
	       jint(resp, "opens_not_tried_per_user"), jint(resp, "opens_waiting_per_user_max"));
}

static void print_libs(json_t *resp)
{
	json_t *libs = json_object_get(resp, "libs");

	if (json_array_size(libs)) {
		print_files(libs);
		print_folded(libs);
		print_moved(libs);
	} else {
		printf("No watched library is in use.\n");
	}
	print_written(resp);
	print_refusals(resp);
	print_timeouts(resp);
}

const struct bpftel_cli_section bpftel_sharedlibs_cli = {
	.command = "libs",
	.help = "            library files in use: processes, each module's uprobes and links,\n"
		"            attach failures (symbol, errno), and the files refused (why)\n",
	.print = print_libs,
	.print_stats = print_stats,
};
