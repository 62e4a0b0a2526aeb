// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The kernel real_cuda launches through the driver API (cuModuleGetFunction by name). */
extern "C" __global__ void drv_axpy(float *x, float a, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] = a * x[i] + 1.0f;
}
