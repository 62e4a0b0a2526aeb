// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A stand-in for the CUDA driver, libcuda.so.1, that needs no GPU: a real ELF shared
 * object with the driver's soname and, like the toolkit's stubs/libcuda.so, no symbol
 * versions, exporting the driver entry points the GPU module probes with their ABI.
 * Calls succeed with fake pointers and contexts, so tests can check exactly what the
 * agent records:
 *
 *   cuMemAlloc_v2, cuMemAllocManaged, cuMemAllocHost_v2: fake pointers (one range per
 *                    kind); CUDA_ERROR_OUT_OF_MEMORY (2) above 1 TiB
 *   cuCtxCreate_v2, cuDevicePrimaryCtxRetain: context 0xc000 + device;
 *                    CUDA_ERROR_INVALID_DEVICE (101) outside 0..7
 *   cuCtxSynchronize 3 ms, cuStreamSynchronize 5 ms, cuMemcpyHtoD_v2/DtoH_v2 2 ms
 *   cuCtxSynchronize_v2, cuEventSynchronize 1 ms; CUDA_ERROR_INVALID_HANDLE (400) for
 *                    a NULL event
 *   cuLaunchKernel   CUDA_ERROR_INVALID_VALUE (1) for an empty grid
 *   cuLaunchKernelEx as cuLaunchKernel, the sizes in its CUlaunchConfig; a NULL config:
 *                    CUDA_ERROR_INVALID_VALUE
 *   cuLibraryGetKernel a new CUkernel per call (0xc000, 0xc010, ...); CUDA_ERROR_NOT_FOUND
 *                    for an empty name
 *   cuKernelGetFunction the kernel's CUfunction (its handle + 0x100000);
 *                    CUDA_ERROR_INVALID_HANDLE (400) for a NULL kernel
 *   cuCtxCreate_v4   (CUDA 13's cuCtxCreate) as cuCtxCreate_v2
 *   cuLaunchCooperativeKernel as cuLaunchKernel
 *   cuGraphLaunch    CUDA_ERROR_INVALID_VALUE for a NULL graph
 *   cuMemcpyDtoD_v2, cuMemcpy 2 ms; cuMemcpyDtoDAsync_v2, cuMemcpyAsync at once
 *   cuMemAllocAsync, cuMemAllocFromPoolAsync: fake pointers of their own range;
 *                    CUDA_ERROR_OUT_OF_MEMORY above 1 TiB; cuMemFreeAsync succeeds
 *   *_ptsz, *_ptds   the per-thread default stream variants of cuLaunchKernel,
 *                    cuLaunchKernelEx, cuLaunchCooperativeKernel, cuGraphLaunch, the
 *                    eight copies, cuStreamSynchronize and the stream-ordered memory
 *                    calls: succeed at once, but for the errors above of the launches'
 *                    grid, config and graph and the allocations' size;
 *                    cuMemcpyHtoD_v2_ptds is an alias of cuMemcpyHtoD_v2 (one
 *                    address, two names: the registry must probe it once)
 *   cuModuleGetFunction a new handle per call (0xf000, 0xf010, ...);
 *                    CUDA_ERROR_NOT_FOUND (500) for an empty name
 */
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUfunction;

#define EXPORT __attribute__((visibility("default"), noinline))

static CUdeviceptr next_dev = 0x7f9000000000, next_managed = 0x7fa000000000,
		   next_host = 0x7fb000000000, next_async = 0x7fc000000000;

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts))
		;
}

static CUresult fake_alloc(CUdeviceptr *where, size_t size, CUdeviceptr *next)
{
	if (size > (1ull << 40))
		return 2;
	*where = *next;
	*next += (size + 0xfff) & ~(CUdeviceptr)0xfff;
	return 0;
}

static CUresult fake_ctx(CUcontext *pctx, int dev)
{
	if (dev < 0 || dev > 7)
		return 101;
	*pctx = (CUcontext)(uintptr_t)(0xc000 + dev);
	return 0;
}

EXPORT CUresult cuInit(unsigned int flags)
{
	(void)flags;
	return 0;
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, int dev)
{
	(void)flags;
	return fake_ctx(pctx, dev);
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, int dev)
{
	return fake_ctx(pctx, dev);
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
	(void)ctx;
	return 0;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	(void)ctx;
	return 0;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
			       unsigned int bx, unsigned int by, unsigned int bz,
			       unsigned int shared, CUstream stream, void **params, void **extra)
{
	(void)f, (void)bx, (void)by, (void)bz, (void)shared, (void)stream, (void)params,
		(void)extra;
	return gx && gy && gz ? 0 : 1;
}

EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
					  unsigned int gz, unsigned int bx, unsigned int by,
					  unsigned int bz, unsigned int shared, CUstream stream,
					  void **params)
{
	(void)f, (void)bx, (void)by, (void)bz, (void)shared, (void)stream, (void)params;
	return gx && gy && gz ? 0 : 1;
}

EXPORT CUresult cuGraphLaunch(void *exec, CUstream stream)
{
	(void)stream;
	return exec ? 0 : 1;
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream stream)
{
	(void)stream;
	return fake_alloc(dptr, size, &next_async);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, void *pool,
					CUstream stream)
{
	(void)pool, (void)stream;
	return fake_alloc(dptr, size, &next_async);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
	(void)dptr, (void)stream;
	return 0;
}

/* cuda.h's CUlaunchConfig (CUDA 12.0+). */
typedef struct {
	unsigned int gridDimX, gridDimY, gridDimZ;
	unsigned int blockDimX, blockDimY, blockDimZ;
	unsigned int sharedMemBytes;
	CUstream hStream;
	void *attrs;
	unsigned int numAttrs;
} CUlaunchConfig;

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
				 void **extra)
{
	(void)f, (void)params, (void)extra;
	if (!config)
		return 1;
	return config->gridDimX && config->gridDimY && config->gridDimZ ? 0 : 1;
}

/* A new handle of a named kernel through where, from *next on; an empty name is not
 * found (CUDA_ERROR_NOT_FOUND). */
static CUresult new_handle(void **where, const char *name, uintptr_t *next)
{
	if (!name || !*name)
		return 500;
	*where = (void *)*next;
	*next += 0x10;
	return 0;
}

EXPORT CUresult cuLibraryGetKernel(void **kernel, void *library, const char *name)
{
	static uintptr_t next = 0xc000;

	(void)library;
	return new_handle(kernel, name, &next);
}

EXPORT CUresult cuKernelGetFunction(CUfunction *func, void *kernel)
{
	if (!kernel)
		return 400;
	*func = (CUfunction)((uintptr_t)kernel + 0x100000);
	return 0;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, void *hmod, const char *name)
{
	static uintptr_t next = 0xf000;

	(void)hmod;
	return new_handle(hfunc, name, &next);
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
	return fake_alloc(dptr, size, &next_dev);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	(void)dptr;
	return 0;
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
	(void)flags;
	return fake_alloc(dptr, size, &next_managed);
}

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t size)
{
	return fake_alloc((CUdeviceptr *)pp, size, &next_host);
}

EXPORT CUresult cuMemFreeHost(void *p)
{
	(void)p;
	return 0;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t count)
{
	(void)dst, (void)src, (void)count;
	sleep_ms(2);
	return 0;
}

EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t count)
{
	(void)dst, (void)src, (void)count;
	sleep_ms(2);
	return 0;
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t count,
				     CUstream stream)
{
	(void)dst, (void)src, (void)count, (void)stream;
	return 0;
}

EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t count)
{
	(void)dst, (void)src, (void)count;
	sleep_ms(2);
	return 0;
}

EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t count, CUstream stream)
{
	(void)dst, (void)src, (void)count, (void)stream;
	return 0;
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t count)
{
	(void)dst, (void)src, (void)count;
	sleep_ms(2);
	return 0;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t count,
				     CUstream stream)
{
	(void)dst, (void)src, (void)count, (void)stream;
	return 0;
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t count, CUstream stream)
{
	(void)dst, (void)src, (void)count, (void)stream;
	return 0;
}

EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
	(void)ctx;
	sleep_ms(1);
	return 0;
}

EXPORT CUresult cuEventSynchronize(void *event)
{
	if (!event)
		return 400;
	sleep_ms(1);
	return 0;
}

EXPORT CUresult cuCtxSynchronize(void)
{
	sleep_ms(3);
	return 0;
}

EXPORT CUresult cuStreamSynchronize(CUstream stream)
{
	(void)stream;
	sleep_ms(5);
	return 0;
}

EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, void *params, unsigned int flags, int dev)
{
	(void)params, (void)flags;
	return fake_ctx(pctx, dev);
}

/* The per-thread default stream variants. Each adds its own amount: no two bodies are
 * alike, so the compiler cannot fold two functions into one address. */
static volatile unsigned long ptsz_calls;

EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
				    unsigned int gz, unsigned int bx, unsigned int by,
				    unsigned int bz, unsigned int shared, CUstream stream,
				    void **params, void **extra)
{
	(void)f, (void)bx, (void)by, (void)bz, (void)shared, (void)stream, (void)params,
		(void)extra;
	ptsz_calls += 1;
	return gx && gy && gz ? 0 : 1;
}

EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params,
				      void **extra)
{
	(void)f, (void)params, (void)extra;
	ptsz_calls += 2;
	return config ? 0 : 1;
}

EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t count)
	__attribute__((alias("cuMemcpyHtoD_v2")));

EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t count)
{
	(void)dst, (void)src, (void)count;
	ptsz_calls += 3;
	return 0;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t count,
					  CUstream stream)
{
	(void)dst, (void)src, (void)count, (void)stream;
	ptsz_calls += 4;
	return 0;
}

EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t count,
					  CUstream stream)
{
	(void)dst, (void)src, (void)count, (void)stream;
	ptsz_calls += 5;
	return 0;
}

EXPORT CUresult cuStreamSynchronize_ptsz(CUstream stream)
{
	(void)stream;
	ptsz_calls += 6;
	return 0;
}

EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
					       unsigned int gz, unsigned int bx, unsigned int by,
					       unsigned int bz, unsigned int shared,
					       CUstream stream, void **params)
{
	(void)f, (void)bx, (void)by, (void)bz, (void)shared, (void)stream, (void)params;
	ptsz_calls += 7;
	return gx && gy && gz ? 0 : 1;
}

EXPORT CUresult cuGraphLaunch_ptsz(void *exec, CUstream stream)
{
	(void)stream;
	ptsz_calls += 8;
	return exec ? 0 : 1;
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream stream)
{
	(void)stream;
	ptsz_calls += 9;
	return fake_alloc(dptr, size, &next_async);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t size, void *pool,
					     CUstream stream)
{
	(void)pool, (void)stream;
	ptsz_calls += 10;
	return fake_alloc(dptr, size, &next_async);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream)
{
	(void)dptr, (void)stream;
	ptsz_calls += 11;
	return 0;
}

EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t count)
{
	(void)dst, (void)src, (void)count;
	ptsz_calls += 12;
	return 0;
}

EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t count,
					  CUstream stream)
{
	(void)dst, (void)src, (void)count, (void)stream;
	ptsz_calls += 13;
	return 0;
}

EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t count)
{
	(void)dst, (void)src, (void)count;
	ptsz_calls += 14;
	return 0;
}

EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t count,
				   CUstream stream)
{
	(void)dst, (void)src, (void)count, (void)stream;
	ptsz_calls += 15;
	return 0;
}
