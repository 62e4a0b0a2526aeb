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
 *                    thread that dies inside a call), cudaDeviceSynchronize 3 ms
 *   cudaSetDevice    cudaErrorInvalidDevice (101) outside 0..7
 */
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

static uintptr_t next_ptr = 0x7f5000000000;

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts))
		;
}

EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
				    size_t shared_mem, cudaStream_t stream)
{
	(void)func, (void)grid, (void)block, (void)args, (void)shared_mem, (void)stream;
	return 0;
}

EXPORT cudaError_t cudaMalloc(void **dev_ptr, size_t size)
{
	void *ptr = (void *)next_ptr;
	struct iovec local = {&ptr, sizeof(ptr)}, remote = {dev_ptr, sizeof(ptr)};

	if (size > (1ull << 40))
		return 2;
	/* Fails with EFAULT, rather than a crash, where dev_ptr is not writable. */
	process_vm_writev(getpid(), &local, 1, &remote, 1, 0);
	next_ptr += (size + 0xfff) & ~(uintptr_t)0xfff;
	return 0;
}

EXPORT cudaError_t cudaFree(void *dev_ptr)
{
	(void)dev_ptr;
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
	sleep_ms(5);
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
