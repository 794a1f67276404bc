// bias.cu — adding a bias to every row, and the bias gradient.
//
// Contract: engine.Backend.AddBias and AddBiasBackward (engine/backend.go);
// the launchers' arguments are listed in kernels.h. What the kernels add to
// it: x, b and dout of any float dtype dt, db f32 or dt (other pairs:
// cudaErrorInvalidValue). x + b is computed in f32 and rounded once; db is
// summed in a fixed order (colsum.cuh) and rounded once. n ≤ 0 or d ≤ 0
// launches nothing.
//
// Design.
//   AddBias: element-wise, a grid-stride loop over 16-byte packs of x when
//   d and the pointers allow (a pack then lies within one row), else element
//   by element; each element is written by one thread.
//   AddBiasBackward: bias_partial_kernel, grid (column tiles of 256, row
//   groups of colsum.cuh), sums each column over the group's rows in f32,
//   in row order, into the workspace [groups, d] f32 (coalesced: adjacent
//   threads read adjacent columns); colsum_kernel adds the partials to db.
#include "colsum.cuh"
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"

static constexpr int kThreads = 256;

template <class T, int V>
__global__ void __launch_bounds__(kThreads)
	add_bias_kernel(T *__restrict__ x, const T *__restrict__ b, int64_t n, int64_t d) {
	const int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, nthreads = (int64_t)gridDim.x * blockDim.x;
	const int64_t packs = n * d / V;
	for (int64_t i = tid; i < packs; i += nthreads) {
		float xv[V], bv[V];
		load_pack(xv, x + i * V);
		load_pack(bv, b + (i * V) % d);
		for (int e = 0; e < V; e++) xv[e] += bv[e];
		store_pack(x + i * V, xv);
	}
}

// part[blockIdx.y, j] = Σ dout[i, j] over the rows i of group blockIdx.y.
template <class T>
__global__ void __launch_bounds__(kThreads)
	bias_partial_kernel(float *__restrict__ part, const T *__restrict__ dout, int64_t n, int64_t d, int64_t rows) {
	const int64_t j = (int64_t)blockIdx.x * kThreads + threadIdx.x;
	if (j >= d) return;
	const int64_t lo = blockIdx.y * rows, hi = lo + rows < n ? lo + rows : n;
	float s = 0.0f;
	for (int64_t i = lo; i < hi; i++) s += to_float(dout[i * d + j]);
	part[blockIdx.y * d + j] = s;
}

extern "C" cudaError_t tw_add_bias(void *x, const void *b, tw_dtype dt, int64_t n, int64_t d, cudaStream_t stream) {
	if (n <= 0 || d <= 0) return cudaSuccess;
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		constexpr int V = pack_width<T>();
		if (d % V == 0 && pack_aligned<T, V>(x) && pack_aligned<T, V>(b))
			LAUNCH(grid_for(n * d / V, kThreads), kThreads, 0, stream, add_bias_kernel<T, V>)((T *)x, (const T *)b,
			                                                                                 n, d);
		else
			LAUNCH(grid_for(n * d, kThreads), kThreads, 0, stream, add_bias_kernel<T, 1>)((T *)x, (const T *)b, n, d);
		return cudaGetLastError();
	});
}

extern "C" size_t tw_add_bias_backward_workspace(int64_t n, int64_t d) {
	if (n <= 0 || d <= 0) return 0;
	return (size_t)colsum_groups(n) * (size_t)d * sizeof(float);
}

extern "C" cudaError_t tw_add_bias_backward(void *db, tw_dtype bdt, const void *dout, tw_dtype dt, int64_t n,
                                            int64_t d, void *workspace, cudaStream_t stream) {
	if (n <= 0 || d <= 0) return cudaSuccess;
	if (workspace == nullptr || (bdt != dt && bdt != TW_F32)) return cudaErrorInvalidValue;
	if (ceil_div<int64_t>(d, kThreads) > INT32_MAX) return cudaErrorInvalidValue;
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		const int64_t nblk = colsum_groups(n);
		float *part = (float *)workspace; // [nblk, d]
		LAUNCH(dim3((unsigned)ceil_div<int64_t>(d, kThreads), (unsigned)nblk), kThreads, 0, stream,
		       bias_partial_kernel<T>)(part, (const T *)dout, n, d, colsum_group_rows(n));
		cudaError_t e = cudaGetLastError();
		if (e != cudaSuccess) return e;
		if (bdt == TW_F32) return launch_colsum<float>((float *)db, part, nblk, d, stream);
		return launch_colsum<T>((T *)db, part, nblk, d, stream);
	});
}
