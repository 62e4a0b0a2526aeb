// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Kernel names: file offsets back to function symbols (user/manager/elfaddr.h) on this
 * very test binary, whose host stub carries a mangled name; demangling; and the top
 * kernels per process, same names merged (user/modules/gpu/gpu_kernels.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "user/manager/elfaddr.h"
#include "user/manager/elfsym.h"
#include "user/modules/gpu/gpu_kernels.h"

/* A host stub as nvcc names one; its body keeps it apart from any other function. */
static volatile int sink;
void stub_fn(void) __asm__("_Z7saxpyOpfPfS_i");
void stub_fn(void)
{
	sink += 7;
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
}

/* Driver kernels are named by what cuModuleGetFunction got; two handles of one name are
 * one kernel; beyond BPFTEL_GPU_TOP_KERNELS, the least launched are counted as others. */
static void test_top_kernels_merged(void **state)
{
	struct bpftel_gpu_kernel_seen ks[BPFTEL_GPU_TOP_KERNELS + 3] = {};
	static struct bpftel_gpu_proc row = {.pid = 4242};
	size_t i, n = 0;

	(void)state;
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
	bpftel_gpu_kernels__fill(&row, 1, ks, n);
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
}

/* Host functions of this process, through /proc/self/maps and map_files, cached. */
static void test_runtime_names_cached(void **state)
{
	static struct bpftel_gpu_kernel_seen ks[4];
	static struct bpftel_gpu_proc row;
	__u32 pid = (__u32)getpid();
	size_t i;
	int round;

	(void)state;
	if (geteuid() != 0)
		skip();			      /* map_files needs root */
	for (round = 0; round < 2; round++) { /* parsed, then from the cache */
		memset(ks, 0, sizeof(ks));
		memset(&row, 0, sizeof(row));
		row.pid = pid;
		for (i = 0; i < 4; i++) {
			ks[i].key = (struct gpu_kernel_key){.tgid = pid,
							    .api = GPU_KERNEL_RUNTIME,
							    .func = (__u64)(uintptr_t)stub_fn + i};
			ks[i].k.launches = 1;
		}
		bpftel_gpu_kernels__fill(&row, 1, ks, 4);
		assert_int_equal(row.nkernels, 1);
		assert_string_equal(row.kernels[0].name, "saxpyOp(float, float*, float*, int)");
		assert_int_equal(row.kernels[0].launches, 4);
	}
	bpftel_gpu_kernels__forget(pid);
}

/* At most 32 parses per report: 40 unmapped addresses first spend them (a miss costs
 * one too), the host function after them stays unnamed until the next report, when
 * the misses come from the cache. */
static void test_runtime_names_budgeted(void **state)
{
	static struct bpftel_gpu_kernel_seen ks[41];
	static struct bpftel_gpu_proc row;
	__u32 pid = (__u32)getpid();
	size_t i;
	int round;

	(void)state;
	if (geteuid() != 0)
		skip();
	for (round = 0; round < 2; round++) {
		memset(ks, 0, sizeof(ks));
		memset(&row, 0, sizeof(row));
		row.pid = pid;
		for (i = 0; i < 41; i++) {
			ks[i].key = (struct gpu_kernel_key){
				.tgid = pid, .api = GPU_KERNEL_RUNTIME, .func = 0x1000 + i * 16};
			ks[i].k.launches = 1;
		}
		ks[40].key.func = (__u64)(uintptr_t)stub_fn;
		bpftel_gpu_kernels__fill(&row, 1, ks, 41);
		if (round == 0) {
			assert_int_equal(row.nkernels, 1);
			assert_string_equal(row.kernels[0].name, "");
			assert_int_equal(row.kernels[0].launches, 41);
		} else {
			assert_int_equal(row.nkernels, 2);
			assert_string_equal(row.kernels[1].name,
					    "saxpyOp(float, float*, float*, int)");
			assert_int_equal(row.kernels[1].launches, 1);
		}
	}
	bpftel_gpu_kernels__forget(pid);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_offset_to_symbol),
		cmocka_unit_test(test_not_elf_refused),
		cmocka_unit_test(test_demangle),
		cmocka_unit_test(test_top_kernels_merged),
		cmocka_unit_test(test_runtime_names_cached),
		cmocka_unit_test(test_runtime_names_budgeted),
	};

	return cmocka_run_group_tests_name("gpu_kernels", tests, NULL, NULL);
}
