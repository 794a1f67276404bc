/*
 * kernels.h — the C launchers of turnwise's CUDA kernels, called from Go
 * through cgo (engine/cuda). Plain C: no C++ types cross this boundary.
 *
 * Every launcher implements the engine.Backend op of the same name; the
 * contract written on that Go method (shapes, dtypes, what is overwritten or
 * accumulated) is the contract here, and the CPU backend (engine/cpu) is the
 * reference its results are tested against. Each .cu file opens with the
 * contracts of its launchers and the design of its kernels.
 *
 * Conventions, for every launcher:
 *  - Pointers are device pointers (cudaMalloc'd; host memory under the
 *    emulator). Float data are passed as void* with a tw_dtype saying what
 *    they hold; token ids, positions and segments are int32_t*.
 *  - Extents are int64_t; a zero extent launches nothing and succeeds.
 *  - Unless a contract says otherwise, arguments do not alias.
 *  - stream is a cudaStream_t (struct CUstream_st*, the same handle type as
 *    the driver API's CUstream); 0 is the default stream. The launcher only
 *    enqueues work; it is done when the stream is synchronised (under the
 *    emulator it is done on return).
 *  - The result is cudaSuccess, cudaErrorInvalidValue for a dtype or shape
 *    combination the kernels do not implement, or the launch's error
 *    (cudaGetLastError() after the launch, on the calling thread).
 *  - Launchers that need scratch memory take a workspace pointer whose size in
 *    bytes a *_workspace function returns; the caller allocates it.
 *  - Grids never depend on device data: launchers do not read device memory.
 *
 * Built twice from the same sources (see CMakeLists.txt): with nvcc into
 * build/cuda/libtwkernels_cuda.a, and with g++ against kernels/emu into
 * build/emu/libtwkernels_emu.a. Including this header needs
 * cuda_runtime_api.h on the include path: the CUDA toolkit's, or
 * kernels/emu/include for the emulator.
 */
#ifndef TW_KERNELS_H
#define TW_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types, numbered as engine.DType. */
typedef enum { TW_F32 = 0, TW_BF16 = 1, TW_F16 = 2, TW_I32 = 3 } tw_dtype;

/* ---- elementwise.cu ------------------------------------------------------ */

/* x[i] = v (rounded to dt), i < n. */
cudaError_t tw_fill(void *x, tw_dtype dt, int64_t n, float v, cudaStream_t stream);
/* dst[i] = src[i] converted from sdt to ddt (round to nearest even; NaN kept). */
cudaError_t tw_cast(void *dst, tw_dtype ddt, const void *src, tw_dtype sdt, int64_t n, cudaStream_t stream);
/* out = a + b, all of dtype dt; out may alias a or b. */
cudaError_t tw_add(void *out, const void *a, const void *b, tw_dtype dt, int64_t n, cudaStream_t stream);

/* ---- embedding.cu -------------------------------------------------------- */

/* out[i, :] = table[ids[i], :]; out [n, d] odt, table [v, d] tdt. */
cudaError_t tw_embedding(void *out, tw_dtype odt, const void *table, tw_dtype tdt, const int32_t *ids,
                         int64_t n, int64_t d, cudaStream_t stream);
/* dtable[ids[i], :] += dout[i, :], summed in token order (deterministic).
 * dtable [v, d] tdt, dout [n, d] odt. */
cudaError_t tw_embedding_backward(void *dtable, tw_dtype tdt, const void *dout, tw_dtype odt,
                                  const int32_t *ids, int64_t n, int64_t v, int64_t d, cudaStream_t stream);

/* ---- rmsnorm.cu ---------------------------------------------------------- */

/* out = w·round(x·rstd), rstd = 1/sqrt(mean(x²) + eps) per row.
 * out, x [n, d] dt; w [d] wdt; rstd [n] f32. */
cudaError_t tw_rmsnorm(void *out, float *rstd, const void *x, const void *w, tw_dtype dt, tw_dtype wdt,
                       int64_t n, int64_t d, float eps, cudaStream_t stream);
/* resid = x + delta, then RMSNorm of resid into out, rstd; resid may alias x. */
cudaError_t tw_add_rmsnorm(void *resid, void *out, float *rstd, const void *x, const void *delta, const void *w,
                           tw_dtype dt, tw_dtype wdt, int64_t n, int64_t d, float eps, cudaStream_t stream);
/* dx += rstd·(g − n·mean(g·n)), dw += Σ_rows dout·n, with n = x·rstd,
 * g = dout·w. dx, dout, x [n, d] dt; w, dw [d] wdt (dw may be NULL).
 * dw is summed in a fixed order (deterministic): see rmsnorm_workspace. */
cudaError_t tw_rmsnorm_backward(void *dx, void *dw, const void *dout, const void *x, const void *w,
                                const float *rstd, tw_dtype dt, tw_dtype wdt, int64_t n, int64_t d,
                                void *workspace, cudaStream_t stream);
size_t tw_rmsnorm_backward_workspace(int64_t n, int64_t d);

/* ---- rope.cu ------------------------------------------------------------- */

/* Rotates x [n, h, dh] dt in place, rotate-half layout, by sign·pos[i]·inv_freq[j]
 * (f32 angle; sign +1 forward, −1 backward). inv_freq [dh/2] f32. */
cudaError_t tw_rope(void *x, tw_dtype dt, const int32_t *pos, const float *inv_freq, int64_t n, int64_t h,
                    int64_t dh, float sign, cudaStream_t stream);

/* ---- attention.cu -------------------------------------------------------- */

/* Causal GQA flash attention over packed sequences (engine.Backend.Attention).
 * out, q [nq, h, dh] dt; k, v [nk, g, dh] dt; lse [nq, h] f32;
 * seqs [nseq, 4] i32 = (qStart, qLen, kStart, kLen). dh ∈ {64, 128} or any
 * multiple of 8 up to 128. The grid does not depend on seqs: each block finds
 * its (sequence, query tile) from seqs on the device. q, k, v, out (and dout,
 * dq, dk, dv below) must be 16-byte aligned, as whole allocations and row
 * views are (else cudaErrorInvalidValue). */
cudaError_t tw_attention(void *out, float *lse, const void *q, const void *k, const void *v, const int32_t *seqs,
                         int64_t nseq, tw_dtype dt, int64_t nq, int64_t nk, int64_t h, int64_t g, int64_t dh,
                         float scale, cudaStream_t stream);
/* dq, dk, dv overwritten (uncovered rows zeroed), deterministic. */
cudaError_t tw_attention_backward(void *dq, void *dk, void *dv, const void *dout, const void *out, const float *lse,
                                  const void *q, const void *k, const void *v, const int32_t *seqs, int64_t nseq,
                                  tw_dtype dt, int64_t nq, int64_t nk, int64_t h, int64_t g, int64_t dh, float scale,
                                  void *workspace, cudaStream_t stream);
size_t tw_attention_backward_workspace(int64_t nq, int64_t nk, int64_t h, int64_t g, int64_t dh);

/* ---- swiglu.cu ----------------------------------------------------------- */

/* out = round(silu(gate))·up; all [n] dt. */
cudaError_t tw_swiglu(void *out, const void *gate, const void *up, tw_dtype dt, int64_t n, cudaStream_t stream);
/* dgate = dout·up·silu'(gate), dup = dout·round(silu(gate)). */
cudaError_t tw_swiglu_backward(void *dgate, void *dup, const void *dout, const void *gate, const void *up,
                               tw_dtype dt, int64_t n, cudaStream_t stream);

/* ---- logsoftmax.cu ------------------------------------------------------- */

/* Per row i of logits [n, v] dt: lse[i] = log Σ exp, logp[i] = logits[i, t] − lse[i]
 * (0 when t = targets[i] < 0). logp, lse [n] f32. */
cudaError_t tw_logsoftmax_gather(float *logp, float *lse, const void *logits, tw_dtype dt, const int32_t *targets,
                                 int64_t n, int64_t v, cudaStream_t stream);
/* dlogits = dlogp·(onehot(t) − softmax), 0 on ignored rows; dlogits may
 * alias logits. */
cudaError_t tw_logsoftmax_gather_backward(void *dlogits, const float *dlogp, const void *logits, const float *lse,
                                          const int32_t *targets, tw_dtype dt, int64_t n, int64_t v,
                                          cudaStream_t stream);

/* ---- sumsquares.cu ------------------------------------------------------- */

/* out[0] += Σ x² over x [n] dt, in f64, over fixed chunks in a fixed order:
 * the same bits on every run whatever the grid. */
cudaError_t tw_sum_squares(float *out, const void *x, tw_dtype dt, int64_t n, void *workspace, cudaStream_t stream);
size_t tw_sum_squares_workspace(int64_t n);

/* ---- adamw.cu ------------------------------------------------------------ */

/* One AdamW step (engine.Backend.AdamW): param [n] pdt, grad [n] gdt, m, v
 * [n] f32, master [n] f32 or NULL (required unless pdt is f32). bc1 = 1 − β1^t,
 * bc2 = sqrt(1 − β2^t), computed by the caller in double. */
cudaError_t tw_adamw(void *param, tw_dtype pdt, const void *grad, tw_dtype gdt, float *m, float *v, float *master,
                     int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                     float bc1, float bc2, cudaStream_t stream);

/* One parameter of tw_adamw_multi (engine.AdamWSpan). */
typedef struct {
	uint64_t param;     /* device address of the parameter's first element */
	int64_t off;        /* its first element in the flat grad, m and v */
	int64_t master_off; /* its first element in the flat master; < 0: none */
	int64_t n;          /* its element count */
	int32_t dtype;      /* its tw_dtype */
	int32_t unused;
} tw_adamw_span;

/* tw_adamw's update of every parameter of the table spans [nspans] (device
 * memory, increasing off, not overlapping) in one launch
 * (engine.Backend.AdamWMulti): grad [end] gdt, m, v [end] f32, master f32 or
 * NULL when no span has one. */
cudaError_t tw_adamw_multi(const tw_adamw_span *spans, int64_t nspans, int64_t end, const void *grad, tw_dtype gdt,
                           float *m, float *v, float *master, float lr, float beta1, float beta2, float eps,
                           float weight_decay, float grad_scale, float bc1, float bc2, cudaStream_t stream);

/* ---- sample.cu ----------------------------------------------------------- */

/* One token per row of logits [b, v] dt into ids [b], with uniforms u [b] f32,
 * by the rule on engine.SampleParams (temperature ≤ 0: argmax). */
cudaError_t tw_sample(int32_t *ids, const void *logits, tw_dtype dt, const float *u, int64_t b, int64_t v,
                      float temperature, float top_p, void *workspace, cudaStream_t stream);
size_t tw_sample_workspace(int64_t b, int64_t v);

/* ---- gemm.cu ------------------------------------------------------------- */

/* C = alpha·op(A)·op(B) + beta·C, row-major, strided-batched
 * (engine.Backend.Gemm). A [batch, m, k] (or [k, m] if transa), B [batch, k, n]
 * (or [n, k] if transb), C [batch, m, n]; stride_* in elements between batch
 * entries (0 broadcasts). abdt: f32 (SIMT tiles) or bf16 (tensor cores, wmma
 * 16×16×16, f32 accumulate); cdt: f32 or abdt. beta = 0 never reads C. */
cudaError_t tw_gemm(void *c, tw_dtype cdt, const void *a, const void *b, tw_dtype abdt, int transa, int transb,
                    int64_t m, int64_t n, int64_t k, int64_t batch, int64_t stride_a, int64_t stride_b,
                    int64_t stride_c, float alpha, float beta, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* TW_KERNELS_H */
