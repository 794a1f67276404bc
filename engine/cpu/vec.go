package cpu

// #cgo CFLAGS: -O3
// #cgo amd64 CFLAGS: -march=x86-64-v3
// #cgo LDFLAGS: -lm
// #include "vec.h"
import "C"

import "unsafe"

// Go wrappers of vec.c. Each takes slices and passes their first element's
// address; callers guarantee the lengths the C loops rely on.

func fptr(s []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }

func bf16ToF32(src []uint16, dst []float32) {
	if len(src) == 0 {
		return
	}
	_ = dst[len(src)-1]
	C.twcpu_bf16_to_f32((*C.uint16_t)(unsafe.Pointer(&src[0])), fptr(dst), C.long(len(src)))
}

// gemmNT sets c[i·ldc + j] = alpha·a[i]·w[j] + beta·c[i·ldc + j] (c not
// read when beta is 0) for the m rows of a (lda apart) and n rows of w (ldw
// apart), each of length k; w is wf (f32) or, when wf is nil, wh (bf16).
func gemmNT(c []float32, ldc int, a []float32, lda int, wf []float32, wh []uint16, ldw, m, n, k int, alpha, beta float32) {
	if m == 0 || n == 0 {
		return
	}
	_, _ = c[(m-1)*ldc+n-1], a[(m-1)*lda+k-1]
	if wf != nil {
		_ = wf[(n-1)*ldw+k-1]
		C.twcpu_gemm_nt_f32(fptr(c), C.long(ldc), fptr(a), C.long(lda), fptr(wf), C.long(ldw),
			C.long(m), C.long(n), C.long(k), C.float(alpha), C.float(beta))
		return
	}
	_ = wh[(n-1)*ldw+k-1]
	C.twcpu_gemm_nt_bf16(fptr(c), C.long(ldc), fptr(a), C.long(lda), (*C.uint16_t)(unsafe.Pointer(&wh[0])), C.long(ldw),
		C.long(m), C.long(n), C.long(k), C.float(alpha), C.float(beta))
}

// bf16RowsToF32 widens n rows of len(dst)/n elements, ld apart in src, into
// dst.
func bf16RowsToF32(src []uint16, dst []float32, n, ld int) {
	if n == 0 {
		return
	}
	dh := len(dst) / n
	_ = src[(n-1)*ld+dh-1]
	C.twcpu_bf16_rows_to_f32((*C.uint16_t)(unsafe.Pointer(&src[0])), fptr(dst), C.long(n), C.long(dh), C.long(ld))
}

func f32ToBF16(src []float32, dst []uint16) {
	if len(src) == 0 {
		return
	}
	_ = dst[len(src)-1]
	C.twcpu_f32_to_bf16(fptr(src), (*C.uint16_t)(unsafe.Pointer(&dst[0])), C.long(len(src)))
}

// lseRows fills lse[r] for rows of length v in x.
func lseRows(x []float32, v int, lse []float32) {
	if len(lse) == 0 {
		return
	}
	_ = x[len(lse)*v-1]
	C.twcpu_lse_rows(fptr(x), C.long(len(lse)), C.long(v), fptr(lse))
}

// logSoftmaxGradRows writes the log-softmax-gather gradient of len(lse) rows.
func logSoftmaxGradRows(x, dx []float32, v int, lse, g []float32, tgt []int32) {
	rows := len(lse)
	if rows == 0 {
		return
	}
	_, _, _, _ = x[rows*v-1], dx[rows*v-1], g[rows-1], tgt[rows-1]
	C.twcpu_logsoftmax_grad_rows(fptr(x), fptr(dx), C.long(rows), C.long(v), fptr(lse), fptr(g),
		(*C.int32_t)(unsafe.Pointer(&tgt[0])))
}

func swiglu(g, u, out []float32, roundBF16 bool) {
	n := len(g)
	if n == 0 {
		return
	}
	_, _ = u[n-1], out[n-1]
	C.twcpu_swiglu(fptr(g), fptr(u), fptr(out), C.long(n), cbool(roundBF16))
}

func swigluBwd(g, u, dout, dg, du []float32, roundBF16 bool) {
	n := len(g)
	if n == 0 {
		return
	}
	_, _, _, _ = u[n-1], dout[n-1], dg[n-1], du[n-1]
	C.twcpu_swiglu_bwd(fptr(g), fptr(u), fptr(dout), fptr(dg), fptr(du), C.long(n), cbool(roundBF16))
}

func adamw(w, g, m, v []float32, gscale, b1, b2, eps, decay, step, bc2 float32) {
	n := len(w)
	if n == 0 {
		return
	}
	_, _, _ = g[n-1], m[n-1], v[n-1]
	C.twcpu_adamw(fptr(w), fptr(g), fptr(m), fptr(v), C.long(n), C.float(gscale), C.float(b1), C.float(b2),
		C.float(eps), C.float(decay), C.float(step), C.float(bc2))
}

func sumSq(x []float32) float64 {
	if len(x) == 0 {
		return 0
	}
	return float64(C.twcpu_sumsq(fptr(x), C.long(len(x))))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// axpyRows adds Σ_j c[j]·rows[j] to dst; rows holds len(c) rows of
// len(dst) floats.
func axpyRows(dst, c, rows []float32) {
	n, dh := len(c), len(dst)
	if n == 0 {
		return
	}
	_ = rows[n*dh-1]
	C.twcpu_axpy_rows(fptr(dst), fptr(c), fptr(rows), C.long(n), C.long(dh))
}

// axpyRows2 is axpyRows for two destinations sharing the loads of rows.
func axpyRows2(dst0, dst1, c0, c1, rows []float32) {
	n, dh := len(c0), len(dst0)
	if n == 0 {
		return
	}
	_, _, _ = dst1[dh-1], c1[n-1], rows[n*dh-1]
	C.twcpu_axpy_rows2(fptr(dst0), fptr(dst1), fptr(c0), fptr(c1), fptr(rows), C.long(n), C.long(dh))
}

// expShift replaces each x of s by e^(x−shift) and returns their sum (f32).
func expShift(s []float32, shift float32) float32 {
	if len(s) == 0 {
		return 0
	}
	return float32(C.twcpu_exp_shift(fptr(s), C.long(len(s)), C.float(shift)))
}

// transposeBlock writes the [rows, cols] block src into dst as [cols, ld].
func transposeBlock(dst, src []float32, rows, cols, ld int) {
	if rows == 0 || cols == 0 {
		return
	}
	_, _ = src[rows*cols-1], dst[(cols-1)*ld+rows-1]
	C.twcpu_transpose(fptr(dst), fptr(src), C.long(rows), C.long(cols), C.long(ld))
}

// dotRows sets dst[j] = x·rows[j]; rows holds len(dst) rows of len(x)
// floats.
func dotRows(dst, x, rows []float32) {
	n, dh := len(dst), len(x)
	if n == 0 {
		return
	}
	_ = rows[n*dh-1]
	C.twcpu_dot_rows(fptr(dst), fptr(x), fptr(rows), C.long(n), C.long(dh))
}

// decodeScores sets s[i·ns+j] = q[i]·k[j, group(i)] for the n rows of ld
// elements of k, kf (f32) or, when kf is nil, kh (bf16, widened in
// registers), and the h = len(q)/dh heads, head i reading columns
// (i/rep)·dh … (i/rep+1)·dh of each row: a decoding step's scores over a
// block of its cache, read once and in order.
func decodeScores(s []float32, ns int, q, kf []float32, kh []uint16, n, rep, dh, ld int) {
	h := len(q) / dh
	if n == 0 || h == 0 {
		return
	}
	_ = s[(h-1)*ns+n-1]
	if kf != nil {
		_ = kf[n*ld-1]
		C.twcpu_decode_scores_f32(fptr(s), C.long(ns), fptr(q), fptr(kf), C.long(n), C.long(h), C.long(rep),
			C.long(dh), C.long(ld))
		return
	}
	_ = kh[n*ld-1]
	C.twcpu_decode_scores_bf16(fptr(s), C.long(ns), fptr(q), (*C.uint16_t)(unsafe.Pointer(&kh[0])), C.long(n),
		C.long(h), C.long(rep), C.long(dh), C.long(ld))
}

// decodePV adds Σ_j p[i·ns+j]·v[j, group(i)] to each head's o[i] (o [H, dh]),
// v's n rows read as decodeScores reads k's.
func decodePV(o, p []float32, ns int, vf []float32, vh []uint16, n, rep, dh, ld int) {
	h := len(o) / dh
	if n == 0 || h == 0 {
		return
	}
	_ = p[(h-1)*ns+n-1]
	if vf != nil {
		_ = vf[n*ld-1]
		C.twcpu_decode_pv_f32(fptr(o), fptr(p), C.long(ns), fptr(vf), C.long(n), C.long(h), C.long(rep),
			C.long(dh), C.long(ld))
		return
	}
	_ = vh[n*ld-1]
	C.twcpu_decode_pv_bf16(fptr(o), fptr(p), C.long(ns), (*C.uint16_t)(unsafe.Pointer(&vh[0])), C.long(n),
		C.long(h), C.long(rep), C.long(dh), C.long(ld))
}

// dotRowsT sets dst[j] = x·kt[:, j] for a transposed block kt [len(x), ld].
func dotRowsT(dst, x, kt []float32, ld int) {
	n, dh := len(dst), len(x)
	if n == 0 {
		return
	}
	_ = kt[(dh-1)*ld+n-1]
	C.twcpu_dot_rows_t(fptr(dst), fptr(x), fptr(kt), C.long(n), C.long(dh), C.long(ld))
}

// dotRows2T is dotRowsT for two vectors sharing the loads of kt.
func dotRows2T(dst0, dst1, x0, x1, kt []float32, ld int) {
	n, dh := len(dst0), len(x0)
	if n == 0 {
		return
	}
	_, _, _ = dst1[n-1], x1[dh-1], kt[(dh-1)*ld+n-1]
	C.twcpu_dot_rows2_t(fptr(dst0), fptr(dst1), fptr(x0), fptr(x1), fptr(kt), C.long(n), C.long(dh), C.long(ld))
}
