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
//   AddBias: a grid-stride loop over 16-byte packs of x (8 bf16/f16 or 4 f32
//   elements; d a multiple of the pack and x, b aligned to it, so a pack
//   lies within one row), four packs per thread per iteration with their
//   loads issued before the first store, at most 8 blocks of 256 threads per
//   SM (vec.cuh). A thread's column advances by a fixed step per pack, so
//   no division per pack. Otherwise the same loop element by element. Each
//   element is written by one thread.
//   AddBiasBackward: bias_partial_kernel, grid (column tiles, row groups of
//   colsum.cuh: 64 rows up to 64k rows). A block is 32 column threads × 8
//   row lanes; a column thread owns one 16-byte pack of columns (a tile of
//   256 bf16 or 128 f32 columns; 32 columns element by element when d or the
//   alignment does not allow packs), and row lane y sums rows y, y + 8, … of
//   the group, four rows per iteration, into f32 registers, loading the next
//   iteration's four while it adds this one's (with the four loaded and then
//   added, nvcc had issued each load after the previous row's adds: one
//   load in flight); the lanes are then added in lane order through shared memory
//   and written as the group's partial [groups, d] f32. colsum_kernel adds
//   the partials to db. At 2k rows × 4096 bf16 columns: 512 blocks, and
//   partials of 1/32 of the input's bytes. Speed on a GPU: unmeasured since
//   this design.
#include "colsum.cuh"
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"
#include "vec.cuh"

static constexpr int kThreads = 256;
static constexpr int kUnroll = 4;   // add_bias: packs per thread per iteration
static constexpr int kRowLanes = 8; // bias_partial_kernel: row lanes of a block
static constexpr int kRowUnroll = 4; // … rows per lane per iteration

// x[i, :] += b for the packs of V elements of x [n, d]; ppr = d / V packs
// per row.
template <class T, int V>
__global__ void __launch_bounds__(kThreads) add_bias_kernel(T *__restrict__ x, const T *__restrict__ b, int64_t n,
                                                            int64_t ppr) {
	const int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, nth = (int64_t)gridDim.x * blockDim.x;
	const int64_t packs = n * ppr, step = nth % ppr;
	int64_t p = tid, c = tid % ppr; // c: p's pack within its row
	for (; p + (kUnroll - 1) * nth < packs; p += kUnroll * nth) {
		Held<T, V> xv[kUnroll], bv[kUnroll]; // as loaded: widened when added
		TW_UNROLL
		for (int u = 0; u < kUnroll; u++) {
			xv[u] = ld_held<V>(x + (p + u * nth) * V);
			bv[u] = ld_held<V>(b + c * V);
			c += step;
			if (c >= ppr) c -= ppr;
		}
		TW_UNROLL
		for (int u = 0; u < kUnroll; u++) {
			float o[V], bf[V];
			widen(o, xv[u]);
			widen(bf, bv[u]);
			for (int e = 0; e < V; e++) o[e] += bf[e];
			store_pack(x + (p + u * nth) * V, o);
		}
	}
	for (; p < packs; p += nth) {
		float o[V], bf[V];
		load_pack(o, x + p * V);
		load_pack(bf, b + c * V);
		for (int e = 0; e < V; e++) o[e] += bf[e];
		store_pack(x + p * V, o);
		c += step;
		if (c >= ppr) c -= ppr;
	}
}

// part[g, j] = Σ dout[i, j] over the rows i of group g = blockIdx.y, for the
// kColsumThreadsX·V columns j of tile blockIdx.x. Shared memory holds lanes
// 1… by element then column thread, so that a warp's stores and loads fall
// in 32 different banks.
template <class T, int V>
__global__ void __launch_bounds__(kColsumThreadsX *kRowLanes)
	bias_partial_kernel(float *__restrict__ part, const T *__restrict__ dout, int64_t n, int64_t d, int64_t rows) {
	__shared__ float lanes[kRowLanes - 1][V][kColsumThreadsX];
	const int64_t j = ((int64_t)blockIdx.x * kColsumThreadsX + threadIdx.x) * V;
	const int64_t lo = (int64_t)blockIdx.y * rows, hi = lo + rows < n ? lo + rows : n;
	float s[V];
	for (int e = 0; e < V; e++) s[e] = 0.0f;
	if (j < d) {
		int64_t i = lo + threadIdx.y;
		constexpr int64_t kStep = kRowUnroll * kRowLanes;
		// The next iteration's rows are loaded before this one's are added:
		// kRowUnroll loads stay in flight while the adds wait.
		Held<T, V> g[kRowUnroll]; // as loaded: widened when added
		bool more = i + kStep - kRowLanes < hi;
		if (more)
			TW_UNROLL
			for (int u = 0; u < kRowUnroll; u++) g[u] = ld_held<V>(dout + (i + u * kRowLanes) * d + j);
		while (more) {
			i += kStep;
			more = i + kStep - kRowLanes < hi;
			Held<T, V> h[kRowUnroll];
			if (more)
				TW_UNROLL
				for (int u = 0; u < kRowUnroll; u++) h[u] = ld_held<V>(dout + (i + u * kRowLanes) * d + j);
			TW_UNROLL
			for (int u = 0; u < kRowUnroll; u++) {
				float f[V];
				widen(f, g[u]);
				for (int e = 0; e < V; e++) s[e] += f[e];
				if (more) g[u] = h[u];
			}
		}
		for (; i < hi; i += kRowLanes) {
			float f[V];
			load_pack(f, dout + i * d + j);
			for (int e = 0; e < V; e++) s[e] += f[e];
		}
	}
	if (threadIdx.y > 0)
		for (int e = 0; e < V; e++) lanes[threadIdx.y - 1][e][threadIdx.x] = s[e];
	__syncthreads();
	if (threadIdx.y == 0 && (V == 8 || j < d)) { // runs of 8 are stored by the whole warp (st_warp8)
		Pack<float, V> out;
		for (int e = 0; e < V; e++) {
			float t = s[e];
			for (int y = 0; y < kRowLanes - 1; y++) t += lanes[y][e][threadIdx.x];
			out.v[e] = t;
		}
		if constexpr (V == 8) st_warp8(part + blockIdx.y * d + j - threadIdx.x * V, out, j < d);
		else st<V>(part + blockIdx.y * d + j, out);
	}
}

extern "C" cudaError_t tw_add_bias(void *x, const void *b, tw_dtype dt, int64_t n, int64_t d, cudaStream_t stream) {
	if (n <= 0 || d <= 0) return cudaSuccess;
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		constexpr int V = pack_width<T>();
		if (d % V == 0 && pack_aligned<T, V>(x) && pack_aligned<T, V>(b))
			LAUNCH(fill_grid(n * (d / V), (int64_t)kThreads * kUnroll, kFlatBlocksPerSM), kThreads, 0, stream,
			       add_bias_kernel<T, V>)((T *)x, (const T *)b, n, d / V);
		else
			LAUNCH(fill_grid(n * d, (int64_t)kThreads * kUnroll, kFlatBlocksPerSM), kThreads, 0, stream,
			       add_bias_kernel<T, 1>)((T *)x, (const T *)b, n, d);
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
	if (ceil_div<int64_t>(d, kColsumThreadsX) > INT32_MAX) return cudaErrorInvalidValue;
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		constexpr int V = pack_width<T>();
		const int64_t groups = colsum_groups(n), rows = colsum_rows(n);
		float *part = (float *)workspace; // [groups, d]
		const dim3 block(kColsumThreadsX, kRowLanes);
		if (d % V == 0 && pack_aligned<T, V>(dout) && pack_aligned<float, V>(part))
			LAUNCH(dim3((unsigned)ceil_div<int64_t>(d, kColsumThreadsX * V), (unsigned)groups), block, 0, stream,
			       bias_partial_kernel<T, V>)(part, (const T *)dout, n, d, rows);
		else
			LAUNCH(dim3((unsigned)ceil_div<int64_t>(d, kColsumThreadsX), (unsigned)groups), block, 0, stream,
			       bias_partial_kernel<T, 1>)(part, (const T *)dout, n, d, rows);
		cudaError_t e = cudaGetLastError();
		if (e != cudaSuccess) return e;
		if (bdt == TW_F32) return launch_colsum<float>((float *)db, nullptr, part, groups, d, stream);
		return launch_colsum<T>((T *)db, nullptr, part, groups, d, stream);
	});
}
