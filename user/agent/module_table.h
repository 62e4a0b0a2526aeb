/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The one place the agent names its modules (module_table.c). Everything else in
 * user/agent iterates over the manager's modules and calls their ops: a new module is
 * a new row here, and nothing else in the daemon changes.
 */
#ifndef BPFTEL_AGENT_MODULE_TABLE_H
#define BPFTEL_AGENT_MODULE_TABLE_H

#include <stdbool.h>
#include <stddef.h>

struct bpftel_manager;
struct bpftel_uprobes;
struct bpftel_sharedlibs;
struct bpftel_config;

/* What a module's constructor gets from the agent. */
struct bpftel_agent_env {
	struct bpftel_manager *mgr;
	struct bpftel_uprobes *uprobes;	      /* the uprobe registry the watcher feeds */
	struct bpftel_sharedlibs *sharedlibs; /* the watcher, once its row created it */
};

struct bpftel_agent_module {
	const char *name;
	/* Selectable in `modules = ...` (config) and by `bpftel module`. Shared components
	 * (the watcher) are not: they run while a module needs them. */
	bool selectable;
	/* Register with env->mgr (not started); *priv for destroy. A selectable module
	 * that fails leaves the agent running without it; the others stop the agent. */
	int (*create)(struct bpftel_agent_env *env, void **priv);
	/* After the manager is freed. */
	void (*destroy)(void *priv);
	/* Optional: take what the configuration says of this module (at start and on every
	 * reload, from the lifecycle thread; any time, whether the module runs or not). */
	void (*configure)(void *priv, const struct bpftel_config *cfg);
};

extern const struct bpftel_agent_module bpftel_agent_modules[];
extern const size_t bpftel_agent_nmodules;

/* Index of a selectable module, or -1. */
int bpftel_agent_module_index(const char *name);

#endif /* BPFTEL_AGENT_MODULE_TABLE_H */
