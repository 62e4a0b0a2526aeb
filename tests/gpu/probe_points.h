/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * How many probe points the GPU module puts on the stub libraries the tests build (its
 * uprobe_specs in user/modules/gpu/gpu.c: every function, and per-thread stream variant,
 * entry and return): what a test waits for before it plays a pattern. The one place
 * that says it: tests/integration/test_gpu.py reads these lines too, and the tests and
 * tools that import it. A new probed function changes them here.
 */
#ifndef BPFTEL_TESTS_GPU_PROBE_POINTS_H
#define BPFTEL_TESTS_GPU_PROBE_POINTS_H

/* The stub libcudart.so.13: 30 runtime functions (10 per-thread stream variants). */
#define GPU_TEST_CUDART_POINTS 60
/* The stub libcuda.so.1: 49 driver functions (16 per-thread stream variants); two of
 * them (cuMemcpyHtoD_v2_ptds, an alias) folded into cuMemcpyHtoD_v2's. */
#define GPU_TEST_CUDA_POINTS 98

#endif /* BPFTEL_TESTS_GPU_PROBE_POINTS_H */
