package ref

import "math"

// RMSNorm returns out[i,j] = w[j]·round(x[i,j]·rstd[i]) and rstd for x n×d.
func RMSNorm(x, w []float64, n, d int, eps float64, round func(float64) float64) (out, rstd []float64) {
	out, rstd = make([]float64, n*d), make([]float64, n)
	for i := 0; i < n; i++ {
		var ss float64
		for j := 0; j < d; j++ {
			ss += x[i*d+j] * x[i*d+j]
		}
		r := 1 / math.Sqrt(ss/float64(d)+eps)
		rstd[i] = r
		for j := 0; j < d; j++ {
			out[i*d+j] = w[j] * round(x[i*d+j]*r)
		}
	}
	return out, rstd
}
