// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "telemetry_test.skel.h"
#include "tt_module.h"

static const struct bpftel_probe_spec getppid_probe = {
	.name = "getppid",
	.policy = BPFTEL_PROBE_REQUIRED,
	.ncand = 1,
	.cand = {{BPFTEL_ATTACH_TRACEPOINT, "tt_getppid", "syscalls/sys_enter_getppid"}},
};

static int tt_open(struct bpftel_module *m)
{
	struct tt_module *tm = bpftel_module__priv(m);

	tm->skel = telemetry_test__open();
	if (!tm->skel)
		return -errno;
	tm->skel->rodata->target_tgid = getpid();
	bpftel_module__set_object(m, tm->skel->obj);
	return tm->with_probe ? bpftel_module__add_probe(m, &getppid_probe) : 0;
}

static int tt_load(struct bpftel_module *m)
{
	struct tt_module *tm = bpftel_module__priv(m);

	return telemetry_test__load(tm->skel);
}

static void tt_close(struct bpftel_module *m)
{
	struct tt_module *tm = bpftel_module__priv(m);

	telemetry_test__destroy(tm->skel);
	tm->skel = NULL;
}

struct tt_module *tt_module_new(struct bpftel_manager *mgr, const char *name, bool with_probe)
{
	struct tt_module *tm = calloc(1, sizeof(*tm));

	if (!tm)
		return NULL;
	snprintf(tm->name, sizeof(tm->name), "%s", name);
	tm->with_probe = with_probe;
	tm->ops = (struct bpftel_module_ops){
		.name = tm->name, .open = tt_open, .load = tt_load, .close = tt_close};
	if (bpftel_manager__register(mgr, &tm->ops, tm, &tm->module)) {
		free(tm);
		return NULL;
	}
	return tm;
}

int tt_module_run(struct tt_module *tm, const char *prog)
{
	int retval = -1;

	if (bpftel_test_run(bpf_object__find_program_by_name(tm->skel->obj, prog), NULL, 0,
			    &retval))
		return -1000;
	return retval;
}
