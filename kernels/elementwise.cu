// elementwise.cu — element-wise kernels over flat f32 arrays.
//
// Contract (launchers declared in kernels.h):
//   tw_fill_f32(x, n, v, s):      x[i] = v,           i in [0, n)
//   tw_add_f32(out, a, b, n, s):  out[i] = a[i] + b[i] (out may alias a or b)
// n ≤ 0 launches nothing. Grid-stride loops: any n, any grid size.
#include "common.cuh"
#include "kernels.h"

static constexpr int kBlock = 256;

__global__ void fill_f32_kernel(float *__restrict__ x, int64_t n, float v) {
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
		x[i] = v;
}

// No __restrict__: out may alias a or b.
__global__ void add_f32_kernel(float *out, const float *a, const float *b, int64_t n) {
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
		out[i] = a[i] + b[i];
}

extern "C" cudaError_t tw_fill_f32(float *x, int64_t n, float v, cudaStream_t stream) {
	if (n <= 0) return cudaSuccess;
	LAUNCH(grid_for(n, kBlock), kBlock, 0, stream, fill_f32_kernel)(x, n, v);
	return cudaGetLastError();
}

extern "C" cudaError_t tw_add_f32(float *out, const float *a, const float *b, int64_t n, cudaStream_t stream) {
	if (n <= 0) return cudaSuccess;
	LAUNCH(grid_for(n, kBlock), kBlock, 0, stream, add_f32_kernel)(out, a, b, n);
	return cudaGetLastError();
}
