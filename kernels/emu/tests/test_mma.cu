// test_mma.cu — the warp-level matrix instructions of kernels/sm80.cuh that
// a FlashAttention-class kernel keeps its tiles in registers with:
// mma.sync m16n8k16 (bf16, f16) and ldmatrix (x1, x2, x4, .trans).
//   - the fragment layouts, against the PTX ISA's formulas for each element;
//   - ldmatrix against its definition, with rows anywhere in shared memory;
//   - ldmatrix feeding mma, as a kernel loads Q, K and V tiles;
//   - S = Q·K^T kept in registers, its row max and sum over quads
//     (__shfl_xor_sync 1 and 2), P packed to bf16 and O = P·V;
//   - the shuffle-based fallbacks of sm80.cuh against the instructions;
//   - under the emulator only: its numerics (the exact sum rounded once,
//     special values) and its reports of misuse.
// Data whose sums are exact in f32 make the GPU and the emulator agree bit
// for bit; elsewhere the checks allow for the GPU's unspecified rounding.
#include <math.h>
#include <string.h>

#include <random>
#include <string>

#include "../../common.cuh"
#include "../../sm80.cuh"
#include "harness.h"

static const std::string kFile = "test_mma.cu:";

// Host-side bits of 16-bit floats.
static uint16_t bf16_bits(float x) {
	__nv_bfloat16_raw r = __float2bfloat16(x);
	return r.x;
}
static uint16_t f16_bits(float x) {
	__half_raw r = __float2half(x);
	return r.x;
}
static float bf16_value(uint16_t h) {
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}
static float f16_value(uint16_t h) {
	__half_raw r;
	r.x = h;
	return __half2float(__half(r));
}

// ---- (a) The fragment layouts ------------------------------------------------------

// Each lane gathers its fragments from A [16][16], B [16][8] (B[k][n] at
// k*8+n; 16-bit element bits) and C [16][8] by the PTX ISA's formulas for
// element i, runs the mma, and writes its d[0..3] to D [32 lanes][4].
// Also runs sm80.cuh's shuffle fallback on the same fragments: Dp.
template <bool BF16>
__global__ void mma_by_layout(const uint16_t *A, const uint16_t *B, const float *C, float *D, float *Dp) {
	const int lane = threadIdx.x % 32, groupID = lane >> 2, threadID_in_group = lane % 4;
	uint32_t a[4] = {}, b[2] = {};
	float c[4], d[4], dp[4];
	for (int i = 0; i < 8; i++) { // a_i: element i, register i / 2, half i % 2
		const int row = (i < 2 || (4 <= i && i < 6)) ? groupID : groupID + 8;
		const int col = threadID_in_group * 2 + (i & 1) + (i < 4 ? 0 : 8);
		a[i / 2] |= (uint32_t)A[row * 16 + col] << (16 * (i % 2));
	}
	for (int i = 0; i < 4; i++) { // b_i
		const int row = threadID_in_group * 2 + (i & 1) + (i < 2 ? 0 : 8), col = groupID;
		b[i / 2] |= (uint32_t)B[row * 8 + col] << (16 * (i % 2));
	}
	for (int i = 0; i < 4; i++) { // c_i
		const int row = i < 2 ? groupID : groupID + 8, col = threadID_in_group * 2 + (i & 1);
		c[i] = C[row * 8 + col];
	}
	if (BF16) mma_bf16_m16n8k16(d, a, b, c);
	else mma_f16_m16n8k16(d, a, b, c);
	sm80_portable::mma_m16n8k16<BF16>(dp, a, b, c);
	for (int i = 0; i < 4; i++) {
		D[lane * 4 + i] = d[i];
		Dp[lane * 4 + i] = dp[i];
	}
}

// Row and column of lane's d[i] (the PTX ISA's formulas for C and D).
static int d_row(int lane, int i) { return i < 2 ? lane >> 2 : (lane >> 2) + 8; }
static int d_col(int lane, int i) { return (lane % 4) * 2 + (i & 1); }

struct MmaData {
	std::vector<uint16_t> a, b; // bits
	std::vector<float> c;
	MmaData() : a(256), b(128), c(128) {}
};

struct MmaResult {
	bool ok;
	std::vector<float> d, dp; // [16][8] each, placed by the C/D layout
};

template <bool BF16> static MmaResult run_mma_by_layout(const MmaData &m) {
	DeviceBuf<uint16_t> dA(256), dB(128);
	DeviceBuf<float> dC(128), dD(128), dDp(128);
	dA.upload(m.a);
	dB.upload(m.b);
	dC.upload(m.c);
	LAUNCH(1, 32, 0, 0, mma_by_layout<BF16>)(dA.p, dB.p, dC.p, dD.p, dDp.p);
	MmaResult r{cudaGetLastError() == cudaSuccess, std::vector<float>(128), std::vector<float>(128)};
	const std::vector<float> d = dD.download(), dp = dDp.download();
	for (int l = 0; l < 32; l++)
		for (int i = 0; i < 4; i++) {
			r.d[d_row(l, i) * 8 + d_col(l, i)] = d[l * 4 + i];
			r.dp[d_row(l, i) * 8 + d_col(l, i)] = dp[l * 4 + i];
		}
	return r;
}

// Distinct small integers (and quarters in C): every sum is exact in f32,
// so the GPU, the emulator and the fallback agree bit for bit, and an
// element in a wrong place changes the result.
template <bool BF16> static MmaData distinct_data() {
	MmaData m;
	auto bits = [](float x) { return BF16 ? bf16_bits(x) : f16_bits(x); };
	for (int i = 0; i < 256; i++) m.a[i] = bits((float)((i * 97) % 256 - 128));
	for (int i = 0; i < 128; i++) m.b[i] = bits((float)((i * 45) % 128 - 64));
	for (int i = 0; i < 128; i++) m.c[i] = (float)i * 0.25f - 16.0f;
	return m;
}

template <bool BF16> static bool check_layouts() {
	const MmaData m = distinct_data<BF16>();
	const MmaResult r = run_mma_by_layout<BF16>(m);
	if (!r.ok) return false;
	auto val = [](uint16_t h) { return BF16 ? bf16_value(h) : f16_value(h); };
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 8; j++) {
			double want = m.c[i * 8 + j];
			for (int k = 0; k < 16; k++) want += (double)val(m.a[i * 16 + k]) * val(m.b[k * 8 + j]);
			const float got = r.d[i * 8 + j], fb = r.dp[i * 8 + j];
			if (got != (float)want || fb != (float)want) {
				fprintf(stderr, "  %s D[%d][%d]: mma %g, fallback %g, want %g\n", BF16 ? "bf16" : "f16", i, j, got, fb,
				        want);
				return false;
			}
		}
	return true;
}

TEST(mma_layouts) {
	CHECK(check_layouts<true>());
	CHECK(check_layouts<false>());
}

// ---- (a') The emulator's numerics ------------------------------------------------

#ifdef TW_EMU
static uint32_t f32_bits_of(float f) {
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

// D[i][j] for A, B given as lists of (row, col, value); everything else 0.
struct Entry {
	int r, c;
	float v;
};
static MmaResult mma_of(const std::vector<Entry> &a, const std::vector<Entry> &b, const std::vector<Entry> &c) {
	MmaData m;
	for (int k = 0; k < 16; k++) m.b[k * 8 + 7] = 0x8000; // column 7 of B: -0
	for (auto &e : a) m.a[e.r * 16 + e.c] = bf16_bits(e.v);
	for (auto &e : b) m.b[e.r * 8 + e.c] = bf16_bits(e.v);
	for (auto &e : c) m.c[e.r * 8 + e.c] = e.v;
	return run_mma_by_layout<true>(m);
}
#endif

// The exact sum, rounded once; special values as IEEE arithmetic has them.
EMU_TEST(mma_numerics_exact_rounding) {
#ifdef TW_EMU
	const float inf = INFINITY;
	const MmaResult r = mma_of(
		{
			{0, 0, ldexpf(1, -12)}, {0, 1, ldexpf(1, -40)},  // row 0: 1 + 2^-24 + 2^-80
			{1, 0, ldexpf(1, 100)}, {1, 1, -ldexpf(1, 100)}, // row 1: 2^200 - 2^200 + 3
			{1, 2, 3.0f},
			{2, 0, ldexpf(1, -70)}, {2, 1, ldexpf(1, -75)}, {2, 2, ldexpf(1, -100)}, // row 2: f32 subnormals
			{3, 0, ldexpf(1, 100)},                                               // row 3: 2^200
			{4, 0, inf},                                                          // row 4: inf · 0
			{5, 0, inf}, {5, 1, inf},                                             // row 5: inf - inf
			{6, 0, inf}, {6, 1, 1.0f},                                            // row 6: inf + 1
			{7, 0, 3.0f}, {7, 1, 5.0f},                                           // row 7: all terms -0: -0
			{9, 3, -ldexpf(1, -12)}, {9, 4, ldexpf(1, -40)}, {9, 5, -ldexpf(1, -40)}, // rows 9, 10: exact ties
			{10, 3, ldexpf(1, -12)}, {10, 4, ldexpf(1, -40)}, {10, 5, -ldexpf(1, -40)},
		},
		{
			{0, 0, ldexpf(1, -12)}, {1, 0, ldexpf(1, -40)},
			{0, 1, ldexpf(1, 100)}, {1, 1, ldexpf(1, 100)}, {2, 1, 1.0f},
			{0, 2, ldexpf(1, -70)}, {1, 2, ldexpf(1, -75)}, {2, 2, ldexpf(1, -100)},
			{0, 3, ldexpf(1, 100)},
			{0, 4, 0.0f},
			{0, 5, 1.0f}, {1, 5, -1.0f},
			{0, 6, 2.0f}, {1, 6, -1.0f},
			{3, 1, ldexpf(1, -12)}, {4, 1, ldexpf(1, -40)}, {5, 1, ldexpf(1, -40)},
		},
		{{0, 0, 1.0f}, {7, 7, -0.0f}, {9, 1, -(1.0f + ldexpf(1, -23))}, {10, 1, 1.0f + ldexpf(1, -23)}});
	CHECK(r.ok);
	// Rounded once: 1 + 2^-24 + 2^-80 is above the midpoint of 1 and
	// 1 + 2^-23 (a sum rounded to double first would give 1).
	CHECKF(r.d[0] == 1.0f + ldexpf(1, -23), "row 0: %a, want %a", r.d[0], 1.0f + ldexpf(1, -23));
	CHECKF(r.d[1 * 8 + 1] == 3.0f, "row 1: %a, want 3 (the products cancel exactly)", r.d[9]);
	// 2^-140 + 2^-150 + 2^-200: above the midpoint of two f32 subnormals.
	const float sub = ldexpf(1, -140) + ldexpf(1, -149);
	CHECKF(r.d[2 * 8 + 2] == sub, "row 2: %a, want %a", r.d[18], sub);
	CHECKF(r.d[3 * 8 + 3] == inf, "row 3: %a, want inf (past the f32 range)", r.d[27]);
	CHECKF(f32_bits_of(r.d[4 * 8 + 4]) == 0x7fffffffu, "row 4: %a, want NaN (inf times 0)", r.d[36]);
	CHECKF(f32_bits_of(r.d[5 * 8 + 5]) == 0x7fffffffu, "row 5: %a, want NaN (inf - inf)", r.d[45]);
	CHECKF(r.d[6 * 8 + 6] == inf, "row 6: %a, want inf", r.d[54]);
	CHECKF(f32_bits_of(r.d[7 * 8 + 7]) == 0x80000000u, "row 7: %a, want -0", r.d[63]);
	CHECKF(f32_bits_of(r.d[8 * 8 + 0]) == 0, "row 8: %a, want +0", r.d[64]);
	// ∓(1 + 2^-23) ∓ 2^-24 ± 2^-80 ∓ 2^-80: a tie, to even, with terms a
	// double sum cannot hold.
	const float tie = 1.0f + ldexpf(1, -22);
	CHECKF(r.d[9 * 8 + 1] == -tie, "row 9: %a, want %a", r.d[73], -tie);
	CHECKF(r.d[10 * 8 + 1] == tie, "row 10: %a, want %a", r.d[81], tie);
#endif
}

// Random data over wide exponent ranges (sums that double cannot hold
// exactly, subnormals): every output equals the exact sum rounded once,
// computed in binary128, which holds these sums exactly (their terms span
// fewer than 113 bits).
EMU_TEST(mma_numerics_random) {
#ifdef TW_EMU
	std::mt19937 rng(24);
	for (int trial = 0; trial < 120; trial++) {
		const bool bf16 = trial % 2 == 0;
		const int span = trial % 3 == 0 ? 4 : trial % 3 == 1 ? 12 : 20; // exponents in ±span
		std::uniform_int_distribution<int> expo(-span, span), mant(0, 1 << 23);
		auto value = [&](int extra) {
			const float f = ldexpf(1.0f + (float)mant(rng) / (float)(1 << 23), expo(rng) + extra);
			return rng() % 2 ? -f : f;
		};
		MmaData m;
		for (auto &x : m.a) x = bf16 ? bf16_bits(value(0)) : f16_bits(value(0) / 4096.0f);
		for (auto &x : m.b) x = bf16 ? bf16_bits(value(0)) : f16_bits(value(0) / 4096.0f);
		for (auto &x : m.c) x = trial % 5 == 0 ? 0.0f : value(0);
		const MmaResult r = bf16 ? run_mma_by_layout<true>(m) : run_mma_by_layout<false>(m);
		CHECK(r.ok);
		auto val = [&](uint16_t h) { return bf16 ? bf16_value(h) : f16_value(h); };
		for (int i = 0; i < 16; i++)
			for (int j = 0; j < 8; j++) {
				__float128 s = m.c[i * 8 + j];
				for (int k = 0; k < 16; k++) s += (__float128)val(m.a[i * 16 + k]) * (__float128)val(m.b[k * 8 + j]);
				const float want = (float)s, got = r.d[i * 8 + j];
				CHECKF(f32_bits_of(got) == f32_bits_of(want), "trial %d (%s, span %d) D[%d][%d]: %a, want %a", trial,
				       bf16 ? "bf16" : "f16", span, i, j, got, want);
			}
	}
	// Sums just off a rounding midpoint: C[i][j] plus half its ulp
	// (A[i][0]·B[0][j]) plus or minus a term 2^-40 times that
	// (A[i][1]·B[1][j]), which decides the rounding and which a sum in
	// double would lose (it would then tie to even).
	std::uniform_int_distribution<int> ex(-10, 10), mant(0, (1 << 23) - 1);
	for (int trial = 0; trial < 20; trial++) {
		MmaData m;
		int ei[16], fj[8];
		for (int i = 0; i < 16; i++) {
			ei[i] = ex(rng);
			m.a[i * 16] = bf16_bits(ldexpf(1, ei[i]));
			m.a[i * 16 + 1] = bf16_bits((rng() % 2 ? 1 : -1) * ldexpf(1, ei[i] - 40));
		}
		for (int j = 0; j < 8; j++) {
			fj[j] = ex(rng);
			m.b[j] = m.b[8 + j] = bf16_bits(ldexpf(1, fj[j]));
		}
		for (int i = 0; i < 16; i++)
			for (int j = 0; j < 8; j++) {
				const float c = ldexpf(1.0f + (float)mant(rng) / (float)(1 << 23), ei[i] + fj[j] + 24);
				m.c[i * 8 + j] = rng() % 2 ? c : -c;
			}
		const MmaResult r = run_mma_by_layout<true>(m);
		CHECK(r.ok);
		for (int i = 0; i < 16; i++)
			for (int j = 0; j < 8; j++) {
				const __float128 s = (__float128)m.c[i * 8 + j] + (__float128)bf16_value(m.a[i * 16]) * bf16_value(m.b[j]) +
				                     (__float128)bf16_value(m.a[i * 16 + 1]) * bf16_value(m.b[8 + j]);
				const float want = (float)s, got = r.d[i * 8 + j];
				CHECKF(f32_bits_of(got) == f32_bits_of(want), "midpoint trial %d D[%d][%d]: %a, want %a", trial, i, j,
				       got, want);
			}
	}
#endif
}

// ---- (b) ldmatrix against its definition ------------------------------------------

constexpr int kRows = 32, kStride = 24; // shared tile: 32 rows of 24 elements (48 bytes)

__host__ __device__ inline uint16_t tile_value(int r, int c) { return (uint16_t)(0x4000 + r * 64 + c); }
// The row and first column lane l points at: rows in a scrambled order,
// starting at column 0, 8 or 16 (16-byte aligned either way).
__host__ __device__ inline int lane_row(int l) { return (l * 13 + 5) % kRows; }
__host__ __device__ inline int lane_col(int l) { return 8 * (l % 3); }

// out [32 lanes][4]: ldmatrix's registers; outp: the shuffle fallback's.
template <int NUM, bool TRANS> __global__ void ldmatrix_def(uint32_t *out, uint32_t *outp) {
	__shared__ __align__(16) uint16_t tile[kRows * kStride];
	const int lane = threadIdx.x;
	for (int e = lane; e < kRows * kStride; e += 32) tile[e] = tile_value(e / kStride, e % kStride);
	__syncthreads();
	const void *row = &tile[lane_row(lane) * kStride + lane_col(lane)];
	const void *fallback_row = row;
#ifdef TW_EMU
	if (lane >= 8 * NUM) row = nullptr; // ignored: not even checked
#endif
	uint32_t r[4] = {}, rp[4] = {};
	if (NUM == 1 && !TRANS) ldmatrix_x1(r, row);
	if (NUM == 2 && !TRANS) ldmatrix_x2(r, row);
	if (NUM == 4 && !TRANS) ldmatrix_x4(r, row);
	if (NUM == 1 && TRANS) ldmatrix_x1_trans(r, row);
	if (NUM == 2 && TRANS) ldmatrix_x2_trans(r, row);
	if (NUM == 4 && TRANS) ldmatrix_x4_trans(r, row);
	sm80_portable::ldmatrix<NUM, TRANS>(rp, fallback_row);
	for (int i = 0; i < 4; i++) {
		out[lane * 4 + i] = r[i];
		outp[lane * 4 + i] = rp[i];
	}
}

template <int NUM, bool TRANS> static bool check_ldmatrix() {
	DeviceBuf<uint32_t> out(128), outp(128);
	LAUNCH(1, 32, 0, 0, ldmatrix_def<NUM, TRANS>)(out.p, outp.p);
	if (cudaGetLastError() != cudaSuccess) return false;
	const std::vector<uint32_t> got = out.download(), gotp = outp.download();
	// M_i[j][c]: row j of matrix i is the row lane 8i+j points at.
	auto M = [](int i, int j, int c) { return (uint32_t)tile_value(lane_row(8 * i + j), lane_col(8 * i + j) + c); };
	for (int l = 0; l < 32; l++)
		for (int i = 0; i < 4; i++) {
			const int g = l / 4, t = l % 4;
			uint32_t want = 0;
			if (i < NUM) want = TRANS ? M(i, 2 * t, g) | M(i, 2 * t + 1, g) << 16 : M(i, g, 2 * t) | M(i, g, 2 * t + 1) << 16;
			if (got[l * 4 + i] != want || gotp[l * 4 + i] != want) {
				fprintf(stderr, "  ldmatrix x%d%s lane %d r[%d]: 0x%08x, fallback 0x%08x, want 0x%08x\n", NUM,
				        TRANS ? ".trans" : "", l, i, got[l * 4 + i], gotp[l * 4 + i], want);
				return false;
			}
		}
	return true;
}

TEST(ldmatrix_definition) {
	CHECK((check_ldmatrix<1, false>()));
	CHECK((check_ldmatrix<2, false>()));
	CHECK((check_ldmatrix<4, false>()));
	CHECK((check_ldmatrix<1, true>()));
	CHECK((check_ldmatrix<2, true>()));
	CHECK((check_ldmatrix<4, true>()));
}

// ---- (c) ldmatrix feeding mma -------------------------------------------------------

constexpr int kLd = 24; // shared row stride, elements (48 bytes)

// D [16][8] = A·B + 0 for A [16][16] row-major, with B [16][8] loaded two
// ways: from Bt [8][16] (B[k][n] at Bt[n][k], as K in S = Q·K^T) with
// ldmatrix_x2, and from B [16][8] (as V in O = P·V) with ldmatrix_x2_trans.
// D1, D2 [16][8] row-major.
template <bool BF16>
__global__ void ldmatrix_mma(const uint16_t *A, const uint16_t *Bt, const uint16_t *B, float *D1, float *D2) {
	__shared__ __align__(16) uint16_t sA[16 * kLd], sBt[8 * kLd], sB[16 * kLd];
	const int lane = threadIdx.x;
	for (int e = lane; e < 256; e += 32) sA[e / 16 * kLd + e % 16] = A[e];
	for (int e = lane; e < 128; e += 32) {
		sBt[e / 16 * kLd + e % 16] = Bt[e];
		sB[e / 8 * kLd + e % 8] = B[e];
	}
	__syncthreads();
	uint32_t a[4], b1[2], b2[2];
	ldmatrix_x4(a, &sA[(lane % 16) * kLd + 8 * (lane / 16)]);
	ldmatrix_x2(b1, &sBt[(lane % 8) * kLd + 8 * (lane / 8 % 2)]);
	ldmatrix_x2_trans(b2, &sB[(lane % 16) * kLd]);
	const float zero[4] = {0, 0, 0, 0};
	float d1[4], d2[4];
	if (BF16) {
		mma_bf16_m16n8k16(d1, a, b1, zero);
		mma_bf16_m16n8k16(d2, a, b2, zero);
	} else {
		mma_f16_m16n8k16(d1, a, b1, zero);
		mma_f16_m16n8k16(d2, a, b2, zero);
	}
	const int g = lane / 4, t = lane % 4;
	for (int i = 0; i < 4; i++) {
		const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
		D1[row * 8 + col] = d1[i];
		D2[row * 8 + col] = d2[i];
	}
}

template <bool BF16> static bool check_ldmatrix_mma() {
	const MmaData m = distinct_data<BF16>(); // b as B[k][n]
	std::vector<uint16_t> bt(128);
	for (int k = 0; k < 16; k++)
		for (int n = 0; n < 8; n++) bt[n * 16 + k] = m.b[k * 8 + n];
	DeviceBuf<uint16_t> dA(256), dBt(128), dB(128);
	DeviceBuf<float> d1(128), d2(128);
	dA.upload(m.a);
	dBt.upload(bt);
	dB.upload(m.b);
	LAUNCH(1, 32, 0, 0, ldmatrix_mma<BF16>)(dA.p, dBt.p, dB.p, d1.p, d2.p);
	if (cudaGetLastError() != cudaSuccess) return false;
	const std::vector<float> g1 = d1.download(), g2 = d2.download();
	auto val = [](uint16_t h) { return BF16 ? bf16_value(h) : f16_value(h); };
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 8; j++) {
			double want = 0;
			for (int k = 0; k < 16; k++) want += (double)val(m.a[i * 16 + k]) * val(m.b[k * 8 + j]);
			if (g1[i * 8 + j] != (float)want || g2[i * 8 + j] != (float)want) {
				fprintf(stderr, "  %s D[%d][%d]: via ldmatrix %g, via ldmatrix.trans %g, want %g\n", BF16 ? "bf16" : "f16",
				        i, j, g1[i * 8 + j], g2[i * 8 + j], want);
				return false;
			}
		}
	return true;
}

TEST(ldmatrix_feeds_mma) {
	CHECK(check_ldmatrix_mma<true>());
	CHECK(check_ldmatrix_mma<false>());
}

// ---- (d) S in registers: one FlashAttention step -------------------------------------

constexpr int kDim = 64, kKeys = 16, kQLd = kDim + 8; // 144-byte rows: 16-byte aligned

// One warp, one 16-query tile against 16 keys: S = Q·K^T (16x16, two mma
// tiles of 8 keys, four k-steps of 16 dims), each row's max and sum of
// exp2((S - max)·scale) over its quad, P packed to bf16 as the A fragment
// of O = P·V (16x64: eight tiles of 8 dims), divided by the row sum.
// Q, K, V [16][64] bf16 bits. Out: S [16][16], Mx [16], L [16], O [16][64].
__global__ void attention_step(const uint16_t *Q, const uint16_t *K, const uint16_t *V, float scale, float *S,
                               float *Mx, float *L, float *O) {
	__shared__ __align__(16) uint16_t sQ[16 * kQLd], sK[kKeys * kQLd], sV[kKeys * kQLd];
	const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
	for (int e = lane; e < 16 * kDim; e += 32) {
		const int r = e / kDim, c = e % kDim;
		sQ[r * kQLd + c] = Q[e];
		sK[r * kQLd + c] = K[e];
		sV[r * kQLd + c] = V[e];
	}
	__syncthreads();
	float s[2][4] = {}; // [key tile][c register]
	for (int kk = 0; kk < kDim; kk += 16) {
		uint32_t a[4], b[4];
		ldmatrix_x4(a, &sQ[(lane % 16) * kQLd + kk + 8 * (lane / 16)]);
		// Matrices: keys 0-7 dims kk..+7, keys 0-7 dims kk+8..+15, then keys 8-15.
		ldmatrix_x4(b, &sK[(8 * (lane / 16) + lane % 8) * kQLd + kk + 8 * (lane / 8 % 2)]);
		mma_bf16_m16n8k16(s[0], a, b, s[0]);
		mma_bf16_m16n8k16(s[1], a, b + 2, s[1]);
	}
	for (int n = 0; n < 2; n++)
		for (int i = 0; i < 4; i++) S[(g + 8 * (i / 2)) * kKeys + 8 * n + 2 * t + i % 2] = s[n][i];
	// Rows g (registers 0, 1) and g + 8 (registers 2, 3): a quad holds a row.
	float mx[2], sum[2], p[2][4];
	for (int h = 0; h < 2; h++) {
		float m = fmaxf(fmaxf(s[0][2 * h], s[0][2 * h + 1]), fmaxf(s[1][2 * h], s[1][2 * h + 1]));
		m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
		m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
		float l = 0;
		for (int n = 0; n < 2; n++)
			for (int e = 0; e < 2; e++) {
				p[n][2 * h + e] = exp2f((s[n][2 * h + e] - m) * scale);
				l += p[n][2 * h + e];
			}
		l += __shfl_xor_sync(0xffffffffu, l, 1);
		l += __shfl_xor_sync(0xffffffffu, l, 2);
		mx[h] = m;
		sum[h] = l;
	}
	if (t == 0)
		for (int h = 0; h < 2; h++) {
			Mx[g + 8 * h] = mx[h];
			L[g + 8 * h] = sum[h];
		}
	// P's accumulators, keys 0-7 and 8-15 side by side, are the A fragment.
	const uint32_t pa[4] = {pack_bf16x2(p[0][0], p[0][1]), pack_bf16x2(p[0][2], p[0][3]), pack_bf16x2(p[1][0], p[1][1]),
	                        pack_bf16x2(p[1][2], p[1][3])};
	for (int dd = 0; dd < kDim; dd += 16) {
		uint32_t b[4]; // V rows are keys (k), columns dims (n): transposed loads
		ldmatrix_x4_trans(b, &sV[(lane % 16) * kQLd + dd + 8 * (lane / 16)]);
		float o[2][4] = {};
		mma_bf16_m16n8k16(o[0], pa, b, o[0]);
		mma_bf16_m16n8k16(o[1], pa, b + 2, o[1]);
		for (int n = 0; n < 2; n++)
			for (int i = 0; i < 4; i++)
				O[(g + 8 * (i / 2)) * kDim + dd + 8 * n + 2 * t + i % 2] = o[n][i] / sum[i / 2];
	}
}

TEST(mma_attention_step) {
	std::mt19937 rng(7);
	std::uniform_int_distribution<int> eighths(-8, 8);
	// Q and K in eighths: S's sums are exact in f32 on any hardware.
	std::vector<float> q(16 * kDim), k(kKeys * kDim), v(kKeys * kDim);
	std::vector<uint16_t> qb(q.size()), kb(k.size()), vb(v.size());
	for (size_t i = 0; i < q.size(); i++) {
		q[i] = eighths(rng) / 8.0f;
		k[i] = eighths(rng) / 8.0f;
		v[i] = bf16_value(bf16_bits(std::uniform_real_distribution<float>(-1, 1)(rng)));
		qb[i] = bf16_bits(q[i]);
		kb[i] = bf16_bits(k[i]);
		vb[i] = bf16_bits(v[i]);
	}
	const float scale = 1.4426950f / 8.0f; // log2(e) / sqrt(64)
	DeviceBuf<uint16_t> dq(qb.size()), dk(kb.size()), dv(vb.size());
	DeviceBuf<float> dS(16 * kKeys), dM(16), dL(16), dO(16 * kDim);
	dq.upload(qb);
	dk.upload(kb);
	dv.upload(vb);
	LAUNCH(1, 32, 0, 0, attention_step)(dq.p, dk.p, dv.p, scale, dS.p, dM.p, dL.p, dO.p);
	CUDA_OK(cudaGetLastError());
	const std::vector<float> S = dS.download(), M = dM.download(), L = dL.download(), O = dO.download();
#ifdef TW_EMU
	const double tol = 1e-5; // the host's exp2f, P rounded alike: only the last mma's rounding differs
#else
	const double tol = 5e-3; // the GPU's exp2f may round P to the neighbouring bf16
#endif
	for (int r = 0; r < 16; r++) {
		float s[kKeys], m = -INFINITY, l = 0;
		for (int j = 0; j < kKeys; j++) {
			double x = 0;
			for (int d = 0; d < kDim; d++) x += (double)q[r * kDim + d] * k[j * kDim + d];
			s[j] = (float)x;
			CHECKF(S[r * kKeys + j] == s[j], "S[%d][%d]: %g, want %g", r, j, S[r * kKeys + j], s[j]);
			m = fmaxf(m, s[j]);
		}
		CHECKF(M[r] == m, "row %d max: %g, want %g", r, M[r], m);
		float p[kKeys];
		for (int j = 0; j < kKeys; j++) {
			p[j] = exp2f((s[j] - m) * scale);
			l += p[j];
		}
		CHECKF(fabs(L[r] - l) <= 1e-5 * l, "row %d sum: %.8g, want %.8g", r, L[r], l);
		for (int d = 0; d < kDim; d++) {
			double o = 0;
			for (int j = 0; j < kKeys; j++) o += (double)bf16_value(bf16_bits(p[j])) * v[j * kDim + d];
			o /= l;
			CHECKF(fabs(O[r * kDim + d] - o) <= tol * (1 + fabs(o)), "O[%d][%d]: %.8g, want %.8g", r, d, O[r * kDim + d],
			       o);
		}
	}
}

// ---- Packing two floats into a register ------------------------------------------------

// out [32][2]: pack_bf16x2 and pack_f16x2 of lane's (x[2l], x[2l+1]).
__global__ void pack_pairs(const float *x, uint32_t *out) {
	const int l = threadIdx.x;
	out[2 * l] = pack_bf16x2(x[2 * l], x[2 * l + 1]);
	out[2 * l + 1] = pack_f16x2(x[2 * l], x[2 * l + 1]);
}

TEST(pack_x2_round_to_nearest_even) {
	// Values at and beside the rounding midpoints of both formats.
	std::vector<float> x(64);
	const float special[] = {1.0f + ldexpf(1, -8),  1.0f + 3 * ldexpf(1, -8), 1.0f + ldexpf(1, -8) + ldexpf(1, -20),
	                         -1.0f - ldexpf(1, -11), 1.0f + 3 * ldexpf(1, -11), 65520.0f, 65519.0f, ldexpf(1, -25),
	                         3e38f, -0.0f, 0.1f, -2.5f};
	for (int i = 0; i < 64; i++) x[i] = i < 12 ? special[i] : (float)(i * 7919 % 1000) / 37.0f - 13.0f;
	DeviceBuf<float> dx(64);
	DeviceBuf<uint32_t> out(64);
	dx.upload(x);
	LAUNCH(1, 32, 0, 0, pack_pairs)(dx.p, out.p);
	CUDA_OK(cudaGetLastError());
	const std::vector<uint32_t> got = out.download();
	for (int l = 0; l < 32; l++) {
		const uint32_t bf = (uint32_t)bf16_bits(x[2 * l]) | (uint32_t)bf16_bits(x[2 * l + 1]) << 16;
		const uint32_t hf = (uint32_t)f16_bits(x[2 * l]) | (uint32_t)f16_bits(x[2 * l + 1]) << 16;
		CHECKF(got[2 * l] == bf, "pack_bf16x2(%a, %a): 0x%08x, want 0x%08x", x[2 * l], x[2 * l + 1], got[2 * l], bf);
		CHECKF(got[2 * l + 1] == hf, "pack_f16x2(%a, %a): 0x%08x, want 0x%08x", x[2 * l], x[2 * l + 1], got[2 * l + 1],
		       hf);
	}
	// The midpoints themselves, checked against the rule: ties to even.
	CHECK(bf16_bits(1.0f + ldexpf(1, -8)) == 0x3f80 && bf16_bits(1.0f + 3 * ldexpf(1, -8)) == 0x3f82);
	CHECK(f16_bits(1.0f + ldexpf(1, -11)) == 0x3c00 && f16_bits(65520.0f) == 0x7c00);
}

// ---- (e) What the emulator reports ---------------------------------------------------
// Each kernel breaks one requirement, on a line the test names.

static const int kLdMisalignedLine = __LINE__ + 6;
__global__ void ld_misaligned(uint32_t *out) {
	__shared__ __align__(16) uint16_t tile[8 * kLd];
	const int lane = threadIdx.x;
	const uint16_t *row = &tile[(lane % 8) * kLd];
	uint32_t r[1];
	ldmatrix_x1(r, lane == 3 ? row + 4 : row); // the bug: lane 3's row is 8-byte aligned
	out[lane] = r[0];
}

static const int kLdGlobalLine = __LINE__ + 4;
__global__ void ld_global(const uint16_t *g, uint32_t *out) {
	const int lane = threadIdx.x;
	uint32_t r[2];
	ldmatrix_x2_trans(r, g + (lane % 16) * 8); // the bug: global memory
	out[lane] = r[0];
}

static const int kLdLocalLine = __LINE__ + 5;
__global__ void ld_local(uint32_t *out) {
	__align__(16) uint16_t local[8 * 8] = {};
	const int lane = threadIdx.x;
	uint32_t r[4];
	ldmatrix_x4(r, &local[(lane % 8) * 8]); // the bug: local memory
	out[lane] = r[0];
}

static const int kLdDivergentLine = __LINE__ + 7;
__global__ void ld_divergent(uint32_t *out) {
	__shared__ __align__(16) uint16_t tile[32 * 8];
	const int lane = threadIdx.x;
	tile[lane * 8] = 0;
	__syncwarp();
	uint32_t r[4];
	if (lane < 16) ldmatrix_x4(r, &tile[lane * 8]); // the bug: two instructions
	else ldmatrix_x4(r, &tile[lane * 8]);
	out[lane] = r[0];
}

static const int kMmaLine = __LINE__ + 6;
__global__ void mma_partial(float *out, int lanes) {
	const int lane = threadIdx.x;
	if (lane >= lanes) return; // the bug when lanes < 32: they skip the mma
	const uint32_t a[4] = {}, b[2] = {};
	float d[4] = {};
	mma_bf16_m16n8k16(d, a, b, d);
	out[lane] = d[0];
}

EMU_CHILD(ld_misaligned) {
	DeviceBuf<uint32_t> out(32);
	LAUNCH(1, 32, 0, 0, ld_misaligned)(out.p);
}
EMU_CHILD(ld_global) {
	DeviceBuf<uint16_t> g(256);
	DeviceBuf<uint32_t> out(32);
	LAUNCH(1, 32, 0, 0, ld_global)(g.p, out.p);
}
EMU_CHILD(ld_local) {
	DeviceBuf<uint32_t> out(32);
	LAUNCH(1, 32, 0, 0, ld_local)(out.p);
}
EMU_CHILD(ld_divergent) {
	DeviceBuf<uint32_t> out(32);
	LAUNCH(1, 32, 0, 0, ld_divergent)(out.p);
}
EMU_CHILD(mma_early_return) {
	DeviceBuf<float> out(32);
	LAUNCH(1, 32, 0, 0, mma_partial)(out.p, 27);
}
EMU_CHILD(mma_short_warp) {
	DeviceBuf<float> out(32);
	LAUNCH(1, 16, 0, 0, mma_partial)(out.p, 32);
}

EMU_TEST(diag_ldmatrix_mma) {
	auto at = [](int line) { return kFile + std::to_string(line); };
	CHECK(expect_abort("ld_misaligned", {},
	                   {"ldmatrix.x1 at ", at(kLdMisalignedLine), "lane 3's row address",
	                    "(row 3 of matrix 0) is not 16-byte aligned", "kernel \"ld_misaligned\""}));
	CHECK(expect_abort("ld_global", {}, {"ldmatrix.x2.trans at ", at(kLdGlobalLine), "is not in shared memory"}));
	CHECK(expect_abort("ld_local", {}, {"ldmatrix.x4 at ", at(kLdLocalLine), "is not in shared memory"}));
	// (Call sites are the paths the compiler was given: the checks look for
	// the file name and line.)
	CHECK(expect_abort("ld_divergent", {},
	                   {"ldmatrix.x4: the lanes of a warp execute different instructions (lane 0 at ",
	                    at(kLdDivergentLine) + ", lane 16 at ", at(kLdDivergentLine + 1) + ")"}));
	CHECK(expect_abort("mma_early_return", {},
	                   {"kernel \"mma_partial\"", "no thread can go on",
	                    "threads 0-26: wait at mma.sync.m16n8k16.bf16(mask 0xffffffff) ", at(kMmaLine),
	                    "threads 27-31: have returned"}));
	CHECK(expect_abort("mma_short_warp", {},
	                   {"mma.sync.m16n8k16.bf16(mask 0xffffffff) at ", at(kMmaLine),
	                    "names lanes this warp does not have (it has 16 threads"}));
}
