// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * USM's processes (user/modules/usm/procs.h): a process that exits stays shown as itself
 * for the grace period from the first look that found it gone, then is forgotten; a
 * running one always is; a pid never noted is shown only while it runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "user/modules/usm/procs.h"

#define GRACE 500

/* A child that names itself and waits to be killed. */
static pid_t named_child(void)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (!pid) {
		prctl(PR_SET_NAME, "short-lived");
		pause();
		_exit(0);
	}
	return pid;
}

static void test_exit_grace(void **state)
{
	struct usm_procs *p = usm_procs_new();
	struct usm_proc out;
	pid_t child = named_child();
	int status;

	(void)state;
	assert_non_null(p);
	/* Noted while it runs (its name read from /proc once its prctl is done). */
	for (int i = 0; i < 1000; i++) {
		char path[64], comm[32] = "";
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/comm", child);
		f = fopen(path, "r");
		if (f) {
			if (!fgets(comm, sizeof(comm), f))
				comm[0] = '\0';
			fclose(f);
		}
		if (!strcmp(comm, "short-lived\n"))
			break;
		usleep(10000);
	}
	usm_procs_note(p, (uint32_t)child);
	assert_true(usm_procs_get(p, (uint32_t)child, &out));
	assert_string_equal(out.comm, "short-lived");
	assert_true(usm_procs_shown(p, (uint32_t)child, 100, GRACE));
	assert_true(usm_procs_shown(p, (uint32_t)getpid(), 100, GRACE));

	kill(child, SIGKILL);
	assert_int_equal(waitpid(child, &status, 0), child);
	/* Gone: first seen so at 1000, shown until 1500, its name still known. */
	assert_true(usm_procs_shown(p, (uint32_t)child, 1000, GRACE));
	assert_true(usm_procs_shown(p, (uint32_t)child, 1499, GRACE));
	usm_procs_sweep(p, 1499, GRACE);
	assert_true(usm_procs_get(p, (uint32_t)child, &out));
	assert_string_equal(out.comm, "short-lived");
	assert_false(usm_procs_shown(p, (uint32_t)child, 1500, GRACE));
	usm_procs_sweep(p, 1500, GRACE);
	assert_false(usm_procs_get(p, (uint32_t)child, &out));
	/* Forgotten: a pid the table does not know is shown only while it runs. */
	assert_false(usm_procs_shown(p, (uint32_t)child, 1600, GRACE));
	assert_true(usm_procs_shown(p, (uint32_t)getpid(), 1600, GRACE));
	usm_procs_free(p);
}

/* The sweep alone starts the grace of a process nobody asked about. */
static void test_sweep_starts_grace(void **state)
{
	struct usm_procs *p = usm_procs_new();
	struct usm_proc out;
	pid_t child = named_child();
	int status;

	(void)state;
	usm_procs_note(p, (uint32_t)child);
	kill(child, SIGKILL);
	assert_int_equal(waitpid(child, &status, 0), child);
	usm_procs_sweep(p, 2000, GRACE);
	assert_true(usm_procs_get(p, (uint32_t)child, &out));
	usm_procs_sweep(p, 2499, GRACE);
	assert_true(usm_procs_get(p, (uint32_t)child, &out));
	usm_procs_sweep(p, 2500, GRACE);
	assert_false(usm_procs_get(p, (uint32_t)child, &out));
	usm_procs_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit_grace),
		cmocka_unit_test(test_sweep_starts_grace),
	};

	return cmocka_run_group_tests_name("usm_procs", tests, NULL, NULL);
}
