// colsum.cuh — the deterministic column sums of parameter gradients, shared
// by the families that accumulate one (rmsnorm's dw, layernorm's dw and db,
// bias's db). Include after common.cuh, pack.cuh and vec.cuh.
//
// Two steps, so that the sums never depend on the device or on timing:
//  1. A family's kernel cuts the n rows into groups of consecutive rows and
//     writes one f32 partial sum per (group, column) into a workspace
//     [gradients][groups, d] f32. How rows are grouped is a function of the
//     shape alone (below), never of the SM count; within a group the family
//     fixes the order of its additions.
//  2. colsum_kernel adds, for each column, the partials in a fixed order (in
//     f64: lane y of kColsumLanes takes groups y, y + kColsumLanes, …, then
//     the lanes are added in order), adds the destination's old value and
//     rounds once. One launch serves every gradient of a family (blockIdx.y).
// The same bits on every run and every GPU.
//
// Grouping.
//   Pure column sums (bias's db): groups of colsum_rows(n) = 64·⌈n / 65536⌉
//   rows (64 up to 64k rows, at most 1024 groups); the kernel's grid splits
//   the columns too, so the grid fills a GPU whatever the group count. The
//   partials are 4·d bytes per 64 rows: 1/32 of the bf16 input's bytes.
//   Norm backwards (dx needs whole rows, so one block owns a group's rows
//   across all of d): groups of norm_rows(n) = max(16, ⌈n / 256⌉) rows, so
//   2048 rows make 128 groups — about one block per SM of an H100/H200 —
//   and 8192 rows 256 groups of 32. Fewer, larger groups would leave SMs
//   idle at 2k tokens (a block cannot split a row's reduction with another);
//   more, smaller ones would write more partials (at 16 rows: layernorm's
//   two partials add 1/6 to the bf16 traffic, rmsnorm's one 1/16).
//
// Speed on a GPU: unmeasured since this design.
#pragma once

#include <stdint.h>

#include "common.cuh"
#include "pack.cuh"
#include "vec.cuh"

static constexpr int kColsumGroupRows = 64;   // rows of a pure column sum's group, up to …
static constexpr int kColsumMaxGroups = 1024; // … this many groups
static constexpr int kNormMinRows = 16;       // a norm backward's group: at least this many rows, …
static constexpr int kNormMaxGroups = 256;    // … and at most this many groups

// Rows per group and groups of a pure column sum over n rows.
static inline int64_t colsum_rows(int64_t n) {
	return kColsumGroupRows * ceil_div<int64_t>(n, (int64_t)kColsumGroupRows * kColsumMaxGroups);
}
static inline int64_t colsum_groups(int64_t n) { return ceil_div<int64_t>(n, colsum_rows(n)); }

// Rows per group and groups of a norm backward over n rows.
static inline int64_t norm_rows(int64_t n) {
	const int64_t r = ceil_div<int64_t>(n, kNormMaxGroups);
	return r < kNormMinRows ? kNormMinRows : r;
}
static inline int64_t norm_groups(int64_t n) { return ceil_div<int64_t>(n, norm_rows(n)); }

static constexpr int kColsumThreadsX = 32; // colsum_kernel: column threads of a block, …
static constexpr int kColsumLanes = 8;     // … lanes splitting the groups of each column

// dst_k[j] = round(dst_k[j] + Σ_g part[k][g, j]) for gradient k = blockIdx.y
// (dst0, or dst1 at part + groups·d). Each thread takes V consecutive
// columns (V = 4: 16-byte loads of the partials, d a multiple of 4); lane y
// sums groups y, y + kColsumLanes, … in f64, and lane 0 adds the lanes in
// order.
template <class W, int V>
__global__ void __launch_bounds__(kColsumThreadsX *kColsumLanes)
	colsum_kernel(W *__restrict__ dst0, W *__restrict__ dst1, const float *__restrict__ part, int64_t groups,
	              int64_t d) {
	__shared__ double sums[kColsumLanes - 1][V][kColsumThreadsX]; // by element, then column thread
	W *dst = blockIdx.y == 0 ? dst0 : dst1;
	const float *p = part + (int64_t)blockIdx.y * groups * d;
	const int64_t j = ((int64_t)blockIdx.x * kColsumThreadsX + threadIdx.x) * V;
	double s[V];
	for (int e = 0; e < V; e++) s[e] = 0.0;
	if (j < d) {
		int64_t g = threadIdx.y;
		for (; g + kColsumLanes < groups; g += 2 * kColsumLanes) { // two loads in flight
			const Pack<float, V> a = ld<V>(p + g * d + j), b = ld<V>(p + (g + kColsumLanes) * d + j);
			for (int e = 0; e < V; e++) s[e] = (s[e] + (double)a.v[e]) + (double)b.v[e];
		}
		for (; g < groups; g += kColsumLanes) {
			const Pack<float, V> a = ld<V>(p + g * d + j);
			for (int e = 0; e < V; e++) s[e] += (double)a.v[e];
		}
	}
	if (threadIdx.y > 0)
		for (int e = 0; e < V; e++) sums[threadIdx.y - 1][e][threadIdx.x] = s[e];
	__syncthreads();
	if (threadIdx.y == 0 && j < d) {
		Pack<W, V> old = ld<V>(dst + j), out;
		for (int e = 0; e < V; e++) {
			double t = (double)to_float(old.v[e]) + s[e];
			for (int y = 0; y < kColsumLanes - 1; y++) t += sums[y][e][threadIdx.x];
			out.v[e] = from_float<W>((float)t);
		}
		st<V>(dst + j, out);
	}
}

// Launches colsum_kernel for dst0 (and dst1 when not null) [d] of W over
// part [1 or 2][groups, d] f32. The packed path needs d % 4 == 0 and the
// destinations aligned to their 4-element packs (part, a workspace, is).
template <class W>
static inline cudaError_t launch_colsum(W *dst0, W *dst1, const float *part, int64_t groups, int64_t d,
                                        cudaStream_t stream) {
	const unsigned ny = dst1 ? 2 : 1;
	const dim3 block(kColsumThreadsX, kColsumLanes);
	if (d % 4 == 0 && pack_aligned<W, 4>(dst0) && (!dst1 || pack_aligned<W, 4>(dst1)) && pack_aligned<float, 4>(part))
		LAUNCH(dim3((unsigned)ceil_div<int64_t>(d, kColsumThreadsX * 4), ny), block, 0, stream, colsum_kernel<W, 4>)(
			dst0, dst1, part, groups, d);
	else
		LAUNCH(dim3((unsigned)ceil_div<int64_t>(d, kColsumThreadsX), ny), block, 0, stream, colsum_kernel<W, 1>)(
			dst0, dst1, part, groups, d);
	return cudaGetLastError();
}

// ---- The norm backwards' blocks (rmsnorm.cu, layernorm.cu) ----------------
//
// A block owns one group of rows (norm_rows) across all d columns. It is
// kNormSlots ≤ 4 slots of th threads (th a multiple of 32, at most
// kNormThreads / slots): slot s takes rows lo + s, lo + s + slots, … of the
// group, so up to four rows are reduced at once, and each slot loads its
// next row while it reduces the current one (two rows of loads in flight
// per slot). Thread t of a slot owns the P packs of V columns
// (t + k·th)·V, k < P, in every row it touches: it keeps its gradient
// partials in registers (no shared-memory traffic per row; the weight is
// re-read per row, an L1 hit), and a warp's accesses are 16-byte packs of
// consecutive columns (coalesced).
// Row sums go through slot_sum (one barrier per row). At the end
// flush_partial adds the slots' partials in slot order and writes the
// group's row of the workspace.
//
// norm_plan picks P and th from d: one pack per thread up to 256 packs,
// else two (element by element, V = 1: eight elements), th ≤ 512 — the
// registers ptxas can give 512 threads without spilling; a row that needs
// more (d > 4096 for f32 or unaligned rows, > 8192 for 16-bit packs) takes
// the family's shared-memory kernel instead.
static constexpr int kNormThreads = 512; // most threads of a norm backward block
static constexpr int kNormSlots = 4;     // most row slots of a block

struct NormPlan {
	int p;     // packs per thread (0: the row does not fit in registers)
	int th;    // threads per slot
	int slots; // row slots per block
};

// The plan for rows of d elements in packs of v (v = 1: element by element).
static inline NormPlan norm_plan(int64_t d, int v) {
	const int64_t packs = ceil_div<int64_t>(d, v);
	NormPlan pl{0, 0, 0};
	pl.p = v == 1 ? 8 : packs <= 256 ? 1 : 2;
	const int64_t th = ceil_div<int64_t>(ceil_div<int64_t>(packs, pl.p), 32) * 32;
	if (th > kNormThreads) return NormPlan{0, 0, 0};
	pl.th = (int)th;
	pl.slots = kNormThreads / pl.th < kNormSlots ? kNormThreads / pl.th : kNormSlots;
	return pl;
}

// Shared memory flush_partial needs: the partials of slots 1… of a block.
static inline size_t norm_flush_smem(const NormPlan &pl, int v) {
	return (size_t)(pl.slots - 1) * pl.p * v * pl.th * sizeof(float);
}

// Sums v over the th threads of the caller's slot; every thread of the slot
// gets the sum, in the same fixed order. All threads of the block call it;
// scratch (32 floats of shared memory) must not be reused until the block
// has passed another barrier (callers alternate two).
__device__ __forceinline__ float slot_sum(float v, float *scratch, int th) {
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, wps = th / 32;
	const int first = (int)(threadIdx.x / th) * wps;
	v = warp_sum(v);
	if (lane == 0) scratch[warp] = v;
	__syncthreads();
	v = lane < wps ? scratch[first + lane] : 0.0f;
	return warp_sum(v);
}

// part[col] = Σ over the block's slots, in slot order, of acc[k][e] for the
// columns col = (t + k·th)·V + e < d of each thread. smem: norm_flush_smem
// bytes, laid out by (slot, k, e, t) so a warp touches 32 banks. All threads
// of the block call it; it ends with a barrier, so smem may be reused.
template <int V, int P>
__device__ __forceinline__ void flush_partial(float *__restrict__ part, const float (&acc)[P][V], float *smem, int th,
                                              int64_t d) {
	const int slot = threadIdx.x / th, t = threadIdx.x - slot * th, slots = blockDim.x / th;
	if (slot > 0)
		TW_UNROLL
		for (int k = 0; k < P; k++)
			for (int e = 0; e < V; e++) smem[(((slot - 1) * P + k) * V + e) * th + t] = acc[k][e];
	__syncthreads();
	if (slot == 0)
		TW_UNROLL
		for (int k = 0; k < P; k++) {
			const int64_t col = ((int64_t)t + (int64_t)k * th) * V;
			if (V != 8 && col >= d) continue; // runs of 8 are stored by whole warps (st_warp8)
			Pack<float, V> o;
			for (int e = 0; e < V; e++) {
				float s = acc[k][e];
				TW_UNROLL
				for (int q = 1; q < slots; q++) s += smem[(((q - 1) * P + k) * V + e) * th + t];
				o.v[e] = s;
			}
			if constexpr (V == 8) st_warp8(part + col - threadIdx.x % 32 * V, o, col < d);
			else st<V>(part + col, o);
		}
	__syncthreads();
}

// slot_sum for two values with one barrier; scratch: 32 float2.
__device__ __forceinline__ void slot_sum2(float &a, float &b, float2 *scratch, int th) {
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, wps = th / 32;
	const int first = (int)(threadIdx.x / th) * wps;
	a = warp_sum(a);
	b = warp_sum(b);
	if (lane == 0) scratch[warp] = make_float2(a, b);
	__syncthreads();
	const float2 v = lane < wps ? scratch[first + lane] : make_float2(0.0f, 0.0f);
	a = warp_sum(v.x);
	b = warp_sum(v.y);
}
