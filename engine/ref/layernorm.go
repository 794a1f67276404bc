package ref

import "math"

// LayerNorm returns out[i,j] = (x[i,j]−mean[i])·rstd[i]·w[j] + b[j] with
// mean[i] = Σ_j x[i,j]/d and rstd[i] = 1/sqrt(Σ_j (x[i,j]−mean[i])²/d + eps),
// and mean and rstd, for x n×d.
func LayerNorm(x, w, b []float64, n, d int, eps float64) (out, mean, rstd []float64) {
	out, mean, rstd = make([]float64, n*d), make([]float64, n), make([]float64, n)
	for i := 0; i < n; i++ {
		row := x[i*d : (i+1)*d]
		var s float64
		for _, v := range row {
			s += v
		}
		mu := s / float64(d)
		var ss float64
		for _, v := range row {
			ss += (v - mu) * (v - mu)
		}
		r := 1 / math.Sqrt(ss/float64(d)+eps)
		mean[i], rstd[i] = mu, r
		for j, v := range row {
			out[i*d+j] = (v-mu)*r*w[j] + b[j]
		}
	}
	return out, mean, rstd
}
