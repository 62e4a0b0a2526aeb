// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <net/if.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "usm.h"
#include "usm.skel.h"
#include "user/common/log.h"
#include "user/manager/manager.h"
#include "user/sharedlibs/sharedlibs.h"
#include "user/sharedlibs/uprobes.h"

/* Bounds of the endpoint table (see endpoints.h). */
#define USM_MAX_PENDING 4096
#define USM_MAX_ROWS	4096
#define USM_MAX_PATHS	64 /* per process */

struct bpftel_usm {
	struct bpftel_module_ops ops;
	struct bpftel_module *module;
	struct usm_endpoints *endpoints;
	pthread_mutex_t lock; /* skel, counters */
	struct usm *skel;     /* while the module is open */
	__u64 retired[USM_CNT__COUNT];
	__u64 unparsed, malformed;
};

static const char *const counter_names[USM_CNT__COUNT] = {
	[USM_CNT_TLS_CALLS] = "tls_calls", [USM_CNT_TLS_HTTP] = "tls_http",
	[USM_CNT_PACKETS] = "packets",	   [USM_CNT_PACKETS_HTTP] = "packets_http",
	[USM_CNT_LOST] = "lost",	   [USM_CNT_TRUNCATED] = "truncated",
};

static void usm_housekeeping(struct bpftel_module *m);

const char *bpftel_usm_counter_name(enum usm_counter c)
{
	return (unsigned)c < USM_CNT__COUNT ? counter_names[c] : "unknown";
}

/* The TLS uprobes: one entry and one return program, the function in the cookie. */
#define TLS(lib, sym, fn)                                          \
	{lib, "usm_tls_uprobe", sym, false, fn},                   \
	{                                                          \
		lib, "usm_tls_uretprobe", sym, true, fn            \
	}

static const struct bpftel_uprobe_spec uprobe_specs[] = {
	TLS(SHLIB_LIB_SSL, "SSL_write", USM_TLS_SSL_WRITE),
	TLS(SHLIB_LIB_SSL, "SSL_read", USM_TLS_SSL_READ),
	TLS(SHLIB_LIB_SSL, "SSL_write_ex", USM_TLS_SSL_WRITE_EX),
	TLS(SHLIB_LIB_SSL, "SSL_read_ex", USM_TLS_SSL_READ_EX),
	TLS(SHLIB_LIB_GNUTLS, "gnutls_record_send", USM_TLS_GNUTLS_SEND),
	TLS(SHLIB_LIB_GNUTLS, "gnutls_record_recv", USM_TLS_GNUTLS_RECV),
};

/* Plaintext HTTP: the socket filter on a packet socket of every interface, a probe of
 * the manager's like any other (`bpftel probes` shows its socket). */
static const struct bpftel_probe_spec socket_probe = {
	.name = "http-packets",
	.policy = BPFTEL_PROBE_REQUIRED,
	.ncand = 1,
	.cand = {{BPFTEL_ATTACH_SOCKET_FILTER, "usm_http_socket", "any"}},
};

/* Ring-buffer callback, on a pipeline worker. */
static int handle_event(void *ctx, void *data, size_t size)
{
	struct bpftel_usm *u = ctx;
	const struct usm_event *ev = data;
	struct usm_http_start msg;
	struct usm_conn_key key;

	if (size != sizeof(*ev) || ev->prefix_len > USM_PREFIX || ev->source >= USM_SRC__COUNT) {
		pthread_mutex_lock(&u->lock);
		u->malformed++;
		pthread_mutex_unlock(&u->lock);
		return -EINVAL;
	}
	/* Parsed here and dropped: no payload byte outlives this call. */
	if (usm_http_parse(ev->prefix, ev->prefix_len, &msg) == USM_HTTP_NONE ||
	    (msg.kind == USM_HTTP_REQUEST) != (ev->kind == USM_KIND_REQUEST)) {
		pthread_mutex_lock(&u->lock);
		u->unparsed++;
		pthread_mutex_unlock(&u->lock);
		return 0;
	}
	memset(&key, 0, sizeof(key));
	key.pid = ev->pid;
	key.source = ev->source;
	if (ev->source == USM_SRC_SOCKET) {
		key.family = ev->family;
		key.client_port = ev->client_port;
		key.server_port = ev->server_port;
		memcpy(key.client_addr, ev->client_addr, sizeof(key.client_addr));
		memcpy(key.server_addr, ev->server_addr, sizeof(key.server_addr));
	} else {
		key.conn = ev->conn;
	}
	usm_endpoints_message(u->endpoints, &key,
			      ev->source == USM_SRC_SOCKET ? USM_PROTO_HTTP : USM_PROTO_HTTPS,
			      ev->ktime_ns, &msg);
	return 0;
}

static int read_kernel_counters(struct bpftel_usm *u, __u64 *out)
{
	return bpftel_percpu_counters_sum(bpf_map__fd(u->skel->maps.usm_counters), USM_CNT__COUNT,
					  out);
}

static int usm_open(struct bpftel_module *m)
{
	struct bpftel_usm *u = bpftel_module__priv(m);
	struct bpf_program *prog;
	struct usm *skel;
	unsigned int lo;

	skel = usm__open();
	if (!skel)
		return -errno;
	/* The registry loads the uprobe programs it attaches; the filter is ours. */
	bpf_object__for_each_program(prog, skel->obj) bpf_program__set_autoload(prog, false);
	bpf_program__set_autoload(skel->progs.usm_http_socket, true);
	lo = if_nametoindex("lo");
	skel->rodata->usm_lo_ifindex = lo ? lo : 1;
	pthread_mutex_lock(&u->lock);
	u->skel = skel;
	pthread_mutex_unlock(&u->lock);
	bpftel_module__set_object(m, skel->obj);
	return bpftel_module__add_probe(m, &socket_probe) ?:
	       bpftel_module__add_ringbuf(m, "usm_events", handle_event, u);
}

static int usm_load(struct bpftel_module *m)
{
	struct bpftel_usm *u = bpftel_module__priv(m);

	return usm__load(u->skel);
}

static void usm_close(struct bpftel_module *m)
{
	struct bpftel_usm *u = bpftel_module__priv(m);
	__u64 last[USM_CNT__COUNT] = {};
	int i;

	pthread_mutex_lock(&u->lock);
	if (u->skel && bpf_map__fd(u->skel->maps.usm_counters) >= 0 &&
	    !read_kernel_counters(u, last)) {
		for (i = 0; i < USM_CNT__COUNT; i++)
			u->retired[i] += last[i];
	}
	usm__destroy(u->skel);
	u->skel = NULL;
	pthread_mutex_unlock(&u->lock);
}

int bpftel_usm__new(struct bpftel_manager *mgr, struct bpftel_uprobes *up, struct bpftel_usm **out)
{
	struct bpftel_usm *u = calloc(1, sizeof(*u));
	int err;

	*out = u;
	if (!u)
		return -ENOMEM;
	pthread_mutex_init(&u->lock, NULL);
	u->endpoints = usm_endpoints_new(USM_MAX_PENDING, USM_MAX_ROWS, USM_MAX_PATHS);
	if (!u->endpoints)
		return -ENOMEM;
	u->ops.name = BPFTEL_USM_MODULE;
	u->ops.open = usm_open;
	u->ops.load = usm_load;
	u->ops.close = usm_close;
	u->ops.command = "http";
	u->ops.report = usm_report;
	u->ops.metrics = usm_metrics;
	u->ops.housekeeping = usm_housekeeping;
	err = bpftel_manager__register(mgr, &u->ops, u, &u->module);
	if (!err)
		err = bpftel_uprobes__add_module(up, u->module, uprobe_specs,
						 sizeof(uprobe_specs) / sizeof(uprobe_specs[0]));
	if (!err)
		err = bpftel_manager__bind_shared(mgr, u->module, BPFTEL_SHAREDLIBS_MODULE,
						  SHLIB_LIBSET_BIT(SHLIB_LIBSET_CRYPTO));
	if (err)
		pr_err("usm: cannot register: %s", strerror(-err));
	return err;
}

void bpftel_usm__free(struct bpftel_usm *u)
{
	if (!u)
		return;
	usm_endpoints_free(u->endpoints);
	pthread_mutex_destroy(&u->lock);
	free(u);
}

struct bpftel_module *bpftel_usm__module(struct bpftel_usm *u)
{
	return u->module;
}

size_t bpftel_usm__rows(struct bpftel_usm *u, struct usm_endpoint_row **out)
{
	return usm_endpoints_rows(u->endpoints, out);
}

void bpftel_usm__counters(struct bpftel_usm *u, struct bpftel_usm_counters *out)
{
	__u64 live[USM_CNT__COUNT] = {};
	int i;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&u->lock);
	if (u->skel && bpf_map__fd(u->skel->maps.usm_counters) >= 0)
		read_kernel_counters(u, live);
	for (i = 0; i < USM_CNT__COUNT; i++)
		out->kernel[i] = u->retired[i] + live[i];
	out->unparsed = u->unparsed;
	out->malformed = u->malformed;
	pthread_mutex_unlock(&u->lock);
	usm_endpoints_stats(u->endpoints, &out->endpoints);
}

static bool alive(uint32_t pid)
{
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

int bpftel_usm__sweep(struct bpftel_usm *u)
{
	return usm_endpoints_sweep(u->endpoints, alive);
}

static void usm_housekeeping(struct bpftel_module *m)
{
	bpftel_usm__sweep(bpftel_module__priv(m));
}
