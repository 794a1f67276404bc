/*
 * kernels.h — the C launchers of turnwise's CUDA kernels, called from Go
 * through cgo (engine/cuda). Plain C: no C++ types cross this boundary.
 *
 * Every launcher implements the engine.Backend op named beside it; the
 * contract written on that Go method (engine/backend.go: the mathematics,
 * shapes, what is overwritten or accumulated) is the contract here, and is
 * not restated. The comments below only say how the tensors become
 * arguments. Each .cu file, named after its op family as the Go files of
 * engine/cpu and engine/cuda are, opens with what its kernels add to the
 * contract (dtypes accepted, limits, rounding) and their design. The CPU
 * backend (engine/cpu) is the reference their results are tested against.
 *
 * Conventions, for every launcher:
 *  - Pointers are device pointers (cudaMalloc'd; host memory under the
 *    emulator). Float data are passed as void* with a tw_dtype saying what
 *    they hold; f32-only tensors (rstd, lse, log-probabilities, moments)
 *    are float*, and token ids, positions, targets and sequence tables
 *    int32_t*.
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

/* ---- launch.cu ----------------------------------------------------------- */

/* The number of kernels launched from the calling host thread so far: every
 * launch of every launcher, whether it succeeded or not. A launcher's
 * launches are the difference of two reads around its call, made on the
 * thread that calls it. */
int64_t tw_launch_count(void);

/* Queues one kernel that keeps the stream busy until the device's clock has
 * advanced ns nanoseconds (nothing for ns ≤ 0). */
cudaError_t tw_hold(int64_t ns, cudaStream_t stream);

/* ---- rows.cu ------------------------------------------------------------- */

/* engine.Backend.ScatterRows: dst [r, row_bytes/size] and src [n, …] of one
 * dtype, rows [n]; the copy moves bytes, so any dtype is accepted. */
cudaError_t tw_scatter_rows(void *dst, const void *src, const int32_t *rows, int64_t n, int64_t row_bytes,
                            cudaStream_t stream);

/* ---- elementwise.cu ------------------------------------------------------ */

/* engine.Backend.Fill: x [n] dt. */
cudaError_t tw_fill(void *x, tw_dtype dt, int64_t n, float v, cudaStream_t stream);
/* engine.Backend.Cast: dst [n] ddt, src [n] sdt. */
cudaError_t tw_cast(void *dst, tw_dtype ddt, const void *src, tw_dtype sdt, int64_t n, cudaStream_t stream);
/* engine.Backend.Add: out, a, b [n] dt; out may alias a or b. */
cudaError_t tw_add(void *out, const void *a, const void *b, tw_dtype dt, int64_t n, cudaStream_t stream);

/* ---- embedding.cu -------------------------------------------------------- */

/* engine.Backend.Embedding: out [n, d] odt, table [v, d] tdt, ids [n]. */
cudaError_t tw_embedding(void *out, tw_dtype odt, const void *table, tw_dtype tdt, const int32_t *ids,
                         int64_t n, int64_t d, cudaStream_t stream);
/* engine.Backend.EmbeddingBackward: dtable [v, d] tdt, dout [n, d] odt,
 * ids [n]; workspace: tw_embedding_backward_workspace(n) bytes. */
cudaError_t tw_embedding_backward(void *dtable, tw_dtype tdt, const void *dout, tw_dtype odt,
                                  const int32_t *ids, int64_t n, int64_t v, int64_t d, void *workspace,
                                  cudaStream_t stream);
size_t tw_embedding_backward_workspace(int64_t n);

/* ---- rmsnorm.cu ---------------------------------------------------------- */

/* engine.Backend.RMSNorm: out, x [n, d] dt; w [d] wdt; rstd [n]. */
cudaError_t tw_rmsnorm(void *out, float *rstd, const void *x, const void *w, tw_dtype dt, tw_dtype wdt,
                       int64_t n, int64_t d, float eps, cudaStream_t stream);
/* engine.Backend.AddRMSNorm: resid, x, delta as x above; resid may alias x. */
cudaError_t tw_add_rmsnorm(void *resid, void *out, float *rstd, const void *x, const void *delta, const void *w,
                           tw_dtype dt, tw_dtype wdt, int64_t n, int64_t d, float eps, cudaStream_t stream);
/* engine.Backend.RMSNormBackward: dx, dout, x [n, d] dt; w, dw [d] wdt (dw
 * NULL: frozen weight); workspace: tw_rmsnorm_backward_workspace(n, d) bytes. */
cudaError_t tw_rmsnorm_backward(void *dx, void *dw, const void *dout, const void *x, const void *w,
                                const float *rstd, tw_dtype dt, tw_dtype wdt, int64_t n, int64_t d,
                                void *workspace, cudaStream_t stream);
size_t tw_rmsnorm_backward_workspace(int64_t n, int64_t d);

/* ---- layernorm.cu -------------------------------------------------------- */

/* engine.Backend.LayerNorm: out, x [n, d] dt; w, b [d] wdt; mean, rstd [n]. */
cudaError_t tw_layernorm(void *out, float *mean, float *rstd, const void *x, const void *w, const void *b,
                         tw_dtype dt, tw_dtype wdt, int64_t n, int64_t d, float eps, cudaStream_t stream);
/* engine.Backend.LayerNormBackward: dx, dout, x [n, d] dt; w, dw, db [d] wdt
 * (dw, db NULL: frozen); mean, rstd [n]; workspace:
 * tw_layernorm_backward_workspace(n, d) bytes. */
cudaError_t tw_layernorm_backward(void *dx, void *dw, void *db, const void *dout, const void *x, const void *w,
                                  const float *mean, const float *rstd, tw_dtype dt, tw_dtype wdt, int64_t n,
                                  int64_t d, void *workspace, cudaStream_t stream);
size_t tw_layernorm_backward_workspace(int64_t n, int64_t d);

/* ---- gelu.cu ------------------------------------------------------------- */

/* engine.Backend.GELU: out, x [n] dt (flat); kind: engine.GELUKind. */
cudaError_t tw_gelu(void *out, const void *x, tw_dtype dt, int64_t n, int kind, cudaStream_t stream);
/* engine.Backend.GELUBackward: dx, dout, x [n] dt. */
cudaError_t tw_gelu_backward(void *dx, const void *dout, const void *x, tw_dtype dt, int64_t n, int kind,
                             cudaStream_t stream);

/* ---- dropout.cu ---------------------------------------------------------- */

/* engine.Backend.Dropout: out, x [n] dt (flat; out may alias x); seed,
 * threshold and scale: engine.DropoutParams' Seed, Threshold() and Scale(). */
cudaError_t tw_dropout(void *out, const void *x, tw_dtype dt, int64_t n, uint64_t seed, uint32_t threshold,
                       float scale, cudaStream_t stream);

/* ---- bias.cu ------------------------------------------------------------- */

/* engine.Backend.AddBias: x [n, d] dt, b [d] dt. */
cudaError_t tw_add_bias(void *x, const void *b, tw_dtype dt, int64_t n, int64_t d, cudaStream_t stream);
/* engine.Backend.AddBiasBackward: db [d] bdt (f32 or dt), dout [n, d] dt;
 * workspace: tw_add_bias_backward_workspace(n, d) bytes. */
cudaError_t tw_add_bias_backward(void *db, tw_dtype bdt, const void *dout, tw_dtype dt, int64_t n, int64_t d,
                                 void *workspace, cudaStream_t stream);
size_t tw_add_bias_backward_workspace(int64_t n, int64_t d);

/* ---- rope.cu ------------------------------------------------------------- */

/* engine.Backend.RoPE (sign +1) and RoPEBackward (sign −1): x [n, h, dh] dt,
 * pos [n], inv_freq [dh/2]. */
cudaError_t tw_rope(void *x, tw_dtype dt, const int32_t *pos, const float *inv_freq, int64_t n, int64_t h,
                    int64_t dh, float sign, cudaStream_t stream);

/* ---- attention.cu -------------------------------------------------------- */

/* The attention kernels' tile sizes and pipeline depths: the knobs a GPU
 * session sweeps (engine/cuda's AttentionConfig, train bench
 * --attention-config). 0 is the kernels' default; a value the kernels were
 * not compiled for makes the launcher return cudaErrorInvalidValue
 * (attention.cu and attention_backward.cu list the values each accepts).
 * NULL: every default. */
typedef struct {
	int fwd_rows;   /* forward: query rows per block */
	int fwd_keys;   /* forward: keys per inner tile */
	int fwd_stages; /* forward: key/value tiles in flight */
	int fwd_warp_rows; /* forward: query rows per warp (16: Q in registers; 32: as FlashAttention-2) */
	int fwd_k_ring; /* forward: K fragments in flight in S = Q·Kᵀ at 16 rows per warp (8; 1: each loaded just before its products) */
	int bwd_rows;   /* backward: query rows per inner tile or block */
	int bwd_keys;   /* backward: keys per block or inner tile */
	int bwd_stages; /* backward: tiles in flight */
	int bwd_split;  /* backward: parts the query axis is split into for dK/dV */
	int bwd_dq_atomic; /* backward: 1 sums dQ by float atomics (not bit-identical run to run); 0 in a fixed order */
	int bwd_warp_keys; /* backward: keys per warp (16: P in registers; 32: as FlashAttention-2, Pᵀ through shared memory) */
	int bwd_dq_cols; /* backward: dQ columns per warp's unit (32; 64: the units of before 2026-11-29) */
	int dec_split;  /* decoding: key chunks per sequence (flash-decoding) */
	int dec_keys;   /* decoding: keys per inner tile */
	int dec_key_warps; /* decoding: warps that split each key tile (1; 4: 16-row tiles) */
} tw_attention_config;

/* engine.Backend.Attention: out, q [nq, h, dh] dt; k, v [nk, g, dh] dt;
 * lse [nq, h]; seqs [nseq, 4]; noncausal: AttentionParams.NonCausal (0:
 * causal); workspace: tw_attention_workspace(nq, nk, h, g, dh, nseq, cfg)
 * bytes (NULL when that is 0). Every dt tensor here and below must be
 * 16-byte aligned (see attention.cu). */
cudaError_t tw_attention(void *out, float *lse, const void *q, const void *k, const void *v, const int32_t *seqs,
                         int64_t nseq, tw_dtype dt, int64_t nq, int64_t nk, int64_t h, int64_t g, int64_t dh,
                         float scale, int noncausal, const tw_attention_config *cfg, void *workspace,
                         cudaStream_t stream);
size_t tw_attention_workspace(int64_t nq, int64_t nk, int64_t h, int64_t g, int64_t dh, int64_t nseq,
                              const tw_attention_config *cfg);
/* The configurations a tuning sweep tries (those the kernels are compiled
 * for, at Llama's bf16 head width 128: the forward's, decoding's and the
 * backward's, the defaults first): writes the first max of them to out (out
 * may be NULL) and returns how many there are. */
int tw_attention_configs(tw_attention_config *out, int max);
/* Whether the forward's and decoding's configuration of cfg (NULL: the
 * defaults) runs attention of dtype dt at head width dh on the current
 * device: NULL if so, else a sentence saying what does not (a field's value,
 * tiles not compiled for dt and dh, more shared memory than the device has).
 * tw_attention_backward_check says the same of the backward's fields. */
const char *tw_attention_check(const tw_attention_config *cfg, tw_dtype dt, int64_t dh);
const char *tw_attention_backward_check(const tw_attention_config *cfg, tw_dtype dt, int64_t dh);
/* engine.Backend.AttentionBackward (attention_backward.cu): gradients shaped
 * as their tensors above; workspace: tw_attention_backward_workspace(nq, nk,
 * h, g, dh, cfg) bytes, with the same device current. */
cudaError_t tw_attention_backward(void *dq, void *dk, void *dv, const void *dout, const void *out, const float *lse,
                                  const void *q, const void *k, const void *v, const int32_t *seqs, int64_t nseq,
                                  tw_dtype dt, int64_t nq, int64_t nk, int64_t h, int64_t g, int64_t dh, float scale,
                                  int noncausal, const tw_attention_config *cfg, void *workspace,
                                  cudaStream_t stream);
size_t tw_attention_backward_workspace(int64_t nq, int64_t nk, int64_t h, int64_t g, int64_t dh,
                                       const tw_attention_config *cfg);

/* ---- swiglu.cu ----------------------------------------------------------- */

/* engine.Backend.SwiGLU: out, gate, up [n] dt (flat). */
cudaError_t tw_swiglu(void *out, const void *gate, const void *up, tw_dtype dt, int64_t n, cudaStream_t stream);
/* engine.Backend.SwiGLUBackward: every tensor [n] dt. */
cudaError_t tw_swiglu_backward(void *dgate, void *dup, const void *dout, const void *gate, const void *up,
                               tw_dtype dt, int64_t n, cudaStream_t stream);

/* ---- logsoftmax.cu ------------------------------------------------------- */

/* engine.Backend.LogSoftmaxGather: logits [n, v] dt; logp, lse, targets [n]. */
cudaError_t tw_logsoftmax_gather(float *logp, float *lse, const void *logits, tw_dtype dt, const int32_t *targets,
                                 int64_t n, int64_t v, cudaStream_t stream);
/* engine.Backend.LogSoftmaxGatherBackward: dlogits, logits [n, v] dt; dlogp,
 * lse, targets [n]; dlogits may alias logits. */
cudaError_t tw_logsoftmax_gather_backward(void *dlogits, const float *dlogp, const void *logits, const float *lse,
                                          const int32_t *targets, tw_dtype dt, int64_t n, int64_t v,
                                          cudaStream_t stream);

/* ---- sumsquares.cu ------------------------------------------------------- */

/* engine.Backend.SumSquares: out [1], x [n] dt; workspace:
 * tw_sum_squares_workspace(n) bytes. */
cudaError_t tw_sum_squares(float *out, const void *x, tw_dtype dt, int64_t n, void *workspace, cudaStream_t stream);
size_t tw_sum_squares_workspace(int64_t n);

/* ---- adamw.cu ------------------------------------------------------------ */

/* engine.Backend.AdamW: param [n] pdt, grad [n] gdt, m, v [n], master [n] or
 * NULL. bc1 = 1 − β1^t and bc2 = sqrt(1 − β2^t), computed by the caller in
 * double. */
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

/* engine.Backend.AdamWMulti: spans [nspans] in device memory (the
 * engine.ParamTable), grad [end] gdt, m, v [end], master or NULL when no span
 * has one; bc1, bc2 as for tw_adamw. */
cudaError_t tw_adamw_multi(const tw_adamw_span *spans, int64_t nspans, int64_t end, const void *grad, tw_dtype gdt,
                           float *m, float *v, float *master, float lr, float beta1, float beta2, float eps,
                           float weight_decay, float grad_scale, float bc1, float bc2, cudaStream_t stream);

/* ---- sample.cu ----------------------------------------------------------- */

/* engine.Backend.Sample: ids [b], logits [b, v] dt, u [b]; top_k ≤ 0 or
 * ≥ v: no top-k; workspace: tw_sample_workspace(b, v) bytes. */
cudaError_t tw_sample(int32_t *ids, const void *logits, tw_dtype dt, const float *u, int64_t b, int64_t v,
                      float temperature, float top_p, int64_t top_k, void *workspace, cudaStream_t stream);
size_t tw_sample_workspace(int64_t b, int64_t v);

/* ---- gemm.cu ------------------------------------------------------------- */

/* engine.Backend.Gemm: A [batch, m, k] (or [k, m] if transa), B [batch, k, n]
 * (or [n, k] if transb) abdt, C [batch, m, n] cdt; stride_* in elements
 * between batch entries (0 broadcasts). workspace: at least
 * tw_gemm_workspace(cdt, abdt, transa, transb, m, n, k, batch) bytes,
 * 16-byte aligned, for the f32 partial sums of a GEMM split along k (gemm.cu,
 * "Split-K"); it may be NULL when that is 0, and a split GEMM given NULL is
 * cudaErrorInvalidValue. Its contents need not be kept between calls, and
 * the GEMM is stream-ordered on it like on C. */
cudaError_t tw_gemm(void *c, tw_dtype cdt, const void *a, const void *b, tw_dtype abdt, int transa, int transb,
                    int64_t m, int64_t n, int64_t k, int64_t batch, int64_t stride_a, int64_t stride_b,
                    int64_t stride_c, float alpha, float beta, void *workspace, cudaStream_t stream);
/* The workspace tw_gemm needs for these dtypes, layouts and extents, from
 * them alone (and TW_GEMM_SKINNY): 0 unless the GEMM is split along k (bf16
 * operands, few output tiles, k ≥ 1024, not one for the few-row kernel), then
 * S·batch·m·n·4 for its S ≤ 8 k-ranges (at most 8 MiB). */
size_t tw_gemm_workspace(tw_dtype cdt, tw_dtype abdt, int transa, int transb, int64_t m, int64_t n, int64_t k,
                         int64_t batch);
/* The few-row kernel's rows of W per block (r) and loads in flight per
 * thread (u) for one row of X against W of `wide` rows, as TW_GEMM_SKINNY
 * and the device's SM count make them (gemm.cu, "Few rows"). */
void tw_gemm_skinny_config(int64_t wide, int *r, int *u);
/* The block tile of the bf16 tiled kernel for an m × n output of batch
 * entries, as TW_GEMM_TILE and the device's SM count choose it: "64",
 * "128", "128k64" or "256" (gemm.cu, "Grid"), or NULL when the device cannot
 * be asked. */
const char *tw_gemm_tile(int64_t m, int64_t n, int64_t batch);

#ifdef __cplusplus
}
#endif

#endif /* TW_KERNELS_H */
