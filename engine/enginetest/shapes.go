package enginetest

// Model-shape conformance. The op tables of this package use small, awkward
// shapes and compare with the float64 reference. RunShapes instead runs the
// ops at the shapes one model gives them — the projections, the attention of
// its sequence lengths (non-causal too), LayerNorm, the bias and the GELUs
// at its widths, a chunk of its vocabulary — and compares the backend
// under test with a second backend (the CPU backend) on identical inputs:
// at Llama-3.1-8B's sizes the float64 reference would take hours, while the
// CPU backend, itself checked against that reference, takes seconds.
//
// Tolerances. Each backend is within Tol (forward) or GradTol (backward) of
// the exact result in the scale-free measure of Close, so two of them are
// within twice that of each other; that is the bound used. What this mode
// catches is what only large extents reach: grid and index arithmetic past
// 2¹⁶ blocks or 2²⁴ elements, tiles that a small case never fills or
// repeats, long reductions (K = 14336, 128256 logits, 8192 keys), RoPE angles
// in the thousands of radians, workspaces sized for the real model, and the
// optimizer's table of every LoRA adapter of it.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/turnwise/turnwise/engine"
)

// ShapesEnv names the environment variable that selects the model whose
// shapes RunShapes is run at by the backends' tests: "mini" (the default,
// small enough for the kernel emulator) or "llama8B".
const ShapesEnv = "TW_CONFORMANCE_SHAPES"

// ModelShapes are the extents of one model that RunShapes builds its cases
// from.
type ModelShapes struct {
	Name                    string
	Dim, FFN, Vocab         int   // hidden width D, MLP width F, vocabulary V
	Heads, KVHeads, HeadDim int   // H, G, Dh; Dim == Heads·HeadDim
	Layers                  int   // decoder layers, whose LoRA adapters the optimizer steps
	LoRARank                int   // r of the LoRA adapters
	SeqLens                 []int // training sequences T that attention, RoPE and RMSNorm run on
	Tokens                  int   // rows N of the projection GEMMs and SwiGLU
	LogitRows               int   // rows of the vocabulary projection and log-softmax: one loss chunk
	Decode                  int   // sequences decoding one token over a cache of the longest length
	Prefill                 int   // queries of a prefill over a cache of the longest length
}

// Llama8B is Llama-3.1-8B: hidden 4096, FFN 14336, vocabulary 128256, 32
// query and 8 key/value heads of width 128, 32 layers, LoRA rank 16,
// sequences of 2048 and 8192 tokens.
var Llama8B = ModelShapes{
	Name: "llama8B", Dim: 4096, FFN: 14336, Vocab: 128256, Heads: 32, KVHeads: 8, HeadDim: 128,
	Layers: 32, LoRARank: 16, SeqLens: []int{2048, 8192}, Tokens: 2048, LogitRows: 256, Decode: 16, Prefill: 512,
}

// Mini has Llama8B's structure (grouped heads 4:1, FFN ≈ 3.5·D) at sizes the
// kernel emulator runs in seconds; its extents are multiples of no tile.
var Mini = ModelShapes{
	Name: "mini", Dim: 128, FFN: 344, Vocab: 1000, Heads: 8, KVHeads: 2, HeadDim: 16,
	Layers: 2, LoRARank: 4, SeqLens: []int{67, 130}, Tokens: 67, LogitRows: 13, Decode: 3, Prefill: 20,
}

// ShapesFromEnv returns the shapes $TW_CONFORMANCE_SHAPES names (Mini when
// it is unset or empty).
func ShapesFromEnv() (ModelShapes, error) {
	switch v := os.Getenv(ShapesEnv); v {
	case "", Mini.Name:
		return Mini, nil
	case Llama8B.Name:
		return Llama8B, nil
	default:
		return ModelShapes{}, fmt.Errorf("$%s = %q: want %q or %q", ShapesEnv, v, Mini.Name, Llama8B.Name)
	}
}

// RunShapes runs every op at the shapes of s on b and on ref, from the same
// inputs, in f32 and bf16, and requires them to agree (see the tolerances
// above).
func RunShapes(t *testing.T, b, ref engine.Backend, s ModelShapes) {
	if s.Dim != s.Heads*s.HeadDim || s.Heads%s.KVHeads != 0 {
		panic(fmt.Sprintf("enginetest: shapes %s: Dim %d != Heads %d · HeadDim %d, or KVHeads %d does not divide Heads",
			s.Name, s.Dim, s.Heads, s.HeadDim, s.KVHeads))
	}
	suites := []struct {
		name string
		run  func(t *testing.T, p pairRun, s ModelShapes)
	}{
		{"gemm", shapeGemms},
		{"attention", shapeAttention},
		{"rmsnorm", shapeRMSNorm},
		{"rope", shapeRoPE},
		{"swiglu", shapeSwiGLU},
		{"layernorm", shapeLayerNorm},
		{"bias", shapeBias},
		{"gelu", shapeGELU},
		{"logsoftmax", shapeLogSoftmax},
		{"embedding", shapeEmbedding},
		{"adamw_lora", shapeAdamWLoRA},
	}
	for _, dt := range FloatDTypes {
		for i, su := range suites {
			t.Run(fmt.Sprintf("%s/%v/%s", s.Name, dt, su.name), func(t *testing.T) {
				su.run(t, pairRun{t: t, b: b, ref: ref, dt: dt, r: Rand(uint64(1000 + i))}, s)
			})
		}
	}
}

// pairRun holds the two backends of RunShapes, the activation dtype of the
// case and its random source, and the test whose end frees the buffers it
// allocates (at 8B shapes they add up to gigabytes per case).
type pairRun struct {
	t      *testing.T
	b, ref engine.Backend
	dt     engine.DType
	r      *rand.Rand
}

// twin is one tensor on the backend under test and its copy on the
// reference backend.
type twin struct{ b, ref *engine.Tensor }

// in returns p with buffers freed at the end of t (a subtest).
func (p pairRun) in(t *testing.T) pairRun {
	p.t = t
	return p
}

// owned frees x's buffers when p's test ends.
func (p pairRun) owned(x twin) twin {
	p.t.Cleanup(func() {
		p.b.FreeBuffer(x.b.Buffer())
		p.ref.FreeBuffer(x.ref.Buffer())
	})
	return x
}

// chunk is the number of elements RunShapes's host work hands to one
// goroutine: inputs and comparisons run to 10⁹ elements at 8B shapes.
const chunk = 1 << 20

// inChunks calls fn on the chunks [lo, hi) of [0, n), on all CPUs.
func inChunks(n int, fn func(i, lo, hi int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := 0; i*chunk < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i, i*chunk, min(n, (i+1)*chunk))
		}()
	}
	wg.Wait()
}

// values returns a twin of values uniform in [−scale, scale) rounded to dt,
// each chunk drawn from its own seed (drawn from p.r).
func (p pairRun) values(dt engine.DType, scale float64, shape ...int) twin {
	n := engine.Shape(shape).Numel()
	seeds := make([]uint64, (n+chunk-1)/chunk)
	for i := range seeds {
		seeds[i] = p.r.Uint64()
	}
	v := make([]float32, n)
	inChunks(n, func(i, lo, hi int) { copy(v[lo:hi], Values(Rand(seeds[i]), dt, hi-lo, scale)) })
	return p.owned(twin{engine.FromF32(p.b, dt, v, shape...), engine.FromF32(p.ref, dt, v, shape...)})
}

// zeros returns a zeroed twin.
func (p pairRun) zeros(dt engine.DType, shape ...int) twin {
	return p.owned(twin{engine.MustAlloc(p.b, dt, shape...), engine.MustAlloc(p.ref, dt, shape...)})
}

// ints returns a twin holding v.
func (p pairRun) ints(v []int32, shape ...int) twin {
	return p.owned(twin{engine.FromI32(p.b, v, shape...), engine.FromI32(p.ref, v, shape...)})
}

// agree fails t when the backend's x is not within tol of the reference's,
// measured as Close does (in chunks, on all CPUs).
func (p pairRun) agree(t *testing.T, what string, x twin, tol float64) {
	t.Helper()
	got, want := engine.ToF32(p.b, x.b), engine.ToF32(p.ref, x.ref)
	parts := make([]diffStats, (len(got)+chunk-1)/chunk)
	inChunks(len(got), func(i, lo, hi int) { parts[i] = diffStatsOf(got[lo:hi], F64(want[lo:hi])) })
	var all diffStats
	for _, s := range parts {
		all = all.merge(s)
	}
	if !(all.relErr() <= tol) {
		Close(t, what, got, F64(want), tol) // reports the worst element
	}
}

// fwdTol and bwdTol are the bounds of RunShapes for a result of dtype dt:
// twice each backend's own.
func fwdTol(dt engine.DType) float64 { return 2 * Tol(dt) }
func bwdTol(dt engine.DType) float64 { return 2 * GradTol(dt) }

// shapeGemm is one GEMM of a layer: C [m, n] = alpha·op(A)·op(B) + beta·C.
type shapeGemm struct {
	name           string
	m, n, k        int
	transA, transB bool
	alpha, beta    float32
	outF32         bool // C is f32 whatever the operands' dtype
}

// shapeGemms runs the GEMMs of one Llama layer's forward and backward and
// of the LoRA adapters, at s.Tokens rows (and the query projection at the
// longest sequence), and the vocabulary projection of one loss chunk.
func shapeGemms(t *testing.T, p pairRun, s ModelShapes) {
	n, d, f, kv, r := s.Tokens, s.Dim, s.FFN, s.KVHeads*s.HeadDim, s.LoRARank
	long := s.SeqLens[len(s.SeqLens)-1]
	cases := []shapeGemm{
		{name: "q_proj", m: n, n: d, k: d, transB: true, alpha: 1},
		{name: "kv_proj", m: n, n: kv, k: d, transB: true, alpha: 1},
		{name: "gate_up_proj", m: n, n: f, k: d, transB: true, alpha: 1},
		{name: "down_proj", m: n, n: d, k: f, transB: true, alpha: 1},
		{name: "q_proj_long", m: long, n: d, k: d, transB: true, alpha: 1},
		{name: "down_dx", m: n, n: f, k: d, alpha: 1, beta: 1},               // dx [N, F] += dy [N, D]·W [D, F]
		{name: "gate_dw", m: f, n: d, k: n, transA: true, alpha: 1, beta: 1}, // dW [F, D] += dyᵀ·x
		{name: "lora_a", m: n, n: r, k: d, transB: true, alpha: 1},           // t [N, r] = x·Aᵀ
		{name: "lora_b", m: n, n: d, k: r, transB: true, alpha: 2, beta: 1},  // y [N, D] += s·t·Bᵀ
		{name: "lora_da", m: r, n: d, k: n, transA: true, alpha: 1, beta: 1}, // dA [r, D] += dtᵀ·x
		{name: "lm_head", m: s.LogitRows, n: s.Vocab, k: d, transB: true, alpha: 1},
		{name: "lm_head_f32", m: s.LogitRows, n: s.Vocab, k: d, transB: true, alpha: 1, outF32: true},
	}
	for _, c := range cases {
		if c.outF32 && p.dt == engine.F32 {
			continue
		}
		t.Run(fmt.Sprintf("%s_%dx%dx%d", c.name, c.m, c.n, c.k), func(t *testing.T) {
			p := p.in(t)
			ar, ac := c.m, c.k
			if c.transA {
				ar, ac = c.k, c.m
			}
			br, bc := c.k, c.n
			if c.transB {
				br, bc = c.n, c.k
			}
			cdt := p.dt
			if c.outF32 {
				cdt = engine.F32
			}
			a, b := p.values(p.dt, 1, ar, ac), p.values(p.dt, 1, br, bc)
			out := p.zeros(cdt, c.m, c.n)
			if c.beta != 0 {
				out = p.values(cdt, 1, c.m, c.n)
			}
			gp := engine.GemmParams{TransA: c.transA, TransB: c.transB, Alpha: c.alpha, Beta: c.beta}
			p.b.Gemm(out.b, a.b, b.b, gp)
			p.ref.Gemm(out.ref, a.ref, b.ref, gp)
			p.agree(t, "C", out, fwdTol(cdt))
		})
	}
}

// shapeAttention runs training attention (forward and backward) on one
// sequence of each length in s.SeqLens, then decoding and a prefill over
// caches of the longest length (forward only, as in generation).
func shapeAttention(t *testing.T, p pairRun, s ModelShapes) {
	h, g, dh := s.Heads, s.KVHeads, s.HeadDim
	scale := engine.AttentionParams{Scale: float32(1 / math.Sqrt(float64(dh)))}
	for _, n := range s.SeqLens {
		t.Run(fmt.Sprintf("train_T%d", n), func(t *testing.T) {
			p := p.in(t)
			q, k, v := p.values(p.dt, 1, n, h, dh), p.values(p.dt, 1, n, g, dh), p.values(p.dt, 1, n, g, dh)
			seqs := p.ints([]int32{0, int32(n), 0, int32(n)}, 1, 4)
			out, lse := p.zeros(p.dt, n, h, dh), p.zeros(engine.F32, n, h)
			p.b.Attention(out.b, lse.b, q.b, k.b, v.b, seqs.b, scale)
			p.ref.Attention(out.ref, lse.ref, q.ref, k.ref, v.ref, seqs.ref, scale)
			p.agree(t, "out", out, fwdTol(p.dt))
			p.agree(t, "lse", lse, fwdTol(engine.F32))

			// Each backend differentiates its own forward's out and lse.
			dOut := p.values(p.dt, 1, n, h, dh)
			dq, dk, dv := p.zeros(p.dt, n, h, dh), p.zeros(p.dt, n, g, dh), p.zeros(p.dt, n, g, dh)
			p.b.AttentionBackward(dq.b, dk.b, dv.b, dOut.b, out.b, lse.b, q.b, k.b, v.b, seqs.b, scale)
			p.ref.AttentionBackward(dq.ref, dk.ref, dv.ref, dOut.ref, out.ref, lse.ref, q.ref, k.ref, v.ref, seqs.ref, scale)
			p.agree(t, "dq", dq, bwdTol(p.dt))
			p.agree(t, "dk", dk, bwdTol(p.dt))
			p.agree(t, "dv", dv, bwdTol(p.dt))
		})
	}
	// Non-causal (a vision transformer's) at the shortest length, forward
	// and backward.
	if n := s.SeqLens[0]; n > 0 {
		t.Run(fmt.Sprintf("noncausal_T%d", n), func(t *testing.T) {
			p := p.in(t)
			nc := engine.AttentionParams{Scale: scale.Scale, NonCausal: true}
			q, k, v := p.values(p.dt, 1, n, h, dh), p.values(p.dt, 1, n, g, dh), p.values(p.dt, 1, n, g, dh)
			seqs := p.ints([]int32{0, int32(n), 0, int32(n)}, 1, 4)
			out, lse := p.zeros(p.dt, n, h, dh), p.zeros(engine.F32, n, h)
			p.b.Attention(out.b, lse.b, q.b, k.b, v.b, seqs.b, nc)
			p.ref.Attention(out.ref, lse.ref, q.ref, k.ref, v.ref, seqs.ref, nc)
			p.agree(t, "out", out, fwdTol(p.dt))
			p.agree(t, "lse", lse, fwdTol(engine.F32))
			dOut := p.values(p.dt, 1, n, h, dh)
			dq, dk, dv := p.zeros(p.dt, n, h, dh), p.zeros(p.dt, n, g, dh), p.zeros(p.dt, n, g, dh)
			p.b.AttentionBackward(dq.b, dk.b, dv.b, dOut.b, out.b, lse.b, q.b, k.b, v.b, seqs.b, nc)
			p.ref.AttentionBackward(dq.ref, dk.ref, dv.ref, dOut.ref, out.ref, lse.ref, q.ref, k.ref, v.ref, seqs.ref, nc)
			p.agree(t, "dq", dq, bwdTol(p.dt))
			p.agree(t, "dk", dk, bwdTol(p.dt))
			p.agree(t, "dv", dv, bwdTol(p.dt))
		})
	}
	long := s.SeqLens[len(s.SeqLens)-1]
	for _, c := range []struct {
		name     string
		seqs, nq int // sequences, queries per sequence
	}{
		{fmt.Sprintf("decode_B%d_over_%d", s.Decode, long), s.Decode, 1},
		{fmt.Sprintf("prefill_%d_over_%d", s.Prefill, long), 1, s.Prefill},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := p.in(t)
			var rows []int32
			for i := 0; i < c.seqs; i++ {
				rows = append(rows, int32(i*c.nq), int32(c.nq), int32(i*long), int32(long))
			}
			nq, nk := c.seqs*c.nq, c.seqs*long
			q, k, v := p.values(p.dt, 1, nq, h, dh), p.values(p.dt, 1, nk, g, dh), p.values(p.dt, 1, nk, g, dh)
			seqs := p.ints(rows, c.seqs, 4)
			out, lse := p.zeros(p.dt, nq, h, dh), p.zeros(engine.F32, nq, h)
			p.b.Attention(out.b, lse.b, q.b, k.b, v.b, seqs.b, scale)
			p.ref.Attention(out.ref, lse.ref, q.ref, k.ref, v.ref, seqs.ref, scale)
			p.agree(t, "out", out, fwdTol(p.dt))
			p.agree(t, "lse", lse, fwdTol(engine.F32))
		})
	}
}

// shapeRMSNorm runs the fused residual add + RMSNorm and the backward at
// the longest sequence.
func shapeRMSNorm(t *testing.T, p pairRun, s ModelShapes) {
	const eps = 1e-5
	n, d := s.SeqLens[len(s.SeqLens)-1], s.Dim
	x, delta, w := p.values(p.dt, 2, n, d), p.values(p.dt, 1, n, d), p.values(p.dt, 1, d)
	out, rstd := p.zeros(p.dt, n, d), p.zeros(engine.F32, n)
	p.b.AddRMSNorm(x.b, out.b, rstd.b, x.b, delta.b, w.b, eps)
	p.ref.AddRMSNorm(x.ref, out.ref, rstd.ref, x.ref, delta.ref, w.ref, eps)
	p.agree(t, "resid", x, fwdTol(p.dt))
	p.agree(t, "out", out, fwdTol(p.dt))
	p.agree(t, "rstd", rstd, fwdTol(engine.F32))

	dOut, dx, dw := p.values(p.dt, 1, n, d), p.values(p.dt, 1, n, d), p.zeros(p.dt, d)
	p.b.RMSNormBackward(dx.b, dw.b, dOut.b, x.b, w.b, rstd.b)
	p.ref.RMSNormBackward(dx.ref, dw.ref, dOut.ref, x.ref, w.ref, rstd.ref)
	p.agree(t, "dx", dx, bwdTol(p.dt))
	p.agree(t, "dw", dw, bwdTol(p.dt))
}

// shapeRoPE rotates queries and keys of the longest sequence at positions
// 0 … T−1 with Llama 3.1's frequencies, and rotates a gradient back.
func shapeRoPE(t *testing.T, p pairRun, s ModelShapes) {
	n := s.SeqLens[len(s.SeqLens)-1]
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = int32(i)
	}
	freqs := engine.RoPEFreqs(s.HeadDim, 500000, &engine.RoPEScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192})
	pt := p.ints(pos, n)
	ft := p.owned(twin{engine.FromF32(p.b, engine.F32, freqs, len(freqs)), engine.FromF32(p.ref, engine.F32, freqs, len(freqs))})
	for _, heads := range []int{s.Heads, s.KVHeads} {
		x := p.values(p.dt, 1, n, heads, s.HeadDim)
		p.b.RoPE(x.b, pt.b, ft.b)
		p.ref.RoPE(x.ref, pt.ref, ft.ref)
		p.agree(t, fmt.Sprintf("x (%d heads)", heads), x, fwdTol(p.dt))
		p.b.RoPEBackward(x.b, pt.b, ft.b)
		p.ref.RoPEBackward(x.ref, pt.ref, ft.ref)
		p.agree(t, fmt.Sprintf("rotated back (%d heads)", heads), x, bwdTol(p.dt))
	}
}

// shapeSwiGLU runs the MLP's gate at s.Tokens rows of width FFN.
func shapeSwiGLU(t *testing.T, p pairRun, s ModelShapes) {
	n, f := s.Tokens, s.FFN
	gate, up := p.values(p.dt, 4, n, f), p.values(p.dt, 2, n, f)
	out := p.zeros(p.dt, n, f)
	p.b.SwiGLU(out.b, gate.b, up.b)
	p.ref.SwiGLU(out.ref, gate.ref, up.ref)
	p.agree(t, "out", out, fwdTol(p.dt))

	dOut := p.values(p.dt, 1, n, f)
	dGate, dUp := p.zeros(p.dt, n, f), p.zeros(p.dt, n, f)
	p.b.SwiGLUBackward(dGate.b, dUp.b, dOut.b, gate.b, up.b)
	p.ref.SwiGLUBackward(dGate.ref, dUp.ref, dOut.ref, gate.ref, up.ref)
	p.agree(t, "dGate", dGate, bwdTol(p.dt))
	p.agree(t, "dUp", dUp, bwdTol(p.dt))
}

// shapeLayerNorm runs LayerNorm and its backward (dx, dw, db) on the
// longest sequence's rows at the model's width.
func shapeLayerNorm(t *testing.T, p pairRun, s ModelShapes) {
	const eps = 1e-5
	n, d := s.SeqLens[len(s.SeqLens)-1], s.Dim
	x, w, bias := p.values(p.dt, 2, n, d), p.values(p.dt, 1, d), p.values(p.dt, 1, d)
	out, mean, rstd := p.zeros(p.dt, n, d), p.zeros(engine.F32, n), p.zeros(engine.F32, n)
	p.b.LayerNorm(out.b, mean.b, rstd.b, x.b, w.b, bias.b, eps)
	p.ref.LayerNorm(out.ref, mean.ref, rstd.ref, x.ref, w.ref, bias.ref, eps)
	p.agree(t, "out", out, fwdTol(p.dt))
	p.agree(t, "mean", mean, fwdTol(engine.F32))
	p.agree(t, "rstd", rstd, fwdTol(engine.F32))

	dOut, dx, dw, db := p.values(p.dt, 1, n, d), p.zeros(p.dt, n, d), p.zeros(p.dt, d), p.zeros(p.dt, d)
	p.b.LayerNormBackward(dx.b, dw.b, db.b, dOut.b, x.b, w.b, mean.b, rstd.b)
	p.ref.LayerNormBackward(dx.ref, dw.ref, db.ref, dOut.ref, x.ref, w.ref, mean.ref, rstd.ref)
	p.agree(t, "dx", dx, bwdTol(p.dt))
	p.agree(t, "dw", dw, bwdTol(p.dt))
	p.agree(t, "db", db, bwdTol(p.dt))
}

// shapeBias adds a bias to the MLP's rows and sums their gradient into an
// f32 db.
func shapeBias(t *testing.T, p pairRun, s ModelShapes) {
	n, f := s.Tokens, s.FFN
	x, bias := p.values(p.dt, 2, n, f), p.values(p.dt, 1, f)
	p.b.AddBias(x.b, bias.b)
	p.ref.AddBias(x.ref, bias.ref)
	p.agree(t, "x + b", x, fwdTol(p.dt))
	dOut, db := p.values(p.dt, 1, n, f), p.zeros(engine.F32, f)
	p.b.AddBiasBackward(db.b, dOut.b)
	p.ref.AddBiasBackward(db.ref, dOut.ref)
	p.agree(t, "db", db, bwdTol(engine.F32))
}

// shapeGELU runs each GELU and its backward over the MLP's activations.
func shapeGELU(t *testing.T, p pairRun, s ModelShapes) {
	n, f := s.Tokens, s.FFN
	x, dOut := p.values(p.dt, 5, n, f), p.values(p.dt, 1, n, f)
	for _, k := range []engine.GELUKind{engine.GELUErf, engine.GELUTanh, engine.GELUQuick} {
		out, dx := p.zeros(p.dt, n, f), p.zeros(p.dt, n, f)
		p.b.GELU(out.b, x.b, k)
		p.ref.GELU(out.ref, x.ref, k)
		p.agree(t, fmt.Sprintf("%v out", k), out, fwdTol(p.dt))
		p.b.GELUBackward(dx.b, dOut.b, x.b, k)
		p.ref.GELUBackward(dx.ref, dOut.ref, x.ref, k)
		p.agree(t, fmt.Sprintf("%v dx", k), dx, bwdTol(p.dt))
	}
}

// shapeLogSoftmax runs the loss's log-softmax over one chunk of rows of the
// whole vocabulary, with every third target ignored.
func shapeLogSoftmax(t *testing.T, p pairRun, s ModelShapes) {
	n, v := s.LogitRows, s.Vocab
	logits := p.values(p.dt, 8, n, v)
	targets := p.ints(randTargets(p.r, n, v, 3), n)
	logp, lse := p.zeros(engine.F32, n), p.zeros(engine.F32, n)
	p.b.LogSoftmaxGather(logp.b, lse.b, logits.b, targets.b)
	p.ref.LogSoftmaxGather(logp.ref, lse.ref, logits.ref, targets.ref)
	p.agree(t, "logp", logp, fwdTol(engine.F32))
	p.agree(t, "lse", lse, fwdTol(engine.F32))

	dLogp := p.values(engine.F32, 1, n)
	dLogits := p.zeros(p.dt, n, v)
	p.b.LogSoftmaxGatherBackward(dLogits.b, dLogp.b, logits.b, lse.b, targets.b)
	p.ref.LogSoftmaxGatherBackward(dLogits.ref, dLogp.ref, logits.ref, lse.ref, targets.ref)
	p.agree(t, "dLogits", dLogits, bwdTol(p.dt))
}

// shapeEmbedding looks up s.Tokens ids (with repeats) in the whole table and
// accumulates a gradient into an f32 table gradient.
func shapeEmbedding(t *testing.T, p pairRun, s ModelShapes) {
	n, v, d := s.Tokens, s.Vocab, s.Dim
	table := p.values(p.dt, 1, v, d)
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(p.r.IntN(v))
		if i%5 == 4 {
			ids[i] = ids[i/2] // a repeat: its rows of dTable sum two gradients
		}
	}
	idt := p.ints(ids, n)
	out := p.zeros(p.dt, n, d)
	p.b.Embedding(out.b, table.b, idt.b)
	p.ref.Embedding(out.ref, table.ref, idt.ref)
	p.agree(t, "out", out, 0)

	dOut, dTable := p.values(p.dt, 1, n, d), p.zeros(engine.F32, v, d)
	p.b.EmbeddingBackward(dTable.b, dOut.b, idt.b)
	p.ref.EmbeddingBackward(dTable.ref, dOut.ref, idt.ref)
	p.agree(t, "dTable", dTable, bwdTol(engine.F32))
}

// shapeAdamWLoRA steps the LoRA adapters of every layer — A [r, in] and
// B [out, r] on q, k, v, o, gate, up and down: 448 tensors at 8B — twice
// with one multi-tensor AdamW over flat f32 gradients and moments, as the
// optimizer does (bf16 adapters through f32 masters).
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
	var master twin
	if p.dt != engine.F32 {
		master = p.zeros(engine.F32, n)
	}
	params := make([]twin, len(shapes))
	spansB, spansRef := make([]engine.AdamWSpan, len(shapes)), make([]engine.AdamWSpan, len(shapes))
	off := 0
	for i, sh := range shapes {
		w := p.values(p.dt, 0.1, sh[0], sh[1])
		params[i] = w
		mo := -1
		if p.dt != engine.F32 {
			mo = off
			p.b.Cast(slice(master.b, off, w.b.Numel()), w.b)
			p.ref.Cast(slice(master.ref, off, w.ref.Numel()), w.ref)
		}
		spansB[i] = engine.AdamWSpan{W: w.b, Off: off, MasterOff: mo}
		spansRef[i] = engine.AdamWSpan{W: w.ref, Off: off, MasterOff: mo}
		off += w.b.Numel()
	}
	tb, tr := engine.NewParamTable(spansB), engine.NewParamTable(spansRef)
	defer tb.Free(p.b)
	defer tr.Free(p.ref)
	m, v := p.zeros(engine.F32, n), p.zeros(engine.F32, n)
	ap := engine.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}
	for step, scale := range []float32{1, 0.37} {
		grad := p.values(engine.F32, 1, n)
		ap.Step, ap.GradScale = step+1, scale
		p.b.AdamWMulti(tb, grad.b, m.b, v.b, master.b, ap)
		p.ref.AdamWMulti(tr, grad.ref, m.ref, v.ref, master.ref, ap)
	}
	p.agree(t, "m", m, fwdTol(engine.F32))
	p.agree(t, "v", v, fwdTol(engine.F32))
	if master.b != nil {
		p.agree(t, "master", master, fwdTol(engine.F32))
	}
	for i, w := range params {
		p.agree(t, fmt.Sprintf("parameter %d %v", i, w.b.Shape()), w, fwdTol(p.dt))
	}
}
