/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * BPFTEL_FAULTS: fault injection for tests of a module that cannot start (the soak's
 * "a module fails, the others run, it starts later"). The environment variable holds
 * comma-separated MODULE.STEP=ERRNO[*COUNT]:
 *
 *   BPFTEL_FAULTS=usm.load=ENOMEM*2,gpu.start=EIO
 *
 * STEP is open, load or start; ERRNO a name (ENOMEM) or a number; COUNT (default 1)
 * how many starts of the module fail at that step before it works again. STEP stop
 * makes the module's stops report that error, as a failing stop hook does (the stop
 * still completes).
 *
 * One more item, uprobe_multi=ERRNO, makes the agent behave as on a kernel without
 * multi-uprobe links (before 6.6): every module loads for one perf-event link per probe
 * point, and `bpftel libs` says why.
 */
#ifndef BPFTEL_AGENT_FAULTS_H
#define BPFTEL_AGENT_FAULTS_H

#include <stddef.h>

struct bpftel_manager;

/* Parse spec and arm its faults on mgr's modules. 0, or -EINVAL with why in err. */
int bpftel_faults_apply(struct bpftel_manager *mgr, const char *spec, char *err, size_t errlen);

#endif /* BPFTEL_AGENT_FAULTS_H */
