// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Kernel names: file offsets back to function symbols (user/manager/elfaddr.h) on this
 * very test binary, whose host stub carries a mangled name; demangling; the top kernels
 * per process, same names merged; and the series of bpftel_gpu_kernel_name_launches_total
 * as /metrics shows them over several reports (user/modules/gpu/gpu_kernels.c). Also the
 * rest of the GPU module's userspace that needs no BPF: its error series, how its sweep
 * tells a process still alive, and its walk of a map whose keys are deleted meanwhile
 * (user/modules/gpu/gpu_report.c, gpu.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fnmatch.h>
#include <cmocka.h>
#include <capstone/capstone.h>
#include <gelf.h>
#include <jansson.h>
#include <zlib.h>

#include "user/common/prom.h"
#include "user/manager/elfaddr.h"
#include "user/manager/elfsym.h"
#include "user/modules/gpu/gpu_demangle.h"
#include "user/modules/gpu/gpu_kernels.h"
#include "user/modules/gpu/gpu_series.h"
#include "user/sharedlibs/procfile.h"

/* A host stub as nvcc names one; its body keeps it apart from any other function. */
static volatile int sink;
void stub_fn(void) __asm__("_Z7saxpyOpfPfS_i");
void stub_fn(void)
{
	sink += 7;
}

/* A host stub whose mangled name is over 255 bytes (PyTorch's run to thousands):
 * ten 30-letter namespaces, then kernel(). */
#define NS30 "30abcdefghijklmnopqrstuvwxyzabcd"
void long_stub_fn(void) __asm__("_ZN" NS30 NS30 NS30 NS30 NS30 NS30 NS30 NS30 NS30 NS30
				"6kernelEv");
void long_stub_fn(void)
{
	sink += 11;
}

static void test_offset_to_symbol(void **state)
{
	struct bpftel_elf_addr_req reqs[3] = {};
	char err[256];
	long off;
	int fd;

	(void)state;
	off = bpftel_elf_sym_offset("/proc/self/exe", "_Z7saxpyOpfPfS_i", err, sizeof(err));
	assert_true(off > 0);
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	reqs[0].offset = off;	  /* its first byte */
	reqs[1].offset = off + 1; /* inside it */
	reqs[2].offset = 1;	  /* the ELF header: no function */
	assert_int_equal(bpftel_elf_symbolize_fd(fd, "self", reqs, 3, err, sizeof(err)), 0);
	assert_string_equal(reqs[0].name, "_Z7saxpyOpfPfS_i");
	assert_string_equal(reqs[1].name, "_Z7saxpyOpfPfS_i");
	assert_string_equal(reqs[2].name, "");
	close(fd);
	stub_fn();
}

static void test_not_elf_refused(void **state)
{
	struct bpftel_elf_addr_req req = {.offset = 0};
	char err[256] = "";
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);

	(void)state;
	assert_true(fd >= 0);
	assert_true(bpftel_elf_symbolize_fd(fd, "cmdline", &req, 1, err, sizeof(err)) < 0);
	assert_true(strlen(err) > 0);
	close(fd);
}

static void test_demangle(void **state)
{
	char out[BPFTEL_GPU_KERNEL_NAME];

	(void)state;
	bpftel_gpu_demangle("_Z7saxpyOpfPfS_i", out, sizeof(out));
	assert_string_equal(out, "saxpyOp(float, float*, float*, int)");
	bpftel_gpu_demangle("relu_kernel", out, sizeof(out)); /* extern "C" */
	assert_string_equal(out, "relu_kernel");
	bpftel_gpu_demangle("_Zgarbage", out, sizeof(out)); /* not a valid name: kept */
	assert_string_equal(out, "_Zgarbage");
	bpftel_gpu_demangle("_Z7saxpyOpfPfS_i", out, 8); /* cut as snprintf would */
	assert_string_equal(out, "saxpyOp");
	bpftel_gpu_demangle("_Z7saxpyOpfPfS_i", out, 1);
	assert_string_equal(out, "");
	bpftel_gpu_demangle("_Zgarbage", out, 4);
	assert_string_equal(out, "_Zg");
}

/* A name of `levels` nested B<S_, S_>: "_Z1fI1A1BI", "S1_I" levels - 2 times, "S0_S0_E",
 * then "S2_E" ... "S<levels - 1>_E" (base-36 substitution numbers) and "E". It is
 * f<A, X> with X = B<A, A> nested levels - 1 times as B<X, X >: each back-reference
 * doubles it (tests/gpu/cuda_pattern.c has the same, for the agent). */
static void crafted_name(char *s, size_t size, int levels)
{
	static const char seq[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
	size_t n = (size_t)snprintf(s, size, "_Z1fI1A1BI");
	int i;

	for (i = 0; i < levels - 2; i++)
		n += (size_t)snprintf(s + n, size - n, "S1_I");
	n += (size_t)snprintf(s + n, size - n, "S0_S0_E");
	for (i = 2; i < levels; i++)
		n += (size_t)snprintf(s + n, size - n, "S%c_E", seq[i]);
	snprintf(s + n, size - n, "E");
}

static void put(char *o, size_t *n, size_t cap, const char *s)
{
	while (*s && *n < cap)
		o[(*n)++] = *s++;
}

/* The first cap bytes of X nested `level` times (see crafted_name()). */
static void nested(char *o, size_t *n, size_t cap, int level)
{
	if (*n >= cap)
		return;
	if (level == 1) {
		put(o, n, cap, "B<A, A>");
		return;
	}
	put(o, n, cap, "B<");
	nested(o, n, cap, level - 1);
	put(o, n, cap, ", ");
	nested(o, n, cap, level - 1);
	put(o, n, cap, " >");
}

static long max_rss_kib(void)
{
	struct rusage ru;

	assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
	return ru.ru_maxrss;
}

/* A name whose back-references repeat all before them demangles to what its label
 * holds, without building the rest: 26 levels are ~218 MB demangled whole (libstdc++'s
 * __cxa_demangle took ~440 MB of RSS and 1.6 s here; 31 levels, 250 bytes, ~7 GB). */
static void test_demangle_crafted(void **state)
{
	char name[BPFTEL_ELF_NAME_MAX], out[BPFTEL_GPU_KERNEL_NAME], want[BPFTEL_GPU_KERNEL_NAME];
	long before;
	size_t n = 0;

	(void)state;
	crafted_name(name, sizeof(name), 3);
	bpftel_gpu_demangle(name, out, sizeof(out));
	assert_string_equal(out, "f<A, B<B<A, A>, B<A, A> > >");

	crafted_name(name, sizeof(name), 26);
	assert_int_equal(strlen(name), 210);
	put(want, &n, sizeof(want) - 1, "f<A, ");
	nested(want, &n, sizeof(want) - 1, 25);
	want[n] = '\0';
	before = max_rss_kib();
	bpftel_gpu_demangle(name, out, sizeof(out));
	assert_int_equal(strlen(out), sizeof(out) - 1);
	assert_string_equal(out, want);
	assert_true(max_rss_kib() - before < 64 * 1024);
}

/* A driver kernel's name that gpu_knames holds the first GPU_KNAME_LEN - 1 bytes of is
 * shown as those bytes and "...", not demangled: the prefix of a mangled name may
 * demangle to another signature (here "saxpy(float)" for a kernel of three more
 * arguments). A whole name of the same bytes is demangled. */
static void test_cut_driver_name_marked(void **state)
{
	struct bpftel_gpu_kernel_seen ks[2] = {};
	static struct bpftel_gpu_proc row = {.pid = 4243};
	struct bpftel_gpu_kernels *kt = bpftel_gpu_kernels__new(NULL);
	char want[BPFTEL_GPU_KERNEL_NAME];
	size_t i;

	(void)state;
	assert_non_null(kt);
	ks[0].key = (struct gpu_kernel_key){.tgid = 4243, .api = GPU_KERNEL_DRIVER, .func = 1};
	ks[0].k.launches = 2;
	snprintf(ks[0].driver_name, sizeof(ks[0].driver_name), "_Z5saxpyf");
	ks[0].driver_cut = true;
	ks[1].key = (struct gpu_kernel_key){.tgid = 4243, .api = GPU_KERNEL_DRIVER, .func = 2};
	ks[1].k.launches = 1;
	snprintf(ks[1].driver_name, sizeof(ks[1].driver_name), "_Z5saxpyf");
	bpftel_gpu_kernels__fill(kt, &row, 1, ks, 2, true);
	assert_int_equal(row.nkernels, 2);
	assert_string_equal(row.kernels[0].name, "_Z5saxpyf...");
	assert_int_equal(row.kernels[0].launches, 2);
	assert_string_equal(row.kernels[1].name, "saxpy(float)");

	/* A cut name as long as gpu_knames holds: its label keeps the "...". */
	memset(ks[0].driver_name, 'k', sizeof(ks[0].driver_name) - 1);
	ks[0].driver_name[sizeof(ks[0].driver_name) - 1] = '\0';
	ks[0].key.func = 3;
	bpftel_gpu_kernels__fill(kt, &row, 1, ks, 1, true);
	memset(want, 'k', sizeof(want) - 4);
	strcpy(want + sizeof(want) - 4, "...");
	for (i = 0; i < row.nkernels && row.kernels[i].name[0] != 'k'; i++)
		;
	assert_true(i < row.nkernels);
	assert_string_equal(row.kernels[i].name, want);
	bpftel_gpu_kernels__free(kt);
}

/* Driver kernels are named by what cuModuleGetFunction got; two handles of one name are
 * one kernel; beyond BPFTEL_GPU_TOP_KERNELS, the least launched are counted as others. */
static void test_top_kernels_merged(void **state)
{
	struct bpftel_gpu_kernel_seen ks[BPFTEL_GPU_TOP_KERNELS + 3] = {};
	static struct bpftel_gpu_proc row = {.pid = 4242};
	struct bpftel_gpu_kernels *kt = bpftel_gpu_kernels__new(NULL);
	size_t i, n = 0;

	(void)state;
	assert_non_null(kt);
	for (i = 0; i < BPFTEL_GPU_TOP_KERNELS + 2; i++, n++) {
		ks[n].key = (struct gpu_kernel_key){
			.tgid = 4242, .api = GPU_KERNEL_DRIVER, .func = 0xf000 + i};
		ks[n].k.launches = 100 + i;
		snprintf(ks[n].driver_name, sizeof(ks[n].driver_name), "k%zu", i);
	}
	/* A second handle of k0: merged into it, 100 + 50 launches. */
	ks[n].key = (struct gpu_kernel_key){.tgid = 4242, .api = GPU_KERNEL_DRIVER, .func = 1};
	ks[n].k.launches = 50;
	snprintf(ks[n++].driver_name, sizeof(ks[0].driver_name), "k0");
	bpftel_gpu_kernels__fill(kt, &row, 1, ks, n, true);
	assert_int_equal(row.nkernels, BPFTEL_GPU_TOP_KERNELS + 2);
	assert_string_equal(row.kernels[0].name, "k0");
	assert_int_equal(row.kernels[0].launches, 150);
	assert_string_equal(row.kernels[1].name, "k9");
	/* k1 (101) and k2 (102) are the least launched: the others. */
	assert_int_equal(row.kernels_other_launches, 101 + 102);
	for (i = 0; i < BPFTEL_GPU_TOP_KERNELS; i++) {
		assert_string_not_equal(row.kernels[i].name, "k1");
		assert_string_not_equal(row.kernels[i].name, "k2");
	}
	bpftel_gpu_kernels__free(kt);
}

/* The table with the real symbolizer; the test is skipped without root (map_files). */
static struct bpftel_gpu_kernels *real_kernels(void)
{
	struct bpftel_gpu_kernels *kt;

	if (geteuid() != 0)
		skip();
	kt = bpftel_gpu_kernels__new(NULL);
	assert_non_null(kt);
	return kt;
}

/* One report of this process: runtime kernels at addrs[i], launched launches[i] times. */
static void self_report(struct bpftel_gpu_kernels *kt, struct bpftel_gpu_proc *row,
			struct bpftel_gpu_kernel_seen *ks, const __u64 *addrs,
			const __u64 *launches, size_t n)
{
	__u32 pid = (__u32)getpid();
	size_t i;

	memset(ks, 0, n * sizeof(*ks));
	memset(row, 0, sizeof(*row));
	row->pid = pid;
	for (i = 0; i < n; i++) {
		ks[i].key = (struct gpu_kernel_key){
			.tgid = pid, .api = GPU_KERNEL_RUNTIME, .func = addrs[i]};
		ks[i].k.launches = launches[i];
	}
	bpftel_gpu_kernels__fill(kt, row, 1, ks, n, true);
}

/* Host functions of this process, through /proc/self/maps and map_files, cached. */
static void test_runtime_names_cached(void **state)
{
	static struct bpftel_gpu_kernel_seen ks[4];
	static struct bpftel_gpu_proc row;
	struct bpftel_gpu_kernels *kt = real_kernels();
	__u64 addrs[4], launches[4];
	size_t i;
	int round;

	(void)state;
	for (i = 0; i < 4; i++) {
		addrs[i] = (__u64)(uintptr_t)stub_fn + i;
		launches[i] = 1;
	}
	for (round = 0; round < 2; round++) { /* parsed, then from the cache */
		self_report(kt, &row, ks, addrs, launches, 4);
		assert_int_equal(row.nkernels, 1);
		assert_string_equal(row.kernels[0].name, "saxpyOp(float, float*, float*, int)");
		assert_int_equal(row.kernels[0].launches, 4);
	}
	bpftel_gpu_kernels__free(kt);
}

/* A runtime kernel launched by handle (cudaKernel_t, nvcc 12.8+) is named by the host
 * function the handle was made for; kernels not named are merged per API, not across. */
static void test_handle_named_by_host(void **state)
{
	static struct bpftel_gpu_kernel_seen ks[3];
	static struct bpftel_gpu_proc row;
	struct bpftel_gpu_kernels *kt = real_kernels();
	__u32 pid = (__u32)getpid();
	size_t i;

	(void)state;
	row.pid = pid;
	/* 0xa000: a handle, in no mapping of this process, made for stub_fn. */
	ks[0].key = (struct gpu_kernel_key){.tgid = pid, .api = GPU_KERNEL_RUNTIME, .func = 0xa000};
	ks[0].host = (__u64)(uintptr_t)stub_fn;
	ks[0].k.launches = 5;
	/* A handle whose host function was not seen, and a driver kernel never named. */
	ks[1].key = (struct gpu_kernel_key){.tgid = pid, .api = GPU_KERNEL_RUNTIME, .func = 0xa010};
	ks[1].k.launches = 3;
	ks[2].key = (struct gpu_kernel_key){.tgid = pid, .api = GPU_KERNEL_DRIVER, .func = 0xd000};
	ks[2].k.launches = 2;
	bpftel_gpu_kernels__fill(kt, &row, 1, ks, 3, true);
	assert_int_equal(row.nkernels, 3);
	assert_string_equal(row.kernels[0].name, "saxpyOp(float, float*, float*, int)");
	assert_int_equal(row.kernels[0].launches, 5);
	for (i = 1; i < 3; i++) {
		assert_string_equal(row.kernels[i].name, "");
		assert_int_equal(row.kernels[i].driver, i == 2);
		assert_int_equal(row.kernels[i].launches, i == 1 ? 3 : 2);
	}
	bpftel_gpu_kernels__free(kt);
}

/* Opens for bpftel_gpu_symbolize_files: through open_fail_pid's process they fail as
 * a stalled owner's do (or all of them, or as a file that is not ELF); the others
 * are the real ones. Each try is counted. */
static __u32 open_fail_pid;
static int open_fail_all, open_fail_final, open_tries;

static int failing_open(const struct bpftel_procfile_target *t, struct stat *st,
			enum bpftel_refusal *why)
{
	open_tries++;
	if (open_fail_final) {
		*why = BPFTEL_REFUSED_NOT_ELF;
		return -ENOEXEC;
	}
	if (open_fail_all || t->pid == open_fail_pid) {
		*why = BPFTEL_REFUSED_SLOW_FS;
		return -EDQUOT;
	}
	return bpftel_procfile_open(t, st, why);
}

/* A child that maps what this process maps (forked), alive until its pipe closes. */
static pid_t twin(int *wfd)
{
	int p[2];
	pid_t pid;
	char c;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		close(p[1]);
		while (read(p[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(p[0]);
	*wfd = p[1];
	return pid;
}

/* A library's kernel launched most by a process through which its file cannot be
 * opened (gone since, or its owner's opens stall) is named through the next process
 * that maps it; with none, every one is left for a later report; a file refused for
 * what it is is not asked again. */
static void test_names_through_another_process(void **state)
{
	struct bpftel_gpu_sym syms[2];
	__u64 addr = (__u64)(uintptr_t)stub_fn;
	int wfd, status;
	pid_t child;

	(void)state;
	if (geteuid() != 0)
		skip();
	child = twin(&wfd);
	/* The child first: the most launched. */
	syms[0] = (struct bpftel_gpu_sym){.pid = (__u32)child, .addr = addr};
	syms[1] = (struct bpftel_gpu_sym){.pid = (__u32)getpid(), .addr = addr};

	open_fail_pid = (__u32)child;
	open_tries = 0;
	bpftel_gpu_symbolize_files(syms, 2, failing_open);
	assert_int_equal(open_tries, 2);
	assert_true(syms[0].tried && syms[1].tried);
	assert_false(syms[0].failed || syms[1].failed);
	assert_string_equal(syms[0].name, "saxpyOp(float, float*, float*, int)");
	assert_string_equal(syms[1].name, "saxpyOp(float, float*, float*, int)");

	open_fail_all = 1;
	open_tries = 0;
	bpftel_gpu_symbolize_files(syms, 2, failing_open);
	open_fail_all = 0;
	assert_int_equal(open_tries, 2);
	assert_false(syms[0].tried || syms[1].tried);
	assert_true(syms[0].failed && syms[1].failed);

	open_fail_final = 1;
	open_tries = 0;
	bpftel_gpu_symbolize_files(syms, 2, failing_open);
	open_fail_final = 0;
	assert_int_equal(open_tries, 1);
	assert_true(syms[0].tried && syms[1].tried);
	assert_string_equal(syms[0].name, "");

	close(wfd);
	assert_int_equal(waitpid(child, &status, 0), child);
}

/* A mangled name over 255 bytes is read whole and demangled, then cut to the label's
 * 255 bytes (it was cut before it was demangled, and shown mangled). */
static void test_long_mangled_name_demangled(void **state)
{
	static struct bpftel_gpu_kernel_seen ks[1];
	static struct bpftel_gpu_proc row;
	struct bpftel_gpu_kernels *kt = real_kernels();
	__u64 addr = (__u64)(uintptr_t)long_stub_fn, launches = 1;
	char want[BPFTEL_GPU_KERNEL_NAME] = "";
	int i;

	(void)state;
	for (i = 0; i < 10; i++)
		strncat(want, "abcdefghijklmnopqrstuvwxyzabcd::", sizeof(want) - 1 - strlen(want));
	self_report(kt, &row, ks, &addr, &launches, 1);
	assert_int_equal(row.nkernels, 1);
	assert_int_equal(strlen(row.kernels[0].name), sizeof(want) - 1);
	assert_string_equal(row.kernels[0].name, want);
	bpftel_gpu_kernels__free(kt);
}

/* Over 1 KiB, libiberty's demangler declines a name (its recursion limit, which also
 * bounds its stack): it is shown as it is, cut to the label. */
static void test_demangle_over_limit_shown_mangled(void **state)
{
	char name[1200] = "_ZN", out[BPFTEL_GPU_KERNEL_NAME];
	int i;

	(void)state;
	for (i = 0; i < 36; i++) /* 3 + 36 x 32 + 9 = 1164 bytes */
		strcat(name, NS30);
	strcat(name, "6kernelEv");
	assert_int_equal(strlen(name), 1164);
	bpftel_gpu_demangle(name, out, sizeof(out));
	assert_int_equal(strlen(out), sizeof(out) - 1);
	assert_memory_equal(out, name, sizeof(out) - 1);
	name[3 + 20 * 32] = '\0'; /* 20 namespaces, 652 bytes: under the limit, demangled */
	strcat(name, "6kernelEv");
	bpftel_gpu_demangle(name, out, sizeof(out));
	assert_int_equal(strncmp(out, "abcdefghijklmnopqrstuvwxyzabcd::", 32), 0);
}

/* The row's kernel called name: its launches, or -1. */
static long kernel_launches(const struct bpftel_gpu_proc *row, const char *name)
{
	size_t i;

	for (i = 0; i < row->nkernels; i++)
		if (!strcmp(row->kernels[i].name, name))
			return (long)row->kernels[i].launches;
	return -1;
}

/*
 * Host functions in six files this process maps: each file is parsed once for all of
 * its functions (three here in this program), and at most BPFTEL_GPU_NAME_FILES files
 * a report, those of the most launched first; the functions of the others are named at
 * the next report, not taken for unnamed.
 */
static void test_runtime_names_per_file(void **state)
{
	const __u64 addrs[8] = {
		(__u64)(uintptr_t)stub_fn,
		(__u64)(uintptr_t)stub_fn + 1, /* the same function, the same file */
		(__u64)(uintptr_t)stub_fn + 2,
		(__u64)(uintptr_t)zlibVersion,
		(__u64)(uintptr_t)elf_version,
		(__u64)(uintptr_t)cs_version,
		(__u64)(uintptr_t)json_object,
		(__u64)(uintptr_t)fnmatch, /* one name at its address (printf has two) */
	};
	const __u64 launches[8] = {60, 55, 54, 50, 40, 30, 20, 10};
	static const char *const names[] = {"zlibVersion", "elf_version", "cs_version"};
	static struct bpftel_gpu_kernel_seen ks[8];
	static struct bpftel_gpu_proc row;
	struct bpftel_gpu_kernels *kt = real_kernels();
	size_t i;
	int round;

	(void)state;
	for (round = 0; round < 2; round++) {
		self_report(kt, &row, ks, addrs, launches, 8);
		assert_int_equal(kernel_launches(&row, "saxpyOp(float, float*, float*, int)"),
				 60 + 55 + 54);
		for (i = 0; i < 3; i++)
			assert_int_equal(kernel_launches(&row, names[i]), (long)launches[3 + i]);
		/* Four files at the first report: libjansson's and libc's wait for the next. */
		assert_int_equal(kernel_launches(&row, "json_object"), round ? 20 : -1);
		assert_int_equal(kernel_launches(&row, "fnmatch"), round ? 10 : -1);
	}
	bpftel_gpu_kernels__free(kt);
}

/* At most 32 parses per report, the most launched first: 40 unmapped addresses
 * launched more spend them (a miss costs one too), the host function launched least
 * stays unnamed until the next report, when the misses are remembered. */
static void test_runtime_names_budgeted(void **state)
{
	static struct bpftel_gpu_kernel_seen ks[41];
	static struct bpftel_gpu_proc row;
	struct bpftel_gpu_kernels *kt = real_kernels();
	__u64 addrs[41], launches[41];
	size_t i;
	int round;

	(void)state;
	for (i = 0; i < 40; i++) {
		addrs[i] = 0x1000 + i * 16;
		launches[i] = 2;
	}
	addrs[40] = (__u64)(uintptr_t)stub_fn;
	launches[40] = 1;
	for (round = 0; round < 2; round++) {
		self_report(kt, &row, ks, addrs, launches, 41);
		if (round == 0) {
			assert_int_equal(row.nkernels, 1);
			assert_string_equal(row.kernels[0].name, "");
			assert_int_equal(row.kernels[0].launches, 81);
		} else {
			assert_int_equal(row.nkernels, 2);
			assert_string_equal(row.kernels[1].name,
					    "saxpyOp(float, float*, float*, int)");
			assert_int_equal(row.kernels[1].launches, 1);
		}
	}
	bpftel_gpu_kernels__free(kt);
}

/*
 * /metrics as Prometheus reads it: the samples of one family in the exposition of
 * rows, each with its pid and the values of the labels asked for, joined by '|'.
 */
struct sample {
	unsigned int pid;
	char labels[4 * BPFTEL_GPU_KERNEL_NAME + 2];
	unsigned long long v;
};

struct scrape {
	struct sample s[1024];
	size_t n;
};

/* The value of a quoted label at *p (escapes undone); *p moves past it. */
static void label_value(const char **p, char *out, size_t size)
{
	size_t n = 0;

	assert_true(**p == '"');
	for ((*p)++; **p && **p != '"'; (*p)++) {
		if (**p == '\\')
			(*p)++;
		assert_true(n + 1 < size);
		out[n++] = **p;
	}
	assert_true(**p == '"');
	(*p)++;
	out[n] = '\0';
}

static void scrape_rows(const struct bpftel_gpu_proc *rows, size_t n, const char *family,
			const char *const *labels, size_t nlabels, struct scrape *out)
{
	char *buf = NULL, *line, *save = NULL, name[64], value[2 * BPFTEL_GPU_KERNEL_NAME];
	size_t len = 0, flen = strlen(family), i;
	FILE *f = open_memstream(&buf, &len);
	struct bpftel_prom *w;
	const char *p;

	assert_non_null(f);
	w = bpftel_prom_new(f);
	bpftel_gpu_metrics_rows(w, rows, (int)n);
	bpftel_prom_free(w);
	fclose(f);
	out->n = 0;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct sample *smp = &out->s[out->n];
		char vals[2][2 * BPFTEL_GPU_KERNEL_NAME] = {"", ""};

		if (strncmp(line, family, flen) || line[flen] != '{')
			continue;
		assert_true(out->n < sizeof(out->s) / sizeof(out->s[0]));
		memset(smp, 0, sizeof(*smp));
		for (p = line + flen + 1; *p != '}';) {
			i = strcspn(p, "=");
			assert_true(i < sizeof(name));
			memcpy(name, p, i);
			name[i] = '\0';
			p += i + 1;
			label_value(&p, value, sizeof(value));
			if (!strcmp(name, "pid"))
				smp->pid = (unsigned int)strtoul(value, NULL, 10);
			for (i = 0; i < nlabels; i++)
				if (!strcmp(name, labels[i]))
					snprintf(vals[i], sizeof(vals[i]), "%s", value);
			if (*p == ',')
				p++;
		}
		snprintf(smp->labels, sizeof(smp->labels), "%s%s%s", vals[0],
			 nlabels > 1 ? "|" : "", nlabels > 1 ? vals[1] : "");
		smp->v = strtoull(p + 2, NULL, 10);
		out->n++;
	}
	free(buf);
}

static const struct sample *find_sample(const struct scrape *sc, unsigned int pid,
					const char *labels)
{
	size_t i;

	for (i = 0; i < sc->n; i++)
		if (sc->s[i].pid == pid && !strcmp(sc->s[i].labels, labels))
			return &sc->s[i];
	return NULL;
}

/*
 * What a counter family must do from one scrape to the next: every series of a process
 * still there is still there, and not lower; no (pid, labels) twice; and the series of
 * each process sum to total(row).
 */
static void check_counters(const struct scrape *before, const struct scrape *now,
			   const struct bpftel_gpu_proc *rows, size_t n,
			   __u64 (*total)(const struct bpftel_gpu_proc *))
{
	const struct sample *s;
	unsigned long long sum;
	size_t i, j;

	for (i = 0; before && i < before->n; i++) {
		for (j = 0; j < n && rows[j].pid != before->s[i].pid; j++)
			;
		if (j == n)
			continue; /* the process is gone */
		s = find_sample(now, before->s[i].pid, before->s[i].labels);
		if (!s)
			fail_msg("pid %u: series {%s} disappeared", before->s[i].pid,
				 before->s[i].labels);
		if (s->v < before->s[i].v)
			fail_msg("pid %u: series {%s} went down from %llu to %llu",
				 before->s[i].pid, before->s[i].labels, before->s[i].v, s->v);
	}
	for (i = 0; i < now->n; i++)
		assert_ptr_equal(find_sample(now, now->s[i].pid, now->s[i].labels), &now->s[i]);
	for (j = 0; j < n; j++) {
		for (i = 0, sum = 0; i < now->n; i++)
			if (now->s[i].pid == rows[j].pid)
				sum += now->s[i].v;
		if (sum != total(&rows[j]))
			fail_msg("pid %u: the series sum to %llu, not %llu", rows[j].pid, sum,
				 (unsigned long long)total(&rows[j]));
	}
}

/* The process's launches as the module sums them (every launch function). */
static __u64 launches_of(const struct bpftel_gpu_proc *p)
{
	return bpftel_gpu_launches(&p->st);
}

/* Host functions at FAKE_BASE + i are named fake_names[i] by fake_symbolize. */
#define FAKE_BASE 0x10000
static const char *fake_names[128];
static int fake_parses;

static void fake_symbolize(struct bpftel_gpu_sym *syms, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		fake_parses++;
		assert_true(syms[i].addr >= FAKE_BASE && syms[i].addr < FAKE_BASE + 128);
		snprintf(syms[i].name, sizeof(syms[i].name), "%s",
			 fake_names[syms[i].addr - FAKE_BASE] ? fake_names[syms[i].addr - FAKE_BASE]
								: "");
		syms[i].tried = true;
	}
}

/* A symbolizer whose opens all fail (fake_symbolize's, failed). */
static void failed_symbolize(struct bpftel_gpu_sym *syms, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		fake_parses++;
		syms[i].name[0] = '\0';
		syms[i].tried = false;
		syms[i].failed = true;
	}
}

/* One report's maps: rows and the kernels read. */
struct report {
	struct bpftel_gpu_proc rows[16];
	size_t n;
	struct bpftel_gpu_kernel_seen ks[256];
	size_t nks;
	bool short_list; /* the read listed only some kernels (gpu.c's KERNELS_LISTED) */
};

static struct bpftel_gpu_proc *report_row(struct report *r, __u32 pid)
{
	size_t i;

	for (i = 0; i < r->n; i++)
		if (r->rows[i].pid == pid)
			return &r->rows[i];
	assert_true(r->n < sizeof(r->rows) / sizeof(r->rows[0]));
	memset(&r->rows[r->n], 0, sizeof(r->rows[0]));
	r->rows[r->n].pid = pid;
	return &r->rows[r->n++];
}

/* A kernel of pid: runtime at FAKE_BASE + i, or driver handle i named driver_name. */
static void report_kernel(struct report *r, __u32 pid, bool driver, unsigned int i, __u64 launches,
			  const char *driver_name)
{
	struct bpftel_gpu_kernel_seen *k = &r->ks[r->nks++];

	assert_true(r->nks <= sizeof(r->ks) / sizeof(r->ks[0]));
	memset(k, 0, sizeof(*k));
	k->key = (struct gpu_kernel_key){.tgid = pid,
					 .api = driver ? GPU_KERNEL_DRIVER : GPU_KERNEL_RUNTIME,
					 .func = driver ? i : FAKE_BASE + i};
	k->k.launches = launches;
	snprintf(k->driver_name, sizeof(k->driver_name), "%s", driver_name ? driver_name : "");
	report_row(r, pid)->st.calls[driver ? GPU_FN_CU_LAUNCH : GPU_FN_LAUNCH] += launches;
}

static const char *const kernel_label[] = {"kernel"};

/* Fill and scrape one report; its counters checked against the scrape before. */
static void report_scrape(struct bpftel_gpu_kernels *kt, struct report *r, struct scrape *before,
			  struct scrape *now)
{
	fake_parses = 0;
	bpftel_gpu_kernels__fill(kt, r->rows, r->n, r->ks, r->nks, !r->short_list);
	assert_true(fake_parses <= BPFTEL_GPU_NAME_BUDGET);
	scrape_rows(r->rows, r->n, "bpftel_gpu_kernel_name_launches_total", kernel_label, 1, now);
	check_counters(before, now, r->rows, r->n, launches_of);
}

static struct report rep;
static struct scrape sc[4];

/*
 * Eight kernels with series and a ninth that overtakes the eighth: the eighth keeps
 * its series, the ninth's launches stay in kernel="other", which only grows; launches
 * the kernel map missed are in "other" too, so the family sums to the process's
 * launches. 40 more kernels, named over two reports (32 parses a report), have no series
 * left to take.
 */
static void test_kernel_series_overtaken(void **state)
{
	struct bpftel_gpu_kernels *kt = bpftel_gpu_kernels__new(fake_symbolize);
	static const char *const names[] = {"A", "B", "C", "D", "E", "F", "G", "H", "I"};
	static char more[40][8];
	int i, k;

	(void)state;
	assert_non_null(kt);
	for (i = 0; i < 9; i++)
		fake_names[i] = names[i];
	for (i = 0; i < 40; i++) {
		snprintf(more[i], sizeof(more[i]), "u%d", i);
		fake_names[9 + i] = more[i];
	}
	for (k = 0; k < 3; k++) {
		memset(&rep, 0, sizeof(rep));
		for (i = 0; i < 8; i++)
			report_kernel(&rep, 100, false, i, 80 - 10 * i + k, NULL);
		/* I: 5 launches, then far more than H (10 + k). */
		report_kernel(&rep, 100, false, 8, k ? 500 * k : 5, NULL);
		for (i = 0; i < 40; i++)
			report_kernel(&rep, 100, false, 9 + i, 1 + k, NULL);
		report_row(&rep, 100)->st.calls[GPU_FN_LAUNCH] += 3; /* not in the map */
		report_scrape(kt, &rep, k ? &sc[k - 1] : NULL, &sc[k]);
		assert_int_equal(rep.rows[0].nkseries, 8);
		assert_non_null(find_sample(&sc[k], 100, "H"));
		assert_null(find_sample(&sc[k], 100, "I"));
		assert_int_equal(sc[k].n, 9); /* the 8 and "other" */
	}
	/* Series began at the first report: they count every launch. */
	assert_int_equal(find_sample(&sc[2], 100, "A")->v, 82);
	assert_int_equal(find_sample(&sc[2], 100, "H")->v, 12);
	assert_int_equal(find_sample(&sc[2], 100, "other")->v, 1000 + 40 * 3 + 3);
	bpftel_gpu_kernels__free(kt);
}

/*
 * Kernels a report does not list (gpu.c lists the 8192 most launched): their launches
 * are in kernel="other" then, and must not reach a series as well when they are listed
 * again. A has a series, is left out of the second report and back in the third; C is
 * launched by then but first listed in the third. Every scrape sums to the process's
 * launches and no series goes down (check_counters); A's series holds while A is not
 * listed.
 */
static void test_kernel_series_when_the_list_is_short(void **state)
{
	struct bpftel_gpu_kernels *kt = bpftel_gpu_kernels__new(fake_symbolize);
	static const __u64 a[] = {10, 30, 40}, b[] = {5, 6, 7}, c[] = {0, 50, 60};
	int k;

	(void)state;
	assert_non_null(kt);
	fake_names[70] = "A";
	fake_names[71] = "B";
	fake_names[72] = "C";
	for (k = 0; k < 3; k++) {
		memset(&rep, 0, sizeof(rep));
		rep.short_list = k == 1;
		if (k == 1) /* A and C launched, not listed */
			report_row(&rep, 100)->st.calls[GPU_FN_LAUNCH] += a[k] + c[k];
		else
			report_kernel(&rep, 100, false, 70, a[k], NULL);
		report_kernel(&rep, 100, false, 71, b[k], NULL);
		if (k == 2)
			report_kernel(&rep, 100, false, 72, c[k], NULL);
		report_scrape(kt, &rep, k ? &sc[k - 1] : NULL, &sc[k]);
	}
	assert_int_equal(find_sample(&sc[0], 100, "A")->v, 10);
	assert_int_equal(find_sample(&sc[1], 100, "A")->v, 10);
	assert_int_equal(find_sample(&sc[2], 100, "B")->v, 7);
	fake_names[70] = fake_names[71] = fake_names[72] = NULL;
	bpftel_gpu_kernels__free(kt);
}

/*
 * One process with more distinct kernels than the module keeps handles for (8192), each
 * launched more than another process's: it gets BPFTEL_GPU_KERNELS_PER_PROC of them, and
 * the other process's kernels are still named (they were left without a handle, so
 * unnamed, while the first one lived).
 */
static void test_kernel_handles_per_process(void **state)
{
	enum { HOG = 9000 };
	struct bpftel_gpu_kernels *kt = bpftel_gpu_kernels__new(fake_symbolize);
	static struct bpftel_gpu_kernel_seen ks[HOG + 2];
	static struct bpftel_gpu_proc rows[2];
	size_t i, n = 0;
	int r;

	(void)state;
	assert_non_null(kt);
	fake_names[80] = "victim_a";
	fake_names[81] = "victim_b";
	for (r = 0; r < 2; r++) { /* the names come at the first report, and stay */
		memset(rows, 0, sizeof(rows));
		rows[0].pid = 600;
		rows[1].pid = 700;
		for (i = 0, n = 0; i < HOG; i++, n++) {
			memset(&ks[n], 0, sizeof(ks[n]));
			ks[n].key = (struct gpu_kernel_key){.tgid = 600, .api = GPU_KERNEL_DRIVER,
							    .func = 0xd0000 + i};
			ks[n].k.launches = 1000 + i;
			snprintf(ks[n].driver_name, sizeof(ks[n].driver_name), "hog%zu", i);
		}
		for (i = 0; i < 2; i++, n++) {
			memset(&ks[n], 0, sizeof(ks[n]));
			ks[n].key = (struct gpu_kernel_key){.tgid = 700, .api = GPU_KERNEL_RUNTIME,
							    .func = FAKE_BASE + 80 + i};
			ks[n].k.launches = 10 - i;
		}
		bpftel_gpu_kernels__fill(kt, rows, 2, ks, n, true);
	}
	assert_int_equal(rows[1].nkernels, 2);
	assert_string_equal(rows[1].kernels[0].name, "victim_a");
	assert_string_equal(rows[1].kernels[1].name, "victim_b");
	assert_int_equal(rows[0].nkernels, HOG);
	fake_names[80] = fake_names[81] = NULL;
	bpftel_gpu_kernels__free(kt);
}

/*
 * Two host functions of one name, the less launched first in the map's order: the
 * merged kernel shows the grid and block of the more launched one (it showed whichever
 * sorted first). Rows come in no pid order: each process gets its own kernels.
 */
static void test_merged_kernel_sizes_of_the_most_launched(void **state)
{
	struct bpftel_gpu_kernels *kt = bpftel_gpu_kernels__new(fake_symbolize);
	static const __u32 pids[] = {300, 200, 250};
	struct bpftel_gpu_proc *p;
	size_t i, j;

	(void)state;
	assert_non_null(kt);
	fake_names[60] = "twin";
	fake_names[61] = "twin";
	memset(&rep, 0, sizeof(rep));
	for (i = 0; i < 3; i++) {
		report_kernel(&rep, pids[i], false, 60, 5 + i, NULL);
		rep.ks[rep.nks - 1].k.grid[0] = 1;
		report_kernel(&rep, pids[i], false, 61, 50 + i, NULL);
		rep.ks[rep.nks - 1].k.grid[0] = 7;
		rep.ks[rep.nks - 1].k.block[0] = 128;
	}
	report_scrape(kt, &rep, NULL, &sc[0]);
	for (i = 0; i < 3; i++) {
		for (j = 0, p = NULL; j < rep.n; j++)
			if (rep.rows[j].pid == pids[i])
				p = &rep.rows[j];
		assert_non_null(p);
		assert_int_equal(p->nkernels, 1);
		assert_string_equal(p->kernels[0].name, "twin");
		assert_int_equal(p->kernels[0].launches, 55 + 2 * i);
		assert_int_equal(p->kernels[0].grid[0], 7);
		assert_int_equal(p->kernels[0].block[0], 128);
	}
	fake_names[60] = fake_names[61] = NULL;
	bpftel_gpu_kernels__free(kt);
}

/*
 * Names arriving over reports: 40 host functions of 4 names, 32 named at the first
 * report (each name has a series then), the 8 least launched at the second, when they
 * join their names' series from where they were (their launches until then stay in
 * "other"); a driver kernel whose name the map gives only at the second report gets a
 * series then. No series goes down, "other" neither, and the sums hold.
 */
static void test_kernel_series_names_arrive(void **state)
{
	struct bpftel_gpu_kernels *kt = bpftel_gpu_kernels__new(fake_symbolize);
	static const char *const names[] = {"n0", "n1", "n2", "n3"};
	const struct sample *s;
	int i, k;

	(void)state;
	assert_non_null(kt);
	memset(fake_names, 0, sizeof(fake_names));
	for (i = 0; i < 40; i++)
		fake_names[i] = names[i % 4];
	for (k = 0; k < 3; k++) {
		memset(&rep, 0, sizeof(rep));
		for (i = 0; i < 40; i++)
			report_kernel(&rep, 300, false, i, 10 + i + k, NULL);
		report_kernel(&rep, 300, true, 7, 50 + k, k ? "drv" : NULL);
		report_scrape(kt, &rep, k ? &sc[k - 1] : NULL, &sc[k]);
		assert_int_equal(rep.rows[0].nkseries, k ? 5 : 4);
	}
	/* n0: handles 8, 12, ..., 36 from the start (10 + i + 2 launches each), handles 0
	 * and 4 from the first report (2 launches each since). */
	s = find_sample(&sc[2], 300, "n0");
	assert_non_null(s);
	assert_int_equal(s->v, (20 + 24 + 28 + 32 + 36 + 40 + 44 + 48) + 2 + 2);
	/* drv: from the first report, 51 and 52 launches. */
	assert_int_equal(find_sample(&sc[2], 300, "drv")->v, 2);
	assert_true(find_sample(&sc[0], 300, "other")->v > 0);
	bpftel_gpu_kernels__free(kt);
}

/* A CUfunction's address given to another kernel (a JIT's module unloaded, the next
 * loaded where it was): the launches its handle had under the first name stay that
 * series', the later ones go to the new name's; no counter goes down. */
static void test_driver_handle_renamed(void **state)
{
	struct bpftel_gpu_kernels *kt = bpftel_gpu_kernels__new(fake_symbolize);
	static const __u64 launches[] = {10, 15, 25, 40};
	static const char *const names[] = {"jit_a", "jit_a", "jit_b", "jit_b"};
	const struct sample *a, *b;
	int k;

	(void)state;
	assert_non_null(kt);
	for (k = 0; k < 4; k++) {
		memset(&rep, 0, sizeof(rep));
		report_kernel(&rep, 310, true, 7, launches[k], names[k]);
		report_scrape(kt, &rep, k ? &sc[k - 1] : NULL, &sc[k]);
	}
	a = find_sample(&sc[3], 310, "jit_a");
	b = find_sample(&sc[3], 310, "jit_b");
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(a->v, 15);
	assert_int_equal(b->v, 25);
	a = find_sample(&sc[3], 310, "other");
	assert_true(!a || a->v == 0);
	assert_string_equal(rep.rows[0].kernels[0].name, "jit_b");
	bpftel_gpu_kernels__free(kt);
}

/*
 * A report in steps (gpu.c parses without its report lock): wanted() asks for the
 * unnamed runtime kernels, the most launched first, at most the budget, and changes
 * nothing; fill_named() names those it is given, by (pid, address), and parses nothing;
 * one not given stays unnamed and is asked for again at the next report; once named,
 * it is asked for no more. Driver kernels are named from the map, never asked for.
 */
static void test_names_parsed_apart(void **state)
{
	struct bpftel_gpu_kernels *kt = bpftel_gpu_kernels__new(fake_symbolize);
	struct bpftel_gpu_sym syms[BPFTEL_GPU_NAME_BUDGET];
	size_t n, i;

	(void)state;
	assert_non_null(kt);
	memset(fake_names, 0, sizeof(fake_names));
	fake_names[0] = "k0";
	fake_names[1] = "k1";
	fake_names[2] = "k2";
	memset(&rep, 0, sizeof(rep));
	for (i = 0; i < 40; i++)
		report_kernel(&rep, 400, false, (unsigned int)i, 100 - i, NULL);
	report_kernel(&rep, 400, true, 7, 1000, "drv");
	n = bpftel_gpu_kernels__wanted(kt, rep.ks, rep.nks, syms);
	assert_int_equal(n, BPFTEL_GPU_NAME_BUDGET);
	for (i = 0; i < n; i++) { /* the most launched first; not the driver kernel */
		assert_int_equal(syms[i].pid, 400);
		assert_int_equal(syms[i].addr, FAKE_BASE + i);
	}
	assert_int_equal(bpftel_gpu_kernels__wanted(kt, rep.ks, rep.nks, syms), n);

	/* Only k0 and k2 parsed: k1 stays unnamed, nothing parsed here. */
	fake_parses = 0;
	fake_symbolize(&syms[2], 1);
	fake_symbolize(&syms[0], 1);
	syms[1] = syms[2];
	bpftel_gpu_kernels__fill_named(kt, rep.rows, rep.n, rep.ks, rep.nks, true, syms, 2);
	assert_int_equal(fake_parses, 2);
	/* The unnamed merged (k1, 99 launches, among them), drv, k0, k2. */
	assert_string_equal(rep.rows[0].kernels[0].name, "");
	assert_int_equal(rep.rows[0].kernels[0].launches, 40 * 100 - 39 * 40 / 2 - 100 - 98);
	assert_string_equal(rep.rows[0].kernels[1].name, "drv");
	assert_string_equal(rep.rows[0].kernels[2].name, "k0");
	assert_int_equal(rep.rows[0].kernels[2].launches, 100);
	assert_string_equal(rep.rows[0].kernels[3].name, "k2");
	assert_int_equal(rep.rows[0].kernels[3].launches, 98);

	n = bpftel_gpu_kernels__wanted(kt, rep.ks, rep.nks, syms);
	assert_int_equal(n, BPFTEL_GPU_NAME_BUDGET); /* k1 and those beyond the budget */
	assert_int_equal(syms[0].addr, FAKE_BASE + 1);
	assert_int_equal(syms[1].addr, FAKE_BASE + 3);
	bpftel_gpu_kernels__free(kt);
}

/* One process launching 40 functions a million times each does not take a report's
 * every name: another's kernel, launched 10 times, is asked for in the same report; a
 * process alone is given the whole budget. */
static void test_names_shared_between_processes(void **state)
{
	struct bpftel_gpu_kernels *kt = bpftel_gpu_kernels__new(fake_symbolize);
	struct bpftel_gpu_sym syms[BPFTEL_GPU_NAME_BUDGET];
	size_t n, i, of_a = 0;
	bool b = false;

	(void)state;
	assert_non_null(kt);
	memset(&rep, 0, sizeof(rep));
	for (i = 0; i < 40; i++)
		report_kernel(&rep, 700, false, (unsigned int)i, 1000000, NULL);
	report_kernel(&rep, 701, false, 50, 10, NULL);
	n = bpftel_gpu_kernels__wanted(kt, rep.ks, rep.nks, syms);
	assert_int_equal(n, BPFTEL_GPU_NAME_BUDGET);
	for (i = 0; i < n; i++) {
		of_a += syms[i].pid == 700;
		b |= syms[i].pid == 701 && syms[i].addr == FAKE_BASE + 50;
	}
	assert_true(b);
	assert_int_equal(of_a, BPFTEL_GPU_NAME_BUDGET - 1);
	memset(&rep, 0, sizeof(rep));
	for (i = 0; i < 40; i++)
		report_kernel(&rep, 700, false, (unsigned int)i, 1000000, NULL);
	assert_int_equal(bpftel_gpu_kernels__wanted(kt, rep.ks, rep.nks, syms),
			 BPFTEL_GPU_NAME_BUDGET);
	bpftel_gpu_kernels__free(kt);
}

/* Two cudaKernel_t handles made for one host function, and that function launched
 * directly: one name asked for, and all three named by it. */
static void test_names_asked_once(void **state)
{
	struct bpftel_gpu_kernels *kt = bpftel_gpu_kernels__new(fake_symbolize);
	struct bpftel_gpu_sym syms[BPFTEL_GPU_NAME_BUDGET];
	size_t n;

	(void)state;
	assert_non_null(kt);
	memset(fake_names, 0, sizeof(fake_names));
	fake_names[3] = "k3";
	memset(&rep, 0, sizeof(rep));
	report_kernel(&rep, 500, false, 3, 10, NULL);
	report_kernel(&rep, 500, false, 50, 20, NULL);
	rep.ks[1].host = FAKE_BASE + 3;
	report_kernel(&rep, 500, false, 51, 30, NULL);
	rep.ks[2].host = FAKE_BASE + 3;
	n = bpftel_gpu_kernels__wanted(kt, rep.ks, rep.nks, syms);
	assert_int_equal(n, 1);
	assert_int_equal(syms[0].addr, FAKE_BASE + 3);
	fake_parses = 0;
	bpftel_gpu_kernels__symbolize(kt, syms, n);
	assert_int_equal(fake_parses, 1);
	bpftel_gpu_kernels__fill_named(kt, rep.rows, rep.n, rep.ks, rep.nks, true, syms, n);
	assert_string_equal(rep.rows[0].kernels[0].name, "k3");
	assert_int_equal(rep.rows[0].kernels[0].launches, 60);
	assert_int_equal(bpftel_gpu_kernels__wanted(kt, rep.ks, rep.nks, syms), 0);
	bpftel_gpu_kernels__free(kt);
}

/* Host functions whose file could not be opened are asked for again at the next
 * reports: one named at a retry is named; one whose file failed BPFTEL_GPU_NAME_TRIES
 * times is left unnamed, and no report asks for it again. */
static void test_failed_names_retried(void **state)
{
	struct bpftel_gpu_kernels *kt = bpftel_gpu_kernels__new(failed_symbolize);
	struct bpftel_gpu_sym syms[BPFTEL_GPU_NAME_BUDGET];
	size_t n;
	int r;

	(void)state;
	assert_non_null(kt);
	memset(fake_names, 0, sizeof(fake_names));
	fake_names[0] = "k0";
	fake_names[1] = "k1";
	for (r = 1; r <= BPFTEL_GPU_NAME_TRIES; r++) {
		memset(&rep, 0, sizeof(rep));
		report_kernel(&rep, 600, false, 0, 10, NULL);
		report_kernel(&rep, 600, false, 1, 5, NULL);
		n = bpftel_gpu_kernels__wanted(kt, rep.ks, rep.nks, syms);
		assert_int_equal(n, 2);
		assert_int_equal(syms[0].addr, FAKE_BASE);
		bpftel_gpu_kernels__symbolize(kt, syms, 1);
		if (r < BPFTEL_GPU_NAME_TRIES)
			failed_symbolize(&syms[1], 1);
		else
			fake_symbolize(&syms[1], 1);
		bpftel_gpu_kernels__fill_named(kt, rep.rows, rep.n, rep.ks, rep.nks, true, syms,
					       n);
	}
	assert_int_equal(bpftel_gpu_kernels__wanted(kt, rep.ks, rep.nks, syms), 0);
	assert_string_equal(rep.rows[0].kernels[0].name, "");
	assert_int_equal(rep.rows[0].kernels[0].launches, 10);
	assert_string_equal(rep.rows[0].kernels[1].name, "k1");
	assert_int_equal(rep.rows[0].kernels[1].launches, 5);
	bpftel_gpu_kernels__free(kt);
}

/*
 * The series budget over processes: 9 processes of 10 kernels each, named over three
 * reports (32 parses a report); 64 series for the first 8 processes (8 each, the most
 * launched first: never k0) and none left for the ninth; when one exits, its series go
 * and the ninth gets 8. A kernel named "other" (i = 9) stays in kernel="other".
 */
static void test_kernel_series_budget_over_processes(void **state)
{
	struct bpftel_gpu_kernels *kt = bpftel_gpu_kernels__new(fake_symbolize);
	static char knames[9][8];
	size_t j, named;
	int i, p, k;

	(void)state;
	assert_non_null(kt);
	memset(fake_names, 0, sizeof(fake_names));
	for (i = 0; i < 9; i++) {
		snprintf(knames[i], sizeof(knames[i]), "k%d", i);
		fake_names[i] = knames[i];
	}
	fake_names[9] = "other";
	for (k = 0; k < 4; k++) {
		memset(&rep, 0, sizeof(rep));
		for (p = k == 3 ? 1 : 0; p < 9; p++) /* process 0 exited before the fourth */
			for (i = 0; i < 10; i++)
				report_kernel(&rep, 1000 + p, false, i, (9 - p) * 100 + i + k,
					      NULL);
		if (k == 3)
			bpftel_gpu_kernels__forget(kt, 1000);
		report_scrape(kt, &rep, k ? &sc[k - 1] : NULL, &sc[k]);
		for (j = 0, named = 0; j < sc[k].n; j++) {
			named += strcmp(sc[k].s[j].labels, "other") != 0;
			assert_string_not_equal(sc[k].s[j].labels, "k0");
		}
		assert_true(named <= BPFTEL_GPU_KERNEL_SERIES);
		if (k < 2)
			continue; /* every kernel named by the third report */
		assert_int_equal(named, BPFTEL_GPU_KERNEL_SERIES);
		for (j = 0; j < rep.n; j++)
			assert_int_equal(rep.rows[j].nkseries,
					 rep.rows[j].pid == 1008 && k == 2 ? 0 : 8);
	}
	assert_null(find_sample(&sc[3], 1000, "k1"));
	assert_non_null(find_sample(&sc[3], 1008, "k1"));
	bpftel_gpu_kernels__free(kt);
}

/* A user's processes, their kernels the most launched, hold at most the user's share
 * of the kernel series (16 of 64 at 25 %); root's process, launching less, gets all 8
 * of its own. */
static void test_kernel_series_share_per_owner(void **state)
{
	struct bpftel_gpu_kernels *kt = bpftel_gpu_kernels__new(fake_symbolize);
	static char knames[8][8];
	unsigned int users = 0, roots = 0;
	size_t j;
	int i, p, k;

	(void)state;
	assert_non_null(kt);
	bpftel_gpu_kernels__set_per_owner(kt, 16);
	memset(fake_names, 0, sizeof(fake_names));
	for (i = 0; i < 8; i++) {
		snprintf(knames[i], sizeof(knames[i]), "k%d", i);
		fake_names[i] = knames[i];
	}
	for (k = 0; k < 4; k++) { /* 48 kernels, named 32 a report */
		memset(&rep, 0, sizeof(rep));
		for (p = 0; p < 6; p++)
			for (i = 0; i < 8; i++)
				report_kernel(&rep, p < 5 ? 2000 + p : 3000, false, i,
					      p < 5 ? 1000 + k : 10 + k, NULL);
		for (j = 0; j < rep.n; j++)
			rep.rows[j].st.owner = rep.rows[j].pid == 3000 ? 0 : 1000;
		report_scrape(kt, &rep, k ? &sc[k - 1] : NULL, &sc[k]);
	}
	for (j = 0; j < rep.n; j++) {
		if (rep.rows[j].pid == 3000)
			roots += rep.rows[j].nkseries;
		else
			users += rep.rows[j].nkseries;
	}
	assert_int_equal(users, 16);
	assert_int_equal(roots, 8);
	bpftel_gpu_kernels__free(kt);
}

static __u64 failed_of(const struct bpftel_gpu_proc *p)
{
	__u64 sum = 0;
	int f;

	for (f = 0; f < GPU_FN__COUNT; f++)
		sum += p->st.failed[f];
	return sum;
}

/*
 * bpftel_gpu_cuda_errors_total over three scrapes of a process failing with 19 kinds of
 * error, then 20: a new kind the error map walks first (as a hash map may) with more
 * failures than any. The 16 kinds listed first keep their series; the rest, the new
 * kind and failures the map could not hold are their function's error="other"; no
 * series disappears or goes down; the family sums to the process's failed calls, and
 * per function to the function's.
 */
static void test_error_series_are_counters(void **state)
{
	static const enum gpu_func funcs[] = {GPU_FN_LAUNCH, GPU_FN_MALLOC, GPU_FN_MEMCPY,
					      GPU_FN_CU_INIT};
	static const char *const labels[] = {"function", "error"};
	struct bpftel_gpu_errors *et = bpftel_gpu_errors__new();
	static struct bpftel_gpu_error_seen es[32];
	static struct bpftel_gpu_proc row;
	char prefix[64];
	size_t nes, j, listed;
	__u64 sum;
	int i, k, f;

	(void)state;
	assert_non_null(et);
	for (k = 0; k < 3; k++) {
		memset(&row, 0, sizeof(row));
		row.pid = 500;
		nes = 0;
		if (k) /* the new kind */
			es[nes++] = (struct bpftel_gpu_error_seen){
				{.tgid = 500, .func = GPU_FN_MALLOC, .error = 2}, 1000 * (__u64)k};
		for (i = 0; i < 19; i++)
			es[nes++] = (struct bpftel_gpu_error_seen){
				{.tgid = 500, .func = funcs[i % 4], .error = 100 + i},
				(__u64)(1 + i + k)};
		for (j = 0; j < nes; j++)
			row.st.failed[es[j].key.func] += es[j].count;
		row.st.failed[GPU_FN_SET_DEVICE] += 2; /* not in the map */
		bpftel_gpu_errors__fill(et, &row, 1, es, nes);
		scrape_rows(&row, 1, "bpftel_gpu_cuda_errors_total", labels, 2, &sc[k]);
		check_counters(k ? &sc[k - 1] : NULL, &sc[k], &row, 1, failed_of);
		for (f = 0; f < GPU_FN__COUNT; f++) {
			snprintf(prefix, sizeof(prefix), "%s|", bpftel_gpu_func_name(f));
			for (j = 0, sum = 0; j < sc[k].n; j++)
				if (!strncmp(sc[k].s[j].labels, prefix, strlen(prefix)))
					sum += sc[k].s[j].v;
			assert_int_equal(sum, row.st.failed[f]);
		}
		for (j = 0, listed = 0; j < sc[k].n; j++)
			listed += !strstr(sc[k].s[j].labels, "|other");
		assert_int_equal(listed, BPFTEL_GPU_MAX_ERRORS);
		assert_int_equal(row.nerrors, nes);
		assert_int_equal(row.nlisted, BPFTEL_GPU_MAX_ERRORS);
		assert_null(find_sample(&sc[k], 500, "cudaMalloc|cudaErrorMemoryAllocation"));
	}
	assert_int_equal(find_sample(&sc[2], 500, "cudaSetDevice|other")->v, 2);
	bpftel_gpu_errors__free(et);
}

/*
 * errors_not_listed (nerrors - nlisted): a listed kind that one read misses (its entry
 * gone, or not reached) is still listed, and the kinds read beyond the list still count:
 * 18 kinds, 16 listed, then the same less a listed one, is 2 not listed both times.
 */
static void test_errors_not_listed_with_a_missed_kind(void **state)
{
	struct bpftel_gpu_errors *et = bpftel_gpu_errors__new();
	static struct bpftel_gpu_error_seen es[32];
	static struct bpftel_gpu_proc row;
	size_t nes, j, w;
	int i;

	(void)state;
	assert_non_null(et);
	for (i = 0, nes = 0; i < 18; i++)
		es[nes++] = (struct bpftel_gpu_error_seen){
			{.tgid = 77, .func = GPU_FN_MALLOC, .error = 200 + i}, (__u64)(1 + i)};
	memset(&row, 0, sizeof(row));
	row.pid = 77;
	bpftel_gpu_errors__fill(et, &row, 1, es, nes);
	assert_int_equal(row.nlisted, BPFTEL_GPU_MAX_ERRORS);
	assert_int_equal(row.nerrors - row.nlisted, 2);

	for (j = 0, w = 0; j < nes; j++) /* the read misses the first listed kind */
		if (es[j].key.error != row.errors[0].error)
			es[w++] = es[j];
	assert_int_equal(w, nes - 1);
	memset(&row, 0, sizeof(row));
	row.pid = 77;
	bpftel_gpu_errors__fill(et, &row, 1, es, w);
	assert_int_equal(row.nlisted, BPFTEL_GPU_MAX_ERRORS);
	assert_int_equal(row.nerrors - row.nlisted, 2);
	bpftel_gpu_errors__free(et);
}

/* rows[0..n) of pids with their launches (born: when the row was made), as a report
 * reads them; rows has room for n + 1. */
static void series_rows(struct bpftel_gpu_proc *rows, const __u32 *pids, const __u64 *born,
			const __u64 *launches, size_t n)
{
	size_t i;

	memset(rows, 0, (n + 1) * sizeof(*rows));
	for (i = 0; i < n; i++) {
		rows[i].pid = pids[i];
		rows[i].st.born_ns = born[i];
		rows[i].st.calls[GPU_FN_LAUNCH] = launches[i];
		rows[i].kseries_other = launches[i];
		rows[i].st.mem[GPU_MEM_DEVICE].outstanding_bytes = (__s64)(100 * pids[i]);
	}
}

/* series_rows(), then folded (budget: gpu_series.h), scraped and checked against the
 * scrape before. Returns the rows with series, the "other" row included. */
static size_t series_scrape(struct bpftel_gpu_series *gs, struct bpftel_gpu_proc *rows,
			    const __u32 *pids, const __u64 *born, const __u64 *launches, size_t n,
			    struct scrape *before, struct scrape *now)
{
	bool other;
	size_t own;

	series_rows(rows, pids, born, launches, n);
	bpftel_gpu_series__update(gs, rows, n);
	own = bpftel_gpu_series__fold(gs, rows, n, &other);
	scrape_rows(rows, own + other, "bpftel_gpu_kernel_launches_total", NULL, 0, now);
	check_counters(before, now, rows, own + other, launches_of);
	return own + other;
}

/* An owner but root has series for its share of the budget at most: one user's
 * processes seen first take 2 of 8, the rest folded; another user's and root's still
 * get theirs. A process admitted keeps its series. */
static void test_series_share_per_owner(void **state)
{
	static const __u32 pids[] = {1, 2, 3, 4, 5, 11, 12, 21, 22, 23};
	static const __u32 owners[] = {1000, 1000, 1000, 1000, 1000, 2000, 2000, 0, 0, 0};
	static const bool folded[] = {false, false, true, true, true, false, false,
				      false, false, false};
	struct bpftel_gpu_series *gs = bpftel_gpu_series__new(8);
	static struct bpftel_gpu_proc rows[11];
	size_t i, n = sizeof(pids) / sizeof(pids[0]);

	(void)state;
	assert_non_null(gs);
	bpftel_gpu_series__set_per_owner(gs, 2);
	memset(rows, 0, sizeof(rows));
	for (i = 0; i < n; i++) {
		rows[i].pid = pids[i];
		rows[i].st.born_ns = 1;
		rows[i].st.owner = owners[i];
	}
	bpftel_gpu_series__update(gs, rows, n);
	for (i = 0; i < n; i++)
		assert_int_equal(rows[i].folded, folded[i]);
	/* The next report: the same, though room is left (7 of 8). */
	bpftel_gpu_series__update(gs, rows, n);
	for (i = 0; i < n; i++)
		assert_int_equal(rows[i].folded, folded[i]);
	bpftel_gpu_series__free(gs);
}

/*
 * /metrics with more processes than the series budget (2 here): the first two seen have
 * series of their own while they live, the others are pid="other", whose counters
 * keep what folded processes that exited had counted (never down), and whose gauges are
 * the live ones'. A slot freed goes to a new process, never to one folded; a process
 * that execs (its row made again) is a new one.
 */
static void test_series_budget_folds_processes(void **state)
{
	struct bpftel_gpu_series *gs = bpftel_gpu_series__new(2);
	static struct bpftel_gpu_proc rows[8];
	static const __u32 p0[] = {10, 20, 30}, p1[] = {10, 20, 40}, p2[] = {20, 40, 50},
			   p3[] = {20, 40, 50};
	static const __u64 b0[] = {1, 1, 1}, b3[] = {1, 2, 1};
	static const __u64 l0[] = {5, 6, 7}, l1[] = {8, 9, 3}, l2[] = {9, 4, 1}, l3[] = {9, 1, 2};
	const struct bpftel_gpu_proc *o;

	(void)state;
	assert_non_null(gs);
	assert_int_equal(series_scrape(gs, rows, p0, b0, l0, 3, NULL, &sc[0]), 3);
	assert_int_equal(find_sample(&sc[0], 0, "")->v, 7);
	assert_non_null(find_sample(&sc[0], 10, ""));
	assert_non_null(find_sample(&sc[0], 20, ""));
	o = &rows[2];
	assert_int_equal(o->pid, 0);
	assert_string_equal(o->comm, "other");
	assert_int_equal(o->st.mem[GPU_MEM_DEVICE].outstanding_bytes, 3000);

	/* 30 exited: its 7 stay; 40 is new, no room: folded. */
	assert_int_equal(series_scrape(gs, rows, p1, b0, l1, 3, &sc[0], &sc[1]), 3);
	assert_int_equal(find_sample(&sc[1], 0, "")->v, 7 + 3);
	assert_null(find_sample(&sc[1], 40, ""));
	assert_int_equal(rows[2].st.mem[GPU_MEM_DEVICE].outstanding_bytes, 4000);

	/* 10 exited: 50, new, takes its slot; 40 stays folded. */
	assert_int_equal(series_scrape(gs, rows, p2, b0, l2, 3, &sc[1], &sc[2]), 3);
	assert_int_equal(find_sample(&sc[2], 50, "")->v, 1);
	assert_null(find_sample(&sc[2], 40, ""));
	assert_int_equal(find_sample(&sc[2], 0, "")->v, 7 + 4);

	/* 40 execs (its row made again, counts from 0): its 4 stay, the new program's 1
	 * adds, folded (no room). */
	assert_int_equal(series_scrape(gs, rows, p3, b3, l3, 3, &sc[2], &sc[3]), 3);
	assert_int_equal(find_sample(&sc[3], 0, "")->v, 7 + 4 + 1);
	assert_int_equal(find_sample(&sc[3], 50, "")->v, 2);
	bpftel_gpu_series__free(gs);

	/* A row read before its birth stamp (0: made, not stamped yet) is the process the
	 * stamp later names, not another one: its counts are not taken twice. */
	gs = bpftel_gpu_series__new(1);
	assert_non_null(gs);
	{
		static const __u32 p[] = {10, 20};
		static const __u64 unstamped[] = {1, 0}, stamped[] = {1, 7}, la[] = {1, 5},
				   lb[] = {1, 6};

		series_scrape(gs, rows, p, unstamped, la, 2, NULL, &sc[0]);
		assert_int_equal(find_sample(&sc[0], 0, "")->v, 5);
		series_scrape(gs, rows, p, stamped, lb, 2, &sc[0], &sc[1]);
		assert_int_equal(find_sample(&sc[1], 0, "")->v, 6);
	}
	bpftel_gpu_series__free(gs);

	/* But a row not stamped yet where the process's was stamped is a row made again:
	 * it exec'd, and a report read the new row at once. The old program's 1000 stay in
	 * "other", the new one's add; the stamp, when read, names the new program. */
	gs = bpftel_gpu_series__new(1);
	assert_non_null(gs);
	{
		static const __u32 p[] = {10, 20};
		static const __u64 b0[] = {1, 3}, b1[] = {1, 0}, b2[] = {1, 9}, l0[] = {1, 1000},
				   l1[] = {1, 2}, l2[] = {1, 3};

		series_scrape(gs, rows, p, b0, l0, 2, NULL, &sc[0]);
		assert_int_equal(find_sample(&sc[0], 0, "")->v, 1000);
		series_scrape(gs, rows, p, b1, l1, 2, &sc[0], &sc[1]);
		assert_int_equal(find_sample(&sc[1], 0, "")->v, 1002);
		series_scrape(gs, rows, p, b2, l2, 2, &sc[1], &sc[2]);
		assert_int_equal(find_sample(&sc[2], 0, "")->v, 1003);
	}
	bpftel_gpu_series__free(gs);

	/* Counters a process claimed to the top (gpu_add_sat): "other" sums them to the
	 * top, never round to a small number (a counter that went down), while they live
	 * and once they exited. */
	gs = bpftel_gpu_series__new(1);
	assert_non_null(gs);
	{
		static const __u32 p[] = {10, 20, 30}, q[] = {10, 20};
		static const __u64 born[] = {1, 1, 1}, la[] = {1, 1ull << 63, 1ull << 63},
				   lb[] = {1, 1ull << 63};

		series_scrape(gs, rows, p, born, la, 3, NULL, &sc[0]);
		assert_true(find_sample(&sc[0], 0, "")->v >= 1.8e19);
		series_scrape(gs, rows, q, born, lb, 2, &sc[0], &sc[1]);
		assert_true(find_sample(&sc[1], 0, "")->v >= 1.8e19);
	}
	bpftel_gpu_series__free(gs);

	/* Gauges: the peaks of folded processes (each at most 2^60 bytes, its share of the
	 * tracked allocations of at most 2^48: gpu_state.h) sum to the top of 64 signed
	 * bits, not round to a negative number; outstanding bytes likewise. */
	gs = bpftel_gpu_series__new(1);
	assert_non_null(gs);
	{
		bool other;
		int i;

		memset(rows, 0, sizeof(rows));
		for (i = 0; i < 5; i++) {
			rows[i].pid = 10 * (i + 1);
			rows[i].st.born_ns = 1;
			rows[i].st.mem[GPU_MEM_MANAGED].peak_bytes = 1ll << 62;
			rows[i].st.mem[GPU_MEM_MANAGED].outstanding_bytes = 1ll << 62;
			rows[i].st.dev[1].outstanding_bytes = 1ll << 62;
		}
		bpftel_gpu_series__update(gs, rows, 5);
		assert_int_equal(bpftel_gpu_series__fold(gs, rows, 5, &other), 1);
		assert_true(other);
		assert_int_equal(rows[1].pid, 0);
		assert_true(rows[1].st.mem[GPU_MEM_MANAGED].peak_bytes == INT64_MAX);
		assert_true(rows[1].st.mem[GPU_MEM_MANAGED].outstanding_bytes == INT64_MAX);
		assert_true(rows[1].st.dev[1].outstanding_bytes == INT64_MAX);
	}
	bpftel_gpu_series__free(gs);
}

/*
 * A process with series of its own counts after the last scrape, then exits: what no
 * scrape showed (3 of its 8 launches: 5 were shown) is "other"'s, so that launches
 * summed over every pid's last samples are all of them (5 + 3 + 7), none twice. A
 * scrape that read rows before a later report retired the process leaves it out: it
 * would show the 3 again under its pid.
 */
static void test_series_own_gone_remainder(void **state)
{
	static const __u32 both[] = {10, 20}, one[] = {20};
	static const __u64 born[] = {1, 1}, l0[] = {5, 6}, l1[] = {8, 6}, l2[] = {7},
			   unstamped[] = {0, 1}, stamped[] = {9, 1}, l2b[] = {2, 6}, l3b[] = {4, 6};
	static struct bpftel_gpu_proc rows[4], late[4];
	struct bpftel_gpu_series *gs;
	bool other;
	size_t m;

	(void)state;
	gs = bpftel_gpu_series__new(2);
	assert_non_null(gs);
	assert_int_equal(series_scrape(gs, rows, both, born, l0, 2, NULL, &sc[0]), 2);
	assert_null(find_sample(&sc[0], 0, ""));
	series_rows(rows, both, born, l1, 2); /* `bpftel gpu`: a report, no scrape */
	bpftel_gpu_series__update(gs, rows, 2);
	assert_int_equal(series_scrape(gs, rows, one, born, l2, 1, &sc[0], &sc[1]), 2);
	assert_null(find_sample(&sc[1], 10, ""));
	assert_int_equal(find_sample(&sc[1], 20, "")->v, 7);
	assert_int_equal(find_sample(&sc[1], 0, "")->v, 3);
	bpftel_gpu_series__free(gs);

	gs = bpftel_gpu_series__new(2);
	assert_non_null(gs);
	series_scrape(gs, rows, both, born, l0, 2, NULL, &sc[0]);
	series_rows(late, both, born, l1, 2); /* a scrape's report, its fold to come */
	bpftel_gpu_series__update(gs, late, 2);
	series_rows(rows, one, born, l2, 1); /* the next report: 10 is gone */
	bpftel_gpu_series__update(gs, rows, 1);
	m = bpftel_gpu_series__fold(gs, late, 2, &other);
	assert_int_equal(m, 1);
	assert_int_equal(late[0].pid, 20);
	assert_true(other);
	assert_int_equal(late[1].pid, 0);
	assert_int_equal(late[1].st.calls[GPU_FN_LAUNCH], 3);
	bpftel_gpu_series__free(gs);

	/* Likewise when 10 exec'd: the next report read the new program's row before its
	 * birth stamp (born 0). The older scrape's row of the old program is left out,
	 * and does not stamp the new program's entry with the old program's birth (its
	 * counts taken for shown, the new program's lost at the next report). */
	gs = bpftel_gpu_series__new(2);
	assert_non_null(gs);
	series_scrape(gs, rows, both, born, l0, 2, NULL, &sc[0]);
	series_rows(late, both, born, l1, 2);
	bpftel_gpu_series__update(gs, late, 2);
	series_rows(rows, both, unstamped, l2b, 2);
	bpftel_gpu_series__update(gs, rows, 2);
	m = bpftel_gpu_series__fold(gs, late, 2, &other);
	assert_int_equal(m, 1);
	assert_int_equal(late[0].pid, 20);
	assert_int_equal(late[1].st.calls[GPU_FN_LAUNCH], 3); /* 8 - 5, the old program's */
	series_rows(rows, both, stamped, l3b, 2); /* the new program's stamp read */
	assert_int_equal(series_scrape(gs, rows, both, stamped, l3b, 2, NULL, &sc[1]), 3);
	assert_int_equal(find_sample(&sc[1], 10, "")->v, 4);
	assert_int_equal(find_sample(&sc[1], 0, "")->v, 3);
	bpftel_gpu_series__free(gs);
}

/* The whole exposition of rows, as /metrics writes it. Free it. */
static char *exposition(const struct bpftel_gpu_proc *rows, size_t n)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct bpftel_prom *w;

	assert_non_null(f);
	w = bpftel_prom_new(f);
	bpftel_gpu_metrics_rows(w, rows, (int)n);
	bpftel_prom_free(w);
	fclose(f);
	return buf;
}

/*
 * Calls whose return accounted nothing (no room in gpu_inflight at their entry) are a
 * counter per live process, with its HELP and TYPE, 0 included: a process that lost
 * none says so.
 */
static void test_calls_untracked_family(void **state)
{
	static struct bpftel_gpu_proc rows[2];
	const struct sample *s;
	char *text;

	(void)state;
	memset(rows, 0, sizeof(rows));
	rows[0].pid = 600;
	rows[1].pid = 601;
	rows[1].st.calls_untracked = 7;
	text = exposition(rows, 2);
	assert_non_null(strstr(text, "# HELP bpftel_gpu_calls_untracked_total "));
	assert_non_null(strstr(text, "# TYPE bpftel_gpu_calls_untracked_total counter\n"));
	free(text);
	scrape_rows(rows, 2, "bpftel_gpu_calls_untracked_total", NULL, 0, &sc[0]);
	assert_int_equal(sc[0].n, 2);
	s = find_sample(&sc[0], 600, "");
	assert_non_null(s);
	assert_int_equal(s->v, 0);
	s = find_sample(&sc[0], 601, "");
	assert_non_null(s);
	assert_int_equal(s->v, 7);
}

/* A process as /proc shows it, under procfd: <pid>/stat and <pid>/status. */
static void fake_proc(int procfd, __u32 pid, const char *comm, __u32 tgid, unsigned long long start)
{
	char path[64], text[512];
	int fd, i, len;

	snprintf(path, sizeof(path), "%u", pid);
	assert_true(!mkdirat(procfd, path, 0755) || errno == EEXIST);
	len = snprintf(text, sizeof(text), "%u (%s) S", pid, comm);
	for (i = 4; i < 22; i++) /* ppid ... itrealvalue */
		len += snprintf(text + len, sizeof(text) - len, " %d", i);
	len += snprintf(text + len, sizeof(text) - len, " %llu 4096 12 0\n", start);
	snprintf(path, sizeof(path), "%u/stat", pid);
	fd = openat(procfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, (size_t)len), len);
	close(fd);
	len = snprintf(text, sizeof(text),
		       "Name:\t%s\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t%u\nNgid:\t0\n"
		       "Pid:\t%u\n",
		       comm, tgid, pid);
	snprintf(path, sizeof(path), "%u/status", pid);
	fd = openat(procfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, (size_t)len), len);
	close(fd);
}

static int tid_pipe[2], done_pipe[2];

static void *thread_main(void *arg)
{
	pid_t tid = gettid();
	char c;

	(void)arg;
	assert_int_equal(write(tid_pipe[1], &tid, sizeof(tid)), sizeof(tid));
	assert_int_equal(read(done_pipe[0], &c, 1), 1); /* until the test is done */
	return NULL;
}

/*
 * A process is alive while its pid is a thread-group leader that started when it did:
 * not once the pid is reused by a process started later, nor when it is a thread of
 * another process (kill(pid, 0) succeeds for both); gone when /proc has no such pid.
 * comm cannot fool the stat parser; a FIFO in place of stat does not block (cannot
 * tell: alive). Then this very process and one of its threads, in the real /proc.
 */
static void test_proc_alive_by_identity(void **state)
{
	static const char *const files[] = {"4000/stat", "4000/status", "4001/stat", "4001/status",
					    "4003/stat"};
	static const char *const dirs[] = {"4000", "4001", "4003"};
	char dir[] = "/tmp/test_gpu_procXXXXXX";
	size_t i;
	__u64 start = 0, none = 0;
	pthread_t th;
	pid_t tid;
	int procfd;
	char c = 0;

	(void)state;
	assert_non_null(mkdtemp(dir));
	procfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(procfd >= 0);
	fake_proc(procfd, 4000, "a) 7 8 (b", 4000, 5000);
	assert_true(bpftel_gpu_proc_alive(procfd, 4000, &start));
	assert_int_equal(start, 5000); /* recorded at the first look */
	assert_true(bpftel_gpu_proc_alive(procfd, 4000, &start));
	fake_proc(procfd, 4000, "next", 4000, 9000); /* the pid reused */
	assert_false(bpftel_gpu_proc_alive(procfd, 4000, &start));
	start = 5000;
	fake_proc(procfd, 4001, "worker", 3999, 5000); /* a thread of 3999, same start */
	assert_false(bpftel_gpu_proc_alive(procfd, 4001, &start));
	assert_false(bpftel_gpu_proc_alive(procfd, 4001, &none)); /* at the first look too */
	assert_int_equal(none, 0);
	assert_false(bpftel_gpu_proc_alive(procfd, 4002, &none)); /* no such pid */
	assert_int_equal(mkdirat(procfd, "4003", 0755), 0);
	assert_int_equal(mkfifoat(procfd, "4003/stat", 0644), 0);
	assert_true(bpftel_gpu_proc_alive(procfd, 4003, &none));
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		assert_int_equal(unlinkat(procfd, files[i], 0), 0);
	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		assert_int_equal(unlinkat(procfd, dirs[i], AT_REMOVEDIR), 0);
	close(procfd);
	assert_int_equal(rmdir(dir), 0);

	procfd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(procfd >= 0);
	start = 0;
	assert_true(bpftel_gpu_proc_alive(procfd, (__u32)getpid(), &start));
	assert_true(start > 0);
	assert_true(bpftel_gpu_proc_alive(procfd, (__u32)getpid(), &start));
	assert_int_equal(pipe(tid_pipe), 0);
	assert_int_equal(pipe(done_pipe), 0);
	assert_int_equal(pthread_create(&th, NULL, thread_main, NULL), 0);
	assert_int_equal(read(tid_pipe[0], &tid, sizeof(tid)), sizeof(tid));
	assert_int_equal(kill(tid, 0), 0); /* what the sweep used to ask */
	none = 0;
	assert_false(bpftel_gpu_proc_alive(procfd, (__u32)tid, &none));
	assert_int_equal(write(done_pipe[1], &c, 1), 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	for (i = 0; i < 2; i++) {
		close(tid_pipe[i]);
		close(done_pipe[i]);
	}
	close(procfd);
}

/* A hash map as bpf_map_get_next_key() walks one: keys in bucket order (slots); the key
 * after one that is not there (deleted while the walk held it) is the first. */
#define FAKE_SLOTS 64
#define FAKE_PTRS  1024
struct fake_map {
	struct gpu_alloc_key keys[FAKE_SLOTS];
	bool present[FAKE_SLOTS];
	int visits[FAKE_PTRS]; /* by pointer */
	size_t calls;
	__u64 next_ptr;
	int churn; /* what a visit does: see fake_visit() */
};

static int fake_next_key(void *ctx, const void *prev, void *next)
{
	struct fake_map *m = ctx;
	size_t i = 0;

	m->calls++;
	if (prev) {
		while (i < FAKE_SLOTS && !(m->present[i] && !memcmp(&m->keys[i], prev, 16)))
			i++;
		i = i < FAKE_SLOTS ? i + 1 : 0;
	}
	while (i < FAKE_SLOTS && !m->present[i])
		i++;
	if (i == FAKE_SLOTS)
		return -ENOENT;
	memcpy(next, &m->keys[i], sizeof(m->keys[i]));
	return 0;
}

static void fake_visit(void *arg, const void *key)
{
	const struct gpu_alloc_key *k = key;
	struct fake_map *m = arg;
	size_t s;

	for (s = 0; s < FAKE_SLOTS && !(m->present[s] && m->keys[s].ptr == k->ptr); s++)
		;
	assert_true(s < FAKE_SLOTS && k->ptr < FAKE_PTRS);
	m->visits[k->ptr]++;
	if (m->churn == 1 && s == 5) {
		m->present[5] = false; /* freed while the walk holds it */
		m->present[2] = true;  /* a new allocation, before the walk's place */
	} else if (m->churn == 2) {
		m->present[s] = false; /* every allocation freed as it is counted */
	} else if (m->churn == 3) {
		m->present[s] = false; /* and another made, first in the map, each time */
		m->keys[0].ptr = m->next_ptr++;
		m->present[0] = true;
		assert_true(m->next_ptr < FAKE_PTRS);
	}
}

static void fake_map_init(struct fake_map *m, int churn)
{
	size_t i;

	memset(m, 0, sizeof(*m));
	for (i = 0; i < FAKE_SLOTS; i++) {
		m->keys[i] = (struct gpu_alloc_key){.tgid = 77, .ptr = i};
		m->present[i] = i != 2 && i < 20;
	}
	m->next_ptr = FAKE_SLOTS;
	m->churn = churn;
}

/*
 * Allocations are walked while the BPF side frees them: when the key the walk holds is
 * deleted, the map's walk starts over, and the allocations already counted come round
 * again. Each must be counted once (outstanding allocations, age buckets, LEAKS): the
 * one freed once, the one made meanwhile once; when each is freed as it is counted,
 * each once; and when each free comes with a new allocation that the walk meets first,
 * the walk still ends, within twice the map's size.
 */
static void test_alloc_walk_restarts(void **state)
{
	static struct fake_map m;
	bool cut = false;
	struct bpftel_gpu_map_walk w = {fake_next_key, &m, sizeof(struct gpu_alloc_key),
					FAKE_SLOTS, &cut};
	size_t i, n;

	(void)state;
	fake_map_init(&m, 1);
	n = bpftel_gpu_map_walk(&w, fake_visit, &m);
	for (i = 0; i < FAKE_PTRS; i++)
		assert_int_equal(m.visits[i], i < 20 ? 1 : 0);
	assert_int_equal(n, 20);
	assert_false(cut);

	fake_map_init(&m, 2);
	n = bpftel_gpu_map_walk(&w, fake_visit, &m);
	for (i = 0; i < FAKE_PTRS; i++)
		assert_int_equal(m.visits[i], i < 20 && i != 2 ? 1 : 0);
	assert_int_equal(n, 19);
	assert_false(cut);

	/* Never ending: stopped at its bound, and says so (a report then fails rather
	 * than show short totals). */
	fake_map_init(&m, 3);
	n = bpftel_gpu_map_walk(&w, fake_visit, &m);
	for (i = 0; i < FAKE_PTRS; i++)
		assert_true(m.visits[i] <= 1);
	assert_true(m.calls <= 2 * FAKE_SLOTS + 1);
	assert_true(n > 0);
	assert_true(cut);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_offset_to_symbol),
		cmocka_unit_test(test_not_elf_refused),
		cmocka_unit_test(test_demangle),
		cmocka_unit_test(test_demangle_crafted),
		cmocka_unit_test(test_top_kernels_merged),
		cmocka_unit_test(test_cut_driver_name_marked),
		cmocka_unit_test(test_runtime_names_cached),
		cmocka_unit_test(test_handle_named_by_host),
		cmocka_unit_test(test_names_through_another_process),
		cmocka_unit_test(test_long_mangled_name_demangled),
		cmocka_unit_test(test_demangle_over_limit_shown_mangled),
		cmocka_unit_test(test_runtime_names_budgeted),
		cmocka_unit_test(test_runtime_names_per_file),
		cmocka_unit_test(test_kernel_series_overtaken),
		cmocka_unit_test(test_kernel_series_names_arrive),
		cmocka_unit_test(test_driver_handle_renamed),
		cmocka_unit_test(test_names_parsed_apart),
		cmocka_unit_test(test_names_asked_once),
		cmocka_unit_test(test_names_shared_between_processes),
		cmocka_unit_test(test_failed_names_retried),
		cmocka_unit_test(test_kernel_series_budget_over_processes),
		cmocka_unit_test(test_kernel_series_share_per_owner),
		cmocka_unit_test(test_error_series_are_counters),
		cmocka_unit_test(test_errors_not_listed_with_a_missed_kind),
		cmocka_unit_test(test_merged_kernel_sizes_of_the_most_launched),
		cmocka_unit_test(test_kernel_series_when_the_list_is_short),
		cmocka_unit_test(test_kernel_handles_per_process),
		cmocka_unit_test(test_series_budget_folds_processes),
		cmocka_unit_test(test_series_share_per_owner),
		cmocka_unit_test(test_series_own_gone_remainder),
		cmocka_unit_test(test_calls_untracked_family),
		cmocka_unit_test(test_proc_alive_by_identity),
		cmocka_unit_test(test_alloc_walk_restarts),
	};

	return cmocka_run_group_tests_name("gpu_kernels", tests, NULL, NULL);
}
