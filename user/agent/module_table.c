// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The modules the agent runs, in start order (module_table.h). */
#include <string.h>

#include "config.h"
#include "module_table.h"
#include "user/modules/gpu/gpu.h"
#include "user/modules/usm/usm.h"
#include "user/sharedlibs/sharedlibs.h"
#include "user/sharedlibs/uprobes.h"

static int sharedlibs_create(struct bpftel_agent_env *env, void **priv)
{
	struct bpftel_sharedlibs_opts opts = {.sz = sizeof(opts)};
	struct bpftel_sharedlibs *sl;
	int err;

	err = bpftel_sharedlibs__new(env->mgr, &opts, &sl);
	if (err)
		return err;
	bpftel_sharedlibs__set_registry(sl, env->uprobes);
	env->sharedlibs = sl;
	*priv = sl;
	return 0;
}

static void sharedlibs_destroy(void *priv)
{
	bpftel_sharedlibs__free(priv);
}

static int gpu_create(struct bpftel_agent_env *env, void **priv)
{
	return bpftel_gpu__new(env->mgr, env->uprobes, (struct bpftel_gpu **)priv);
}

static void gpu_configure(void *priv, const struct bpftel_config *cfg)
{
	bpftel_gpu__configure(priv, cfg->gpu_launch_shared_mem, cfg->user_share_percent);
}

static void gpu_destroy(void *priv)
{
	bpftel_gpu__free(priv);
}

static int usm_create(struct bpftel_agent_env *env, void **priv)
{
	return bpftel_usm__new(env->mgr, env->uprobes, env->sharedlibs, (struct bpftel_usm **)priv);
}

static void usm_configure(void *priv, const struct bpftel_config *cfg)
{
	struct bpftel_usm_settings s = {
		.series_max = cfg->http_series_max,
		.row_expiry_s = cfg->http_row_expiry_s,
		.container_labels = cfg->metrics_labels_container,
		.tls_recv_fd = cfg->tls_recv_fd,
		.user_share_percent = cfg->user_share_percent,
	};

	bpftel_usm__configure(priv, &s);
}

static void usm_destroy(void *priv)
{
	bpftel_usm__free(priv);
}

const struct bpftel_agent_module bpftel_agent_modules[] = {
	{BPFTEL_SHAREDLIBS_MODULE, false, sharedlibs_create, sharedlibs_destroy, NULL},
	{BPFTEL_GPU_MODULE, true, gpu_create, gpu_destroy, gpu_configure},
	{BPFTEL_USM_MODULE, true, usm_create, usm_destroy, usm_configure},
};

const size_t bpftel_agent_nmodules =
	sizeof(bpftel_agent_modules) / sizeof(bpftel_agent_modules[0]);

int bpftel_agent_module_index(const char *name)
{
	size_t i;

	for (i = 0; i < bpftel_agent_nmodules; i++) {
		if (bpftel_agent_modules[i].selectable && !strcmp(bpftel_agent_modules[i].name, name))
			return (int)i;
	}
	return -1;
}
