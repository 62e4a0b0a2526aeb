// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A stand-in for libcudart.so.13 that needs no GPU: a real ELF shared object exporting
 * the CUDA runtime entry points the GPU module probes, under the same soname and symbol
 * version (libcudart.so.13), with the same ABI. Calls succeed with fake device pointers
 * and take known time, so tests can check exactly what the agent records.
 *
 *   cudaMalloc       fake pointer; cudaErrorMemoryAllocation (2) above 1 TiB. The pointer
 *                    is stored with process_vm_writev: a devPtr the process cannot
 *                    write (unmapped) is left alone and the call still succeeds, the
 *                    one way tests make the GPU uretprobe's read of *devPtr fail
 *   cudaMemcpy       2 ms; cudaErrorInvalidMemcpyDirection (21) for a kind above 4
 *   cudaStreamSynchronize 5 ms; the stream (cudaStream_t)-1 never returns (tests of a
 *                    thread that dies inside a call), on (cudaStream_t)-2 the calling
 *                    thread execs a shell that reads a line from stdin and exits (a
 *                    thread that leaves its call, and its thread id, by exec; the
 *                    process lives on), cudaDeviceSynchronize 3 ms
 *   cudaSetDevice    cudaErrorInvalidDevice (101) outside 0..7
 *   cudaMallocAsync, cudaMallocManaged, cudaMallocHost, cudaHostAlloc: as cudaMalloc
 *                    (each from its own range of fake pointers); their frees succeed
 *   *_ptsz, *_ptds   the per-thread default stream variants of cudaLaunchKernel,
 *                    cudaMemcpy, cudaMemcpyAsync, cudaStreamSynchronize, cudaMallocAsync
 *                    and cudaFreeAsync: succeed at once (the copies check their kind)
 *   __cudaGetKernel  the handle nvcc 12.8+ host stubs launch a kernel by, in place of
 *                    its host function: a new one per call (0xa000, 0xa010, ...);
 *                    cudaErrorInvalidDeviceFunction (98) for a NULL host function
 *   cudaLaunchKernelExC (cudaLaunchKernelEx's) the sizes in its cudaLaunchConfig_t;
 *                    cudaErrorInvalidValue (1) for a NULL config or an empty grid
 *   cudaLaunchCooperativeKernel as cudaLaunchKernel; cudaErrorInvalidValue for an
 *                    empty grid
 *   cudaGraphLaunch  cudaErrorInvalidValue for a NULL graph
 *   (each of the three also in its _ptsz variant)
 *   cudaMallocFromPoolAsync (and _ptsz) as cudaMallocAsync, from the same range
 *   cudaEventSynchronize 1 ms; cudaErrorInvalidResourceHandle (400) for a NULL event
 *
 * Where the process has loaded a libcuda.so.1 already (the stub driver, tests/gpu/
 * stub_cuda.c), cudaMalloc, cudaFree, cudaLaunchKernel, cudaLaunchKernelExC,
 * cudaLaunchCooperativeKernel and cudaGraphLaunch call its cuMemAlloc_v2, cuMemFree_v2,
 * cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel and cuGraphLaunch on the
 * same thread, as the real runtime does: the case the GPU module must not count twice.
 * It is never loaded from here.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <sys/uio.h>

typedef int cudaError_t;
typedef struct {
	unsigned int x, y, z;
} dim3;
typedef void *cudaStream_t;

#define EXPORT __attribute__((visibility("default"), noinline))

static uintptr_t next_ptr = 0x7f5000000000, next_async = 0x7f6000000000,
		 next_managed = 0x7f7000000000, next_host = 0x7f8000000000;

/* The driver's function, if the process loaded a libcuda.so.1 before its first runtime
 * call; NULL otherwise. Looked up once: the launch loop of tools/bench measures the
 * probes, not dlopen. */
static void *driver(const char *name)
{
	static int looked;
	static void *lib;

	if (!looked) {
		looked = 1;
		lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	}
	return lib ? dlsym(lib, name) : NULL;
}

/* Store a fake pointer through where, and move *next past size bytes. */
static int fake_alloc(void **where, size_t size, uintptr_t *next)
{
	void *ptr = (void *)*next;
	struct iovec local = {&ptr, sizeof(ptr)}, remote = {where, sizeof(ptr)};

	if (size > (1ull << 40))
		return 2;
	/* Fails with EFAULT, rather than a crash, where `where` is not writable. */
	process_vm_writev(getpid(), &local, 1, &remote, 1, 0);
	*next += (size + 0xfff) & ~(uintptr_t)0xfff;
	return 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts))
		;
}

EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
				    size_t shared_mem, cudaStream_t stream)
{
	int (*cu)(const void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
		  unsigned, void *, void **, void **) = driver("cuLaunchKernel");

	if (cu)
		return cu(func, grid.x, grid.y, grid.z, block.x, block.y, block.z,
			  (unsigned)shared_mem, stream, args, NULL) ? 98 : 0;
	return 0;
}

/* driver_types.h's cudaLaunchConfig_t (CUDA 11.8+). */
typedef struct {
	dim3 gridDim;
	dim3 blockDim;
	size_t dynamicSmemBytes;
	cudaStream_t stream;
	void *attrs;
	unsigned int numAttrs;
} cudaLaunchConfig_t;

/* cuda.h's CUlaunchConfig, as the driver is given it. */
struct cu_launch_config {
	unsigned int grid[3], block[3], shared_mem;
	void *stream, *attrs;
	unsigned int nattrs;
};

static cudaError_t launch_ex(const cudaLaunchConfig_t *config, const void *func)
{
	int (*cu)(const struct cu_launch_config *, const void *, void **, void **) =
		driver("cuLaunchKernelEx");
	struct cu_launch_config c;

	if (!config || !config->gridDim.x || !config->gridDim.y || !config->gridDim.z)
		return 1;
	if (!cu)
		return 0;
	c = (struct cu_launch_config){
		{config->gridDim.x, config->gridDim.y, config->gridDim.z},
		{config->blockDim.x, config->blockDim.y, config->blockDim.z},
		(unsigned int)config->dynamicSmemBytes, config->stream, NULL, 0};
	return cu(&c, func, NULL, NULL) ? 98 : 0;
}

EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func,
				       void **args)
{
	(void)args;
	return launch_ex(config, func);
}

static cudaError_t launch_coop(const void *func, dim3 grid, dim3 block, size_t shared_mem,
			       cudaStream_t stream)
{
	int (*cu)(const void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
		  unsigned, void *, void **) = driver("cuLaunchCooperativeKernel");

	if (!grid.x || !grid.y || !grid.z)
		return 1;
	if (cu)
		return cu(func, grid.x, grid.y, grid.z, block.x, block.y, block.z,
			  (unsigned)shared_mem, stream, NULL) ? 98 : 0;
	return 0;
}

EXPORT cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 grid, dim3 block,
					       void **args, size_t shared_mem,
					       cudaStream_t stream)
{
	(void)args;
	return launch_coop(func, grid, block, shared_mem, stream);
}

static cudaError_t graph_launch(void *exec, cudaStream_t stream)
{
	int (*cu)(void *, void *) = driver("cuGraphLaunch");

	if (!exec)
		return 1;
	return cu ? (cu(exec, stream) ? 1 : 0) : 0;
}

EXPORT cudaError_t cudaGraphLaunch(void *exec, cudaStream_t stream)
{
	return graph_launch(exec, stream);
}

EXPORT cudaError_t __cudaGetKernel(void **handle, const void *host_fun)
{
	static uintptr_t next = 0xa000;

	if (!host_fun)
		return 98;
	*handle = (void *)next;
	next += 0x10;
	return 0;
}

EXPORT cudaError_t cudaMalloc(void **dev_ptr, size_t size)
{
	int (*cu)(void **, size_t) = driver("cuMemAlloc_v2");

	if (cu && size <= (1ull << 40))
		return cu(dev_ptr, size) ? 2 : 0;
	return fake_alloc(dev_ptr, size, &next_ptr);
}

EXPORT cudaError_t cudaFree(void *dev_ptr)
{
	int (*cu)(void *) = driver("cuMemFree_v2");

	return cu ? (cu(dev_ptr) ? 1 : 0) : 0;
}

EXPORT cudaError_t cudaMallocAsync(void **dev_ptr, size_t size, cudaStream_t stream)
{
	(void)stream;
	return fake_alloc(dev_ptr, size, &next_async);
}

EXPORT cudaError_t cudaMallocFromPoolAsync(void **dev_ptr, size_t size, void *pool,
					   cudaStream_t stream)
{
	(void)pool, (void)stream;
	return fake_alloc(dev_ptr, size, &next_async);
}

EXPORT cudaError_t cudaFreeAsync(void *dev_ptr, cudaStream_t stream)
{
	(void)dev_ptr, (void)stream;
	return 0;
}

EXPORT cudaError_t cudaMallocManaged(void **dev_ptr, size_t size, unsigned int flags)
{
	(void)flags;
	return fake_alloc(dev_ptr, size, &next_managed);
}

EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	return fake_alloc(ptr, size, &next_host);
}

EXPORT cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
	(void)flags;
	return fake_alloc(ptr, size, &next_host);
}

EXPORT cudaError_t cudaFreeHost(void *ptr)
{
	(void)ptr;
	return 0;
}

EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, int kind)
{
	(void)dst, (void)src, (void)count;
	if (kind < 0 || kind > 4)
		return 21;
	sleep_ms(2);
	return 0;
}

EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, int kind,
				   cudaStream_t stream)
{
	(void)dst, (void)src, (void)count, (void)stream;
	return kind < 0 || kind > 4 ? 21 : 0;
}

EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	while (stream == (cudaStream_t)-1)
		pause();
	if (stream == (cudaStream_t)-2)
		execl("/bin/sh", "sh", "-c", "read line", (char *)NULL);
	sleep_ms(5);
	return 0;
}

EXPORT cudaError_t cudaEventSynchronize(void *event)
{
	if (!event)
		return 400;
	sleep_ms(1);
	return 0;
}

EXPORT cudaError_t cudaDeviceSynchronize(void)
{
	sleep_ms(3);
	return 0;
}

EXPORT cudaError_t cudaSetDevice(int device)
{
	return device < 0 || device > 7 ? 101 : 0;
}

/* The per-thread default stream variants. Each adds its own amount: no two bodies are
 * alike, so the compiler cannot fold two functions into one address. */
static volatile unsigned long ptsz_calls;

EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 grid, dim3 block, void **args,
					 size_t shared_mem, cudaStream_t stream)
{
	(void)func, (void)grid, (void)block, (void)args, (void)shared_mem, (void)stream;
	ptsz_calls += 1;
	return 0;
}

EXPORT cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, int kind)
{
	(void)dst, (void)src, (void)count;
	ptsz_calls += 2;
	return kind < 0 || kind > 4 ? 21 : 0;
}

EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, int kind,
					cudaStream_t stream)
{
	(void)dst, (void)src, (void)count, (void)stream;
	ptsz_calls += 3;
	return kind < 0 || kind > 4 ? 21 : 0;
}

EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
	(void)stream;
	ptsz_calls += 4;
	return 0;
}

EXPORT cudaError_t cudaMallocAsync_ptsz(void **dev_ptr, size_t size, cudaStream_t stream)
{
	(void)stream;
	ptsz_calls += 5;
	return fake_alloc(dev_ptr, size, &next_async);
}

EXPORT cudaError_t cudaFreeAsync_ptsz(void *dev_ptr, cudaStream_t stream)
{
	(void)dev_ptr, (void)stream;
	ptsz_calls += 6;
	return 0;
}

EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func,
					    void **args)
{
	(void)args;
	ptsz_calls += 7;
	return launch_ex(config, func);
}

EXPORT cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 grid, dim3 block,
						    void **args, size_t shared_mem,
						    cudaStream_t stream)
{
	(void)args;
	ptsz_calls += 8;
	return launch_coop(func, grid, block, shared_mem, stream);
}

EXPORT cudaError_t cudaGraphLaunch_ptsz(void *exec, cudaStream_t stream)
{
	ptsz_calls += 9;
	return graph_launch(exec, stream);
}

EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **dev_ptr, size_t size, void *pool,
						cudaStream_t stream)
{
	(void)pool, (void)stream;
	ptsz_calls += 10;
	return fake_alloc(dev_ptr, size, &next_async);
}
