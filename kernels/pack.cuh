// pack.cuh — helpers shared by the row-wise kernel families (embedding,
// rmsnorm, layernorm, bias, rope, swiglu, gelu, logsoftmax): packed loads and
// stores, and dtype dispatch. Include after common.cuh.
//
// Pack<T, N> is N consecutive elements moved by one access: 16 bytes (8 bf16
// or f16, 4 f32) becomes a single 128-bit load or store, 32 bytes two. The
// kernels that use it are templated on N; launchers pick N = 16/sizeof(T)
// when every pointer is aligned to its pack and the row length is a multiple
// of N, and N = 1 (plain scalar accesses, any alignment) otherwise.
#pragma once

#include <stdint.h>

#include <type_traits>

#include "common.cuh"
#include "kernels.h"

template <class T, int N> struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) Pack {
	T v[N];
};

// Writes pk to p (aligned to the pack) in one access of the pack's width.
// A Pack assigned through its pointer, or copied into a uint4, still lets
// nvcc 11.8 split some 16-byte stores of an unrolled loop into four 32-bit
// ones (seen in fill's and embedding's sm_90 code; fill then took 1.7× the
// time of its old scalar 2-byte stores on an H200), so device code states
// the vector store in PTX.
template <class T, int N> __device__ __forceinline__ void put_pack(T *p, const Pack<T, N> &pk TW_SITE_MORE) {
#if !defined(__CUDACC__)
	tw_emu::count_access("st.global", "st.shared", p, (int)sizeof(pk), TW_AT);
#endif
#if defined(__CUDA_ARCH__)
	if constexpr (sizeof(pk) == 16) {
		uint32_t w[4];
		memcpy(w, &pk, 16);
		asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
		             : "memory");
		return;
	} else if constexpr (sizeof(pk) == 8) {
		uint32_t w[2];
		memcpy(w, &pk, 8);
		asm volatile("st.global.v2.b32 [%0], {%1, %2};\n" ::"l"(p), "r"(w[0]), "r"(w[1]) : "memory");
		return;
	}
#endif
	*reinterpret_cast<Pack<T, N> *>(p) = pk;
}

// Words<T, N> holds the bytes of N elements of T (a whole number of 32-bit
// words) as words: what a thread keeps between a load and the use of a pack
// of 16-bit elements (a row prefetched while the previous one is reduced).
// Kept as a Pack<bf16, N>, the elements are split into 16-bit halves by a
// PRMT each right after the load and joined again to be widened (seen in
// the norm backwards' sm_90 code). Held<T, N> is Words where the pack is
// whole words, else the Pack itself (one 16-bit element).
template <class T, int N> struct Words {
	static_assert(N * sizeof(T) % 4 == 0, "a pack of whole words");
	uint32_t w[N * sizeof(T) / 4];
};
template <class T, int N>
using Held = typename std::conditional<(N * sizeof(T)) % 4 == 0, Words<T, N>, Pack<T, N>>::type;

// Loads the N elements at p (aligned to its pack) as Held: 16-byte words,
// or one 8- or 4-byte access, or the Pack of one 16-bit element.
template <int N, class T> __device__ __forceinline__ Held<T, N> ld_held(const T *p TW_SITE_MORE) {
	constexpr int B = N * (int)sizeof(T);
#if !defined(__CUDACC__)
	tw_emu::count_access("ld.global", "ld.shared", p, B, TW_AT);
#endif
	if constexpr (B % 4 != 0) {
		Pack<T, N> r;
		r.v[0] = *p;
		return r;
	} else {
		Words<T, N> r;
		if constexpr (B % 16 == 0) {
			for (int i = 0; i < B / 16; i++) {
				const uint4 v = reinterpret_cast<const uint4 *>(p)[i];
				r.w[4 * i] = v.x, r.w[4 * i + 1] = v.y, r.w[4 * i + 2] = v.z, r.w[4 * i + 3] = v.w;
			}
		} else if constexpr (B == 8) {
			const uint2 v = *reinterpret_cast<const uint2 *>(p);
			r.w[0] = v.x, r.w[1] = v.y;
		} else {
			r.w[0] = *reinterpret_cast<const uint32_t *>(p);
		}
		return r;
	}
}

// The N elements held in x widened to f32. bf16 pairs are widened from
// their 32-bit word by one shift or one mask each: the conversion nvcc
// emits for an element of a pack spends two instructions on every high
// half, which made the norm backwards and the loss head's log-sum-exp bound
// by instruction issue.
template <int N, class T> __device__ __forceinline__ void widen(float (&f)[N], const Words<T, N> &x) {
	for (int k = 0; k < N * (int)sizeof(T) / 4; k++) {
		if constexpr (std::is_same<T, float>::value) {
			f[k] = __uint_as_float(x.w[k]);
		} else if constexpr (std::is_same<T, __nv_bfloat16>::value) {
			f[2 * k] = __uint_as_float(x.w[k] << 16);
			f[2 * k + 1] = __uint_as_float(x.w[k] & 0xffff0000u);
		} else {
			f[2 * k] = __half2float(__ushort_as_half((unsigned short)(x.w[k] & 0xffffu)));
			f[2 * k + 1] = __half2float(__ushort_as_half((unsigned short)(x.w[k] >> 16)));
		}
	}
}

// The N elements of pk (a pack in registers) widened to f32, through
// Words when they are whole words.
template <int N, class T> __device__ __forceinline__ void widen(float (&f)[N], const Pack<T, N> &pk) {
	if constexpr ((N * sizeof(T)) % 4 == 0) {
		Words<T, N> x;
		memcpy(x.w, &pk, sizeof(x.w));
		widen(f, x);
	} else {
		for (int k = 0; k < N; k++) f[k] = to_float(pk.v[k]);
	}
}

// Loads the N elements at p (aligned to its pack) widened to f32 (whole
// words by ld_held: a memcpy from the pack in global memory would be read
// byte by byte).
template <int N, class T> __device__ __forceinline__ void load_pack(float (&f)[N], const T *p TW_SITE_MORE) {
	widen(f, ld_held<N>(p TW_AT_MORE));
}

// Stores f rounded to T (nearest even) at p (aligned to its pack).
template <int N, class T> __device__ __forceinline__ void store_pack(T *p, const float (&f)[N] TW_SITE_MORE) {
	Pack<T, N> pk;
	for (int k = 0; k < N; k++) pk.v[k] = from_float<T>(f[k]);
	put_pack(p, pk TW_AT_MORE);
}

// Rounds every value of f to T and back (identity for f32): the rounding
// point where the contract materialises an intermediate in the activation
// dtype.
template <class T, int N> __device__ __forceinline__ void round_to(float (&f)[N]) {
	for (int k = 0; k < N; k++) f[k] = to_float(from_float<T>(f[k]));
}

// Elements per pack for T: one 16-byte access.
template <class T> constexpr int pack_width() { return 16 / (int)sizeof(T); }

// Whether p may be accessed as Pack<T, N>.
template <class T, int N> __host__ __forceinline__ bool pack_aligned(const void *p) {
	return (uintptr_t)p % alignof(Pack<T, N>) == 0;
}

// Threads for a block that walks a row of `units` packs: a multiple of 32,
// at least 32, at most cap.
__host__ __forceinline__ int row_threads(int64_t units, int cap) {
	int64_t t = ceil_div<int64_t>(units, 32) * 32;
	return (int)(t < 32 ? 32 : t > cap ? cap : t);
}

// dispatch_float calls f with a null pointer of the C++ type that dt names
// (float, __nv_bfloat16 or __half), or returns cudaErrorInvalidValue for a
// dtype that is not floating point.
template <class F> static cudaError_t dispatch_float(tw_dtype dt, F f) {
	switch (dt) {
	case TW_F32: return f((float *)nullptr);
	case TW_BF16: return f((__nv_bfloat16 *)nullptr);
	case TW_F16: return f((__half *)nullptr);
	default: return cudaErrorInvalidValue;
	}
}

// The element type behind a pointer-typed dispatch argument.
template <class P> using elem_t = std::remove_pointer_t<P>;
