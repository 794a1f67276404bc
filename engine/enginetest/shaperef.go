package enginetest

// Float64 references of RunShapes's spot checks: each computes a few rows
// (or columns) of an op's result from the host copies of its inputs, the
// same values the backend was given, with the arithmetic of engine/ref. At
// 8B shapes the GEMM's rows are the largest of them (one pass over op(B)
// for all sampled rows at once); everything here is parallel where its
// cost grows with a whole tensor.

import (
	"math"

	"github.com/turnwise/turnwise/engine"
)

// pickRows returns rows rows of x (rows of w elements), widened to float64.
func pickRows(x []float32, rows []int, w int) []float64 {
	out := make([]float64, 0, len(rows)*w)
	for _, r := range rows {
		out = append(out, F64(x[r*w:(r+1)*w])...)
	}
	return out
}

// pick32 returns the elements idx of v.
func pick32(v []float32, idx []int) []float32 {
	out := make([]float32, len(idx))
	for i, j := range idx {
		out[i] = v[j]
	}
	return out
}

// gemmRows returns rows rows of alpha·op(A)·op(B) + beta·C0 (C0 nil: zero),
// A [m, k] ([k, m] if transA), B [k, n] ([n, k] if transB), row-major. The
// work is split by columns of C, each piece reading its columns of op(B)
// once for all rows.
func gemmRows(a, b, c0 []float32, m, n, k int, transA, transB bool, alpha, beta float64, rows []int) []float64 {
	ar := make([][]float64, len(rows)) // the rows of op(A)
	for i, r := range rows {
		row := make([]float64, k)
		for l := range row {
			if transA {
				row[l] = float64(a[l*m+r])
			} else {
				row[l] = float64(a[r*k+l])
			}
		}
		ar[i] = row
	}
	out := make([]float64, len(rows)*n)
	parallel(n, 64, func(lo, hi int) {
		acc := make([]float64, hi-lo)
		for i := range rows {
			clear(acc)
			if transB { // column j of op(B) is row j of B
				for j := lo; j < hi; j++ {
					bj := b[j*k : (j+1)*k]
					var s float64
					for l, x := range ar[i] {
						s += x * float64(bj[l])
					}
					acc[j-lo] = s
				}
			} else {
				for l, x := range ar[i] {
					for j, y := range b[l*n+lo : l*n+hi] {
						acc[j] += x * float64(y)
					}
				}
			}
			for j := lo; j < hi; j++ {
				v := alpha * acc[j-lo]
				if beta != 0 {
					v += beta * float64(c0[rows[i]*n+j])
				}
				out[i*n+j] = v
			}
		}
	})
	return out
}

// attnHost is one attention case's inputs on the host, for row-local
// float64 references of the contract of engine.Backend.Attention.
type attnHost struct {
	q, k, v   []float32 // [nq, h, dh], [nk, g, dh], [nk, g, dh]
	h, g, dh  int
	seqs      [][4]int // (qStart, qLen, kStart, kLen)
	scale     float64
	nonCausal bool
}

// query returns the sequence that owns query row i and i's position in it.
func (a attnHost) query(i int) (s [4]int, t int, ok bool) {
	for _, s := range a.seqs {
		if i >= s[0] && i < s[0]+s[1] {
			return s, i - s[0], true
		}
	}
	return s, 0, false
}

// seen returns how many of its sequence's keys (from the first) query t of
// sequence s sees.
func (a attnHost) seen(s [4]int, t int) int {
	if a.nonCausal {
		return s[3]
	}
	return t + s[3] - s[1] + 1
}

// dot returns Σ x[xo+i]·y[yo+i] over one head's width.
func (a attnHost) dot(x []float32, xo int, y []float32, yo int) float64 {
	var s float64
	for i := range a.dh {
		s += float64(x[xo+i]) * float64(y[yo+i])
	}
	return s
}

// forwardRows returns out [len(rows), h, dh] and lse [len(rows), h] of the
// query rows rows (zero where no sequence owns a row).
func (a attnHost) forwardRows(rows []int) (out, lse []float64) {
	h, dh, rep := a.h, a.dh, a.h/a.g
	out, lse = make([]float64, len(rows)*h*dh), make([]float64, len(rows)*h)
	parallel(len(rows)*h, 1, func(task, _ int) {
		i, hh := task/h, task%h
		s, t, ok := a.query(rows[i])
		if !ok {
			return
		}
		qo, kv := (rows[i]*h+hh)*dh, hh/rep
		sc := make([]float64, a.seen(s, t))
		m := math.Inf(-1)
		for j := range sc {
			sc[j] = a.scale * a.dot(a.q, qo, a.k, ((s[2]+j)*a.g+kv)*dh)
			m = math.Max(m, sc[j])
		}
		var sum float64
		for _, x := range sc {
			sum += math.Exp(x - m)
		}
		o := out[(i*h+hh)*dh : (i*h+hh+1)*dh]
		for j, x := range sc {
			p, vo := math.Exp(x-m)/sum, ((s[2]+j)*a.g+kv)*dh
			for d := range o {
				o[d] += p * float64(a.v[vo+d])
			}
		}
		lse[i*h+hh] = m + math.Log(sum)
	})
	return out, lse
}

// dqRows returns dq [len(rows), h, dh] of the query rows rows, from dOut
// and the forward's out and lse as the backward receives them (all rows):
// with P_j = exp(scale·q·k_j − lse) and D = dOut·out,
// dq = scale·Σ_j P_j·(dOut·v_j − D)·k_j.
func (a attnHost) dqRows(rows []int, dOut, out, lse []float32) []float64 {
	h, dh, rep := a.h, a.dh, a.h/a.g
	dq := make([]float64, len(rows)*h*dh)
	parallel(len(rows)*h, 1, func(task, _ int) {
		i, hh := task/h, task%h
		s, t, ok := a.query(rows[i])
		if !ok {
			return
		}
		qo, kv := (rows[i]*h+hh)*dh, hh/rep
		d0, l := a.dot(dOut, qo, out, qo), float64(lse[rows[i]*h+hh])
		g := dq[(i*h+hh)*dh : (i*h+hh+1)*dh]
		for j := range a.seen(s, t) {
			ko := ((s[2]+j)*a.g + kv) * dh
			p := math.Exp(a.scale*a.dot(a.q, qo, a.k, ko) - l)
			c := a.scale * p * (a.dot(dOut, qo, a.v, ko) - d0)
			for d := range g {
				g[d] += c * float64(a.k[ko+d])
			}
		}
	})
	return dq
}

// dkvRows returns dk and dv [len(rows), g, dh] of the key rows rows: over
// the queries that see key j and the heads that share its key/value head,
// dv = Σ P·dOut and dk = scale·Σ P·(dOut·v_j − D)·q.
func (a attnHost) dkvRows(rows []int, dOut, out, lse []float32) (dk, dv []float64) {
	h, g, dh, rep := a.h, a.g, a.dh, a.h/a.g
	dk, dv = make([]float64, len(rows)*g*dh), make([]float64, len(rows)*g*dh)
	parallel(len(rows)*g, 1, func(task, _ int) {
		i, kv := task/g, task%g
		kr := rows[i]
		ko := (kr*g + kv) * dh
		gk, gv := dk[(i*g+kv)*dh:(i*g+kv+1)*dh], dv[(i*g+kv)*dh:(i*g+kv+1)*dh]
		for _, s := range a.seqs {
			if kr < s[2] || kr >= s[2]+s[3] {
				continue
			}
			for t := range s[1] {
				if a.seen(s, t) <= kr-s[2] {
					continue
				}
				for hh := kv * rep; hh < (kv+1)*rep; hh++ {
					qr := s[0] + t
					qo := (qr*h + hh) * dh
					p := math.Exp(a.scale*a.dot(a.q, qo, a.k, ko) - float64(lse[qr*h+hh]))
					c := a.scale * p * (a.dot(dOut, qo, a.v, ko) - a.dot(dOut, qo, out, qo))
					for d := range gk {
						gv[d] += p * float64(dOut[qo+d])
						gk[d] += c * float64(a.q[qo+d])
					}
				}
			}
		}
	})
	return dk, dv
}

// rmsNormDXRows returns rows rows of RMSNormBackward's dx, accumulated onto
// dx0: with n = x·rstd and g = dOut·w, dx = dx0 + rstd·(g − n·mean(g·n)).
// x, dOut and dx0 are [N, d], rstd [N].
func rmsNormDXRows(rows []int, d int, x, rstd, dOut, dx0, w []float32) []float64 {
	out := make([]float64, len(rows)*d)
	for i, r := range rows {
		rs := float64(rstd[r])
		var gn float64
		for j := range d {
			gn += float64(dOut[r*d+j]) * float64(w[j]) * float64(x[r*d+j]) * rs
		}
		gn /= float64(d)
		for j := range d {
			g, n := float64(dOut[r*d+j])*float64(w[j]), float64(x[r*d+j])*rs
			out[i*d+j] = float64(dx0[r*d+j]) + rs*(g-n*gn)
		}
	}
	return out
}

// layerNormDXRows returns rows rows of LayerNormBackward's dx: with
// n = (x − mean)·rstd and g = dOut·w, dx = rstd·(g − mean(g) − n·mean(g·n)).
func layerNormDXRows(rows []int, d int, x, mean, rstd, dOut, w []float32) []float64 {
	out := make([]float64, len(rows)*d)
	for i, r := range rows {
		mu, rs := float64(mean[r]), float64(rstd[r])
		var gm, gn float64
		for j := range d {
			g := float64(dOut[r*d+j]) * float64(w[j])
			gm += g
			gn += g * (float64(x[r*d+j]) - mu) * rs
		}
		gm /= float64(d)
		gn /= float64(d)
		for j := range d {
			g, n := float64(dOut[r*d+j])*float64(w[j]), (float64(x[r*d+j])-mu)*rs
			out[i*d+j] = rs * (g - gm - n*gn)
		}
	}
	return out
}

// normDWCols returns the columns cols of a norm's dw = Σ_i dOut·n over the
// n rows, n = (x − mean)·rstd (RMSNorm: mean nil).
func normDWCols(cols []int, n, d int, x, mean, rstd, dOut []float32) []float64 {
	out := make([]float64, len(cols))
	for i := range n {
		var mu float64
		if mean != nil {
			mu = float64(mean[i])
		}
		rs := float64(rstd[i])
		for c, j := range cols {
			out[c] += float64(dOut[i*d+j]) * (float64(x[i*d+j]) - mu) * rs
		}
	}
	return out
}

// colSumsAt returns the sums over the n rows of x [n, d] of the columns cols.
func colSumsAt(cols []int, n, d int, x []float32) []float64 {
	out := make([]float64, len(cols))
	for i := range n {
		for c, j := range cols {
			out[c] += float64(x[i*d+j])
		}
	}
	return out
}

// ropeRows returns rows rows of x [N, heads, dh] rotated by RoPE at
// positions pos, or rotated back (RoPEBackward's inverse rotation: the
// angles negated, which an f32 product does exactly).
func ropeRows(rows []int, x []float32, pos []int32, freqs []float32, heads, dh int, inverse bool) []float64 {
	f := freqs
	if inverse {
		f = make([]float32, len(freqs))
		for i, v := range freqs {
			f[i] = -v
		}
	}
	w := heads * dh
	out := make([]float64, 0, len(rows)*w)
	for _, r := range rows {
		out = append(out, ropeRef(F64(x[r*w:(r+1)*w]), pos[r:r+1], f, 1, heads, dh)...)
	}
	return out
}

// swigluGrad returns SwiGLUBackward's dGate = dOut·up·silu'(gate) and
// dUp = dOut·silu(gate), silu'(g) = σ(g)·(1 + g·(1 − σ(g))).
func swigluGrad(gate, up, dOut []float64) (dGate, dUp []float64) {
	dGate, dUp = make([]float64, len(gate)), make([]float64, len(gate))
	for i, g := range gate {
		s := 1 / (1 + math.Exp(-g))
		dGate[i] = dOut[i] * up[i] * s * (1 + g*(1-s))
		dUp[i] = dOut[i] * g * s
	}
	return dGate, dUp
}

// geluGrad returns GELUBackward's dx = dOut·gelu_k'(x) (for GELUQuick the
// derivative of the exact x·σ(1.702·x)).
func geluGrad(k engine.GELUKind, x, dOut []float64) []float64 {
	out := make([]float64, len(x))
	c := math.Sqrt(2 / math.Pi)
	for i, v := range x {
		var d float64
		switch k {
		case engine.GELUErf:
			d = 0.5*(1+math.Erf(v/math.Sqrt2)) + v*math.Exp(-v*v/2)/math.Sqrt(2*math.Pi)
		case engine.GELUTanh:
			th := math.Tanh(c * (v + 0.044715*v*v*v))
			d = 0.5*(1+th) + 0.5*v*(1-th*th)*c*(1+3*0.044715*v*v)
		default:
			s := 1 / (1 + math.Exp(-1.702*v))
			d = s + 1.702*v*s*(1-s)
		}
		out[i] = dOut[i] * d
	}
	return out
}
