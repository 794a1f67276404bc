package ref

// Gemm returns alpha·op(A)·op(B) + beta·C for one row-major matrix: A is
// m×k (k×m if transA), B is k×n (n×k if transB), C is m×n.
func Gemm(transA, transB bool, m, n, k int, alpha float64, a, b []float64, beta float64, c []float64) []float64 {
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for l := 0; l < k; l++ {
				av := a[i*k+l]
				if transA {
					av = a[l*m+i]
				}
				bv := b[l*n+j]
				if transB {
					bv = b[j*k+l]
				}
				s += av * bv
			}
			out[i*n+j] = alpha * s
			if beta != 0 {
				out[i*n+j] += beta * c[i*n+j]
			}
		}
	}
	return out
}
