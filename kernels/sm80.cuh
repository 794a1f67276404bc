// sm80.cuh — the sm_80 instructions the bf16 GEMM and attention are built
// on, one inline function each: asynchronous global→shared copies
// (cp.async), fragment loads from shared memory (ldmatrix) and the
// tensor-core product (mma.sync).
//
// Each function is the instruction itself (inline PTX) when nvcc compiles
// for sm_80 and later, and the emulator's model of that instruction when
// g++ compiles against kernels/emu (tw_emu_sm80.h and tw_emu_warp_mma.h
// there): under the emulator a kernel runs the code path it runs on the
// GPU, and the emulator checks what the instruction requires and models
// when its results become visible. The synchronous fallback serves only nvcc's passes that
// never run on an sm_80+ GPU (an older architecture, and the host pass).
//
//   cp_async16(dst, src, src_bytes)  cp.async.cg.shared.global, 16 bytes:
//       dst (shared, 16-byte aligned) ← the first src_bytes (0..16) bytes at
//       src (global, 16-byte aligned), then zeros; src is not read when
//       src_bytes is 0. Not visible, not even to the issuing thread, until a
//       cp_async_wait covers it; until then dst is undefined (NaN under the
//       emulator, which performs the copy at the wait).
//   cp_async_commit()                cp.async.commit_group: closes the group
//       of the thread's copies issued since its last commit.
//   cp_async_wait<N>()               cp.async.wait_group N: returns once at
//       most N of the thread's committed groups are pending. Other threads
//       see the copies only after a barrier that follows their wait.
//
// The warp-level matrix instructions a FlashAttention-class kernel keeps
// its tiles in registers with (PTX ISA, "Matrix Fragments for mma.m16n8k16
// with floating point type" and "Warp-level matrix load instruction:
// ldmatrix"). A register (uint32_t) of 16-bit elements holds two, the one
// listed first in bits 0-15. In a lane, g = laneid / 4 and t = laneid % 4
// (laneid: the thread's linear index in the block modulo 32).
//
//   mma_bf16_m16n8k16(d, a, b, c)    mma.sync.aligned.m16n8k16.row.col.f32.
//   mma_f16_m16n8k16(d, a, b, c)         {bf16,f16}.{bf16,f16}.f32:
//       float d[4] = A·B + C for A 16x16 (bf16 or f16), B 16x8, C and D
//       16x8 f32, spread over the warp's 32 lanes, which all make the same
//       call. Lane holds
//         a[0] = A[g][2t], A[g][2t+1]        a[1] = A[g+8][2t], A[g+8][2t+1]
//         a[2] = A[g][2t+8], A[g][2t+9]      a[3] = A[g+8][2t+8], A[g+8][2t+9]
//         b[0] = B[2t][g], B[2t+1][g]        b[1] = B[2t+8][g], B[2t+9][g]
//         c[0..3] = C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]
//       and d as c. d may be c. The products are exact; how the tensor core
//       adds them is not specified by NVIDIA: the emulator rounds the exact
//       sum once (to nearest even), a GPU may differ in the low bits
//       relative to the largest term. Compare with a tolerance (see
//       kernels/emu/include/tw_emu_warp_mma.h), or use data whose sums are
//       exact in f32.
//   ldmatrix_x{1,2,4}(r, row)        ldmatrix.sync.aligned.m8n8.x{1,2,4}
//   ldmatrix_x{1,2,4}_trans(r, row)      {,.trans}.shared.b16:
//       loads 1, 2 or 4 8x8 matrices M_i of 16-bit elements from shared
//       memory, the warp's 32 lanes together. Lane 8i+j passes in row the
//       address of row j of M_i (16 contiguous bytes, 16-byte aligned, in
//       shared memory); other lanes' row is ignored. uint32_t r[i] receives
//       M_i[g][2t], M_i[g][2t+1]; _trans: M_i[2t][g], M_i[2t+1][g]. A
//       barrier (__syncthreads, or __syncwarp for the warp's own writes)
//       must separate writes of the rows from the load. Thus an A fragment
//       of a row-major 16x16 tile is ldmatrix_x4 with lane l passing row
//       l % 16, column 8·(l / 16); a B fragment whose B[k][n] is stored at
//       row n, column k (K in S = Q·K^T) is ldmatrix_x2 with lane l passing
//       row l % 8, column 8·(l / 8 % 2); one stored at row k, column n (V in
//       O = P·V) is ldmatrix_x2_trans with lane l passing row l % 16.
//   st_shared(p, v), ld_shared(p)    st.shared, ld.shared of a T (4, 8 or 16
//   st_shared_b32(p, v)                  bytes) at p, shared and aligned to
//       T; st_shared_b32 stores a register at a void *. On a GPU the plain
//       access; the emulator also checks that p is shared memory and counts
//       the warp's access in its bank model
//       (kernels/emu/include/tw_emu_banks.h), which it cannot do for an
//       access through a pointer.
//   pack_bf16x2(lo, hi)              cvt.rn.bf16x2.f32: a register holding
//   pack_f16x2(lo, hi)               cvt.rn.f16x2.f32   lo in bits 0-15, hi
//       in bits 16-31, each rounded to nearest even (±inf past the range,
//       NaN stays NaN). Packed so, the accumulators of two mma tiles side by
//       side (L: columns 0-7, R: columns 8-15 of a 16x16 result) are the A
//       fragment of the next mma: a[0] = pack(L.c[0], L.c[1]), a[1] =
//       pack(L.c[2], L.c[3]), a[2] = pack(R.c[0], R.c[1]), a[3] =
//       pack(R.c[2], R.c[3]). That is how P = softmax(S) stays in registers.
//   mma_m16n8k16<BF16>(d, a, b, c), ldmatrix<NUM, TRANS>(r, row): the same,
//       for code templated on them. sm80_portable:: holds the fallbacks
//       (warp shuffles; its mma adds in f32, rounding at each step), which
//       the emulator's self-tests check against the instructions.
#pragma once

#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common.cuh"

// Which implementation: TW_SM80_PTX (nvcc, sm_80+ device code), TW_SM80_EMU
// (g++ against the emulator), or neither (the synchronous fallback).
#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 800
#define TW_SM80_PTX 1
#endif
#elif defined(TW_EMU)
#define TW_SM80_EMU 1
#elif !defined(__CUDACC__)
#error "sm80.cuh: compile with nvcc, or with g++ against kernels/emu"
#endif

// Under the emulator the functions take their caller's file and line
// (TW_SITE, common.cuh), so its messages and counts name the kernel's call
// site.

__device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes TW_SITE_MORE) {
#if defined(TW_SM80_PTX)
	const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(src_bytes));
#elif defined(TW_SM80_EMU)
	tw_emu::cp_async(dst, src, 16, src_bytes TW_AT_MORE);
#else
	uint4 v = make_uint4(0, 0, 0, 0);
	for (int i = 0; i < src_bytes; i++) reinterpret_cast<unsigned char *>(&v)[i] = static_cast<const unsigned char *>(src)[i];
	*static_cast<uint4 *>(dst) = v;
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(TW_SM80_PTX)
	asm volatile("cp.async.commit_group;\n" ::);
#elif defined(TW_SM80_EMU)
	tw_emu::cp_async_commit();
#endif
}

template <int N> __device__ __forceinline__ void cp_async_wait(TW_SITE) {
	static_assert(N >= 0, "cp_async_wait<N>: N is a count of groups");
#if defined(TW_SM80_PTX)
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#elif defined(TW_SM80_EMU)
	tw_emu::cp_async_wait(N, TW_AT);
#endif
}

// ---- Warp-level matrix instructions (see the top) ------------------------------

// Portable implementations with warp shuffles, for nvcc's passes that never
// run on an sm_80+ GPU; also compiled under the emulator, where the tests
// check them against its model of the instructions.
namespace sm80_portable {

__device__ __forceinline__ int lane_id() {
	return (int)((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u);
}

template <int NUM, bool TRANS> __device__ __forceinline__ void ldmatrix(uint32_t *r, const void *row) {
	const int lane = lane_id(), g = lane >> 2, t = lane & 3;
	const unsigned long long p = (unsigned long long)(uintptr_t)row;
	for (int i = 0; i < NUM; i++) {
		uint32_t lo, hi;
		if (TRANS) { // rows 2t and 2t+1 of M_i, column g
			lo = reinterpret_cast<const uint16_t *>(__shfl_sync(0xffffffffu, p, 8 * i + 2 * t))[g];
			hi = reinterpret_cast<const uint16_t *>(__shfl_sync(0xffffffffu, p, 8 * i + 2 * t + 1))[g];
		} else { // row g of M_i, columns 2t and 2t+1
			const uint16_t *q = reinterpret_cast<const uint16_t *>(__shfl_sync(0xffffffffu, p, 8 * i + g));
			lo = q[2 * t];
			hi = q[2 * t + 1];
		}
		r[i] = lo | hi << 16;
	}
}

__device__ __forceinline__ float bf16_bits_to_float(uint32_t h) { return __uint_as_float((h & 0xffffu) << 16); }
__device__ __forceinline__ float f16_bits_to_float(uint32_t h) {
	return __half2float(__ushort_as_half((unsigned short)(h & 0xffffu)));
}

// D = A·B + C, each output accumulated in f32 over k in the order the
// lanes of a quad hold it (not the tensor core's rounding).
template <bool BF16>
__device__ __forceinline__ void mma_m16n8k16(float *d, const uint32_t *a, const uint32_t *b, const float *c) {
	const int lane = lane_id(), g = lane >> 2, t = lane & 3;
	auto f = [](uint32_t h) { return BF16 ? bf16_bits_to_float(h) : f16_bits_to_float(h); };
	float acc[4] = {c[0], c[1], c[2], c[3]};
	for (int j = 0; j < 4; j++) { // lane 4g+j holds A's rows g, g+8 at k = 2j, 2j+1, 2j+8, 2j+9;
		uint32_t ar[4], bc[2][2];   // lane 4n+j holds B's column n at the same k
		for (int r = 0; r < 4; r++) ar[r] = __shfl_sync(0xffffffffu, a[r], 4 * g + j);
		for (int n = 0; n < 2; n++)
			for (int r = 0; r < 2; r++) bc[n][r] = __shfl_sync(0xffffffffu, b[r], 4 * (2 * t + n) + j);
		for (int h = 0; h < 2; h++)     // row g + 8h
			for (int n = 0; n < 2; n++) // column 2t + n
				for (int r = 0; r < 2; r++)     // k = 2j + 8r + {0, 1}
					for (int e = 0; e < 2; e++) // the element's half of the register
						acc[2 * h + n] = fmaf(f(ar[h + 2 * r] >> (16 * e)), f(bc[n][r] >> (16 * e)), acc[2 * h + n]);
	}
	for (int i = 0; i < 4; i++) d[i] = acc[i];
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
	const __nv_bfloat16_raw l = __float2bfloat16_rn(lo), h = __float2bfloat16_rn(hi);
	return (uint32_t)l.x | (uint32_t)h.x << 16;
}
__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
	const __half_raw l = __float2half_rn(lo), h = __float2half_rn(hi);
	return (uint32_t)l.x | (uint32_t)h.x << 16;
}

} // namespace sm80_portable

template <bool BF16>
__device__ __forceinline__ void mma_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                             const float c[4] TW_SITE_MORE) {
#if defined(TW_SM80_PTX)
#define TW_MMA(type)                                                                                          \
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." type "." type ".f32 "                                 \
	             "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"                         \
	             : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                                 \
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),         \
	               "f"(c[2]), "f"(c[3]))
	if constexpr (BF16) TW_MMA("bf16");
	else TW_MMA("f16");
#undef TW_MMA
#elif defined(TW_SM80_EMU)
	if constexpr (BF16) tw_emu::mma_m16n8k16_bf16(d, a, b, c TW_AT_MORE);
	else tw_emu::mma_m16n8k16_f16(d, a, b, c TW_AT_MORE);
#else
	sm80_portable::mma_m16n8k16<BF16>(d, a, b, c);
#endif
}

__device__ __forceinline__ void mma_bf16_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                                  const float c[4] TW_SITE_MORE) {
	mma_m16n8k16<true>(d, a, b, c TW_AT_MORE);
}
__device__ __forceinline__ void mma_f16_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                                 const float c[4] TW_SITE_MORE) {
	mma_m16n8k16<false>(d, a, b, c TW_AT_MORE);
}

template <int NUM, bool TRANS> __device__ __forceinline__ void ldmatrix(uint32_t *r, const void *row TW_SITE_MORE) {
	static_assert(NUM == 1 || NUM == 2 || NUM == 4, "ldmatrix loads 1, 2 or 4 matrices");
#if defined(TW_SM80_PTX)
	const unsigned s = (unsigned)__cvta_generic_to_shared(row);
#define TW_LDMATRIX(num, regs, ...) \
	asm volatile("ldmatrix.sync.aligned.m8n8" num ".shared.b16 " regs ";\n" : __VA_ARGS__ : "r"(s))
	if constexpr (NUM == 1 && !TRANS) TW_LDMATRIX(".x1", "{%0}, [%1]", "=r"(r[0]));
	else if constexpr (NUM == 2 && !TRANS) TW_LDMATRIX(".x2", "{%0, %1}, [%2]", "=r"(r[0]), "=r"(r[1]));
	else if constexpr (NUM == 4 && !TRANS)
		TW_LDMATRIX(".x4", "{%0, %1, %2, %3}, [%4]", "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]));
	else if constexpr (NUM == 1) TW_LDMATRIX(".x1.trans", "{%0}, [%1]", "=r"(r[0]));
	else if constexpr (NUM == 2) TW_LDMATRIX(".x2.trans", "{%0, %1}, [%2]", "=r"(r[0]), "=r"(r[1]));
	else TW_LDMATRIX(".x4.trans", "{%0, %1, %2, %3}, [%4]", "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]));
#undef TW_LDMATRIX
#elif defined(TW_SM80_EMU)
	tw_emu::ldmatrix<NUM, TRANS>(r, row TW_AT_MORE);
#else
	sm80_portable::ldmatrix<NUM, TRANS>(r, row);
#endif
}

__device__ __forceinline__ void ldmatrix_x1(uint32_t r[1], const void *row TW_SITE_MORE) {
	ldmatrix<1, false>(r, row TW_AT_MORE);
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t r[2], const void *row TW_SITE_MORE) {
	ldmatrix<2, false>(r, row TW_AT_MORE);
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void *row TW_SITE_MORE) {
	ldmatrix<4, false>(r, row TW_AT_MORE);
}
__device__ __forceinline__ void ldmatrix_x1_trans(uint32_t r[1], const void *row TW_SITE_MORE) {
	ldmatrix<1, true>(r, row TW_AT_MORE);
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t r[2], const void *row TW_SITE_MORE) {
	ldmatrix<2, true>(r, row TW_AT_MORE);
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void *row TW_SITE_MORE) {
	ldmatrix<4, true>(r, row TW_AT_MORE);
}

template <class T> __device__ __forceinline__ void st_shared(T *p, const T &v TW_SITE_MORE) {
#if defined(TW_SM80_EMU)
	tw_emu::shared_access("st.shared", p, (int)sizeof(T), TW_AT);
#endif
	*p = v;
}
template <class T> __device__ __forceinline__ T ld_shared(const T *p TW_SITE_MORE) {
#if defined(TW_SM80_EMU)
	tw_emu::shared_access("ld.shared", p, (int)sizeof(T), TW_AT);
#endif
	return *p;
}
__device__ __forceinline__ void st_shared_b32(void *p, uint32_t v TW_SITE_MORE) {
	st_shared(static_cast<uint32_t *>(p), v TW_AT_MORE);
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
#if defined(TW_SM80_PTX)
	uint32_t r;
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo)); // the first source goes to the upper half
	return r;
#elif defined(TW_SM80_EMU)
	return (uint32_t)tw_emu::f32_to_bf16(lo) | (uint32_t)tw_emu::f32_to_bf16(hi) << 16;
#else
	return sm80_portable::pack_bf16x2(lo, hi);
#endif
}

__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
#if defined(TW_SM80_PTX)
	uint32_t r;
	asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo)); // the first source goes to the upper half
	return r;
#elif defined(TW_SM80_EMU)
	return (uint32_t)tw_emu::f32_to_f16(lo) | (uint32_t)tw_emu::f32_to_f16(hi) << 16;
#else
	return sm80_portable::pack_f16x2(lo, hi);
#endif
}
