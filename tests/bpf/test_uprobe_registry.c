// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Shared-libraries watcher + uprobe registry against the real system: real python3
 * processes loading the real libssl (after the watcher started, and before), a dlopen
 * of the real libcudart, a process in its own mount namespace loading a copy of libssl
 * only it can see, a non-ELF file named like a library, and a library written over in
 * place while probed. A test module asks for a uprobe on SSL_write of every libssl;
 * links are counted in the kernel.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "tests/copy_over.h"

#include "harness.h"
#include "test_module.h"
#include "user/common/ctl.h"
#include "user/manager/elfsym.h"
#include "user/sharedlibs/uprobes.h"

#define PYTHON "/usr/bin/python3"
#define LIBSSL "/lib/x86_64-linux-gnu/libssl.so.3"
#define CUDART "/usr/local/cuda/lib64/libcudart.so.13"

static const struct bpftel_uprobe_spec ssl_specs[] = {
	{SHLIB_LIB_SSL, "mt_uprobe", "SSL_write", false},
	{SHLIB_LIB_SSL, "mt_uprobe", "SSL_read", false},
};

/* More entry points of one program on one file than one multi-uprobe link takes
 * (BPFTEL_UPROBE_MULTI_MAX, 64): libssl's first WIDE_N exported functions, each at an
 * address of its own (two names at one address are probed once). */
#define WIDE_N 70
static char wide_names[WIDE_N][200];
static struct bpftel_uprobe_spec wide_specs[WIDE_N];
static bool wide_ready; /* false: no libssl or nm here, the test skips */

struct fixture {
	struct bpftel_obj_counts base;
	struct bpftel_manager *mgr;
	struct bpftel_sharedlibs *sl;
	struct bpftel_uprobes *up;
	struct test_module *usm;
};

static int setup_with(void **state, const struct bpftel_uprobe_spec *specs, size_t n)
{
	struct fixture *f = calloc(1, sizeof(*f));

	bpftel_test_baseline(&f->base);
	f->mgr = bpftel_manager__new();
	if (bpftel_sharedlibs__new(f->mgr, NULL, &f->sl) || bpftel_uprobes__new(&f->up))
		return -1;
	bpftel_sharedlibs__set_listener(f->sl, bpftel_uprobes__listener, f->up);
	bpftel_uprobes__set_grace_ms(f->up, 0); /* detach at the first sweep after the last user */
	f->usm = test_module_new(f->mgr, "usm", false);
	if (!f->usm || bpftel_uprobes__add_module(f->up, f->usm->module, specs, n) ||
	    bpftel_manager__bind_shared(f->mgr, f->usm->module, BPFTEL_SHAREDLIBS_MODULE,
					SHLIB_LIBSET_ALL))
		return -1;
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_with(state, ssl_specs, 2);
}

/* The module asks for WIDE_N entry probes of one program on every libssl: the first
 * WIDE_N functions libssl exports at distinct addresses (nm), named as nm prints them
 * (a versioned name is found as such), so that none is missing or folded. Without
 * them, the plain module, and the test skips. */
static int setup_wide(void **state)
{
	FILE *nm = access(LIBSSL, R_OK) ? NULL : popen("nm -D --defined-only " LIBSSL, "r");
	char line[256], type, name[sizeof(wide_names[0])];
	unsigned long long addr, addrs[WIDE_N];
	size_t n = 0, i;

	while (nm && n < WIDE_N && fgets(line, sizeof(line), nm)) {
		if (sscanf(line, "%llx %c %199s", &addr, &type, name) != 3 || type != 'T' ||
		    strncmp(name, "SSL_", 4))
			continue;
		for (i = 0; i < n && addrs[i] != addr; i++)
			;
		if (i < n)
			continue; /* an alias, or another version of a name taken */
		addrs[n] = addr;
		snprintf(wide_names[n], sizeof(wide_names[n]), "%s", name);
		wide_specs[n] = (struct bpftel_uprobe_spec){SHLIB_LIB_SSL, "mt_uprobe",
							    wide_names[n], false};
		n++;
	}
	if (nm)
		pclose(nm);
	wide_ready = n == WIDE_N;
	return wide_ready ? setup_with(state, wide_specs, WIDE_N) : setup(state);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	struct bpftel_obj_counts now;

	bpftel_manager__free(f->mgr);
	bpftel_uprobes__free(f->up);
	bpftel_sharedlibs__free(f->sl);
	test_module_free(f->usm);
	bpftel_test_settle_objects(&f->base, &now);
	assert_objects_back(&f->base, &now);
	free(f);
	return 0;
}

/* Start `sh -c script` and return its pid; it is killed by stop_child. */
static pid_t start_child(const char *script)
{
	pid_t pid = fork();

	if (pid == 0) {
		/* Dies with the test even when an assertion skips stop_child. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl("/bin/sh", "sh", "-c", script, (char *)NULL);
		_exit(127);
	}
	assert_true(pid > 0);
	return pid;
}

static void stop_child(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* The registry's row for a file of lib whose path ends in suffix, now. */
static bool row_now(struct fixture *f, enum shlib_lib lib, const char *suffix,
		    struct bpftel_uprobe_file_info *row, size_t min_attached)
{
	struct bpftel_uprobe_file_info *rows;
	size_t len = strlen(suffix);
	bool found = false;
	int n, i;

	n = bpftel_uprobes__files(f->up, &rows);
	for (i = 0; i < n && !found; i++) {
		size_t pl = strlen(rows[i].path);

		if (rows[i].lib == lib && pl >= len && !strcmp(rows[i].path + pl - len, suffix) &&
		    rows[i].attached >= min_attached) {
			*row = rows[i];
			found = true;
		}
	}
	free(rows);
	return found;
}

/* The same, waiting for it (30 s at most: attach may be slow under sanitizers). */
static bool find_row(struct fixture *f, enum shlib_lib lib, const char *suffix,
		     struct bpftel_uprobe_file_info *row, size_t min_attached)
{
	int tries;

	for (tries = 0; tries < 3000; tries++) {
		if (row_now(f, lib, suffix, row, min_attached))
			return true;
		usleep(10000);
	}
	return false;
}

/* Wait (30 s at most) until pid maps a file whose path ends in suffix. */
static bool wait_mapped(pid_t pid, const char *suffix)
{
	char path[64], line[512];
	int tries;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	for (tries = 0; tries < 3000; tries++) {
		f = fopen(path, "re");
		while (f && fgets(line, sizeof(line), f)) {
			line[strcspn(line, "\n")] = '\0';
			if (strlen(line) > strlen(suffix) &&
			    !strcmp(line + strlen(line) - strlen(suffix), suffix)) {
				fclose(f);
				return true;
			}
		}
		if (f)
			fclose(f);
		usleep(10000);
	}
	return false;
}

static unsigned int links_now(void)
{
	struct bpftel_obj_counts c;

	bpftel_test_count_objects(&c);
	return c.links;
}

/* The links the registry holds, in all its rows. */
static unsigned int registry_links(struct fixture *f)
{
	struct bpftel_uprobe_file_info *rows;
	unsigned int links = 0;
	int n, i;

	n = bpftel_uprobes__files(f->up, &rows);
	for (i = 0; i < n; i++)
		links += rows[i].links;
	free(rows);
	return links;
}

static void test_python_ssl_after_start_then_exit(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobe_file_info row;
	struct bpftel_uprobes_refusals ref;
	unsigned int links_before;
	int released, kept;
	__u64 scans;
	pid_t child;
	size_t i;

	if (access(PYTHON, X_OK) || access(LIBSSL, R_OK))
		skip();
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	links_before = links_now() - registry_links(f);
	child = start_child("exec " PYTHON " -c 'import ssl, time; time.sleep(3600)'");
	assert_true(find_row(f, SHLIB_LIB_SSL, "libssl.so.3", &row, 2));
	assert_string_equal(row.module, "usm");
	assert_int_equal(row.attached, 2);
	assert_int_equal(row.failed, 0);
	assert_true(row.nprocs >= 1);
	/* Two entry probes of one program: one multi-uprobe link, or two perf-event ones. */
	assert_non_null(row.link_mode);
	assert_int_equal(row.links, !strcmp(row.link_mode, "multi") ? 1 : 2);
	assert_int_equal(links_now(), links_before + registry_links(f)); /* row's, others' */
	/*
	 * libssl's row can come before libcrypto's is registered (its open runs on a thread
	 * of its own): wait for both before the sweep counts them.
	 */
	assert_true(find_row(f, SHLIB_LIB_CRYPTO, "libcrypto.so.3", &row, 0));

	/*
	 * Last user gone: the sweep finds the files idle, their grace over (none here).
	 * libcrypto's row holds no link (no point of this module's): dropped at once.
	 * libssl's links wait for a /proc scan (a process that maps the file without the
	 * watcher having said so, a forked child, would keep them); after it, the sweep
	 * hands them to the reaper. A row another process of the host holds meanwhile
	 * stays, without this one.
	 */
	stop_child(child);
	bpftel_uprobes__refusals(f->up, &ref);
	scans = ref.idle_scans;
	released = bpftel_uprobes__sweep(f->up);
	assert_true(released <= 1);
	assert_true(row_now(f, SHLIB_LIB_SSL, "libssl.so.3", &row, 0));
	bpftel_uprobes__refusals(f->up, &ref);
	if (!row.nprocs) /* no other process of the host listed: its links wait for a scan */
		assert_true(ref.idle_scans > scans);
	assert_true(bpftel_uprobes__scan(f->up) >= 0);
	released += bpftel_uprobes__sweep(f->up);
	bpftel_links_settle();
	kept = 0;
	if (row_now(f, SHLIB_LIB_SSL, "libssl.so.3", &row, 0)) {
		kept++;
		for (i = 0; i < row.nprocs && i < sizeof(row.pids) / sizeof(row.pids[0]); i++) {
			if (row.pids[i] == (__u32)child)
				fail_msg("still tracked after its process (%d) exited: %s, %zu "
					 "processes",
					 child, row.path, row.nprocs);
		}
	}
	kept += row_now(f, SHLIB_LIB_CRYPTO, "libcrypto.so.3", &row, 0);
	/* Each released or kept; a row dropped can be back, listed by the scan for
	 * another process of the host. */
	assert_true(released + kept >= 2 && released + kept <= 3);
	for (i = 0; i < 3000 && links_now() != links_before + registry_links(f); i++)
		usleep(10000);
	assert_int_equal(links_now(), links_before + registry_links(f));
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
}

/* The processes of one file keep the path they named it by, the newest 8 only (a path
 * is up to 4 KiB, and any user makes pairs of a file and a process). With only older
 * ones left, the file is reopened through their mappings: the module, restarted,
 * attaches to it again. */
static void test_older_processes_reopen_by_mapping(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobe_file_info row;
	char dir[64], own[96], path[160], script[384];
	pid_t kids[10];
	int i, k, tries;

	if (access(PYTHON, X_OK) || access(LIBSSL, R_OK))
		skip();
	snprintf(dir, sizeof(dir), "/tmp/bpftel-paths-%d", getpid());
	snprintf(own, sizeof(own), "%s/libssl.so.3", dir);
	snprintf(script, sizeof(script), "mkdir -p %s && cp %s %s", dir, LIBSSL, own);
	assert_int_equal(system(script), 0);
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	/* One after the other, each by a path of its own to the same file. */
	for (i = 0; i < 10; i++) {
		k = snprintf(path, sizeof(path), "%s/", dir);
		for (tries = 0; tries < i; tries++)
			k += snprintf(path + k, sizeof(path) - k, "./");
		snprintf(path + k, sizeof(path) - k, "libssl.so.3");
		snprintf(script, sizeof(script),
			 "exec " PYTHON " -c 'import ctypes, time; ctypes.CDLL(\"%s\"); "
			 "time.sleep(3600)'",
			 path);
		kids[i] = start_child(script);
		for (tries = 0; tries < 3000; tries++) {
			if (row_now(f, SHLIB_LIB_SSL, own, &row, 2) && row.nprocs == (size_t)i + 1)
				break;
			usleep(10000);
		}
		assert_int_equal(row.nprocs, i + 1);
	}
	/* The 8 newest go: the two left named the file by paths no longer kept. */
	for (i = 2; i < 10; i++)
		stop_child(kids[i]);
	for (tries = 0; tries < 3000; tries++) {
		bpftel_uprobes__sweep(f->up);
		if (row_now(f, SHLIB_LIB_SSL, own, &row, 0) && row.nprocs == 2)
			break;
		usleep(10000);
	}
	assert_int_equal(row.nprocs, 2);
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	assert_true(find_row(f, SHLIB_LIB_SSL, own, &row, 2));
	assert_int_equal(row.attached, 2);
	assert_int_equal(row.nprocs, 2);
	stop_child(kids[0]);
	stop_child(kids[1]);
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
	snprintf(script, sizeof(script), "rm -rf %s", dir);
	assert_int_equal(system(script), 0);
}

/* The agent maps libraries of the watched sets itself (libmicrohttpd's libgnutls, a file
 * the registry reads): the scan does not list it as their user, which would keep the
 * file's row, and its links, while the agent runs. A process it forked with the same
 * mapping is listed, alone. */
static void test_scan_skips_the_agent(void **state)
{
	struct fixture *f = *state;
	char dir[] = "/tmp/bpftel-self-XXXXXX", path[64];
	struct bpftel_uprobe_file_info row;
	struct stat st;
	void *map;
	pid_t child;
	int fd;

	if (access(LIBSSL, R_OK))
		skip();
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/libssl.so.3", dir);
	copy_over(LIBSSL, path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(map != MAP_FAILED);
	close(fd);
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	assert_true(bpftel_uprobes__scan(f->up) >= 0);
	assert_false(row_now(f, SHLIB_LIB_SSL, path, &row, 0));
	child = fork();
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		pause();
		_exit(0);
	}
	assert_true(child > 0);
	assert_true(bpftel_uprobes__scan(f->up) >= 1);
	assert_true(find_row(f, SHLIB_LIB_SSL, path, &row, 2));
	assert_int_equal(row.nprocs, 1);
	assert_int_equal(row.pids[0], (__u32)child);
	stop_child(child);
	munmap(map, (size_t)st.st_size);
	unlink(path);
	rmdir(dir);
}

/* A process with 30000 mappings of a file whose path is 250 bytes long (~12 MB of
 * maps text, which the kernel writes out for every read): a /proc scan reads 8 MiB of
 * it at most, says so (scan_maps_cut), and goes on. */
static void test_scan_reads_maps_bounded(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobes_refusals ref, before_ref;
	char dir[300], file[400];
	long page = sysconf(_SC_PAGESIZE);
	int sync[2], fd, i;
	pid_t child;
	__u64 before;
	char *area;

	snprintf(dir, sizeof(dir), "/tmp/bpftel-maps-%d-%0200d", (int)getpid(), 0);
	snprintf(file, sizeof(file), "%s/f", dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	fd = open(file, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, page), 0);
	assert_int_equal(pipe(sync), 0);
	child = fork();
	assert_true(child >= 0);
	if (!child) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* Every other page the file, between them the reserved anonymous area: no
		 * two file mappings next to each other, none merged. */
		area = mmap(NULL, 60000 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		for (i = 0; area != MAP_FAILED && i < 30000; i++) {
			if (mmap(area + 2 * i * page, page, PROT_READ, MAP_SHARED | MAP_FIXED, fd,
				 0) == MAP_FAILED)
				_exit(1);
		}
		if (write(sync[1], "r", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(fd);
	close(sync[1]);
	assert_int_equal(read(sync[0], &i, 1), 1);
	close(sync[0]);
	bpftel_uprobes__refusals(f->up, &before_ref);
	before = before_ref.scan_maps_cut;
	assert_true(bpftel_uprobes__scan(f->up) >= 0);
	bpftel_uprobes__refusals(f->up, &ref);
	assert_int_equal(ref.scan_maps_cut, before + 1);
	stop_child(child);
	unlink(file);
	rmdir(dir);
}

static void test_loaded_before_start_found_by_scan(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobe_file_info row;
	pid_t child;

	if (access(PYTHON, X_OK) || access(LIBSSL, R_OK))
		skip();
	child = start_child("exec " PYTHON " -c 'import ssl, time; time.sleep(3600)'");
	/* The watcher is not running yet: only its mapping shows it. */
	assert_true(wait_mapped(child, "libssl.so.3"));
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	assert_true(bpftel_uprobes__scan(f->up) >= 1);
	assert_true(find_row(f, SHLIB_LIB_SSL, "libssl.so.3", &row, 2));
	assert_int_equal(row.attached, 2);
	stop_child(child);
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
}

static void test_dlopen_cudart_detected(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobe_file_info row;
	pid_t child;

	if (access(PYTHON, X_OK) || access(CUDART, R_OK))
		skip(); /* the real libcudart is not on this machine */
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	child = start_child("exec " PYTHON " -c 'import ctypes, time; ctypes.CDLL(\"" CUDART "\"); "
			    "time.sleep(3600)'");
	/* Detected and tracked; the ssl-only module attaches nothing to it. */
	assert_true(find_row(f, SHLIB_LIB_CUDART, "libcudart.so.13", &row, 0));
	assert_int_equal(row.attached, 0);
	assert_true(row.nprocs >= 1);
	stop_child(child);
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
}

static void test_private_mount_namespace(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobe_file_info row;
	struct stat host;
	char script[1024];
	pid_t child;

	if (access(PYTHON, X_OK) || access(LIBSSL, R_OK) || access("/usr/bin/unshare", X_OK))
		skip();
	assert_int_equal(stat(LIBSSL, &host), 0);
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	/* /bpftel-private exists only inside the child's mount namespace. */
	snprintf(script, sizeof(script),
		 "exec unshare -m --propagation private sh -c 'mkdir -p /bpftel-private && "
		 "mount -t tmpfs none /bpftel-private && cp %s /bpftel-private/libssl.so.3 && "
		 "exec %s -c \"import ctypes, time; ctypes.CDLL(\\\"/bpftel-private/"
		 "libssl.so.3\\\"); time.sleep(3600)\"'",
		 LIBSSL, PYTHON);
	child = start_child(script);
	assert_true(find_row(f, SHLIB_LIB_SSL, "/bpftel-private/libssl.so.3", &row, 2));
	assert_int_equal(row.attached, 2);
	assert_false(row.ino == host.st_ino && row.dev == host.st_dev);
	assert_int_equal(access("/bpftel-private/libssl.so.3", F_OK), -1); /* not ours */
	stop_child(child);
	rmdir("/bpftel-private");
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
}

/*
 * In a mount namespace of its own, with $d the directory dir and $lib the system's
 * libssl: run the shell steps setup, then a python3 that loads the libssl at dir/lib.
 * The registry probes it, its identity matched through whatever the steps made.
 */
static void probed_in_namespace(struct fixture *f, const char *dir, const char *setup,
				const char *lib)
{
	struct bpftel_uprobes_refusals ref;
	struct bpftel_uprobe_file_info row;
	char script[1600], path[256];
	pid_t child;

	snprintf(path, sizeof(path), "%s/%s", dir, lib);
	snprintf(script, sizeof(script),
		 "exec unshare -m --propagation private sh -c 'set -e; d=%s; lib=%s; "
		 "mkdir -p $d && %s && exec %s -c \"import ctypes, time; "
		 "ctypes.CDLL(\\\"%s\\\"); time.sleep(3600)\"'",
		 dir, LIBSSL, setup, PYTHON, path);
	child = start_child(script);
	assert_true(find_row(f, SHLIB_LIB_SSL, path, &row, 2));
	assert_int_equal(row.attached, 2);
	assert_int_equal(row.failed, 0);
	/* The identity matched through it. Not the scans asked for (stale): the setup's
	 * own cp reads the system's libssl, and may exit while the registry attaches to
	 * it, which asks one for that file. */
	bpftel_uprobes__refusals(f->up, &ref);
	assert_int_equal(ref.count[BPFTEL_REFUSED_IDENTITY_CHANGED], 0);
	stop_child(child);
	rmdir(dir); /* the mounts went with the child's namespace */
}

/* A container's view: libssl in the lower layer of an overlayfs mount. The uprobe goes
 * on the file the process maps (the kernel resolves the overlay to the real inode). */
static void test_overlayfs_library(void **state)
{
	struct fixture *f = *state;

	if (access(PYTHON, X_OK) || access(LIBSSL, R_OK) || access("/usr/bin/unshare", X_OK))
		skip();
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	probed_in_namespace(f, "/tmp/bpftel-ovl",
			    "mount -t tmpfs none $d && mkdir $d/lower $d/upper $d/work $d/merged && "
			    "cp $lib $d/lower/libssl.so.3 && mount -t overlay overlay "
			    "-o lowerdir=$d/lower,upperdir=$d/upper,workdir=$d/work $d/merged",
			    "merged/libssl.so.3");
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
}

/*
 * The same, with the overlay's layers on two file systems (the lower one on a tmpfs of
 * its own) and no xino: stat of an overlay file then gives the lower layer's
 * pseudo-device, while the kernel's inode, which the open was seen with, is on the
 * overlay's own device. The identity is matched through what the kernel says of the fd
 * (its inode number and mount), not refused as identity_changed.
 */
static void test_overlayfs_layers_on_two_fs(void **state)
{
	struct fixture *f = *state;

	if (access(PYTHON, X_OK) || access(LIBSSL, R_OK) || access("/usr/bin/unshare", X_OK))
		skip();
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	probed_in_namespace(f, "/tmp/bpftel-ovl2",
			    "mount -t tmpfs none $d && mkdir $d/lowerfs $d/upper $d/work $d/merged && "
			    "mount -t tmpfs none $d/lowerfs && mkdir $d/lowerfs/lower && "
			    "cp $lib $d/lowerfs/lower/libssl.so.3 && mount -t overlay overlay "
			    "-o xino=off,lowerdir=$d/lowerfs/lower,upperdir=$d/upper,workdir=$d/work "
			    "$d/merged",
			    "merged/libssl.so.3");
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
}

/* A btrfs file system made in img (a file of 300 MB), for a loop mount; the test is
 * skipped where that cannot be: mkfs.btrfs (btrfs-progs, a test package), a loop
 * device, python3, libssl and unshare are needed. */
static void btrfs_image_or_skip(const char *img)
{
	char cmd[256];

	if (access(PYTHON, X_OK) || access(LIBSSL, R_OK) || access("/usr/bin/unshare", X_OK) ||
	    access("/usr/sbin/mkfs.btrfs", X_OK) || access("/dev/loop-control", F_OK))
		skip();
	/* Loaded before the watcher's object is, whose programs see btrfs only if its
	 * types are there then (a module's BTF): the kernel side names no subvolume else. */
	if (access("/sys/fs/btrfs", F_OK) && system("modprobe -q btrfs > /dev/null 2>&1"))
		skip(); /* no btrfs here */
	unlink(img);
	snprintf(cmd, sizeof(cmd), "truncate -s 300M %s && mkfs.btrfs -q %s > /dev/null 2>&1",
		 img, img);
	if (system(cmd))
		skip(); /* no btrfs here */
}

/*
 * A library on a btrfs subvolume (Fedora's and openSUSE's root is one): stat gives the
 * subvolume's device, the kernel's inode its file system's. The
 * identity is matched as the kernel has it, not refused as identity_changed. Needs
 * mkfs.btrfs (btrfs-progs, a test package) and a loop device.
 */
static void test_btrfs_subvolume_library(void **state)
{
	struct fixture *f = *state;

	btrfs_image_or_skip("/tmp/bpftel-btrfs.img");
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	probed_in_namespace(f, "/tmp/bpftel-btrfs",
			    "mount -o loop $d.img $d && btrfs subvolume create $d/sub > /dev/null && "
			    "cp $lib $d/sub/libssl.so.3",
			    "sub/libssl.so.3");
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
	unlink("/tmp/bpftel-btrfs.img");
}

/*
 * Two btrfs subvolumes' copies of one library, as two containers of one image have on a
 * host whose storage is btrfs (each container's root a snapshot of the image's): the
 * kernel gives both the file system's device and the same inode number, yet they are
 * two inodes, each probed on its own. A process maps each; both are attached, each in
 * a row of its own, or the second container's TLS would go unseen, and any user who can
 * make a subvolume could keep a library of another's from being probed.
 */
static void test_btrfs_snapshot_library(void **state)
{
	struct bpftel_uprobe_file_info sub, snap;
	struct bpftel_uprobes_refusals ref;
	struct fixture *f = *state;
	char script[1600];
	pid_t child;

	btrfs_image_or_skip("/tmp/bpftel-btrfs2.img");
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	/* The process maps sub's copy, its child (killed with it) the snapshot's. */
	snprintf(script, sizeof(script),
		 "exec unshare -m --propagation private sh -c 'set -e; d=/tmp/bpftel-btrfs2; "
		 "mkdir -p $d && mount -o loop $d.img $d && "
		 "btrfs subvolume create $d/sub > /dev/null && cp %s $d/sub/libssl.so.3 && "
		 "btrfs subvolume snapshot $d/sub $d/snap > /dev/null && "
		 "exec %s -c \"import ctypes, os, time\n"
		 "if os.fork() == 0:\n"
		 "    ctypes.CDLL(None).prctl(1, 9)\n"
		 "    ctypes.CDLL(\\\"$d/snap/libssl.so.3\\\")\n"
		 "else:\n"
		 "    ctypes.CDLL(\\\"$d/sub/libssl.so.3\\\")\n"
		 "time.sleep(3600)\"'",
		 LIBSSL, PYTHON);
	child = start_child(script);
	assert_true(find_row(f, SHLIB_LIB_SSL, "/tmp/bpftel-btrfs2/sub/libssl.so.3", &sub, 2));
	assert_true(find_row(f, SHLIB_LIB_SSL, "/tmp/bpftel-btrfs2/snap/libssl.so.3", &snap, 2));
	assert_int_equal(sub.attached, 2);
	assert_int_equal(snap.attached, 2);
	assert_int_equal(sub.nprocs, 1);
	assert_int_equal(snap.nprocs, 1);
	/* One identity as the kernel has it, two subvolumes. */
	assert_true(sub.dev == snap.dev && sub.ino == snap.ino && sub.sdev != snap.sdev);
	bpftel_uprobes__refusals(f->up, &ref); /* neither taken for the other */
	assert_int_equal(ref.count[BPFTEL_REFUSED_IDENTITY_CHANGED], 0);
	stop_child(child);
	rmdir("/tmp/bpftel-btrfs2");
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
	unlink("/tmp/bpftel-btrfs2.img");
}

/* How many rows of the registry are of a library of lib under dir, and the one. */
static int rows_under(struct fixture *f, enum shlib_lib lib, const char *dir,
		      struct bpftel_uprobe_file_info *row)
{
	struct bpftel_uprobe_file_info *rows;
	int n, i, found = 0;

	n = bpftel_uprobes__files(f->up, &rows);
	for (i = 0; i < n; i++) {
		if (rows[i].lib == lib && !strncmp(rows[i].path, dir, strlen(dir))) {
			*row = rows[i];
			found++;
		}
	}
	free(rows);
	return found;
}

/*
 * Two uses of a btrfs subvolume's library, on a file system made in d.img with the
 * library in subvolume d/sub: a process maps d/first; once the registry has it,
 * d/second is mapped by its child (killed with it), or by the process itself when
 * one_process, setup having made what leads there. Returns how many rows of libraries
 * under d there are once both uses are known, in one row or two (30 s at most), and the
 * one in *row (of two, the second's once attached); -1 when the first, or the second's
 * row, was not found.
 */
static int btrfs_two_uses(struct fixture *f, const char *d, const char *setup,
			  const char *first_path, const char *second, bool one_process,
			  struct bpftel_uprobe_file_info *row)
{
	char script[1600], img[64], dir[64], go[64], first[80], path[96];
	int n = -1, i;
	pid_t child;

	snprintf(img, sizeof(img), "%s.img", d);
	snprintf(dir, sizeof(dir), "%s/", d);
	snprintf(go, sizeof(go), "%s.go", d);
	snprintf(first, sizeof(first), "%s/%s", d, first_path);
	btrfs_image_or_skip(img);
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	unlink(go);
	/* A child forked before the first map: its own map, not inherited. */
	snprintf(script, sizeof(script),
		 "exec unshare -m --propagation private sh -c 'set -e; d=%s; "
		 "mkdir -p $d && mount -o loop $d.img $d && "
		 "btrfs subvolume create $d/sub > /dev/null && cp %s $d/sub/libssl.so.3 && "
		 "%s "
		 "exec %s -c \"import ctypes, os, time\n"
		 "def second():\n"
		 "    while not os.path.exists(\\\"$d.go\\\"):\n"
		 "        time.sleep(0.05)\n"
		 "    ctypes.CDLL(\\\"$d/%s\\\")\n"
		 "if %s and os.fork() == 0:\n"
		 "    ctypes.CDLL(None).prctl(1, 9)\n"
		 "    second()\n"
		 "else:\n"
		 "    ctypes.CDLL(\\\"$d/%s\\\")\n"
		 "    if %s:\n"
		 "        second()\n"
		 "time.sleep(3600)\"'",
		 d, LIBSSL, setup, PYTHON, second, one_process ? "False" : "True", first_path,
		 one_process ? "True" : "False");
	child = start_child(script);
	if (find_row(f, SHLIB_LIB_SSL, first, row, 2)) {
		fclose(fopen(go, "w"));
		for (i = 0; i < 3000; i++) {
			n = rows_under(f, SHLIB_LIB_SSL, dir, row);
			if (n > 1 || row->nprocs >= 2)
				break;
			usleep(10000);
		}
		/* Two rows: the second's, once attached. */
		snprintf(path, sizeof(path), "%s/%s", d, second);
		if (n > 1 && !find_row(f, SHLIB_LIB_SSL, path, row, 2))
			n = -1;
	}
	stop_child(child);
	rmdir(d);
	unlink(go);
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
	unlink(img);
	return n;
}

/* An overlay whose lower layer is the subvolume d/sub, at d/merged: a container's
 * view of a host directory. */
#define OVERLAY_OVER_SUB                                                               \
	"mkdir $d/up $d/work $d/merged && mount -t overlay overlay "                   \
	"-o lowerdir=$d/sub,upperdir=$d/up,workdir=$d/work $d/merged && "

/*
 * A library first mapped through an overlay over a subvolume, then a snapshot's copy,
 * by another process: one inode number and file system device, two files. The first
 * row knows its subvolume (the kernel tells it through the agent's mapping, not stat,
 * which shows the overlay's): the second is a row of its own, attached, not answered
 * from the first (whose subvolume, not known, any file of those numbers would be taken
 * for: a user's own subvolume and overlay could keep another's library unprobed).
 */
static void test_btrfs_overlay_then_snapshot(void **state)
{
	struct bpftel_uprobe_file_info row;

	assert_int_equal(btrfs_two_uses(*state, "/tmp/bpftel-btrfs6",
					OVERLAY_OVER_SUB
					"btrfs subvolume snapshot $d/sub $d/snap > /dev/null && ",
					"merged/libssl.so.3", "snap/libssl.so.3", false, &row),
			 2);
	assert_int_equal(row.nprocs, 1);
	assert_int_equal(row.attached, 2);
}

/*
 * One process maps a subvolume's copy of a library, then a snapshot's: one inode number
 * and file system device, two files. The second is its own row, attached, not answered
 * from the row the process is in already (its calls would go unseen).
 */
static void test_btrfs_one_process_two_subvolumes(void **state)
{
	struct bpftel_uprobe_file_info row;

	assert_int_equal(btrfs_two_uses(*state, "/tmp/bpftel-btrfs5",
					"btrfs subvolume snapshot $d/sub $d/snap > /dev/null && ",
					"sub/libssl.so.3", "snap/libssl.so.3", true, &row),
			 2);
	assert_int_equal(row.nprocs, 1);
	assert_int_equal(row.attached, 2);
}

/*
 * A new process mapping a btrfs subvolume's library the registry holds: the kernel
 * names the file's subvolume (bpf/lib/btrfs_subvol.h), so the process is answered from
 * the row, not by opening the file again (as on every other file system): Fedora's and
 * openSUSE's root is a subvolume, and there every process start would cost an open.
 */
static void test_btrfs_new_process_from_row(void **state)
{
	struct bpftel_uprobe_file_info row;

	assert_int_equal(btrfs_two_uses(*state, "/tmp/bpftel-btrfs4", "", "sub/libssl.so.3",
					"sub/libssl.so.3", false, &row),
			 1);
	assert_int_equal(row.nprocs, 2);
	assert_int_equal(row.attached, 2);
	assert_int_equal(row.opens, 1); /* the first process's only */
}

/*
 * One btrfs file reached two ways: by its path in its subvolume, and through an overlay
 * whose lower layer is that subvolume (a container's view of a host directory). Stat of
 * the fd opened through the overlay cannot tell the subvolume (the kernel can, through
 * a mapping of the agent's); it is still the one inode, one row with both processes,
 * probed once: not two rows, every call seen twice.
 */
static void test_btrfs_file_through_overlay(void **state)
{
	struct bpftel_uprobe_file_info row;

	assert_int_equal(btrfs_two_uses(*state, "/tmp/bpftel-btrfs3", OVERLAY_OVER_SUB,
					"sub/libssl.so.3", "merged/libssl.so.3", false, &row),
			 1);
	assert_int_equal(row.nprocs, 2);
	assert_int_equal(row.attached, 2);
}

/*
 * Two overlays of one lower layer (two containers of one image): the kernel maps, and
 * attaches uprobes to, the layer's one file for both, while stat (newer kernels) shows two
 * overlay files. One row, both processes in it, one set of links: two would run every
 * probe twice, and every call be counted twice.
 */
static void test_overlayfs_two_mounts_one_file(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobe_file_info row;
	unsigned int links_before;
	char script[1600];
	int tries, n;
	pid_t child;

	if (access(PYTHON, X_OK) || access(LIBSSL, R_OK) || access("/usr/bin/unshare", X_OK))
		skip();
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	links_before = links_now() - registry_links(f);
	snprintf(script, sizeof(script),
		 "exec unshare -m --propagation private sh -c 'set -e; d=/tmp/bpftel-ovl3; "
		 "mkdir -p $d && mount -t tmpfs none $d && mkdir $d/lower $d/u1 $d/w1 $d/u2 "
		 "$d/w2 $d/m1 $d/m2 && cp %s $d/lower/libssl.so.3 && for i in 1 2; do mount -t "
		 "overlay overlay -o lowerdir=$d/lower,upperdir=$d/u$i,workdir=$d/w$i $d/m$i; "
		 "done; %s -c \"import ctypes, time; ctypes.CDLL(None).prctl(1, 9); "
		 "ctypes.CDLL(\\\"/tmp/bpftel-ovl3/m1/libssl.so.3\\\"); time.sleep(3600)\" & "
		 "exec %s -c \"import ctypes, time; ctypes.CDLL(\\\"/tmp/bpftel-ovl3/m2/"
		 "libssl.so.3\\\"); time.sleep(3600)\"'",
		 LIBSSL, PYTHON, PYTHON);
	child = start_child(script);
	/* Both processes in it: one row, or two if the layer's file was not seen as one. */
	for (tries = 0; tries < 3000; tries++) {
		n = rows_under(f, SHLIB_LIB_SSL, "/tmp/bpftel-ovl3/", &row);
		if (n >= 2 || (n == 1 && row.nprocs >= 2 && row.attached >= 2))
			break;
		usleep(10000);
	}
	assert_int_equal(rows_under(f, SHLIB_LIB_SSL, "/tmp/bpftel-ovl3/", &row), 1);
	assert_int_equal(row.nprocs, 2);
	assert_int_equal(row.attached, 2);
	assert_non_null(row.link_mode);
	assert_int_equal(row.links, !strcmp(row.link_mode, "multi") ? 1 : 2);
	/* No other set in the kernel: its links are all the registry holds (another
	 * process of the host may load the system's libssl meanwhile: its row's count). */
	for (tries = 0; tries < 3000 && links_now() != links_before + registry_links(f); tries++)
		usleep(10000);
	assert_int_equal(links_now(), links_before + registry_links(f));
	stop_child(child);
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
	/* The other python dies with its parent; the mounts go with the last of them. */
	for (tries = 0; tries < 3000 && rmdir("/tmp/bpftel-ovl3") && errno == EBUSY; tries++)
		usleep(10000);
}

static long ssl_write_at(const char *path, unsigned char code[4]);

/* The byte at file offset off of the libssl.so.3 that pid maps, as the process reads
 * it: 0xcc where a uprobe is on the file it maps. -1 if it maps none there. */
static int code_byte_in(pid_t pid, long off)
{
	unsigned long start, end, pgoff;
	char path[64], line[512];
	unsigned char b;
	int byte = -1, fd;
	FILE *maps;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	maps = fopen(path, "re");
	while (maps && byte < 0 && fgets(line, sizeof(line), maps)) {
		line[strcspn(line, "\n")] = '\0';
		if (strlen(line) < 12 || strcmp(line + strlen(line) - 12, "/libssl.so.3") ||
		    sscanf(line, "%lx-%lx %*s %lx", &start, &end, &pgoff) != 3 ||
		    (unsigned long)off < pgoff || (unsigned long)off - pgoff >= end - start)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && pread(fd, &b, 1, (off_t)(start + off - pgoff)) == 1)
			byte = b;
		if (fd >= 0)
			close(fd);
	}
	if (maps)
		fclose(maps);
	return byte;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

/* Wait (30 s at most) until the file at path exists. */
static bool wait_exists(const char *path)
{
	int tries;

	for (tries = 0; tries < 3000 && access(path, F_OK); tries++)
		usleep(10000);
	return !access(path, F_OK);
}

/* The registry's row that holds pid (30 s at most for it to have min_attached points). */
static bool row_of_pid(struct fixture *f, pid_t pid, struct bpftel_uprobe_file_info *row,
		       size_t min_attached)
{
	struct bpftel_uprobe_file_info *rows;
	bool found = false;
	int tries, n, i;
	size_t k;

	for (tries = 0; tries < 3000 && !found; tries++) {
		if (tries)
			usleep(10000);
		n = bpftel_uprobes__files(f->up, &rows);
		for (i = 0; i < n && !found; i++) {
			for (k = 0; k < rows[i].nprocs && k < 8; k++) {
				if (rows[i].lib == SHLIB_LIB_SSL && rows[i].pids[k] == (__u32)pid &&
				    rows[i].attached >= min_attached) {
					*row = rows[i];
					found = true;
				}
			}
		}
		free(rows);
	}
	return found;
}

/* Wait (30 s at most) until pid is in a row of n processes with both points attached. */
static bool wait_row_of_pid(struct fixture *f, pid_t pid, size_t n)
{
	struct bpftel_uprobe_file_info row;
	int tries;

	for (tries = 0; tries < 3000; tries++) {
		if (row_of_pid(f, pid, &row, 2) && row.nprocs == n)
			return true;
		usleep(10000);
	}
	return false;
}

/*
 * Three overlays of one lower layer (three containers of one image), one process in
 * each, loaded in turn; then overlays 1 and 3 are copied up (a chmod: each one's file is
 * now a private copy, with the same overlay inode and stat). The processes still map
 * the layer's file. A process that loads the library in overlay 1 since maps its copy:
 * a file of its own, though the kernel names it by the overlay inode the layer's row
 * was first seen through. The module restarts: the layer's file is reopened through
 * its newest process's path, which leads to overlay 3's copy now: refused
 * (identity_changed); overlay 2's process reaches it. Before, the new process joined
 * the layer's row, unprobed, and at the restart the layer's probes went on overlay 3's
 * copy: the three processes that map the layer ran unprobed.
 */
static void test_overlayfs_copy_up_keeps_layer(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobes_refusals ref;
	struct bpftel_uprobe_file_info row;
	pid_t child, pid[4] = {0};
	unsigned char code[4];
	char script[1024], upper[128], flag[64];
	int tries, i, fd;
	__u64 changed;
	FILE *up;
	long off;

	if (access(PYTHON, X_OK) || access(LIBSSL, R_OK) || access("/usr/bin/unshare", X_OK))
		skip();
	off = ssl_write_at(LIBSSL, code);
	system("rm -f /tmp/bpftel-ovl4.*");
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	/* One process: load the library at argv[1], say so, wait. */
	write_text("/tmp/bpftel-ovl4.load", "import ctypes, sys, time\n"
					    "ctypes.CDLL(None).prctl(1, 9)\n"
					    "ctypes.CDLL(sys.argv[1])\n"
					    "print(1, flush=True)\n"
					    "time.sleep(3600)\n");
	/* A process in overlay 1, 2 and 3, each on the test's word (a file), the copy-ups,
	 * and one more process in overlay 1; their pids in .up. */
	write_text("/tmp/bpftel-ovl4.run",
		   "import os, subprocess, sys, time\n"
		   "d = '/tmp/bpftel-ovl4'\n"
		   "pids = []\n"
		   "def load(i, go):\n"
		   "    while not os.path.exists(f'{d}.{go}'):\n"
		   "        time.sleep(0.01)\n"
		   "    c = subprocess.Popen([sys.executable, f'{d}.load', f'{d}/m{i}/libssl.so.3'],"
		   " stdout=subprocess.PIPE)\n"
		   "    c.stdout.readline()\n"
		   "    pids.append(str(c.pid))\n"
		   "load(1, 'load')\n"
		   "load(2, 'go2')\n"
		   "load(3, 'go3')\n"
		   "while not os.path.exists(f'{d}.cp'):\n"
		   "    time.sleep(0.01)\n"
		   "os.chmod(f'{d}/m1/libssl.so.3', 0o755)\n"
		   "os.chmod(f'{d}/m3/libssl.so.3', 0o755)\n"
		   "load(1, 'cp')\n"
		   "with open(f'{d}.pids', 'w') as f:\n"
		   "    f.write(' '.join(pids))\n"
		   "os.rename(f'{d}.pids', f'{d}.up')\n"
		   "time.sleep(3600)\n");
	snprintf(script, sizeof(script),
		 "exec unshare -m --propagation private sh -c 'set -e; d=/tmp/bpftel-ovl4; "
		 "mkdir -p $d && mount -t tmpfs none $d && mkdir $d/lower && cp %s "
		 "$d/lower/libssl.so.3 && for i in 1 2 3; do mkdir $d/u$i $d/w$i $d/m$i && mount "
		 "-t overlay overlay -o lowerdir=$d/lower,upperdir=$d/u$i,workdir=$d/w$i $d/m$i; "
		 "done; exec %s /tmp/bpftel-ovl4.run'",
		 LIBSSL, PYTHON);
	child = start_child(script);
	/* Each in the layer's row before the next; the row first seen through overlay 1. */
	assert_true(find_row(f, SHLIB_LIB_SSL, "/tmp/bpftel-ovl4/m1/libssl.so.3", &row, 2));
	assert_int_equal(row.nprocs, 1);
	pid[0] = (pid_t)row.pids[0];
	for (i = 2; i <= 3; i++) {
		snprintf(flag, sizeof(flag), "/tmp/bpftel-ovl4.go%d", i);
		close(open(flag, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
		assert_true(wait_row_of_pid(f, pid[0], (size_t)i));
	}
	close(open("/tmp/bpftel-ovl4.cp", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	assert_true(wait_exists("/tmp/bpftel-ovl4.up"));
	up = fopen("/tmp/bpftel-ovl4.up", "re");
	assert_non_null(up);
	assert_int_equal(fscanf(up, "%d %d %d %d", &pid[0], &pid[1], &pid[2], &pid[3]), 4);
	fclose(up);
	/* The copy is there, in overlay 1's upper layer. */
	snprintf(upper, sizeof(upper), "/proc/%d/root/tmp/bpftel-ovl4/u1/libssl.so.3",
		 (int)pid[3]);
	assert_int_equal(access(upper, F_OK), 0);
	/* The copy's process in a row of its own, probed on the file it maps. */
	assert_true(wait_row_of_pid(f, pid[3], 1));
	assert_int_equal(code_byte_in(pid[3], off), 0xcc);
	assert_true(row_of_pid(f, pid[0], &row, 2));
	assert_int_equal(row.nprocs, 3);
	assert_int_equal(rows_under(f, SHLIB_LIB_SSL, "/tmp/bpftel-ovl4/", &row), 2);

	/* The copy written in place through overlay 1 (its own bytes again): its probes go,
	 * also where the layer's row watches the same overlay inode, opened through it. */
	snprintf(upper, sizeof(upper), "/proc/%d/root/tmp/bpftel-ovl4/m1/libssl.so.3",
		 (int)pid[3]);
	fd = open(upper, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, code, 1, off), 1);
	close(fd);
	for (tries = 0; tries < 3000 && code_byte_in(pid[3], off) == 0xcc; tries++)
		usleep(10000);
	assert_int_not_equal(code_byte_in(pid[3], off), 0xcc);
	/* The layer's row went with it (which of the two was written, the watch cannot
	 * tell): the next sweeps attach it again for its processes, from what it holds. */
	for (tries = 0; tries < 3000 && code_byte_in(pid[0], off) != 0xcc; tries++) {
		bpftel_uprobes__sweep(f->up);
		usleep(10000);
	}
	assert_int_equal(code_byte_in(pid[0], off), 0xcc);

	/* Restarted: each file reopened through its newest process that reaches it (the
	 * layer's first tried through overlay 1's process, whose path leads to the copy
	 * now: refused once, as the sweeps' reopen was). */
	bpftel_uprobes__refusals(f->up, &ref);
	changed = ref.count[BPFTEL_REFUSED_IDENTITY_CHANGED];
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
	assert_int_not_equal(code_byte_in(pid[0], off), 0xcc);
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	for (tries = 0; tries < 3000; tries++) {
		for (i = 0; i < 4 && code_byte_in(pid[i], off) == 0xcc; i++)
			;
		if (i == 4)
			break;
		usleep(10000);
	}
	for (i = 0; i < 4; i++)
		assert_int_equal(code_byte_in(pid[i], off), 0xcc);
	bpftel_uprobes__refusals(f->up, &ref);
	assert_int_equal(ref.count[BPFTEL_REFUSED_IDENTITY_CHANGED], changed + 1);
	stop_child(child);
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
	system("rm -f /tmp/bpftel-ovl4.*");
	for (tries = 0; tries < 3000 && rmdir("/tmp/bpftel-ovl4") && errno == EBUSY; tries++)
		usleep(10000);
}

/* openat(dirfd, "libssl.so.3") from a process whose cwd is elsewhere: resolved through
 * /proc/<pid>/fd/<dirfd>, checked against the inode the kernel saw opened. */
static void test_relative_to_dirfd(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobes_refusals ref;
	struct bpftel_uprobe_file_info row;
	pid_t child;

	if (access(PYTHON, X_OK) || access(LIBSSL, R_OK))
		skip();
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	child = start_child("cd / && exec " PYTHON " -c 'import os, time; "
			    "d = os.open(\"/lib/x86_64-linux-gnu\", os.O_RDONLY); "
			    "os.open(\"libssl.so.3\", os.O_RDONLY, dir_fd=d); time.sleep(3600)'");
	assert_true(find_row(f, SHLIB_LIB_SSL, "libssl.so.3", &row, 2));
	assert_string_equal(row.path, "libssl.so.3"); /* as the process named it */
	assert_int_equal(row.attached, 2);
	/* Reached by its path, not by a scan (nor refused): whatever else on the host
	 * loads a library meanwhile. */
	bpftel_uprobes__refusals(f->up, &ref);
	assert_int_equal(ref.unreached_scans + ref.climbing_scans, 0);
	assert_int_equal(ref.count[BPFTEL_REFUSED_IDENTITY_CHANGED], 0);
	stop_child(child);
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
}

static void libssl_copy(struct fixture *f, const char *tag, char *dir, size_t dlen, char *path,
			size_t plen);
static void libssl_copy_done(struct fixture *f, const char *dir, const char *path);

/* open("../libssl.so.3") from a process whose cwd is a directory below the library's
 * (LD_LIBRARY_PATH=../lib): a path relative to the cwd is walked beneath it only, so
 * this one is not walked; but it is no refusal (the process stayed in its root): a
 * /proc scan is asked for, and reaches the file through the process's mapping. */
static void test_relative_path_above_cwd_found_by_scan(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobes_refusals ref;
	struct bpftel_uprobe_file_info row;
	char dir[64], path[96], script[512];
	int tries;
	pid_t child;

	if (access(PYTHON, X_OK))
		skip();
	libssl_copy(f, "climb", dir, sizeof(dir), path, sizeof(path));
	snprintf(script, sizeof(script), "%s/bin", dir);
	assert_int_equal(mkdir(script, 0755), 0);
	snprintf(script, sizeof(script),
		 "cd %s/bin && exec " PYTHON " -c 'import ctypes, time; "
		 "ctypes.CDLL(\"../libssl.so.3\"); time.sleep(3600)'",
		 dir);
	child = start_child(script);
	/* Up to 30 s for the open to be handled: the scan it asks, not any other. */
	for (tries = 0; tries < 3000; tries++) {
		bpftel_uprobes__refusals(f->up, &ref);
		if (ref.climbing_scans)
			break;
		usleep(10000);
	}
	assert_int_equal(ref.climbing_scans, 1);
	assert_int_equal(ref.count[BPFTEL_REFUSED_OUTSIDE_ROOT], 0);
	assert_false(row_now(f, SHLIB_LIB_SSL, "libssl.so.3", &row, 0) &&
		     strstr(row.path, dir)); /* not by the path */
	assert_true(wait_mapped(child, "/libssl.so.3"));
	assert_true(bpftel_uprobes__scan(f->up) >= 0);
	assert_true(find_row(f, SHLIB_LIB_SSL, path, &row, 2));
	assert_int_equal(row.nprocs, 1);
	assert_int_equal(row.pids[0], (__u32)child);
	stop_child(child);
	snprintf(script, sizeof(script), "%s/bin", dir);
	rmdir(script);
	libssl_copy_done(f, dir, path);
}

/* A path that leads elsewhere than the file opened (replaced, renamed) is refused. */
static void test_identity_mismatch_refused(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobe_file_info *rows;
	struct bpftel_shlib_detection d = {
		.pid = getpid(),
		.lib = SHLIB_LIB_SSL,
		.libset = SHLIB_LIBSET_CRYPTO,
		.dirfd = AT_FDCWD,
		.path = LIBSSL,
	};
	struct stat other, lib;

	if (access(LIBSSL, R_OK))
		skip();
	assert_int_equal(stat("/etc/hostname", &other), 0);
	assert_int_equal(stat(LIBSSL, &lib), 0);
	d.dev = other.st_dev;
	d.ino = other.st_ino;
	assert_int_equal(bpftel_uprobes__detected(f->up, &d), -ESTALE);
	assert_int_equal(bpftel_uprobes__stale(f->up), 1);
	assert_int_equal(bpftel_uprobes__files(f->up, &rows), 0);
	free(rows);
	d.dev = lib.st_dev;
	d.ino = lib.st_ino;
	assert_int_equal(bpftel_uprobes__detected(f->up, &d), 0);
	assert_int_equal(bpftel_uprobes__stale(f->up), 1);
	assert_int_equal(bpftel_uprobes__files(f->up, &rows), 1);
	assert_int_equal(rows[0].ino, lib.st_ino);
	free(rows);
}

static void test_non_elf_library_recorded_once(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobes_refusals ref;
	struct bpftel_uprobe_file_info row;
	char dir[64], path[96], script[256];
	pid_t a, b;
	int fd;

	if (access(PYTHON, X_OK))
		skip();
	snprintf(dir, sizeof(dir), "/tmp/bpftel-notelf-%d", getpid());
	snprintf(path, sizeof(path), "%s/libssl.so.3", dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	assert_int_equal(write(fd, "not an ELF file\n", 16), 16);
	close(fd);
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	/* Two processes, three opens each: one attempt per (file, module), no retries. */
	snprintf(script, sizeof(script),
		 "exec " PYTHON " -c 'import time; [open(\"%s\") for _ in range(3)]; "
		 "time.sleep(3600)'",
		 path);
	a = start_child(script);
	b = start_child(script);
	assert_true(find_row(f, SHLIB_LIB_SSL, path, &row, 0));
	for (int i = 0; i < 3000 && row.nprocs < 2 && find_row(f, SHLIB_LIB_SSL, path, &row, 0); i++)
		usleep(10000);
	assert_int_equal(row.nprocs, 2);
	assert_int_equal(row.attached, 0);
	/* Refused as a file, once: no per-symbol attempts, no retry for the second
	 * process or the repeated opens. */
	assert_string_equal(row.state, "refused");
	assert_int_equal(row.refused, BPFTEL_REFUSED_NOT_ELF);
	assert_int_equal(row.failed, 0);
	bpftel_uprobes__refusals(f->up, &ref);
	assert_int_equal(ref.count[BPFTEL_REFUSED_NOT_ELF], 1);
	assert_int_equal(ref.nrecent, 1);
	assert_string_equal(ref.recent[0].path, path);
	assert_int_equal(bpftel_module__state(f->usm->module), BPFTEL_MOD_RUNNING);
	stop_child(a);
	stop_child(b);
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
	unlink(path);
	rmdir(dir);
}

/* Files under dir the registry was handed as opened: refused (not ELF), or (elf) its rows
 * of them and the rows that gave way to them; and those it had no room for. */
static __u64 junk_handled(struct fixture *f, const char *dir, bool elf)
{
	struct bpftel_uprobe_file_info row;
	struct bpftel_uprobes_refusals ref;

	bpftel_uprobes__refusals(f->up, &ref);
	return ref.count[BPFTEL_REFUSED_REGISTRY_FULL] +
	       (elf ? (__u64)rows_under(f, SHLIB_LIB_SSL, dir, &row) + ref.unprobed_evicted
		    : ref.count[BPFTEL_REFUSED_NOT_ELF]);
}

/*
 * One process opens 1100 files under dir named like libssl, each a copy of src ("" for
 * four bytes of junk), in 11 batches of 100, each after the registry handled the one
 * before: never more waiting than the watcher's queue holds, however slow the machine.
 * The process then lives on (its rows with it). Returns it.
 */
static pid_t open_junk(struct fixture *f, const char *dir, const char *src)
{
	char script[640];
	int b, i, in[2];
	pid_t junk;

	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(script, sizeof(script),
		 "exec " PYTHON " -c 'import shutil, sys\n"
		 "for i in range(1100):\n"
		 "    p = \"%s/libssl.so.%%d\" %% i\n"
		 "    shutil.copyfile(\"%s\", p) if \"%s\" else open(p, \"w\").write(\"junk\")\n"
		 "    open(p).close()\n"
		 "    if i %% 100 == 99: sys.stdin.readline()'",
		 dir, src, src);
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	junk = fork();
	if (!junk) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(in[0], STDIN_FILENO);
		execl("/bin/sh", "sh", "-c", script, (char *)NULL);
		_exit(127);
	}
	assert_true(junk > 0);
	close(in[0]);
	for (b = 1; b <= 11; b++) {
		for (i = 0; i < 6000 && junk_handled(f, dir, src[0]) < (__u64)b * 100; i++)
			usleep(10000);
		assert_true(junk_handled(f, dir, src[0]) >= (__u64)b * 100);
		assert_int_equal(write(in[1], "\n", 1), 1);
	}
	close(in[1]);
	return junk;
}

static void remove_junk(const char *dir)
{
	char p[96];
	int i;

	for (i = 0; i < 1100; i++) {
		snprintf(p, sizeof(p), "%s/libssl.so.%d", dir, i);
		unlink(p);
	}
	rmdir(dir);
}

/* A real libssl opened by another process after the junk: attached, nothing refused
 * for lack of room. */
static void real_libssl_attached(struct fixture *f)
{
	struct bpftel_uprobes_refusals ref;
	struct bpftel_uprobe_file_info row;
	pid_t ssl;

	ssl = start_child("exec " PYTHON " -c 'import ssl, time; time.sleep(3600)'");
	assert_true(find_row(f, SHLIB_LIB_SSL, "libssl.so.3", &row, 2));
	assert_int_equal(row.failed, 0);
	bpftel_uprobes__refusals(f->up, &ref);
	assert_int_equal(ref.count[BPFTEL_REFUSED_REGISTRY_FULL], 0);
	stop_child(ssl);
}

/* One process holds more junk files named like libraries than the registry has rows
 * (1024): refused rows give way to new files, and a real libssl opened next by another
 * process is still attached. */
static void test_refused_rows_give_way(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobes_refusals ref;
	char dir[64];
	pid_t junk;

	if (access(PYTHON, X_OK) || access(LIBSSL, R_OK))
		skip();
	snprintf(dir, sizeof(dir), "/tmp/bpftel-junk-%d", getpid());
	bpftel_uprobes__set_file_budget(f->up, 0); /* one process, 1100 new files */
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	junk = open_junk(f, dir, "");
	bpftel_uprobes__refusals(f->up, &ref);
	assert_int_equal(ref.count[BPFTEL_REFUSED_NOT_ELF], 1100);
	assert_int_equal(ref.count[BPFTEL_REFUSED_REGISTRY_FULL], 0);
	assert_true(ref.evicted >= 1100 - 1024);
	real_libssl_attached(f);
	stop_child(junk);
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
	remove_junk(dir);
}

/* The same with ELF files named like libssl without its functions (copies of libdl):
 * parsed, nothing attached, not refused; their rows give way too (unprobed_evicted). */
static void test_unprobed_rows_give_way(void **state)
{
	static const char src[] = "/lib/x86_64-linux-gnu/libdl.so.2";
	struct fixture *f = *state;
	struct bpftel_uprobes_refusals ref;
	struct bpftel_uprobe_file_info row;
	char dir[64];
	pid_t junk;
	int n;

	if (access(PYTHON, X_OK) || access(LIBSSL, R_OK) || access(src, R_OK))
		skip();
	snprintf(dir, sizeof(dir), "/tmp/bpftel-elfjunk-%d", getpid());
	bpftel_uprobes__set_file_budget(f->up, 0);
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	junk = open_junk(f, dir, src);
	n = rows_under(f, SHLIB_LIB_SSL, dir, &row);
	assert_int_equal(row.attached, 0);
	assert_int_equal(row.refused, -1);
	assert_true(row.failed > 0);
	bpftel_uprobes__refusals(f->up, &ref);
	assert_int_equal(ref.count[BPFTEL_REFUSED_REGISTRY_FULL], 0);
	assert_int_equal(ref.unprobed_evicted + (__u64)n, 1100);
	assert_true(ref.unprobed_evicted >= 1100 - 1024);
	real_libssl_attached(f);
	stop_child(junk);
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
	remove_junk(dir);
}

/* Refusals for why of files under dir, each file once (the recent list; a process
 * refused again updates its entry). The last one's entry in *last. */
static int refused_under(struct fixture *f, const char *dir, enum bpftel_refusal why,
			 struct bpftel_uprobe_refusal *last)
{
	struct bpftel_uprobes_refusals ref;
	int n = 0;
	size_t i;

	bpftel_uprobes__refusals(f->up, &ref);
	for (i = 0; i < ref.nrecent; i++) {
		if (ref.recent[i].why != why || strncmp(ref.recent[i].path, dir, strlen(dir)))
			continue;
		if (!n++)
			*last = ref.recent[i];
	}
	return n;
}

static int over_under(struct fixture *f, const char *dir, struct bpftel_uprobe_refusal *last)
{
	return refused_under(f, dir, BPFTEL_REFUSED_OVER_BUDGET, last);
}

/* n copies of src under dir, dir/libssl.so.0 to .n-1, readable by all. */
static void libssl_copies(const char *dir, const char *src, int n)
{
	char path[96];
	int i;

	assert_int_equal(mkdir(dir, 0755), 0);
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/libssl.so.%d", dir, i);
		copy_over(src, path);
		assert_int_equal(chmod(path, 0644), 0);
	}
}

static void remove_copies(const char *dir, int n)
{
	char path[96];
	int i;

	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/libssl.so.%d", dir, i);
		unlink(path);
	}
	rmdir(dir);
}

/* Refusals over budget of files under dir for process pid, each file once. */
static int over_of(struct fixture *f, const char *dir, pid_t pid)
{
	struct bpftel_uprobes_refusals ref;
	int n = 0;
	size_t i;

	bpftel_uprobes__refusals(f->up, &ref);
	for (i = 0; i < ref.nrecent; i++)
		n += ref.recent[i].why == BPFTEL_REFUSED_OVER_BUDGET &&
		     ref.recent[i].pid == (__u32)pid && !strncmp(ref.recent[i].path, dir, strlen(dir));
	return n;
}

/* Wait until n files under dir have a row or were refused over budget: the rows in
 * *rows, the refusals in *over. */
static void budget_wait(struct fixture *f, const char *dir, int n, int *rows, int *over,
			struct bpftel_uprobe_refusal *last)
{
	struct bpftel_uprobe_file_info row;
	int i;

	for (i = 0; i < 6000; i++) {
		*rows = rows_under(f, SHLIB_LIB_SSL, dir, &row);
		*over = over_under(f, dir, last);
		if (*rows + *over >= n)
			break;
		usleep(10000);
	}
	assert_int_equal(*rows + *over, n);
}

/* sh -c script for user uid's python opening dir/libssl.so.{from..to-1}, then living on
 * (it dies with the test: --pdeathsig). */
static pid_t open_as(int uid, const char *dir, int from, int to)
{
	char script[640];

	snprintf(script, sizeof(script),
		 "exec /usr/bin/setpriv --reuid=%d --regid=%d --clear-groups --pdeathsig KILL "
		 PYTHON " -c 'import time\n"
		 "for i in range(%d, %d): open(\"%s/libssl.so.%%d\" %% i).close()\n"
		 "time.sleep(3600)'",
		 uid, uid, from, to, dir);
	return start_child(script);
}

/*
 * One user's processes bring new files beyond new_files_per_user (3 a minute here):
 * user 4243's process opens 10 ELF files named like libssl (copies of libdl: parsed,
 * nothing to attach); 3 become rows, the others are refused as over_budget, never
 * parsed, with the user and the budget in their reason. Another user (4244) opening 4
 * more has a budget of its own: 3 rows. The budget refills a file every 20 s: a run
 * that took longer may have let one more through per 20 s. (Users of their own, not
 * root's: the host's root processes share root's budget.)
 */
static void test_new_files_over_budget(void **state)
{
	static const char src[] = "/lib/x86_64-linux-gnu/libdl.so.2";
	struct fixture *f = *state;
	struct bpftel_uprobes_refusals ref;
	struct bpftel_uprobe_refusal last;
	struct bpftel_uprobe_file_info row;
	char dir[64];
	long long t0 = bpftel_mono_ms();
	int rows, over, refill, i;
	__u64 cached;
	pid_t a, b, c;

	if (access(PYTHON, X_OK) || access("/usr/bin/setpriv", X_OK) || access(src, R_OK))
		skip();
	snprintf(dir, sizeof(dir), "/tmp/bpftel-budget-%d", getpid());
	libssl_copies(dir, src, 14);
	bpftel_uprobes__set_file_budget(f->up, 3);
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	a = open_as(4243, dir, 0, 10);
	budget_wait(f, dir, 10, &rows, &over, &last);
	refill = (int)((bpftel_mono_ms() - t0) / 20000);
	assert_true(rows >= 3 && rows <= 3 + refill);
	assert_int_equal(over, 10 - rows);
	assert_int_equal(last.pid, a);
	assert_non_null(strstr(last.detail, "user 4243's processes brought 3 new library "
					    "files within a minute"));

	/* Another process of 4243's opens the refused files again: refused from the cache
	 * (kept until 4243's budget has a file again, 20 s after it was spent: checked
	 * only on a run that came back sooner), not opened. */
	bpftel_uprobes__refusals(f->up, &ref);
	cached = ref.cached;
	c = open_as(4243, dir, 10 - over, 10);
	/* Each refused, or (a slow run, the budget refilled) a row. */
	for (i = 0; i < 6000 && over_of(f, dir, c) + rows_under(f, SHLIB_LIB_SSL, dir, &row) -
					    rows < over; i++)
		usleep(10000);
	assert_int_equal(over_of(f, dir, c) + rows_under(f, SHLIB_LIB_SSL, dir, &row) - rows, over);
	bpftel_uprobes__refusals(f->up, &ref);
	if (bpftel_mono_ms() - t0 < 15000)
		assert_int_equal(ref.cached - cached, over);
	else
		print_message("note: a slow run: the cache of refusals over budget not checked\n");
	stop_child(c);

	/* (Each of those refused twice: once for a, once for c.) */
	b = open_as(4244, dir, 10, 14);
	budget_wait(f, dir, 14 + 10 - rows, &rows, &over, &last);
	refill = (int)((bpftel_mono_ms() - t0) / 20000);
	assert_true(rows >= 3 + 3 && rows <= 3 + 3 + 2 * refill);
	stop_child(a);
	stop_child(b);
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
	remove_copies(dir, 14);
}

/*
 * One user's probed copies of libssl past its share of the registry (2 here; a quarter
 * of its 1024 files by default): the user's next new file is refused (registry_full,
 * the reason naming the share) while its processes hold the others; root's copy, opened
 * next, is attached all the same (the host's own libraries are root's).
 */
static void test_owner_share_of_registry(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobes_refusals before, ref;
	struct bpftel_uprobe_refusal last;
	struct bpftel_uprobe_file_info row;
	char dir[64], path[96], script[320];
	int rows = 0, full = 0, i;
	pid_t a, b, root;

	if (access(PYTHON, X_OK) || access("/usr/bin/setpriv", X_OK) || access(LIBSSL, R_OK))
		skip();
	snprintf(dir, sizeof(dir), "/tmp/bpftel-share-%d", getpid());
	libssl_copies(dir, LIBSSL, 4);
	bpftel_uprobes__set_file_budget(f->up, 0);
	bpftel_uprobes__set_owner_share(f->up, 2);
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	a = open_as(4243, dir, 0, 3);
	for (i = 0; i < 6000 && rows + full < 3; i++) {
		rows = rows_under(f, SHLIB_LIB_SSL, dir, &row);
		full = refused_under(f, dir, BPFTEL_REFUSED_REGISTRY_FULL, &last);
		if (rows + full < 3)
			usleep(10000);
	}
	assert_int_equal(rows, 2);
	assert_int_equal(full, 1);
	assert_int_equal(last.pid, a);
	assert_non_null(strstr(last.detail, "its user holds 2 probed files"));
	/* Another process of that user opens the refused copy 20 times: each refused, and
	 * from the cache once one was (a lookup, not an open and a walk of the agent's
	 * mappings each time), for that user only. */
	bpftel_uprobes__refusals(f->up, &before);
	snprintf(script, sizeof(script),
		 "exec /usr/bin/setpriv --reuid=4243 --regid=4243 --clear-groups --pdeathsig KILL "
		 PYTHON " -c 'import time\n"
		 "for i in range(20): open(\"%s/libssl.so.2\").close()\n"
		 "time.sleep(3600)'",
		 dir);
	b = start_child(script);
	for (i = 0; i < 6000; i++) {
		bpftel_uprobes__refusals(f->up, &ref);
		if (ref.count[BPFTEL_REFUSED_REGISTRY_FULL] >=
		    before.count[BPFTEL_REFUSED_REGISTRY_FULL] + 20)
			break;
		usleep(10000);
	}
	assert_int_equal(ref.count[BPFTEL_REFUSED_REGISTRY_FULL],
			 before.count[BPFTEL_REFUSED_REGISTRY_FULL] + 20);
	assert_true(ref.cached > before.cached);
	assert_true(ref.over_share >= 1);
	stop_child(b);
	snprintf(script, sizeof(script),
		 "exec " PYTHON " -c 'import time; open(\"%s/libssl.so.3\").close(); "
		 "time.sleep(3600)'", dir);
	root = start_child(script);
	snprintf(path, sizeof(path), "%s/libssl.so.3", dir);
	assert_true(find_row(f, SHLIB_LIB_SSL, path, &row, 2));
	assert_int_equal(rows_under(f, SHLIB_LIB_SSL, dir, &row), 3);
	stop_child(root);
	stop_child(a);
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
	remove_copies(dir, 4);
}

/* A FIFO named like a library, opened again and again (O_NONBLOCK: the opens return):
 * each open is refused and counted, the first after looking through /proc, the others
 * from the refused-file cache, by the identity the kernel reported. */
static void test_refused_file_cached(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobes_refusals ref;
	char dir[64], path[96], script[320];
	pid_t a;
	int i;

	if (access(PYTHON, X_OK))
		skip();
	snprintf(dir, sizeof(dir), "/tmp/bpftel-fifo-%d", getpid());
	snprintf(path, sizeof(path), "%s/libssl.so.3", dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(mkfifo(path, 0644), 0);
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	snprintf(script, sizeof(script),
		 "exec " PYTHON " -c 'import os, time; "
		 "[os.close(os.open(\"%s\", os.O_RDONLY | os.O_NONBLOCK)) for _ in range(50)]; "
		 "time.sleep(3600)'",
		 path);
	a = start_child(script);
	for (i = 0; i < 3000; i++) {
		bpftel_uprobes__refusals(f->up, &ref);
		if (ref.count[BPFTEL_REFUSED_NOT_REGULAR] >= 50)
			break;
		usleep(10000);
	}
	assert_int_equal(ref.count[BPFTEL_REFUSED_NOT_REGULAR], 50);
	assert_int_equal(ref.cached, 49);
	/* One culprit, one line in the recent list, which says how often. */
	assert_int_equal(ref.nrecent, 1);
	assert_int_equal(ref.recent[0].times, 50);
	assert_int_equal(ref.recent[0].pid, a);
	assert_int_equal(ref.recent[0].why, BPFTEL_REFUSED_NOT_REGULAR);
	assert_string_equal(ref.recent[0].path, path);
	stop_child(a);
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
	unlink(path);
	rmdir(dir);
}

/* SSL_write's file offset in path, and its first 4 bytes in code. */
static long ssl_write_at(const char *path, unsigned char code[4])
{
	char err[128];
	long off = bpftel_elf_sym_offset(path, "SSL_write", err, sizeof(err));
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	assert_true(off > 0 && fd >= 0);
	assert_int_equal(pread(fd, code, 4, off), 4);
	close(fd);
	return off;
}

/* python3 maps the library at path, and once the file go exists prints SSL_write(20)
 * (60 s at most). Read its output with finish_ssl_write. */
static FILE *start_ssl_write(const char *path, const char *go)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd),
		 PYTHON " -c 'import ctypes, os, time; l = ctypes.CDLL(\"%s\")\n"
			"for _ in range(6000):\n"
			"    if os.path.exists(\"%s\"): break\n"
			"    time.sleep(0.01)\n"
			"print(l.SSL_write(20))' 2>&1",
		 path, go);
	return popen(cmd, "re");
}

/* Its first line of output, and its exit status. */
static int finish_ssl_write(FILE *p, char *out, size_t len)
{
	if (!fgets(out, (int)len, p))
		out[0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	return pclose(p);
}

/*
 * A probed library written over in place (`cp new lib.so`: same inode) by a build whose
 * SSL_write starts with another instruction at the same offset. The kernel keeps the
 * instruction it copied at attach, keyed by inode and offset: with the links still in
 * place, a process that maps the file later runs the old one (21, or a crash, instead of
 * 42). The registry sees the write and releases the file's links at once, long before
 * its grace (10 minutes here) would.
 */
static void test_written_in_place_released(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobes_refusals ref;
	struct bpftel_uprobe_file_info row;
	unsigned char v1[4], v2[4];
	char dir[64], path[96], go[96], script[320], out[128] = "";
	unsigned int links_before;
	int i, status;
	pid_t child;
	FILE *p;

	if (access(PYTHON, X_OK))
		skip();
	assert_int_equal(ssl_write_at(OVERWRITE_V1, v1), ssl_write_at(OVERWRITE_V2, v2));
	assert_memory_not_equal(v1, v2, 4);
	snprintf(dir, sizeof(dir), "/tmp/bpftel-written-%d", getpid());
	snprintf(path, sizeof(path), "%s/libssl.so.3", dir);
	snprintf(go, sizeof(go), "%s/go", dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	copy_over(OVERWRITE_V1, path);
	bpftel_uprobes__set_grace_ms(f->up, 600000);
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	links_before = links_now() - registry_links(f);

	/* A process maps build 1 and exits: the file stays attached, idle. */
	snprintf(script, sizeof(script),
		 "exec " PYTHON " -c 'import ctypes, time; ctypes.CDLL(\"%s\"); time.sleep(3600)'",
		 path);
	child = start_child(script);
	assert_true(find_row(f, SHLIB_LIB_SSL, path, &row, 2));
	assert_int_equal(row.failed, 0);
	stop_child(child);
	bpftel_uprobes__sweep(f->up);
	assert_true(row_now(f, SHLIB_LIB_SSL, path, &row, 2));
	assert_string_equal(row.state, "idle");
	assert_true(links_now() > links_before);

	copy_over(OVERWRITE_V2, path);
	/* Gone from the table once the reaper destroyed its last link (release_account). */
	for (i = 0; i < 3000 && row_now(f, SHLIB_LIB_SSL, path, &row, 0); i++)
		usleep(10000);
	if (row_now(f, SHLIB_LIB_SSL, path, &row, 0)) {
		/* What that costs: a process mapping it now runs build 1's instruction. */
		close(open(go, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
		p = start_ssl_write(path, go);
		status = p ? finish_ssl_write(p, out, sizeof(out)) : -1;
		unlink(go);
		fail_msg("still %s with %zu links 30 s after it was written in place; a process "
			 "mapping it now prints \"%s\" (42 expected), exit status 0x%x",
			 row.state, row.links, out, status);
	}
	assert_int_equal(links_now(), links_before + registry_links(f)); /* others' only */
	bpftel_uprobes__refusals(f->up, &ref);
	assert_int_equal(ref.released_modified, 1);

	/* A new process maps it: attached again, from what the file holds now; its call
	 * goes through the new probe and runs build 2's instruction. */
	p = start_ssl_write(path, go);
	assert_non_null(p);
	assert_true(find_row(f, SHLIB_LIB_SSL, path, &row, 2));
	close(open(go, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	status = finish_ssl_write(p, out, sizeof(out));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_string_equal(out, "42");
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
	unlink(go);
	unlink(path);
	rmdir(dir);
}

/* A copy of the system's libssl at dir/libssl.so.3 (dir: /tmp/bpftel-TAG-PID), its
 * grace long, the USM module running. */
static void libssl_copy(struct fixture *f, const char *tag, char *dir, size_t dlen, char *path,
			size_t plen)
{
	snprintf(dir, dlen, "/tmp/bpftel-%s-%d", tag, getpid());
	snprintf(path, plen, "%s/libssl.so.3", dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	copy_over(LIBSSL, path);
	bpftel_uprobes__set_grace_ms(f->up, 600000);
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
}

static void libssl_copy_done(struct fixture *f, const char *dir, const char *path)
{
	assert_int_equal(bpftel_module__stop(f->usm->module), 0);
	unlink(path);
	rmdir(dir);
}

/* The row of path once done(row), waited for with a generous deadline. */
static void wait_row(struct fixture *f, const char *path, struct bpftel_uprobe_file_info *row,
		     bool (*done)(const struct bpftel_uprobe_file_info *))
{
	int i;

	for (i = 0; i < 3000; i++) {
		assert_true(row_now(f, SHLIB_LIB_SSL, path, row, 0));
		if (done(row))
			return;
		usleep(10000);
	}
}

/* A python that runs `use` (about path), then sleeps; its row of path once there. */
static pid_t python_using(struct fixture *f, const char *use, const char *path,
			  struct bpftel_uprobe_file_info *row)
{
	char script[512];
	pid_t child;

	snprintf(script, sizeof(script), "exec " PYTHON " -c 'import ctypes, time; %s; "
		 "time.sleep(3600)'", use);
	child = start_child(script);
	assert_true(find_row(f, SHLIB_LIB_SSL, path, row, 2));
	return child;
}

static bool released(const struct bpftel_uprobe_file_info *row)
{
	return !row->links && strcmp(row->state, "releasing");
}

static bool in_use(const struct bpftel_uprobe_file_info *row)
{
	return !strcmp(row->state, "in_use");
}

/*
 * A file whose live process no longer reaches it: the process opened its library copy
 * without mapping it, the file was written in place (its links released) and another
 * file renamed over its path. Each sweep would reopen it by that path, be refused
 * (identity_changed) and count it, every second for as long as the process lives; the
 * sweeps back off instead and the refusal is counted once.
 */
static void test_unreachable_file_backs_off(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobes_refusals ref;
	struct bpftel_uprobe_file_info row;
	char dir[64], path[96], other[96], script[320];
	__u64 before;
	int i, old;
	pid_t child;

	if (access(PYTHON, X_OK) || access(LIBSSL, R_OK))
		skip();
	libssl_copy(f, "reopen", dir, sizeof(dir), path, sizeof(path));
	snprintf(other, sizeof(other), "%s/other", dir);
	snprintf(script, sizeof(script), "open(\"%s\", \"rb\").close()", path);
	child = python_using(f, script, path, &row);

	old = open(path, O_WRONLY | O_CLOEXEC);
	assert_true(old >= 0);
	copy_over(LIBSSL, other);
	assert_int_equal(rename(other, path), 0);
	assert_int_equal(pwrite(old, "", 1, lseek(old, 0, SEEK_END)), 1); /* in place */
	close(old);
	wait_row(f, path, &row, released);
	assert_int_equal(row.links, 0);

	bpftel_uprobes__refusals(f->up, &ref);
	before = ref.count[BPFTEL_REFUSED_IDENTITY_CHANGED];
	for (i = 0; i < 6; i++)
		bpftel_uprobes__sweep(f->up);
	bpftel_uprobes__refusals(f->up, &ref);
	assert_int_equal(ref.count[BPFTEL_REFUSED_IDENTITY_CHANGED], before + 1);
	assert_true(row_now(f, SHLIB_LIB_SSL, path, &row, 0));
	assert_string_equal(row.state, "in_use");
	assert_int_equal(row.links, 0);
	stop_child(child);
	libssl_copy_done(f, dir, path);
}

/* Start `sh -c script` as pid, the pid of a process gone (ns_last_pid: the kernel gives
 * the next one; another fork on the host may take it first, so a few tries). -1: not
 * given. */
static pid_t start_child_as(pid_t pid, const char *script)
{
	char last[24];
	pid_t child;
	int tries, fd;

	for (tries = 0; tries < 50; tries++) {
		fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return -1;
		snprintf(last, sizeof(last), "%d", pid - 1);
		if (write(fd, last, strlen(last)) < 0) {
			close(fd);
			return -1;
		}
		close(fd);
		child = start_child(script);
		if (child == pid)
			return child;
		stop_child(child);
	}
	return -1;
}

/*
 * A process maps a library, opens it once more, and exits; before any sweep, a new
 * process given its pid maps it too (then a second file, so that the registry has
 * handled the first by the time the test looks). The new process is the file's user:
 * after a sweep the row is in use by it, not idle because the old one is gone. (The
 * second open is the old process's repeat event, in the same sweep's period as the
 * new one's: answered from the row, it must not make the new one's look like it.)
 */
/* An open whose path leads nowhere by the time the agent walks it, by a process that
 * still runs (renamed or removed since; here one that never was): not a refusal, and
 * not dropped as a process gone: counted, and a /proc scan asked for, which would
 * reach the file through the process's mapping. One by a process gone asks nothing. */
static void test_unreached_path_asks_a_scan(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobes_refusals before, after;
	__u64 stale = bpftel_uprobes__stale(f->up);
	pid_t gone = fork();

	assert_true(gone >= 0);
	if (!gone)
		_exit(0);
	assert_int_equal(waitpid(gone, NULL, 0), gone);
	bpftel_uprobes__refusals(f->up, &before);
	assert_int_equal(bpftel_uprobes__process_seen(f->up, (__u32)getpid(), SHLIB_LIB_SSL,
						      "/nonexistent-bpftel/libssl.so.3"),
			 -ENOENT);
	bpftel_uprobes__refusals(f->up, &after);
	assert_int_equal(after.unreached_scans, before.unreached_scans + 1);
	assert_int_equal(bpftel_uprobes__stale(f->up), stale + 1);
	assert_int_equal(after.count[BPFTEL_REFUSED_OUTSIDE_ROOT] + after.count[BPFTEL_REFUSED_NOT_REGULAR],
			 before.count[BPFTEL_REFUSED_OUTSIDE_ROOT] + before.count[BPFTEL_REFUSED_NOT_REGULAR]);
	assert_true(bpftel_uprobes__process_seen(f->up, (__u32)gone, SHLIB_LIB_SSL,
						 "/nonexistent-bpftel/libssl.so.3") < 0);
	bpftel_uprobes__refusals(f->up, &after);
	assert_int_equal(after.unreached_scans, before.unreached_scans + 1);
}

static void test_reused_pid_is_a_new_user(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobe_file_info row;
	char dir[64], path[96], path2[128], script[400];
	pid_t a, b;

	if (access(PYTHON, X_OK) || access(LIBSSL, R_OK))
		skip();
	libssl_copy(f, "pidreuse", dir, sizeof(dir), path, sizeof(path));
	snprintf(path2, sizeof(path2), "%s/second/libssl.so.3", dir);
	snprintf(script, sizeof(script), "%s/second", dir);
	assert_int_equal(mkdir(script, 0755), 0);
	copy_over(LIBSSL, path2);

	snprintf(script, sizeof(script), "ctypes.CDLL(\"%s\"); open(\"%s\", \"rb\").close()",
		 path, path);
	a = python_using(f, script, path, &row);
	assert_int_equal(row.pids[0], a);
	stop_child(a);

	snprintf(script, sizeof(script),
		 "exec " PYTHON " -c 'import ctypes, time; ctypes.CDLL(\"%s\"); "
		 "ctypes.CDLL(\"%s\"); time.sleep(3600)'",
		 path, path2);
	b = start_child_as(a, script);
	if (b < 0) {
		assert_int_equal(bpftel_module__stop(f->usm->module), 0);
		skip();
	}
	assert_true(find_row(f, SHLIB_LIB_SSL, path2, &row, 2));
	assert_int_equal(row.pids[0], b);
	bpftel_uprobes__sweep(f->up);
	wait_row(f, path, &row, in_use);
	assert_string_equal(row.state, "in_use");
	assert_int_equal(row.nprocs, 1);
	assert_int_equal(row.pids[0], b);
	stop_child(b);
	unlink(path2);
	snprintf(script, sizeof(script), "%s/second", dir);
	rmdir(script);
	libssl_copy_done(f, dir, path);
}

static void test_name_matcher_agrees(void **state)
{
	(void)state;
	assert_int_equal(bpftel_shlib_match_name("/lib/x86_64-linux-gnu/libssl.so.3"),
			 SHLIB_LIB_SSL);
	assert_int_equal(bpftel_shlib_match_name("libcudart.so.12.1.105"), SHLIB_LIB_CUDART);
	assert_int_equal(bpftel_shlib_match_name("/usr/lib/libcuda.so.1"), SHLIB_LIB_CUDA);
	assert_int_equal(bpftel_shlib_match_name("/x/libgnutls.so.30"), SHLIB_LIB_GNUTLS);
	assert_int_equal(bpftel_shlib_match_name("/x/libcrypto.so.1.1"), SHLIB_LIB_CRYPTO);
	assert_int_equal(bpftel_shlib_match_name("/x/libssl.so"), SHLIB_LIB_SSL);
	assert_int_equal(bpftel_shlib_match_name("/usr/lib64/libssl.so.1.1.1k"), SHLIB_LIB_SSL);
	assert_int_equal(bpftel_shlib_match_name("/usr/lib64/libcrypto.so.1.0.2k"),
			 SHLIB_LIB_CRYPTO);
	assert_int_equal(bpftel_shlib_match_name("/x/libssl.so.1.1.1o"), SHLIB_LIB_SSL);
	assert_int_equal(bpftel_shlib_match_name("/x/libssl.so.1.1.1kk"), -1);
	assert_int_equal(bpftel_shlib_match_name("/x/libssl.so.1.k"), -1);
	assert_int_equal(bpftel_shlib_match_name("/x/libssl.sok"), -1);
	assert_int_equal(bpftel_shlib_match_name("/x/libssl.so.3.bak"), -1);
	assert_int_equal(bpftel_shlib_match_name("/x/libssl.so.3..1"), -1);
	assert_int_equal(bpftel_shlib_match_name("/x/libssl.so."), -1);
	assert_int_equal(bpftel_shlib_match_name("/x/mylibssl.so"), -1);
	assert_int_equal(bpftel_shlib_match_name("/x/libssl.sox"), -1);
	assert_int_equal(bpftel_shlib_match_name("/x/libssl.so3"), -1);
	assert_int_equal(bpftel_shlib_match_name(""), -1);
}

/* More entry points than one multi-uprobe link takes: as many links as it takes, every
 * point attached, none failed (they all failed with EINVAL in one link too many). */
static void test_more_points_than_one_link_takes(void **state)
{
	struct fixture *f = *state;
	struct bpftel_uprobe_file_info row;
	pid_t child;

	if (!wide_ready || access(PYTHON, X_OK))
		skip();
	assert_int_equal(bpftel_module__run(f->usm->module), 0);
	child = start_child("exec " PYTHON " -c 'import ssl, time; time.sleep(3600)'");
	assert_true(find_row(f, SHLIB_LIB_SSL, "libssl.so.3", &row, WIDE_N));
	assert_int_equal(row.attached, WIDE_N);
	assert_int_equal(row.failed, 0);
	assert_non_null(row.link_mode);
	/* 64 + 6 in two multi-uprobe links, or one perf-event link each. */
	assert_int_equal(row.links, !strcmp(row.link_mode, "multi") ? 2 : WIDE_N);
	stop_child(child);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_python_ssl_after_start_then_exit),
		T(test_loaded_before_start_found_by_scan),
		T(test_scan_reads_maps_bounded),
		T(test_scan_skips_the_agent),
		T(test_dlopen_cudart_detected),
		T(test_private_mount_namespace),
		T(test_overlayfs_library),
		T(test_overlayfs_layers_on_two_fs),
		T(test_overlayfs_two_mounts_one_file),
		T(test_overlayfs_copy_up_keeps_layer),
		T(test_btrfs_subvolume_library),
		T(test_btrfs_snapshot_library),
		T(test_btrfs_file_through_overlay),
		T(test_btrfs_new_process_from_row),
		T(test_btrfs_one_process_two_subvolumes),
		T(test_btrfs_overlay_then_snapshot),
		T(test_relative_to_dirfd),
		T(test_relative_path_above_cwd_found_by_scan),
		T(test_identity_mismatch_refused),
		T(test_non_elf_library_recorded_once),
		T(test_refused_file_cached),
		T(test_older_processes_reopen_by_mapping),
		T(test_refused_rows_give_way),
		T(test_unprobed_rows_give_way),
		T(test_new_files_over_budget),
		T(test_owner_share_of_registry),
		T(test_written_in_place_released),
		T(test_unreachable_file_backs_off),
		T(test_reused_pid_is_a_new_user),
		T(test_unreached_path_asks_a_scan),
#undef T
		cmocka_unit_test_setup_teardown(test_more_points_than_one_link_takes, setup_wide,
						teardown),
		cmocka_unit_test(test_name_matcher_agrees),
	};

	bpftel_test_require_bpf();
	return cmocka_run_group_tests_name("uprobe_registry", tests, NULL, NULL);
}
