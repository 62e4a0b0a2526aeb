// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * real_cuda DRIVER.cubin: a known pattern against the real CUDA runtime and driver on a
 * machine with a GPU, for tools/gpu_check/gpu_check.py to compare with what the agent
 * reports. Built with `-cudart shared -lcuda`, so libcudart.so.13 and libcuda.so.1 are
 * mapped before main: the checker waits for the agent's uprobes on both, then says "go".
 *
 * Prints "loaded PID", reads a line, plays the pattern, prints one "expect KEY VALUE"
 * line per figure and "ready", reads a line, frees what it allocated, prints
 * "done", and exits when stdin closes.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

namespace bpftel_check {
template <typename T> __global__ void scale(T *x, T a, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] *= a;
}

__global__ void fill(int *x, int v, int n)
{
	int i = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x * blockDim.y +
		threadIdx.y * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] = v;
}
} // namespace bpftel_check

#define MiB (1UL << 20)
#define KiB (1UL << 10)

static void must(int err, const char *what)
{
	if (err) {
		fprintf(stderr, "real_cuda: %s failed: %d\n", what, err);
		exit(1);
	}
}

static void wait_line(void)
{
	char line[64];

	if (!fgets(line, sizeof(line), stdin))
		exit(0);
}

int main(int argc, char **argv)
{
	void *d1, *d2, *d3, *huge, *managed, *pinned1, *pinned2, *async1;
	CUdeviceptr cu1;
	CUmodule mod;
	CUfunction fn;
	cudaStream_t s;
	char *host;
	int i, n = 1 << 18, err_dev, err_huge;
	float a = 2.0f;

	if (argc != 2) {
		fprintf(stderr, "usage: real_cuda DRIVER.cubin\n");
		return 2;
	}
	printf("loaded %d\n", (int)getpid());
	fflush(stdout);
	wait_line();

	host = (char *)calloc(1, MiB);
	must(cudaSetDevice(0), "cudaSetDevice(0)");
	err_dev = cudaSetDevice(9999);	  /* cudaErrorInvalidDevice (101) */
	must(cudaMalloc(&d1, 1 * MiB), "cudaMalloc 1 MiB");
	must(cudaMalloc(&d2, 2 * MiB), "cudaMalloc 2 MiB");
	must(cudaMalloc(&d3, 4 * MiB), "cudaMalloc 4 MiB");
	err_huge = cudaMalloc(&huge, 1UL << 50); /* cudaErrorMemoryAllocation (2) */
	cudaGetLastError(); /* the two errors above, cleared: the launches' check is theirs */
	must(cudaMallocManaged(&managed, 64 * KiB, cudaMemAttachGlobal), "cudaMallocManaged");
	must(cudaMallocHost(&pinned1, 128 * KiB), "cudaMallocHost");
	must(cudaHostAlloc(&pinned2, 256 * KiB, cudaHostAllocDefault), "cudaHostAlloc");
	must(cudaStreamCreate(&s), "cudaStreamCreate");
	must(cudaMallocAsync(&async1, 512 * KiB, s), "cudaMallocAsync");
	must(cudaStreamSynchronize(s), "cudaStreamSynchronize");
	must(cudaMemcpy(d3, host, 1 * MiB, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
	must(cudaMemcpy(host, d3, 1 * MiB, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");

	for (i = 0; i < 100; i++)
		bpftel_check::scale<float><<<256, 256>>>((float *)d3, 1.0f, n);
	for (i = 0; i < 50; i++)
		bpftel_check::scale<double><<<128, 128>>>((double *)d3, 1.0, n / 2);
	for (i = 0; i < 7; i++)
		bpftel_check::fill<<<dim3(64, 2, 1), dim3(32, 4, 1)>>>((int *)d2, i, n / 2);
	must(cudaGetLastError(), "launches");
	must(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

	/* The driver API, as Triton and JAX call it: a module from a cubin, a function by
	 * name, launches, an allocation. */
	must(cuModuleLoad(&mod, argv[1]), "cuModuleLoad");
	must(cuModuleGetFunction(&fn, mod, "drv_axpy"), "cuModuleGetFunction");
	for (i = 0; i < 20; i++) {
		void *args[] = {&d1, &a, &n};

		must(cuLaunchKernel(fn, 16, 1, 1, 64, 1, 1, 0, 0, args, 0), "cuLaunchKernel");
	}
	must(cuCtxSynchronize(), "cuCtxSynchronize");
	must(cuMemAlloc(&cu1, 3 * MiB), "cuMemAlloc");

	printf("expect cudaSetDevice_error %d\n", err_dev);
	printf("expect cudaMalloc_error %d\n", err_huge);
	printf("expect device_bytes %lu\n", 1 * MiB + 2 * MiB + 4 * MiB + 3 * MiB);
	printf("expect managed_bytes %lu\n", 64 * KiB);
	printf("expect pinned_host_bytes %lu\n", 128 * KiB + 256 * KiB);
	printf("expect async_bytes %lu\n", 512 * KiB);
	printf("expect h2d_bytes %lu\n", 1 * MiB);
	printf("expect d2h_bytes %lu\n", 1 * MiB);
	printf("expect kernel void bpftel_check::scale<float>(float*, float, int) 100 256x1x1 256x1x1\n");
	printf("expect kernel void bpftel_check::scale<double>(double*, double, int) 50 128x1x1 128x1x1\n");
	printf("expect kernel bpftel_check::fill(int*, int, int) 7 64x2x1 32x4x1\n");
	printf("expect kernel drv_axpy 20 16x1x1 64x1x1\n");
	printf("ready\n");
	fflush(stdout);
	wait_line();

	must(cuMemFree(cu1), "cuMemFree");
	must(cudaFreeAsync(async1, s), "cudaFreeAsync");
	must(cudaStreamSynchronize(s), "cudaStreamSynchronize");
	must(cudaFreeHost(pinned2), "cudaFreeHost");
	must(cudaFreeHost(pinned1), "cudaFreeHost");
	must(cudaFree(managed), "cudaFree managed");
	must(cudaFree(d3), "cudaFree");
	must(cudaFree(d2), "cudaFree");
	must(cudaFree(d1), "cudaFree");
	printf("done\n");
	fflush(stdout);
	wait_line();
	return 0;
}
