// mma.h — stand-in for CUDA's <mma.h>: nvcuda::wmma for the kernel emulator.
//
// Contract: the m16n16k16 shape with __nv_bfloat16 or half operands
// (matrix_a, matrix_b; row_major or col_major) and float or half
// accumulators. As on a GPU, a fragment is spread over the 32 lanes of a
// warp: each lane holds num_elements = 8 of the tile's 256 elements (lane l
// holds elements 8l..8l+7 of the tile in row-major order; CUDA leaves the
// mapping unspecified, so kernels must not depend on it). Element-wise loops
// over frag.x[0..num_elements) therefore touch every element exactly once,
// as they do on a GPU.
//
// load_matrix_sync, store_matrix_sync and mma_sync are warp collectives:
// all 32 lanes must call them (the emulator aborts if the warp has fewer
// threads, or if the lanes disagree on pointer, ldm or layout). Loads and
// stores check what CUDA requires of them: a 256-bit (32-byte) aligned
// pointer and an ldm that is a multiple of 16 bytes. mma_sync computes the
// tile product once per warp, accumulating in f32 in k order, and rounds
// once to the accumulator type. fill_fragment is lane-local.
#ifndef TW_EMU_MMA_H
#define TW_EMU_MMA_H

#include "tw_emu.h"

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int m, int n, int k, class T, class Layout = void> class fragment {
	static_assert(m == 16 && n == 16 && k == 16, "tw-emu: wmma supports the m16n16k16 shape only");
	static_assert(std::is_same<Use, accumulator>::value ? (std::is_same<T, float>::value || std::is_same<T, __half>::value)
	                                                   : (std::is_same<T, __nv_bfloat16>::value || std::is_same<T, __half>::value),
	              "tw-emu: wmma operands are __nv_bfloat16 or half; accumulators float or half");
	static_assert(std::is_same<Use, accumulator>::value || std::is_same<Layout, row_major>::value ||
	                  std::is_same<Layout, col_major>::value,
	              "tw-emu: matrix_a and matrix_b fragments need a row_major or col_major layout");

public:
	enum { num_elements = 8 };
	typedef T element_type;
	typedef T storage_element_type;
	T x[num_elements];
};

namespace detail {

// What one lane passes to a load or store: checked to be the same in all
// lanes of the warp.
struct MemArgs {
	const void *ptr;
	unsigned ldm;
	int col_major;
	const char *what;
};

inline void check_uniform(void *const *lanes) {
	const MemArgs *a0 = static_cast<const MemArgs *>(lanes[0]);
	for (int l = 1; l < 32; l++) {
		const MemArgs *a = static_cast<const MemArgs *>(lanes[l]);
		if (a->ptr != a0->ptr || a->ldm != a0->ldm || a->col_major != a0->col_major)
			tw_emu::fail("%s: the lanes of a warp disagree (lane 0: ptr %p, ldm %u, %s; lane %d: ptr %p, ldm %u, %s)",
			             a0->what, a0->ptr, a0->ldm, a0->col_major ? "col-major" : "row-major", l, a->ptr, a->ldm,
			             a->col_major ? "col-major" : "row-major");
	}
}

// Checks a lane's tile address and ldm (elements of elem bytes) against
// what wmma requires: the pointer 32-byte aligned, ldm a multiple of 16
// bytes. Then meets the warp's other lanes and checks that they agree.
inline void mem_collective(const void *ptr, unsigned ldm, int col_major, size_t elem, const char *what, const char *file,
                           int line) {
	if ((uintptr_t)ptr % 32 != 0)
		tw_emu::fail("%s at %s:%d: pointer %p is not 32-byte (256-bit) aligned", what, file, line, ptr);
	if (ldm * elem % 16 != 0)
		tw_emu::fail("%s at %s:%d: ldm %u (elements of %zu bytes) is not a multiple of 16 bytes", what, file, line, ldm,
		             elem);
	MemArgs args{ptr, ldm, col_major, what};
	tw_emu::warp_call(check_uniform, &args, what, file, line);
}

// Element e (row-major index in the 16x16 tile) held by this lane at slot i.
inline int tile_index(int i) { return tw_emu::lane_id() * 8 + i; }

template <class T> inline void load_tile(T *x, const T *p, unsigned ldm, bool col_major) {
	for (int i = 0; i < 8; i++) {
		int e = tile_index(i), r = e / 16, c = e % 16;
		x[i] = col_major ? p[(size_t)c * ldm + r] : p[(size_t)r * ldm + c];
	}
}

template <class Tab, class Tc, class Td> struct MmaArgs {
	Td *d;
	const Tab *a, *b;
	const Tc *c;
};

// Gathers the warp's fragments, multiplies once, scatters the result.
template <class Tab, class Tc, class Td> void mma_warp(void *const *lanes) {
	float A[256], B[256], D[256];
	for (int l = 0; l < 32; l++) {
		const MmaArgs<Tab, Tc, Td> *m = static_cast<const MmaArgs<Tab, Tc, Td> *>(lanes[l]);
		for (int i = 0; i < 8; i++) {
			A[l * 8 + i] = float(m->a[i]);
			B[l * 8 + i] = float(m->b[i]);
			D[l * 8 + i] = float(m->c[i]);
		}
	}
	for (int i = 0; i < 16; i++)
		for (int k = 0; k < 16; k++) {
			float a = A[i * 16 + k];
			for (int j = 0; j < 16; j++) D[i * 16 + j] += a * B[k * 16 + j];
		}
	for (int l = 0; l < 32; l++) {
		const MmaArgs<Tab, Tc, Td> *m = static_cast<const MmaArgs<Tab, Tc, Td> *>(lanes[l]);
		for (int i = 0; i < 8; i++) m->d[i] = Td(D[l * 8 + i]);
	}
}

} // namespace detail

template <class Use, class T, class Layout, class V>
inline void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &f, const V &v) {
	for (int i = 0; i < 8; i++) f.x[i] = T(v);
}

template <class Use, class T, class Layout>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const T *p, unsigned ldm,
                             const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
	static_assert(!std::is_same<Use, accumulator>::value, "an accumulator load needs a layout_t argument");
	const bool col = std::is_same<Layout, col_major>::value;
	detail::mem_collective(p, ldm, col, sizeof(T), "wmma::load_matrix_sync", file, line);
	detail::load_tile(f.x, p, ldm, col);
}

template <class T>
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, T> &f, const T *p, unsigned ldm, layout_t layout,
                             const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
	const bool col = layout == mem_col_major;
	detail::mem_collective(p, ldm, col, sizeof(T), "wmma::load_matrix_sync", file, line);
	detail::load_tile(f.x, p, ldm, col);
}

template <class T>
inline void store_matrix_sync(T *p, const fragment<accumulator, 16, 16, 16, T> &f, unsigned ldm, layout_t layout,
                              const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
	const bool col = layout == mem_col_major;
	detail::mem_collective(p, ldm, col, sizeof(T), "wmma::store_matrix_sync", file, line);
	for (int i = 0; i < 8; i++) {
		int e = detail::tile_index(i), r = e / 16, c = e % 16;
		p[col ? (size_t)c * ldm + r : (size_t)r * ldm + c] = f.x[i];
	}
}

template <class Tab, class La, class Lb, class Tc, class Td>
inline void mma_sync(fragment<accumulator, 16, 16, 16, Td> &d, const fragment<matrix_a, 16, 16, 16, Tab, La> &a,
                     const fragment<matrix_b, 16, 16, 16, Tab, Lb> &b, const fragment<accumulator, 16, 16, 16, Tc> &c,
                     const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
	detail::MmaArgs<Tab, Tc, Td> args{d.x, a.x, b.x, c.x};
	tw_emu::warp_call(detail::mma_warp<Tab, Tc, Td>, &args, "wmma::mma_sync", file, line);
}

} // namespace wmma
} // namespace nvcuda

#endif // TW_EMU_MMA_H
