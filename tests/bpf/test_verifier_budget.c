// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What the kernel's verifier walks to load each GPU and USM program: a module's start
 * and restart are mostly that walk (~75 % of a restart at stop 55, ~650 ms). The
 * count of instructions it processed is the kernel's own figure (log level 4:
 * "processed N insns"), the same on every run of one kernel and object: no clock is
 * read here. Each program must stay within BUDGET. At stop 55 the GPU entry program
 * took 62,611 (its uid-range search and saturating add inlined at each call site,
 * the HTTP/2 walk's step re-verified at each loop); after they became global
 * functions (verified once), 16-17 thousand at most (the GPU return program: the
 * first try of each saturating add stays inline, off the launch's call path). A change
 * that makes a program walk past the budget is one that makes every restart slower:
 * look at where the verifier spends (log level 2, by source line) before raising it.
 *
 * The objects are the modules' own (their skeletons), with the settings the modules
 * give them before load that change what the verifier walks: a pid namespace known
 * (fair_share_owner's container branch), the loopback's index, and the GPU's
 * gpu_launch_shared_mem both off (the default) and on. The budget was set on Linux
 * 6.18, the kernel of these machines (../shared/DESIGN.md): another kernel's verifier
 * may count otherwise, and the test prints the kernel it ran on.
 *
 * Usage: test_bpf_verifier_budget (as root)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/utsname.h>
#include <cmocka.h>
#include <bpf/libbpf.h>

#include "harness.h"
#include "bpf/fair_share_defs.h" /* before the skeletons: their .bss has its types */
#include "gpu.h"
#include "usm.h"
#include "gpu.skel.h"
#include "usm.skel.h"

#define BUDGET	  20000 /* instructions processed, per program */
#define MAX_PROGS 16
#define LOG_BYTES 4096 /* level 4 writes a few lines of statistics */

/* "processed N insns" in a level-4 log; -1 if absent. */
static long processed(const char *log)
{
	const char *p = strstr(log, "processed ");
	long n;

	return p && sscanf(p, "processed %ld insns", &n) == 1 ? n : -1;
}

/* Load obj, every program of it, and check what the verifier walked for each. want:
 * programs that must be among them (those that cost the most). */
static void check_object(const char *what, struct bpf_object *obj, const char *const *want,
			 size_t nwant)
{
	static char logs[MAX_PROGS][LOG_BYTES];
	struct bpf_program *prog;
	size_t i, n = 0, seen = 0;
	long insns;

	bpf_object__for_each_program(prog, obj) {
		assert_true(n < MAX_PROGS);
		logs[n][0] = '\0';
		assert_int_equal(bpf_program__set_autoload(prog, true), 0);
		assert_int_equal(bpf_program__set_log_level(prog, 4), 0);
		assert_int_equal(bpf_program__set_log_buf(prog, logs[n], LOG_BYTES), 0);
		n++;
	}
	assert_int_equal(bpf_object__load(obj), 0);
	n = 0;
	bpf_object__for_each_program(prog, obj) {
		insns = processed(logs[n++]);
		printf("# %s: %s processed %ld instructions (%zu in the program; budget %d)\n",
		       what, bpf_program__name(prog), insns, bpf_program__insn_cnt(prog), BUDGET);
		assert_true(insns > 0); /* the figure is there: the test reads what it checks */
		assert_true(insns <= BUDGET);
		for (i = 0; i < nwant; i++)
			seen += !strcmp(bpf_program__name(prog), want[i]);
	}
	assert_int_equal(seen, nwant);
}

static void gpu_within_budget(bool shared_mem)
{
	static const char *const want[] = {"gpu_uprobe", "gpu_uretprobe", "gpu_task_exit"};
	struct gpu *skel = gpu__open();

	assert_non_null(skel);
	skel->rodata->fair_share_pidns_dev = 4;
	skel->rodata->fair_share_pidns_ino = 4026531836;
	skel->rodata->gpu_launch_shared_mem = shared_mem;
	check_object(shared_mem ? "gpu (gpu_launch_shared_mem on)" : "gpu", skel->obj, want,
		     sizeof(want) / sizeof(want[0]));
	gpu__destroy(skel);
}

static void test_gpu_programs(void **state)
{
	(void)state;
	gpu_within_budget(false);
}

static void test_gpu_programs_shared_mem(void **state)
{
	(void)state;
	gpu_within_budget(true);
}

static void test_usm_programs(void **state)
{
	static const char *const want[] = {"usm_tls_uprobe", "usm_tls_uretprobe",
					   "usm_go_uprobe", "usm_http_socket"};
	struct usm *skel = usm__open();

	(void)state;
	assert_non_null(skel);
	skel->rodata->fair_share_pidns_dev = 4;
	skel->rodata->fair_share_pidns_ino = 4026531836;
	skel->rodata->usm_lo_ifindex = 1;
	check_object("usm", skel->obj, want, sizeof(want) / sizeof(want[0]));
	usm__destroy(skel);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gpu_programs),
		cmocka_unit_test(test_gpu_programs_shared_mem),
		cmocka_unit_test(test_usm_programs),
	};
	struct utsname u;

	/* Root, as the agent: a host that lets users load socket filters would pass the
	 * harness's check and then fail on the uprobe programs. */
	if (geteuid()) {
		printf("# skipped: not root\n");
		return 77;
	}
	bpftel_test_require_bpf();
	if (!uname(&u))
		printf("# kernel %s (the budget was set on 6.18)\n", u.release);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
