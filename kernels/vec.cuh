// vec.cuh — what the memory-bound kernels share: grids sized to fill the
// device, a flat element-wise loop over 16-byte packs with a misaligned head
// and a scalar tail, and the head/body/tail split of a run at any offset.
// Include after common.cuh and pack.cuh.
//
// fill_grid(work, per_block,
// per_sm) is the grid of a grid-stride loop: enough blocks for the work, at
// most per_sm resident blocks on every SM (one wave; more blocks would only
// add scheduling). A grid so sized may depend on the device; the kernels that
// use it compute every element in one thread, so their results do not. The
// column reductions, whose sums must not depend on the device, size their
// grids from the shape alone (colsum.cuh).
//
// flat_kernel<V, U, Op> runs an element-wise op over [0, n): the `head`
// elements before the first 16-byte boundary one per thread, then packs of V
// elements (one 16-byte access per array of 16-bit or f32 elements, two for
// f32 beside a 16-bit array), each thread taking U packs per iteration whose
// loads are all issued before the first store (U independent loads in flight
// per array), strided by the grid's thread count so each access of a warp is
// coalesced; then the packs left over one at a time, then the n − head mod V
// trailing elements one per thread. Every element is computed by one thread:
// deterministic, and out may alias an input (loads precede stores within a
// thread, and no two threads touch one element).
//
// An Op is a struct of pointers and scalars, passed by value, with
//   template <int N> struct Regs;    what a thread holds for N consecutive elements
//   template <int N> __device__ void load(Regs<N> &, int64_t i) const;   reads [i, i+N)
//   template <int N> __device__ void store(const Regs<N> &, int64_t i) const;  computes, writes [i, i+N)
// launch_flat picks V and the head on the host: the head that aligns the
// first pointer, if every pointer of the op (flat_aligned) is then 16-byte
// aligned (V = 16 / the narrowest element size); otherwise V = 1 and U = 1,
// every element scalar (pointers whose misalignments differ cannot share
// packs; a fallback, kept small: unrolled, the f32 SwiGLU backward's
// division slow paths made ptxas spill).
#pragma once

#include <stdint.h>

#include "common.cuh"
#include "pack.cuh"

// Blocks for a grid-stride loop over `work` items, per_block items a block
// takes per iteration: ceil(work / per_block), at least 1 and at most per_sm
// blocks on every SM of the current device.
inline unsigned fill_grid(int64_t work, int64_t per_block, int per_sm) {
	const int64_t g = ceil_div<int64_t>(work, per_block), cap = (int64_t)sm_count() * per_sm;
	return (unsigned)(g < 1 ? 1 : g > cap ? cap : g);
}

static constexpr int kFlatThreads = 256;    // threads of a flat_kernel block
static constexpr int kFlatBlocksPerSM = 8;  // 2048 resident threads per SM (sm_80, sm_90)

template <int V, int U, class Op>
__global__ void __launch_bounds__(kFlatThreads) flat_kernel(const Op op, int64_t head, int64_t n) {
	const int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, nth = (int64_t)gridDim.x * blockDim.x;
	if (V > 1 && tid < head) {
		typename Op::template Regs<1> r;
		op.load(r, tid);
		op.store(r, tid);
	}
	const int64_t packs = (n - head) / V;
	int64_t p = tid;
	for (; p + (U - 1) * nth < packs; p += U * nth) {
		typename Op::template Regs<V> r[U];
		TW_UNROLL
		for (int u = 0; u < U; u++) op.load(r[u], head + (p + u * nth) * V);
		TW_UNROLL
		for (int u = 0; u < U; u++) op.store(r[u], head + (p + u * nth) * V);
	}
	for (; p < packs; p += nth) {
		typename Op::template Regs<V> r;
		op.load(r, head + p * V);
		op.store(r, head + p * V);
	}
	if (V > 1)
		for (int64_t i = head + packs * V + tid; i < n; i += nth) {
			typename Op::template Regs<1> r;
			op.load(r, i);
			op.store(r, i);
		}
}

// Whether p + head elements of T lies on a 16-byte boundary.
template <class T> __host__ __forceinline__ bool aligned16(const void *p, int64_t head) {
	return ((uintptr_t)p + (uintptr_t)head * sizeof(T)) % 16 == 0;
}

// Elements of T before p's first 16-byte boundary (p element-aligned).
template <class T> __host__ __forceinline__ int64_t head16(const void *p) {
	return (int64_t)((16 - (uintptr_t)p % 16) % 16 / sizeof(T));
}

// Launches flat_kernel for op over n > 0 elements. V: elements per pack (16
// bytes of the narrowest array); T0: the element type of p0, the pointer the
// head aligns; ok(head): whether every other pointer is 16-byte aligned
// head elements in. U: packs per thread per iteration.
template <int V, int U, class T0, class Op, class Ok>
static cudaError_t launch_flat(const Op &op, int64_t n, const void *p0, Ok ok, cudaStream_t stream) {
	int64_t head = head16<T0>(p0);
	if ((uintptr_t)p0 % sizeof(T0) == 0 && head < n && aligned16<T0>(p0, head) && ok(head)) {
		LAUNCH(fill_grid((n - head) / V, (int64_t)kFlatThreads * U, kFlatBlocksPerSM), kFlatThreads, 0, stream,
		       flat_kernel<V, U, Op>)(op, head, n);
	} else {
		LAUNCH(fill_grid(n, kFlatThreads, kFlatBlocksPerSM), kFlatThreads, 0, stream, flat_kernel<1, 1, Op>)(op, 0, n);
	}
	return cudaGetLastError();
}

// Loads and stores of N elements: one Pack<T, N> access (16 bytes for
// N = 16 / sizeof(T); two for f32 beside a 16-bit type), p aligned to it;
// N = 1 is a plain access of one T (any element-aligned p).
template <int N, class T> __device__ __forceinline__ Pack<T, N> ld(const T *p TW_SITE_MORE) {
#if !defined(__CUDACC__)
	tw_emu::count_access("ld.global", "ld.shared", p, N * (int)sizeof(T), TW_AT);
#endif
	if constexpr (N == 1) {
		Pack<T, 1> r;
		r.v[0] = *p;
		return r;
	} else {
		return *reinterpret_cast<const Pack<T, N> *>(p);
	}
}
template <int N, class T> __device__ __forceinline__ void st(T *p, const Pack<T, N> &v TW_SITE_MORE) {
	if constexpr (N == 1) {
#if !defined(__CUDACC__)
		tw_emu::count_access("st.global", "st.shared", p, (int)sizeof(T), TW_AT);
#endif
		*p = v.v[0];
	} else {
		put_pack(p, v TW_AT_MORE);
	}
}

// Stores a warp's runs of 8 floats, lane l's o at base + 8·l (base 16-byte
// aligned), as two stores in which the warp writes 512 contiguous bytes
// each, the lanes handing each other halves by shuffles: stored whole, a
// lane's 32 bytes are two 16-byte stores, each writing half of every
// 32-byte sector the warp touches. Only the runs of lanes with live set are
// written. All 32 lanes of the warp call it, converged.
__device__ __forceinline__ void st_warp8(float *base, const Pack<float, 8> &o, bool live TW_SITE_MORE) {
	const int lane = (int)((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32);
	TW_UNROLL
	for (int h = 0; h < 2; h++) {
		const int src = 16 * h + lane / 2; // the lane whose run holds this lane's 4 floats, in its half lane % 2
		Pack<float, 4> q;
		TW_UNROLL
		for (int e = 0; e < 4; e++) {
			const float lo = __shfl_sync(0xffffffffu, o.v[e], src), hi = __shfl_sync(0xffffffffu, o.v[4 + e], src);
			q.v[e] = lane % 2 ? hi : lo;
		}
		if (__shfl_sync(0xffffffffu, (int)live, src)) st<4>(base + 128 * h + 4 * lane, q TW_AT_MORE);
	}
}

// ---- Runs at any offset (embedding, logsoftmax, sample, sumsquares) ----
//
// A run that starts at any element offset is read as a misaligned head, a
// body of 16-byte packs and a tail:
// A run x[0, len) of T splits as
//   head: x[0, h), h < V elements up to the first 16-byte boundary (0 when
//         x is aligned), read element by element;
//   body: (len − h) / V packs of V = 16/sizeof(T) elements from x + h, each
//         one aligned 16-byte access (Pack<T, V>);
//   tail: the last (len − h) % V elements, read element by element.
// Every T is at least sizeof(T)-aligned (the engine's tensors are), so h is
// an integer count of elements.

// Elements before the first 16-byte boundary at or after p, at most len.
template <class T> __host__ __device__ __forceinline__ int64_t vec_head(const T *p, int64_t len) {
	const int64_t h = (int64_t)((16 - (uintptr_t)p % 16) % 16) / (int64_t)sizeof(T);
	return h < len ? h : len;
}
