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
// Design: vec.cuh's flat_kernel (a grid-stride loop of at most 8 blocks of
// 256 threads per SM): 16-byte packs (8 bf16/f16 or 4 f32), two per thread
// per iteration with every load issued before the first store; the head
// before the first pointer's 16-byte boundary (a view at an unaligned
// element offset) and the tail after the last whole pack one element per
// thread; every element one per thread when the pointers' misalignments
// differ. Each element is computed by one thread: deterministic. Speed on a
// GPU: unmeasured since this design.
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"
#include "vec.cuh"

// __frcp_rn: the correctly rounded 1/x, as 1.0f / x, without the division's
// out-of-line slow path (its call made ptxas spill in the scalar f32 kernel).
__device__ __forceinline__ float sigmoid(float g) { return __frcp_rn(1.0f + expf(-g)); }

static constexpr int kUnroll = 2; // packs per thread per iteration

template <class T> struct SwiGLUOp {
	T *__restrict__ out;
	const T *__restrict__ gate, *__restrict__ up;
	template <int N> struct Regs {
		Pack<T, N> g, u;
	};
	template <int N> __device__ __forceinline__ void load(Regs<N> &r, int64_t i) const {
		r.g = ld<N>(gate + i);
		r.u = ld<N>(up + i);
	}
	// out = round(silu(g))·u.
	template <int N> __device__ __forceinline__ void store(const Regs<N> &r, int64_t i) const {
		float g[N];
		for (int e = 0; e < N; e++) {
			const float v = to_float(r.g.v[e]);
			g[e] = v * sigmoid(v);
		}
		round_to<T>(g);
		Pack<T, N> o;
		for (int e = 0; e < N; e++) o.v[e] = from_float<T>(g[e] * to_float(r.u.v[e]));
		st<N>(out + i, o);
	}
};

template <class T> struct SwiGLUBackwardOp {
	T *__restrict__ dgate, *__restrict__ dup;
	const T *__restrict__ dout, *__restrict__ gate, *__restrict__ up;
	template <int N> struct Regs {
		Pack<T, N> d, g, u;
	};
	template <int N> __device__ __forceinline__ void load(Regs<N> &r, int64_t i) const {
		r.d = ld<N>(dout + i);
		r.g = ld<N>(gate + i);
		r.u = ld<N>(up + i);
	}
	template <int N> __device__ __forceinline__ void store(const Regs<N> &r, int64_t i) const {
		float silu[N];
		Pack<T, N> dg;
		for (int e = 0; e < N; e++) {
			const float g = to_float(r.g.v[e]), d = to_float(r.d.v[e]), u = to_float(r.u.v[e]);
			const float s = sigmoid(g);
			silu[e] = g * s;
			dg.v[e] = from_float<T>(d * u * (s * (1.0f + g * (1.0f - s))));
		}
		round_to<T>(silu);
		Pack<T, N> du;
		for (int e = 0; e < N; e++) du.v[e] = from_float<T>(silu[e] * to_float(r.d.v[e]));
		st<N>(dgate + i, dg);
		st<N>(dup + i, du);
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
