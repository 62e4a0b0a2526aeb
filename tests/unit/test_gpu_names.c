// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Names the GPU module reports: CUDA functions, memcpy kinds, cudaError_t codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "user/modules/gpu/gpu.h"

static void test_cuda_error_names(void **state)
{
	int prev = -1, code, known = 0;

	(void)state;
	assert_string_equal(bpftel_cuda_error_name(0), "cudaSuccess");
	assert_string_equal(bpftel_cuda_error_name(2), "cudaErrorMemoryAllocation");
	assert_string_equal(bpftel_cuda_error_name(35), "cudaErrorInsufficientDriver");
	assert_string_equal(bpftel_cuda_error_name(101), "cudaErrorInvalidDevice");
	assert_string_equal(bpftel_cuda_error_name(999), "cudaErrorUnknown");
	assert_null(bpftel_cuda_error_name(-1));
	assert_null(bpftel_cuda_error_name(123456));
	/* The lookup is a binary search: every code of the table must be found. */
	for (code = 0; code < 1000; code++) {
		if (bpftel_cuda_error_name(code)) {
			assert_true(code > prev);
			prev = code;
			known++;
		}
	}
	assert_true(known > 100);
}

/* Driver calls return CUresult: CUDA_ERROR_* names, chosen by the function. */
static void test_driver_error_names(void **state)
{
	int prev = -1, code, known = 0;

	(void)state;
	assert_string_equal(bpftel_cu_result_name(0), "CUDA_SUCCESS");
	assert_string_equal(bpftel_cu_result_name(34), "CUDA_ERROR_STUB_LIBRARY");
	assert_string_equal(bpftel_cu_result_name(101), "CUDA_ERROR_INVALID_DEVICE");
	assert_null(bpftel_cu_result_name(-1));
	assert_string_equal(bpftel_gpu_error_name(GPU_FN_CU_INIT, 34), "CUDA_ERROR_STUB_LIBRARY");
	assert_string_equal(bpftel_gpu_error_name(GPU_FN_MALLOC, 34), "cudaErrorStubLibrary");
	for (code = 0; code < 1000; code++) {
		if (bpftel_cu_result_name(code)) {
			assert_true(code > prev);
			prev = code;
			known++;
		}
	}
	assert_true(known > 90);
}

static void test_function_and_kind_names(void **state)
{
	static const struct {
		unsigned int func;
		const char *name;
	} names[] = {
		{GPU_FN_LAUNCH, "cudaLaunchKernel"},
		{GPU_FN_SET_DEVICE, "cudaSetDevice"},
		{GPU_FN_HOST_ALLOC, "cudaHostAlloc"},
		{GPU_FN_GET_KERNEL, "__cudaGetKernel"},
		{GPU_FN_LAUNCH_EX, "cudaLaunchKernelExC"},
		{GPU_FN_LAUNCH_COOP, "cudaLaunchCooperativeKernel"},
		{GPU_FN_GRAPH_LAUNCH, "cudaGraphLaunch"},
		{GPU_FN_MALLOC_FROM_POOL_ASYNC, "cudaMallocFromPoolAsync"},
		{GPU_FN_EVENT_SYNC, "cudaEventSynchronize"},
		{GPU_FN_CU_MEM_ALLOC, "cuMemAlloc_v2"},
		{GPU_FN_CU_MEM_FREE_HOST, "cuMemFreeHost"},
		{GPU_FN_CU_MODULE_GET_FUNCTION, "cuModuleGetFunction"},
		{GPU_FN_CU_LAUNCH_EX, "cuLaunchKernelEx"},
		{GPU_FN_CU_LIBRARY_GET_KERNEL, "cuLibraryGetKernel"},
		{GPU_FN_CU_KERNEL_GET_FUNCTION, "cuKernelGetFunction"},
		{GPU_FN_CU_CTX_CREATE_V4, "cuCtxCreate_v4"},
		{GPU_FN_CU_LAUNCH_COOP, "cuLaunchCooperativeKernel"},
		{GPU_FN_CU_GRAPH_LAUNCH, "cuGraphLaunch"},
		{GPU_FN_CU_MEM_ALLOC_ASYNC, "cuMemAllocAsync"},
		{GPU_FN_CU_MEM_ALLOC_FROM_POOL_ASYNC, "cuMemAllocFromPoolAsync"},
		{GPU_FN_CU_MEM_FREE_ASYNC, "cuMemFreeAsync"},
		{GPU_FN_CU_MEMCPY_DTOD, "cuMemcpyDtoD_v2"},
		{GPU_FN_CU_MEMCPY_ASYNC, "cuMemcpyAsync"},
		{GPU_FN_CU_EVENT_SYNC, "cuEventSynchronize"},
		/* Slots no probe uses (the JSON's calls leave them out): past the last, the
		 * runtime's spare ones, out of range. */
		{GPU_FN__USED, "unknown"},
		{GPU_FN_EVENT_SYNC + 1, "unknown"},
		{GPU_FN_CU_FIRST - 1, "unknown"},
		{GPU_FN__COUNT, "unknown"},
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_string_equal(bpftel_gpu_func_name(names[i].func), names[i].name);
	assert_string_equal(bpftel_gpu_mem_kind_name(GPU_MEM_HOST), "pinned_host");
	assert_string_equal(bpftel_gpu_memcpy_kind_name(GPU_MEMCPY_H2D), "htod");
	assert_string_equal(bpftel_gpu_memcpy_kind_name(GPU_MEMCPY_D2H), "dtoh");
	assert_string_equal(bpftel_gpu_memcpy_kind_name(99), "unknown");
	assert_string_equal(bpftel_gpu_age_names[0], "lt_10s");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cuda_error_names),
		cmocka_unit_test(test_driver_error_names),
		cmocka_unit_test(test_function_and_kind_names),
	};

	return cmocka_run_group_tests_name("gpu_names", tests, NULL, NULL);
}
