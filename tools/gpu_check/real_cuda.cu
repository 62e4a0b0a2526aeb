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

/* Launched by cudaLaunchKernelEx, cooperatively, and from a graph: one each. */
__global__ void bump(int *x, int v)
{
	x[blockIdx.x * blockDim.x + threadIdx.x] += v;
}

__global__ void coop(int *x)
{
	x[blockIdx.x * blockDim.x + threadIdx.x] ^= 1;
}

__global__ void in_graph(int *x)
{
	x[threadIdx.x] = 7;
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
	void *d1, *d2, *d3, *huge, *managed, *pinned1, *pinned2, *async1, *pooled;
	cudaMemPool_t pool;
	cudaLaunchConfig_t cfg = {};
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	cudaGraphNode_t node;
	cudaKernelNodeParams kp = {};
	cudaEvent_t ev;
	void *coop_args[1], *graph_args[1];
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

	/* Launches that are not cudaLaunchKernel: with a launch config, cooperative; and a
	 * graph built node by node (no launch call), launched whole. */
	cfg.gridDim = dim3(8);
	cfg.blockDim = dim3(64);
	for (i = 0; i < 5; i++)
		must(cudaLaunchKernelEx(&cfg, bpftel_check::bump, (int *)d2, 1), "cudaLaunchKernelEx");
	coop_args[0] = &d2;
	for (i = 0; i < 3; i++)
		must(cudaLaunchCooperativeKernel((const void *)bpftel_check::coop, dim3(4), dim3(128),
						 coop_args, 0, 0),
		     "cudaLaunchCooperativeKernel");
	must(cudaGraphCreate(&graph, 0), "cudaGraphCreate");
	graph_args[0] = &d2;
	kp.func = (void *)bpftel_check::in_graph;
	kp.gridDim = dim3(1);
	kp.blockDim = dim3(32);
	kp.kernelParams = graph_args;
	must(cudaGraphAddKernelNode(&node, graph, NULL, 0, &kp), "cudaGraphAddKernelNode");
	must(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
	for (i = 0; i < 4; i++)
		must(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
	/* Stream-ordered memory from the device's pool; waits on an event. */
	must(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
	must(cudaMallocFromPoolAsync(&pooled, 256 * KiB, pool, s), "cudaMallocFromPoolAsync");
	must(cudaEventCreate(&ev), "cudaEventCreate");
	for (i = 0; i < 2; i++) {
		must(cudaEventRecord(ev, s), "cudaEventRecord");
		must(cudaEventSynchronize(ev), "cudaEventSynchronize");
	}

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
	printf("expect async_bytes %lu\n", 512 * KiB + 256 * KiB);
	printf("expect graph_launches 4\n");
	printf("expect calls cudaLaunchKernelExC 5\n");
	printf("expect calls cudaLaunchCooperativeKernel 3\n");
	printf("expect calls cudaGraphLaunch 4\n");
	printf("expect calls cudaMallocFromPoolAsync 1\n");
	printf("expect calls cudaEventSynchronize 2\n");
	printf("expect h2d_bytes %lu\n", 1 * MiB);
	printf("expect d2h_bytes %lu\n", 1 * MiB);
	printf("expect kernel void bpftel_check::scale<float>(float*, float, int) 100 256x1x1 256x1x1\n");
	printf("expect kernel void bpftel_check::scale<double>(double*, double, int) 50 128x1x1 128x1x1\n");
	printf("expect kernel bpftel_check::fill(int*, int, int) 7 64x2x1 32x4x1\n");
	printf("expect kernel drv_axpy 20 16x1x1 64x1x1\n");
	printf("expect kernel bpftel_check::bump(int*, int) 5 8x1x1 64x1x1\n");
	printf("expect kernel bpftel_check::coop(int*) 3 4x1x1 128x1x1\n");
	printf("ready\n");
	fflush(stdout);
	wait_line();

	must(cuMemFree(cu1), "cuMemFree");
	must(cudaFreeAsync(async1, s), "cudaFreeAsync");
	must(cudaFreeAsync(pooled, s), "cudaFreeAsync");
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
