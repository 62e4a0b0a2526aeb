// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <linux/types.h>
#include "bpf/fair_share_defs.h"

#include "config.h"
#include "module_table.h"
#include "netaddr.h"
#include "telemetry/telemetry.h"
#include "user/common/ctl.h"
#include "user/sharedlibs/file_budget.h"
#include "user/sharedlibs/sharedlibs.h"

#define MAX_FILE (64 * 1024) /* a configuration is small; anything larger is a mistake */

_Static_assert(SHLIB_LIBSET__COUNT <= BPFTEL_CFG_MAX_MODULES, "set_key's found[]");

void bpftel_config_defaults(struct bpftel_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->socket, sizeof(c->socket), "%s", BPFTEL_CTL_SOCKET_DEFAULT);
	snprintf(c->metrics_addr, sizeof(c->metrics_addr), "%s", BPFTEL_METRICS_ADDR_DEFAULT);
	for (size_t i = 0; i < bpftel_agent_nmodules && i < BPFTEL_CFG_MAX_MODULES; i++)
		c->modules[i] = bpftel_agent_modules[i].selectable;
	c->libsets = SHLIB_LIBSET_ALL;
	c->run_stats = BPFTEL_RUN_STATS_SAMPLED;
	c->run_stats_on_s = BPFTEL_RUN_STATS_ON_MS / 1000;
	c->run_stats_period_s = BPFTEL_RUN_STATS_PERIOD_MS / 1000;
	c->max_cpu_window_s = 2;
	c->workers = 1;
	c->queue_len = 1024;
	c->uprobe_grace_s = 30;
	c->new_files_per_user = BPFTEL_FILE_BUDGET_DEFAULT;
	c->http_series_max = 2000;
	c->http_row_expiry_s = 600;
	c->user_share_percent = FAIR_SHARE_PERCENT_DEFAULT;
}

static int bad(char *err, size_t errlen, const char *name, int line, const char *fmt, const char *a,
	       const char *b)
{
	int n = snprintf(err, errlen, "%s:%d: ", name, line);

	if (n >= 0 && (size_t)n < errlen)
		snprintf(err + n, errlen - n, fmt, a, b);
	return -EINVAL;
}

bool bpftel_config_socket_ok(const char *path)
{
	return path[0] == '/' && strlen(path) < sizeof(((struct sockaddr_un *)0)->sun_path);
}

static const char *utoa(char buf[16], unsigned int v)
{
	snprintf(buf, 16, "%u", v);
	return buf;
}

static bool parse_uint(const char *v, unsigned int lo, unsigned int hi, unsigned int *out)
{
	unsigned long n;
	char *end;

	if (!isdigit((unsigned char)*v))
		return false;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end || n < lo || n > hi)
		return false;
	*out = (unsigned int)n;
	return true;
}

/* The next element of a comma-separated list at *rest, trimmed, or NULL after the
 * last; *rest moves past it. Empty ones too ("gpu,,usm", "modules = ,"): strtok would
 * skip them, and a stray comma read as "none" turns everything off. */
static char *list_next(char **rest)
{
	char *tok = *rest, *comma;
	size_t i;

	if (!tok)
		return NULL;
	comma = strchr(tok, ',');
	if (comma)
		*comma++ = '\0';
	*rest = comma;
	while (isspace((unsigned char)*tok))
		tok++;
	for (i = strlen(tok); i && isspace((unsigned char)tok[i - 1]); i--)
		tok[i - 1] = '\0';
	return tok;
}

/* "a, b,c" against names[n] (a NULL name matches nothing): sets found[i]. "none" is
 * the empty list. */
static bool parse_list(char *v, const char *const *names, size_t n, bool *found, const char **what)
{
	char *tok;
	size_t i;

	memset(found, 0, n * sizeof(*found));
	if (!strcmp(v, "none"))
		return true;
	while ((tok = list_next(&v))) {
		for (i = 0; i < n && (!*tok || !names[i] || strcmp(tok, names[i])); i++)
			;
		if (i == n) {
			*what = tok;
			return false;
		}
		found[i] = true;
	}
	return true;
}

/* "modules": names of the selectable rows of the agent's module table. */
static bool parse_modules(char *v, bool *modules, const char **what, char *known, size_t klen)
{
	const char *names[BPFTEL_CFG_MAX_MODULES];
	bool found[BPFTEL_CFG_MAX_MODULES];
	size_t i, n = bpftel_agent_nmodules < BPFTEL_CFG_MAX_MODULES ? bpftel_agent_nmodules
								       : BPFTEL_CFG_MAX_MODULES;
	int off = 0;

	for (i = 0; i < n; i++) {
		/* A shared component is not selectable: no name matches it. */
		names[i] = bpftel_agent_modules[i].selectable ? bpftel_agent_modules[i].name : NULL;
		if (names[i] && off >= 0 && (size_t)off < klen)
			off += snprintf(known + off, klen - off, "%s, ", names[i]);
	}
	if (!parse_list(v, names, n, found, what))
		return false;
	for (i = 0; i < n; i++)
		modules[i] = found[i];
	return true;
}

/* "ON/PERIOD": seconds on in every PERIOD seconds. */
static bool parse_duty(const char *v, unsigned int *on, unsigned int *period)
{
	char buf[32], *slash;

	if (strlen(v) >= sizeof(buf))
		return false;
	snprintf(buf, sizeof(buf), "%s", v);
	slash = strchr(buf, '/');
	if (!slash)
		return false;
	*slash = '\0';
	return parse_uint(buf, 1, 3599, on) && parse_uint(slash + 1, 2, 3600, period) &&
	       *on < *period;
}

/* A percentage of one CPU: a decimal in (0, 6400], digits and one point ("0x10",
 * "1e2": strtod's, not a percentage anyone writes). */
static bool parse_percent(const char *v, double *out)
{
	size_t digits = strspn(v, "0123456789");
	char *end;
	double d;

	if (v[digits] == '.')
		digits += 1 + strspn(v + digits + 1, "0123456789");
	if (!digits || v[digits] || !strcmp(v, "."))
		return false;
	errno = 0;
	d = strtod(v, &end);
	if (errno || *end || !(d > 0) || d > 6400)
		return false;
	*out = d;
	return true;
}

/* A selectable module's index in the agent's table, or -1. */
static int selectable_index(const char *name)
{
	size_t i;

	for (i = 0; i < bpftel_agent_nmodules && i < BPFTEL_CFG_MAX_MODULES; i++) {
		if (bpftel_agent_modules[i].selectable && !strcmp(bpftel_agent_modules[i].name, name))
			return (int)i;
	}
	return -1;
}

/* "off", "5" (every module), or "gpu:5, usm:0.5" (the others: none). */
static bool parse_budgets(char *v, double *pct, const char **what)
{
	char *tok, *colon;
	double one;
	size_t i;
	int idx;

	for (i = 0; i < BPFTEL_CFG_MAX_MODULES; i++)
		pct[i] = 0;
	if (!strcmp(v, "off"))
		return true;
	if (parse_percent(v, &one)) {
		for (i = 0; i < bpftel_agent_nmodules && i < BPFTEL_CFG_MAX_MODULES; i++)
			pct[i] = bpftel_agent_modules[i].selectable ? one : 0;
		return true;
	}
	while ((tok = list_next(&v))) { /* empty elements too: refused */
		*what = tok;
		colon = strchr(tok, ':');
		if (!colon)
			return false;
		*colon = '\0';
		idx = selectable_index(tok);
		if (idx < 0 || !parse_percent(colon + 1, &pct[idx])) {
			*colon = ':';
			return false;
		}
	}
	return true;
}

static int set_key(const char *name, int line, const char *key, char *v, struct bpftel_config *c,
		   char *err, size_t errlen)
{
	const char *libset_names[SHLIB_LIBSET__COUNT], *what = v;
	bool found[BPFTEL_CFG_MAX_MODULES];
	char known[256] = "", num[16], num2[16];
	unsigned int i;

	if (!strcmp(key, "socket")) {
		if (!bpftel_config_socket_ok(v))
			return bad(err, errlen, name, line,
				   "socket: '%s' is not an absolute path "
				   "shorter than 108 bytes%s",
				   v, "");
		snprintf(c->socket, sizeof(c->socket), "%s", v);
	} else if (!strcmp(key, "metrics_addr")) {
		if (!strcmp(v, "off")) {
			c->metrics_addr[0] = '\0';
		} else if (strlen(v) >= sizeof(c->metrics_addr)) {
			return bad(err, errlen, name, line,
				   "metrics_addr: %s bytes, longer than %s",
				   utoa(num, (unsigned int)strlen(v)),
				   utoa(num2, sizeof(c->metrics_addr) - 1));
		} else if (bpftel_metrics_check_addr(v)) {
			return bad(err, errlen, name, line,
				   "metrics_addr: '%s' is not HOST:PORT, [V6]:PORT or off%s", v,
				   "");
		} else {
			snprintf(c->metrics_addr, sizeof(c->metrics_addr), "%s", v);
		}
	} else if (!strcmp(key, "modules")) {
		if (!parse_modules(v, c->modules, &what, known, sizeof(known)))
			return bad(err, errlen, name, line,
				   "modules: unknown module '%s' (%snone)", what, known);
	} else if (!strcmp(key, "libsets")) {
		for (i = 0; i < SHLIB_LIBSET__COUNT; i++)
			libset_names[i] = bpftel_shlib_libset_name(i);
		if (!parse_list(v, libset_names, SHLIB_LIBSET__COUNT, found, &what))
			return bad(err, errlen, name, line,
				   "libsets: unknown libset '%s' (crypto, gpu, or none)%s", what,
				   "");
		c->libsets = 0;
		for (i = 0; i < SHLIB_LIBSET__COUNT; i++)
			c->libsets |= found[i] ? SHLIB_LIBSET_BIT(i) : 0;
	} else if (!strcmp(key, "run_stats")) {
		if (!strcmp(v, "always") || !strcmp(v, "on"))
			c->run_stats = BPFTEL_RUN_STATS_ALWAYS;
		else if (!strcmp(v, "sampled"))
			c->run_stats = BPFTEL_RUN_STATS_SAMPLED;
		else if (!strcmp(v, "off"))
			c->run_stats = BPFTEL_RUN_STATS_OFF;
		else
			return bad(err, errlen, name, line,
				   "run_stats: '%s' is not always, sampled or off%s", v, "");
	} else if (!strcmp(key, "run_stats_duty")) {
		if (!parse_duty(v, &c->run_stats_on_s, &c->run_stats_period_s))
			return bad(err, errlen, name, line,
				   "run_stats_duty: '%s' is not ON/PERIOD seconds with "
				   "1 <= ON < PERIOD <= 3600%s",
				   v, "");
	} else if (!strcmp(key, "max_cpu_percent")) {
		if (!parse_budgets(v, c->max_cpu_percent, &what))
			return bad(err, errlen, name, line,
				   "max_cpu_percent: '%s' is not off, a percentage of one CPU, or "
				   "MODULE:PERCENT, ... (%s)",
				   what, "e.g. gpu:5, usm:10");
	} else if (!strcmp(key, "max_cpu_window")) {
		if (!parse_uint(v, 1, 60, &c->max_cpu_window_s))
			return bad(err, errlen, name, line, "max_cpu_window: '%s' is not 1..60%s", v,
				   "");
	} else if (!strcmp(key, "workers")) {
		if (!parse_uint(v, 1, 64, &c->workers))
			return bad(err, errlen, name, line, "workers: '%s' is not 1..64%s", v, "");
	} else if (!strcmp(key, "queue_len")) {
		if (!parse_uint(v, 16, 65536, &c->queue_len) || (c->queue_len & (c->queue_len - 1)))
			return bad(err, errlen, name, line,
				   "queue_len: '%s' is not a power of two in 16..65536%s", v, "");
	} else if (!strcmp(key, "uprobe_grace")) {
		if (!parse_uint(v, 0, 3600, &c->uprobe_grace_s))
			return bad(err, errlen, name, line, "uprobe_grace: '%s' is not 0..3600%s", v,
				   "");
	} else if (!strcmp(key, "new_files_per_user")) {
		if (!parse_uint(v, 0, BPFTEL_FILE_BUDGET_MAX, &c->new_files_per_user))
			return bad(err, errlen, name, line,
				   "new_files_per_user: '%s' is not 0..100000%s", v, "");
	} else if (!strcmp(key, "http_series_max")) {
		if (!parse_uint(v, 10, 100000, &c->http_series_max))
			return bad(err, errlen, name, line,
				   "http_series_max: '%s' is not 10..100000%s", v, "");
	} else if (!strcmp(key, "http_row_expiry")) {
		if (!parse_uint(v, 0, 86400, &c->http_row_expiry_s))
			return bad(err, errlen, name, line,
				   "http_row_expiry: '%s' is not 0..86400%s", v, "");
	} else if (!strcmp(key, "metrics_labels")) {
		if (strcmp(v, "none") && strcmp(v, "container"))
			return bad(err, errlen, name, line,
				   "metrics_labels: '%s' is not none or container%s", v, "");
		c->metrics_labels_container = !strcmp(v, "container");
	} else if (!strcmp(key, "gpu_launch_shared_mem")) {
		if (strcmp(v, "on") && strcmp(v, "off"))
			return bad(err, errlen, name, line,
				   "gpu_launch_shared_mem: '%s' is not on or off%s", v, "");
		c->gpu_launch_shared_mem = !strcmp(v, "on");
	} else if (!strcmp(key, "tls_recv_fd")) {
		if (strcmp(v, "on") && strcmp(v, "off"))
			return bad(err, errlen, name, line, "tls_recv_fd: '%s' is not on or off%s",
				   v, "");
		c->tls_recv_fd = !strcmp(v, "on");
	} else if (!strcmp(key, "user_share_percent")) {
		if (!parse_uint(v, 1, 100, &c->user_share_percent))
			return bad(err, errlen, name, line,
				   "user_share_percent: '%s' is not 1..100 (100: no bound)%s", v,
				   "");
	} else if (!strcmp(key, "ringbuf_kib")) {
		if (!parse_uint(v, 0, 65536, &c->ringbuf_kib) ||
		    (c->ringbuf_kib &&
		     (c->ringbuf_kib < 4 || (c->ringbuf_kib & (c->ringbuf_kib - 1)))))
			return bad(err, errlen, name, line,
				   "ringbuf_kib: '%s' is not 0 or a power of two 4..65536%s", v,
				   "");
	} else {
		return bad(err, errlen, name, line,
			   "unknown key '%s' (socket, metrics_addr, modules, libsets, run_stats, "
			   "run_stats_duty, max_cpu_percent, max_cpu_window, workers, queue_len, "
			   "ringbuf_kib, uprobe_grace, new_files_per_user, http_series_max, "
			   "http_row_expiry, "
			   "metrics_labels, gpu_launch_shared_mem, tls_recv_fd, "
			   "user_share_percent)%s",
			   key, "");
	}
	return 0;
}

int bpftel_config_parse(const char *name, const char *text, size_t len, struct bpftel_config *c,
			char *err, size_t errlen)
{
	struct bpftel_config next = *c; /* all or nothing */
	char buf[1024], *key, *val, *eq, *end, a[16], b[16];
	const char *p = text, *nl, *stop = text + len;
	int line = 0, e, slots_line = 0;
	bool workers_last = false;
	size_t n;

	while (p < stop) {
		line++;
		nl = memchr(p, '\n', stop - p);
		n = (nl ? nl : stop) - p;
		if (n >= sizeof(buf))
			return bad(err, errlen, name, line, "line longer than %s bytes%s", "1023",
				   "");
		memcpy(buf, p, n);
		buf[n] = '\0';
		p += n + (nl != NULL);
		if (memchr(buf, '\0', n))
			return bad(err, errlen, name, line, "NUL byte in the line%s%s", "", "");
		if ((end = strchr(buf, '#')))
			*end = '\0';
		for (key = buf; isspace((unsigned char)*key); key++)
			;
		if (!*key)
			continue;
		eq = strchr(key, '=');
		if (!eq)
			return bad(err, errlen, name, line, "expected 'key = value', got '%.60s'%s",
				   key, "");
		for (end = eq; end > key && isspace((unsigned char)end[-1]); end--)
			;
		*end = '\0';
		for (val = eq + 1; isspace((unsigned char)*val); val++)
			;
		for (end = val + strlen(val); end > val && isspace((unsigned char)end[-1]); end--)
			;
		*end = '\0';
		if (!*key || !*val)
			return bad(err, errlen, name, line, "expected 'key = value', got '%.60s'%s",
				   buf, "");
		e = set_key(name, line, key, val, &next, err, errlen);
		if (e)
			return e;
		if (!strcmp(key, "workers") || !strcmp(key, "queue_len")) {
			slots_line = line;
			workers_last = !strcmp(key, "workers");
		}
	}
	/* On the values the file ends with: a later line may set either again. Said at the
	 * line that set the last of the two. */
	if (next.workers * next.queue_len > BPFTEL_CFG_MAX_SLOTS)
		return bad(err, errlen, name, slots_line,
			   workers_last ? "workers: %s x queue_len %s is over 65536 records (each "
					  "slot holds one of up to 4 KiB)"
					: "queue_len: %s x workers %s is over 65536 records (each "
					  "slot holds one of up to 4 KiB)",
			   utoa(a, workers_last ? next.workers : next.queue_len),
			   utoa(b, workers_last ? next.queue_len : next.workers));
	*c = next;
	return 0;
}

int bpftel_config_load(const char *path, struct bpftel_config *c, char *err, size_t errlen)
{
	char *text;
	size_t len;
	FILE *f;
	int e;

	bpftel_config_defaults(c);
	f = fopen(path, "re");
	if (!f) {
		e = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-e));
		return e;
	}
	text = malloc(MAX_FILE + 1);
	if (!text) {
		fclose(f);
		return -ENOMEM;
	}
	len = fread(text, 1, MAX_FILE + 1, f);
	e = ferror(f) ? -EIO : 0;
	fclose(f);
	if (!e && len > MAX_FILE) {
		snprintf(err, errlen, "%s: larger than %d bytes", path, MAX_FILE);
		e = -EFBIG;
	} else if (e) {
		snprintf(err, errlen, "%s: read error", path);
	} else {
		e = bpftel_config_parse(path, text, len, c, err, errlen);
	}
	free(text);
	return e;
}
