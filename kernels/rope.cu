// rope.cu — rotary position embedding, rotate-half layout, in place.
//
// Contract: engine.Backend.RoPE and RoPEBackward (engine/backend.go); one
// launcher, tw_rope in kernels.h, whose sign argument is +1 for the forward
// and −1 for the backward's inverse rotation (sin a negated). What the
// kernel adds to it: x of any float dtype, each rotated pair rounded once to
// it. dh must be even and at most 12288 (else cudaErrorInvalidValue: the
// angles' table lives in shared memory). n, h or dh ≤ 0 launches nothing.
//
// Design: one block per token. Its threads first compute the token's dh/2
// cos/sin pairs with the precise sincosf (angles reach 1e5 rad, far outside
// the range where the fast __sincosf is accurate) into shared memory, once
// for all heads; after a barrier they rotate the h·dh/2 pairs, a pack of
// consecutive j at a time (16-byte loads of x1 and of x2 when dh/2 and x's
// alignment allow). (Issuing a thread's first loads before the angles, to
// overlap them with sincosf, measured 1.23-1.28x slower on an H200 at
// Llama-3.1-8B's shapes, 2026-11-27, and was taken back.) Each element is
// read and written by one thread:
// deterministic, and in place is safe.
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"

static constexpr int kThreads = 256; // most threads per token

template <class T, int V>
__global__ void __launch_bounds__(kThreads)
	rope_kernel(T *__restrict__ x, const int32_t *__restrict__ pos, const float *__restrict__ inv_freq, int h,
	            int half, float sign) {
	extern __shared__ unsigned char smem[];
	float *cs = reinterpret_cast<float *>(smem); // [half] cos of this token's angles
	float *sn = cs + half;                       // [half] sign·sin
	const float p = (float)pos[blockIdx.x];
	for (int j = threadIdx.x; j < half; j += blockDim.x) {
		float s, c;
		sincosf(p * inv_freq[j], &s, &c);
		cs[j] = c;
		sn[j] = sign * s;
	}
	__syncthreads();

	T *xt = x + (int64_t)blockIdx.x * h * 2 * half; // [h, dh] this token's heads
	const int packs = half / V;                      // per head
	for (int u = threadIdx.x; u < h * packs; u += blockDim.x) {
		const int hd = u / packs, j = (u - hd * packs) * V;
		T *p1 = xt + (int64_t)hd * 2 * half + j; // x1 = x[hd, j … j+V)
		T *p2 = p1 + half;                       // x2 = x[hd, j+half … j+half+V)
		float a[V], b[V], o1[V], o2[V];
		load_pack(a, p1);
		load_pack(b, p2);
		for (int e = 0; e < V; e++) {
			const float c = cs[j + e], s = sn[j + e];
			o1[e] = a[e] * c - b[e] * s;
			o2[e] = b[e] * c + a[e] * s;
		}
		store_pack(p1, o1);
		store_pack(p2, o2);
	}
}

extern "C" cudaError_t tw_rope(void *x, tw_dtype dt, const int32_t *pos, const float *inv_freq, int64_t n, int64_t h,
                               int64_t dh, float sign, cudaStream_t stream) {
	if (n <= 0 || h <= 0 || dh <= 0) return cudaSuccess;
	if (dh % 2 != 0 || n > INT32_MAX || h * dh > INT32_MAX || dh * sizeof(float) > 48 * 1024)
		return cudaErrorInvalidValue;
	const int half = (int)(dh / 2);
	const size_t smem = (size_t)dh * sizeof(float); // cos and sin of the half angles
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		constexpr int V = pack_width<T>();
		if (half % V == 0 && pack_aligned<T, V>(x))
			LAUNCH((unsigned)n, row_threads(h * half / V, kThreads), smem, stream, rope_kernel<T, V>)(
				(T *)x, pos, inv_freq, (int)h, half, sign);
		else
			LAUNCH((unsigned)n, row_threads(h * half, kThreads), smem, stream, rope_kernel<T, 1>)(
				(T *)x, pos, inv_freq, (int)h, half, sign);
		return cudaGetLastError();
	});
}
