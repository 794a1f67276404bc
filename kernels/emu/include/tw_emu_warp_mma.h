// tw_emu_warp_mma.h — sm_80's warp-level matrix instructions for the kernel
// emulator: the tensor-core product
//   mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32
// and the shared-memory matrix load
//   ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.shared.b16.
// tw_emu.h includes it; kernels reach it through kernels/sm80.cuh, which is
// the same instructions as inline PTX under nvcc.
//
// The fragment layouts are those of NVIDIA's PTX ISA, sections "Matrix
// Fragments for mma.m16n8k16 with floating point type" and "Warp-level
// matrix load instruction: ldmatrix". In a lane, g = laneid >> 2 (the PTX
// ISA's groupID) and t = laneid & 3 (threadID_in_group); laneid is the
// thread's linear index in the block modulo 32.
//
// Contract:
//  - Registers: a .b32 register with two 16-bit elements holds the one
//    listed first (lower index) in bits 0-15, the other in bits 16-31.
//  - mma_m16n8k16<T>(d, a, b, c), T bf16 or f16: D (16x8, f32) = A (16x16)
//    · B (16x8) + C (16x8, f32), the warp's 32 lanes together. Lane holds
//      a[0] = A[g][2t], A[g][2t+1]        a[1] = A[g+8][2t], A[g+8][2t+1]
//      a[2] = A[g][2t+8], A[g][2t+9]      a[3] = A[g+8][2t+8], A[g+8][2t+9]
//      b[0] = B[2t][g], B[2t+1][g]        b[1] = B[2t+8][g], B[2t+9][g]
//      c[0], c[1] = C[g][2t], C[g][2t+1]  c[2], c[3] = C[g+8][2t], C[g+8][2t+1]
//    and d likewise for D. d may alias c: every lane's inputs are read
//    before any output is written.
//  - Numerics (the emulator's model): D[i][j] is the exact value of
//    C[i][j] + Σ_k A[i][k]·B[k][j], rounded once to f32, to nearest even
//    (subnormal results kept, ±inf past the range). With a NaN among the
//    inputs, an inf times zero, or infs of both signs among the terms the
//    result is NaN (0x7fffffff here); otherwise an inf term gives that inf.
//    It is deterministic and does not depend on the order of the terms or
//    of the threads. The GPU also forms the products exactly, but NVIDIA
//    does not specify how its tensor cores add them (in which order, with
//    how many bits, rounding how; measurements of earlier tensor cores
//    found the terms aligned to the largest one and truncated), so its
//    result may differ from the emulator's in the low bits, relative to
//    the largest of |C[i][j]| and |A[i][k]·B[k][j]|. Tests of kernels must
//    not depend on more than that: compare with a tolerance well above
//    2^-20·(|C[i][j]| + Σ_k |A[i][k]·B[k][j]|) per mma (2^-16 leaves
//    ample room), or use data whose sums are exact in f32, where the GPU
//    and the emulator agree bit for bit.
//  - ldmatrix<NUM, TRANS>(r, row), NUM 1, 2 or 4: loads NUM 8x8 matrices
//    M_0..M_NUM-1 of 16-bit elements from shared memory. Lane 8i+j
//    (i < NUM, j < 8) supplies in row the address of row j of M_i: 16
//    contiguous bytes, 16-byte aligned, wholly in shared memory. The other
//    lanes' addresses are ignored and not checked (sm_80 and later; for
//    sm_75 and older the PTX ISA asks for valid addresses in every lane).
//    Lane receives in r[i] the elements M_i[g][2t], M_i[g][2t+1]; with
//    TRANS, those of the transpose: M_i[2t][g], M_i[2t+1][g]. The rows are
//    read once every lane of the warp has arrived; as on a GPU, writes by
//    other warps need a barrier before the load.
//  - Both are collectives of the whole warp (.sync.aligned): every one of
//    the warp's 32 lanes must execute the same instruction, at the same
//    call site. A warp with fewer than 32 threads, a lane that has
//    returned or waits elsewhere, lanes at different call sites, and, for
//    ldmatrix, a row address that is misaligned or not in shared memory
//    abort with a message naming the call site (and the lane), the kernel,
//    the block and the thread.
//  - The model needs IEEE double arithmetic: it refuses -ffast-math.
#ifndef TW_EMU_WARP_MMA_H
#define TW_EMU_WARP_MMA_H

#ifdef __FAST_MATH__
#error "tw_emu_warp_mma.h: the mma model needs exact IEEE arithmetic; do not compile the emulator with -ffast-math"
#endif

namespace tw_emu {

// ---- The exact sum of an mma's terms, rounded once ---------------------------

namespace exact {

// A signed fixed-point number wide enough for any sum of 17 terms that are
// f32 values or products of two bf16 or two f16 values: all are multiples of
// 2^-266 (the product of two of the smallest bf16 subnormals) and below 2^257
// in magnitude. Two's complement over kWords little-endian 64-bit words; bit
// n weighs 2^(n - kFrac).
constexpr int kWords = 10;
constexpr int kFrac = 320;

struct Fixed {
	uint64_t w[kWords] = {};

	// Adds (or subtracts) m · 2^pos, m < 2^53, 0 ≤ pos < 64·(kWords-1): the
	// shifted m lies in words pos/64 and pos/64 + 1.
	void add(uint64_t m, int pos, bool negative) {
		const int k = pos >> 6, sh = pos & 63;
		const unsigned __int128 v = (unsigned __int128)m << sh;
		uint64_t part[2] = {(uint64_t)v, (uint64_t)(v >> 64)};
		uint64_t carry = 0;
		for (int i = k; i < kWords; i++) {
			const uint64_t x = i - k < 2 ? part[i - k] : 0;
			if (i - k >= 2 && carry == 0) break;
			uint64_t r;
			uint64_t c1, c2;
			if (!negative) {
				c1 = __builtin_add_overflow(w[i], x, &r);
				c2 = __builtin_add_overflow(r, carry, &r);
			} else {
				c1 = __builtin_sub_overflow(w[i], x, &r);
				c2 = __builtin_sub_overflow(r, carry, &r);
			}
			w[i] = r;
			carry = c1 | c2;
		}
	}

	// Adds a finite double that is zero or normal, a multiple of 2^-kFrac,
	// and below 2^300 in magnitude; 17 of them sum to less than 2^305, far
	// from the sign bit (2^319).
	void add(double x) {
		uint64_t u;
		memcpy(&u, &x, 8);
		const int be = (int)(u >> 52 & 0x7ff); // biased exponent: |x| = m·2^(be-1075)
		if (be == 0) return;
		add((u & 0xfffffffffffffull) | 1ull << 52, be - 1075 + kFrac, u >> 63);
	}

	bool bit(int n) const { return n >= 0 && (w[n >> 6] >> (n & 63) & 1); }

	// The 64 bits from bit n ≥ 0 up.
	uint64_t bits_from(int n) const {
		const int k = n >> 6, sh = n & 63;
		uint64_t v = w[k] >> sh;
		if (sh && k + 1 < kWords) v |= w[k + 1] << (64 - sh);
		return v;
	}

	// Whether any of bits 0..n-1 is set.
	bool any_below(int n) const {
		if (n <= 0) return false;
		for (int i = 0; i < (n >> 6); i++)
			if (w[i]) return true;
		return (n & 63) && (w[n >> 6] & ((1ull << (n & 63)) - 1));
	}

	// The value rounded to f32, to nearest even; zero is +0.
	float to_f32() const {
		Fixed a = *this;
		const bool neg = a.w[kWords - 1] >> 63;
		if (neg) { // negate: invert and add one
			uint64_t carry = 1;
			for (int i = 0; i < kWords; i++) {
				a.w[i] = ~a.w[i] + carry;
				carry = carry && a.w[i] == 0;
			}
		}
		int top = -1; // index of the highest set bit
		for (int i = kWords - 1; i >= 0 && top < 0; i--)
			if (a.w[i]) top = i * 64 + 63 - __builtin_clzll(a.w[i]);
		if (top < 0) return 0.0f;
		const int e = top - kFrac;                  // the leading bit weighs 2^e
		const int q = e - 23 > -149 ? e - 23 : -149; // weight of the last bit an f32 keeps
		const int cut = q + kFrac;                  // bits below cut are rounded off
		const int n = top - cut + 1; // bits kept: 24, fewer for subnormals, none below 2^-150
		uint64_t kept = n > 0 ? a.bits_from(cut) & ((1ull << n) - 1) : 0;
		if (a.bit(cut - 1) && (a.any_below(cut - 1) || (kept & 1))) kept++;
		const float r = ldexpf((float)kept, q); // exact, or ±inf past the range
		return neg ? -r : r;
	}
};

// The exact sum of n terms, rounded once to f32. The terms are exact
// (products of two 16-bit floats, or f32 values) and lie in Fixed's range.
inline float sum_slow(const double *t, int n) {
	double s = 0;
	for (int i = 0; i < n; i++) s += t[i];
	if (s != s) return bits_f32(0x7fffffffu);
	if (!std::isfinite(s)) return (float)s; // an inf term and no NaN: the inf
	Fixed f;
	for (int i = 0; i < n; i++) f.add(t[i]);
	return f.to_f32();
}

} // namespace exact

// ---- mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32 ----------

namespace warp_mma {

// Whether every lane of the warp calls from the same site; fails otherwise.
template <class Args> inline void check_same_site(void *const *lanes, const char *what) {
	const Args *a0 = static_cast<const Args *>(lanes[0]);
	for (int l = 1; l < 32; l++) {
		const Args *a = static_cast<const Args *>(lanes[l]);
		if (a->line != a0->line || (a->file != a0->file && strcmp(a->file, a0->file) != 0))
			fail("%s: the lanes of a warp execute different instructions (lane 0 at %s:%d, lane %d at %s:%d); "
			     "all 32 must execute the same one (.sync.aligned)",
			     what, a0->file, a0->line, l, a->file, a->line);
	}
}

struct MmaArgs {
	float *d;
	const uint32_t *a, *b;
	const float *c;
	const char *file;
	int line;
};

enum Elem { kBf16, kF16 };

template <Elem E> inline double decode(uint32_t half) {
	return E == kBf16 ? (double)bf16_to_f32((uint16_t)half) : (double)f16_to_f32((uint16_t)half);
}

// The warp's product, once every lane has arrived.
template <Elem E> void mma_warp(void *const *lanes) {
	check_same_site<MmaArgs>(lanes, E == kBf16 ? "mma.sync.m16n8k16.bf16" : "mma.sync.m16n8k16.f16");
	double A[16][16], B[16][8], C[16][8];
	for (int l = 0; l < 32; l++) {
		const MmaArgs *m = static_cast<const MmaArgs *>(lanes[l]);
		const int g = l >> 2, t = l & 3;
		for (int r = 0; r < 4; r++) { // a[r]: rows g (r even) or g+8, columns 2t (r < 2) or 2t+8
			const int row = g + 8 * (r & 1), col = 2 * t + 8 * (r >> 1);
			A[row][col] = decode<E>(m->a[r] & 0xffffu);
			A[row][col + 1] = decode<E>(m->a[r] >> 16);
		}
		for (int r = 0; r < 2; r++) { // b[r]: rows (k) 2t (+8 for r = 1), column (n) g
			B[2 * t + 8 * r][g] = decode<E>(m->b[r] & 0xffffu);
			B[2 * t + 8 * r + 1][g] = decode<E>(m->b[r] >> 16);
		}
		for (int r = 0; r < 4; r++) C[g + 8 * (r >> 1)][2 * t + (r & 1)] = m->c[r];
	}
	// Fast path: add the terms in double, checking with an error-free
	// transformation (TwoSum) that every addition was exact; the double sum
	// is then the exact sum and one conversion rounds it to f32. The terms
	// are exact in double: a product of two 16-bit floats has at most 22
	// significant bits. Outputs whose sum was not exact (or not finite) are
	// redone exactly.
	double S[16][8], Err[16][8];
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 8; j++) {
			S[i][j] = C[i][j];
			Err[i][j] = 0;
		}
	for (int i = 0; i < 16; i++)
		for (int k = 0; k < 16; k++) {
			const double a = A[i][k];
			for (int j = 0; j < 8; j++) {
				const double x = a * B[k][j], s = S[i][j], y = s + x, bx = y - s;
				const double err = (s - (y - bx)) + (x - bx);
				S[i][j] = y;
				Err[i][j] += fabs(err);
			}
		}
	float D[16][8];
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 8; j++) {
			if (Err[i][j] == 0 && std::isfinite(S[i][j])) {
				D[i][j] = (float)S[i][j];
				continue;
			}
			double terms[17];
			for (int k = 0; k < 16; k++) terms[k] = A[i][k] * B[k][j];
			terms[16] = C[i][j];
			D[i][j] = exact::sum_slow(terms, 17);
		}
	for (int l = 0; l < 32; l++) {
		const MmaArgs *m = static_cast<const MmaArgs *>(lanes[l]);
		const int g = l >> 2, t = l & 3;
		for (int r = 0; r < 4; r++) m->d[r] = D[g + 8 * (r >> 1)][2 * t + (r & 1)];
	}
}

// ---- ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.shared.b16 ------------------

struct LdArgs {
	const unsigned char *row;
	uint32_t *r;
	const char *file;
	int line;
};

template <int NUM, bool TRANS> inline const char *ldmatrix_name() {
	return NUM == 1 ? (TRANS ? "ldmatrix.x1.trans" : "ldmatrix.x1")
	       : NUM == 2 ? (TRANS ? "ldmatrix.x2.trans" : "ldmatrix.x2")
	                  : (TRANS ? "ldmatrix.x4.trans" : "ldmatrix.x4");
}

template <int NUM, bool TRANS> void ldmatrix_warp(void *const *lanes) {
	check_same_site<LdArgs>(lanes, ldmatrix_name<NUM, TRANS>());
	if (banks::on()) {
		uintptr_t rows[8 * NUM];
		for (int i = 0; i < 8 * NUM; i++) rows[i] = (uintptr_t) static_cast<const LdArgs *>(lanes[i])->row;
		const LdArgs *a0 = static_cast<const LdArgs *>(lanes[0]);
		banks::rows16(ldmatrix_name<NUM, TRANS>(), rows, 8 * NUM, a0->file, a0->line);
	}
	uint16_t M[NUM][8][8];
	for (int i = 0; i < NUM; i++)
		for (int j = 0; j < 8; j++) memcpy(M[i][j], static_cast<const LdArgs *>(lanes[8 * i + j])->row, 16);
	for (int l = 0; l < 32; l++) {
		const int g = l >> 2, t = l & 3;
		uint32_t *r = static_cast<const LdArgs *>(lanes[l])->r;
		for (int i = 0; i < NUM; i++) {
			const uint16_t lo = TRANS ? M[i][2 * t][g] : M[i][g][2 * t];
			const uint16_t hi = TRANS ? M[i][2 * t + 1][g] : M[i][g][2 * t + 1];
			r[i] = (uint32_t)lo | (uint32_t)hi << 16;
		}
	}
}

} // namespace warp_mma

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: see the top.
inline void mma_m16n8k16_bf16(float *d, const uint32_t *a, const uint32_t *b, const float *c,
                              const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
	warp_mma::MmaArgs args{d, a, b, c, file, line};
	warp_call(warp_mma::mma_warp<warp_mma::kBf16>, &args, "mma.sync.m16n8k16.bf16", file, line);
}

// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: see the top.
inline void mma_m16n8k16_f16(float *d, const uint32_t *a, const uint32_t *b, const float *c,
                             const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
	warp_mma::MmaArgs args{d, a, b, c, file, line};
	warp_call(warp_mma::mma_warp<warp_mma::kF16>, &args, "mma.sync.m16n8k16.f16", file, line);
}

// ldmatrix.sync.aligned.m8n8.xNUM{.trans}.shared.b16: see the top.
template <int NUM, bool TRANS>
inline void ldmatrix(uint32_t *r, const void *row, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
	static_assert(NUM == 1 || NUM == 2 || NUM == 4, "ldmatrix loads 1, 2 or 4 matrices");
	const char *what = warp_mma::ldmatrix_name<NUM, TRANS>();
	const int lane = lane_id();
	if (lane < 8 * NUM) { // this lane supplies row lane % 8 of matrix lane / 8
		if ((uintptr_t)row % 16 != 0)
			fail("%s at %s:%d: lane %d's row address %p (row %d of matrix %d) is not 16-byte aligned", what, file, line,
			     lane, row, lane % 8, lane / 8);
		if (!in_shared(row, 16))
			fail("%s at %s:%d: lane %d's row address %p (row %d of matrix %d) is not in shared memory", what, file,
			     line, lane, row, lane % 8, lane / 8);
	}
	warp_mma::LdArgs args{static_cast<const unsigned char *>(row), r, file, line};
	warp_call(warp_mma::ldmatrix_warp<NUM, TRANS>, &args, what, file, line);
}

} // namespace tw_emu

#endif // TW_EMU_WARP_MMA_H
