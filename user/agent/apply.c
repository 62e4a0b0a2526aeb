// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Applying a configuration to the running agent: at start (from nothing, on the main
 * thread before anything is served) and on SIGHUP (from the configuration in force, on
 * the lifecycle thread). What can change live does; what cannot (the control socket)
 * is logged and kept.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "metrics.h"
#include "netaddr.h"
#include "telemetry/telemetry.h"
#include "user/common/log.h"
#include "user/manager/manager.h"
#include "user/sharedlibs/sharedlibs.h"
#include "user/sharedlibs/uprobes.h"

/* Everything but the metrics endpoint. A libset mask the watcher refused is left out
 * of *applied (the configuration recorded as running: the manager kept the old), and a
 * module that did not start is marked (a->start_failed), so that the next reload
 * asking for either tries again; the operator's start, stop or restart of the module
 * since says instead (bpftel_agent_module_action: marked if its start failed). */
static int apply_modules(struct bpftel_agent *a, const struct bpftel_config *next, bool starting,
			 struct bpftel_config *applied)
{
	const struct bpftel_config *cur = &a->cfg;
	struct bpftel_pipeline_settings ps = {
		.workers = next->workers,
		.queue_len = next->queue_len,
		.ringbuf_bytes = next->ringbuf_kib * 1024,
	};
	struct bpftel_run_stats_cfg rs;
	struct bpftel_module *m;
	size_t i;
	int err;

	bpftel_manager__set_pipeline(a->mgr, &ps);
	bpftel_uprobes__set_grace_ms(a->uprobes, next->uprobe_grace_s * 1000);
	bpftel_uprobes__set_file_budget(a->uprobes, next->new_files_per_user);
	for (i = 0; i < bpftel_agent_nmodules; i++) {
		if (a->priv[i] && bpftel_agent_modules[i].configure)
			bpftel_agent_modules[i].configure(a->priv[i], next);
	}
	if (!starting && (cur->workers != next->workers || cur->queue_len != next->queue_len ||
			  cur->ringbuf_kib != next->ringbuf_kib))
		pr_info("config: pipeline and ring buffer sizes apply as each module restarts "
			"(bpftel module restart NAME); the shared-libraries watcher's, which "
			"runs while anything needs it, as the agent restarts");
	/* Allowed (the GPU module's records need no order), but a trap for the usm module:
	 * more workers looks like more throughput, and quietly costs correctness. */
	if (next->workers > 1 && (starting || cur->workers != next->workers))
		pr_warn("config: workers = %u runs each module's records out of order: plaintext "
			"requests pair less often, NAT copies may count twice and HTTP/2 sessions "
			"stop (reordered); the usm module needs workers = 1",
			next->workers);
	if (!starting && cur->tls_recv_fd != next->tls_recv_fd)
		pr_info("config: tls_recv_fd applies as the usm module restarts "
			"(bpftel module restart usm)");
	if (!starting && cur->gpu_launch_shared_mem != next->gpu_launch_shared_mem)
		pr_info("config: gpu_launch_shared_mem applies as the gpu module restarts "
			"(bpftel module restart gpu)");
	rs = (struct bpftel_run_stats_cfg){.mode = next->run_stats,
					   .on_ms = next->run_stats_on_s * 1000,
					   .period_ms = next->run_stats_period_s * 1000};
	if (bpftel_telemetry__set_run_stats_mode(a->tlm, &rs))
		pr_warn("config: run_stats = always: BPF_ENABLE_STATS refused");
	if (starting || cur->libsets != next->libsets) {
		/* A new mask replaces the old one in place: dropping it first would stop the
		 * watcher when the agent is its only subscriber (modules = none), and miss
		 * the opens in between. */
		if (!starting && cur->libsets && !next->libsets)
			bpftel_manager__unsubscribe(a->mgr, BPFTEL_SHAREDLIBS_MODULE,
						    BPFTEL_AGENT_SUBSCRIBER);
		if (next->libsets) {
			err = bpftel_manager__subscribe(a->mgr, BPFTEL_SHAREDLIBS_MODULE,
							BPFTEL_AGENT_SUBSCRIBER, next->libsets);
			if (err) {
				if (err != -ECANCELED) /* else a SIGTERM stopped the start */
					pr_err("cannot start the shared-libraries watcher: %s",
					       strerror(-err));
				if (starting)
					return err;
				applied->libsets = cur->libsets; /* the manager kept the old */
			}
		}
	}
	/* A module that cannot start is reported and leaves the others running. */
	for (i = 0; i < bpftel_agent_nmodules; i++) {
		m = a->priv[i] && bpftel_agent_modules[i].selectable
			    ? bpftel_manager__find(a->mgr, bpftel_agent_modules[i].name)
			    : NULL;
		if (!m || (!starting && cur->modules[i] == next->modules[i] &&
			   !(next->modules[i] && a->start_failed[i])))
			continue;
		a->start_failed[i] = false;
		if (next->modules[i]) {
			err = bpftel_module__run(m);
			if (err && err != -EALREADY && err != -ECANCELED) {
				pr_warn("module '%s' not running: %s", bpftel_module__name(m),
					strerror(-err));
				a->start_failed[i] = true;
			}
		} else if (!starting) {
			bpftel_module__stop(m);
			pr_info("config: module '%s' stopped", bpftel_module__name(m));
		}
	}
	return 0;
}

/* HOST:PORT's port, 0 when none (0 itself: any free one). */
static unsigned long addr_port(const char *addr)
{
	const char *colon = strrchr(addr, ':');

	return colon ? strtoul(colon + 1, NULL, 10) : 0;
}

/* Serve /metrics at addr ("": none) in place of what serves it now. */
static void swap_metrics(struct bpftel_agent *a, struct bpftel_metrics *m)
{
	struct bpftel_metrics *old;

	pthread_mutex_lock(&a->cfg_lock);
	old = a->metrics;
	a->metrics = m;
	snprintf(a->metrics_addr, sizeof(a->metrics_addr), "%s", m ? bpftel_metrics__addr(m) : "");
	pthread_mutex_unlock(&a->cfg_lock);
	/* Waits for its requests in flight: outside the lock they may need. */
	bpftel_metrics__stop(old);
}

static int apply_metrics(struct bpftel_agent *a, const char *addr, const char *was)
{
	struct bpftel_metrics *m = NULL;
	unsigned long port = addr_port(addr);
	struct sockaddr_storage ss;
	socklen_t sslen;
	bool same_port;
	int err;

	pthread_mutex_lock(&a->cfg_lock);
	same_port = a->metrics && port && port == addr_port(a->metrics_addr);
	pthread_mutex_unlock(&a->cfg_lock);
	/* Another host on the port served now (127.0.0.1:9464 -> 0.0.0.0:9464): the old
	 * endpoint holds the port, so it goes first, once the new address is known to be
	 * one; back on the old address if the new one cannot be served. */
	if (same_port) {
		err = bpftel_metrics_parse_addr(addr, &ss, &sslen);
		if (err)
			return err;
		swap_metrics(a, NULL);
	}
	if (*addr) {
		err = bpftel_metrics__start(a, addr, &m);
		if (err) {
			if (same_port && !bpftel_metrics__start(a, was, &m))
				swap_metrics(a, m);
			else if (same_port)
				pr_err("metrics: %s cannot be served again either: no endpoint", was);
			return err;
		}
		pr_info("metrics at http://%s/metrics", bpftel_metrics__addr(m));
	}
	swap_metrics(a, m);
	return 0;
}

int bpftel_agent_apply(struct bpftel_agent *a, const struct bpftel_config *next, bool starting)
{
	struct bpftel_config applied = *next;
	int err;

	err = apply_modules(a, next, starting, &applied);
	if (err)
		return err;
	if (!starting && strcmp(a->cfg.socket, next->socket)) {
		pr_warn("config: socket changes to %s at the next start; still serving %s",
			next->socket, a->cfg.socket);
		snprintf(applied.socket, sizeof(applied.socket), "%s", a->cfg.socket);
	}
	if (starting || strcmp(a->cfg.metrics_addr, next->metrics_addr)) {
		err = apply_metrics(a, next->metrics_addr, a->cfg.metrics_addr);
		if (err) {
			pr_err("cannot serve metrics on %s: %s (%smetrics_addr or --metrics-addr "
			       "changes it, off turns it off)",
			       next->metrics_addr, strerror(-err),
			       err == -EADDRINUSE ? "another agent? " : "");
			if (starting)
				return err;
			/* The old endpoint still runs; or, when it made way for the new one and
			 * could not come back, none: "" then, so that the next reload to
			 * either address tries again. */
			pthread_mutex_lock(&a->cfg_lock);
			snprintf(applied.metrics_addr, sizeof(applied.metrics_addr), "%s",
				 a->metrics ? a->cfg.metrics_addr : "");
			pthread_mutex_unlock(&a->cfg_lock);
		}
	}
	pthread_mutex_lock(&a->cfg_lock);
	a->cfg = applied;
	pthread_mutex_unlock(&a->cfg_lock);
	return 0;
}
