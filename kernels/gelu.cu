// gelu.cu — the GELUs (erf, tanh approximation, quick) and their backward.
//
// Contract: engine.Backend.GELU and GELUBackward (engine/backend.go); the
// launchers' arguments are listed in kernels.h. What the kernels add to it:
// all tensors flat, of one float dtype dt; kind is engine.GELUKind's value
// (0 erf, 1 tanh, 2 quick; any other: cudaErrorInvalidValue). Arithmetic is
// f32 with the precise erff, tanhf and expf; out and dx are rounded once to
// dt (nearest even; none for f32), and quick's intermediates as the contract
// says: out = round(x·round(σ(round(1.702·x)))). n ≤ 0 launches nothing.
//
// Design: element-wise, grid-stride loops over 16-byte packs (8 bf16/f16 or 4
// f32) when every pointer is 16-byte aligned, then the n mod 8 (or 4)
// trailing elements one per thread; otherwise element by element. The kind
// is a template argument. Each element is computed by one thread:
// deterministic.
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"

static constexpr int kThreads = 256;

// The kinds, numbered as engine.GELUKind.
enum { kErf = 0, kTanh = 1, kQuick = 2 };

static constexpr float kQuickAlpha = 1.702f;          // quick_gelu's slope
static constexpr float kSqrt2OverPi = 0.7978845608f;  // √(2/π)
static constexpr float kTanhCubic = 0.044715f;        // the tanh approximation's cubic term
static constexpr float kInvSqrt2 = 0.70710678118f;    // 1/√2
static constexpr float kInvSqrt2Pi = 0.39894228040f;  // 1/√(2π)

__device__ __forceinline__ float sigmoidf(float v) { return 1.0f / (1.0f + expf(-v)); }

// gelu_k(x) for one value; T is the storage type quick rounds to.
template <class T, int K> __device__ __forceinline__ float gelu(float v) {
	if (K == kErf) return 0.5f * v * (1.0f + erff(v * kInvSqrt2));
	if (K == kTanh) return 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kTanhCubic * v * v * v)));
	const float t = to_float(from_float<T>(kQuickAlpha * v));
	return v * to_float(from_float<T>(sigmoidf(t)));
}

// gelu_k'(x) for one value (quick: of the exact x·σ(1.702·x)).
template <int K> __device__ __forceinline__ float gelu_grad(float v) {
	if (K == kErf) return 0.5f * (1.0f + erff(v * kInvSqrt2)) + v * kInvSqrt2Pi * expf(-0.5f * v * v);
	if (K == kTanh) {
		const float t = tanhf(kSqrt2OverPi * (v + kTanhCubic * v * v * v));
		return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kTanhCubic * v * v);
	}
	const float s = sigmoidf(kQuickAlpha * v);
	return s + kQuickAlpha * v * s * (1.0f - s);
}

template <class T, int K, int V> __device__ __forceinline__ void gelu_pack(T *out, const T *x) {
	float f[V];
	load_pack(f, x);
	for (int e = 0; e < V; e++) f[e] = gelu<T, K>(f[e]);
	store_pack(out, f);
}

template <class T, int K, int V> __device__ __forceinline__ void gelu_backward_pack(T *dx, const T *dout, const T *x) {
	float f[V], g[V];
	load_pack(f, x);
	load_pack(g, dout);
	for (int e = 0; e < V; e++) f[e] = g[e] * gelu_grad<K>(f[e]);
	store_pack(dx, f);
}

// Packs [0, n/V) in a grid-stride loop, then the tail [n/V·V, n) one
// element per thread.
template <class T, int K, int V>
__global__ void __launch_bounds__(kThreads) gelu_kernel(T *__restrict__ out, const T *__restrict__ x, int64_t n) {
	const int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, nthreads = (int64_t)gridDim.x * blockDim.x;
	const int64_t packs = n / V;
	for (int64_t i = tid; i < packs; i += nthreads) gelu_pack<T, K, V>(out + i * V, x + i * V);
	for (int64_t i = packs * V + tid; i < n; i += nthreads) gelu_pack<T, K, 1>(out + i, x + i);
}

template <class T, int K, int V>
__global__ void __launch_bounds__(kThreads)
	gelu_backward_kernel(T *__restrict__ dx, const T *__restrict__ dout, const T *__restrict__ x, int64_t n) {
	const int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, nthreads = (int64_t)gridDim.x * blockDim.x;
	const int64_t packs = n / V;
	for (int64_t i = tid; i < packs; i += nthreads) gelu_backward_pack<T, K, V>(dx + i * V, dout + i * V, x + i * V);
	for (int64_t i = packs * V + tid; i < n; i += nthreads) gelu_backward_pack<T, K, 1>(dx + i, dout + i, x + i);
}

// Calls f with the kind as an integral constant.
template <class F> static cudaError_t dispatch_kind(int kind, F f) {
	switch (kind) {
	case kErf: return f(std::integral_constant<int, kErf>());
	case kTanh: return f(std::integral_constant<int, kTanh>());
	case kQuick: return f(std::integral_constant<int, kQuick>());
	default: return cudaErrorInvalidValue;
	}
}

extern "C" cudaError_t tw_gelu(void *out, const void *x, tw_dtype dt, int64_t n, int kind, cudaStream_t stream) {
	if (kind < kErf || kind > kQuick) return cudaErrorInvalidValue;
	if (n <= 0) return cudaSuccess;
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		return dispatch_kind(kind, [&](auto k) {
			constexpr int K = decltype(k)::value, V = pack_width<T>();
			if (pack_aligned<T, V>(out) && pack_aligned<T, V>(x))
				LAUNCH(grid_for(ceil_div<int64_t>(n, V), kThreads), kThreads, 0, stream, gelu_kernel<T, K, V>)(
					(T *)out, (const T *)x, n);
			else
				LAUNCH(grid_for(n, kThreads), kThreads, 0, stream, gelu_kernel<T, K, 1>)((T *)out, (const T *)x, n);
			return cudaGetLastError();
		});
	});
}

extern "C" cudaError_t tw_gelu_backward(void *dx, const void *dout, const void *x, tw_dtype dt, int64_t n, int kind,
                                        cudaStream_t stream) {
	if (kind < kErf || kind > kQuick) return cudaErrorInvalidValue;
	if (n <= 0) return cudaSuccess;
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		return dispatch_kind(kind, [&](auto k) {
			constexpr int K = decltype(k)::value, V = pack_width<T>();
			if (pack_aligned<T, V>(dx) && pack_aligned<T, V>(dout) && pack_aligned<T, V>(x))
				LAUNCH(grid_for(ceil_div<int64_t>(n, V), kThreads), kThreads, 0, stream,
				       gelu_backward_kernel<T, K, V>)((T *)dx, (const T *)dout, (const T *)x, n);
			else
				LAUNCH(grid_for(n, kThreads), kThreads, 0, stream, gelu_backward_kernel<T, K, 1>)(
					(T *)dx, (const T *)dout, (const T *)x, n);
			return cudaGetLastError();
		});
	});
}
