// swiglu.cu — the SwiGLU gate of the Llama MLP and its backward.
//
// Contract: engine.Backend.SwiGLU and SwiGLUBackward (engine/backend.go);
// the launchers' arguments are listed in kernels.h. What the kernels add to
// it: all tensors flat, of one float dtype dt; s = sigmoid(g) = 1/(1 + exp(−g))
// with the precise expf and a correctly rounded reciprocal,
// silu'(g) = s·(1 + g·(1 − s)); arithmetic is f32 and
// silu(gate), out, dgate and dup are each rounded once to dt (nearest even;
// none for f32), so dup = round(dout · round(silu(gate))). n ≤ 0 launches
// nothing.
//
// Design: vec.cuh's flat_kernel (a grid-stride loop of at most 8 blocks of
// 256 threads per SM): 16-byte packs (8 bf16/f16 or 4 f32), two per thread
// per iteration with every load issued before the first store; the head
// before the first pointer's 16-byte boundary (a view at an unaligned
// element offset) and the tail after the last whole pack one element per
// thread; every element one per thread when the pointers' misalignments
// differ. Each element is computed by one thread: deterministic. The packs
// are held as loaded (pack.cuh's Held) and widened when computed, and a
// pack's reciprocals take __frcp_rn's fast path with one range test for
// the pack (common.cuh's sigmoid_pack): in the sm_90 code the bf16 loops
// take about 360 (forward) and 480 (backward) instructions per two packs
// on that path, where they took 550 and 696 (commit 4f938ec). The forward
// measured 78% and 80% of the copy bandwidth at 2k and 8k tokens, the
// backward 87% and 89% (H200, 2026-11-27, commit 9b1ace1); unmeasured
// since.
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"
#include "vec.cuh"

static constexpr int kUnroll = 2; // packs per thread per iteration

template <class T> struct SwiGLUOp {
	T *__restrict__ out;
	const T *__restrict__ gate, *__restrict__ up;
	template <int N> struct Regs {
		Held<T, N> g, u; // as loaded: widened when stored
	};
	template <int N> __device__ __forceinline__ void load(Regs<N> &r, int64_t i) const {
		r.g = ld_held<N>(gate + i);
		r.u = ld_held<N>(up + i);
	}
	// out = round(silu(g))·u.
	template <int N> __device__ __forceinline__ void store(const Regs<N> &r, int64_t i) const {
		float g[N], s[N], u[N];
		widen(g, r.g);
		sigmoid_pack(s, g);
		for (int e = 0; e < N; e++) g[e] *= s[e];
		round_to<T>(g);
		widen(u, r.u);
		for (int e = 0; e < N; e++) g[e] *= u[e];
		store_pack(out + i, g);
	}
};

template <class T> struct SwiGLUBackwardOp {
	T *__restrict__ dgate, *__restrict__ dup;
	const T *__restrict__ dout, *__restrict__ gate, *__restrict__ up;
	template <int N> struct Regs {
		Held<T, N> d, g, u; // as loaded: widened when stored
	};
	template <int N> __device__ __forceinline__ void load(Regs<N> &r, int64_t i) const {
		r.d = ld_held<N>(dout + i);
		r.g = ld_held<N>(gate + i);
		r.u = ld_held<N>(up + i);
	}
	template <int N> __device__ __forceinline__ void store(const Regs<N> &r, int64_t i) const {
		float d[N], g[N], u[N], s[N], dg[N];
		widen(d, r.d);
		widen(g, r.g);
		widen(u, r.u);
		sigmoid_pack(s, g);
		for (int e = 0; e < N; e++) {
			dg[e] = d[e] * u[e] * (s[e] * (1.0f + g[e] * (1.0f - s[e])));
			g[e] *= s[e]; // silu(g)
		}
		round_to<T>(g);
		for (int e = 0; e < N; e++) g[e] *= d[e];
		store_pack(dgate + i, dg);
		store_pack(dup + i, g);
	}
};

extern "C" cudaError_t tw_swiglu(void *out, const void *gate, const void *up, tw_dtype dt, int64_t n,
                                 cudaStream_t stream) {
	if (n <= 0) return cudaSuccess;
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		const SwiGLUOp<T> op{(T *)out, (const T *)gate, (const T *)up};
		return launch_flat<pack_width<T>(), kUnroll, T>(
			op, n, out, [&](int64_t h) { return aligned16<T>(gate, h) && aligned16<T>(up, h); }, stream);
	});
}

extern "C" cudaError_t tw_swiglu_backward(void *dgate, void *dup, const void *dout, const void *gate, const void *up,
                                          tw_dtype dt, int64_t n, cudaStream_t stream) {
	if (n <= 0) return cudaSuccess;
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		const SwiGLUBackwardOp<T> op{(T *)dgate, (T *)dup, (const T *)dout, (const T *)gate, (const T *)up};
		return launch_flat<pack_width<T>(), kUnroll, T>(
			op, n, dgate,
			[&](int64_t h) {
				return aligned16<T>(dup, h) && aligned16<T>(dout, h) && aligned16<T>(gate, h) &&
				       aligned16<T>(up, h);
			},
			stream);
	});
}
