package cpu

// #cgo LDFLAGS: -lopenblas -ldl
// #include <cblas.h>
// #include <dlfcn.h>
// #include <stddef.h>
//
// typedef void (*sbgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE,
//     blasint, blasint, blasint, float, const bfloat16 *, blasint, const bfloat16 *, blasint,
//     float, float *, blasint);
//
// // find_sbgemm returns OpenBLAS's cblas_sbgemm when the loaded library was
// // built with bfloat16 support, or NULL (Debian's 0.3.21 declares it in
// // cblas.h but does not export it).
// static void *find_sbgemm(void) { return dlsym(RTLD_DEFAULT, "cblas_sbgemm"); }
//
// static void call_sbgemm(void *fn, int ta, int tb, int m, int n, int k, float alpha,
//     const bfloat16 *a, int lda, const bfloat16 *b, int ldb, float beta, float *c, int ldc) {
//     ((sbgemm_fn)fn)(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
//         m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
// }
import "C"

import "unsafe"

// setBLASThreads sets OpenBLAS's thread count (a process-wide setting of the
// library).
func setBLASThreads(n int) { C.openblas_set_num_threads(C.int(n)) }

// BLASCore returns the name of the CPU core whose kernels the loaded
// OpenBLAS chose (its runtime dispatch, or OPENBLAS_CORETYPE): GEMM results
// differ in their last bits between cores, and between one OpenBLAS thread
// and several, so a seeded run repeats its numbers only where both agree.
func (b *Backend) BLASCore() string { return C.GoString(C.openblas_get_corename()) }

// sgemm is row-major cblas_sgemm: C = alpha·op(A)·op(B) + beta·C with
// leading dimensions lda, ldb, ldc.
func sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	ta, tb := uint32(C.CblasNoTrans), uint32(C.CblasNoTrans)
	if transA {
		ta = C.CblasTrans
	}
	if transB {
		tb = C.CblasTrans
	}
	if k == 0 {
		// BLAS would only scale C; do it here and keep a, b unindexed.
		for i := 0; i < m; i++ {
			row := c[i*ldc : i*ldc+n]
			for j := range row {
				if beta == 0 {
					row[j] = 0
				} else {
					row[j] *= beta
				}
			}
		}
		return
	}
	C.cblas_sgemm(C.CblasRowMajor, ta, tb, C.blasint(m), C.blasint(n), C.blasint(k),
		C.float(alpha), (*C.float)(unsafe.Pointer(&a[0])), C.blasint(lda),
		(*C.float)(unsafe.Pointer(&b[0])), C.blasint(ldb),
		C.float(beta), (*C.float)(unsafe.Pointer(&c[0])), C.blasint(ldc))
}

// findSBGEMM returns the loaded OpenBLAS's cblas_sbgemm, or nil when the
// library does not export it.
func findSBGEMM() unsafe.Pointer { return C.find_sbgemm() }

// sbgemm is row-major cblas_sbgemm (bf16 operands, f32 C) through the
// function pointer fn from findSBGEMM.
func sbgemm(fn unsafe.Pointer, transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	ta, tb := 0, 0
	if transA {
		ta = 1
	}
	if transB {
		tb = 1
	}
	C.call_sbgemm(fn, C.int(ta), C.int(tb), C.int(m), C.int(n), C.int(k), C.float(alpha),
		(*C.bfloat16)(unsafe.Pointer(&a[0])), C.int(lda), (*C.bfloat16)(unsafe.Pointer(&b[0])), C.int(ldb),
		C.float(beta), (*C.float)(unsafe.Pointer(&c[0])), C.int(ldc))
}
