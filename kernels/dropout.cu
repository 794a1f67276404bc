// dropout.cu — inverted dropout with a stateless, counter-based mask.
//
// Contract: engine.Backend.Dropout (engine/backend.go); the launcher's
// arguments are listed in kernels.h. What the kernel adds to it: out and x
// flat, of one float dtype dt, and out may alias x; the Go side passes the
// seed, the threshold (engine.DropoutParams.Threshold) and the scale
// (engine.DropoutParams.Scale) as computed there, so every backend drops
// the same elements and scales in the same f32. Element i is kept when the
// high half of SplitMix64's (i+1)-th output from state seed is at least the
// threshold (engine.DropoutHash), then out = round(x·scale); otherwise
// out = 0. n ≤ 0 launches nothing.
//
// Design: vec.cuh's flat_kernel, as gelu.cu: 16-byte packs, two per thread
// per iteration, every load before the first store (which makes out == x
// safe: each element is read and written by one thread), the misaligned
// head and the tail one element per thread. The hash is a few 64-bit
// multiplies per element, computed where the element is stored. Each
// element is computed by one thread: deterministic. Speed on a GPU:
// unmeasured (memory-bound like the other element-wise kernels).
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"
#include "vec.cuh"

// The hash of element i under seed: engine.DropoutHash.
__device__ __forceinline__ uint32_t dropout_hash(uint64_t seed, int64_t i) {
	uint64_t z = seed + (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (uint32_t)(z >> 32);
}

static constexpr int kUnroll = 2; // packs per thread per iteration

template <class T> struct DropoutOp {
	T *out; // may alias x
	const T *x;
	uint64_t seed;
	uint32_t threshold;
	float scale;
	template <int N> struct Regs {
		Held<T, N> x; // as loaded: widened when stored
	};
	template <int N> __device__ __forceinline__ void load(Regs<N> &r, int64_t i) const { r.x = ld_held<N>(x + i); }
	template <int N> __device__ __forceinline__ void store(const Regs<N> &r, int64_t i) const {
		float f[N];
		widen(f, r.x);
		for (int e = 0; e < N; e++) f[e] = dropout_hash(seed, i + e) >= threshold ? f[e] * scale : 0.0f;
		store_pack(out + i, f);
	}
};

extern "C" cudaError_t tw_dropout(void *out, const void *x, tw_dtype dt, int64_t n, uint64_t seed, uint32_t threshold,
                                  float scale, cudaStream_t stream) {
	if (n <= 0) return cudaSuccess;
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		const DropoutOp<T> op{(T *)out, (const T *)x, seed, threshold, scale};
		return launch_flat<pack_width<T>(), kUnroll, T>(
			op, n, out, [&](int64_t h) { return aligned16<T>(x, h); }, stream);
	});
}
