// elementwise.cu — element-wise kernels over flat arrays of any float dtype.
//
// Contract: engine.Backend.Fill, Cast and Add (engine/backend.go); the
// launchers' arguments are listed in kernels.h (Copy is a device-to-device
// copy, no kernel). What the kernels add to it: arithmetic is f32 and each
// result is rounded once (nearest even, NaN kept) to its dtype; n ≤ 0
// launches nothing. Any element-aligned pointers are accepted.
//
// Design: vec.cuh's flat_kernel, a grid-stride loop of at most 8 blocks of
// 256 threads per SM. Each thread moves 16-byte packs (8 bf16/f16 or 4 f32
// elements; a cast between a 16-bit dtype and f32 moves 4: 8 bytes of the
// one, 16 of the other, so that each of a warp's accesses is contiguous; it
// moved 8, the f32 side in two 16-byte accesses that each touched half of
// every sector, when the cast to f32 measured 47% of the copy bandwidth at
// 2048 tokens on an H200 (2026-11-27, 9b1ace1) where AdamW, whose packs
// were already so, reached 93%), four packs per iteration with every load
// issued before the first store, so four independent loads per array are in
// flight per thread. The elements before the first pointer's 16-byte
// boundary (the head of a view at an unaligned element offset) and after
// the last whole pack go one per thread; when the pointers' misalignments
// differ, every element does. Deterministic: every element is computed by
// one thread. Speed on a GPU: unmeasured since this design (the copy ceiling
// is the target; see bench/opbench).
#include "common.cuh"
#include "kernels.h"
#include "pack.cuh"
#include "vec.cuh"

static constexpr int kUnroll = 4; // packs per thread per iteration

template <class T> struct FillOp {
	T *x;
	float v;
	template <int N> struct Regs {};
	template <int N> __device__ __forceinline__ void load(Regs<N> &, int64_t) const {}
	template <int N> __device__ __forceinline__ void store(const Regs<N> &, int64_t i) const {
		const T t = from_float<T>(v);
		Pack<T, N> p;
		for (int e = 0; e < N; e++) p.v[e] = t;
		st<N>(x + i, p);
	}
};

template <class D, class S> struct CastOp {
	D *__restrict__ dst;
	const S *__restrict__ src;
	template <int N> struct Regs {
		Held<S, N> s; // as loaded: widened when stored
	};
	template <int N> __device__ __forceinline__ void load(Regs<N> &r, int64_t i) const { r.s = ld_held<N>(src + i); }
	template <int N> __device__ __forceinline__ void store(const Regs<N> &r, int64_t i) const {
		float f[N];
		widen(f, r.s);
		store_pack(dst + i, f);
	}
};

// No __restrict__: out may alias a or b.
template <class T> struct AddOp {
	T *out;
	const T *a, *b;
	template <int N> struct Regs {
		Held<T, N> a, b; // as loaded: widened when added
	};
	template <int N> __device__ __forceinline__ void load(Regs<N> &r, int64_t i) const {
		r.a = ld_held<N>(a + i);
		r.b = ld_held<N>(b + i);
	}
	template <int N> __device__ __forceinline__ void store(const Regs<N> &r, int64_t i) const {
		float x[N], y[N];
		widen(x, r.a);
		widen(y, r.b);
		for (int e = 0; e < N; e++) x[e] += y[e];
		store_pack(out + i, x);
	}
};

extern "C" cudaError_t tw_fill(void *x, tw_dtype dt, int64_t n, float v, cudaStream_t stream) {
	if (n <= 0) return cudaSuccess;
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		const FillOp<T> op{(T *)x, v};
		return launch_flat<pack_width<T>(), kUnroll, T>(op, n, x, [](int64_t) { return true; }, stream);
	});
}

extern "C" cudaError_t tw_cast(void *dst, tw_dtype ddt, const void *src, tw_dtype sdt, int64_t n, cudaStream_t stream) {
	if (n <= 0) return cudaSuccess;
	return dispatch_float(ddt, [&](auto *d) {
		return dispatch_float(sdt, [&](auto *s) {
			using D = elem_t<decltype(d)>;
			using S = elem_t<decltype(s)>;
			// 16 bytes of the wider dtype a lane: bf16 ↔ f32 moves 8 bytes of
			// bf16 and 16 of f32, so that every access of a warp is
			// contiguous (16 bytes of bf16 would be two 16-byte accesses of
			// f32, each writing or reading half of every sector).
			constexpr int V = 16 / (int)(sizeof(D) > sizeof(S) ? sizeof(D) : sizeof(S));
			const CastOp<D, S> op{(D *)dst, (const S *)src};
			return launch_flat<V, kUnroll, D>(op, n, dst, [&](int64_t h) { return aligned16<S>(src, h); }, stream);
		});
	});
}

extern "C" cudaError_t tw_add(void *out, const void *a, const void *b, tw_dtype dt, int64_t n, cudaStream_t stream) {
	if (n <= 0) return cudaSuccess;
	return dispatch_float(dt, [&](auto *t) {
		using T = elem_t<decltype(t)>;
		const AddOp<T> op{(T *)out, (const T *)a, (const T *)b};
		return launch_flat<pack_width<T>(), kUnroll, T>(
			op, n, out, [&](int64_t h) { return aligned16<T>(a, h) && aligned16<T>(b, h); }, stream);
	});
}
