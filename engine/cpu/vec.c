// vec.c — see vec.h for the contract of each loop.
//
// The exp-heavy loops are written twice: with AVX2 + FMA intrinsics (amd64,
// where the package is built for x86-64-v3), and as the plain scalar loop
// that states what the vector one computes and also handles each remainder.
// Intrinsics rather than the auto-vectoriser: GCC will not vectorise these
// loops without -ffast-math-like flags, which cgo does not accept and which
// would assume NaN and infinity away.
#include "vec.h"

#include <math.h>
#include <string.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

// exp_f32 is e^x in float32: x = n·ln2 + r with |r| ≤ ln2/2 (ln2 in two
// parts, so the reduction is exact), e^r by its degree-6 Taylor polynomial
// (truncation < 1.2e-7 relative), 2ⁿ assembled in the exponent bits in two
// halves so that n from −150 to 128 stays exact. About 2 ulp; overflow gives
// +Inf, underflow 0, NaN stays NaN.
static inline float exp_f32(float x) {
	if (x != x) return x;
	float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
	float n = rintf(xc * 1.44269504088896341f);
	float r = xc - n * 0.693145751953125f - n * 1.42860682030941723212e-6f;
	float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
	int ni = (int)n, h = ni >> 1;
	uint32_t a = (uint32_t)(h + 127) << 23, b = (uint32_t)(ni - h + 127) << 23;
	float fa, fb;
	memcpy(&fa, &a, 4);
	memcpy(&fb, &b, 4);
	return p * fa * fb;
}

static inline float round_bf16(float f) {
	uint32_t u;
	memcpy(&u, &f, 4);
	uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
	if ((u & 0x7fffffffu) > 0x7f800000u) r = u | 0x00400000u; // NaN: quiet, kept
	memcpy(&f, &r, 4);
	return f;
}

#ifdef __AVX2__
// exp8 is exp_f32 on eight lanes, step for step.
static inline __m256 exp8(__m256 x) {
	__m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
	__m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
	                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), xc);
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723212e-6f), r);
	__m256 p = _mm256_set1_ps(1.0f / 720);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	__m256i ni = _mm256_cvtps_epi32(n), h = _mm256_srai_epi32(ni, 1);
	__m256i bias = _mm256_set1_epi32(127);
	__m256 fa = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, bias), 23));
	__m256 fb = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, h), bias), 23));
	__m256 y = _mm256_mul_ps(_mm256_mul_ps(p, fa), fb);
	return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); // NaN in, NaN out
}

// round8 is round_bf16 on eight lanes.
static inline __m256 round8(__m256 f) {
	__m256i u = _mm256_castps_si256(f);
	__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
	__m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
	r = _mm256_and_si256(r, _mm256_set1_epi32((int)0xffff0000u));
	__m256 nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q);
	__m256 q = _mm256_castsi256_ps(_mm256_or_si256(u, _mm256_set1_epi32(0x00400000)));
	return _mm256_blendv_ps(_mm256_castsi256_ps(r), q, nan);
}

// silu8 returns silu(g) and sigmoid(g) on eight lanes.
static inline __m256 sigmoid8(__m256 g) {
	__m256 one = _mm256_set1_ps(1.0f);
	return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
}
#endif

void twcpu_bf16_to_f32(const uint16_t *src, float *dst, long n) {
	long i = 0;
#ifdef __AVX2__
	for (; i + 8 <= n; i += 8) {
		__m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
		_mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
	}
#endif
	for (; i < n; i++) {
		uint32_t u = (uint32_t)src[i] << 16;
		memcpy(&dst[i], &u, 4);
	}
}

void twcpu_bf16_rows_to_f32(const uint16_t *src, float *dst, long n, long dh, long ld) {
	for (long r = 0; r < n; r++) twcpu_bf16_to_f32(src + r * ld, dst + r * dh, dh);
}

#ifdef __AVX2__
// hsum returns the sum of the eight lanes of v.
static inline float hsum(__m256 v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
	return _mm_cvtss_f32(s);
}
#endif

#ifdef __AVX2__
// widen8 loads eight bf16 values as f32 (exact).
static inline __m256 widen8(const uint16_t *p) {
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}
#endif

static inline float bf16_f32(uint16_t h) {
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

// gemv_rows computes c[j] for the R consecutive rows of w from row j0 (R a
// constant, so that its 2R sums stay in registers): one load of a serves R
// products, and R streams of weights are in flight.
static inline __attribute__((always_inline)) void gemv_rows(float *c, const float *a, const void *w, long ldw, long j0,
                                                            long k, float alpha, float beta, int wbf16, const int R) {
	float s[4] = {0, 0, 0, 0};
	long l = 0;
#ifdef __AVX2__
	__m256 x0[4], x1[4];
	for (int r = 0; r < R; r++) x0[r] = x1[r] = _mm256_setzero_ps();
	for (; l + 16 <= k; l += 16) {
		__m256 a0 = _mm256_loadu_ps(a + l), a1 = _mm256_loadu_ps(a + l + 8);
		for (int r = 0; r < R; r++) {
			const uint16_t *wh = (const uint16_t *)w + (j0 + r) * ldw + l;
			const float *wf = (const float *)w + (j0 + r) * ldw + l;
			x0[r] = _mm256_fmadd_ps(a0, wbf16 ? widen8(wh) : _mm256_loadu_ps(wf), x0[r]);
			x1[r] = _mm256_fmadd_ps(a1, wbf16 ? widen8(wh + 8) : _mm256_loadu_ps(wf + 8), x1[r]);
		}
	}
	for (int r = 0; r < R; r++) s[r] = hsum(_mm256_add_ps(x0[r], x1[r]));
#endif
	for (int r = 0; r < R; r++) {
		const uint16_t *wh = (const uint16_t *)w + (j0 + r) * ldw;
		const float *wf = (const float *)w + (j0 + r) * ldw;
		for (long t = l; t < k; t++) s[r] = fmaf(a[t], wbf16 ? bf16_f32(wh[t]) : wf[t], s[r]);
		c[j0 + r] = beta == 0 ? alpha * s[r] : alpha * s[r] + beta * c[j0 + r];
	}
}

// gemv_nt is gemm_nt for one row of a. Rows of a of 4096 and more (16 kB
// of f32, half a first-level cache) take four rows of w at a time, which
// reads a from the second level a quarter as often: one row of w at a time
// left Llama's down projection (8192) at about 0.8 of OpenBLAS's sgemv,
// where rows of 2048 and less run faster one at a time. Each element sums
// in gemm_nt's order either way.
static inline __attribute__((always_inline)) void gemv_nt(float *c, const float *a, const void *w, long ldw, long n,
                                                          long k, float alpha, float beta, int wbf16) {
	long j = 0;
	if (k >= 4096)
		for (; j + 4 <= n; j += 4) gemv_rows(c, a, w, ldw, j, k, alpha, beta, wbf16, 4);
	for (; j < n; j++) gemv_rows(c, a, w, ldw, j, k, alpha, beta, wbf16, 1);
}

// gemm_nt reads each row of w once for up to four rows of a at a time (a
// decoding step's projections, bound by the weights' bytes), widening bf16
// weights in registers. Each element sums its k products in a fixed order
// (two 8-lane partial sums over 16-element steps, then the lanes, then the
// tail), whatever rows of w the caller splits the work into. Inlined with
// wbf16 a constant, it is two functions.
static inline __attribute__((always_inline)) void gemm_nt(float *c, long ldc, const float *a, long lda, const void *w,
                                                          long ldw, long m, long n, long k, float alpha, float beta,
                                                          int wbf16) {
	if (m == 1) {
		gemv_nt(c, a, w, ldw, n, k, alpha, beta, wbf16);
		return;
	}
	for (long j = 0; j < n; j++) {
		const uint16_t *wh = (const uint16_t *)w + j * ldw;
		const float *wf = (const float *)w + j * ldw;
		for (long i0 = 0; i0 < m; i0 += 4) {
			long mm = m - i0 < 4 ? m - i0 : 4;
			float s[4] = {0, 0, 0, 0};
			long l = 0;
#ifdef __AVX2__
			__m256 x0[4], x1[4];
			for (long r = 0; r < 4; r++) x0[r] = x1[r] = _mm256_setzero_ps();
			for (; l + 16 <= k; l += 16) {
				__m256 w0 = wbf16 ? widen8(wh + l) : _mm256_loadu_ps(wf + l);
				__m256 w1 = wbf16 ? widen8(wh + l + 8) : _mm256_loadu_ps(wf + l + 8);
				for (long r = 0; r < mm; r++) {
					const float *ar = a + (i0 + r) * lda + l;
					x0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(ar), w0, x0[r]);
					x1[r] = _mm256_fmadd_ps(_mm256_loadu_ps(ar + 8), w1, x1[r]);
				}
			}
			for (long r = 0; r < mm; r++) s[r] = hsum(_mm256_add_ps(x0[r], x1[r]));
#endif
			for (; l < k; l++) {
				float wl = wbf16 ? bf16_f32(wh[l]) : wf[l];
				for (long r = 0; r < mm; r++) s[r] = fmaf(a[(i0 + r) * lda + l], wl, s[r]);
			}
			for (long r = 0; r < mm; r++) {
				float *cr = c + (i0 + r) * ldc + j;
				*cr = beta == 0 ? alpha * s[r] : alpha * s[r] + beta * *cr;
			}
		}
	}
}

void twcpu_gemm_nt_bf16(float *c, long ldc, const float *a, long lda, const uint16_t *w, long ldw, long m, long n,
                        long k, float alpha, float beta) {
	gemm_nt(c, ldc, a, lda, w, ldw, m, n, k, alpha, beta, 1);
}

void twcpu_gemm_nt_f32(float *c, long ldc, const float *a, long lda, const float *w, long ldw, long m, long n, long k,
                       float alpha, float beta) {
	gemm_nt(c, ldc, a, lda, w, ldw, m, n, k, alpha, beta, 0);
}

void twcpu_f32_to_bf16(const float *src, uint16_t *dst, long n) {
	long i = 0;
#ifdef __AVX2__
	for (; i + 8 <= n; i += 8) {
		__m256i r = _mm256_srli_epi32(_mm256_castps_si256(round8(_mm256_loadu_ps(src + i))), 16);
		__m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
		_mm_storeu_si128((__m128i *)(dst + i), packed);
	}
#endif
	for (; i < n; i++) {
		float f = round_bf16(src[i]);
		uint32_t u;
		memcpy(&u, &f, 4);
		dst[i] = (uint16_t)(u >> 16);
	}
}

void twcpu_lse_rows(const float *x, long rows, long v, float *lse) {
	for (long r = 0; r < rows; r++) {
		const float *row = x + r * v;
		float m = -INFINITY;
		int nan = 0;
		long j = 0;
#ifdef __AVX2__
		__m256 vmax = _mm256_set1_ps(-INFINITY), vnan = _mm256_setzero_ps();
		for (; j + 8 <= v; j += 8) {
			__m256 x8 = _mm256_loadu_ps(row + j);
			vmax = _mm256_max_ps(vmax, x8);
			vnan = _mm256_or_ps(vnan, _mm256_cmp_ps(x8, x8, _CMP_UNORD_Q));
		}
		float lanes[8];
		_mm256_storeu_ps(lanes, vmax);
		for (int k = 0; k < 8; k++) m = lanes[k] > m ? lanes[k] : m;
		nan = _mm256_movemask_ps(vnan) != 0;
#endif
		for (; j < v; j++) {
			m = row[j] > m ? row[j] : m;
			nan |= row[j] != row[j];
		}
		if (nan) {
			lse[r] = NAN;
			continue;
		}
		if (isinf(m)) {
			lse[r] = m;
			continue;
		}
		double s = 0;
		j = 0;
#ifdef __AVX2__
		__m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
		__m256 vm = _mm256_set1_ps(m);
		for (; j + 8 <= v; j += 8) {
			__m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(row + j), vm));
			acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
			acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
		}
		double part[4];
		_mm256_storeu_pd(part, _mm256_add_pd(acc0, acc1));
		s = (part[0] + part[1]) + (part[2] + part[3]);
#endif
		for (; j < v; j++) s += (double)exp_f32(row[j] - m);
		lse[r] = m + (float)log(s);
	}
}

void twcpu_logsoftmax_grad_rows(const float *x, float *dx, long rows, long v,
                             const float *lse, const float *g, const int32_t *tgt) {
	for (long r = 0; r < rows; r++) {
		const float *row = x + r * v;
		float *out = dx + r * v;
		int32_t t = tgt[r];
		if (t < 0) {
			memset(out, 0, (size_t)v * sizeof(float));
			continue;
		}
		float gr = g[r], l = lse[r];
		long j = 0;
#ifdef __AVX2__
		__m256 vl = _mm256_set1_ps(l), vg = _mm256_set1_ps(-gr);
		for (; j + 8 <= v; j += 8)
			_mm256_storeu_ps(out + j, _mm256_mul_ps(vg, exp8(_mm256_sub_ps(_mm256_loadu_ps(row + j), vl))));
#endif
		for (; j < v; j++) out[j] = -gr * exp_f32(row[j] - l);
		out[t] += gr;
	}
}

void twcpu_swiglu(const float *g, const float *u, float *out, long n, int round) {
	long i = 0;
#ifdef __AVX2__
	for (; i + 8 <= n; i += 8) {
		__m256 gv = _mm256_loadu_ps(g + i);
		__m256 silu = _mm256_mul_ps(gv, sigmoid8(gv));
		if (round) silu = round8(silu);
		_mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(u + i)));
	}
#endif
	for (; i < n; i++) {
		float silu = g[i] * (1.0f / (1.0f + exp_f32(-g[i])));
		if (round) silu = round_bf16(silu);
		out[i] = silu * u[i];
	}
}

void twcpu_swiglu_bwd(const float *g, const float *u, const float *dout, float *dg, float *du,
                   long n, int round) {
	long i = 0;
#ifdef __AVX2__
	__m256 one = _mm256_set1_ps(1.0f);
	for (; i + 8 <= n; i += 8) {
		__m256 gv = _mm256_loadu_ps(g + i), d = _mm256_loadu_ps(dout + i);
		__m256 s = sigmoid8(gv);
		__m256 silu = _mm256_mul_ps(gv, s);
		if (round) silu = round8(silu);
		// silu'(g) = s·(1 + g·(1 − s))
		__m256 dsilu = _mm256_mul_ps(s, _mm256_add_ps(one, _mm256_mul_ps(gv, _mm256_sub_ps(one, s))));
		_mm256_storeu_ps(dg + i, _mm256_mul_ps(_mm256_mul_ps(d, _mm256_loadu_ps(u + i)), dsilu));
		_mm256_storeu_ps(du + i, _mm256_mul_ps(d, silu));
	}
#endif
	for (; i < n; i++) {
		float s = 1.0f / (1.0f + exp_f32(-g[i]));
		float silu = g[i] * s;
		if (round) silu = round_bf16(silu);
		dg[i] = dout[i] * u[i] * (s * (1.0f + g[i] * (1.0f - s)));
		du[i] = dout[i] * silu;
	}
}

// twcpu_adamw is the one loop here whose results must be the same bits on
// every backend and whatever the thread split: kernels/adamw.cu computes the
// same operations, each rounded (no FMA). So the compiler must not contract
// a product and a sum into an FMA (GCC does by default, in the vector loop
// and in the scalar one alike, and differently in each): contraction is off
// for this function, and the scalar loop states the vector loop's operations
// in the same order.
#if defined(__clang__)
#define TW_NO_CONTRACT
#define TW_NO_CONTRACT_BODY _Pragma("clang fp contract(off)")
#elif defined(__GNUC__)
#define TW_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#define TW_NO_CONTRACT_BODY
#else
#define TW_NO_CONTRACT
#define TW_NO_CONTRACT_BODY
#endif

TW_NO_CONTRACT void twcpu_adamw(float *w, const float *g, float *m, float *v, long n, float gscale, float b1,
                                float b2, float eps, float decay, float step, float bc2) {
	TW_NO_CONTRACT_BODY
	const float c1 = 1 - b1, c2 = 1 - b2;
	long i = 0;
#ifdef __AVX2__
	const __m256 vgs = _mm256_set1_ps(gscale), vb1 = _mm256_set1_ps(b1), vb2 = _mm256_set1_ps(b2);
	const __m256 vc1 = _mm256_set1_ps(c1), vc2 = _mm256_set1_ps(c2), veps = _mm256_set1_ps(eps);
	const __m256 vdec = _mm256_set1_ps(decay), vstep = _mm256_set1_ps(step), vbc2 = _mm256_set1_ps(bc2);
	for (; i + 8 <= n; i += 8) {
		__m256 gs = _mm256_mul_ps(_mm256_loadu_ps(g + i), vgs);
		__m256 mi = _mm256_add_ps(_mm256_mul_ps(vb1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(vc1, gs));
		__m256 vi = _mm256_add_ps(_mm256_mul_ps(vb2, _mm256_loadu_ps(v + i)), _mm256_mul_ps(vc2, _mm256_mul_ps(gs, gs)));
		_mm256_storeu_ps(m + i, mi);
		_mm256_storeu_ps(v + i, vi);
		__m256 den = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), vbc2), veps);
		__m256 wi = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(w + i), vdec), _mm256_div_ps(_mm256_mul_ps(vstep, mi), den));
		_mm256_storeu_ps(w + i, wi);
	}
#endif
	for (; i < n; i++) {
		float gs = g[i] * gscale;
		float mi = b1 * m[i] + c1 * gs;
		float vi = b2 * v[i] + c2 * (gs * gs);
		m[i] = mi;
		v[i] = vi;
		w[i] = w[i] * decay - (step * mi) / (sqrtf(vi) / bc2 + eps);
	}
}

double twcpu_sumsq(const float *x, long n) {
	double s = 0;
	long i = 0;
#ifdef __AVX2__
	__m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
	for (; i + 8 <= n; i += 8) {
		__m256 f = _mm256_loadu_ps(x + i);
		__m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(f)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
		a0 = _mm256_fmadd_pd(lo, lo, a0);
		a1 = _mm256_fmadd_pd(hi, hi, a1);
	}
	double part[4];
	_mm256_storeu_pd(part, _mm256_add_pd(a0, a1));
	s = (part[0] + part[1]) + (part[2] + part[3]);
#endif
	for (; i < n; i++) s += (double)x[i] * (double)x[i];
	return s;
}

#ifdef __AVX2__
// The 32-float tiles of the kernels below, in registers: load4 and store4
// move one; fma1x4 adds v·r[0:32] to a; fma2x4 adds va·r[0:32] to a and
// vb·r[0:32] to b, loading r once.
static inline void load4(__m256 a[4], const float *p) {
	for (int i = 0; i < 4; i++) a[i] = _mm256_loadu_ps(p + 8 * i);
}
static inline void store4(float *p, const __m256 a[4]) {
	for (int i = 0; i < 4; i++) _mm256_storeu_ps(p + 8 * i, a[i]);
}
static inline void fma1x4(__m256 a[4], __m256 v, const float *r) {
	for (int i = 0; i < 4; i++) a[i] = _mm256_fmadd_ps(v, _mm256_loadu_ps(r + 8 * i), a[i]);
}
static inline void fma2x4(__m256 a[4], __m256 b[4], __m256 va, __m256 vb, const float *r) {
	for (int i = 0; i < 4; i++) {
		__m256 k = _mm256_loadu_ps(r + 8 * i);
		a[i] = _mm256_fmadd_ps(va, k, a[i]);
		b[i] = _mm256_fmadd_ps(vb, k, b[i]);
	}
}
#endif

// axpy_rows and axpy_rows2 keep a 32-column stripe of each destination in
// registers over every row j (then 8-column stripes, then single columns),
// instead of loading and storing the destination once per row (measured at
// 1024 tokens, 6 heads of 48, 2 threads, with dot_rows2_t's 32 keys below:
// attention's forward 13% and backward 25% faster); each element still
// adds c[j]·rows[j][d] for j ascending, one fused multiply-add at a time.
void twcpu_axpy_rows(float *dst, const float *c, const float *rows, long n, long dh) {
	long d = 0;
#ifdef __AVX2__
	for (; d + 32 <= dh; d += 32) {
		__m256 a[4];
		load4(a, dst + d);
		for (long j = 0; j < n; j++) fma1x4(a, _mm256_set1_ps(c[j]), rows + j * dh + d);
		store4(dst + d, a);
	}
	for (; d + 8 <= dh; d += 8) {
		__m256 a0 = _mm256_loadu_ps(dst + d);
		for (long j = 0; j < n; j++) a0 = _mm256_fmadd_ps(_mm256_set1_ps(c[j]), _mm256_loadu_ps(rows + j * dh + d), a0);
		_mm256_storeu_ps(dst + d, a0);
	}
#endif
	for (; d < dh; d++) {
		float a = dst[d];
		for (long j = 0; j < n; j++) a = fmaf(c[j], rows[j * dh + d], a);
		dst[d] = a;
	}
}

void twcpu_axpy_rows2(float *dst0, float *dst1, const float *c0, const float *c1, const float *rows, long n, long dh) {
	long d = 0;
#ifdef __AVX2__
	for (; d + 32 <= dh; d += 32) {
		__m256 a[4], b[4];
		load4(a, dst0 + d);
		load4(b, dst1 + d);
		for (long j = 0; j < n; j++) fma2x4(a, b, _mm256_set1_ps(c0[j]), _mm256_set1_ps(c1[j]), rows + j * dh + d);
		store4(dst0 + d, a);
		store4(dst1 + d, b);
	}
	for (; d + 8 <= dh; d += 8) {
		__m256 a0 = _mm256_loadu_ps(dst0 + d), b0 = _mm256_loadu_ps(dst1 + d);
		for (long j = 0; j < n; j++) {
			__m256 k = _mm256_loadu_ps(rows + j * dh + d);
			a0 = _mm256_fmadd_ps(_mm256_set1_ps(c0[j]), k, a0);
			b0 = _mm256_fmadd_ps(_mm256_set1_ps(c1[j]), k, b0);
		}
		_mm256_storeu_ps(dst0 + d, a0);
		_mm256_storeu_ps(dst1 + d, b0);
	}
#endif
	for (; d < dh; d++) {
		float a = dst0[d], b = dst1[d];
		for (long j = 0; j < n; j++) {
			a = fmaf(c0[j], rows[j * dh + d], a);
			b = fmaf(c1[j], rows[j * dh + d], b);
		}
		dst0[d] = a;
		dst1[d] = b;
	}
}

float twcpu_exp_shift(float *s, long n, float shift) {
	long j = 0;
	float sum = 0;
#ifdef __AVX2__
	__m256 acc = _mm256_setzero_ps(), vs = _mm256_set1_ps(shift);
	for (; j + 8 <= n; j += 8) {
		__m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), vs));
		_mm256_storeu_ps(s + j, e);
		acc = _mm256_add_ps(acc, e);
	}
	sum = hsum(acc);
#endif
	for (; j < n; j++) {
		s[j] = exp_f32(s[j] - shift);
		sum += s[j];
	}
	return sum;
}

void twcpu_transpose(float *dst, const float *src, long rows, long cols, long ld) {
	for (long r = 0; r < rows; r++)
		for (long c = 0; c < cols; c++) dst[c * ld + r] = src[r * cols + c];
}

// dot_rows computes one query's scores straight from the key rows, eight
// columns per vector and a horizontal sum per key: for a single query the
// transposed block below would cost more to build than its products.
void twcpu_dot_rows(float *dst, const float *x, const float *rows, long n, long dh) {
	for (long j = 0; j < n; j++) {
		const float *r = rows + j * dh;
		long d = 0;
		float s = 0;
#ifdef __AVX2__
		__m256 acc = _mm256_setzero_ps();
		for (; d + 8 <= dh; d += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + d), _mm256_loadu_ps(r + d), acc);
		s = hsum(acc);
#endif
		for (; d < dh; d++) s = fmaf(x[d], r[d], s);
		dst[j] = s;
	}
}

// decode_scores and decode_pv are a decoding step's attention over a block
// of n cached rows of ld elements (f32, or bf16 widened in registers: exact,
// so either gives the same bits as f32 rows), every head of a row before the
// next row, so that the block is read once, in order (head by head, each
// pass over the block took a row's strided pieces). Head i reads its
// group's columns, (i/rep)·dh to (i/rep+1)·dh. Each score sums as dot_rows
// sums it, and each output element adds its terms for j ascending as
// axpy_rows does. Inlined with bf16 a constant, each is two functions.
static inline __attribute__((always_inline)) void decode_scores(float *s, long ns, const float *q, const void *k, long n,
                                                                long h, long rep, long dh, long ld, int bf16) {
	for (long j = 0; j < n; j++) {
		for (long i = 0; i < h; i++) {
			const uint16_t *kh = (const uint16_t *)k + j * ld + (i / rep) * dh;
			const float *kf = (const float *)k + j * ld + (i / rep) * dh, *x = q + i * dh;
			long d = 0;
			float v = 0;
#ifdef __AVX2__
			__m256 acc = _mm256_setzero_ps();
			for (; d + 8 <= dh; d += 8)
				acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + d), bf16 ? widen8(kh + d) : _mm256_loadu_ps(kf + d), acc);
			v = hsum(acc);
#endif
			for (; d < dh; d++) v = fmaf(x[d], bf16 ? bf16_f32(kh[d]) : kf[d], v);
			s[i * ns + j] = v;
		}
	}
}

static inline __attribute__((always_inline)) void decode_pv(float *o, const float *p, long ns, const void *v, long n,
                                                            long h, long rep, long dh, long ld, int bf16) {
	for (long j = 0; j < n; j++) {
		for (long i = 0; i < h; i++) {
			const uint16_t *vh = (const uint16_t *)v + j * ld + (i / rep) * dh;
			const float *vf = (const float *)v + j * ld + (i / rep) * dh;
			float *oi = o + i * dh, c = p[i * ns + j];
			long d = 0;
#ifdef __AVX2__
			__m256 cv = _mm256_set1_ps(c);
			for (; d + 8 <= dh; d += 8)
				_mm256_storeu_ps(oi + d, _mm256_fmadd_ps(cv, bf16 ? widen8(vh + d) : _mm256_loadu_ps(vf + d),
				                                         _mm256_loadu_ps(oi + d)));
#endif
			for (; d < dh; d++) oi[d] = fmaf(c, bf16 ? bf16_f32(vh[d]) : vf[d], oi[d]);
		}
	}
}

void twcpu_decode_scores_f32(float *s, long ns, const float *q, const float *k, long n, long h, long rep, long dh,
                             long ld) {
	decode_scores(s, ns, q, k, n, h, rep, dh, ld, 0);
}

void twcpu_decode_scores_bf16(float *s, long ns, const float *q, const uint16_t *k, long n, long h, long rep, long dh,
                              long ld) {
	decode_scores(s, ns, q, k, n, h, rep, dh, ld, 1);
}

void twcpu_decode_pv_f32(float *o, const float *p, long ns, const float *v, long n, long h, long rep, long dh,
                         long ld) {
	decode_pv(o, p, ns, v, n, h, rep, dh, ld, 0);
}

void twcpu_decode_pv_bf16(float *o, const float *p, long ns, const uint16_t *v, long n, long h, long rep, long dh,
                          long ld) {
	decode_pv(o, p, ns, v, n, h, rep, dh, ld, 1);
}

// The transposed products broadcast x[d] and multiply whole rows of kt, eight
// keys per vector: no horizontal sums, each kt element loaded once per call.
void twcpu_dot_rows_t(float *dst, const float *x, const float *kt, long n, long dh, long ld) {
	long j = 0;
#ifdef __AVX2__
	for (; j + 32 <= n; j += 32) {
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
		for (long d = 0; d < dh; d++) {
			const float *r = kt + d * ld + j;
			__m256 xb = _mm256_set1_ps(x[d]);
			a0 = _mm256_fmadd_ps(xb, _mm256_loadu_ps(r), a0);
			a1 = _mm256_fmadd_ps(xb, _mm256_loadu_ps(r + 8), a1);
			a2 = _mm256_fmadd_ps(xb, _mm256_loadu_ps(r + 16), a2);
			a3 = _mm256_fmadd_ps(xb, _mm256_loadu_ps(r + 24), a3);
		}
		_mm256_storeu_ps(dst + j, a0);
		_mm256_storeu_ps(dst + j + 8, a1);
		_mm256_storeu_ps(dst + j + 16, a2);
		_mm256_storeu_ps(dst + j + 24, a3);
	}
	for (; j + 8 <= n; j += 8) {
		__m256 a0 = _mm256_setzero_ps();
		for (long d = 0; d < dh; d++) a0 = _mm256_fmadd_ps(_mm256_set1_ps(x[d]), _mm256_loadu_ps(kt + d * ld + j), a0);
		_mm256_storeu_ps(dst + j, a0);
	}
#endif
	for (; j < n; j++) {
		float s = 0;
		for (long d = 0; d < dh; d++) s += x[d] * kt[d * ld + j];
		dst[j] = s;
	}
}

void twcpu_dot_rows2_t(float *dst0, float *dst1, const float *x0, const float *x1, const float *kt, long n, long dh, long ld) {
	long j = 0;
#ifdef __AVX2__
	// 32 keys of both rows at a time: eight independent sums, enough to
	// cover the FMA's latency; then 16.
	for (; j + 32 <= n; j += 32) {
		__m256 a[4], b[4];
		for (int i = 0; i < 4; i++) a[i] = b[i] = _mm256_setzero_ps();
		for (long d = 0; d < dh; d++) fma2x4(a, b, _mm256_set1_ps(x0[d]), _mm256_set1_ps(x1[d]), kt + d * ld + j);
		store4(dst0 + j, a);
		store4(dst1 + j, b);
	}
	for (; j + 16 <= n; j += 16) {
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
		for (long d = 0; d < dh; d++) {
			const float *r = kt + d * ld + j;
			__m256 k0 = _mm256_loadu_ps(r), k1 = _mm256_loadu_ps(r + 8);
			__m256 xa = _mm256_set1_ps(x0[d]), xb = _mm256_set1_ps(x1[d]);
			a0 = _mm256_fmadd_ps(xa, k0, a0);
			a1 = _mm256_fmadd_ps(xa, k1, a1);
			b0 = _mm256_fmadd_ps(xb, k0, b0);
			b1 = _mm256_fmadd_ps(xb, k1, b1);
		}
		_mm256_storeu_ps(dst0 + j, a0);
		_mm256_storeu_ps(dst0 + j + 8, a1);
		_mm256_storeu_ps(dst1 + j, b0);
		_mm256_storeu_ps(dst1 + j + 8, b1);
	}
#endif
	if (j < n) {
		twcpu_dot_rows_t(dst0 + j, x0, kt + j, n - j, dh, ld);
		twcpu_dot_rows_t(dst1 + j, x1, kt + j, n - j, dh, ld);
	}
}
