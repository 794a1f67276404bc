package ref

import "math"

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
