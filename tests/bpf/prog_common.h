/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Every production program run through its own entry: the production objects
 * (gpu.bpf.o, usm.bpf.o, shared_libraries.bpf.o) loaded by the real modules, each
 * instrumented by errors telemetry as the agent does, and their programs fired by what
 * fires them in production: uprobes on stub libraries the tests build, tracepoints by
 * real syscalls and process exits, the socket filter through BPF_PROG_TEST_RUN. Shared
 * by test_prog_gpu.c, test_prog_usm.c and test_prog_shlib.c:
 *
 *   env:       manager, telemetry, watcher, uprobe registry, the GPU and USM modules
 *   keys:      a program's tlm_key_prog_<name> as loaded (the kernel's .rodata)
 *   errors:    the telemetry count of one (module, program, resource, op, errno)
 *   children:  helper programs that print "loaded PID", wait for a line, print "done"
 *   coverage:  which programs ran, and how; each test ends with its object's line
 */
#ifndef BPFTEL_TEST_PROG_COMMON_H
#define BPFTEL_TEST_PROG_COMMON_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>
#include <linux/types.h>

#include "harness.h"
#include "telemetry/telemetry.h"
#include "user/manager/manager.h"
#include "user/modules/gpu/gpu.h"
#include "user/modules/usm/usm.h"
#include "user/sharedlibs/sharedlibs.h"
#include "user/sharedlibs/uprobes.h"

/* cond, polled every 10 ms for up to 30 s (10x slower machines, sanitizers). */
#define WAIT_FOR(cond)                             \
	({                                         \
		bool __ok = false;                 \
		int __t;                           \
		for (__t = 0; __t < 3000; __t++) { \
			if (cond) {                \
				__ok = true;       \
				break;             \
			}                          \
			usleep(10000);             \
		}                                  \
		__ok;                              \
	})

struct prog_env {
	struct bpftel_obj_counts base;
	struct bpftel_manager *mgr;
	struct bpftel_telemetry *tlm;
	struct bpftel_uprobes *up;
	struct bpftel_sharedlibs *sl;
	struct bpftel_gpu *gpu;
	struct bpftel_usm *usm;
	struct bpftel_module *shlib_mod, *gpu_mod, *usm_mod;
	const char *only[5]; /* prog_env_only */
};

/* The agent's wiring, nothing started. */
struct prog_env *prog_env_new(void);
/* Stops everything; the kernel's objects and this process's fds are back at baseline. */
void prog_env_free(struct prog_env *e);
/*
 * Feed the uprobe registry only the watcher's detections of these files (the paths
 * the processes name): libraries other processes of the host open meanwhile (another
 * test's stub, the real libssl) get no uprobes of ours, so what the programs count
 * comes from this test's processes alone. Up to 4, NULL-terminated; before any start.
 */
void prog_env_only(struct prog_env *e, const char *const *paths);

/* The __u32 .rodata variable `name` of loaded obj, read from the kernel; -1 if absent. */
long long prog_rodata_u32(struct bpf_object *obj, const char *name);
/* Every program's tlm_key_prog_<name> in the loaded objects of the running modules:
 * each non-zero, all distinct. Returns how many were checked. */
int prog_assert_keys_distinct(struct prog_env *e);

/* The errors telemetry count of (module, program, map or helper, op, errno); 0 if none. */
__u64 prog_errors(struct prog_env *e, const char *module, const char *prog, const char *res,
		  const char *op, int err);
/* Runs so far of program prog in obj (BPF_ENABLE_STATS); 0 if unknown. */
__u64 prog_run_cnt(struct bpf_object *obj, const char *prog);
/* Probe points `module` has attached on a library file process pid uses, now. */
size_t prog_attached(struct prog_env *e, const char *module, pid_t pid);
/* Entries in the hash map `map` of obj, now. */
long prog_map_entries(struct bpf_object *obj, const char *map);

struct prog_child {
	pid_t pid;
	int in;	   /* its stdin */
	FILE *out; /* its stdout */
};

/* Start argv (a helper that prints "loaded PID" once ready) and read that line. */
void prog_child_start(struct prog_child *c, char *const argv[]);
/* Send it a line (its go). */
void prog_child_go(struct prog_child *c);
/* prog_child_go, then read its lines up to "done"; the last one before it into last. */
void prog_child_play(struct prog_child *c, char *last, size_t len);
/* Close its stdin and reap it (kill it first if it does not end). Idempotent. */
void prog_child_stop(struct prog_child *c);
/* Run argv to its end; assert it exits 0. Returns its pid. */
pid_t prog_run(char *const argv[]);

/* A program of the object under test: how a test runs it through its own entry, and
 * the error it induces there (NULL: why none can be). */
struct prog_case {
	const char *prog;
	const char *how;
	const char *error;    /* what the test makes fail in it, or NULL */
	const char *no_error; /* when error is NULL: why nothing can be made to fail */
	bool ran;
	bool error_counted;
	char skipped[192]; /* not run: why (the kernel does not allow it here) */
};

void prog_ran(struct prog_case *cases, size_t n, const char *prog);
void prog_error_counted(struct prog_case *cases, size_t n, const char *prog);
void prog_skipped(struct prog_case *cases, size_t n, const char *prog, const char *why);
/*
 * The coverage of one production object: every program of obj (opened from the
 * production skeleton) must be one of cases, and each case ran or was skipped with a
 * reason. Prints "OBJECT: R/N programs run (prog: how, ...)" and the errors line;
 * fails the test on a program no case names (a new program without a test) or a case
 * that neither ran nor recorded why not.
 */
void prog_coverage(const char *object, struct bpf_object *obj, struct prog_case *cases, size_t n);

#endif /* BPFTEL_TEST_PROG_COMMON_H */
