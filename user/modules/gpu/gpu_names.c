// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Names the GPU module reports: CUDA functions (runtime and driver), memcpy directions,
 * memory kinds, and error codes: cudaError_t for runtime calls, CUresult (CUDA_ERROR_*)
 * for driver calls. The error tables are generated (tools/gen-cuda-errors.sh).
 */
#include <stddef.h>

#include "gpu.h"

static const char *const func_names[GPU_FN__COUNT] = {
	[GPU_FN_LAUNCH] = "cudaLaunchKernel",
	[GPU_FN_MALLOC] = "cudaMalloc",
	[GPU_FN_FREE] = "cudaFree",
	[GPU_FN_MEMCPY] = "cudaMemcpy",
	[GPU_FN_MEMCPY_ASYNC] = "cudaMemcpyAsync",
	[GPU_FN_STREAM_SYNC] = "cudaStreamSynchronize",
	[GPU_FN_DEVICE_SYNC] = "cudaDeviceSynchronize",
	[GPU_FN_SET_DEVICE] = "cudaSetDevice",
	[GPU_FN_MALLOC_ASYNC] = "cudaMallocAsync",
	[GPU_FN_FREE_ASYNC] = "cudaFreeAsync",
	[GPU_FN_MALLOC_MANAGED] = "cudaMallocManaged",
	[GPU_FN_MALLOC_HOST] = "cudaMallocHost",
	[GPU_FN_HOST_ALLOC] = "cudaHostAlloc",
	[GPU_FN_FREE_HOST] = "cudaFreeHost",
	[GPU_FN_GET_KERNEL] = "__cudaGetKernel",
	[GPU_FN_LAUNCH_EX] = "cudaLaunchKernelExC",
	[GPU_FN_LAUNCH_COOP] = "cudaLaunchCooperativeKernel",
	[GPU_FN_GRAPH_LAUNCH] = "cudaGraphLaunch",
	[GPU_FN_MALLOC_FROM_POOL_ASYNC] = "cudaMallocFromPoolAsync",
	[GPU_FN_EVENT_SYNC] = "cudaEventSynchronize",
	[GPU_FN_CU_LAUNCH] = "cuLaunchKernel",
	[GPU_FN_CU_MEM_ALLOC] = "cuMemAlloc_v2",
	[GPU_FN_CU_MEM_FREE] = "cuMemFree_v2",
	[GPU_FN_CU_MEMCPY_HTOD] = "cuMemcpyHtoD_v2",
	[GPU_FN_CU_MEMCPY_DTOH] = "cuMemcpyDtoH_v2",
	[GPU_FN_CU_MEMCPY_HTOD_ASYNC] = "cuMemcpyHtoDAsync_v2",
	[GPU_FN_CU_MEMCPY_DTOH_ASYNC] = "cuMemcpyDtoHAsync_v2",
	[GPU_FN_CU_CTX_SYNC] = "cuCtxSynchronize",
	[GPU_FN_CU_STREAM_SYNC] = "cuStreamSynchronize",
	[GPU_FN_CU_INIT] = "cuInit",
	[GPU_FN_CU_CTX_CREATE] = "cuCtxCreate_v2",
	[GPU_FN_CU_PRIMARY_CTX_RETAIN] = "cuDevicePrimaryCtxRetain",
	[GPU_FN_CU_CTX_SET_CURRENT] = "cuCtxSetCurrent",
	[GPU_FN_CU_CTX_PUSH_CURRENT] = "cuCtxPushCurrent_v2",
	[GPU_FN_CU_MEM_ALLOC_MANAGED] = "cuMemAllocManaged",
	[GPU_FN_CU_MEM_ALLOC_HOST] = "cuMemAllocHost_v2",
	[GPU_FN_CU_MEM_FREE_HOST] = "cuMemFreeHost",
	[GPU_FN_CU_MODULE_GET_FUNCTION] = "cuModuleGetFunction",
	[GPU_FN_CU_LAUNCH_EX] = "cuLaunchKernelEx",
	[GPU_FN_CU_LIBRARY_GET_KERNEL] = "cuLibraryGetKernel",
	[GPU_FN_CU_KERNEL_GET_FUNCTION] = "cuKernelGetFunction",
	[GPU_FN_CU_CTX_CREATE_V4] = "cuCtxCreate_v4",
	[GPU_FN_CU_LAUNCH_COOP] = "cuLaunchCooperativeKernel",
	[GPU_FN_CU_GRAPH_LAUNCH] = "cuGraphLaunch",
	[GPU_FN_CU_MEM_ALLOC_ASYNC] = "cuMemAllocAsync",
	[GPU_FN_CU_MEM_ALLOC_FROM_POOL_ASYNC] = "cuMemAllocFromPoolAsync",
	[GPU_FN_CU_MEM_FREE_ASYNC] = "cuMemFreeAsync",
	[GPU_FN_CU_MEMCPY_DTOD] = "cuMemcpyDtoD_v2",
	[GPU_FN_CU_MEMCPY_DTOD_ASYNC] = "cuMemcpyDtoDAsync_v2",
	[GPU_FN_CU_MEMCPY] = "cuMemcpy",
	[GPU_FN_CU_MEMCPY_ASYNC] = "cuMemcpyAsync",
	[GPU_FN_CU_EVENT_SYNC] = "cuEventSynchronize",
};

static const char *const kind_names[GPU_MEMCPY__COUNT] = {
	[GPU_MEMCPY_H2H] = "htoh", [GPU_MEMCPY_H2D] = "htod",	     [GPU_MEMCPY_D2H] = "dtoh",
	[GPU_MEMCPY_D2D] = "dtod", [GPU_MEMCPY_DEFAULT] = "default",
};

static const char *const mem_kind_names[GPU_MEM__COUNT] = {
	[GPU_MEM_DEVICE] = "device",
	[GPU_MEM_ASYNC] = "async",
	[GPU_MEM_MANAGED] = "managed",
	[GPU_MEM_HOST] = "pinned_host",
};

struct code_name {
	int code;
	const char *name;
};

static const struct code_name cuda_errors[] = {
#include "cuda_errors.inc"
};

static const struct code_name cu_errors[] = {
#include "cu_errors.inc"
};

const char *bpftel_gpu_func_name(enum gpu_func func)
{
	return (unsigned)func < GPU_FN__COUNT && func_names[func] ? func_names[func] : "unknown";
}

const char *bpftel_gpu_memcpy_kind_name(enum gpu_memcpy_kind kind)
{
	return (unsigned)kind < GPU_MEMCPY__COUNT ? kind_names[kind] : "unknown";
}

const char *bpftel_gpu_mem_kind_name(enum gpu_mem_kind kind)
{
	return (unsigned)kind < GPU_MEM__COUNT ? mem_kind_names[kind] : "unknown";
}

/* The generated tables are sorted by code. */
static const char *lookup(const struct code_name *t, size_t n, int code)
{
	size_t lo = 0, hi = n, mid;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if (t[mid].code == code)
			return t[mid].name;
		if (t[mid].code < code)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const char *bpftel_cuda_error_name(int error)
{
	return lookup(cuda_errors, sizeof(cuda_errors) / sizeof(cuda_errors[0]), error);
}

const char *bpftel_cu_result_name(int error)
{
	return lookup(cu_errors, sizeof(cu_errors) / sizeof(cu_errors[0]), error);
}

const char *bpftel_gpu_error_name(enum gpu_func func, int error)
{
	return func >= GPU_FN_CU_FIRST ? bpftel_cu_result_name(error)
				       : bpftel_cuda_error_name(error);
}
