package ref

import "math"

// Attention is grouped-query attention over packed sequences, causal unless
// nonCausal, the contract of engine.Backend.Attention in float64:
//
//	q [nq, h, dh], k, v [nk, g, dh], out [nq, h, dh], lse [nq, h]
//
// Each seqs[b] = (qStart, qLen, kStart, kLen); query t of the sequence, head
// hh, attends to keys kStart … kStart+t+kLen−qLen (causal) or kStart …
// kStart+kLen−1 (non-causal) of head hh/(h/g) with
// weights softmax_j(scale·q·k_j). lse is log Σ_j exp(scale·q·k_j). Rows no
// sequence covers are zero in out and lse.
func Attention(q, k, v []float64, seqs [][4]int, nq, nk, h, g, dh int, scale float64, nonCausal bool) (out, lse []float64) {
	out = make([]float64, nq*h*dh)
	lse = make([]float64, nq*h)
	rep := h / g
	for _, s := range seqs {
		qStart, qLen, kStart, kLen := s[0], s[1], s[2], s[3]
		for t := 0; t < qLen; t++ {
			visible := t + kLen - qLen + 1 // keys 0 … t+kLen−qLen
			if nonCausal {
				visible = kLen
			}
			for hh := 0; hh < h; hh++ {
				qi := ((qStart+t)*h + hh) * dh
				kv := func(j int) int { return ((kStart+j)*g + hh/rep) * dh }
				scores := make([]float64, visible)
				m := math.Inf(-1)
				for j := range scores {
					var sc float64
					for d := 0; d < dh; d++ {
						sc += q[qi+d] * k[kv(j)+d]
					}
					scores[j] = scale * sc
					m = math.Max(m, scores[j])
				}
				var sum float64
				for _, sc := range scores {
					sum += math.Exp(sc - m)
				}
				for j, sc := range scores {
					p := math.Exp(sc-m) / sum
					for d := 0; d < dh; d++ {
						out[qi+d] += p * v[kv(j)+d]
					}
				}
				lse[(qStart+t)*h+hh] = m + math.Log(sum)
			}
		}
	}
	return out, lse
}
