// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* USM's /metrics as Prometheus reads it: responses paired in the endpoint table and
 * counted in their series as the module does (usm.c's record()), scraped through the
 * families' writer, the text parsed back. Every (metric, label set) is
 * written once; the histograms count every paired response once; no counter or
 * histogram series goes down while it exists, whatever rows expire or fold. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "user/common/prom.h"
#include "user/modules/usm/endpoints.h"
#include "user/modules/usm/families.h"
#include "user/modules/usm/series.h"

#define MAX_SAMPLES 16384

/* One scrape, parsed: each sample's series ("name{labels}") and value. */
struct scrape {
	char *text;
	size_t n;
	char *series[MAX_SAMPLES];
	double value[MAX_SAMPLES];
};

/* A request and its response on (pid, side, stream), dt ns apart, ending at t. */
struct call {
	uint32_t pid;
	enum usm_side side;
	const char *method, *path;
	int version, status;
	bool grpc;
	int grpc_status;
};

/* Pids 100..199 run in container "c1", the others in none. */
static const char *container_of(uint32_t pid)
{
	return pid >= 100 && pid <= 199 ? "c1" : NULL;
}

/* The endpoint table and the /metrics series, as the module holds them. */
struct usm {
	struct usm_endpoints *e;
	struct usm_series_set *series;
};

static void usm_new(struct usm *u, const struct usm_endpoints_limits *lim, unsigned int budget,
		    bool containers)
{
	u->e = usm_endpoints_new(lim);
	u->series = usm_series_set_new();
	assert_non_null(u->e);
	assert_non_null(u->series);
	usm_series_set_configure(u->series, budget, containers, lim ? lim->expiry_ns : 0);
}

static void usm_free(struct usm *u)
{
	usm_series_set_free(u->series);
	usm_endpoints_free(u->e);
}

static void pair(struct usm *u, const struct call *c, uint32_t stream, uint64_t t, uint64_t dt)
{
	struct usm_http_start rq = {
		.kind = USM_HTTP_REQUEST, .version = c->version, .grpc = c->grpc};
	struct usm_http_start rs = {.kind = USM_HTTP_RESPONSE,
				    .version = c->version,
				    .status = c->status,
				    .grpc = c->grpc,
				    .grpc_status = c->grpc_status};
	struct usm_paired paired;
	struct usm_conn_key k;

	memset(&k, 0, sizeof(k));
	k.pid = c->pid;
	k.conn = 1;
	k.side = c->side;
	k.stream = stream;
	snprintf(rq.method, sizeof(rq.method), "%s", c->method);
	snprintf(rq.path, sizeof(rq.path), "%s", c->path);
	assert_false(usm_endpoints_pair(u->e, &k, USM_PROTO_HTTPS, t - dt, &rq, NULL, &paired));
	assert_true(usm_endpoints_pair(u->e, &k, USM_PROTO_HTTPS, t, &rs, NULL, &paired));
	assert_int_equal(paired.latency_ns, dt);
	usm_series_set_add(u->series, &paired, container_of(c->pid));
}

/* The module's sweep: rows and series idle since now - expiry go. Returns the rows. */
static size_t expire(struct usm *u, uint64_t now)
{
	usm_series_set_expire(u->series, now);
	return usm_endpoints_expire(u->e, now);
}

static void parse(struct scrape *s)
{
	char *line, *save = NULL, *sp;

	s->n = 0;
	for (line = strtok_r(s->text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (line[0] == '#')
			continue;
		sp = strrchr(line, ' ');
		assert_non_null(sp);
		assert_true(s->n < MAX_SAMPLES);
		*sp = '\0';
		s->series[s->n] = line;
		s->value[s->n++] = strtod(sp + 1, NULL);
	}
}

/* What /metrics writes of USM's series. */
static void scrape(struct usm *u, struct scrape *s)
{
	struct usm_overflow_counts over = {0};
	struct usm_endpoints_stats st;
	struct usm_series *ser;
	struct bpftel_prom *w;
	bool containers;
	size_t len, ns;
	FILE *f;

	memset(s, 0, sizeof(*s));
	f = open_memstream(&s->text, &len);
	assert_non_null(f);
	w = bpftel_prom_new(f);
	assert_non_null(w);
	usm_endpoints_stats(u->e, &st);
	ns = usm_series_set_snapshot(u->series, &ser, &containers, &over.series_budget);
	over.process_rows = st.proc_overflow;
	over.table_full = st.table_overflow;
	usm_families_write(w, ser, ns, containers, &over);
	bpftel_prom_free(w);
	fclose(f);
	free(ser);
	parse(s);
}

/* The value of series id; fails when it is not there. */
static double value_of(const struct scrape *s, const char *id)
{
	size_t i;

	for (i = 0; i < s->n; i++) {
		if (!strcmp(s->series[i], id))
			return s->value[i];
	}
	fail_msg("no sample %s", id);
	return 0;
}

/* Each series at most once in the exposition. */
static void assert_unique(const struct scrape *s)
{
	size_t i, j;

	for (i = 0; i < s->n; i++) {
		for (j = i + 1; j < s->n; j++) {
			if (!strcmp(s->series[i], s->series[j]))
				fail_msg("written twice: %s", s->series[i]);
		}
	}
}

/* The histograms' _count summed over every series of the four families. */
static double counted(const struct scrape *s)
{
	double sum = 0;
	size_t i;

	for (i = 0; i < s->n; i++) {
		if ((!strncmp(s->series[i], "bpftel_http_", 12) ||
		     !strncmp(s->series[i], "bpftel_rpc_", 11)) &&
		    strstr(s->series[i], "_seconds_count{"))
			sum += s->value[i];
	}
	return sum;
}

/* A gRPC call's labels are service, method and grpc-status: calls that differ in their
 * HTTP method or :status only are one series, written once. */
static void test_grpc_labels_once(void **state)
{
	const struct call calls[] = {
		{7, USM_SIDE_SERVER, "POST", "/pkg.Svc/Call", 20, 200, true, 14},
		{7, USM_SIDE_SERVER, "POST", "/pkg.Svc/Call", 20, 503, true, 14},
		{7, USM_SIDE_SERVER, "GET", "/pkg.Svc/Call", 20, 200, true, 14},
		{8, USM_SIDE_SERVER, "POST", "/pkg.Svc/Call", 20, 200, true, 14},
		{7, USM_SIDE_SERVER, "POST", "/pkg.Svc/Call", 20, 200, true, 0},
	};
	struct usm_endpoints_stats st;
	struct scrape s;
	struct usm u;
	size_t i;

	(void)state;
	usm_new(&u, NULL, 100, false);
	for (i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		pair(&u, &calls[i], (uint32_t)(2 * i + 1), 1000000 * (i + 1), 1000);
	scrape(&u, &s);
	assert_unique(&s);
	assert_float_equal(value_of(&s, "bpftel_rpc_server_duration_seconds_count{"
					"rpc_system=\"grpc\",rpc_service=\"pkg.Svc\","
					"rpc_method=\"Call\",rpc_grpc_status_code=\"14\"}"),
			   4, 0);
	assert_float_equal(value_of(&s, "bpftel_rpc_server_duration_seconds_count{"
					"rpc_system=\"grpc\",rpc_service=\"pkg.Svc\","
					"rpc_method=\"Call\",rpc_grpc_status_code=\"0\"}"),
			   1, 0);
	usm_endpoints_stats(u.e, &st);
	assert_int_equal(st.paired, 5);
	assert_float_equal(counted(&s), (double)st.paired, 0);
	free(s.text);
	usm_free(&u);
}

#define OVERFLOW_1_1                                                                        \
	"bpftel_http_server_request_duration_seconds_count{http_request_method=\"_OTHER\"," \
	"http_route=\"(overflow)\",http_response_status_code=\"\","                         \
	"network_protocol_version=\"1.1\"}"

/*
 * A capped process's overflow row has the labels of the overflow series the budget
 * folds the newest series into: once both exist, they are one series, holding both.
 */
static void test_overflow_labels_once(void **state)
{
	struct usm_endpoints_limits lim = {.max_rows_per_proc = 2};
	const struct call calls[] = {
		{10, USM_SIDE_SERVER, "GET", "/a", 11, 200, false, 0},
		{10, USM_SIDE_SERVER, "GET", "/b", 11, 200, false, 0},
		{10, USM_SIDE_SERVER, "GET", "/c", 11, 200, false, 0}, /* its overflow row */
		{20, USM_SIDE_SERVER, "GET", "/d", 11, 200, false, 0},
		{20, USM_SIDE_SERVER, "GET", "/e", 11, 200, false, 0}, /* past the budget */
	};
	struct usm_endpoints_stats st;
	struct scrape s;
	struct usm u;
	size_t i;

	(void)state;
	usm_new(&u, &lim, 4, false);
	for (i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		pair(&u, &calls[i], (uint32_t)(2 * i + 1), 1000000 * (i + 1), 1000);
	usm_endpoints_stats(u.e, &st);
	assert_int_equal(st.proc_overflow, 1);
	/* Series, oldest first: /a, /b, pid 10's overflow row, /d; /e is one too many. */
	scrape(&u, &s);
	assert_unique(&s);
	assert_float_equal(value_of(&s, OVERFLOW_1_1), 2, 0);
	assert_float_equal(counted(&s), (double)st.paired, 0);
	assert_int_equal(st.paired, 5);
	free(s.text);
	usm_free(&u);
}

/* Every sample of the earlier scrape is in the later one, not lower: counters and
 * histograms (buckets, _count, _sum) of a series that still exists never go down. */
static void assert_not_lower(const struct scrape *before, const struct scrape *after)
{
	size_t i;

	for (i = 0; i < before->n; i++) {
		double now = value_of(after, before->series[i]);

		if (now < before->value[i])
			fail_msg("%s went down: %g -> %g", before->series[i], before->value[i],
				 now);
	}
}

#define SERIES_BUDGET "bpftel_http_overflow_requests_total{reason=\"series_budget\"}"

/*
 * Two processes serve GET /a 200: one series. One's row expires: the series keeps
 * what it counted. So does the overflow series, and series_budget, when a series
 * folded into it by the budget loses its row.
 */
static void test_expiry_never_lowers(void **state)
{
	struct usm_endpoints_limits lim = {.expiry_ns = 100};
	const struct call a1 = {1, USM_SIDE_SERVER, "GET", "/a", 11, 200, false, 0},
			  a2 = {2, USM_SIDE_SERVER, "GET", "/a", 11, 200, false, 0},
			  b = {3, USM_SIDE_SERVER, "GET", "/b", 11, 200, false, 0},
			  c = {4, USM_SIDE_SERVER, "GET", "/c", 11, 200, false, 0};
	struct usm_endpoints_stats st;
	struct scrape s1, s2;
	struct usm u;

	(void)state;
	usm_new(&u, &lim, 1, false);
	pair(&u, &a1, 1, 10, 5);
	pair(&u, &b, 1, 20, 5); /* past the budget of 1 */
	pair(&u, &a2, 1, 150, 5);
	pair(&u, &c, 1, 160, 5); /* past the budget */
	scrape(&u, &s1);
	assert_float_equal(value_of(&s1, SERIES_BUDGET), 2, 0);
	assert_int_equal(expire(&u, 200), 2); /* pid 1's /a, pid 3's /b */
	scrape(&u, &s2);
	assert_unique(&s2);
	assert_not_lower(&s1, &s2);
	usm_endpoints_stats(u.e, &st);
	assert_int_equal(st.paired, 4);
	assert_float_equal(counted(&s2), 4, 0);
	assert_float_equal(value_of(&s2, SERIES_BUDGET), 2, 0);
	assert_float_equal(value_of(&s2, OVERFLOW_1_1), 2, 0);
	free(s1.text);
	free(s2.text);
	usm_free(&u);
}

static bool alive_but_101(uint32_t pid, void *ctx)
{
	(void)ctx;
	return pid != 101;
}

#define A_IN_C1                                                                          \
	"bpftel_http_server_request_duration_seconds_count{http_request_method=\"GET\"," \
	"http_route=\"/a\",http_response_status_code=\"200\","                           \
	"network_protocol_version=\"1.1\",container_id=\"c1\"}"

/* With container labels, a process that exits folds into (exited), which has no
 * container: its container's series keeps what the process counted. */
static void test_fold_keeps_container_series(void **state)
{
	const struct call a1 = {101, USM_SIDE_SERVER, "GET", "/a", 11, 200, false, 0},
			  a2 = {102, USM_SIDE_SERVER, "GET", "/a", 11, 200, false, 0};
	struct scrape s1, s2;
	struct usm u;

	(void)state;
	usm_new(&u, NULL, 100, true);
	pair(&u, &a1, 1, 10, 5);
	pair(&u, &a2, 1, 20, 5);
	scrape(&u, &s1);
	assert_float_equal(value_of(&s1, A_IN_C1), 2, 0);
	assert_int_equal(usm_endpoints_sweep(u.e, alive_but_101, NULL), 1);
	scrape(&u, &s2);
	assert_unique(&s2);
	assert_not_lower(&s1, &s2);
	assert_float_equal(value_of(&s2, A_IN_C1), 2, 0);
	assert_float_equal(counted(&s2), 2, 0);
	free(s1.text);
	free(s2.text);
	usm_free(&u);
}

/* The overflow counter's reasons, summed. */
static double overflowed(const struct scrape *s)
{
	return value_of(s, SERIES_BUDGET) +
	       value_of(s, "bpftel_http_overflow_requests_total{reason=\"process_rows\"}") +
	       value_of(s, "bpftel_http_overflow_requests_total{reason=\"table_full\"}");
}

/*
 * A request counted in an overflow row (its process's cap, the full table) and then in
 * the overflow series is one request: counted under one reason. Here one of each
 * reason, each in the (overflow) series.
 */
static void test_overflow_counted_once(void **state)
{
	struct usm_endpoints_limits lim = {.max_rows = 2, .max_rows_per_proc = 1};
	const struct call calls[] = {
		{1, USM_SIDE_SERVER, "GET", "/a", 11, 200, false, 0}, /* in the budget */
		{1, USM_SIDE_SERVER, "GET", "/b", 11, 200, false, 0}, /* pid 1's cap */
		{2, USM_SIDE_SERVER, "GET", "/c", 11, 200, false, 0}, /* the budget */
		{3, USM_SIDE_SERVER, "GET", "/d", 11, 200, false, 0}, /* the table's cap */
	};
	struct usm_endpoints_stats st;
	struct scrape s;
	struct usm u;
	size_t i;

	(void)state;
	usm_new(&u, &lim, 1, false);
	for (i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		pair(&u, &calls[i], 1, 10 * (i + 1), 5);
	usm_endpoints_stats(u.e, &st);
	assert_int_equal(st.proc_overflow, 1);
	assert_int_equal(st.table_overflow, 1);
	scrape(&u, &s);
	assert_unique(&s);
	assert_float_equal(value_of(&s, OVERFLOW_1_1), 3, 0);
	assert_float_equal(overflowed(&s), 3, 0);
	assert_float_equal(value_of(&s, SERIES_BUDGET), 1, 0);
	assert_float_equal(counted(&s), 4, 0);
	free(s.text);
	usm_free(&u);
}

#define B_200                                                                            \
	"bpftel_http_server_request_duration_seconds_count{http_request_method=\"GET\"," \
	"http_route=\"/b\",http_response_status_code=\"200\","                           \
	"network_protocol_version=\"1.1\"}"

/*
 * The budget is kept as it was given: a label set counted in the overflow series stays
 * counted there when a place frees up (the oldest series expiring); only its later
 * responses get a series of their own. The overflow series and series_budget keep
 * what they counted.
 */
static void test_budget_sticky(void **state)
{
	struct usm_endpoints_limits lim = {.expiry_ns = 100};
	const struct call a = {1, USM_SIDE_SERVER, "GET", "/a", 11, 200, false, 0},
			  b = {2, USM_SIDE_SERVER, "GET", "/b", 11, 200, false, 0};
	struct scrape s1, s2;
	struct usm u;
	size_t i;

	(void)state;
	usm_new(&u, &lim, 1, false);
	pair(&u, &a, 1, 10, 5);
	pair(&u, &b, 1, 20, 5);	 /* past the budget of 1 */
	pair(&u, &b, 1, 150, 5); /* still */
	scrape(&u, &s1);
	assert_float_equal(value_of(&s1, OVERFLOW_1_1), 2, 0);
	expire(&u, 200); /* /a's series and row; /b's row stays */
	pair(&u, &b, 1, 210, 5);
	scrape(&u, &s2);
	assert_unique(&s2);
	for (i = 0; i < s1.n; i++) {
		if (strstr(s1.series[i], "http_route=\"/a\"")) /* expired: gone whole */
			continue;
		if (value_of(&s2, s1.series[i]) < s1.value[i])
			fail_msg("%s went down", s1.series[i]);
	}
	assert_float_equal(value_of(&s2, OVERFLOW_1_1), 2, 0);
	assert_float_equal(value_of(&s2, SERIES_BUDGET), 2, 0);
	assert_float_equal(value_of(&s2, B_200), 1, 0);
	assert_float_equal(counted(&s2), 3, 0); /* /a's 1 went with its series */
	free(s1.text);
	free(s2.text);
	usm_free(&u);
}

#define RPC_OVERFLOW                                                    \
	"bpftel_rpc_server_duration_seconds_count{rpc_system=\"grpc\"," \
	"rpc_service=\"(overflow)\",rpc_method=\"\",rpc_grpc_status_code=\"\"}"

/* A gRPC call past its process's row cap is in its process's overflow row, which keeps
 * no route: it is counted in the RPC family's overflow series, never in an HTTP one. */
static void test_grpc_overflow_in_rpc_family(void **state)
{
	struct usm_endpoints_limits lim = {.max_rows_per_proc = 1};
	const struct call calls[] = {
		{1, USM_SIDE_SERVER, "POST", "/pkg.Svc/A", 20, 200, true, 0},
		{1, USM_SIDE_SERVER, "POST", "/pkg.Svc/B", 20, 200, true, 0}, /* past the cap */
	};
	struct scrape s;
	struct usm u;
	size_t i;

	(void)state;
	usm_new(&u, &lim, 100, false);
	for (i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		pair(&u, &calls[i], (uint32_t)(2 * i + 1), 10 * (i + 1), 5);
	scrape(&u, &s);
	assert_unique(&s);
	assert_float_equal(value_of(&s, RPC_OVERFLOW), 1, 0);
	for (i = 0; i < s.n; i++)
		assert_null(
			strstr(s.series[i], "bpftel_http_server_request_duration_seconds_count"));
	assert_float_equal(counted(&s), 2, 0);
	free(s.text);
	usm_free(&u);
}

/* The series' _count samples. */
static size_t series_count(const struct scrape *s)
{
	size_t i, n = 0;

	for (i = 0; i < s->n; i++)
		n += strstr(s->series[i], "_seconds_count{") != NULL;
	return n;
}

/* 300 label sets, a budget of 100 (more than the set's first allocation holds): 100
 * series and the overflow series, every request in one of them; once they expire, the
 * places are free again. */
static void test_cardinality_bounded(void **state)
{
	struct usm_endpoints_limits lim = {.expiry_ns = 1000000};
	struct call c = {0, USM_SIDE_CLIENT, "GET", NULL, 11, 200, false, 0};
	char path[32];
	struct scrape s;
	struct usm u;
	uint32_t i;

	(void)state;
	usm_new(&u, &lim, 100, false);
	for (i = 0; i < 300; i++) {
		snprintf(path, sizeof(path), "/r/%u", i);
		c.pid = 1000 + i;
		c.path = path;
		pair(&u, &c, 1, 10 + i, 5);
	}
	scrape(&u, &s);
	assert_unique(&s);
	assert_int_equal(series_count(&s), 101);
	assert_float_equal(counted(&s), 300, 0);
	assert_float_equal(value_of(&s, SERIES_BUDGET), 200, 0);
	assert_float_equal(value_of(&s, "bpftel_http_client_request_duration_seconds_count{"
					"http_request_method=\"GET\",http_route=\"/r/99\","
					"http_response_status_code=\"200\","
					"network_protocol_version=\"1.1\"}"),
			   1, 0);
	free(s.text);
	expire(&u, 2000000); /* all of them */
	c.path = "/new";
	pair(&u, &c, 1, 2000001, 5);
	scrape(&u, &s);
	assert_int_equal(series_count(&s), 1);
	assert_float_equal(counted(&s), 1, 0);
	assert_float_equal(value_of(&s, SERIES_BUDGET), 200, 0);
	free(s.text);
	usm_free(&u);
}

/* The set from every thread that touches it in the agent at once: pipeline workers
 * adding responses, the housekeeping thread expiring, the metrics thread taking
 * snapshots, the control thread configuring. Run under ThreadSanitizer in CI; here the
 * counts must still add up: every response in one series, overflow included. */
#define RACE_ADDS 20000

struct race {
	struct usm_series_set *s;
	int id;
	int stop; /* atomic */
	int too_many; /* snapshots with more series than the budget allows (no assert off
		       * the test's own thread) */
};

static void *race_add(void *arg)
{
	struct race *r = arg;
	struct usm_paired p;
	int i;

	for (i = 0; i < RACE_ADDS; i++) {
		memset(&p, 0, sizeof(p));
		p.pid = 100 + r->id;
		p.side = USM_SIDE_SERVER;
		p.version = 11;
		snprintf(p.method, sizeof(p.method), "GET");
		snprintf(p.path, sizeof(p.path), "/r%d", i % 16);
		p.status = 200;
		p.t_ns = 2000000000000ull + (uint64_t)i;
		p.latency_ns = 1000 + (uint64_t)i;
		usm_series_set_add(r->s, &p, NULL);
	}
	return NULL;
}

static void *race_read(void *arg)
{
	struct race *r = arg;
	struct usm_series *ser;
	uint64_t budget;
	bool containers;
	unsigned int k = 0;
	size_t n;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		/* Nothing this old: each pass walks the series under the lock. */
		usm_series_set_expire(r->s, 1500000000000ull);
		n = usm_series_set_snapshot(r->s, &ser, &containers, &budget);
		r->too_many += n > 8 + 4;
		free(ser);
		usm_series_set_configure(r->s, ++k % 2 ? 4 : 8, false, 1000000000000ull);
	}
	return NULL;
}

static void test_threads_count_exactly(void **state)
{
	struct race add[2] = {{.id = 0}, {.id = 1}}, rd = {0};
	struct usm_series *ser;
	pthread_t t[3];
	uint64_t budget, total = 0;
	bool containers;
	size_t n, i;

	(void)state;
	rd.s = add[0].s = add[1].s = usm_series_set_new();
	assert_non_null(rd.s);
	usm_series_set_configure(rd.s, 8, false, 1000000000000ull);
	assert_int_equal(pthread_create(&t[0], NULL, race_add, &add[0]), 0);
	assert_int_equal(pthread_create(&t[1], NULL, race_add, &add[1]), 0);
	assert_int_equal(pthread_create(&t[2], NULL, race_read, &rd), 0);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	__atomic_store_n(&rd.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t[2], NULL);
	assert_int_equal(rd.too_many, 0);
	n = usm_series_set_snapshot(rd.s, &ser, &containers, &budget);
	for (i = 0; i < n; i++)
		total += ser[i].count;
	free(ser);
	assert_int_equal(total, 2 * RACE_ADDS);
	/* 32 label sets, at most 8 admitted: the rest counted against the budget. */
	assert_true(budget > 0 && budget < 2 * RACE_ADDS);
	assert_true(n <= 8 + 4);
	usm_series_set_free(rd.s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grpc_labels_once),
		cmocka_unit_test(test_overflow_labels_once),
		cmocka_unit_test(test_expiry_never_lowers),
		cmocka_unit_test(test_fold_keeps_container_series),
		cmocka_unit_test(test_overflow_counted_once),
		cmocka_unit_test(test_budget_sticky),
		cmocka_unit_test(test_grpc_overflow_in_rpc_family),
		cmocka_unit_test(test_cardinality_bounded),
		cmocka_unit_test(test_threads_count_exactly),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
