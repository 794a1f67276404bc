package ref

import (
	"math"
	"sort"
)

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

// RoPE returns x (n tokens × h heads × dh) rotated in the rotate-half layout
// by angle pos[i]·invFreq[j] for pair (j, j+dh/2).
func RoPE(x []float64, pos []int32, invFreq []float64, n, h, dh int) []float64 {
	out := make([]float64, len(x))
	half := dh / 2
	for i := 0; i < n; i++ {
		for hd := 0; hd < h; hd++ {
			base := (i*h + hd) * dh
			for j := 0; j < half; j++ {
				a := float64(pos[i]) * invFreq[j]
				c, s := math.Cos(a), math.Sin(a)
				x1, x2 := x[base+j], x[base+j+half]
				out[base+j] = x1*c - x2*s
				out[base+j+half] = x2*c + x1*s
			}
		}
	}
	return out
}

// SwiGLU returns round(silu(gate))·up element-wise.
func SwiGLU(gate, up []float64, round func(float64) float64) []float64 {
	out := make([]float64, len(gate))
	for i, g := range gate {
		out[i] = round(g/(1+math.Exp(-g))) * up[i]
	}
	return out
}

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

// AdamW applies one AdamW step (torch.optim.AdamW semantics) to p, m and v
// in place, with gradient g·gradScale at 1-based step t.
func AdamW(p, g, m, v []float64, lr, beta1, beta2, eps, wd, gradScale float64, t int) {
	bc1 := 1 - math.Pow(beta1, float64(t))
	bc2 := 1 - math.Pow(beta2, float64(t))
	for i := range p {
		gi := g[i] * gradScale
		m[i] = beta1*m[i] + (1-beta1)*gi
		v[i] = beta2*v[i] + (1-beta2)*gi*gi
		p[i] = p[i] - lr*(wd*p[i]+(m[i]/bc1)/(math.Sqrt(v[i]/bc2)+eps))
	}
}

// AdamWMulti applies AdamW to every parameter p[i] in place; parameter i's
// gradient and moments are elements [off[i], off[i]+len(p[i])) of the flat
// g, m and v. (The f32 master copies of a backend are these float64 values.)
func AdamWMulti(p [][]float64, off []int, g, m, v []float64, lr, beta1, beta2, eps, wd, gradScale float64, t int) {
	for i, pi := range p {
		o, n := off[i], len(pi)
		AdamW(pi, g[o:o+n], m[o:o+n], v[o:o+n], lr, beta1, beta2, eps, wd, gradScale, t)
	}
}

// Sample draws an index from logits by the rule documented on
// engine.SampleParams, in float64.
func Sample(logits []float64, u, temperature, topP float64) int {
	if temperature <= 0 {
		best := 0
		for j, x := range logits {
			if x > logits[best] {
				best = j
			}
		}
		return best
	}
	m := math.Inf(-1)
	for _, x := range logits {
		m = math.Max(m, x)
	}
	e := make([]float64, len(logits))
	var total float64
	for j, x := range logits {
		e[j] = math.Exp((x - m) / temperature)
		total += e[j]
	}
	mass := total
	if topP > 0 && topP < 1 {
		order := make([]int, len(e))
		for j := range order {
			order[j] = j
		}
		sort.SliceStable(order, func(a, b int) bool { return e[order[a]] > e[order[b]] })
		mass = 0
		k := 0
		for k < len(order) {
			mass += e[order[k]]
			k++
			if mass >= topP*total {
				break
			}
		}
		for _, j := range order[k:] {
			e[j] = 0
		}
	}
	var c float64
	last := 0
	for j, w := range e {
		c += w
		if w > 0 {
			last = j
		}
		if c > u*mass {
			return j
		}
	}
	return last
}
