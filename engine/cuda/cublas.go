//go:build cuda

package cuda

// A thin layer over cuBLAS for the GEMM of engine.Backend, selected with
// Options.GEMM = "cublas": bf16 (or f32) operands, f32 compute, f32 or bf16
// C, strided-batched — the peer the hand-written wmma GEMM is measured
// against.

// #cgo LDFLAGS: -lcublas
// #include <stdint.h>
// #include <cublas_v2.h>
//
// // Row-major C[m,n] = op(A)·op(B) is column-major Cᵀ[n,m] = op(B)ᵀ·op(A)ᵀ:
// // the operands swap, and each keeps its own transpose flag.
// static cublasStatus_t tw_cublas_gemm(cublasHandle_t h, cudaStream_t s, int transa, int transb,
//     int64_t m, int64_t n, int64_t k, float alpha, uintptr_t a, int64_t lda, int64_t stride_a,
//     uintptr_t b, int64_t ldb, int64_t stride_b, float beta, uintptr_t c, int64_t stride_c,
//     int64_t batch, cudaDataType_t abtype, cudaDataType_t ctype) {
//     cublasStatus_t st = cublasSetStream(h, s);
//     if (st != CUBLAS_STATUS_SUCCESS) return st;
//     return cublasGemmStridedBatchedEx(h, transb ? CUBLAS_OP_T : CUBLAS_OP_N, transa ? CUBLAS_OP_T : CUBLAS_OP_N,
//         (int)n, (int)m, (int)k, &alpha, (const void *)b, abtype, (int)ldb, stride_b,
//         (const void *)a, abtype, (int)lda, stride_a, &beta, (void *)c, ctype, (int)n, stride_c,
//         (int)batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
// }
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/turnwise/turnwise/engine"
)

// haveCUBLAS reports whether cuBLAS can be selected: on a real GPU, yes.
const haveCUBLAS = true

func cudaType(d engine.DType) C.cudaDataType_t {
	switch d {
	case engine.F32:
		return C.CUDA_R_32F
	case engine.BF16:
		return C.CUDA_R_16BF
	case engine.F16:
		return C.CUDA_R_16F
	}
	panic(fmt.Sprintf("cuda: no cuBLAS type for %v", d))
}

func (b *Backend) cublasGemm(c, a, bm *engine.Tensor, p engine.GemmParams, g engine.GemmDims) {
	if b.cublas == nil { // created on first use
		var h C.cublasHandle_t
		if st := C.cublasCreate(&h); st != C.CUBLAS_STATUS_SUCCESS {
			panic(fmt.Sprintf("cuda: cublasCreate: status %d", int(st)))
		}
		b.cublas = unsafe.Pointer(h)
	}
	st := C.tw_cublas_gemm(C.cublasHandle_t(b.cublas), b.stream, cbool(p.TransA), cbool(p.TransB),
		i64(g.M), i64(g.N), i64(g.K), C.float(p.Alpha), C.uintptr_t(addr(a)), i64(g.LDA), i64(g.StrideA),
		C.uintptr_t(addr(bm)), i64(g.LDB), i64(g.StrideB), C.float(p.Beta), C.uintptr_t(addr(c)), i64(g.M*g.N),
		i64(g.Batch), cudaType(a.DType()), cudaType(c.DType()))
	if st != C.CUBLAS_STATUS_SUCCESS {
		panic(fmt.Sprintf("cuda: cublasGemmStridedBatchedEx (C %v, A %v, B %v): status %d", c, a, bm, int(st)))
	}
}
