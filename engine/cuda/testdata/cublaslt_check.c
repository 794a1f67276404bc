/*
 * cublaslt_check.c — compiled (not run) by the Makefile's test-cuda-build
 * where the CUDA toolkit is installed: asserts that engine/cuda/cublaslt.h,
 * our own declarations of the cuBLASLt calls we make, agrees with the
 * toolkit's headers.
 */
#include <stddef.h>

#include <cublasLt.h>

#include "../cublaslt.h"

#define SAME(ours, theirs) _Static_assert((int)(ours) == (int)(theirs), #ours " differs from " #theirs)

SAME(TW_CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_SUCCESS);
SAME(TW_CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F);
SAME(TW_CUDA_R_32F, CUDA_R_32F);
SAME(TW_CUDA_R_16F, CUDA_R_16F);
SAME(TW_CUDA_R_16BF, CUDA_R_16BF);
SAME(TW_CUBLAS_OP_N, CUBLAS_OP_N);
SAME(TW_CUBLAS_OP_T, CUBLAS_OP_T);
SAME(TW_CUBLASLT_MATMUL_DESC_TRANSA, CUBLASLT_MATMUL_DESC_TRANSA);
SAME(TW_CUBLASLT_MATMUL_DESC_TRANSB, CUBLASLT_MATMUL_DESC_TRANSB);
SAME(TW_CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
SAME(TW_CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
SAME(TW_CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
SAME(TW_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES);
SAME(TW_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES);
SAME(TW_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES);
SAME(TW_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);

_Static_assert(sizeof(tw_lt_algo) == sizeof(cublasLtMatmulAlgo_t), "cublasLtMatmulAlgo_t's size");
_Static_assert(sizeof(tw_lt_heuristic) == sizeof(cublasLtMatmulHeuristicResult_t),
               "cublasLtMatmulHeuristicResult_t's size");
_Static_assert(offsetof(tw_lt_heuristic, state) == offsetof(cublasLtMatmulHeuristicResult_t, state),
               "cublasLtMatmulHeuristicResult_t.state's offset");
