// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* libFuzzer target: the agent's configuration parser. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "user/agent/config.h"
#include "user/agent/module_table.h"

/* The parser knows modules by the agent's table; this one stands in for it (the real
 * one links every module). */
const struct bpftel_agent_module bpftel_agent_modules[] = {
	{"sharedlibs", false, NULL, NULL},
	{"gpu", true, NULL, NULL},
	{"usm", true, NULL, NULL},
};
const size_t bpftel_agent_nmodules = 3;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bpftel_config c, before;
	char err[256];
	int e;

	bpftel_config_defaults(&c);
	before = c;
	err[0] = '\0';
	e = bpftel_config_parse("fuzz.conf", (const char *)data, size, &c, err, sizeof(err));
	if (e) {
		/* Refused whole, with where and why. */
		if (memcmp(&c, &before, sizeof(c)) || strncmp(err, "fuzz.conf:", 10) ||
		    !memchr(err, '\0', sizeof(err)))
			abort();
		return 0;
	}
	if (c.workers < 1 || c.workers > 64 || c.queue_len < 16 || c.queue_len > 65536 ||
	    (c.ringbuf_kib & (c.ringbuf_kib - 1)) || c.ringbuf_kib > 65536 ||
	    !memchr(c.socket, '\0', sizeof(c.socket)) || c.socket[0] != '/' ||
	    !memchr(c.metrics_addr, '\0', sizeof(c.metrics_addr)) || c.uprobe_grace_s > 3600 ||
	    c.modules[0] /* the shared watcher is never selectable */ || c.run_stats > 2 ||
	    c.run_stats_on_s < 1 || c.run_stats_on_s >= c.run_stats_period_s ||
	    c.run_stats_period_s > 3600 || c.max_cpu_percent[0] != 0 || c.max_cpu_window_s < 1 ||
	    c.max_cpu_window_s > 60)
		abort();
	for (size_t i = 1; i < 3; i++) {
		if (!(c.max_cpu_percent[i] == 0 ||
		      (c.max_cpu_percent[i] > 0 && c.max_cpu_percent[i] <= 6400)))
			abort();
	}
	return 0;
}
