package enginetest

// The ops of RunShapes (shapes.go), one function each: the cases, the full
// comparisons (check: every element, against the reference where it runs
// and the GEMM peer where there is one) and the float64 spot checks (spot,
// with the row references of shaperef.go: sampled rows or columns). Each
// function's comment says which results get which. Inputs with a token
// dimension are drawn once at the longest sequence; a shorter one runs on
// their first rows.

import (
	"fmt"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/ref"
)

// longest returns the longest sequence length of s.
func longest(s ModelShapes) int { return s.SeqLens[len(s.SeqLens)-1] }

// shapeGemm is one GEMM of a layer: C [m, n] = alpha·op(A)·op(B) + beta·C.
type shapeGemm struct {
	name           string
	a, b           twin
	c0             *twin // C's previous contents (beta ≠ 0), or nil
	m, n, k        int
	transA, transB bool
	alpha, beta    float32
	outF32         bool // C is f32 whatever the operands' dtype
}

// shapeGemms runs the GEMMs of one Llama layer's forward and backward and
// of its LoRA adapters at each sequence length, and the vocabulary
// projection of one loss chunk.
//
// Full: C against the reference and the peer. Sampled: rows of C, from
// those rows of op(A) and all of op(B) (and of C's previous contents).
func shapeGemms(t *testing.T, p pairRun, s ModelShapes) {
	d, f, kv, r, long := s.Dim, s.FFN, s.KVHeads*s.HeadDim, s.LoRARank, longest(s)
	x := p.values(p.dt, 1, long, d)  // activations
	h := p.values(p.dt, 1, long, f)  // the MLP's hidden activations, or their gradient
	dy := p.values(p.dt, 1, long, d) // a gradient of width D
	lt := p.values(p.dt, 1, long, r) // LoRA's x·Aᵀ, or its gradient
	wq, wkv := p.values(p.dt, 1, d, d), p.values(p.dt, 1, kv, d)
	wgu, wdown := p.values(p.dt, 1, f, d), p.values(p.dt, 1, d, f)
	la, lb := p.values(p.dt, 1, r, d), p.values(p.dt, 1, d, r)
	wlm := p.values(p.dt, 1, s.Vocab, d)
	var cases []shapeGemm
	for _, n := range s.SeqLens {
		xn, hn, dyn, ltn := x.rows(0, n), h.rows(0, n), dy.rows(0, n), lt.rows(0, n)
		cases = append(cases,
			shapeGemm{name: "q_proj", a: xn, b: wq, m: n, n: d, k: d, transB: true, alpha: 1},
			shapeGemm{name: "kv_proj", a: xn, b: wkv, m: n, n: kv, k: d, transB: true, alpha: 1},
			shapeGemm{name: "gate_up_proj", a: xn, b: wgu, m: n, n: f, k: d, transB: true, alpha: 1},
			shapeGemm{name: "down_proj", a: hn, b: wdown, m: n, n: d, k: f, transB: true, alpha: 1},
			// dx [N, F] += dy [N, D]·W [D, F]
			shapeGemm{name: "down_dx", a: dyn, b: wdown, c0: &hn, m: n, n: f, k: d, alpha: 1, beta: 1},
			// dW [F, D] += dyᵀ·x, dy [N, F]
			shapeGemm{name: "gate_dw", a: hn, b: xn, c0: &wgu, m: f, n: d, k: n, transA: true, alpha: 1, beta: 1},
			// t [N, r] = x·Aᵀ
			shapeGemm{name: "lora_a", a: xn, b: la, m: n, n: r, k: d, transB: true, alpha: 1},
			// y [N, D] += s·t·Bᵀ
			shapeGemm{name: "lora_b", a: ltn, b: lb, c0: &dyn, m: n, n: d, k: r, transB: true, alpha: 2, beta: 1},
			// dA [r, D] += dtᵀ·x
			shapeGemm{name: "lora_da", a: ltn, b: xn, c0: &la, m: r, n: d, k: n, transA: true, alpha: 1, beta: 1},
		)
	}
	lmx := x.rows(0, s.LogitRows)
	cases = append(cases,
		shapeGemm{name: "lm_head", a: lmx, b: wlm, m: s.LogitRows, n: s.Vocab, k: d, transB: true, alpha: 1},
		shapeGemm{name: "lm_head_f32", a: lmx, b: wlm, m: s.LogitRows, n: s.Vocab, k: d, transB: true, alpha: 1, outF32: true})
	for _, c := range cases {
		if c.outF32 && p.dt == engine.F32 {
			continue
		}
		t.Run(fmt.Sprintf("%s_%dx%dx%d", c.name, c.m, c.n, c.k), func(t *testing.T) {
			p := p.in(t)
			cdt := p.dt
			if c.outF32 {
				cdt = engine.F32
			}
			out := p.zeros(cdt, c.m, c.n)
			if c.c0 != nil {
				out = p.clone(*c.c0)
			}
			gp := engine.GemmParams{TransA: c.transA, TransB: c.transB, Alpha: c.alpha, Beta: c.beta}
			p.run(func(be engine.Backend, at side) { be.Gemm(at(out), at(c.a), at(c.b), gp) })
			p.check(t, "C", out, Tol, cdt)

			rows := p.sampleRows(c.m)
			got := p.rowsOf(out, rows)
			defer p.clock.add(phaseSpot, time.Now())
			var c0 []float32
			if c.c0 != nil {
				c0 = c.c0.host
			}
			want := gemmRows(c.a.host, c.b.host, c0, c.m, c.n, c.k, c.transA, c.transB, float64(c.alpha), float64(c.beta), rows)
			p.spot(t, "C", rows, c.n, got, want, Tol(cdt))
		})
	}
}

// shapeAttention runs training attention (forward and backward) on one
// sequence of each length in s.SeqLens, the same non-causal (a vision
// transformer's) at the shortest, then decoding and a prefill over caches
// of the longest length (forward only, as in generation). What each case
// checks: shapeAttentionCase.
func shapeAttention(t *testing.T, p pairRun, s ModelShapes) {
	h, g, dh, long := s.Heads, s.KVHeads, s.HeadDim, longest(s)
	scale := 1 / math.Sqrt(float64(dh))
	q, k, v := p.values(p.dt, 1, long, h, dh), p.values(p.dt, 1, long, g, dh), p.values(p.dt, 1, long, g, dh)
	dOut := p.values(p.dt, 1, long, h, dh)
	for _, n := range s.SeqLens {
		t.Run(fmt.Sprintf("train_T%d", n), func(t *testing.T) {
			shapeAttentionCase(t, p.in(t), s, q.rows(0, n), k.rows(0, n), v.rows(0, n), dOut.rows(0, n),
				[][4]int{{0, n, 0, n}}, scale, false)
		})
	}
	n := s.SeqLens[0]
	t.Run(fmt.Sprintf("noncausal_T%d", n), func(t *testing.T) {
		shapeAttentionCase(t, p.in(t), s, q.rows(0, n), k.rows(0, n), v.rows(0, n), dOut.rows(0, n),
			[][4]int{{0, n, 0, n}}, scale, true)
	})
	t.Run(fmt.Sprintf("decode_B%d_over_%d", s.Decode, long), func(t *testing.T) {
		p := p.in(t)
		var seqs [][4]int
		for i := range s.Decode {
			seqs = append(seqs, [4]int{i, 1, i * long, long})
		}
		nk := s.Decode * long
		shapeAttentionCase(t, p, s, p.values(p.dt, 1, s.Decode, h, dh), p.values(p.dt, 1, nk, g, dh), p.values(p.dt, 1, nk, g, dh),
			twin{}, seqs, scale, false)
	})
	t.Run(fmt.Sprintf("prefill_%d_over_%d", s.Prefill, long), func(t *testing.T) {
		p := p.in(t)
		shapeAttentionCase(t, p, s, p.values(p.dt, 1, s.Prefill, h, dh), k, v, twin{},
			[][4]int{{0, s.Prefill, 0, long}}, scale, false)
	})
}

// shapeAttentionCase runs one attention case, and its backward when dOut is
// given.
//
// Full: out, lse, dq, dk, dv. Sampled: out and lse of whole query rows
// (every head over every key it sees; the last query among them), dq at
// the same query rows, dk and dv at sampled key rows (over every query and
// head that reads them), from the backend's out and lse.
func shapeAttentionCase(t *testing.T, p pairRun, s ModelShapes, q, k, v, dOut twin, seqs [][4]int, scale float64, nonCausal bool) {
	h, g, dh := s.Heads, s.KVHeads, s.HeadDim
	nq, nk := q.b.Dim(0), k.b.Dim(0)
	var flat []int32
	for _, sq := range seqs {
		flat = append(flat, int32(sq[0]), int32(sq[1]), int32(sq[2]), int32(sq[3]))
	}
	st := p.ints(flat, len(seqs), 4)
	ap := engine.AttentionParams{Scale: float32(scale), NonCausal: nonCausal}
	out, lse := p.zeros(p.dt, nq, h, dh), p.zeros(engine.F32, nq, h)
	p.run(func(be engine.Backend, at side) { be.Attention(at(out), at(lse), at(q), at(k), at(v), at(st), ap) })
	p.check(t, "out", out, Tol, p.dt)
	p.check(t, "lse", lse, Tol, engine.F32)

	ah := attnHost{q: q.host, k: k.host, v: v.host, h: h, g: g, dh: dh, seqs: seqs, scale: scale, nonCausal: nonCausal}
	qrows := p.sampleRows(nq)
	gotOut, gotLSE := p.rowsOf(out, qrows), p.rowsOf(lse, qrows)
	spotStart := time.Now()
	wantOut, wantLSE := ah.forwardRows(qrows)
	p.clock.add(phaseSpot, spotStart)
	p.spot(t, "out", qrows, h*dh, gotOut, wantOut, Tol(p.dt))
	p.spot(t, "lse", qrows, h, gotLSE, wantLSE, Tol(engine.F32))
	if dOut.b == nil {
		return
	}

	// The backward differentiates the backend's forward: both sides read
	// its out and lse.
	p.share(out)
	p.share(lse)
	dq, dk, dv := p.zeros(p.dt, nq, h, dh), p.zeros(p.dt, nk, g, dh), p.zeros(p.dt, nk, g, dh)
	p.run(func(be engine.Backend, at side) {
		be.AttentionBackward(at(dq), at(dk), at(dv), at(dOut), at(out), at(lse), at(q), at(k), at(v), at(st), ap)
	})
	p.check(t, "dq", dq, GradTol, p.dt)
	p.check(t, "dk", dk, GradTol, p.dt)
	p.check(t, "dv", dv, GradTol, p.dt)

	krows := p.sampleRows(nk)
	gotDQ, gotDK, gotDV := p.rowsOf(dq, qrows), p.rowsOf(dk, krows), p.rowsOf(dv, krows)
	fwdOut, fwdLSE := p.whole(out), p.whole(lse) // every query's, for dk and dv
	defer p.clock.add(phaseSpot, time.Now())
	wantDQ := ah.dqRows(qrows, dOut.host, fwdOut, fwdLSE)
	wantDK, wantDV := ah.dkvRows(krows, dOut.host, fwdOut, fwdLSE)
	p.spot(t, "dq", qrows, h*dh, gotDQ, wantDQ, GradTol(p.dt))
	p.spot(t, "dk", krows, g*dh, gotDK, wantDK, GradTol(p.dt))
	p.spot(t, "dv", krows, g*dh, gotDV, wantDV, GradTol(p.dt))
}

// shapeRMSNorm runs the fused residual add + RMSNorm and the backward at
// each sequence length.
//
// Full: resid, out, rstd, dx, dw. Sampled: rows of resid, and of out, rstd
// and dx from the backend's resid and rstd; dw at sampled columns, over
// every row.
func shapeRMSNorm(t *testing.T, p pairRun, s ModelShapes) {
	const eps = 1e-5
	d, long := s.Dim, longest(s)
	x0, delta, w := p.values(p.dt, 2, long, d), p.values(p.dt, 1, long, d), p.values(p.dt, 1, d)
	dOut, dx0 := p.values(p.dt, 1, long, d), p.values(p.dt, 1, long, d)
	for _, n := range s.SeqLens {
		t.Run(fmt.Sprintf("T%d", n), func(t *testing.T) {
			p := p.in(t)
			x, dn := p.clone(x0.rows(0, n)), delta.rows(0, n) // x becomes the residual, in place
			out, rstd := p.zeros(p.dt, n, d), p.zeros(engine.F32, n)
			p.run(func(be engine.Backend, at side) { be.AddRMSNorm(at(x), at(out), at(rstd), at(x), at(dn), at(w), eps) })
			p.check(t, "resid", x, Tol, p.dt)
			// The normalisation is compared from the same residual: the
			// reference's own is the unrounded sum in the self-reference
			// mode, so it normalises the backend's (in the second-backend
			// mode the two are the same: one rounding of one f32 sum).
			p.share(x)
			p.onRefOnly(func(be engine.Backend, at side) { be.RMSNorm(at(out), at(rstd), at(x), at(w), eps) })
			p.check(t, "out", out, Tol, p.dt)
			p.check(t, "rstd", rstd, Tol, engine.F32)

			rows := p.sampleRows(n)
			gotX, gotOut, gotR := p.rowsOf(x, rows), p.rowsOf(out, rows), p.rowsOf(rstd, rows)
			spotStart := time.Now()
			wantX := make([]float64, len(gotX))
			for i, r := range rows {
				for j := range d {
					wantX[i*d+j] = float64(p.dt.Round(x0.host[r*d+j] + delta.host[r*d+j]))
				}
			}
			wantOut, wantR := ref.RMSNorm(F64(gotX), F64(w.host), len(rows), d, eps, rounder(p.dt))
			p.clock.add(phaseSpot, spotStart)
			p.spot(t, "resid", rows, d, gotX, wantX, Tol(p.dt))
			p.spot(t, "out (from the backend's resid)", rows, d, gotOut, wantOut, Tol(p.dt))
			p.spot(t, "rstd (from the backend's resid)", rows, 1, gotR, wantR, Tol(engine.F32))

			p.share(rstd)
			dx, dw, dOutN := p.clone(dx0.rows(0, n)), p.zeros(p.dt, d), dOut.rows(0, n) // dx accumulates
			p.run(func(be engine.Backend, at side) {
				be.RMSNormBackward(at(dx), at(dw), at(dOutN), at(x), at(w), at(rstd))
			})
			p.check(t, "dx", dx, GradTol, p.dt)
			p.check(t, "dw", dw, GradTol, p.dt)

			gotDX, resid, rs := p.rowsOf(dx, rows), p.whole(x), p.whole(rstd)
			gotDW := p.whole(dw)
			cols := p.sample(d, 16)
			defer p.clock.add(phaseSpot, time.Now())
			wantDX := rmsNormDXRows(rows, d, resid, rs, dOutN.host, dx0.host, w.host)
			wantDW := normDWCols(cols, n, d, resid, nil, rs, dOutN.host)
			p.spot(t, "dx", rows, d, gotDX, wantDX, GradTol(p.dt))
			p.spot(t, "dw at sampled columns", cols, 1, pick32(gotDW, cols), wantDW, GradTol(p.dt))
		})
	}
}

// shapeRoPE rotates queries and keys of each sequence length at positions
// 0 … T−1 with Llama 3.1's frequencies, rotates them back (a round trip the
// backend must close by itself), and rotates a gradient back.
//
// Full: x, the round trip (also against the original x, in every mode),
// dx. Sampled: rows of x and dx.
func shapeRoPE(t *testing.T, p pairRun, s ModelShapes) {
	dh, long := s.HeadDim, longest(s)
	pos := make([]int32, long)
	for i := range pos {
		pos[i] = int32(i)
	}
	freqs := engine.RoPEFreqs(dh, 500000, &engine.RoPEScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192})
	pt, ft := p.ints(pos, long), p.f32s(freqs, len(freqs))
	for _, heads := range []int{s.Heads, s.KVHeads} {
		x0, g0 := p.values(p.dt, 1, long, heads, dh), p.values(p.dt, 1, long, heads, dh)
		for _, n := range s.SeqLens {
			t.Run(fmt.Sprintf("T%d_H%d", n, heads), func(t *testing.T) {
				p := p.in(t)
				x, ptn, w := p.clone(x0.rows(0, n)), pt.rows(0, n), heads*dh
				p.run(func(be engine.Backend, at side) { be.RoPE(at(x), at(ptn), at(ft)) })
				p.check(t, "x", x, Tol, p.dt)
				rows := p.sampleRows(n)
				gotX := p.rowsOf(x, rows)

				// Round trip: within the forward's bound, grown by at most
				// √2 by the rotation back (a pair's norm bounds each of its
				// elements), and the backward's: 2·Tol + GradTol.
				p.run(func(be engine.Backend, at side) { be.RoPEBackward(at(x), at(ptn), at(ft)) })
				p.compareHost(t, "x rotated back against x", x, x0.host[:n*w], 2*Tol(p.dt)+GradTol(p.dt))

				dx := p.clone(g0.rows(0, n))
				p.run(func(be engine.Backend, at side) { be.RoPEBackward(at(dx), at(ptn), at(ft)) })
				p.check(t, "dx", dx, GradTol, p.dt)
				gotDX := p.rowsOf(dx, rows)

				defer p.clock.add(phaseSpot, time.Now())
				wantX := ropeRows(rows, x0.host, pos, freqs, heads, dh, false)
				wantDX := ropeRows(rows, g0.host, pos, freqs, heads, dh, true)
				p.spot(t, "x", rows, w, gotX, wantX, Tol(p.dt))
				p.spot(t, "dx", rows, w, gotDX, wantDX, GradTol(p.dt))
			})
		}
	}
}

// compareHost fails t when the backend's x is not within tol of the host
// values want, in Close's measure.
func (p pairRun) compareHost(t *testing.T, what string, x twin, want []float32, tol float64) {
	t.Helper()
	got := p.whole(x)
	defer p.clock.add(phaseCompare, time.Now())
	parts := make([]diffStats, (len(got)+chunk-1)/chunk)
	parallel(len(got), chunk, func(lo, hi int) {
		s := diffStatsOf(got[lo:hi], want[lo:hi])
		s.at += lo
		parts[lo/chunk] = s
	})
	reportParts(t, what, parts, tol, x.b.Shape())
}

// shapeSwiGLU runs the MLP's gate at each sequence length, width FFN.
//
// Full: out, dGate, dUp. Sampled: their rows.
func shapeSwiGLU(t *testing.T, p pairRun, s ModelShapes) {
	f, long := s.FFN, longest(s)
	gate0, up0, dOut0 := p.values(p.dt, 4, long, f), p.values(p.dt, 2, long, f), p.values(p.dt, 1, long, f)
	for _, n := range s.SeqLens {
		t.Run(fmt.Sprintf("T%d", n), func(t *testing.T) {
			p := p.in(t)
			gate, up, dOut := gate0.rows(0, n), up0.rows(0, n), dOut0.rows(0, n)
			out := p.zeros(p.dt, n, f)
			p.run(func(be engine.Backend, at side) { be.SwiGLU(at(out), at(gate), at(up)) })
			p.check(t, "out", out, Tol, p.dt)
			dGate, dUp := p.zeros(p.dt, n, f), p.zeros(p.dt, n, f)
			p.run(func(be engine.Backend, at side) { be.SwiGLUBackward(at(dGate), at(dUp), at(dOut), at(gate), at(up)) })
			p.check(t, "dGate", dGate, GradTol, p.dt)
			p.check(t, "dUp", dUp, GradTol, p.dt)

			rows := p.sampleRows(n)
			gotOut, gotDG, gotDU := p.rowsOf(out, rows), p.rowsOf(dGate, rows), p.rowsOf(dUp, rows)
			defer p.clock.add(phaseSpot, time.Now())
			gr, ur, dr := pickRows(gate.host, rows, f), pickRows(up.host, rows, f), pickRows(dOut.host, rows, f)
			wantDG, wantDU := swigluGrad(gr, ur, dr)
			p.spot(t, "out", rows, f, gotOut, ref.SwiGLU(gr, ur, rounder(p.dt)), Tol(p.dt))
			p.spot(t, "dGate", rows, f, gotDG, wantDG, GradTol(p.dt))
			p.spot(t, "dUp", rows, f, gotDU, wantDU, GradTol(p.dt))
		})
	}
}

// shapeLayerNorm runs LayerNorm and its backward (dx, dw, db) at each
// sequence length, width D.
//
// Full: out, mean, rstd, dx, dw, db. Sampled: rows of out, mean, rstd and
// of dx (from the backend's mean and rstd); dw and db at sampled columns,
// over every row.
func shapeLayerNorm(t *testing.T, p pairRun, s ModelShapes) {
	const eps = 1e-5
	d, long := s.Dim, longest(s)
	x0, w, bias, dOut0 := p.values(p.dt, 2, long, d), p.values(p.dt, 1, d), p.values(p.dt, 1, d), p.values(p.dt, 1, long, d)
	for _, n := range s.SeqLens {
		t.Run(fmt.Sprintf("T%d", n), func(t *testing.T) {
			p := p.in(t)
			x, dOut := x0.rows(0, n), dOut0.rows(0, n)
			out, mean, rstd := p.zeros(p.dt, n, d), p.zeros(engine.F32, n), p.zeros(engine.F32, n)
			p.run(func(be engine.Backend, at side) {
				be.LayerNorm(at(out), at(mean), at(rstd), at(x), at(w), at(bias), eps)
			})
			p.check(t, "out", out, Tol, p.dt)
			p.check(t, "mean", mean, Tol, engine.F32)
			p.check(t, "rstd", rstd, Tol, engine.F32)

			p.share(mean)
			p.share(rstd)
			dx, dw, db := p.zeros(p.dt, n, d), p.zeros(p.dt, d), p.zeros(p.dt, d)
			p.run(func(be engine.Backend, at side) {
				be.LayerNormBackward(at(dx), at(dw), at(db), at(dOut), at(x), at(w), at(mean), at(rstd))
			})
			p.check(t, "dx", dx, GradTol, p.dt)
			p.check(t, "dw", dw, GradTol, p.dt)
			p.check(t, "db", db, GradTol, p.dt)

			rows, cols := p.sampleRows(n), p.sample(d, 16)
			gotOut, gotMean, gotR, gotDX := p.rowsOf(out, rows), p.rowsOf(mean, rows), p.rowsOf(rstd, rows), p.rowsOf(dx, rows)
			mu, rs, gotDW, gotDB := p.whole(mean), p.whole(rstd), p.whole(dw), p.whole(db)
			defer p.clock.add(phaseSpot, time.Now())
			xr := pickRows(x.host, rows, d)
			wantOut, wantMean, wantR := ref.LayerNorm(xr, F64(w.host), F64(bias.host), len(rows), d, eps)
			p.spot(t, "out", rows, d, gotOut, wantOut, Tol(p.dt))
			p.spot(t, "mean", rows, 1, gotMean, wantMean, Tol(engine.F32))
			p.spot(t, "rstd", rows, 1, gotR, wantR, Tol(engine.F32))
			p.spot(t, "dx", rows, d, gotDX, layerNormDXRows(rows, d, x.host, mu, rs, dOut.host, w.host), GradTol(p.dt))
			p.spot(t, "dw at sampled columns", cols, 1, pick32(gotDW, cols), normDWCols(cols, n, d, x.host, mu, rs, dOut.host), GradTol(p.dt))
			p.spot(t, "db at sampled columns", cols, 1, pick32(gotDB, cols), colSumsAt(cols, n, d, dOut.host), GradTol(p.dt))
		})
	}
}

// shapeBias adds a bias to the MLP's rows at each sequence length and sums
// their gradient into an f32 db.
//
// Full: x + b, db. Sampled: rows of x + b (bit for bit: one f32 sum rounded
// once), db at sampled columns, over every row.
func shapeBias(t *testing.T, p pairRun, s ModelShapes) {
	f, long := s.FFN, longest(s)
	x0, bias, dOut0 := p.values(p.dt, 2, long, f), p.values(p.dt, 1, f), p.values(p.dt, 1, long, f)
	for _, n := range s.SeqLens {
		t.Run(fmt.Sprintf("T%d", n), func(t *testing.T) {
			p := p.in(t)
			x, dOut := p.clone(x0.rows(0, n)), dOut0.rows(0, n)
			p.run(func(be engine.Backend, at side) { be.AddBias(at(x), at(bias)) })
			p.check(t, "x + b", x, Tol, p.dt)
			db := p.zeros(engine.F32, f)
			p.run(func(be engine.Backend, at side) { be.AddBiasBackward(at(db), at(dOut)) })
			p.check(t, "db", db, GradTol, engine.F32)

			rows, cols := p.sampleRows(n), p.sample(f, 16)
			gotX, gotDB := p.rowsOf(x, rows), p.whole(db)
			defer p.clock.add(phaseSpot, time.Now())
			wantX := make([]float64, len(gotX))
			for i, r := range rows {
				for j := range f {
					wantX[i*f+j] = float64(p.dt.Round(x0.host[r*f+j] + bias.host[j])) // one f32 sum, rounded once
				}
			}
			p.spot(t, "x + b", rows, f, gotX, wantX, 0)
			p.spot(t, "db at sampled columns", cols, 1, pick32(gotDB, cols), colSumsAt(cols, n, f, dOut.host), GradTol(engine.F32))
		})
	}
}

// shapeGELU runs each GELU and its backward over the MLP's activations at
// each sequence length.
//
// Full: out and dx of each kind. Sampled: their rows.
func shapeGELU(t *testing.T, p pairRun, s ModelShapes) {
	f, long := s.FFN, longest(s)
	x0, dOut0 := p.values(p.dt, 5, long, f), p.values(p.dt, 1, long, f)
	for _, n := range s.SeqLens {
		t.Run(fmt.Sprintf("T%d", n), func(t *testing.T) {
			p := p.in(t)
			x, dOut := x0.rows(0, n), dOut0.rows(0, n)
			rows := p.sampleRows(n)
			xr, dr := pickRows(x.host, rows, f), pickRows(dOut.host, rows, f)
			for _, k := range []engine.GELUKind{engine.GELUErf, engine.GELUTanh, engine.GELUQuick} {
				out, dx := p.zeros(p.dt, n, f), p.zeros(p.dt, n, f)
				p.run(func(be engine.Backend, at side) { be.GELU(at(out), at(x), k) })
				p.check(t, fmt.Sprintf("%v out", k), out, Tol, p.dt)
				p.run(func(be engine.Backend, at side) { be.GELUBackward(at(dx), at(dOut), at(x), k) })
				p.check(t, fmt.Sprintf("%v dx", k), dx, GradTol, p.dt)
				gotOut, gotDX := p.rowsOf(out, rows), p.rowsOf(dx, rows)
				spotStart := time.Now()
				wantOut, wantDX := geluRef(k, xr, rounder(p.dt)), geluGrad(k, xr, dr)
				p.clock.add(phaseSpot, spotStart)
				p.spot(t, fmt.Sprintf("%v out", k), rows, f, gotOut, wantOut, Tol(p.dt))
				p.spot(t, fmt.Sprintf("%v dx", k), rows, f, gotDX, wantDX, GradTol(p.dt))
			}
		})
	}
}

// shapeLogSoftmax runs the loss's log-softmax over one chunk of rows of the
// whole vocabulary (the loss runs chunk by chunk whatever the sequence
// length), with every third target ignored.
//
// Full: logp, lse, dLogits. Sampled: rows of each (dLogits from the
// backend's lse), the last, ignored, among them.
func shapeLogSoftmax(t *testing.T, p pairRun, s ModelShapes) {
	n, v := s.LogitRows, s.Vocab
	logits := p.values(p.dt, 8, n, v)
	tg := randTargets(p.r, n, v, 3)
	tg[n-1] = -1 // an ignored row that the spot checks sample
	targets := p.ints(tg, n)
	logp, lse := p.zeros(engine.F32, n), p.zeros(engine.F32, n)
	p.run(func(be engine.Backend, at side) { be.LogSoftmaxGather(at(logp), at(lse), at(logits), at(targets)) })
	// Sums of exp of the same values, in f32 on both sides: f32 bounds.
	p.check(t, "logp", logp, Tol, engine.F32)
	p.check(t, "lse", lse, Tol, engine.F32)

	p.share(lse)
	dLogp := p.values(engine.F32, 1, n)
	dLogits := p.zeros(p.dt, n, v)
	p.run(func(be engine.Backend, at side) {
		be.LogSoftmaxGatherBackward(at(dLogits), at(dLogp), at(logits), at(lse), at(targets))
	})
	p.check(t, "dLogits", dLogits, GradTol, p.dt)

	rows := p.sampleRows(n)
	gotP, gotL, gotD, lseB := p.rowsOf(logp, rows), p.rowsOf(lse, rows), p.rowsOf(dLogits, rows), p.whole(lse)
	defer p.clock.add(phaseSpot, time.Now())
	lr := pickRows(logits.host, rows, v)
	tr := make([]int32, len(rows))
	for i, r := range rows {
		tr[i] = tg[r]
	}
	wantP, wantL := ref.LogSoftmaxGather(lr, tr, len(rows), v)
	wantD := make([]float64, len(lr))
	for i, r := range rows {
		if tg[r] < 0 {
			continue
		}
		for j := range v {
			y := 0.0
			if int32(j) == tg[r] {
				y = 1
			}
			wantD[i*v+j] = float64(dLogp.host[r]) * (y - math.Exp(lr[i*v+j]-float64(lseB[r])))
		}
	}
	p.spot(t, "logp", rows, 1, gotP, wantP, Tol(engine.F32))
	p.spot(t, "lse", rows, 1, gotL, wantL, Tol(engine.F32))
	p.spot(t, "dLogits (from the backend's lse)", rows, v, gotD, wantD, GradTol(p.dt))
}

// shapeEmbedding looks up the ids of each sequence length (with repeats) in
// the whole table and accumulates a gradient into an f32 table gradient.
//
// Full: out (bit for bit: a copy), dTable. Sampled: rows of out; rows of
// dTable that sampled tokens look up (a repeated id among them) and sampled
// table rows, most of them looked up by no token (zero).
func shapeEmbedding(t *testing.T, p pairRun, s ModelShapes) {
	v, d, long := s.Vocab, s.Dim, longest(s)
	table := p.values(p.dt, 1, v, d)
	dOut0 := p.values(p.dt, 1, long, d)
	ids := make([]int32, long)
	for i := range ids {
		ids[i] = int32(p.r.IntN(v))
		if i%5 == 4 {
			ids[i] = ids[i/2] // a repeat: its rows of dTable sum two gradients
		}
	}
	ids[long-1] = int32(v - 1) // the table's last row
	idt := p.ints(ids, long)
	for _, n := range s.SeqLens {
		t.Run(fmt.Sprintf("T%d", n), func(t *testing.T) {
			p := p.in(t)
			idn, dOut := idt.rows(0, n), dOut0.rows(0, n)
			out := p.zeros(p.dt, n, d)
			p.run(func(be engine.Backend, at side) { be.Embedding(at(out), at(table), at(idn)) })
			p.check(t, "out", out, func(engine.DType) float64 { return 0 }, p.dt) // a copy: the same bits
			dTable := p.zeros(engine.F32, v, d)
			p.run(func(be engine.Backend, at side) { be.EmbeddingBackward(at(dTable), at(dOut), at(idn)) })
			p.check(t, "dTable", dTable, GradTol, engine.F32)

			rows := p.sampleRows(n)
			// Table rows: those the sampled tokens look up (a repeated id
			// among them: token 4's is token 2's), and sampled ones, most of
			// which no token looks up.
			trows := map[int]bool{int(ids[4%n]): true}
			for _, r := range rows {
				trows[int(ids[r])] = true
			}
			for _, r := range p.sampleRows(v) {
				trows[r] = true
			}
			var tr []int
			for r := range trows {
				tr = append(tr, r)
			}
			sort.Ints(tr)
			gotOut, gotDT := p.rowsOf(out, rows), p.rowsOf(dTable, tr)
			defer p.clock.add(phaseSpot, time.Now())
			wantOut := make([]float64, len(rows)*d)
			for i, r := range rows {
				for j := range d {
					wantOut[i*d+j] = float64(table.host[int(ids[r])*d+j])
				}
			}
			wantDT := make([]float64, len(tr)*d)
			for i, row := range tr {
				for tok := range n {
					if int(ids[tok]) == row {
						for j := range d {
							wantDT[i*d+j] += float64(dOut.host[tok*d+j])
						}
					}
				}
			}
			p.spot(t, "out", rows, d, gotOut, wantOut, 0)
			p.spot(t, "dTable", tr, d, gotDT, wantDT, GradTol(engine.F32))
		})
	}
}

// shapeAdamWLoRA steps the LoRA adapters of every layer — A [r, in] and
// B [out, r] on q, k, v, o, gate, up and down: 448 tensors at 8B — twice
// with one multi-tensor AdamW over flat f32 gradients and moments, as the
// optimizer does (bf16 adapters through f32 masters). In the
// self-reference mode the reference's adapters are f32 and need no
// masters: the backend's masters are compared with them in f32, its bf16
// adapters within bf16's bound.
//
// Full: m, v, every adapter and its master. Sampled: the first, a middle
// and the last adapter, with their m, v and master, stepped in float64.
func shapeAdamWLoRA(t *testing.T, p pairRun, s ModelShapes) {
	d, kv, f, r := s.Dim, s.KVHeads*s.HeadDim, s.FFN, s.LoRARank
	var shapes [][2]int
	for range s.Layers {
		for _, io := range [][2]int{{d, d}, {d, kv}, {d, kv}, {d, d}, {d, f}, {d, f}, {f, d}} {
			shapes = append(shapes, [2]int{r, io[0]}, [2]int{io[1], r})
		}
	}
	n := 0
	for _, sh := range shapes {
		n += sh[0] * sh[1]
	}
	masters := p.dt != engine.F32             // the backend's adapters need masters
	refMasters := p.refDT(p.dt) != engine.F32 // and the reference's
	var master twin
	if masters {
		master = p.zeros(engine.F32, n)
	}
	params := make([]twin, len(shapes))
	off := make([]int, len(shapes))
	var spansB, spansRef []engine.AdamWSpan
	o := 0
	for i, sh := range shapes {
		w := p.clone(p.values(p.dt, 0.1, sh[0], sh[1])) // stepped in place
		params[i], off[i] = w, o
		mo := -1
		if masters {
			mo = o
			p.run(func(be engine.Backend, at side) {
				if m := at(master); m != nil {
					be.Cast(slice(m, o, w.b.Numel()), at(w))
				}
			})
		}
		spansB = append(spansB, engine.AdamWSpan{W: w.b, Off: o, MasterOff: mo})
		if p.runsRef() {
			rmo := -1
			if refMasters {
				rmo = o
			}
			spansRef = append(spansRef, engine.AdamWSpan{W: w.ref, Off: o, MasterOff: rmo})
		}
		o += w.b.Numel()
	}
	tb := engine.NewParamTable(spansB)
	defer tb.Free(p.b)
	var tr *engine.ParamTable
	if p.runsRef() {
		tr = engine.NewParamTable(spansRef)
		defer tr.Free(p.ref)
	}
	m, v := p.zeros(engine.F32, n), p.zeros(engine.F32, n)
	ap := engine.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}
	var grads [][]float32
	for step, scale := range []float32{1, 0.37} {
		grad := p.values(engine.F32, 1, n)
		grads = append(grads, grad.host)
		ap.Step, ap.GradScale = step+1, scale
		start := time.Now()
		p.b.AdamWMulti(tb, grad.b, m.b, v.b, master.b, ap)
		if tr != nil {
			var rm *engine.Tensor
			if refMasters {
				rm = master.ref
			}
			p.ref.AdamWMulti(tr, grad.ref, m.ref, v.ref, rm, ap)
		}
		p.clock.add(phaseOps, start)
	}
	p.check(t, "m", m, Tol, engine.F32)
	p.check(t, "v", v, Tol, engine.F32)
	for i, w := range params {
		what := fmt.Sprintf("adapter %d %v", i, w.b.Shape())
		p.check(t, what, w, Tol, p.dt)
		if masters && p.runsRef() {
			// The master is an f32 parameter stepped in f32, on both sides.
			mb := twin{b: slice(master.b, off[i], w.b.Numel()), ref: w.ref.Reshape(w.b.Numel())}
			if refMasters {
				mb.ref = slice(master.ref, off[i], w.b.Numel())
			}
			p.check(t, what+" master", mb, Tol, engine.F32)
		}
	}

	// Spot checks: the first, a middle and the last adapter, stepped in
	// float64 from the same values.
	for _, i := range []int{0, len(shapes) / 2, len(shapes) - 1} {
		w, o, ne := params[i], off[i], params[i].b.Numel()
		gotW := p.rowsOf(twin{b: w.b.Reshape(1, ne)}, []int{0})
		gotM := p.rowsOf(twin{b: slice(m.b, o, ne).Reshape(1, ne)}, []int{0})
		gotV := p.rowsOf(twin{b: slice(v.b, o, ne).Reshape(1, ne)}, []int{0})
		var gotMaster []float32
		if masters {
			gotMaster = p.rowsOf(twin{b: slice(master.b, o, ne).Reshape(1, ne)}, []int{0})
		}
		spotStart := time.Now()
		p64, m64, v64 := F64(w.host), make([]float64, ne), make([]float64, ne)
		for step, scale := range []float64{1, 0.37} {
			ref.AdamW(p64, F64(grads[step][o:o+ne]), m64, v64, float64(ap.LR), float64(ap.Beta1), float64(ap.Beta2),
				float64(ap.Eps), float64(ap.WeightDecay), float64(float32(scale)), step+1)
		}
		p.clock.add(phaseSpot, spotStart)
		what := fmt.Sprintf("adapter %d %v", i, w.b.Shape())
		p.spot(t, what+" m", []int{i}, ne, gotM, m64, Tol(engine.F32))
		p.spot(t, what+" v", []int{i}, ne, gotV, v64, Tol(engine.F32))
		p.spot(t, what, []int{i}, ne, gotW, p64, Tol(p.dt))
		if masters {
			p.spot(t, what+" master", []int{i}, ne, gotMaster, p64, Tol(engine.F32))
		}
	}
}
