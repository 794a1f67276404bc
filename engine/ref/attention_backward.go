package ref

import "math"

// AttentionBackward is the gradient of Attention (same arguments) for the
// output gradient dOut [nq, h, dh]: dq [nq, h, dh], dk, dv [nk, g, dh]. With
// p_j the softmax weights of a (query, head), dP_j = dOut·v_j and
// D = Σ_j p_j·dP_j: dS_j = p_j·(dP_j − D), dq = scale·Σ_j dS_j·k_j, and key j
// gets dk_j += scale·dS_j·q, dv_j += p_j·dOut, summed over the h/g heads that
// share it. Rows no sequence covers are zero; the sequences' key ranges are
// taken not to overlap (as the backward's contract requires).
func AttentionBackward(dOut, q, k, v []float64, seqs [][4]int, nq, nk, h, g, dh int, scale float64,
	nonCausal bool) (dq, dk, dv []float64) {
	dq = make([]float64, nq*h*dh)
	dk = make([]float64, nk*g*dh)
	dv = make([]float64, nk*g*dh)
	rep := h / g
	for _, s := range seqs {
		qStart, qLen, kStart, kLen := s[0], s[1], s[2], s[3]
		for t := 0; t < qLen; t++ {
			visible := t + kLen - qLen + 1
			if nonCausal {
				visible = kLen
			}
			for hh := 0; hh < h; hh++ {
				qi := ((qStart+t)*h + hh) * dh
				kv := func(j int) int { return ((kStart+j)*g + hh/rep) * dh }
				dot := func(a []float64, ai int, b []float64, bi int) float64 {
					var x float64
					for d := 0; d < dh; d++ {
						x += a[ai+d] * b[bi+d]
					}
					return x
				}
				p := make([]float64, visible)
				dp := make([]float64, visible)
				m := math.Inf(-1)
				for j := range p {
					p[j] = scale * dot(q, qi, k, kv(j))
					m = math.Max(m, p[j])
				}
				var sum float64
				for j := range p {
					p[j] = math.Exp(p[j] - m)
					sum += p[j]
				}
				var dd float64
				for j := range p {
					p[j] /= sum
					dp[j] = dot(dOut, qi, v, kv(j))
					dd += p[j] * dp[j]
				}
				for j := range p {
					ds := p[j] * (dp[j] - dd)
					for d := 0; d < dh; d++ {
						dq[qi+d] += scale * ds * k[kv(j)+d]
						dk[kv(j)+d] += scale * ds * q[qi+d]
						dv[kv(j)+d] += p[j] * dOut[qi+d]
					}
				}
			}
		}
	}
	return dq, dk, dv
}
