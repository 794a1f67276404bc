// swiglu.cu — the SwiGLU gate of the Llama MLP and its backward.
//
// Contract: engine.Backend.SwiGLU and SwiGLUBackward (engine/backend.go);
// the launchers' arguments are listed in kernels.h. What the kernels add to
// it: all tensors flat, of one float dtype dt; s = sigmoid(g) = 1/(1 + exp(−g))
// with the precise expf, silu'(g) = s·(1 + g·(1 − s)); arithmetic is f32 and
// silu(gate), out, dgate and dup are each rounded once to dt (nearest even;
// none for f32), so dup = round(dout · round(silu(gate))). n ≤ 0 launches
// nothing.
//
// Design: element-wise, grid-stride loops over 16-byte packs (8 bf16/f16 or 4
// f32) when every pointer is 16-byte aligned, then the n mod 8 (or 4)
// trailing elements one per thread; otherwise element by element. Each
// element is computed by one thread: deterministic.
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"

static constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

// out = round(silu(g))·u for the V elements of one pack.
template <class T, int V> __device__ __forceinline__ void swiglu_pack(T *out, const T *gate, const T *up) {
	float g[V], u[V];
	load_pack(g, gate);
	load_pack(u, up);
	for (int e = 0; e < V; e++) g[e] *= sigmoid(g[e]);
	round_to<T>(g);
	for (int e = 0; e < V; e++) g[e] *= u[e];
	store_pack(out, g);
}

template <class T, int V> __device__ __forceinline__ void swiglu_backward_pack(T *dgate, T *dup, const T *dout,
                                                                                const T *gate, const T *up) {
	float g[V], u[V], d[V], dg[V], silu[V];
	load_pack(g, gate);
	load_pack(u, up);
	load_pack(d, dout);
	for (int e = 0; e < V; e++) {
		const float s = sigmoid(g[e]);
		silu[e] = g[e] * s;
		dg[e] = d[e] * u[e] * (s * (1.0f + g[e] * (1.0f - s)));
	}
	round_to<T>(silu);
	for (int e = 0; e < V; e++) silu[e] *= d[e];
	store_pack(dgate, dg);
	store_pack(dup, silu);
}

// Packs [0, n/V) in a grid-stride loop, then the tail [n/V·V, n) one
// element per thread.
template <class T, int V>
__global__ void __launch_bounds__(kThreads)
	swiglu_kernel(T *__restrict__ out, const T *__restrict__ gate, const T *__restrict__ up, int64_t n) {
	const int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, nthreads = (int64_t)gridDim.x * blockDim.x;
	const int64_t packs = n / V;
	for (int64_t i = tid; i < packs; i += nthreads) swiglu_pack<T, V>(out + i * V, gate + i * V, up + i * V);
	for (int64_t i = packs * V + tid; i < n; i += nthreads) swiglu_pack<T, 1>(out + i, gate + i, up + i);
}

template <class T, int V>
__global__ void __launch_bounds__(kThreads)
	swiglu_backward_kernel(T *__restrict__ dgate, T *__restrict__ dup, const T *__restrict__ dout,
	                       const T *__restrict__ gate, const T *__restrict__ up, int64_t n) {
	const int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, nthreads = (int64_t)gridDim.x * blockDim.x;
	const int64_t packs = n / V;
	for (int64_t i = tid; i < packs; i += nthreads)
		swiglu_backward_pack<T, V>(dgate + i * V, dup + i * V, dout + i * V, gate + i * V, up + i * V);
	for (int64_t i = packs * V + tid; i < n; i += nthreads)
		swiglu_backward_pack<T, 1>(dgate + i, dup + i, dout + i, gate + i, up + i);
}

extern "C" cudaError_t tw_swiglu(void *out, const void *gate, const void *up, tw_dtype dt, int64_t n,
                                 cudaStream_t stream) {
	if (n <= 0) return cudaSuccess;
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		constexpr int V = pack_width<T>();
		if (pack_aligned<T, V>(out) && pack_aligned<T, V>(gate) && pack_aligned<T, V>(up))
			LAUNCH(grid_for(ceil_div<int64_t>(n, V), kThreads), kThreads, 0, stream, swiglu_kernel<T, V>)(
				(T *)out, (const T *)gate, (const T *)up, n);
		else
			LAUNCH(grid_for(n, kThreads), kThreads, 0, stream, swiglu_kernel<T, 1>)(
				(T *)out, (const T *)gate, (const T *)up, n);
		return cudaGetLastError();
	});
}

extern "C" cudaError_t tw_swiglu_backward(void *dgate, void *dup, const void *dout, const void *gate, const void *up,
                                          tw_dtype dt, int64_t n, cudaStream_t stream) {
	if (n <= 0) return cudaSuccess;
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		constexpr int V = pack_width<T>();
		if (pack_aligned<T, V>(dgate) && pack_aligned<T, V>(dup) && pack_aligned<T, V>(dout) &&
		    pack_aligned<T, V>(gate) && pack_aligned<T, V>(up))
			LAUNCH(grid_for(ceil_div<int64_t>(n, V), kThreads), kThreads, 0, stream,
			       swiglu_backward_kernel<T, V>)((T *)dgate, (T *)dup, (const T *)dout, (const T *)gate,
			                                     (const T *)up, n);
		else
			LAUNCH(grid_for(n, kThreads), kThreads, 0, stream, swiglu_backward_kernel<T, 1>)(
				(T *)dgate, (T *)dup, (const T *)dout, (const T *)gate, (const T *)up, n);
		return cudaGetLastError();
	});
}
