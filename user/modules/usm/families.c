// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* USM's Prometheus families (families.h). */
#include "families.h"
#include "user/common/prom.h"

const double usm_http_le[USM_NLE] = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25,
				     0.5,   0.75, 1,	 2.5,  5,     7.5, 10};

void usm_series_observe(struct usm_series *s, uint64_t ns)
{
	size_t l = 0;

	while (l < USM_NLE && (double)ns > usm_http_le[l] * 1e9)
		l++;
	s->le[l]++;
	s->count++;
	s->sum_ns += ns;
}

static const struct {
	const char *name, *help;
} families[USM_FAM__COUNT] = {
	[USM_FAM_HTTP_SERVER] = {"bpftel_http_server_request_duration_seconds",
				 "HTTP requests served, first byte of request to first byte of "
				 "response (HTTP/2 over TLS: to the end of the response) as the "
				 "server process sees it."},
	[USM_FAM_HTTP_CLIENT] = {"bpftel_http_client_request_duration_seconds",
				 "HTTP requests made, first byte of request to first byte of "
				 "response (HTTP/2 over TLS: to the end of the response) as the "
				 "client process sees it."},
	[USM_FAM_RPC_SERVER] = {"bpftel_rpc_server_duration_seconds",
				"gRPC calls served (HTTP/2), request HEADERS to the end of the "
				"response as the server process sees it."},
	[USM_FAM_RPC_CLIENT] = {"bpftel_rpc_client_duration_seconds",
				"gRPC calls made (HTTP/2), request HEADERS to the end of the "
				"response as the client process sees it."},
};

/* A series' labels: HTTP's, or gRPC's (OpenTelemetry's RPC conventions). l has room for
 * the "le" label writer adds. */
static size_t labels_of(const struct usm_series_key *k, bool containers,
			struct bpftel_prom_label *l)
{
	size_t n = 0;

	if (k->family == USM_FAM_RPC_SERVER || k->family == USM_FAM_RPC_CLIENT) {
		l[n++] = (struct bpftel_prom_label){"rpc_system", "grpc"};
		l[n++] = (struct bpftel_prom_label){"rpc_service", k->route};
		l[n++] = (struct bpftel_prom_label){"rpc_method", k->method};
		l[n++] = (struct bpftel_prom_label){"rpc_grpc_status_code", k->status};
	} else {
		l[n++] = (struct bpftel_prom_label){"http_request_method", k->method};
		l[n++] = (struct bpftel_prom_label){"http_route", k->route};
		l[n++] = (struct bpftel_prom_label){"http_response_status_code", k->status};
		l[n++] = (struct bpftel_prom_label){"network_protocol_version", k->version};
	}
	if (containers)
		l[n++] = (struct bpftel_prom_label){"container_id", k->container};
	return n;
}

void usm_families_write(struct bpftel_prom *w, const struct usm_series *ser, size_t n,
			bool containers, const struct usm_overflow_counts *over)
{
	struct bpftel_prom_label l[7];
	size_t i, nl;
	uint32_t f;

	/* gRPC calls are in the RPC families only, so that no call is summed twice. */
	for (f = 0; f < USM_FAM__COUNT; f++) {
		bpftel_prom_family(w, families[f].name, "histogram", families[f].help);
		for (i = 0; i < n; i++) {
			if (ser[i].key.family != f)
				continue;
			nl = labels_of(&ser[i].key, containers, l);
			bpftel_prom_histogram(w, l, nl, usm_http_le, ser[i].le, USM_NLE,
					      ser[i].sum_ns / 1e9);
		}
	}
	bpftel_prom_family(w, "bpftel_http_overflow_requests_total", "counter",
			   "HTTP requests counted in an (overflow) series or row, by reason: "
			   "series_budget (more label sets than http_series_max), process_rows (a "
			   "process's row cap), table_full (the endpoint table's).");
	l[0] = (struct bpftel_prom_label){"reason", "series_budget"};
	bpftel_prom_sample_u64(w, "", l, 1, over->series_budget);
	l[0] = (struct bpftel_prom_label){"reason", "process_rows"};
	bpftel_prom_sample_u64(w, "", l, 1, over->process_rows);
	l[0] = (struct bpftel_prom_label){"reason", "table_full"};
	bpftel_prom_sample_u64(w, "", l, 1, over->table_full);
}
