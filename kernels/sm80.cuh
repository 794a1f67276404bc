// sm80.cuh — the sm_80 instructions the bf16 GEMM is built on, one inline
// function each: asynchronous global→shared copies (cp.async) and wmma
// fragment loads from the shared state space (which compile to ldmatrix).
//
// Each function is the instruction itself (inline PTX) when nvcc compiles
// for sm_80 and later, and the emulator's model of that instruction when
// g++ compiles against kernels/emu (tw_emu_sm80.h and mma.h there): under
// the emulator a kernel runs the code path it runs on the GPU, and the
// emulator checks what the instruction requires and models when its results
// become visible. The synchronous fallback serves only nvcc's passes that
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
//   load_frag_shared(f, p, ldm)      wmma.load.{a,b}.sync.aligned.{row,col}.
//       m16n16k16.shared.bf16: wmma::load_matrix_sync of a bf16 matrix_a or
//       matrix_b fragment whose tile lies in shared memory; p 32-byte
//       aligned, ldm a multiple of 8 elements, the same in every lane.
#pragma once

#include <type_traits>

#include <mma.h>

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

// Under the emulator the functions take their caller's file and line, so its
// messages name the kernel's call site.
// TW_SM80_SITE declares them (after other parameters: TW_SM80_SITE_MORE),
// TW_SM80_AT passes them on.
#ifdef TW_SM80_EMU
#define TW_SM80_SITE const char *file = __builtin_FILE(), int line = __builtin_LINE()
#define TW_SM80_SITE_MORE , TW_SM80_SITE
#define TW_SM80_AT file, line
#define TW_SM80_AT_MORE , file, line
#else
#define TW_SM80_SITE
#define TW_SM80_SITE_MORE
#define TW_SM80_AT
#define TW_SM80_AT_MORE
#endif

__device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes TW_SM80_SITE_MORE) {
#if defined(TW_SM80_PTX)
	const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(src_bytes));
#elif defined(TW_SM80_EMU)
	tw_emu::cp_async(dst, src, 16, src_bytes TW_SM80_AT_MORE);
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

template <int N> __device__ __forceinline__ void cp_async_wait(TW_SM80_SITE) {
	static_assert(N >= 0, "cp_async_wait<N>: N is a count of groups");
#if defined(TW_SM80_PTX)
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#elif defined(TW_SM80_EMU)
	tw_emu::cp_async_wait(N, TW_SM80_AT);
#endif
}

template <class Use, class Layout>
__device__ __forceinline__ void load_frag_shared(nvcuda::wmma::fragment<Use, 16, 16, 16, __nv_bfloat16, Layout> &f,
                                                 const __nv_bfloat16 *p, unsigned ldm TW_SM80_SITE_MORE) {
	static_assert(std::is_same<Use, nvcuda::wmma::matrix_a>::value || std::is_same<Use, nvcuda::wmma::matrix_b>::value,
	              "load_frag_shared: matrix_a or matrix_b fragments");
#if defined(TW_SM80_PTX)
	// nvcc 11.8 does not infer the shared state space for bf16 wmma loads (it
	// does for f16): load_matrix_sync becomes four generic 32-bit loads per
	// fragment. With .shared spelled out, the same wmma.load is one ldmatrix.
	constexpr bool b = std::is_same<Use, nvcuda::wmma::matrix_b>::value;
	constexpr bool col = std::is_same<Layout, nvcuda::wmma::col_major>::value;
	unsigned *r = reinterpret_cast<unsigned *>(&f); // 8 bf16 per lane: 4 registers
	const unsigned s = (unsigned)__cvta_generic_to_shared(p);
#define TW_WMMA_LOAD(ab, layout)                                                                              \
	asm volatile("wmma.load." ab ".sync.aligned." layout ".m16n16k16.shared.bf16 {%0, %1, %2, %3}, [%4], %5;\n" \
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])                                                \
	             : "r"(s), "r"(ldm))
	if constexpr (!b && !col) TW_WMMA_LOAD("a", "row");
	else if constexpr (!b) TW_WMMA_LOAD("a", "col");
	else if constexpr (!col) TW_WMMA_LOAD("b", "row");
	else TW_WMMA_LOAD("b", "col");
#undef TW_WMMA_LOAD
#elif defined(TW_SM80_EMU)
	tw_emu::wmma_load_shared(f, p, ldm TW_SM80_AT_MORE);
#else
	nvcuda::wmma::load_matrix_sync(f, p, ldm);
#endif
}
