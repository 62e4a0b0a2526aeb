/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A module over tests/bpf/progs/telemetry_test.bpf.c for telemetry tests: its syscall
 * programs fail on purpose through the wrappers; with_probe attaches tt_getppid, which
 * counts one EFAULT per getppid() of this process while the module runs.
 */
#ifndef BPFTEL_TT_MODULE_H
#define BPFTEL_TT_MODULE_H

#include <stdbool.h>

#include "user/manager/manager.h"

struct tt_module {
	struct bpftel_module_ops ops;
	char name[32];
	bool with_probe;
	struct telemetry_test *skel;
	struct bpftel_module *module;
};

struct tt_module *tt_module_new(struct bpftel_manager *mgr, const char *name, bool with_probe);
/* Run one syscall program of the loaded module; returns its return value. */
int tt_module_run(struct tt_module *tm, const char *prog);

#endif /* BPFTEL_TT_MODULE_H */
