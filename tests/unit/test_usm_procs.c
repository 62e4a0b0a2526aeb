// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * USM's processes (user/modules/usm/procs.h): a process that exits stays shown as itself
 * for the grace period from the first look that found it gone, then is forgotten; a
 * running one always is; a pid never noted is shown only while it runs. A pid given to
 * another process is learned again (fake processes, through the table's hooks): the
 * new process is shown with its own name and container, never the old one's.
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
	for (int i = 0; i < 3000; i++) { /* <= 30 s */
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

/* ---- fake processes: what the hooks read instead of /proc ---- */

struct fake_proc {
	uint32_t pid;
	uint64_t start; /* 0: no process has the pid */
	const char *comm;
	const char *container;
};

static struct fake_proc fake;	       /* the one pid of these tests */
static struct fake_proc fake_next;     /* given the pid by describe, when set */
static unsigned int starts, describes; /* hook calls: /proc reads */

static unsigned int start_fails; /* reads of the start time to fail, the process running */
static uint64_t fake_now;	 /* the clock of start times: between proc_a's and proc_b's */

static uint64_t fake_start(uint32_t pid)
{
	starts++;
	if (start_fails) {
		start_fails--;
		return 0;
	}
	return pid == fake.pid ? fake.start : 0;
}

static void fake_describe(uint32_t pid, struct usm_proc *out)
{
	describes++;
	if (pid != fake.pid || !fake.start)
		return;
	snprintf(out->comm, sizeof(out->comm), "%s", fake.comm);
	snprintf(out->cgroup.container_id, sizeof(out->cgroup.container_id), "%s", fake.container);
	if (fake_next.start) { /* the process exits, its pid reused, mid-read */
		fake = fake_next;
		fake_next.start = 0;
	}
}

static bool fake_runs(uint32_t pid)
{
	return pid == fake.pid && fake.start;
}

static uint64_t fake_clock(void)
{
	return fake_now;
}

static const struct usm_procs_hooks fake_hooks = {
	.start = fake_start,
	.describe = fake_describe,
	.runs = fake_runs,
	.now = fake_clock,
};

#define PID  4321
#define CT_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define CT_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static const struct fake_proc proc_a = {PID, 1000, "alpha", CT_A};
static const struct fake_proc proc_b = {PID, 2000, "beta", CT_B};

static int fake_setup(void **state)
{
	fake = proc_a;
	fake_next = (struct fake_proc){0};
	starts = describes = start_fails = 0;
	fake_now = 1500;
	*state = usm_procs_new_hooks(&fake_hooks);
	return *state ? 0 : -1;
}

static int fake_teardown(void **state)
{
	usm_procs_free(*state);
	return 0;
}

static void assert_proc(struct usm_procs *p, const struct fake_proc *want)
{
	struct usm_proc out;

	assert_true(usm_procs_get(p, PID, &out));
	assert_string_equal(out.comm, want->comm);
	assert_string_equal(out.cgroup.container_id, want->container);
	assert_int_equal(out.start, want->start);
}

/* Messages of a running process known cost no /proc read. */
static void test_note_known_reads_nothing(void **state)
{
	struct usm_procs *p = *state;
	int i;

	assert_false(usm_procs_note(p, PID));
	assert_proc(p, &proc_a);
	starts = describes = 0;
	for (i = 0; i < 1000; i++)
		assert_false(usm_procs_note(p, PID));
	assert_int_equal(starts, 0);
	assert_int_equal(describes, 0);
}

/* A exits and B is given its pid before any sweep: B's messages are A's until the
 * sweep reads the pid's start time, then B is learned at its next message. */
static void test_reuse_found_by_sweep(void **state)
{
	struct usm_procs *p = *state;

	usm_procs_note(p, PID);
	fake = proc_b;
	assert_false(usm_procs_note(p, PID)); /* no /proc read per message */
	assert_proc(p, &proc_a);
	assert_true(usm_procs_shown(p, PID, 100, GRACE)); /* the pid runs */
	/* Start time 2000, not 1000: A is gone; its rows keep its name for the grace. */
	usm_procs_sweep(p, 200, GRACE);
	assert_proc(p, &proc_a);
	assert_true(usm_procs_note(p, PID));
	assert_proc(p, &proc_b);
	assert_false(usm_procs_note(p, PID));
	/* B is running: shown, and kept past A's grace. */
	usm_procs_sweep(p, 200 + GRACE, GRACE);
	assert_true(usm_procs_shown(p, PID, 200 + GRACE, GRACE));
	assert_proc(p, &proc_b);
}

/* A found gone (no process with the pid), then B given the pid: A's grace runs on
 * while B sends nothing; B's first message learns B. */
static void test_reuse_after_exit_seen(void **state)
{
	struct usm_procs *p = *state;

	usm_procs_note(p, PID);
	fake.start = 0;
	assert_true(usm_procs_shown(p, PID, 1000, GRACE)); /* gone at 1000 */
	assert_false(usm_procs_note(p, PID));		   /* a late message of A: A stays */
	assert_proc(p, &proc_a);
	fake = proc_b;
	assert_true(usm_procs_shown(p, PID, 1499, GRACE));  /* A's grace, B running */
	assert_false(usm_procs_shown(p, PID, 1500, GRACE)); /* A's rows fold */
	assert_true(usm_procs_note(p, PID));
	assert_proc(p, &proc_b);
	assert_true(usm_procs_shown(p, PID, 1600, GRACE));
	usm_procs_sweep(p, 1600, GRACE);
	assert_proc(p, &proc_b);
}

/* A sweep that cannot read a running process's start time marks it gone; its next
 * message reads it again, the same: running again, not folded at the grace's end, and
 * its later messages read nothing. */
static void test_failed_read_not_gone(void **state)
{
	struct usm_procs *p = *state;

	usm_procs_note(p, PID);
	start_fails = 1;
	usm_procs_sweep(p, 1000, GRACE);
	assert_proc(p, &proc_a);
	assert_false(usm_procs_note(p, PID)); /* the same process: not a new one */
	assert_proc(p, &proc_a);
	usm_procs_sweep(p, 1000 + GRACE, GRACE);
	assert_proc(p, &proc_a);
	assert_true(usm_procs_shown(p, PID, 1000 + GRACE, GRACE));
	starts = describes = 0;
	assert_false(usm_procs_note(p, PID));
	assert_int_equal(starts + describes, 0);
}

/* The start time unreadable at a running process's first message (noted "?"), read at
 * its next: it started before the first read, so it is the same process, learned now,
 * not a new one given the pid (whose rows would fold the first message's into
 * "(exited)"). A sweep meanwhile does not find it gone either. B, started after that
 * first read, is a new process. */
static void test_failed_first_read_same_process(void **state)
{
	struct usm_procs *p = *state;
	struct usm_proc out;

	start_fails = 1;
	assert_false(usm_procs_note(p, PID));
	assert_true(usm_procs_get(p, PID, &out));
	assert_int_equal(out.start, 0);
	assert_false(usm_procs_note(p, PID));
	assert_proc(p, &proc_a);
	starts = describes = 0;
	assert_false(usm_procs_note(p, PID)); /* known now: nothing read */
	assert_int_equal(starts + describes, 0);

	/* A sweep between the two: its rows are not folded at the grace's end. */
	usm_procs_free(p);
	*state = p = usm_procs_new_hooks(&fake_hooks);
	start_fails = 1;
	assert_false(usm_procs_note(p, PID));
	usm_procs_sweep(p, 1000, GRACE);
	assert_true(usm_procs_shown(p, PID, 1000 + GRACE, GRACE));
	assert_false(usm_procs_note(p, PID));
	assert_proc(p, &proc_a);

	/* Unread again at a first message, and the pid is B's by the next: B started after
	 * the read, so it is another process. */
	usm_procs_free(p);
	*state = p = usm_procs_new_hooks(&fake_hooks);
	start_fails = 1;
	assert_false(usm_procs_note(p, PID));
	fake = proc_b;
	assert_true(usm_procs_note(p, PID));
	assert_proc(p, &proc_b);
}

/* The pid reused while its name is read: the start times before and after differ, so
 * it is read again, and the entry is the new process's whole. */
static void test_reuse_while_learning(void **state)
{
	struct usm_procs *p = *state;

	fake_next = proc_b;
	assert_false(usm_procs_note(p, PID));
	assert_proc(p, &proc_b);
	assert_int_equal(describes, 2);
}

/* A gone before its first message is learned so ("?", start unknown); the sweep
 * finds it gone, and a process given the pid later is learned as itself. */
static void test_gone_before_noted(void **state)
{
	struct usm_procs *p = *state;
	struct usm_proc out;

	fake.start = 0;
	assert_false(usm_procs_note(p, PID));
	assert_true(usm_procs_get(p, PID, &out));
	assert_string_equal(out.comm, "?");
	assert_int_equal(describes, 0);
	usm_procs_sweep(p, 100, GRACE);
	fake = proc_b;
	assert_true(usm_procs_note(p, PID));
	assert_proc(p, &proc_b);
}

/* Gone before noted, then named after what the watcher saw at its connect: said so
 * (gone), named once, not over a name; a process read from /proc is never renamed; a
 * process given the pid next is learned at its first message, sweep or not. */
static void test_gone_named_by_watcher(void **state)
{
	struct usm_procs *p = *state;
	struct usm_proc out;
	bool gone = false;
	uint32_t evicted;

	assert_false(usm_procs_name(p, PID, "curl")); /* not in the table */
	fake.start = 0;
	assert_false(usm_procs_note_gone(p, PID, &gone, &evicted));
	assert_true(gone);
	assert_false(usm_procs_note_gone(p, PID, &gone, &evicted)); /* known now: nothing to say */
	assert_false(gone);
	assert_false(usm_procs_name(p, PID, ""));
	assert_true(usm_procs_name(p, PID, "curl-with-a-long-name"));
	assert_true(usm_procs_get(p, PID, &out));
	assert_string_equal(out.comm, "curl-with-a-lon"); /* 15 bytes, as the kernel's */
	assert_int_equal(out.start, 0);
	assert_false(usm_procs_name(p, PID, "other"));
	assert_true(usm_procs_get(p, PID, &out));
	assert_string_equal(out.comm, "curl-with-a-lon");

	/* The pid given to B before any sweep found the first one gone: B's first message
	 * finds B, not a process named after the first. */
	fake = proc_b;
	assert_true(usm_procs_note_gone(p, PID, &gone, &evicted));
	assert_false(gone);
	assert_false(usm_procs_name(p, PID, "curl"));
	assert_proc(p, &proc_b);
}

/* ---- a full table: many fake processes, by pid ---- */

static bool many_odd_gone;

static int many_starts; /* calls of many_start: /proc reads in the real table */

static uint64_t many_start(uint32_t pid)
{
	many_starts++;
	return many_odd_gone && (pid & 1) ? 0 : 10ull * pid;
}

static void many_describe(uint32_t pid, struct usm_proc *out)
{
	snprintf(out->comm, sizeof(out->comm), "p%u", pid);
}

static bool many_runs(uint32_t pid)
{
	return many_start(pid) != 0;
}

/* Pids noted in no order fill the table (sorted by pid: a message's lookup is a binary
 * search); one more is counted as dropped, once, however many messages it sends, and
 * without reading /proc again for each; each is found with its own name, before and
 * after a sweep forgets the odd ones, and the table takes new pids again after it. */
static void test_many_processes(void **state)
{
	static const struct usm_procs_hooks hooks = {
		.start = many_start, .describe = many_describe, .runs = many_runs};
	struct usm_procs *p = usm_procs_new_hooks(&hooks);
	struct usm_proc out;
	char want[16];
	uint32_t i, pid, dropped;

	(void)state;
	assert_non_null(p);
	many_odd_gone = false;
	/* 2311 and 4097 share no factor: every pid 1..4097 once; the last one dropped */
	for (i = 0; i < USM_PROCS_MAX + 1; i++)
		usm_procs_note(p, (i * 2311u) % (USM_PROCS_MAX + 1) + 1);
	dropped = (USM_PROCS_MAX * 2311u) % (USM_PROCS_MAX + 1) + 1;
	assert_false(usm_procs_get(p, dropped, &out));
	assert_int_equal(usm_procs_dropped(p), 1);
	/* Its later messages: counted once, and no /proc read each. */
	many_starts = 0;
	for (i = 0; i < 1000; i++)
		usm_procs_note(p, dropped);
	assert_int_equal(usm_procs_dropped(p), 1);
	assert_int_equal(many_starts, 0);
	for (pid = 1, i = 0; pid <= USM_PROCS_MAX + 1; pid++) {
		if (!usm_procs_get(p, pid, &out))
			continue; /* the one dropped */
		snprintf(want, sizeof(want), "p%u", pid);
		assert_string_equal(out.comm, want);
		i++;
	}
	assert_int_equal(i, USM_PROCS_MAX);
	many_odd_gone = true;
	usm_procs_sweep(p, 1000, GRACE);
	usm_procs_sweep(p, 1000 + GRACE, GRACE);
	for (pid = 1; pid <= USM_PROCS_MAX + 1; pid++) {
		assert_int_equal(usm_procs_get(p, pid, &out), !(pid & 1) && pid != dropped);
		if (!(pid & 1) && pid != dropped) {
			snprintf(want, sizeof(want), "p%u", pid);
			assert_string_equal(out.comm, want);
		}
	}
	usm_procs_note(p, 100000);
	assert_true(usm_procs_get(p, 100000, &out));
	assert_string_equal(out.comm, "p100000");
	assert_int_equal(usm_procs_dropped(p), 1);
	/* The one refused while the table was full is learned now that it has room. */
	usm_procs_note(p, dropped);
	assert_true(usm_procs_get(p, dropped, &out));
	usm_procs_free(p);
}

/* A table of USM_PROCS_MAX running processes, pids 1 to USM_PROCS_MAX (many_start's). */
static struct usm_procs *full_of_running(void)
{
	static const struct usm_procs_hooks hooks = {
		.start = many_start, .describe = many_describe, .runs = many_runs};
	struct usm_procs *p = usm_procs_new_hooks(&hooks);
	uint32_t pid;

	assert_non_null(p);
	many_odd_gone = false;
	for (pid = 1; pid <= USM_PROCS_MAX; pid++)
		usm_procs_note(p, pid);
	return p;
}

/* A table full of processes, half of them gone but in their grace: a new process takes
 * the place of one gone the longest (all gone at one sweep here: the first in pid
 * order), not refused; the running ones and the other gone ones keep theirs. Full of
 * running processes, a new one is refused: test_many_processes. */
static void test_full_gone_gives_way(void **state)
{
	struct usm_procs *p = full_of_running();
	struct usm_proc out;
	uint32_t evicted;

	(void)state;
	many_odd_gone = true;
	usm_procs_sweep(p, 1000, GRACE); /* the odd ones gone at 1000, kept for the grace */
	assert_true(usm_procs_get(p, 1, &out));
	usm_procs_note(p, 100000);
	assert_true(usm_procs_get(p, 100000, &out));
	assert_string_equal(out.comm, "p100000");
	assert_int_equal(usm_procs_dropped(p), 0);
	assert_false(usm_procs_get(p, 1, &out)); /* its grace cut short */
	assert_true(usm_procs_get(p, 3, &out));
	assert_string_equal(out.comm, "p3");
	assert_true(usm_procs_get(p, 2, &out));
	assert_true(usm_procs_get(p, USM_PROCS_MAX, &out));
	/* The caller is told whose place it took: to fold its rows at once. */
	assert_false(usm_procs_note_gone(p, 100002, NULL, &evicted));
	assert_int_equal(evicted, 3);
	assert_false(usm_procs_note_gone(p, 100002, NULL, &evicted)); /* known now */
	assert_int_equal(evicted, 0);
	usm_procs_free(p);
}

/* A process refused while the table was full of running ones is learned at its next
 * message once some are gone (their places given), without waiting for them to be
 * forgotten. */
static void test_refused_retried_when_gone(void **state)
{
	struct usm_procs *p = full_of_running();
	struct usm_proc out;

	(void)state;
	usm_procs_note(p, 100000);
	assert_false(usm_procs_get(p, 100000, &out));
	assert_int_equal(usm_procs_dropped(p), 1);
	usm_procs_note(p, 100000); /* refused: not read again */
	assert_false(usm_procs_get(p, 100000, &out));
	many_odd_gone = true;
	usm_procs_sweep(p, 1000, GRACE); /* gone, in their grace: still in the table */
	usm_procs_note(p, 100000);
	assert_true(usm_procs_get(p, 100000, &out));
	assert_string_equal(out.comm, "p100000");
	assert_int_equal(usm_procs_dropped(p), 1);
	usm_procs_free(p);
}

int main(void)
{
#define F(fn) cmocka_unit_test_setup_teardown(fn, fake_setup, fake_teardown)
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit_grace), cmocka_unit_test(test_sweep_starts_grace),
		cmocka_unit_test(test_many_processes),
		F(test_note_known_reads_nothing),  F(test_reuse_found_by_sweep),
		F(test_reuse_after_exit_seen),	   F(test_reuse_while_learning),
		F(test_gone_before_noted),	   F(test_gone_named_by_watcher),
		F(test_failed_read_not_gone),	   F(test_failed_first_read_same_process),
		cmocka_unit_test(test_full_gone_gives_way),
		cmocka_unit_test(test_refused_retried_when_gone),
	};
#undef F

	return cmocka_run_group_tests_name("usm_procs", tests, NULL, NULL);
}
