/*
 * cublaslt.h — the part of cuBLASLt that engine/cuda calls, declared here so
 * that nothing links against cuBLAS: the library is opened at run time
 * (dlopen) and its entry points are looked up by name (tw_lt_open).
 *
 * The types and numbers are those of cublasLt.h, cublas_api.h and
 * library_types.h, stable from CUDA 11 to 13 (cuBLASLt ≥ 11 is accepted);
 * the Makefile's test-cuda-build compiles cublaslt_check.c, which asserts
 * that they equal the installed toolkit's. Enum parameters are int, as the
 * C ABI passes them; opaque handles are void *.
 */
#ifndef TW_ENGINE_CUDA_CUBLASLT_H
#define TW_ENGINE_CUDA_CUBLASLT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dlopen.h"

typedef int tw_lt_status;    /* cublasStatus_t; 0 is CUBLAS_STATUS_SUCCESS */
typedef void *tw_lt_handle;  /* cublasLtHandle_t */
typedef void *tw_lt_desc;    /* cublasLtMatmulDesc_t */
typedef void *tw_lt_layout;  /* cublasLtMatrixLayout_t */
typedef void *tw_lt_pref;    /* cublasLtMatmulPreference_t */
typedef struct { uint64_t data[8]; } tw_lt_algo; /* cublasLtMatmulAlgo_t */
typedef struct {             /* cublasLtMatmulHeuristicResult_t */
	tw_lt_algo algo;
	size_t workspaceSize;
	tw_lt_status state;
	float wavesCount;
	int reserved[4];
} tw_lt_heuristic;

enum {
	TW_CUBLAS_STATUS_SUCCESS = 0,
	TW_CUBLAS_COMPUTE_32F = 68, /* cublasComputeType_t */
	TW_CUDA_R_32F = 0,          /* cudaDataType_t */
	TW_CUDA_R_16F = 2,
	TW_CUDA_R_16BF = 14,
	TW_CUBLAS_OP_N = 0,         /* cublasOperation_t */
	TW_CUBLAS_OP_T = 1,
	TW_CUBLASLT_MATMUL_DESC_TRANSA = 3,          /* int32_t */
	TW_CUBLASLT_MATMUL_DESC_TRANSB = 4,          /* int32_t */
	TW_CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,   /* int32_t */
	TW_CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6, /* int64_t */
	TW_CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,    /* uint64_t */
	TW_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,  /* uint32_t */
	TW_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
	TW_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
	TW_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8
};

/* The entry points, looked up in the opened library. */
typedef struct {
	size_t (*GetVersion)(void);
	tw_lt_status (*Create)(tw_lt_handle *);
	tw_lt_status (*Destroy)(tw_lt_handle);
	tw_lt_status (*MatmulDescCreate)(tw_lt_desc *, int compute_type, int scale_type);
	tw_lt_status (*MatmulDescDestroy)(tw_lt_desc);
	tw_lt_status (*MatmulDescSetAttribute)(tw_lt_desc, int attr, const void *buf, size_t size);
	tw_lt_status (*MatrixLayoutCreate)(tw_lt_layout *, int type, uint64_t rows, uint64_t cols, int64_t ld);
	tw_lt_status (*MatrixLayoutDestroy)(tw_lt_layout);
	tw_lt_status (*MatrixLayoutSetAttribute)(tw_lt_layout, int attr, const void *buf, size_t size);
	tw_lt_status (*MatmulPreferenceCreate)(tw_lt_pref *);
	tw_lt_status (*MatmulPreferenceDestroy)(tw_lt_pref);
	tw_lt_status (*MatmulPreferenceSetAttribute)(tw_lt_pref, int attr, const void *buf, size_t size);
	tw_lt_status (*MatmulAlgoGetHeuristic)(tw_lt_handle, tw_lt_desc, tw_lt_layout a, tw_lt_layout b, tw_lt_layout c,
	                                       tw_lt_layout d, tw_lt_pref, int requested, tw_lt_heuristic *results,
	                                       int *returned);
	tw_lt_status (*Matmul)(tw_lt_handle, tw_lt_desc, const void *alpha, const void *a, tw_lt_layout, const void *b,
	                       tw_lt_layout, const void *beta, const void *c, tw_lt_layout, void *d, tw_lt_layout,
	                       const tw_lt_algo *, void *workspace, size_t workspace_bytes, void *stream);
} tw_lt_api;

/* Opens the library at path (a file, or a bare soname for the dynamic
 * loader's search) and fills api. 0 on success; otherwise -1 with the reason
 * in err. The library stays mapped for the life of the process. */
static inline int tw_lt_open(const char *path, tw_lt_api *api, char *err, size_t errlen) {
	const tw_dl_sym syms[] = {
		{(void **)&api->GetVersion, "cublasLtGetVersion"},
		{(void **)&api->Create, "cublasLtCreate"},
		{(void **)&api->Destroy, "cublasLtDestroy"},
		{(void **)&api->MatmulDescCreate, "cublasLtMatmulDescCreate"},
		{(void **)&api->MatmulDescDestroy, "cublasLtMatmulDescDestroy"},
		{(void **)&api->MatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute"},
		{(void **)&api->MatrixLayoutCreate, "cublasLtMatrixLayoutCreate"},
		{(void **)&api->MatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy"},
		{(void **)&api->MatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute"},
		{(void **)&api->MatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate"},
		{(void **)&api->MatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy"},
		{(void **)&api->MatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute"},
		{(void **)&api->MatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic"},
		{(void **)&api->Matmul, "cublasLtMatmul"},
	};
	return tw_dl_open(path, syms, sizeof syms / sizeof syms[0], err, errlen);
}

/* cgo cannot call through function pointers: these do. */
static inline size_t tw_lt_version(const tw_lt_api *api) { return api->GetVersion(); }
static inline tw_lt_status tw_lt_create(const tw_lt_api *api, tw_lt_handle *h) { return api->Create(h); }
static inline tw_lt_status tw_lt_destroy(const tw_lt_api *api, tw_lt_handle h) { return api->Destroy(h); }

/* One GEMM shape's cuBLASLt objects. */
typedef struct {
	tw_lt_desc desc;
	tw_lt_layout a, b, c; /* c is also the output's (D) layout */
	tw_lt_algo algo;
	int found;            /* algorithms the heuristic returned (0: none) */
} tw_lt_plan;

static inline void tw_lt_plan_destroy(const tw_lt_api *api, tw_lt_plan *p) {
	if (p->desc) api->MatmulDescDestroy(p->desc);
	if (p->a) api->MatrixLayoutDestroy(p->a);
	if (p->b) api->MatrixLayoutDestroy(p->b);
	if (p->c) api->MatrixLayoutDestroy(p->c);
	memset(p, 0, sizeof *p);
}

/* A column-major layout rows × cols (leading dimension ld) of type, batch
 * matrices stride elements apart. */
static inline tw_lt_status tw_lt_layout_make(const tw_lt_api *api, tw_lt_layout *l, int type, int64_t rows,
                                             int64_t cols, int64_t ld, int32_t batch, int64_t stride) {
	tw_lt_status st = api->MatrixLayoutCreate(l, type, (uint64_t)rows, (uint64_t)cols, ld);
	if (st == TW_CUBLAS_STATUS_SUCCESS && batch > 1) {
		st = api->MatrixLayoutSetAttribute(*l, TW_CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
		if (st == TW_CUBLAS_STATUS_SUCCESS)
			st = api->MatrixLayoutSetAttribute(*l, TW_CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
			                                   sizeof stride);
	}
	return st;
}

/* Plans row-major C[m,n] = α·op(A)·op(B) + β·C (batch of them): as
 * column-major Cᵀ[n,m] = op(B)ᵀ·op(A)ᵀ, the operands swap and each keeps its
 * own transpose flag. lda, ldb: row lengths of A and B as stored; strides in
 * elements; align_*: the operands' address alignment in bytes. Picks the
 * heuristic's first algorithm that fits ws_bytes of workspace; found is 0
 * when it has none. */
static inline tw_lt_status tw_lt_plan_make(const tw_lt_api *api, tw_lt_handle h, tw_lt_plan *p, int transa,
                                           int transb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t stride_a,
                                           int64_t ldb, int64_t stride_b, int64_t batch, int abtype, int ctype,
                                           uint32_t align_a, uint32_t align_b, uint32_t align_c, uint64_t ws_bytes) {
	memset(p, 0, sizeof *p);
	const int32_t opa = transb ? TW_CUBLAS_OP_T : TW_CUBLAS_OP_N, opb = transa ? TW_CUBLAS_OP_T : TW_CUBLAS_OP_N;
	tw_lt_status st = api->MatmulDescCreate(&p->desc, TW_CUBLAS_COMPUTE_32F, TW_CUDA_R_32F);
	if (st == 0) st = api->MatmulDescSetAttribute(p->desc, TW_CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
	if (st == 0) st = api->MatmulDescSetAttribute(p->desc, TW_CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
	/* cuBLASLt's A is our B: n × k under its op. */
	if (st == 0)
		st = tw_lt_layout_make(api, &p->a, abtype, transb ? k : n, transb ? n : k, ldb, (int32_t)batch, stride_b);
	/* cuBLASLt's B is our A: k × m under its op. */
	if (st == 0)
		st = tw_lt_layout_make(api, &p->b, abtype, transa ? m : k, transa ? k : m, lda, (int32_t)batch, stride_a);
	if (st == 0) st = tw_lt_layout_make(api, &p->c, ctype, n, m, n, (int32_t)batch, m * n);
	tw_lt_pref pref = NULL;
	if (st == 0) st = api->MatmulPreferenceCreate(&pref);
	if (st == 0)
		st = api->MatmulPreferenceSetAttribute(pref, TW_CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
		                                       sizeof ws_bytes);
	/* cuBLASLt's A and B are our B and A. */
	if (st == 0)
		st = api->MatmulPreferenceSetAttribute(pref, TW_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_b,
		                                       sizeof align_b);
	if (st == 0)
		st = api->MatmulPreferenceSetAttribute(pref, TW_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_a,
		                                       sizeof align_a);
	if (st == 0)
		st = api->MatmulPreferenceSetAttribute(pref, TW_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c,
		                                       sizeof align_c);
	if (st == 0)
		st = api->MatmulPreferenceSetAttribute(pref, TW_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c,
		                                       sizeof align_c);
	tw_lt_heuristic res;
	memset(&res, 0, sizeof res);
	/* No algorithm for the shape is not an error: found stays 0. Without a
	 * handle (tests on machines without a GPU) nothing is asked. */
	if (st == 0 && h && (api->MatmulAlgoGetHeuristic(h, p->desc, p->a, p->b, p->c, p->c, pref, 1, &res, &p->found) != 0 ||
	                res.state != TW_CUBLAS_STATUS_SUCCESS))
		p->found = 0;
	if (pref) api->MatmulPreferenceDestroy(pref);
	if (st == 0 && p->found > 0) p->algo = res.algo;
	if (st != 0) tw_lt_plan_destroy(api, p);
	return st;
}

/* Runs a plan: C = α·op(A)·op(B) + β·C on stream. */
static inline tw_lt_status tw_lt_matmul(const tw_lt_api *api, tw_lt_handle h, const tw_lt_plan *p, float alpha,
                                        uintptr_t a, uintptr_t b, float beta, uintptr_t c, uintptr_t ws,
                                        uint64_t ws_bytes, void *stream) {
	return api->Matmul(h, p->desc, &alpha, (const void *)b, p->a, (const void *)a, p->b, &beta, (const void *)c, p->c,
	                   (void *)c, p->c, &p->algo, (void *)ws, ws_bytes, stream);
}

#endif
