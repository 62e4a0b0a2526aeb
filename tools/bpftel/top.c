// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * `bpftel top`: a live view of the agent, redrawn every second until `q`. Rates are the
 * differences between two samples of the agent's counters (stats and errors), so the
 * agent keeps no state for it. Fits the terminal: programs beyond the last row are
 * left out, longest-running first shown. Without a terminal (or with --json) it
 * prints one sample, taken over one interval, and exits.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "user/common/jsonfmt.h"
#include "print.h"
#include "user/common/table.h"
#include "user/common/ctl.h"

#define INTERVAL_MS 1000

struct sample {
	json_t *stats, *errors;
	double t; /* CLOCK_MONOTONIC seconds */
};

static struct termios saved_tio;
static bool tio_saved;
static volatile sig_atomic_t cursor_hidden;

/* Also from a signal handler: tcsetattr and write(2) only. Not stdio: the handler's
 * default action ends the process without flushing it (the cursor stayed hidden after
 * Ctrl-C), and a signal may land inside a printf of draw(). */
static void restore_terminal(void)
{
	if (tio_saved)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
	if (cursor_hidden) {
		cursor_hidden = 0;
		if (write(STDOUT_FILENO, "\033[?25h", 6) < 0) /* cursor back */
			return;
	}
}

static struct termios raw_tio;

/* Hidden while redrawing, by write(2) as it is shown again (restore_terminal); marked
 * first, so that a signal during the write shows it again. Also from SIGCONT's handler. */
static void hide_cursor(void)
{
	cursor_hidden = 1;
	if (write(STDOUT_FILENO, "\033[?25l", 6) != 6)
		cursor_hidden = 0;
}

static void on_signal(int sig)
{
	restore_terminal();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Ctrl-Z: the shell gets its terminal as it was (echo, line mode, the cursor); on
 * `fg`, top takes it again as it had it. */
static void on_stop(int sig)
{
	int saved = errno;
	sigset_t set;

	restore_terminal();
	signal(sig, SIG_DFL);
	/* Blocked while its handler runs: unblocked, it stops the process here, until
	 * SIGCONT (whose handler takes the terminal back). */
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
	signal(sig, on_stop);
	errno = saved;
}

/* A shell's fg may set the terminal's modes as they were when top stopped (the line
 * mode it restored itself) after top's SIGCONT handler set its own: checked again
 * between keys, so that a bare q still quits. */
static void keep_raw(void)
{
	struct termios now;

	if (tio_saved && !tcgetattr(STDIN_FILENO, &now) &&
	    (now.c_lflag & (ICANON | ECHO)) != (raw_tio.c_lflag & (ICANON | ECHO)))
		tcsetattr(STDIN_FILENO, TCSANOW, &raw_tio);
}

static void on_cont(int sig)
{
	int saved = errno;

	(void)sig;
	if (tio_saved)
		tcsetattr(STDIN_FILENO, TCSANOW, &raw_tio);
	hide_cursor();
	errno = saved;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* How long a call waits for the answer: --timeout, set once by bpftel_top(). */
static int call_timeout_ms = BPFTEL_CTL_TIMEOUT_MS;

/* The agent's answer to cmd, or NULL with why in err (escaped: it may quote the
 * answer of whatever listens at sock). */
static json_t *call(const char *sock, const char *cmd, char *err, size_t size)
{
	json_t *req = json_pack("{s:s}", "cmd", cmd), *resp = NULL;
	int e;

	e = bpftel_ctl_call(sock, req, call_timeout_ms, &resp, err, size);
	json_decref(req);
	if (e) {
		char msg[256];

		snprintf(msg, sizeof(msg), "%s", err);
		bpftel_cli_connect_reason(e, sock, msg, err, size);
		return NULL;
	}
	if (!json_is_true(json_object_get(resp, "ok"))) {
		bpftel_cli_escape_strings(resp);
		snprintf(err, size, "agent: %s", jstr(resp, "error"));
		json_decref(resp);
		return NULL;
	}
	bpftel_cli_escape_strings(resp);
	return resp;
}

/* A sample, or -1 with why in err (the sample dropped). */
static int take(const char *sock, struct sample *s, char *err, size_t size)
{
	s->stats = call(sock, "stats", err, size);
	s->errors = s->stats ? call(sock, "errors", err, size) : NULL;
	s->t = now_s();
	if (s->stats && s->errors)
		return 0;
	json_decref(s->stats);
	s->stats = NULL;
	return -1;
}

static void drop(struct sample *s)
{
	json_decref(s->stats);
	json_decref(s->errors);
	s->stats = s->errors = NULL;
}

static json_t *find_prog(json_t *progs, json_int_t id)
{
	json_t *p;
	size_t i;

	json_array_foreach (progs, i, p) {
		if (json_integer_value(json_object_get(p, "id")) == id)
			return p;
	}
	return NULL;
}

static double module_sum(json_t *arr, const char *module, const char *key, const char **keys)
{
	double sum = 0;
	json_t *o;
	size_t i, k;

	json_array_foreach (arr, i, o) {
		if (strcmp(jstr(o, "module"), module))
			continue;
		if (key)
			sum += jnum(o, key) + jint(o, key);
		for (k = 0; keys && keys[k]; k++)
			sum += jint(o, keys[k]);
	}
	return sum;
}

struct prog_rate {
	const char *name, *module;
	double runs_s, avg_ns, cpu, overhead; /* overhead < 0: unknown */
};

/* Costliest first: overhead (traps included) where known, else run time. */
static int cmp_cost(const void *a, const void *b)
{
	const struct prog_rate *x = a, *y = b;
	double cx = x->overhead >= 0 ? x->overhead : x->cpu;
	double cy = y->overhead >= 0 ? y->overhead : y->cpu;

	return cx < cy ? 1 : cx > cy ? -1 : strcmp(x->name, y->name);
}

/*
 * A program's rates: between the two samples when counts are exact; with sampled run
 * stats the counts only move when a window closes, so the last window's own rates,
 * with how old they are.
 */
static json_t *program_rate(const struct sample *a, json_t *p, double dt, bool sampled)
{
	json_t *q, *w = json_object_get(p, "window"), *trap = json_object_get(p, "trap_cost_ns");
	double druns, dtime;

	if (sampled)
		return json_pack("{s:s, s:s, s:f, s:f, s:f, s:O, s:o}", "program", jstr(p, "name"),
				 "module", jstr(p, "component"), "runs_per_s",
				 jnum(w, "runs_per_s"), "avg_ns", jnum(w, "avg_ns"), "cpu_percent",
				 jnum(w, "cpu_percent"), "overhead_percent",
				 /* no window yet: not known (s:O takes its own reference) */
				 json_is_object(w) && json_object_get(w, "overhead_percent")
					 ? json_object_get(w, "overhead_percent")
					 : json_null(),
				 "window_age_s",
				 json_is_object(w) ? json_real(jnum(w, "age_s")) : json_null());
	q = find_prog(json_object_get(a->stats, "programs"), jint(p, "id"));
	druns = q ? jint(p, "run_cnt") - jint(q, "run_cnt") : 0;
	dtime = q ? jint(p, "run_time_ns") - jint(q, "run_time_ns") : 0;
	/* Run time, plus each run's trap for uprobe programs (null: trap cost unknown). */
	return json_pack("{s:s, s:s, s:f, s:f, s:f, s:o}", "program", jstr(p, "name"), "module",
			 jstr(p, "component"), "runs_per_s", druns / dt, "avg_ns",
			 druns > 0 ? dtime / druns : 0.0, "cpu_percent", dtime / 1e9 / dt * 100,
			 "overhead_percent",
			 json_is_string(json_object_get(p, "trap")) && !json_is_number(trap)
				 ? json_null()
				 : json_real((dtime + druns * json_number_value(trap)) / 1e9 / dt *
					     100));
}

/* What a counter grew by between two samples. One that went down began again from 0
 * (the agent restarted between them; a module's restart keeps its counts): the new
 * value is what it counted since, as Prometheus' rate() takes a reset. */
static double grown(double before, double after)
{
	return after >= before ? after - before : after;
}

/* The agent's own cost: its CPU between the samples (% of one CPU; null when either
 * sample lacks it, or they are of two agent processes), its resident memory and its
 * maps' kernel memory at the second. */
static json_t *agent_cost(const struct sample *a, const struct sample *b, double dt)
{
	json_t *ga = json_object_get(a->stats, "agent"), *gb = json_object_get(b->stats, "agent");
	json_t *cpu = json_null(), *m;
	json_int_t maps = 0;
	size_t i;

	/* One agent process between the two: the same pid, up longer, its CPU not less (an
	 * agent restarted as a container's pid 1 keeps its pid). */
	if (json_is_number(json_object_get(ga, "cpu_seconds")) &&
	    json_is_number(json_object_get(gb, "cpu_seconds")) &&
	    jint(ga, "pid") == jint(gb, "pid") && jnum(gb, "uptime_s") > jnum(ga, "uptime_s") &&
	    jnum(gb, "cpu_seconds") >= jnum(ga, "cpu_seconds"))
		cpu = json_real((jnum(gb, "cpu_seconds") - jnum(ga, "cpu_seconds")) / dt * 100);
	json_array_foreach (json_object_get(b->stats, "maps"), i, m)
		maps += jint(m, "memory_bytes");
	return json_pack("{s:o, s:o, s:I}", "cpu_percent", cpu, "rss_bytes",
			 json_is_integer(json_object_get(gb, "rss_bytes"))
				 ? json_integer(jint(gb, "rss_bytes"))
				 : json_null(),
			 "maps_memory_bytes", maps);
}

/* The rates between two samples, as one JSON document. */
static json_t *rates(const struct sample *a, const struct sample *b)
{
	static const char *const lost_keys[] = {"kernel", "queue_full", "too_big", "parse", NULL};
	json_t *mods = json_array(), *progs = json_array(), *l, *p;
	double dt = b->t - a->t > 0 ? b->t - a->t : 1;
	const char *mode = jstr(json_object_get(b->stats, "agent"), "run_stats");
	bool sampled = !strcmp(mode, "sampled");
	size_t i;

	json_array_foreach (json_object_get(b->stats, "losses"), i, l) {
		const char *m = jstr(l, "module");
		json_t *la = json_object_get(a->stats, "losses");
		json_t *lb = json_object_get(b->stats, "losses");

		json_array_append_new(
			mods,
			json_pack("{s:s, s:f, s:f, s:f}", "module", m, "events_per_s",
				  grown(module_sum(la, m, NULL, (const char *[]){"processed", NULL}),
					module_sum(lb, m, NULL, (const char *[]){"processed", NULL})) /
					  dt,
				  "lost_per_s",
				  grown(module_sum(la, m, NULL, (const char **)lost_keys),
					module_sum(lb, m, NULL, (const char **)lost_keys)) /
					  dt,
				  "errors_per_s",
				  grown(module_sum(json_object_get(a->errors, "errors"), m, NULL,
						   (const char *[]){"count", NULL}),
					module_sum(json_object_get(b->errors, "errors"), m, NULL,
						   (const char *[]){"count", NULL})) /
					  dt));
	}
	json_array_foreach (json_object_get(b->stats, "programs"), i, p) {
		json_array_append_new(progs, program_rate(a, p, dt, sampled));
	}
	return json_pack("{s:f, s:o, s:o, s:o, s:s, s:b}", "interval_s", dt, "agent",
			 agent_cost(a, b, dt), "modules", mods, "programs", progs, "run_stats",
			 mode, "sampled", sampled);
}

json_t *bpftel_top_rates(json_t *stats_a, json_t *errors_a, double ta, json_t *stats_b,
			 json_t *errors_b, double tb)
{
	struct sample a = {stats_a, errors_a, ta}, b = {stats_b, errors_b, tb};

	return rates(&a, &b);
}

static void draw(json_t *r, json_t *stats, int rows, int cols)
{
	static const char *const mh[] = {"MODULE", "EVENTS/S", "LOST/S", "ERRORS/S"};
	static const char *const ph[] = {"PROGRAM", "MODULE", "RUNS/S",
					 "AVG NS",  "CPU %",  "OVHD %"};
	char a[32], b[32], c[32], d[32], up[32], line[256];
	struct prog_rate *pr;
	struct table *t;
	size_t i, n, shown;
	json_t *o, *agent = json_object_get(stats, "agent");
	int used;

	fputs("\033[H\033[2J", stdout);
	fmt_duration(up, sizeof(up), jnum(agent, "uptime_s"));
	snprintf(line, sizeof(line), "bpftel top - agent %s, pid %lld, up %s%s   q: quit",
		 jstr(agent, "version"), jint(agent, "pid"), up,
		 !strcmp(jstr(r, "run_stats"), "off")	  ? ", run stats off"
		 : json_is_true(json_object_get(r, "sampled")) ? ", programs: last sampled window"
							       : "");
	printf("%.*s\n", cols, line);
	o = json_object_get(r, "agent");
	if (json_is_number(json_object_get(o, "cpu_percent")))
		snprintf(a, sizeof(a), "%.1f %%", jnum(o, "cpu_percent"));
	else
		snprintf(a, sizeof(a), "?");
	if (json_is_integer(json_object_get(o, "rss_bytes")))
		snprintf(b, sizeof(b), "%.1f MiB", jint(o, "rss_bytes") / 1048576.0);
	else
		snprintf(b, sizeof(b), "?");
	snprintf(line, sizeof(line), "agent: CPU %s of one CPU, RSS %s; maps %.1f MiB of kernel memory",
		 a, b, jint(o, "maps_memory_bytes") / 1048576.0);
	printf("%.*s\n\n", cols, line);
	t = table_new(4, mh);
	json_array_foreach (json_object_get(r, "modules"), i, o) {
		snprintf(a, sizeof(a), "%.1f", jnum(o, "events_per_s"));
		snprintf(b, sizeof(b), "%.1f", jnum(o, "lost_per_s"));
		snprintf(c, sizeof(c), "%.1f", jnum(o, "errors_per_s"));
		table_add(t, (const char *const[]){jstr(o, "module"), a, b, c});
	}
	table_print(t, stdout);
	table_free(t);
	used = 4 + (int)json_array_size(json_object_get(r, "modules")) + 2;
	n = json_array_size(json_object_get(r, "programs"));
	pr = calloc(n ? n : 1, sizeof(*pr));
	if (!pr)
		return;
	json_array_foreach (json_object_get(r, "programs"), i, o) {
		pr[i].name = jstr(o, "program");
		pr[i].module = jstr(o, "module");
		pr[i].runs_s = jnum(o, "runs_per_s");
		pr[i].avg_ns = jnum(o, "avg_ns");
		pr[i].cpu = jnum(o, "cpu_percent");
		pr[i].overhead = json_is_number(json_object_get(o, "overhead_percent"))
					 ? jnum(o, "overhead_percent")
					 : -1;
	}
	qsort(pr, n, sizeof(*pr), cmp_cost);
	shown = rows - used - 1 > 0 ? (size_t)(rows - used - 1) : 0;
	if (shown > n)
		shown = n;
	printf("\n");
	t = table_new(6, ph);
	for (i = 0; i < shown; i++) {
		snprintf(a, sizeof(a), "%.1f", pr[i].runs_s);
		snprintf(b, sizeof(b), "%.0f", pr[i].avg_ns);
		snprintf(c, sizeof(c), "%.3f", pr[i].cpu);
		if (pr[i].overhead < 0)
			snprintf(d, sizeof(d), "?");
		else
			snprintf(d, sizeof(d), "%.3f", pr[i].overhead);
		table_add(t, (const char *const[]){pr[i].name, pr[i].module, a, b, c, d});
	}
	table_print(t, stdout);
	table_free(t);
	if (shown < n)
		printf("(%zu more programs)", n - shown);
	fflush(stdout);
	free(pr);
}

static void term_size(int *rows, int *cols)
{
	struct winsize ws;

	*rows = 24;
	*cols = 80;
	if (!ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) && ws.ws_row && ws.ws_col) {
		*rows = ws.ws_row;
		*cols = ws.ws_col;
	}
}

int bpftel_top(const char *sock, bool json, int timeout_ms)
{
	struct sample prev = {0}, cur = {0};
	bool live = !json && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
	struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
	int rows, cols, ret = 0, left;
	char ch, err[512];
	double due;
	json_t *r;

	call_timeout_ms = timeout_ms;

	if (take(sock, &prev, err, sizeof(err))) {
		fprintf(stderr, "bpftel top: %s\n", err);
		return 1;
	}
	if (!live) {
		usleep(INTERVAL_MS * 1000);
		if (take(sock, &cur, err, sizeof(err))) {
			fprintf(stderr, "bpftel top: the second sample: %s\n", err);
			drop(&prev);
			return 1;
		}
		r = rates(&prev, &cur);
		ret = json_dumpf(r, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
		putchar('\n');
		json_decref(r);
		drop(&prev);
		drop(&cur);
		return bpftel_cli_flushed(ret);
	}
	if (!tcgetattr(STDIN_FILENO, &saved_tio)) {
		raw_tio = saved_tio;
		raw_tio.c_lflag &= ~(ICANON | ECHO);
		raw_tio.c_cc[VMIN] = 0;
		raw_tio.c_cc[VTIME] = 0;
		tio_saved = true;
		tcsetattr(STDIN_FILENO, TCSANOW, &raw_tio);
	}
	/* Whatever ends or stops top gives the terminal back as it was. */
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGQUIT, on_signal);
	signal(SIGHUP, on_signal);
	signal(SIGTSTP, on_stop);
	signal(SIGCONT, on_cont);
	hide_cursor();
	for (due = now_s() + INTERVAL_MS / 1000.0;; due = now_s() + INTERVAL_MS / 1000.0) {
		/* Keys other than q are read and ignored: a held key or a paste does not
		 * make top sample faster than once a second. */
		while ((left = (int)((due - now_s()) * 1000)) > 0) {
			keep_raw();
			if (poll(&pfd, 1, left > 250 ? 250 : left) > 0 &&
			    read(STDIN_FILENO, &ch, 1) == 1 &&
			    (ch == 'q' || ch == 'Q'))
				goto quit;
		}
		if (take(sock, &cur, err, sizeof(err))) {
			ret = 1;
			break;
		}
		term_size(&rows, &cols);
		r = rates(&prev, &cur);
		draw(r, cur.stats, rows, cols);
		json_decref(r);
		drop(&prev);
		prev = cur;
		cur = (struct sample){0};
	}
quit:
	drop(&prev);
	drop(&cur);
	/* Done with the terminal: a SIGCONT from here on must not take it back raw. */
	signal(SIGTSTP, SIG_DFL);
	signal(SIGCONT, SIG_DFL);
	fflush(stdout); /* the last frame, before the cursor comes back */
	restore_terminal();
	fputs("\033[H\033[2J", stdout);
	if (ret)
		fprintf(stderr, "bpftel top: the agent stopped answering: %s\n", err);
	return ret;
}
