// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * shared_libraries.bpf.o's programs, each through its own entry: the sys_exit
 * tracepoints of open, openat and openat2 by those very syscalls (lib_open, a child:
 * the watcher ignores its own process's opens) of a file named like a library; the
 * fexit on do_sys_openat2 where the kernel takes it, its refusal recorded where not.
 * Each case asserts the program's effect (the detection, with the syscall that made
 * it), its telemetry key, and an error counted under its name: an open whose path the
 * process unmapped while the open waited (a FIFO), so that the program's read of the
 * path fails. The exits of connect, accept and accept4, by those syscalls on loopback
 * TCP in this process while a subscriber asks for socket owners: each end recorded
 * under this process, by its connection and by (pid, fd); nothing while nobody asks.
 * The last case checks that every program of the object ran or says why.
 *
 *   test_bpf_prog_shlib LIB_OPEN
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <cmocka.h>
#include "tests/copy_over.h"
#include "user/sharedlibs/procfile.h"

#include "prog_common.h"
#include <bpf/bpf.h>
#include "shared_libraries.skel.h"

static char *lib_open_bin, *go_app;

/* The socket-owner programs' only fallible calls update LRU hash maps, which evict the
 * oldest entry rather than fail when full. */
#define SOCK_NO_ERROR "their only fallible calls update LRU maps, which evict rather than fail"

static struct prog_case cases[] = {
	{"shlib_exit_open", "real tracepoint syscalls/sys_exit_open (open(2))",
	 "probe_read_user_str EFAULT (a path unmapped during the open)"},
	{"shlib_exit_openat", "real tracepoint syscalls/sys_exit_openat (openat(2))",
	 "probe_read_user_str EFAULT (a path unmapped during the open)"},
	{"shlib_exit_openat2", "real tracepoint syscalls/sys_exit_openat2 (openat2(2))",
	 "probe_read_user_str EFAULT (a path unmapped during the open)"},
	{"shlib_fexit_open", "real fexit on do_sys_openat2 (openat(2))",
	 "probe_read_user_str EFAULT (a path unmapped during the open)"},
	{"shlib_exit_connect", "real tracepoint syscalls/sys_exit_connect (connect(2))", NULL,
	 SOCK_NO_ERROR},
	{"shlib_exit_accept", "real tracepoint syscalls/sys_exit_accept (accept(2))", NULL,
	 SOCK_NO_ERROR},
	{"shlib_exit_accept4", "real tracepoint syscalls/sys_exit_accept4 (accept4(2))", NULL,
	 SOCK_NO_ERROR},
	{"shlib_exec", "real tracepoint sched/sched_process_exec (execve(2) of true and of Go)",
	 NULL,
	 "its one fallible call reads the tracepoint's own record of the path, in kernel "
	 "memory: nothing a process does makes it fail"},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

struct fixture {
	struct prog_env *env;
	char dir[64];
	char lib[96];  /* a regular file named like a library */
	char fifo[96]; /* a FIFO named like one */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	const char *nothing[] = {NULL};
	FILE *file;

	f->env = prog_env_new();
	prog_env_only(f->env, nothing); /* detections only: no registry work */
	snprintf(f->dir, sizeof(f->dir), "/tmp/bpftel-shlib-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->lib, sizeof(f->lib), "%s/libcuda.so.1", f->dir);
	snprintf(f->fifo, sizeof(f->fifo), "%s/libssl.so.3", f->dir);
	file = fopen(f->lib, "w");
	assert_non_null(file);
	fclose(file);
	assert_int_equal(mkfifo(f->fifo, 0600), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	prog_env_free(f->env);
	unlink(f->lib);
	unlink(f->fifo);
	rmdir(f->dir);
	free(f);
	return 0;
}

static struct bpf_object *shlib_obj(struct fixture *f)
{
	return bpftel_module__object(f->env->shlib_mod);
}

/* The watcher runs while someone subscribes: this test, to every libset. */
static void start_watcher(struct fixture *f)
{
	assert_int_equal(bpftel_manager__subscribe(f->env->mgr, BPFTEL_SHAREDLIBS_MODULE, "test",
						   SHLIB_LIBSET_ALL),
			 0);
}

/* The status of the watcher's probe named name. */
static struct bpftel_probe_status probe_status(struct fixture *f, const char *name)
{
	struct bpftel_probe_status st[8];
	size_t n, i;

	n = bpftel_module__probes(f->env->shlib_mod, st, 8);
	for (i = 0; i < n; i++) {
		if (!strcmp(st[i].name, name))
			return st[i];
	}
	fail_msg("no probe %s", name);
	return st[0];
}

/* The watcher's detection of pid opening path: its opens and which program saw them. */
static bool detection(struct fixture *f, pid_t pid, const char *path, __u64 opens,
		      enum shlib_syscall *sys)
{
	struct bpftel_shlib_detection *d;
	bool found = false;
	size_t n, i;

	n = bpftel_sharedlibs__detections(f->env->sl, &d);
	for (i = 0; i < n && !found; i++) {
		found = d[i].pid == (__u32)pid && !strcmp(d[i].path, path) && d[i].opens == opens;
		if (found)
			*sys = d[i].syscall;
	}
	bpftel_shlib_detections_free(d, n);
	return found;
}

/* prog ran for SYSCALL: three opens of the library file are one detection made by it
 * (its syscall), and two opens whose path was unmapped meanwhile are two failed reads
 * of the path under its name, and two NO_PATH counts. */
static void check_program(struct fixture *f, const char *prog, char *syscall,
			  enum shlib_syscall want)
{
	char *good[] = {lib_open_bin, syscall, f->lib, "3", NULL};
	char *bad[] = {lib_open_bin, syscall, f->fifo, "2", "unmapped", NULL};
	struct bpftel_sharedlibs_counters before, after;
	enum shlib_syscall sys;
	char var[64];
	pid_t pid;

	snprintf(var, sizeof(var), TLM_KEY_PROG_PREFIX "%s", prog);
	assert_true(prog_rodata_u32(shlib_obj(f), var) > 0);
	pid = prog_run(good);
	if (!WAIT_FOR(detection(f, pid, f->lib, 3, &sys)))
		fail_msg("no detection of pid %d opening %s 3 times", (int)pid, f->lib);
	assert_int_equal(sys, want);
	prog_ran(cases, NCASES, prog);

	assert_int_equal(bpftel_sharedlibs__counters(f->env->sl, &before), 0);
	prog_run(bad);
	assert_int_equal(bpftel_sharedlibs__counters(f->env->sl, &after), 0);
	assert_int_equal(after.kernel[SHLIB_CNT_NO_PATH] - before.kernel[SHLIB_CNT_NO_PATH], 2);
	assert_int_equal(prog_errors(f->env, BPFTEL_SHAREDLIBS_MODULE, prog, "probe_read_user_str",
				     "call", EFAULT),
			 2);
	prog_error_counted(cases, NCASES, prog);
}

/* One sys_exit tracepoint. The fexit that would cover it is refused by an injected
 * fault, so that the tracepoints run alike where the kernel would take the fexit. */
static void check_tracepoint(struct fixture *f, const char *prog, char *syscall,
			     enum shlib_syscall want)
{
	struct bpftel_probe_status st;
	char why[256];

	assert_int_equal(
		bpftel_module__inject_candidate_fault(f->env->shlib_mod, "openat", 0, -EPERM, 1),
		0);
	start_watcher(f);
	st = probe_status(f, syscall);
	if (st.winner < 0) { /* open(2) is not on every arch */
		snprintf(why, sizeof(why), "probe '%s': %s", syscall,
			 st.ncand ? st.cand[0].reason : "not attached");
		prog_skipped(cases, NCASES, prog, why);
		return;
	}
	assert_int_equal(st.cand[st.winner].cand.type, BPFTEL_ATTACH_TRACEPOINT);
	check_program(f, prog, syscall, want);
}

static void test_shlib_exit_open(void **state)
{
	check_tracepoint(*state, "shlib_exit_open", "open", SHLIB_SYS_OPEN);
}

static void test_shlib_exit_openat(void **state)
{
	check_tracepoint(*state, "shlib_exit_openat", "openat", SHLIB_SYS_OPENAT);
}

static void test_shlib_exit_openat2(void **state)
{
	check_tracepoint(*state, "shlib_exit_openat2", "openat2", SHLIB_SYS_OPENAT2);
}

/* The fexit where the kernel takes it; where not, why (the reason the probe recorded)
 * and that the tracepoint took over. */
static void test_shlib_fexit_open(void **state)
{
	struct fixture *f = *state;
	struct bpftel_probe_status st;
	char why[256];
	int err;

	start_watcher(f);
	st = probe_status(f, "openat");
	if (st.winner != 0) {
		err = st.cand[0].err;
		assert_int_equal(st.winner, 1);
		assert_int_equal(st.cand[0].result, BPFTEL_CAND_REJECTED);
		assert_true(err < 0 && st.cand[0].reason[0]);
		assert_true(bpf_program__fd(bpf_object__find_program_by_name(
				    shlib_obj(f), "shlib_fexit_open")) < 0);
		snprintf(why, sizeof(why), "%s (%s)", st.cand[0].reason,
			 strerrorname_np(-err) ?: "?");
		prog_skipped(cases, NCASES, "shlib_fexit_open", why);
		return;
	}
	check_program(f, "shlib_fexit_open", "openat", SHLIB_SYS_ANY);
}

/* ---- socket owners ---- */

static __u16 port_of(int fd, bool peer)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	assert_int_equal(peer ? getpeername(fd, (struct sockaddr *)&a, &len)
			      : getsockname(fd, (struct sockaddr *)&a, &len),
			 0);
	return ntohs(a.sin_port);
}

static __u64 mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* The owner the watcher recorded for fd's connection, as fd's end sees it; false if none. */
static bool owner_of(struct fixture *f, int fd, struct shlib_sock_owner *owner)
{
	struct shlib_sock_key k = {.family = 4, .lport = port_of(fd, false),
				   .rport = port_of(fd, true)};
	struct shlib_sock_key back;
	__u32 lo = htonl(INADDR_LOOPBACK);
	struct stat ns;

	assert_int_equal(stat("/proc/self/ns/net", &ns), 0);
	k.netns = (__u32)ns.st_ino;

	memcpy(k.local, &lo, 4);
	memcpy(k.remote, &lo, 4);
	if (bpftel_sharedlibs__sock_owner(f->env->sl, &k, owner))
		return false;
	/* ... and by (pid, fd), for TLS probes that know only the fd: to a message of
	 * now, not to one stamped before the fd had it (of a connection closed since). */
	assert_int_equal(bpftel_sharedlibs__fd_sock(f->env->sl, (__u32)getpid(), fd, mono_ns(), 0,
						    &back),
			 0);
	assert_memory_equal(&back, &k, sizeof(k));
	assert_int_equal(bpftel_sharedlibs__fd_sock(f->env->sl, (__u32)getpid(), fd, 1, 0, &back),
			 -ESTALE);
	return true;
}

static void assert_owned(struct fixture *f, int fd, const char *prog)
{
	struct shlib_sock_owner owner;
	char var[64];

	snprintf(var, sizeof(var), TLM_KEY_PROG_PREFIX "%s", prog);
	assert_true(prog_rodata_u32(shlib_obj(f), var) > 0);
	if (!owner_of(f, fd, &owner))
		fail_msg("%s: no owner recorded for fd %d", prog, fd);
	assert_int_equal(owner.pid, getpid());
	assert_int_equal(owner.tid, (__u32)syscall(SYS_gettid));
	assert_string_equal(owner.comm, "test_bpf_prog_s"); /* TASK_COMM_LEN - 1 */
	/* The server's end, accepted; the client's, connected (usm.c checks the messages'
	 * way against it). */
	assert_int_equal(owner.accepted, strstr(prog, "accept") != NULL);
	prog_ran(cases, NCASES, prog);
}

/* A loopback listener; returns its fd, *addr its address. */
static int listener(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)addr, len), 0);
	assert_int_equal(listen(fd, 8), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)addr, &len), 0);
	return fd;
}

static int connected(const struct sockaddr_in *addr)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_int_equal(connect(fd, (const struct sockaddr *)addr, sizeof(*addr)), 0);
	return fd;
}

static void test_shlib_sockets(void **state)
{
	struct fixture *f = *state;
	struct shlib_sock_owner owner;
	struct sockaddr_in addr;
	int lfd, c1, a1, c2, a2, c3;

	/* Nobody asks for socket owners: the programs record nothing. */
	start_watcher(f);
	lfd = listener(&addr);
	c1 = connected(&addr);
	a1 = accept(lfd, NULL, NULL);
	assert_true(a1 >= 0);
	assert_false(owner_of(f, c1, &owner));
	assert_false(owner_of(f, a1, &owner));
	close(a1);
	close(c1);

	assert_int_equal(bpftel_manager__subscribe(f->env->mgr, BPFTEL_SHAREDLIBS_MODULE, "test",
						   SHLIB_LIBSET_ALL | SHLIB_SUB_SOCKETS),
			 0);
	c1 = connected(&addr);
	a1 = accept(lfd, NULL, NULL);
	c2 = connected(&addr);
	a2 = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(a1 >= 0 && a2 >= 0);
	assert_owned(f, c1, "shlib_exit_connect");
	assert_owned(f, c2, "shlib_exit_connect");
	assert_owned(f, a1, "shlib_exit_accept");
	assert_owned(f, a2, "shlib_exit_accept4");
	/* A non-blocking connect: its ports are chosen when it returns, done or EINPROGRESS. */
	c3 = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_true(connect(c3, (struct sockaddr *)&addr, sizeof(addr)) == 0 ||
		    errno == EINPROGRESS);
	assert_owned(f, c3, "shlib_exit_connect");
	close(c3);
	/* A connect that failed (nobody listens there any more) records nothing. */
	close(lfd);
	c3 = socket(AF_INET, SOCK_STREAM, 0); /* at an fd number no socket had before */
	assert_int_equal(dup2(c3, 777), 777);
	close(c3);
	c3 = 777;
	assert_int_equal(connect(c3, (struct sockaddr *)&addr, sizeof(addr)), -1);
	assert_int_equal(errno, ECONNREFUSED);
	assert_int_equal(bpftel_sharedlibs__fd_sock(f->env->sl, (__u32)getpid(), c3, mono_ns(), 0,
						    &(struct shlib_sock_key){}),
			 -ENOENT);
	close(c3);
	/* Recording off a while (the module that wants sockets stopped), then on again:
	 * c1's number was closed and connected anew meanwhile, unseen. Its entry is of
	 * the connection before: not given for the fd now. */
	assert_int_equal(bpftel_manager__subscribe(f->env->mgr, BPFTEL_SHAREDLIBS_MODULE, "test",
						   SHLIB_LIBSET_ALL),
			 0);
	lfd = listener(&addr);
	c3 = connected(&addr);
	assert_int_equal(dup2(c3, c1), c1);
	close(c3);
	assert_int_equal(bpftel_manager__subscribe(f->env->mgr, BPFTEL_SHAREDLIBS_MODULE, "test",
						   SHLIB_LIBSET_ALL | SHLIB_SUB_SOCKETS),
			 0);
	assert_int_equal(bpftel_sharedlibs__fd_sock(f->env->sl, (__u32)getpid(), c1, mono_ns(), 0,
						    &(struct shlib_sock_key){}),
			 -ENODATA);
	/* A connection made since is given; not to a process of the pid born after it (the
	 * entry is then its pid's earlier process's, the fd one the process was given). */
	close(c1);
	c1 = connected(&addr);
	assert_owned(f, c1, "shlib_exit_connect");
	assert_int_equal(bpftel_sharedlibs__fd_sock(f->env->sl, (__u32)getpid(), c1, mono_ns(),
						    mono_ns(), &(struct shlib_sock_key){}),
			 -ENODATA);
	close(lfd);
	close(a2);
	close(c2);
	close(a1);
	close(c1);
}

static __u64 execs(struct fixture *f)
{
	struct bpftel_sharedlibs_counters c;

	assert_int_equal(bpftel_sharedlibs__counters(f->env->sl, &c), 0);
	return c.execs;
}

/* Is path's file in shlib_exe_skip (found not to be Go) as it is now: at its ctime? */
static bool skipped(struct fixture *f, const char *path)
{
	struct bpf_map *m = bpf_object__find_map_by_name(shlib_obj(f), "shlib_exe_skip");
	struct shlib_file_key key = {};
	struct shlib_exe_skip_val v;
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	key.ino = st.st_ino;
	key.dev = (__u32)(major(st.st_dev) << 20 | minor(st.st_dev));
	return !bpf_map_lookup_elem(bpf_map__fd(m), &key, &v) &&
	       v.ctime_sec == st.st_ctim.tv_sec && v.ctime_nsec == st.st_ctim.tv_nsec;
}

/* Does the registry hold pid as a process of a Go executable? */
static bool go_process(struct fixture *f, pid_t pid)
{
	struct bpftel_uprobe_file_info *rows;
	bool found = false;
	int n, i;
	size_t k;

	n = bpftel_uprobes__files(f->env->up, &rows);
	for (i = 0; i < n; i++) {
		for (k = 0; rows[i].lib == SHLIB_LIB_GO && k < rows[i].nprocs && k < 8; k++)
			found |= rows[i].pids[k] == (__u32)pid;
	}
	if (n >= 0)
		free(rows);
	return found;
}

/* A script's exec names its interpreter's file (the kernel runs that), with the
 * script's path: read through /proc/<pid>/exe, the interpreter is found not Go once and
 * skipped in the kernel from then on, no refusal counted. The interpreter is a copy of
 * dash of the test's own, so that no other exec of the host decides it. */
static void check_script_exec(struct fixture *f)
{
	struct bpftel_uprobes_refusals before, after;
	char interp[64], script[64], text[128], cmd[160];
	char *argv[] = {script, NULL};
	int in[2], fd;
	pid_t pid;

	snprintf(interp, sizeof(interp), "/tmp/bpftel-interp-%d", (int)getpid());
	snprintf(script, sizeof(script), "/tmp/bpftel-script-%d", (int)getpid());
	snprintf(cmd, sizeof(cmd), "cp /bin/dash %s", interp);
	assert_int_equal(system(cmd), 0);
	fd = open(script, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	assert_true(fd >= 0);
	snprintf(text, sizeof(text), "#!%s\nread x\n", interp);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	bpftel_uprobes__refusals(f->env->up, &before);
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	pid = fork();
	if (!pid) {
		dup2(in[0], STDIN_FILENO);
		execv(script, argv);
		_exit(127);
	}
	close(in[0]);
	/* Alive until its stdin closes: its executable is there to read. */
	if (!WAIT_FOR(skipped(f, interp)))
		fail_msg("the script's interpreter %s not found not to be Go", interp);
	close(in[1]);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	bpftel_uprobes__refusals(f->env->up, &after);
	assert_int_equal(after.count[BPFTEL_REFUSED_IDENTITY_CHANGED],
			 before.count[BPFTEL_REFUSED_IDENTITY_CHANGED]);
	unlink(script);
	unlink(interp);
}

/* Start the Go program argv (alive until told: "started", then it waits for a line)
 * and wait until the registry holds it as a Go process. */
static void go_start(struct fixture *f, struct prog_child *c, char *const argv[], const char *why)
{
	int in[2], out[2];
	char line[64];

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	c->pid = fork();
	if (!c->pid) {
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		execv(argv[0], argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->in = in[1];
	c->out = fdopen(out[0], "r");
	assert_non_null(fgets(line, sizeof(line), c->out));
	assert_string_equal(line, "started\n");
	if (!WAIT_FOR(go_process(f, c->pid)))
		fail_msg("Go process %d (%s) not in the registry", (int)c->pid, why);
}

/* A program found not Go, then overwritten in place by a Go program (same inode, new
 * ctime): its next exec is reported and read again, and the Go process is seen. */
static void check_overwritten_exec(struct fixture *f)
{
	char tool[64], cmd[128];
	char *tool_argv[] = {tool, NULL};
	char *go_argv[] = {tool, "client", "https://127.0.0.1:1/", "1", "wait", NULL};
	struct prog_child go;
	struct stat before, after;

	snprintf(tool, sizeof(tool), "/tmp/bpftel-tool-%d", (int)getpid());
	snprintf(cmd, sizeof(cmd), "cp /bin/true %s", tool);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(stat(tool, &before), 0);
	prog_run(tool_argv);
	if (!WAIT_FOR(skipped(f, tool)))
		fail_msg("%s (a copy of /bin/true) not found not to be Go", tool);
	copy_over(go_app, tool); /* in place: same inode */
	assert_int_equal(stat(tool, &after), 0);
	assert_int_equal(after.st_ino, before.st_ino);
	assert_false(skipped(f, tool)); /* the entry's ctime is the old content's */
	go_start(f, &go, go_argv, "overwritten in place");
	assert_false(skipped(f, tool));
	prog_child_stop(&go);
	unlink(tool);
}

/*
 * Execs are reported to a subscriber that asks, and to nobody else: an executable that
 * is not Go once (then it is in shlib_exe_skip), a Go program at every exec, which the
 * registry then holds with its process. Other processes of the host exec too: only
 * this test's files are looked at.
 */
static void test_shlib_exec(void **state)
{
	struct fixture *f = *state;
	char *true_argv[] = {"/bin/true", NULL};
	char *go_argv[] = {go_app, "client", "https://127.0.0.1:1/", "1", "wait", NULL};
	struct prog_child go[2];
	__u64 e0;
	int i;

	start_watcher(f);
	e0 = execs(f);
	prog_run(true_argv);
	assert_int_equal(execs(f), e0); /* nobody asked: the host's execs are not reported */
	assert_false(skipped(f, "/bin/true"));
	assert_int_equal(bpftel_manager__subscribe(f->env->mgr, BPFTEL_SHAREDLIBS_MODULE, "test",
						   SHLIB_LIBSET_ALL | SHLIB_SUB_EXECS),
			 0);
	prog_run(true_argv);
	if (!WAIT_FOR(skipped(f, "/bin/true")))
		fail_msg("/bin/true not found not to be Go: %llu execs",
			 (unsigned long long)(execs(f) - e0));
	assert_false(skipped(f, go_app));
	go_start(f, &go[0], go_argv, "exec 0");
	go_start(f, &go[1], go_argv, "exec 1");
	assert_false(skipped(f, go_app));
	assert_true(execs(f) >= e0 + 3);
	for (i = 0; i < 2; i++)
		prog_child_stop(&go[i]);
	check_script_exec(f);
	check_overwritten_exec(f);
	prog_ran(cases, NCASES, "shlib_exec");
}

/* The dirfd a process passes with an absolute path is its own to choose, and the kernel
 * ignores it: one that is the registry's own mark for a mapped file (-1000) is not
 * taken for it (the registry would walk /proc/<pid>/map_files/ with the path, outside
 * the process's root): the path is walked in the process's root, as any absolute one. */
static void test_shlib_dirfd_of_absolute_path(void **state)
{
	struct fixture *f = *state;
	char marker[32];
	char *argv[] = {lib_open_bin, marker, f->lib, "1", NULL};
	struct bpftel_shlib_detection *d;
	bool found = false;
	size_t n, i;
	pid_t pid;

	snprintf(marker, sizeof(marker), "openat@%d", BPFTEL_PROCFILE_MAPPED);
	start_watcher(f);
	pid = prog_run(argv);
	if (!WAIT_FOR(detection(f, pid, f->lib, 1, &(enum shlib_syscall){0})))
		fail_msg("no detection of pid %d opening %s", (int)pid, f->lib);
	n = bpftel_sharedlibs__detections(f->env->sl, &d);
	for (i = 0; i < n; i++) {
		if (d[i].pid != (__u32)pid)
			continue;
		found = true;
		assert_int_equal(d[i].dirfd, AT_FDCWD);
	}
	bpftel_shlib_detections_free(d, n);
	assert_true(found);
}

static void test_keys_assigned_and_distinct(void **state)
{
	struct fixture *f = *state;

	start_watcher(f);
	assert_int_equal(bpftel_module__run(f->env->gpu_mod), 0);
	assert_int_equal(bpftel_module__run(f->env->usm_mod), 0);
	assert_int_equal(prog_assert_keys_distinct(f->env),
			 8 + 6 + 5); /* the watcher's programs, the GPU's, the USM's */
}

static void test_every_program_run(void **state)
{
	struct shared_libraries *skel = shared_libraries__open();

	(void)state;
	assert_non_null(skel);
	prog_coverage("shared_libraries.bpf.o", skel->obj, cases, NCASES);
	shared_libraries__destroy(skel);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_shlib_exit_open),
		T(test_shlib_exit_openat),
		T(test_shlib_exit_openat2),
		T(test_shlib_fexit_open),
		T(test_shlib_sockets),
		T(test_shlib_exec),
		T(test_shlib_dirfd_of_absolute_path),
		T(test_keys_assigned_and_distinct),
#undef T
		cmocka_unit_test(test_every_program_run),
	};

	if (argc != 3) {
		fprintf(stderr, "usage: test_bpf_prog_shlib LIB_OPEN GO_TLSAPP\n");
		return 2;
	}
	lib_open_bin = argv[1];
	go_app = argv[2];
	bpftel_test_require_bpf();
	return cmocka_run_group_tests_name("prog_shlib", tests, NULL, NULL);
}
