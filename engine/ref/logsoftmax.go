package ref

import "math"

// LogSoftmaxGather returns, per row of logits (n×v), lse = log Σ exp and
// logp = logits[target] − lse (0 for a negative target).
func LogSoftmaxGather(logits []float64, targets []int32, n, v int) (logp, lse []float64) {
	logp, lse = make([]float64, n), make([]float64, n)
	for i := 0; i < n; i++ {
		row := logits[i*v : (i+1)*v]
		m := math.Inf(-1)
		for _, x := range row {
			m = math.Max(m, x)
		}
		var s float64
		for _, x := range row {
			s += math.Exp(x - m)
		}
		lse[i] = m + math.Log(s)
		if targets[i] >= 0 {
			logp[i] = row[targets[i]] - lse[i]
		}
	}
	return logp, lse
}
