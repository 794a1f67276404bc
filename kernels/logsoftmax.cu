// logsoftmax.cu — per-row log-sum-exp with the target's log-probability, and
// its backward: the loss head over vocabulary-wide logits (V up to 128256).
//
// Contract: engine.Backend.LogSoftmaxGather and LogSoftmaxGatherBackward
// (engine/backend.go); the launchers' arguments are listed in kernels.h.
// What the kernels add to it: logits of any float dtype; the gradient is
// rounded once to it. As the CPU backend: a NaN in the row gives lse NaN; an
// infinite maximum m gives lse = m. A target ≥ v (outside the contract)
// gives logp NaN rather than a stray read. The backward may run in place
// because each element is read, then written, by one thread. n ≤ 0 or v ≤ 0
// launches nothing.
//
// Design: one block per row (up to 512 threads), 16-byte packs when v and the
// pointers allow. The forward reads the row once, with an online
// log-sum-exp: each thread keeps (m, s), its running maximum and
// s = Σ exp(x − m) in f32, rescaling s once per pack whose maximum exceeds m;
// then the (m, s) pairs are merged across the warp by shuffles and across
// warps through shared memory (a fixed tree: deterministic). exp and log are
// the precise expf and logf. With ~31 terms per thread and tree merging, the
// f32 sum is within a few ulp of the CPU's f64 one. The backward is
// element-wise over the row.
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"

static constexpr int kThreads = 512; // most threads per row

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

template <class T, int V>
__global__ void __launch_bounds__(kThreads)
	logsoftmax_gather_kernel(float *__restrict__ logp, float *__restrict__ lse, const T *__restrict__ logits,
	                         const int32_t *__restrict__ targets, int64_t v) {
	__shared__ float wm[32], ws[32]; // each warp's (m, s)
	const int64_t row = blockIdx.x;
	const T *x = logits + row * v; // [v]
	float m = -INFINITY, s = 0.0f;
	int nan = 0;
	for (int64_t j = (int64_t)threadIdx.x * V; j < v; j += (int64_t)blockDim.x * V) {
		float f[V];
		load_pack(f, x + j);
		float pm = f[0];
		for (int e = 0; e < V; e++) {
			pm = fmaxf(pm, f[e]);
			nan |= f[e] != f[e];
		}
		if (pm > m) {
			s = m == -INFINITY ? 0.0f : s * expf(m - pm);
			m = pm;
		}
		if (m != -INFINITY)
			for (int e = 0; e < V; e++) s += expf(f[e] - m);
	}
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

// No __restrict__ on dlogits and logits: they may alias.
template <class T, int V>
__global__ void __launch_bounds__(kThreads)
	logsoftmax_gather_backward_kernel(T *dlogits, const float *__restrict__ dlogp, const T *logits,
	                                  const float *__restrict__ lse, const int32_t *__restrict__ targets,
	                                  int64_t v) {
	const int64_t row = blockIdx.x;
	const T *x = logits + row * v; // [v]
	T *dx = dlogits + row * v;     // [v]
	const int32_t t = targets[row];
	const float g = t < 0 ? 0.0f : dlogp[row], l = lse[row];
	for (int64_t j = (int64_t)threadIdx.x * V; j < v; j += (int64_t)blockDim.x * V) {
		float f[V];
		if (t < 0) {
			for (int e = 0; e < V; e++) f[e] = 0.0f;
		} else {
			load_pack(f, x + j);
			for (int e = 0; e < V; e++) {
				f[e] = -g * expf(f[e] - l);
				if (j + e == t) f[e] += g;
			}
		}
		store_pack(dx + j, f);
	}
}

extern "C" cudaError_t tw_logsoftmax_gather(float *logp, float *lse, const void *logits, tw_dtype dt,
                                            const int32_t *targets, int64_t n, int64_t v, cudaStream_t stream) {
	if (n <= 0 || v <= 0) return cudaSuccess;
	if (n > INT32_MAX) return cudaErrorInvalidValue;
	return dispatch_float(dt, [&](auto *p) {
		using T = elem_t<decltype(p)>;
		constexpr int V = pack_width<T>();
		if (v % V == 0 && pack_aligned<T, V>(logits))
			LAUNCH((unsigned)n, row_threads(v / V, kThreads), 0, stream, logsoftmax_gather_kernel<T, V>)(
				logp, lse, (const T *)logits, targets, v);
		else
			LAUNCH((unsigned)n, row_threads(v, kThreads), 0, stream, logsoftmax_gather_kernel<T, 1>)(
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
		if (v % V == 0 && pack_aligned<T, V>(logits) && pack_aligned<T, V>(dlogits))
			LAUNCH((unsigned)n, row_threads(v / V, kThreads), 0, stream, logsoftmax_gather_backward_kernel<T, V>)(
				(T *)dlogits, dlogp, (const T *)logits, lse, targets, v);
		else
			LAUNCH((unsigned)n, row_threads(v, kThreads), 0, stream, logsoftmax_gather_backward_kernel<T, 1>)(
				(T *)dlogits, dlogp, (const T *)logits, lse, targets, v);
		return cudaGetLastError();
	});
}
