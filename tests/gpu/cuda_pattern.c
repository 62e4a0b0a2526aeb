// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * cuda_pattern LIBCUDART [MODE [N]]: dlopen a CUDA runtime, print "loaded PID", wait for
 * a line on stdin (the test lets the agent attach first), make a known sequence of
 * calls, print "done" and each call's cudaError_t, then wait for stdin to close so that
 * the agent can be asked while the process lives.
 *
 * stub:     the pattern tests/integration/test_gpu.py checks (see EXPECTED there).
 * real:     cudaMalloc x2 and cudaLaunchKernel x3 against the real runtime (no GPU here:
 *           each fails with cudaErrorInsufficientDriver).
 * loop N:   N cudaLaunchKernel calls, then print ns per call (tools/bench).
 * loopfor S: cudaLaunchKernel calls for S seconds, then print ns per call (tools/bench).
 * malloc N: N cudaMalloc of 4 KiB, none freed (fills the GPU module's allocation map).
 * badptr N: N cudaMalloc whose devPtr is an unmapped address (the stub stores nothing:
 *           the uretprobe's read of *devPtr fails).
 * fork N:   N child processes one after the other, each calling cudaSetDevice(0) once
 *           (N processes for the GPU module's process map); prints how many distinct.
 * hang:     cudaStreamSynchronize on the stub's stream that never returns; the test
 *           kills the process inside the call.
 * execthread: a second thread calls cudaStreamSynchronize on the stub's stream that
 *           execs a shell: the process leaves the call, and that thread's id, by exec,
 *           and lives on until a line arrives on its stdin.
 * spin:     cudaLaunchKernel calls until a second line arrives, then print "calls N" (a
 *           hot loop whose end the caller decides: tests/integration/test_budget.py).
 * kinds:    stream-ordered, managed and pinned host allocations and frees (kinds_pattern).
 * handles:  launches as nvcc 12.8+ host stubs make them (handles_pattern): a handle from
 *           __cudaGetKernel per kernel, cudaLaunchKernel given the handle.
 * ptsz:     the per-thread default stream variants (ptsz_pattern), as a program built
 *           with --default-stream per-thread calls them.
 * launches [LIBCUDA]: cudaLaunchKernelExC, cudaLaunchCooperativeKernel and
 *           cudaGraphLaunch, and their _ptsz variants (launches_pattern); with LIBCUDA,
 *           loaded first, the stub runtime makes each through the driver.
 * pools:    cudaMallocFromPoolAsync and its _ptsz variant (pools_pattern).
 * events:   cudaEventSynchronize (events_pattern).
 * huge:     launches and copies whose sizes sum past 64 bits (huge_pattern).
 * reexec:   cudaMalloc 1 MiB (kept) and vecAdd launched 3 times, "old", "done"; then
 *           on a line the process execs itself as "reexeced": a new program, the
 *           same pid (reexec_pattern).
 * reexeced: after "go", cudaMalloc 2 MiB (kept) and blas::scale launched twice, "new".
 * restart:  cudaMalloc 1 MiB and 4 MiB, vecAdd launched 3 times, "first", "done"; then
 *           on a line (the test restarts the module meanwhile) cudaFree of the 1 MiB and
 *           vecAdd twice more, "second" (restart_pattern).
 * mixed LIBCUDA: load the driver LIBCUDA first, then cudaMalloc x2, cudaLaunchKernel x3
 *           and cudaFree x1, which the stub runtime implements by calling the driver on
 *           the same thread (as the real one does): counted once, as runtime calls.
 *
 * cuda_pattern LIBCUDA driver|realdriver|culoop N|culoopfor S: LIBCUDA is a driver
 * (libcuda.so.1).
 * driver:     the driver pattern (driver_pattern), two devices, errors.
 * culaunches: cuLaunchCooperativeKernel and cuGraphLaunch, and their _ptsz variants
 *           (cu_launches_pattern).
 * cuasync:    cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemFreeAsync and their _ptsz
 *           variants (cu_async_pattern).
 * cucopies:   cuMemcpyDtoD_v2, cuMemcpyDtoDAsync_v2, cuMemcpy, cuMemcpyAsync and their
 *           per-thread stream variants (cu_copies_pattern).
 * cuevents:   cuEventSynchronize and cuCtxSynchronize_v2 (cu_events_pattern).
 * cuptsz:     cuCtxCreate_v4 and the driver's per-thread default stream variants
 *           (cu_ptsz_pattern).
 * driverex:   launches through cuLaunchKernelEx, as cuBLAS makes them, of a function from
 *           cuModuleGetFunction and of one from cuLibraryGetKernel + cuKernelGetFunction
 *           (driver_ex_pattern).
 * realdriver: cuInit, cuMemAlloc_v2 x2 and cuLaunchKernel x3 against the toolkit's
 *           stubs/libcuda.so (each fails with CUDA_ERROR_STUB_LIBRARY, 34).
 * culoop N:   N cuLaunchKernel calls, then print ns per call (tools/bench).
 * culoopfor S: cuLaunchKernel calls for S seconds, then print ns per call (tools/bench).
 */
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

typedef struct {
	unsigned int x, y, z;
} dim3;

static int (*launch)(const void *, dim3, dim3, void **, size_t, void *);
static int (*cmalloc)(void **, size_t);
static int (*cfree)(void *);
static int (*memcpy_sync)(void *, const void *, size_t, int);
static int (*memcpy_async)(void *, const void *, size_t, int, void *);
static int (*stream_sync)(void *);
static int (*device_sync)(void);
static int (*set_device)(int);
static int (*malloc_async)(void **, size_t, void *);
static int (*free_async)(void *, void *);
static int (*malloc_managed)(void **, size_t, unsigned);
static int (*malloc_host)(void **, size_t);
static int (*host_alloc)(void **, size_t, unsigned);
static int (*free_host)(void *);

/* The driver API (CUdeviceptr is an unsigned long long; contexts are pointers). */
typedef unsigned long long cuptr;
static int (*cu_init)(unsigned);
static int (*cu_ctx_create)(void **, unsigned, int);
static int (*cu_primary_retain)(void **, int);
static int (*cu_ctx_set)(void *);
static int (*cu_get_function)(void **, void *, const char *);
static int (*cu_launch)(const void *, unsigned, unsigned, unsigned, unsigned, unsigned,
			unsigned, unsigned, void *, void **, void **);
static int (*cu_alloc)(cuptr *, size_t);
static int (*cu_free)(cuptr);
static int (*cu_alloc_managed)(cuptr *, size_t, unsigned);
static int (*cu_alloc_host)(void **, size_t);
static int (*cu_free_host)(void *);
static int (*cu_htod)(cuptr, const void *, size_t);
static int (*cu_dtoh)(void *, cuptr, size_t);
static int (*cu_ctx_sync)(void);
static int (*cu_stream_sync)(void *);

static void kernel(void)
{
}

/* Host stubs of C++ kernels, under the names nvcc gives them (mangled). Different
 * bodies: identical ones could be folded into one address. */
static volatile int sink;
void vec_add_stub(void) __asm__("_Z6vecAddPKfS0_Pfi");
void scale_stub(void) __asm__("_ZN4blas5scaleEPfif");

/* A host stub whose name a user crafted (user/modules/gpu/gpu_demangle.c): 31 levels of
 * nested B<S_, S_>, 250 bytes that demangle to ~7 GB; tests/unit/test_gpu_kernels.c's
 * crafted_name() says how it is made. */
void crafted_stub(void) __asm__("_Z1fI1A1BIS1_IS1_IS1_IS1_IS1_IS1_IS1_IS1_IS1_IS1_IS1_IS1_IS1"
				"_IS1_IS1_IS1_IS1_IS1_IS1_IS1_IS1_IS1_IS1_IS1_IS1_IS1_IS1_IS1"
				"_IS1_IS0_S0_ES2_ES3_ES4_ES5_ES6_ES7_ES8_ES9_ESA_ESB_ESC_ESD_"
				"ESE_ESF_ESG_ESH_ESI_ESJ_ESK_ESL_ESM_ESN_ESO_ESP_ESQ_ESR_ESS_"
				"EST_ESU_EE");

void crafted_stub(void)
{
	sink += 3;
}

void vec_add_stub(void)
{
	sink += 1;
}

void scale_stub(void)
{
	sink += 2;
}

static void *sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);

	if (!p) {
		fprintf(stderr, "cuda_pattern: %s: %s\n", name, dlerror());
		exit(1);
	}
	return p;
}

static void wait_line(void)
{
	char line[64];

	if (!fgets(line, sizeof(line), stdin))
		exit(1);
}

#define MiB (1ul << 20)

static void stub_pattern(void)
{
	dim3 grid = {2, 3, 1}, block = {32, 4, 1};
	static char host[2 * MiB];
	void *a, *b, *c, *huge;
	int i;

	printf("set_device %d %d\n", set_device(1), set_device(42));
	printf("malloc %d %d %d %d\n", cmalloc(&a, MiB), cmalloc(&b, 2 * MiB), cmalloc(&c, 4 * MiB),
	       cmalloc(&huge, 1ul << 41));
	for (i = 0; i < 5; i++) /* vecAdd 3 times, blas::scale twice */
		printf("launch %d\n", launch(i < 3 ? (const void *)vec_add_stub
						   : (const void *)scale_stub,
					      grid, block, NULL, 1024, NULL));
	printf("memcpy %d %d %d %d\n", memcpy_sync(a, host, MiB, 1), memcpy_sync(b, host, MiB, 1),
	       memcpy_sync(host, c, 4096, 2), memcpy_async(a, host, 512, 1, NULL));
	printf("sync %d %d\n", stream_sync(NULL), device_sync());
	printf("free %d %d\n", cfree(a), cfree(b)); /* c stays: the deliberate leak */
}

/* What tests/integration/test_gpu.py's check_handles says: vecAdd launched 4 times and
 * blas::scale twice by their handles, and a __cudaGetKernel that fails. */
static void handles_pattern(void *lib)
{
	int (*get_kernel)(void **, const void *) = sym(lib, "__cudaGetKernel");
	dim3 grid = {16, 1, 1}, block = {128, 1, 1};
	void *vec_add, *scale, *none;
	int r[3], i;

	r[0] = get_kernel(&vec_add, (const void *)vec_add_stub);
	r[1] = get_kernel(&scale, (const void *)scale_stub);
	r[2] = get_kernel(&none, NULL);
	printf("handles %d %d %d\n", r[0], r[1], r[2]);
	for (i = 0; i < 6; i++)
		printf("launch %d\n", launch(i < 4 ? vec_add : scale, grid, block, NULL, 0, NULL));
}

/* What tests/integration/test_gpu.py's check_ptsz says. */
static void ptsz_pattern(void *lib)
{
	int (*launch_ptsz)(const void *, dim3, dim3, void **, size_t, void *) =
		sym(lib, "cudaLaunchKernel_ptsz");
	int (*memcpy_ptds)(void *, const void *, size_t, int) = sym(lib, "cudaMemcpy_ptds");
	int (*memcpy_async_ptsz)(void *, const void *, size_t, int, void *) =
		sym(lib, "cudaMemcpyAsync_ptsz");
	int (*stream_sync_ptsz)(void *) = sym(lib, "cudaStreamSynchronize_ptsz");
	int (*malloc_async_ptsz)(void **, size_t, void *) = sym(lib, "cudaMallocAsync_ptsz");
	int (*free_async_ptsz)(void *, void *) = sym(lib, "cudaFreeAsync_ptsz");
	dim3 grid = {4, 1, 1}, block = {64, 1, 1};
	static char host[4096];
	void *p;
	int r[4], i;

	for (i = 0; i < 2; i++)
		printf("launch %d\n", launch_ptsz((const void *)vec_add_stub, grid, block, NULL, 0,
						  NULL));
	r[0] = memcpy_ptds(host, host, 4096, 1);
	r[1] = memcpy_async_ptsz(host, host, 512, 1, NULL);
	r[2] = stream_sync_ptsz(NULL);
	printf("copies %d %d sync %d\n", r[0], r[1], r[2]);
	r[0] = malloc_async_ptsz(&p, MiB, NULL);
	r[1] = free_async_ptsz(p, NULL);
	printf("async %d %d\n", r[0], r[1]);
}

/* driver_types.h's cudaLaunchConfig_t (CUDA 11.8+). */
struct rt_launch_config {
	dim3 grid, block;
	size_t shared_mem;
	void *stream, *attrs;
	unsigned int nattrs;
};

/* What tests/integration/test_gpu.py's check_launches says: the launches that are not
 * cudaLaunchKernel (with a launch config, cooperative) and graph launches, each with a
 * call that fails, and through each _ptsz variant. */
static void launches_pattern(void *lib)
{
	int (*launch_ex)(const struct rt_launch_config *, const void *, void **) =
		sym(lib, "cudaLaunchKernelExC");
	int (*launch_ex_ptsz)(const struct rt_launch_config *, const void *, void **) =
		sym(lib, "cudaLaunchKernelExC_ptsz");
	int (*coop)(const void *, dim3, dim3, void **, size_t, void *) =
		sym(lib, "cudaLaunchCooperativeKernel");
	int (*coop_ptsz)(const void *, dim3, dim3, void **, size_t, void *) =
		sym(lib, "cudaLaunchCooperativeKernel_ptsz");
	int (*graph)(void *, void *) = sym(lib, "cudaGraphLaunch");
	int (*graph_ptsz)(void *, void *) = sym(lib, "cudaGraphLaunch_ptsz");
	struct rt_launch_config cfg = {{4, 2, 1}, {64, 1, 1}, 512, NULL, NULL, 0};
	struct rt_launch_config small = {{2, 1, 1}, {32, 1, 1}, 0, NULL, NULL, 0};
	dim3 grid = {8, 1, 1}, block = {32, 1, 1}, empty = {0, 1, 1};
	void *exec = (void *)0x9000;
	int i;

	/* vecAdd: 3 launches of 8 x 64 threads, 1 with no config (fails, 0 threads). */
	for (i = 0; i < 3; i++)
		printf("ex %d\n", launch_ex(&cfg, (const void *)vec_add_stub, NULL));
	printf("ex %d\n", launch_ex(NULL, (const void *)vec_add_stub, NULL));
	printf("ex %d\n", launch_ex_ptsz(&small, (const void *)scale_stub, NULL));
	/* blas::scale: 2 launches of 8 x 32, 1 of an empty grid (fails). */
	for (i = 0; i < 2; i++)
		printf("coop %d\n", coop((const void *)scale_stub, grid, block, NULL, 0, NULL));
	printf("coop %d\n", coop((const void *)scale_stub, empty, block, NULL, 0, NULL));
	printf("coop %d\n", coop_ptsz((const void *)vec_add_stub, grid, block, NULL, 0, NULL));
	for (i = 0; i < 3; i++)
		printf("graph %d\n", graph(exec, NULL));
	printf("graph %d\n", graph(NULL, NULL));
	printf("graph %d\n", graph_ptsz(exec, NULL));
}

/* What tests/integration/test_gpu.py's check_pools says: stream-ordered allocations from
 * a pool, through cudaMallocFromPoolAsync and its _ptsz variant; one freed, one too
 * large. */
static void pools_pattern(void *lib)
{
	int (*from_pool)(void **, size_t, void *, void *) = sym(lib, "cudaMallocFromPoolAsync");
	int (*from_pool_ptsz)(void **, size_t, void *, void *) =
		sym(lib, "cudaMallocFromPoolAsync_ptsz");
	void *pool = (void *)0x5000, *a, *b, *huge;
	int r[4];

	r[0] = from_pool(&a, MiB, pool, NULL);
	r[1] = from_pool_ptsz(&b, 2 * MiB, pool, NULL);
	r[2] = from_pool(&huge, 1ul << 41, pool, NULL);
	r[3] = free_async(a, NULL); /* b stays */
	printf("pools %d %d %d %d\n", r[0], r[1], r[2], r[3]);
}

/* What tests/integration/test_gpu.py's check_events says: two event syncs and one of
 * no event (fails). */
static void events_pattern(void *lib)
{
	int (*event_sync)(void *) = sym(lib, "cudaEventSynchronize");
	int r[3];

	r[0] = event_sync((void *)0x6000);
	r[1] = event_sync((void *)0x6010);
	r[2] = event_sync(NULL);
	printf("events %d %d %d\n", r[0], r[1], r[2]);
}

/* What tests/integration/test_gpu.py's check_huge says: sizes past 64 bits. CUDA's
 * largest grid (~2^73 threads a launch) three times, and two copies of 2^63 bytes (the
 * stub copies nothing): summed, they would wrap round. */
static void huge_pattern(void)
{
	dim3 grid = {0x7fffffff, 65535, 65535}, block = {1024, 1, 1};
	static char host[16];
	int r[5], i;

	for (i = 0; i < 3; i++)
		r[i] = launch((const void *)vec_add_stub, grid, block, NULL, 0, NULL);
	r[3] = memcpy_sync(host, host, 1ull << 63, 1);
	r[4] = memcpy_sync(host, host, 1ull << 63, 1);
	printf("huge %d %d %d %d %d\n", r[0], r[1], r[2], r[3], r[4]);
}

/* What tests/integration/test_gpu.py's EXPECTED_KINDS says. */
static void kinds_pattern(void)
{
	void *a, *b, *m, *m2, *h, *h2;
	int r[3];

	/* One call per statement: the order of a call's arguments is unspecified. */
	r[0] = malloc_async(&a, MiB, NULL);
	r[1] = malloc_async(&b, MiB, NULL);
	r[2] = free_async(a, NULL); /* b stays */
	printf("async %d %d %d\n", r[0], r[1], r[2]);
	r[0] = malloc_managed(&m, 2 * MiB, 1);
	r[1] = cfree(m); /* managed memory, freed by cudaFree */
	r[2] = malloc_managed(&m2, 3 * MiB, 1); /* stays */
	printf("managed %d %d %d\n", r[0], r[1], r[2]);
	r[0] = malloc_host(&h, 4096);
	r[1] = host_alloc(&h2, 8192, 0); /* stays */
	r[2] = free_host(h);
	printf("host %d %d %d\n", r[0], r[1], r[2]);
}

static void crafted_pattern(void)
{
	dim3 one = {1, 1, 1};

	printf("launch %d\n", launch((const void *)crafted_stub, one, one, NULL, 0, NULL));
}

/* Runtime calls the stub runtime makes through the driver LIBCUDA loaded first. */
static void mixed_pattern(void)
{
	dim3 grid = {4, 1, 1}, block = {64, 1, 1};
	void *a, *b;
	int r[2], i;

	r[0] = cmalloc(&a, MiB);
	r[1] = cmalloc(&b, MiB);
	printf("malloc %d %d\n", r[0], r[1]);
	for (i = 0; i < 3; i++)
		printf("launch %d\n", launch((const void *)kernel, grid, block, NULL, 0, NULL));
	printf("free %d\n", cfree(a));
}

/* What tests/integration/test_gpu.py's EXPECTED_DRIVER says: two devices, a context
 * made current by cuCtxCreate_v2 (device 0), then a primary context made current by
 * cuCtxSetCurrent (device 1). */
static void driver_pattern(void)
{
	static char host[8192];
	void *c0, *c1, *bad, *h, *matmul, *relu;
	cuptr d0, d1, huge, m;
	int r[3], i;

	r[0] = cu_init(0);
	r[1] = cu_ctx_create(&c0, 0, 0);
	printf("init %d ctx %d\n", r[0], r[1]);
	r[0] = cu_get_function(&matmul, NULL, "_Z6matmulPKfS0_Pfi");
	r[1] = cu_get_function(&relu, NULL, "relu_kernel"); /* extern "C": not mangled */
	printf("functions %d %d\n", r[0], r[1]);
	printf("alloc %d\n", cu_alloc(&d0, MiB));
	for (i = 0; i < 3; i++)
		printf("launch %d\n",
		       cu_launch(matmul, 4, 1, 1, 64, 2, 1, 512, NULL, NULL, NULL));
	r[0] = cu_primary_retain(&c1, 1);
	r[1] = cu_ctx_set(c1);
	printf("primary %d set %d\n", r[0], r[1]);
	printf("alloc %d\n", cu_alloc(&d1, 2 * MiB));
	for (i = 0; i < 2; i++)
		printf("launch %d\n", cu_launch(relu, 8, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
	r[0] = cu_htod(d1, host, 4096);
	r[1] = cu_dtoh(host, d1, 1024);
	printf("copy %d %d\n", r[0], r[1]);
	r[0] = cu_ctx_sync();
	r[1] = cu_stream_sync(NULL);
	printf("sync %d %d\n", r[0], r[1]);
	printf("free %d\n", cu_free(d0)); /* d1 stays */
	r[0] = cu_alloc(&huge, 1ull << 41);
	r[1] = cu_ctx_create(&bad, 0, 9);
	printf("errors %d %d\n", r[0], r[1]);
	r[0] = cu_alloc_managed(&m, 8192, 1);
	r[1] = cu_alloc_host(&h, 4096);
	r[2] = cu_free_host(h);
	printf("managed %d host %d %d\n", r[0], r[1], r[2]);
}

/* The name cuBLAS gives the kernel of a PyTorch matmul's gemm on an H200. */
#define GEMM_KERNEL                                                                         \
	"sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma_" \
	"aligna4_alignc4_execute_kernel__5x_cublas"

/* cuda.h's CUlaunchConfig (CUDA 12.0+). */
struct launch_config {
	unsigned int grid[3], block[3], shared_mem;
	void *stream, *attrs;
	unsigned int nattrs;
};

/* What tests/integration/test_gpu.py's check_driver_ex says. */
static void driver_ex_pattern(void *lib)
{
	int (*launch_ex)(const struct launch_config *, void *, void **, void **) =
		sym(lib, "cuLaunchKernelEx");
	int (*library_kernel)(void **, void *, const char *) = sym(lib, "cuLibraryGetKernel");
	int (*kernel_function)(void **, void *) = sym(lib, "cuKernelGetFunction");
	struct launch_config cfg = {{4, 2, 1}, {64, 1, 1}, 256, NULL, NULL, 0};
	struct launch_config gemm_cfg = {{8, 8, 1}, {128, 1, 1}, 0, NULL, NULL, 0};
	void *matmul, *kernel, *gemm, *none;
	int r[3], i;

	printf("function %d\n", cu_get_function(&matmul, NULL, "_Z6matmulPKfS0_Pfi"));
	printf("launch %d\n", launch_ex(NULL, matmul, NULL, NULL)); /* no config: fails */
	for (i = 0; i < 3; i++)
		printf("launch %d\n", launch_ex(&cfg, matmul, NULL, NULL));
	r[0] = library_kernel(&kernel, NULL, GEMM_KERNEL);
	r[1] = kernel_function(&gemm, kernel);
	r[2] = kernel_function(&none, NULL);
	printf("library %d %d %d\n", r[0], r[1], r[2]);
	for (i = 0; i < 2; i++)
		printf("launch %d\n", launch_ex(&gemm_cfg, gemm, NULL, NULL));
}

/* What tests/integration/test_gpu.py's check_cu_ptsz says. */
static void cu_ptsz_pattern(void *lib)
{
	int (*ctx_create_v4)(void **, void *, unsigned, int) = sym(lib, "cuCtxCreate_v4");
	int (*launch_ptsz)(const void *, unsigned, unsigned, unsigned, unsigned, unsigned,
			   unsigned, unsigned, void *, void **, void **) =
		sym(lib, "cuLaunchKernel_ptsz");
	int (*launch_ex_ptsz)(const struct launch_config *, void *, void **, void **) =
		sym(lib, "cuLaunchKernelEx_ptsz");
	int (*htod_ptds)(cuptr, const void *, size_t) = sym(lib, "cuMemcpyHtoD_v2_ptds");
	int (*dtoh_ptds)(void *, cuptr, size_t) = sym(lib, "cuMemcpyDtoH_v2_ptds");
	int (*htod_async_ptsz)(cuptr, const void *, size_t, void *) =
		sym(lib, "cuMemcpyHtoDAsync_v2_ptsz");
	int (*dtoh_async_ptsz)(void *, cuptr, size_t, void *) =
		sym(lib, "cuMemcpyDtoHAsync_v2_ptsz");
	int (*stream_sync_ptsz)(void *) = sym(lib, "cuStreamSynchronize_ptsz");
	struct launch_config cfg = {{2, 1, 1}, {32, 1, 1}, 0, NULL, NULL, 0};
	static char host[4096];
	void *ctx, *relu;
	int r[5], i;

	r[0] = ctx_create_v4(&ctx, NULL, 0, 3);
	r[1] = cu_get_function(&relu, NULL, "relu_kernel");
	printf("ctx %d function %d\n", r[0], r[1]);
	for (i = 0; i < 2; i++)
		printf("launch %d\n", launch_ptsz(relu, 2, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
	printf("launch %d\n", launch_ex_ptsz(&cfg, relu, NULL, NULL));
	r[0] = htod_ptds(0x1000, host, 4096);
	r[1] = dtoh_ptds(host, 0x1000, 1024);
	r[2] = htod_async_ptsz(0x1000, host, 256, NULL);
	r[3] = dtoh_async_ptsz(host, 0x1000, 128, NULL);
	r[4] = stream_sync_ptsz(NULL);
	printf("copies %d %d %d %d sync %d\n", r[0], r[1], r[2], r[3], r[4]);
}

/* What tests/integration/test_gpu.py's check_cu_launches says: cooperative and graph
 * launches through the driver, each with a call that fails, and through each _ptsz
 * variant. */
static void cu_launches_pattern(void *lib)
{
	int (*coop)(const void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
		    unsigned, void *, void **) = sym(lib, "cuLaunchCooperativeKernel");
	int (*coop_ptsz)(const void *, unsigned, unsigned, unsigned, unsigned, unsigned,
			 unsigned, unsigned, void *, void **) =
		sym(lib, "cuLaunchCooperativeKernel_ptsz");
	int (*graph)(void *, void *) = sym(lib, "cuGraphLaunch");
	int (*graph_ptsz)(void *, void *) = sym(lib, "cuGraphLaunch_ptsz");
	void *f, *exec = (void *)0x9000;
	int i;

	printf("function %d\n", cu_get_function(&f, NULL, "reduce_kernel"));
	for (i = 0; i < 2; i++) /* 4 x 2 blocks of 128 */
		printf("coop %d\n", coop(f, 4, 2, 1, 128, 1, 1, 0, NULL, NULL));
	printf("coop %d\n", coop(f, 0, 1, 1, 128, 1, 1, 0, NULL, NULL)); /* empty: fails */
	printf("coop %d\n", coop_ptsz(f, 1, 1, 1, 64, 1, 1, 0, NULL, NULL));
	for (i = 0; i < 2; i++)
		printf("graph %d\n", graph(exec, NULL));
	printf("graph %d\n", graph(NULL, NULL));
	printf("graph %d\n", graph_ptsz(exec, NULL));
}

/* What tests/integration/test_gpu.py's check_cu_async says: the driver's stream-ordered
 * memory, through each function and its _ptsz variant; two frees, one allocation too
 * large. */
static void cu_async_pattern(void *lib)
{
	int (*alloc_async)(cuptr *, size_t, void *) = sym(lib, "cuMemAllocAsync");
	int (*alloc_async_ptsz)(cuptr *, size_t, void *) = sym(lib, "cuMemAllocAsync_ptsz");
	int (*from_pool)(cuptr *, size_t, void *, void *) = sym(lib, "cuMemAllocFromPoolAsync");
	int (*from_pool_ptsz)(cuptr *, size_t, void *, void *) =
		sym(lib, "cuMemAllocFromPoolAsync_ptsz");
	int (*free_async)(cuptr, void *) = sym(lib, "cuMemFreeAsync");
	int (*free_async_ptsz)(cuptr, void *) = sym(lib, "cuMemFreeAsync_ptsz");
	void *pool = (void *)0x5000;
	cuptr a, b, c, d, huge;
	int r[7];

	r[0] = alloc_async(&a, MiB, NULL);
	r[1] = from_pool(&b, 4 * MiB, pool, NULL);
	r[2] = alloc_async_ptsz(&c, 8192, NULL);
	r[3] = from_pool_ptsz(&d, 16384, pool, NULL);
	r[4] = alloc_async(&huge, 1ull << 41, NULL);
	r[5] = free_async(a, NULL);
	r[6] = free_async_ptsz(c, NULL); /* b and d stay */
	printf("cuasync %d %d %d %d %d %d %d\n", r[0], r[1], r[2], r[3], r[4], r[5], r[6]);
}

/* What tests/integration/test_gpu.py's check_cu_copies says: the driver's device-to-
 * device and unified-address copies, through each function and its per-thread stream
 * variant. */
static void cu_copies_pattern(void *lib)
{
	static const char *const names[8] = {
		"cuMemcpyDtoD_v2",	 "cuMemcpyDtoDAsync_v2",      "cuMemcpy",
		"cuMemcpyAsync",	 "cuMemcpyDtoD_v2_ptds",      "cuMemcpyDtoDAsync_v2_ptsz",
		"cuMemcpy_ptds",	 "cuMemcpyAsync_ptsz"};
	/* Every one of them takes (dst, src, count), the Async ones a stream after. */
	int (*copy)(cuptr, cuptr, size_t, void *);
	int i, r[8];

	for (i = 0; i < 8; i++) {
		copy = (int (*)(cuptr, cuptr, size_t, void *))sym(lib, names[i]);
		r[i] = copy(0x7f9000000000, 0x7f9000100000, 4096ul >> i, NULL);
	}
	printf("cucopies %d %d %d %d %d %d %d %d\n", r[0], r[1], r[2], r[3], r[4], r[5], r[6],
	       r[7]);
}

/* What tests/integration/test_gpu.py's check_events says for the driver: two event
 * syncs, one of no event (fails), and a context's sync by handle. */
static void cu_events_pattern(void *lib)
{
	int (*event_sync)(void *) = sym(lib, "cuEventSynchronize");
	int (*ctx_sync_v2)(void *) = sym(lib, "cuCtxSynchronize_v2");
	int r[4];

	r[0] = event_sync((void *)0x6000);
	r[1] = event_sync((void *)0x6010);
	r[2] = event_sync(NULL);
	r[3] = ctx_sync_v2((void *)0xc000);
	printf("events %d %d %d %d\n", r[0], r[1], r[2], r[3]);
}

/* The toolkit's stubs/libcuda.so: every call fails with CUDA_ERROR_STUB_LIBRARY. */
static void real_driver_pattern(void)
{
	cuptr p;
	int i;

	printf("init %d\n", cu_init(0));
	for (i = 0; i < 2; i++)
		printf("alloc %d\n", cu_alloc(&p, MiB));
	for (i = 0; i < 3; i++)
		printf("launch %d\n",
		       cu_launch((const void *)kernel, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
}

static void driver_syms(void *lib)
{
	cu_init = sym(lib, "cuInit");
	cu_ctx_create = sym(lib, "cuCtxCreate_v2");
	cu_primary_retain = sym(lib, "cuDevicePrimaryCtxRetain");
	cu_ctx_set = sym(lib, "cuCtxSetCurrent");
	cu_launch = sym(lib, "cuLaunchKernel");
	cu_get_function = sym(lib, "cuModuleGetFunction");
	cu_alloc = sym(lib, "cuMemAlloc_v2");
	cu_free = sym(lib, "cuMemFree_v2");
	cu_alloc_managed = sym(lib, "cuMemAllocManaged");
	cu_alloc_host = sym(lib, "cuMemAllocHost_v2");
	cu_free_host = sym(lib, "cuMemFreeHost");
	cu_htod = sym(lib, "cuMemcpyHtoD_v2");
	cu_dtoh = sym(lib, "cuMemcpyDtoH_v2");
	cu_ctx_sync = sym(lib, "cuCtxSynchronize");
	cu_stream_sync = sym(lib, "cuStreamSynchronize");
}

static void runtime_syms(void *lib)
{
	launch = sym(lib, "cudaLaunchKernel");
	cmalloc = sym(lib, "cudaMalloc");
	cfree = sym(lib, "cudaFree");
	memcpy_sync = sym(lib, "cudaMemcpy");
	memcpy_async = sym(lib, "cudaMemcpyAsync");
	stream_sync = sym(lib, "cudaStreamSynchronize");
	device_sync = sym(lib, "cudaDeviceSynchronize");
	set_device = sym(lib, "cudaSetDevice");
	malloc_async = sym(lib, "cudaMallocAsync");
	free_async = sym(lib, "cudaFreeAsync");
	malloc_managed = sym(lib, "cudaMallocManaged");
	malloc_host = sym(lib, "cudaMallocHost");
	host_alloc = sym(lib, "cudaHostAlloc");
	free_host = sym(lib, "cudaFreeHost");
}

static void real_pattern(void)
{
	dim3 one = {1, 1, 1};
	void *p = NULL;
	int i;

	for (i = 0; i < 2; i++)
		printf("malloc %d\n", cmalloc(&p, MiB));
	for (i = 0; i < 3; i++)
		printf("launch %d\n", launch((const void *)kernel, one, one, NULL, 0, NULL));
}

static void one_launch(void)
{
	dim3 one = {1, 1, 1};

	launch((const void *)kernel, one, one, NULL, 0, NULL);
}

static void one_cu_launch(void)
{
	cu_launch((const void *)kernel, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
}

/* n calls of one(), or (n == 0) calls for at least `seconds`, in batches of 4096: the
 * bench's way to cover whole run-stats duty cycles whatever the machine's speed. Then
 * print ns per call. */
static void timed_calls(void (*one)(void), long n, double seconds)
{
	struct timespec t0, t1;
	long calls = 0, i, batch = n ? n : 4096;
	double ns = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (i = 0; i < batch; i++)
			one();
		calls += batch;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
	} while (!n && ns < seconds * 1e9);
	printf("%.1f\n", ns / calls);
}

static void malloc_loop(long n, int bad)
{
	void *p, **where = &p;
	long i, failed = 0;

	if (bad) { /* a page that was mapped and no longer is */
		where = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			     0);
		if (where == MAP_FAILED || munmap(where, 4096))
			exit(1);
	}
	for (i = 0; i < n; i++)
		failed += cmalloc(where, 4096) != 0;
	printf("malloc %ld failed %ld\n", n, failed);
}

static int cmp_pid(const void *a, const void *b)
{
	return *(const pid_t *)a - *(const pid_t *)b;
}

static void fork_loop(long n)
{
	pid_t *pids = calloc(n, sizeof(*pids));
	long i, distinct = 0;
	int status;

	if (!pids)
		exit(1);
	for (i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] == 0)
			_exit(set_device(0));
		if (pids[i] < 0 || waitpid(pids[i], &status, 0) != pids[i] || status)
			exit(1);
	}
	qsort(pids, n, sizeof(*pids), cmp_pid);
	for (i = 0; i < n; i++)
		distinct += !i || pids[i] != pids[i - 1];
	printf("forked %ld distinct %ld\n", n, distinct);
	free(pids);
}

static void *exec_in_call(void *arg)
{
	(void)arg;
	printf("exec\n"); /* then the call, which does not return: the stub execs */
	stream_sync((void *)(intptr_t)-2);
	return NULL;
}

static void exec_thread(void)
{
	pthread_t t;

	if (pthread_create(&t, NULL, exec_in_call, NULL))
		exit(1);
	pthread_join(t, NULL); /* the exec ends the process's image first */
}

/* The program before the exec: what it had must not be counted as the new one's. */
static void reexec_pattern(const char *self, const char *lib)
{
	dim3 grid = {4, 1, 1}, block = {64, 1, 1};
	void *a;
	int i;

	if (cmalloc(&a, MiB))
		exit(1);
	for (i = 0; i < 3; i++)
		launch((const void *)vec_add_stub, grid, block, NULL, 0, NULL);
	printf("old\ndone\n");
	wait_line();
	fflush(stdout);
	execl(self, self, lib, "reexeced", (char *)NULL);
	exit(1);
}

static void reexeced_pattern(void)
{
	dim3 grid = {2, 1, 1}, block = {32, 1, 1};
	void *a;
	int i;

	if (cmalloc(&a, 2 * MiB))
		exit(1);
	for (i = 0; i < 2; i++)
		launch((const void *)scale_stub, grid, block, NULL, 0, NULL);
	printf("new\n");
}

/* Halves on either side of the GPU module's restart (test_gpu.py's check_restart). */
static void restart_pattern(void)
{
	dim3 grid = {4, 1, 1}, block = {64, 1, 1};
	void *a, *b;
	int i;

	if (cmalloc(&a, MiB) || cmalloc(&b, 4 * MiB))
		exit(1);
	for (i = 0; i < 3; i++)
		launch((const void *)vec_add_stub, grid, block, NULL, 0, NULL);
	printf("first\ndone\n");
	fflush(stdout);
	wait_line();
	if (cfree(a))
		exit(1);
	for (i = 0; i < 2; i++)
		launch((const void *)vec_add_stub, grid, block, NULL, 0, NULL);
	printf("second\n");
}

static void launch_spin(void)
{
	struct pollfd in = {.fd = STDIN_FILENO, .events = POLLIN};
	dim3 one = {1, 1, 1};
	long calls = 0, i;

	do {
		for (i = 0; i < 4096; i++)
			launch((const void *)kernel, one, one, NULL, 0, NULL);
		calls += i;
	} while (poll(&in, 1, 0) == 0);
	wait_line();
	printf("calls %ld\n", calls);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 2 ? argv[2] : "stub";
	int is_driver = !strcmp(mode, "driver") || !strcmp(mode, "realdriver") ||
			!strcmp(mode, "culoop") || !strcmp(mode, "culoopfor") ||
			!strcmp(mode, "driverex") || !strcmp(mode, "cuptsz") ||
			!strcmp(mode, "culaunches") || !strcmp(mode, "cuasync") ||
			!strcmp(mode, "cucopies") || !strcmp(mode, "cuevents");
	char line[64];
	void *lib;

	if (argc < 2) {
		fprintf(stderr, "usage: cuda_pattern LIBCUDART "
				"[stub|real|hang|execthread|spin|reexec|kinds|handles|ptsz|crafted|"
				"mixed LIBCUDA|launches [LIBCUDA]|pools|events|loop N|loopfor S|malloc N|"
				"badptr N|fork N]\n"
				"       cuda_pattern LIBCUDA driver|driverex|cuptsz|culaunches|cuasync|"
				"cucopies|cuevents|"
				"realdriver|culoop N|culoopfor S\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* The driver first: the stub runtime calls it only if it is loaded already. */
	if (!strcmp(mode, "mixed") && (argc < 4 || !dlopen(argv[3], RTLD_NOW | RTLD_LOCAL))) {
		fprintf(stderr, "cuda_pattern: mixed needs a LIBCUDA: %s\n", dlerror());
		return 1;
	}
	if (!strcmp(mode, "launches") && argc > 3 && !dlopen(argv[3], RTLD_NOW | RTLD_LOCAL)) {
		fprintf(stderr, "cuda_pattern: %s\n", dlerror());
		return 1;
	}
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "cuda_pattern: %s\n", dlerror());
		return 1;
	}
	if (is_driver)
		driver_syms(lib);
	else
		runtime_syms(lib);
	printf("loaded %d\n", getpid());
	wait_line();
	if (!strcmp(mode, "real"))
		real_pattern();
	else if (!strcmp(mode, "driver"))
		driver_pattern();
	else if (!strcmp(mode, "driverex"))
		driver_ex_pattern(lib);
	else if (!strcmp(mode, "cuptsz"))
		cu_ptsz_pattern(lib);
	else if (!strcmp(mode, "culaunches"))
		cu_launches_pattern(lib);
	else if (!strcmp(mode, "cuasync"))
		cu_async_pattern(lib);
	else if (!strcmp(mode, "cucopies"))
		cu_copies_pattern(lib);
	else if (!strcmp(mode, "cuevents"))
		cu_events_pattern(lib);
	else if (!strcmp(mode, "realdriver"))
		real_driver_pattern();
	else if (!strcmp(mode, "culoop") && argc > 3)
		timed_calls(one_cu_launch, atol(argv[3]), 0);
	else if (!strcmp(mode, "culoopfor") && argc > 3)
		timed_calls(one_cu_launch, 0, atof(argv[3]));
	else if (!strcmp(mode, "kinds"))
		kinds_pattern();
	else if (!strcmp(mode, "handles"))
		handles_pattern(lib);
	else if (!strcmp(mode, "ptsz"))
		ptsz_pattern(lib);
	else if (!strcmp(mode, "launches"))
		launches_pattern(lib);
	else if (!strcmp(mode, "pools"))
		pools_pattern(lib);
	else if (!strcmp(mode, "events"))
		events_pattern(lib);
	else if (!strcmp(mode, "huge"))
		huge_pattern();
	else if (!strcmp(mode, "mixed"))
		mixed_pattern();
	else if (!strcmp(mode, "crafted"))
		crafted_pattern();
	else if (!strcmp(mode, "loop") && argc > 3)
		timed_calls(one_launch, atol(argv[3]), 0);
	else if (!strcmp(mode, "loopfor") && argc > 3)
		timed_calls(one_launch, 0, atof(argv[3]));
	else if (!strcmp(mode, "malloc") && argc > 3)
		malloc_loop(atol(argv[3]), 0);
	else if (!strcmp(mode, "badptr") && argc > 3)
		malloc_loop(atol(argv[3]), 1);
	else if (!strcmp(mode, "fork") && argc > 3)
		fork_loop(atol(argv[3]));
	else if (!strcmp(mode, "hang"))
		stream_sync((void *)(intptr_t)-1);
	else if (!strcmp(mode, "execthread"))
		exec_thread();
	else if (!strcmp(mode, "spin"))
		launch_spin();
	else if (!strcmp(mode, "reexec"))
		reexec_pattern(argv[0], argv[1]);
	else if (!strcmp(mode, "reexeced"))
		reexeced_pattern();
	else if (!strcmp(mode, "restart"))
		restart_pattern();
	else
		stub_pattern();
	printf("done\n");
	/* Then "rename NAME" lines: the process renames itself (prctl), as setproctitle
	 * does, and says so. */
	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "rename ", 7)) {
			line[strcspn(line, "\n")] = '\0';
			prctl(PR_SET_NAME, line + 7);
			printf("renamed\n");
		}
	}
	return 0;
}
