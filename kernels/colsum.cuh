// colsum.cuh — the deterministic column sums of parameter gradients, shared
// by the families that accumulate one (rmsnorm's dw, layernorm's dw and db,
// bias's db).
// Include after common.cuh.
//
// The rows are cut into colsum_groups(n) groups of colsum_group_rows(n)
// consecutive rows: at most kColsumMaxGroups, so the grid fills a GPU, and a
// partition that depends on n alone, never on the device. A family's first
// kernel writes one f32 partial sum per (group, column) into a workspace
// [groups, d] f32; colsum_kernel then adds, for each column, the partials in
// group order (in f64, split over kColsumLanes lanes of fixed strides,
// combined in a fixed order) to dst and rounds once. The same bits on every
// run and every GPU.
#pragma once

#include <stdint.h>

#include "common.cuh"

static constexpr int kColsumMaxGroups = 1024; // most row groups
static constexpr int kColsumCols = 32;        // colsum_kernel: columns per block …
static constexpr int kColsumLanes = 16;       // … and lanes splitting the groups of each column

// Rows of one group, and the number of groups, for n rows.
static inline int64_t colsum_group_rows(int64_t n) { return ceil_div<int64_t>(n, kColsumMaxGroups); }
static inline int64_t colsum_groups(int64_t n) { return ceil_div<int64_t>(n, colsum_group_rows(n)); }

// dst[j] = round(dst[j] + Σ_b part[b, j]), b in group order. Block
// (kColsumCols, kColsumLanes): lane y sums groups y, y + kColsumLanes, … of
// column x in f64; lane 0 then adds the kColsumLanes sums in order.
template <class W>
__global__ void __launch_bounds__(kColsumCols * kColsumLanes)
	colsum_kernel(W *__restrict__ dst, const float *__restrict__ part, int64_t nblk, int64_t d) {
	__shared__ double sums[kColsumLanes][kColsumCols];
	const int64_t j = (int64_t)blockIdx.x * kColsumCols + threadIdx.x;
	double s = 0.0;
	if (j < d)
		for (int64_t b = threadIdx.y; b < nblk; b += kColsumLanes) s += (double)part[b * d + j];
	sums[threadIdx.y][threadIdx.x] = s;
	__syncthreads();
	if (threadIdx.y == 0 && j < d) {
		double t = (double)to_float(dst[j]);
		for (int y = 0; y < kColsumLanes; y++) t += sums[y][threadIdx.x];
		dst[j] = from_float<W>((float)t);
	}
}

// Launches colsum_kernel for dst [d] of W over part [nblk, d].
template <class W>
static inline cudaError_t launch_colsum(W *dst, const float *part, int64_t nblk, int64_t d, cudaStream_t stream) {
	LAUNCH((unsigned)ceil_div<int64_t>(d, kColsumCols), dim3(kColsumCols, kColsumLanes), 0, stream,
	       colsum_kernel<W>)(dst, part, nblk, d);
	return cudaGetLastError();
}
