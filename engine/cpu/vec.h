// vec.h — vectorised inner loops of the CPU backend.
//
// AVX2 + FMA on amd64 (the baseline of the machines this runs on), plain C
// elsewhere; exp is our own (about 2 ulp). Each
// function works on contiguous f32 arrays (bf16 as raw uint16); the Go side
// splits work across goroutines and passes each a range. Reductions happen
// inside one call, in an order fixed by the binary, so results do not depend
// on the thread count. NaN and infinities propagate as in scalar code.
#ifndef TWCPU_VEC_H
#define TWCPU_VEC_H

#include <stdint.h>

// dst[i] = src[i] widened from bf16 (exact).
void twcpu_bf16_to_f32(const uint16_t *src, float *dst, long n);
// bf16_rows_to_f32 widens n rows of dh elements, ld apart, into dst [n, dh].
void twcpu_bf16_rows_to_f32(const uint16_t *src, float *dst, long n, long dh, long ld);
// c[i·ldc + j] = alpha·Σ_l a[i·lda + l]·w[j·ldw + l] (+ beta·c, not read
// when beta is 0) for i < m, j < n: a [m, k] f32, w [n, k] bf16 or f32.
void twcpu_gemm_nt_bf16(float *c, long ldc, const float *a, long lda, const uint16_t *w, long ldw, long m, long n,
                        long k, float alpha, float beta);
void twcpu_gemm_nt_f32(float *c, long ldc, const float *a, long lda, const float *w, long ldw, long m, long n, long k,
                       float alpha, float beta);
// dst[i] = src[i] rounded to bf16, to nearest even, NaN kept quiet.
void twcpu_f32_to_bf16(const float *src, uint16_t *dst, long n);

// lse[r] = log Σ_j exp(x[r, j]) for rows × v logits, summed in double.
void twcpu_lse_rows(const float *x, long rows, long v, float *lse);
// dx[r, j] = g[r]·(1[j == tgt[r]] − exp(x[r, j] − lse[r])); rows with
// tgt[r] < 0 are zeroed. dx may equal x.
void twcpu_logsoftmax_grad_rows(const float *x, float *dx, long rows, long v,
                             const float *lse, const float *g, const int32_t *tgt);

// out = r(silu(g))·u, where r rounds to bf16 when round_bf16 is set.
void twcpu_swiglu(const float *g, const float *u, float *out, long n, int round_bf16);
// dg = dout·u·silu'(g), du = dout·r(silu(g)).
void twcpu_swiglu_bwd(const float *g, const float *u, const float *dout, float *dg, float *du,
                   long n, int round_bf16);

// One AdamW step on f32 weights w (the parameter or its master copy):
// gs = gscale·g; m = b1·m + (1−b1)·gs; v = b2·v + (1−b2)·(gs·gs);
// w = w·decay − (step·m) / (sqrt(v)/bc2 + eps), every operation rounded to
// f32 (no FMA): the same bits as kernels/adamw.cu, for any n and alignment.
void twcpu_adamw(float *w, const float *g, float *m, float *v, long n, float gscale,
              float b1, float b2, float eps, float decay, float step, float bc2);

// Σ x² in double.
double twcpu_sumsq(const float *x, long n);

// Attention's block products (engine/cpu/attention.go), rows being a
// row-major [n, dh] block:
//   axpy_rows:  dst += Σ_j c[j]·rows[j]
//   axpy_rows2: dst0 += Σ_j c0[j]·rows[j], dst1 += Σ_j c1[j]·rows[j]
//   dot_rows:   dst[j] = x·rows[j] for j < n (one query's scores)
//   exp_shift:  s[j] = exp(s[j] − shift) for j < n; returns their sum (f32)
void twcpu_axpy_rows(float *dst, const float *c, const float *rows, long n, long dh);
void twcpu_axpy_rows2(float *dst0, float *dst1, const float *c0, const float *c1, const float *rows, long n, long dh);
void twcpu_dot_rows(float *dst, const float *x, const float *rows, long n, long dh);
// A decoding step's attention over n cached rows of ld elements (f32 or
// bf16), H heads of dh reading their group's columns (head i: group
// i/rep); s and p are [H, ns] (ns ≥ n), q and o [H, dh]:
//   decode_scores: s[i, j] = q[i]·k[j, group(i)]
//   decode_pv:     o[i] += Σ_j p[i, j]·v[j, group(i)]
void twcpu_decode_scores_f32(float *s, long ns, const float *q, const float *k, long n, long h, long rep, long dh,
                             long ld);
void twcpu_decode_scores_bf16(float *s, long ns, const float *q, const uint16_t *k, long n, long h, long rep, long dh,
                              long ld);
void twcpu_decode_pv_f32(float *o, const float *p, long ns, const float *v, long n, long h, long rep, long dh,
                         long ld);
void twcpu_decode_pv_bf16(float *o, const float *p, long ns, const uint16_t *v, long n, long h, long rep, long dh,
                          long ld);
float twcpu_exp_shift(float *s, long n, float shift);
// With the block transposed, kt [dh, ld] (key j in column j):
//   dot_rows_t:  dst[j] = x·kt[:, j] for j < n
//   dot_rows2_t: dst0[j] = x0·kt[:, j], dst1[j] = x1·kt[:, j]
//   transpose:   dst[c·ld + r] = src[r·cols + c] for r < rows, c < cols
void twcpu_dot_rows_t(float *dst, const float *x, const float *kt, long n, long dh, long ld);
void twcpu_dot_rows2_t(float *dst0, float *dst1, const float *x0, const float *x1, const float *kt, long n, long dh, long ld);
void twcpu_transpose(float *dst, const float *src, long rows, long cols, long ld);

#endif
