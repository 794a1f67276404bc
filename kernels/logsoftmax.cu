// logsoftmax.cu — per-row log-sum-exp with the target's log-probability, and
// its backward: the loss head over vocabulary-wide logits (V up to 128256).
//
// Contract: engine.Backend.LogSoftmaxGather and LogSoftmaxGatherBackward
// (engine/backend.go); the launchers' arguments are listed in kernels.h.
// What the kernels add to it: logits of any float dtype, at any element
// offset; the gradient is rounded once to it. As the CPU backend: a NaN in
// the row gives lse NaN; an infinite maximum m gives lse = m. A target ≥ v
// (outside the contract) gives logp NaN rather than a stray read. The
// backward may run in place because each element is read, then written, by
// one thread. n ≤ 0 or v ≤ 0 launches nothing.
//
// Design: one block per row (up to kThreads threads). A row is read as a
// misaligned head, a body of 16-byte packs and a tail (vec.cuh), so every
// row is read with vector loads whatever v and the offset; the backward
// takes that path when logits and dlogits sit at the same offset from the
// 16-byte grid, else element by element.
//
// Forward: each thread loads kUnroll packs (kUnroll·16 bytes) before it uses
// any, so several loads are in flight while the exponentials of the previous
// group are computed. Per group of kUnroll packs it keeps an online
// log-sum-exp: (m, s), its running maximum and s = Σ exp(x − m) in f32,
// rescaled once per group whose maximum exceeds m. A term is
// fast_exp2((x − m)·log2 e) (common.cuh): one multiply and the SFU's ex2
// (2 ulp) rather than expf's longer sequence or exp2f's range check; the
// group's maximum is PTX max.NaN, which is also the row's NaN test; a
// thread's whole groups load without bounds tests (lse_group). The kernel
// must issue about 9 elements per SM and cycle to keep up with the copy
// bandwidth (bf16), and it is bound by issue when an element costs more
// than about 12 instructions: in the sm_90 code the loop took ~500
// instructions per group of 32 bf16 elements (53% of the copy bandwidth on
// an H200, 2026-11-27, commit 9b1ace1, at 2k and 8k tokens alike), now ~240 (with
// load_pack's bf16 widening by one shift or mask). The threads' (m, s) pairs are
// merged across the warp by shuffles and across warps through shared memory
// (a fixed tree: deterministic), with the precise expf. With ~30 terms per
// thread and tree merging, the f32 sum is within a few ulp of the CPU's f64
// one.
//
// Backward: element-wise over the row, kUnroll packs loaded before any is
// stored; dlogits = −g·2^((x − lse)·log2 e), plus g at the target: per
// element a widening, x − lse, two products and the SFU's ex2 (the target
// found once per thread, not tested per element): in the sm_90 code the
// loop takes 367 instructions per 32 bf16 elements, where it took 631
// (commit 4f938ec), most of them exp2f's range checks and the 64-bit test
// j = t. The kernel measured 73% of the copy bandwidth at 2k and 8k tokens
// on an H200 (2026-11-27, commit 9b1ace1).
//
// Speed on a GPU is unmeasured since this design.
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"
#include "vec.cuh"

static constexpr int kThreads = 512; // most threads per row
static constexpr int kUnroll = 4;    // packs a thread loads before it uses them
static constexpr float kLog2e = 1.4426950408889634f;

// Merges (m2, s2) into (m, s): the pair of the union of both sets of terms.
// A maximum of −inf means no finite term yet (s = 0): its rescale factor is
// taken as 0, not exp(−inf − −inf).
__device__ __forceinline__ void lse_merge(float &m, float &s, float m2, float s2) {
	const float mm = fmaxf(m, m2);
	const float a = m == -INFINITY ? 0.0f : s * expf(m - mm);
	const float b = m2 == -INFINITY ? 0.0f : s2 * expf(m2 - mm);
	m = mm;
	s = a + b;
}

// One term of the online log-sum-exp of a thread: x joins (m, s).
__device__ __forceinline__ void lse_add(float &m, float &s, int &nan, float x) {
	nan |= x != x;
	if (x > m) {
		s = m == -INFINITY ? 0.0f : s * expf(m - x);
		m = x;
	}
	if (m != -INFINITY) s += exp2f((x - m) * kLog2e);
}

// One group of the body: the packs q0, q0 + stride, … (kUnroll of them; with
// Full false those past np are −∞, which add nothing) join (m, s): their
// maximum first (one rescale per group), then their terms in order. Per
// element that is a widening, a NaN-propagating max (the row's NaN test
// too), x − m, a product and the SFU's ex2 (fast_exp2: s ≥ 1 once a group
// is in, so the terms it flushes below 2^-126 would not change s), an add:
// the loop must issue ~9 elements per SM and cycle at the copy bandwidth.
template <bool Full, int V, class T>
__device__ __forceinline__ void lse_group(float &m, float &s, int &nan, const T *__restrict__ body, int64_t q0,
                                          int64_t stride, int64_t np) {
	float f[kUnroll][V];
	TW_UNROLL
	for (int u = 0; u < kUnroll; u++) {
		const int64_t q = q0 + u * stride;
		if (Full || q < np) load_pack(f[u], body + q * V);
		else
			for (int e = 0; e < V; e++) f[u][e] = -INFINITY;
	}
	float gm = -INFINITY;
	TW_UNROLL
	for (int u = 0; u < kUnroll; u++)
		for (int e = 0; e < V; e++) gm = fmax_nan(gm, f[u][e]);
	nan |= gm != gm; // a NaN group leaves m alone: the row's result is NaN anyway
	if (gm > m) {
		s = m == -INFINITY ? 0.0f : s * expf(m - gm);
		m = gm;
	}
	if (m != -INFINITY) {
		TW_UNROLL
		for (int u = 0; u < kUnroll; u++)
			for (int e = 0; e < V; e++) s += fast_exp2((f[u][e] - m) * kLog2e);
	}
}

template <class T, int V>
__global__ void __launch_bounds__(kThreads)
	logsoftmax_gather_kernel(float *__restrict__ logp, float *__restrict__ lse, const T *__restrict__ logits,
	                         const int32_t *__restrict__ targets, int64_t v) {
	__shared__ float wm[32], ws[32]; // each warp's (m, s)
	const int64_t row = blockIdx.x;
	const T *x = logits + row * v; // [v]
	const int64_t h = V > 1 ? vec_head(x, v) : v, np = (v - h) / V, tail = v - h - np * V;
	const T *body = x + h; // [np·V], 16-byte aligned
	float m = -INFINITY, s = 0.0f;
	int nan = 0;
	// The head and the tail (fewer than V elements each): one element a thread.
	if (V == 1) {
		for (int64_t j = threadIdx.x; j < v; j += blockDim.x) lse_add(m, s, nan, to_float(x[j]));
	} else if (threadIdx.x < h + tail) {
		const int64_t j = threadIdx.x < h ? threadIdx.x : v - tail + (threadIdx.x - h);
		lse_add(m, s, nan, to_float(x[j]));
	}
	// The body: groups of kUnroll packs in flight, then their terms; every
	// group but a thread's last is whole and loads without bounds tests.
	const int64_t stride = blockDim.x;
	int64_t q0 = threadIdx.x;
	for (; q0 + (kUnroll - 1) * stride < np; q0 += kUnroll * stride) lse_group<true, V>(m, s, nan, body, q0, stride, np);
	if (q0 < np) lse_group<false, V>(m, s, nan, body, q0, stride, np);
	nan = __syncthreads_or(nan);

	for (int o = 16; o > 0; o >>= 1) {
		const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
		lse_merge(m, s, m2, s2);
	}
	const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
	if (lane == 0) wm[warp] = m, ws[warp] = s;
	__syncthreads();
	if (warp == 0) {
		m = lane < nwarps ? wm[lane] : -INFINITY;
		s = lane < nwarps ? ws[lane] : 0.0f;
		for (int o = 16; o > 0; o >>= 1) {
			const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
			lse_merge(m, s, m2, s2);
		}
		if (lane == 0) {
			const float l = nan ? NAN : isinf(m) ? m : m + logf(s);
			const int32_t t = targets[row];
			lse[row] = l;
			logp[row] = t < 0 ? 0.0f : t < v ? to_float(x[t]) - l : NAN;
		}
	}
}

// The gradient of one element j of a row with target t: ng·p, plus g at t,
// where ng = −g and p = 2^((x − l)·log2 e) by the SFU's ex2 (fast_exp2, as
// the forward: a p below 2^-126 it flushes to 0, an error under 2^-126·|g|).
// x − l first, not one FMA with l·log2 e rounded: p is then exactly 1 where
// x = l.
__device__ __forceinline__ float lsg_term(float x, float ng, float l) { return ng * fast_exp2((x - l) * kLog2e); }
__device__ __forceinline__ float lsg_grad(float x, int64_t j, int32_t t, float g, float l) {
	const float d = lsg_term(x, -g, l);
	return j == t ? d + g : d;
}

// No __restrict__ on dlogits and logits: they may alias. A row whose target
// is ignored (t < 0) gets zeros without reading its logits.
template <class T, int V>
__global__ void __launch_bounds__(kThreads)
	logsoftmax_gather_backward_kernel(T *dlogits, const float *__restrict__ dlogp, const T *logits,
	                                  const float *__restrict__ lse, const int32_t *__restrict__ targets,
	                                  int64_t v) {
	const int64_t row = blockIdx.x;
	const T *x = logits + row * v; // [v]
	T *dx = dlogits + row * v;     // [v], at the same offset from the 16-byte grid as x
	const int32_t t = targets[row];
	const float g = t < 0 ? 0.0f : dlogp[row], ng = -g, l = lse[row];
	const int64_t h = V > 1 ? vec_head(x, v) : v, np = (v - h) / V, tail = v - h - np * V;
	if (V == 1) {
		for (int64_t j = threadIdx.x; j < v; j += blockDim.x)
			dx[j] = from_float<T>(t < 0 ? 0.0f : lsg_grad(to_float(x[j]), j, t, g, l));
	} else if (threadIdx.x < h + tail) {
		const int64_t j = threadIdx.x < h ? threadIdx.x : v - tail + (threadIdx.x - h);
		dx[j] = from_float<T>(t < 0 ? 0.0f : lsg_grad(to_float(x[j]), j, t, g, l));
	}
	// The target's element in the body is stored with the rest of its pack,
	// then again with g added by the same thread: its x is read before any
	// store (dlogits may alias logits), and no element is tested for j = t.
	const int64_t tq = t >= h && t - h < np * V ? (t - h) / V : -1; // the target's pack (−1: none)
	const bool owner = tq >= 0 && tq % blockDim.x == threadIdx.x;
	const float xt = owner ? to_float(x[t]) : 0.0f;
	for (int64_t q0 = threadIdx.x; q0 < np; q0 += (int64_t)blockDim.x * kUnroll) {
		float f[kUnroll][V];
		TW_UNROLL
		for (int u = 0; u < kUnroll; u++) {
			const int64_t q = q0 + (int64_t)u * blockDim.x;
			if (t >= 0 && q < np) load_pack(f[u], x + h + q * V);
			else
				for (int e = 0; e < V; e++) f[u][e] = 0.0f;
		}
		TW_UNROLL
		for (int u = 0; u < kUnroll; u++) {
			const int64_t q = q0 + (int64_t)u * blockDim.x;
			if (q >= np) continue;
			float o[V];
			for (int e = 0; e < V; e++) o[e] = t < 0 ? 0.0f : lsg_term(f[u][e], ng, l);
			store_pack(dx + h + q * V, o);
		}
	}
	if (owner) dx[t] = from_float<T>(lsg_grad(xt, t, t, g, l));
}

// Threads for a row of v elements: enough for kUnroll packs each, at most
// kThreads.
template <int V> static int threads_for(int64_t v) { return row_threads(ceil_div<int64_t>(v, (int64_t)V * kUnroll), kThreads); }

extern "C" cudaError_t tw_logsoftmax_gather(float *logp, float *lse, const void *logits, tw_dtype dt,
                                            const int32_t *targets, int64_t n, int64_t v, cudaStream_t stream) {
	if (n <= 0 || v <= 0) return cudaSuccess;
	if (n > INT32_MAX) return cudaErrorInvalidValue;
	return dispatch_float(dt, [&](auto *p) {
		using T = elem_t<decltype(p)>;
		constexpr int V = pack_width<T>();
		LAUNCH((unsigned)n, threads_for<V>(v), 0, stream, logsoftmax_gather_kernel<T, V>)(
			logp, lse, (const T *)logits, targets, v);
		return cudaGetLastError();
	});
}

extern "C" cudaError_t tw_logsoftmax_gather_backward(void *dlogits, const float *dlogp, const void *logits,
                                                     const float *lse, const int32_t *targets, tw_dtype dt, int64_t n,
                                                     int64_t v, cudaStream_t stream) {
	if (n <= 0 || v <= 0) return cudaSuccess;
	if (n > INT32_MAX) return cudaErrorInvalidValue;
	return dispatch_float(dt, [&](auto *p) {
		using T = elem_t<decltype(p)>;
		constexpr int V = pack_width<T>();
		// Vector accesses need both rows at the same offset from the 16-byte grid.
		if ((uintptr_t)dlogits % 16 == (uintptr_t)logits % 16)
			LAUNCH((unsigned)n, threads_for<V>(v), 0, stream, logsoftmax_gather_backward_kernel<T, V>)(
				(T *)dlogits, dlogp, (const T *)logits, lse, targets, v);
		else
			LAUNCH((unsigned)n, threads_for<1>(v), 0, stream, logsoftmax_gather_backward_kernel<T, 1>)(
				(T *)dlogits, dlogp, (const T *)logits, lse, targets, v);
		return cudaGetLastError();
	});
}
