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
// differ in their last bits between cores, and between thread counts (a
// GEMM is cut into one block of C per worker, gemmSplit), so a seeded run
// repeats its numbers only where both agree.
func (b *Backend) BLASCore() string { return C.GoString(C.openblas_get_corename()) }

// sgemm is row-major cblas_sgemm: C = alpha·op(A)·op(B) + beta·C with
// leading dimensions lda, ldb, ldc. A product with one row or one column
// is cblas_sgemv, which reads the matrix at up to twice the bandwidth
// OpenBLAS 0.3.21's sgemm reaches on such shapes (a decoding step's
// projections, one row against Bᵀ, take the faster few-row loop instead:
// fewRows, gemm.go).
func sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k > 0 && m == 1 {
		// c[0, :] = alpha·op(B)ᵀ·x + beta·c[0, :], x = op(A)'s row.
		incx := 1
		if transA {
			incx = lda
		}
		if transB { // B [n, k]
			sgemv(false, n, k, alpha, b, ldb, a, incx, beta, c, 1)
		} else { // B [k, n]
			sgemv(true, k, n, alpha, b, ldb, a, incx, beta, c, 1)
		}
		return
	}
	if k > 0 && n == 1 {
		// c[:, 0] = alpha·op(A)·x + beta·c[:, 0], x = op(B)'s column.
		incx := ldb
		if transB {
			incx = 1
		}
		if transA { // A [k, m]
			sgemv(true, k, m, alpha, a, lda, b, incx, beta, c, ldc)
		} else { // A [m, k]
			sgemv(false, m, k, alpha, a, lda, b, incx, beta, c, ldc)
		}
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

// sgemv is row-major cblas_sgemv: y = alpha·op(A)·x + beta·y, A [m, n]
// with leading dimension lda, x and y with strides incx and incy. With
// beta 0, y is zeroed first, so that it is not read (a NaN in it does not
// propagate, as Gemm's contract says).
func sgemv(trans bool, m, n int, alpha float32, a []float32, lda int, x []float32, incx int, beta float32, y []float32, incy int) {
	t, ny := uint32(C.CblasNoTrans), m
	if trans {
		t, ny = C.CblasTrans, n
	}
	if beta == 0 {
		for i := 0; i < ny; i++ {
			y[i*incy] = 0
		}
	}
	C.cblas_sgemv(C.CblasRowMajor, t, C.blasint(m), C.blasint(n), C.float(alpha), (*C.float)(unsafe.Pointer(&a[0])), C.blasint(lda),
		(*C.float)(unsafe.Pointer(&x[0])), C.blasint(incx), C.float(beta), (*C.float)(unsafe.Pointer(&y[0])), C.blasint(incy))
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
