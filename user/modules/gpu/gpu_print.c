// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* `bpftel gpu`: one row per process using CUDA (runtime or driver), then its memory by
 * kind, the devices it used, and its CUDA errors. */
#include <stdio.h>

#include "user/common/cli_section.h"
#include "user/common/jsonfmt.h"
#include "user/common/share_print.h"
#include "user/common/table.h"

static void print_errors_of(json_t *procs)
{
	static const char *const hdr[] = {"PID", "FUNCTION", "ERROR", "CODE", "COUNT"};
	struct table *t = NULL;
	char pid[16], code[16], count[24];
	json_t *p, *e;
	size_t i, j;

	json_array_foreach (procs, i, p) {
		json_array_foreach (json_object_get(p, "errors"), j, e) {
			if (!t)
				t = table_new(5, hdr);
			snprintf(pid, sizeof(pid), "%lld", jint(p, "pid"));
			snprintf(code, sizeof(code), "%lld", jint(e, "error"));
			snprintf(count, sizeof(count), "%lld", jint(e, "count"));
			table_add(t, (const char *const[]){pid, jstr(e, "function"),
							   jstr(e, "name"), code, count});
		}
	}
	table_print_section(t, "CUDA errors", stdout);
}

/* Memory kinds a process used: outstanding, peak, and the leak view per kind. */
static void print_kinds_of(json_t *procs)
{
	static const char *const hdr[] = {"PID",  "KIND",	 "ALLOCS", "FREES",
					  "OUTSTANDING", "PEAK", "LEAKS"};
	char pid[16], allocs[24], frees[24], out[24], peak[24], leaks[48], oldest[24];
	struct table *t = NULL;
	const char *kind;
	json_t *p, *k;
	size_t i;

	json_array_foreach (procs, i, p) {
		json_object_foreach (json_object_get(json_object_get(p, "memory"), "kinds"), kind,
				     k) {
			if (!jint(k, "allocs") && !jint(k, "outstanding_bytes"))
				continue;
			if (!t)
				t = table_new(7, hdr);
			snprintf(pid, sizeof(pid), "%lld", jint(p, "pid"));
			snprintf(allocs, sizeof(allocs), "%lld", jint(k, "allocs"));
			snprintf(frees, sizeof(frees), "%lld", jint(k, "frees"));
			fmt_bytes(out, sizeof(out), (double)jint(k, "outstanding_bytes"));
			fmt_bytes(peak, sizeof(peak), (double)jint(k, "peak_bytes"));
			fmt_duration(oldest, sizeof(oldest), jnum(k, "oldest_seconds"));
			if (jint(k, "outstanding_allocs"))
				snprintf(leaks, sizeof(leaks), "%lld (oldest %s)",
					 jint(k, "outstanding_allocs"), oldest);
			else
				snprintf(leaks, sizeof(leaks), "0");
			table_add(t, (const char *const[]){pid, kind, allocs, frees, out, peak,
							   leaks});
		}
	}
	table_print_section(t, "Memory by kind", stdout);
}

/* Copies by direction, every one a process made (the table above shows two). */
static void print_copies_of(json_t *procs)
{
	static const char *const hdr[] = {"PID", "DIRECTION", "BYTES"};
	char pid[16], bytes[24];
	struct table *t = NULL;
	const char *dir;
	json_t *p, *v;
	size_t i;

	json_array_foreach (procs, i, p) {
		json_object_foreach (json_object_get(p, "memcpy_bytes"), dir, v) {
			if (!json_integer_value(v))
				continue;
			if (!t)
				t = table_new(3, hdr);
			snprintf(pid, sizeof(pid), "%lld", jint(p, "pid"));
			fmt_bytes(bytes, sizeof(bytes), (double)json_integer_value(v));
			table_add(t, (const char *const[]){pid, dir, bytes});
		}
	}
	table_print_section(t, "Copies by direction", stdout);
}

static void print_devices_of(json_t *procs)
{
	static const char *const hdr[] = {"PID",    "DEVICE",	   "LAUNCHES",
					  "THREADS", "OUTSTANDING", "ERRORS"};
	char pid[16], launches[24], threads[24], out[24], errors[24];
	struct table *t = NULL;
	json_t *p, *d;
	size_t i, j;

	json_array_foreach (procs, i, p) {
		json_array_foreach (json_object_get(p, "devices"), j, d) {
			if (!t)
				t = table_new(6, hdr);
			snprintf(pid, sizeof(pid), "%lld", jint(p, "pid"));
			snprintf(launches, sizeof(launches), "%lld", jint(d, "launches"));
			snprintf(threads, sizeof(threads), "%lld", jint(d, "threads"));
			fmt_bytes(out, sizeof(out), (double)jint(d, "outstanding_bytes"));
			snprintf(errors, sizeof(errors), "%lld", jint(d, "errors"));
			table_add(t, (const char *const[]){pid, jstr(d, "device"), launches, threads,
							   out, errors});
		}
	}
	table_print_section(t, "Devices", stdout);
}

/* The most launched kernels of each process, with their last grid and block. */
static void print_kernels_of(json_t *procs)
{
	static const char *const hdr[] = {"PID",	"KERNEL", "API", "LAUNCHES",
					  "THREADS", "GRID",	  "BLOCK"};
	char pid[16], launches[24], threads[24], grid[48], block[48];
	struct table *t = NULL;
	json_t *p, *k, *g, *b;
	const char *name;
	size_t i, j;

	json_array_foreach (procs, i, p) {
		json_array_foreach (json_object_get(p, "kernels"), j, k) {
			if (!t)
				t = table_new(7, hdr);
			g = json_object_get(k, "grid");
			b = json_object_get(k, "block");
			name = json_string_value(json_object_get(k, "name"));
			snprintf(pid, sizeof(pid), "%lld", jint(p, "pid"));
			snprintf(launches, sizeof(launches), "%lld", jint(k, "launches"));
			snprintf(threads, sizeof(threads), "%lld", jint(k, "threads"));
			snprintf(grid, sizeof(grid), "%lldx%lldx%lld",
				 json_integer_value(json_array_get(g, 0)),
				 json_integer_value(json_array_get(g, 1)),
				 json_integer_value(json_array_get(g, 2)));
			snprintf(block, sizeof(block), "%lldx%lldx%lld",
				 json_integer_value(json_array_get(b, 0)),
				 json_integer_value(json_array_get(b, 1)),
				 json_integer_value(json_array_get(b, 2)));
			table_add(t, (const char *const[]){pid, name ? name : "(not named)",
							   jstr(k, "api"), launches, threads, grid,
							   block});
		}
	}
	table_print_section(t, "Top kernels", stdout);
}

/* The tables shared out by user, as "shares" in the report names them. */
static const struct bpftel_share_label share_tables[] = {
	{"processes", "processes"},
	{"allocations", "allocations"},
	{"kernel_rows", "kernel rows"},
	{"error_kinds", "error kinds"},
	{"threads", "threads' state"},
	{"calls_in_flight", "calls in flight"},
};

#define NSHARES (sizeof(share_tables) / sizeof(share_tables[0]))

/* Who holds the most of the tables, and what was refused over a user's share. */
static void print_shares(json_t *resp)
{
	json_t *shares = json_object_get(resp, "shares");
	const char *sep = "";
	size_t i;

	bpftel_print_shares(resp, share_tables, NSHARES);
	for (i = 0; i < NSHARES; i++) {
		long long refused = jint(json_object_get(shares, share_tables[i].key), "refused");

		if (!refused)
			continue;
		if (!*sep)
			printf("Refused over a user's share (user_share_percent = %lld):",
			       jint(resp, "user_share_percent"));
		printf("%s %s %lld", sep, share_tables[i].label, refused);
		sep = ",";
	}
	if (!*sep)
		return;
	if (jint(json_object_get(shares, "processes"), "refused"))
		printf(" (processes: calls of processes given no row, not shown)");
	printf("\n");
}

static void print_gpu(json_t *resp)
{
	static const char *const hdr[] = {"PID",  "COMM",	 "LAUNCHES", "GRAPHS",
					  "THREADS", "OUTSTANDING", "PEAK",	   "LEAKS",
					  "HTOD",    "DTOH",	 "SYNC",	   "ERRORS"};
	json_t *procs = json_object_get(resp, "processes"), *p, *mem, *cp;
	char pid[16], launches[24], graphs[24], threads[24], out[24], peak[24], leaks[48],
		htod[24], dtoh[24], sync[24], errors[24], oldest[24];
	long long failed;
	struct table *t;
	const char *k;
	json_t *v;
	size_t i;

	printf("GPU module: %s\n", jstr(resp, "state"));
	if (!json_array_size(procs)) {
		printf("No process is using a watched CUDA runtime or driver.\n");
		print_shares(resp);
		return;
	}
	t = table_new(12, hdr);
	json_array_foreach (procs, i, p) {
		mem = json_object_get(p, "memory");
		cp = json_object_get(p, "memcpy_bytes");
		failed = 0;
		json_object_foreach (json_object_get(p, "failed"), k, v)
			failed += json_integer_value(v);
		snprintf(pid, sizeof(pid), "%lld", jint(p, "pid"));
		snprintf(launches, sizeof(launches), "%lld", jint(p, "launches"));
		snprintf(graphs, sizeof(graphs), "%lld", jint(p, "graph_launches"));
		snprintf(threads, sizeof(threads), "%lld", jint(p, "threads"));
		fmt_bytes(out, sizeof(out), (double)jint(mem, "outstanding_bytes"));
		fmt_bytes(peak, sizeof(peak), (double)jint(mem, "peak_bytes"));
		/* Outstanding allocations and how old the oldest is: the leak view. */
		fmt_duration(oldest, sizeof(oldest), jnum(mem, "oldest_seconds"));
		if (jint(mem, "outstanding_allocs"))
			snprintf(leaks, sizeof(leaks), "%lld (oldest %s)",
				 jint(mem, "outstanding_allocs"), oldest);
		else
			snprintf(leaks, sizeof(leaks), "0");
		fmt_bytes(htod, sizeof(htod), (double)jint(cp, "htod"));
		fmt_bytes(dtoh, sizeof(dtoh), (double)jint(cp, "dtoh"));
		fmt_duration(sync, sizeof(sync), jnum(p, "sync_wait_seconds"));
		snprintf(errors, sizeof(errors), "%lld", failed);
		table_add(t, (const char *const[]){pid, jstr(p, "comm"), launches, graphs, threads,
						   out, peak, leaks, htod, dtoh, sync, errors});
	}
	table_print(t, stdout);
	table_free(t);
	print_kernels_of(procs);
	print_kinds_of(procs);
	print_copies_of(procs);
	print_devices_of(procs);
	print_errors_of(procs);
	print_shares(resp);
}

const struct bpftel_cli_section bpftel_gpu_cli = {
	.command = "gpu",
	.help = "            per process using CUDA (runtime and driver API): kernel launches,\n"
		"            graph launches and threads, device memory outstanding and peak,\n"
		"            allocation ages (leaks), memory by kind (device, async, managed,\n"
		"            pinned_host), launches/memory/errors per device, top kernels by\n"
		"            demangled name (launches, threads, grid x block), memcpy bytes by\n"
		"            direction, sync wait, CUDA errors by function and name (cudaError*,\n"
		"            CUDA_ERROR_*); who holds the most of the module's tables and what\n"
		"            was refused over a user's share (user_share_percent)\n",
	.print = print_gpu,
};
