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
// Design: vec.cuh's flat_kernel (a grid-stride loop of at most 8 blocks of
// 256 threads per SM): 16-byte packs (8 bf16/f16 or 4 f32), four per
// thread per iteration with every load issued before the first store (at
// two, the sm_90 code of the bf16 quick forward issued the second pack's
// load after the first pack's exponentials: one load in flight; at four,
// three); the head
// before the first pointer's 16-byte boundary (a view at an unaligned
// element offset) and the tail after the last whole pack one element per
// thread; every element one per thread when the pointers' misalignments
// differ. The kind is a template argument. Each element is computed by one
// thread: deterministic. Quick's sigmoids take one range test a pack for
// their reciprocals (common.cuh's sigmoid_pack, as SwiGLU's). Speed on a
// GPU: unmeasured since this design.
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"
#include "vec.cuh"

// The kinds, numbered as engine.GELUKind.
enum { kErf = 0, kTanh = 1, kQuick = 2 };

static constexpr float kQuickAlpha = 1.702f;          // quick_gelu's slope
static constexpr float kSqrt2OverPi = 0.7978845608f;  // √(2/π)
static constexpr float kTanhCubic = 0.044715f;        // the tanh approximation's cubic term
static constexpr float kInvSqrt2 = 0.70710678118f;    // 1/√2
static constexpr float kInvSqrt2Pi = 0.39894228040f;  // 1/√(2π)

// gelu_k over a pack, in place; T is the storage type quick rounds to.
// Quick's sigmoids go through sigmoid_pack (common.cuh): one range test for
// the pack's reciprocals, where 1/(1 + e) tested each.
template <class T, int K, int N> __device__ __forceinline__ void gelu(float (&f)[N]) {
	if constexpr (K == kQuick) {
		float t[N], s[N];
		for (int e = 0; e < N; e++) t[e] = kQuickAlpha * f[e];
		round_to<T>(t);
		sigmoid_pack(s, t);
		round_to<T>(s);
		for (int e = 0; e < N; e++) f[e] *= s[e];
	} else {
		for (int e = 0; e < N; e++) {
			const float v = f[e];
			if (K == kErf) f[e] = 0.5f * v * (1.0f + erff(v * kInvSqrt2));
			else f[e] = 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kTanhCubic * v * v * v)));
		}
	}
}

// gelu_k'(x) over a pack x, into d (quick: of the exact x·σ(1.702·x)).
template <int K, int N> __device__ __forceinline__ void gelu_grad(float (&d)[N], const float (&x)[N]) {
	if constexpr (K == kQuick) {
		float a[N], s[N];
		for (int e = 0; e < N; e++) a[e] = kQuickAlpha * x[e];
		sigmoid_pack(s, a);
		for (int e = 0; e < N; e++) d[e] = s[e] + a[e] * s[e] * (1.0f - s[e]);
	} else {
		for (int e = 0; e < N; e++) {
			const float v = x[e];
			if (K == kErf) {
				d[e] = 0.5f * (1.0f + erff(v * kInvSqrt2)) + v * kInvSqrt2Pi * expf(-0.5f * v * v);
			} else {
				const float t = tanhf(kSqrt2OverPi * (v + kTanhCubic * v * v * v));
				d[e] = 0.5f * (1.0f + t) +
				       0.5f * v * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kTanhCubic * v * v);
			}
		}
	}
}

static constexpr int kUnroll = 4; // packs per thread per iteration

template <class T, int K> struct GELUOp {
	T *__restrict__ out;
	const T *__restrict__ x;
	template <int N> struct Regs {
		Held<T, N> x; // as loaded: widened when stored
	};
	template <int N> __device__ __forceinline__ void load(Regs<N> &r, int64_t i) const { r.x = ld_held<N>(x + i); }
	template <int N> __device__ __forceinline__ void store(const Regs<N> &r, int64_t i) const {
		float f[N];
		widen(f, r.x);
		gelu<T, K>(f);
		store_pack(out + i, f);
	}
};

template <class T, int K> struct GELUBackwardOp {
	T *__restrict__ dx;
	const T *__restrict__ dout, *__restrict__ x;
	template <int N> struct Regs {
		Held<T, N> g, x; // as loaded: widened when stored
	};
	template <int N> __device__ __forceinline__ void load(Regs<N> &r, int64_t i) const {
		r.g = ld_held<N>(dout + i);
		r.x = ld_held<N>(x + i);
	}
	template <int N> __device__ __forceinline__ void store(const Regs<N> &r, int64_t i) const {
		float g[N], f[N], d[N];
		widen(g, r.g);
		widen(f, r.x);
		gelu_grad<K>(d, f);
		for (int e = 0; e < N; e++) d[e] *= g[e];
		store_pack(dx + i, d);
	}
};

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
			constexpr int K = decltype(k)::value;
			const GELUOp<T, K> op{(T *)out, (const T *)x};
			return launch_flat<pack_width<T>(), kUnroll, T>(
				op, n, out, [&](int64_t h) { return aligned16<T>(x, h); }, stream);
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
			constexpr int K = decltype(k)::value;
			const GELUBackwardOp<T, K> op{(T *)dx, (const T *)dout, (const T *)x};
			return launch_flat<pack_width<T>(), kUnroll, T>(
				op, n, dx, [&](int64_t h) { return aligned16<T>(dout, h) && aligned16<T>(x, h); }, stream);
		});
	});
}
