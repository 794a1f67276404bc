// Package opbench defines the engine's op benchmarks once, for every backend:
// each Case sets up its tensors and returns a function that runs the op once,
// with the bytes it must move and the floating-point operations it performs.
// `go test -bench` in a backend's package and `train bench` both run these
// cases, so their figures are the same measurement.
//
// Bytes count each tensor element read or written once (the least any
// implementation must move); GB/s against that figure is comparable to the
// machine's memory bandwidth. FLOPs count a multiply-add as two.
package opbench

import (
	"fmt"
	"math"

	"github.com/turnwise/turnwise/engine"
)

// Case is one benchmark: an op at one shape.
type Case struct {
	Name  string
	Bytes int64   // bytes the op must read and write
	FLOPs float64 // floating-point operations (0 for memory-bound ops)
	// Setup allocates the inputs on b and returns the op to time.
	Setup func(b engine.Backend) func()
}

// Config is the model shape the cases are drawn from.
type Config struct {
	Name       string
	Tokens     int // N: tokens in one batch
	Dim        int // D
	Heads      int // H
	KVHeads    int // G
	FFN        int // F
	Vocab      int // V
	SeqLen     int // tokens per sequence (attention)
	LogitChunk int // tokens per logits chunk
}

// Reference24M is the 24.4M-parameter CPU reference configuration of the
// design: dim 288, 6 layers, 6 heads, FFN 768, vocab 32000, 4 × 256 tokens.
var Reference24M = Config{Name: "ref24M", Tokens: 1024, Dim: 288, Heads: 6, KVHeads: 6, FFN: 768, Vocab: 32000, SeqLen: 256, LogitChunk: 256}

// Llama8BLayer is one Llama-3.1-8B layer at 512 tokens (one sequence).
var Llama8BLayer = Config{Name: "llama8B", Tokens: 512, Dim: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 128256, SeqLen: 512, LogitChunk: 64}

// GemmCases are the GEMMs of one training step of a layer of c: forward
// (y = x·Wᵀ), input gradient (dx = dy·W) and weight gradient (dW = dyᵀ·x) of
// each projection, in dtype dt.
func GemmCases(c Config, dt engine.DType) []Case {
	hd := c.Dim / c.Heads
	proj := []struct {
		name    string
		in, out int
	}{
		{"q", c.Dim, c.Dim},
		{"kv", c.Dim, 2 * c.KVHeads * hd},
		{"o", c.Dim, c.Dim},
		{"gate_up", c.Dim, 2 * c.FFN},
		{"down", c.FFN, c.Dim},
		{"classifier", c.Dim, c.Vocab},
	}
	var cases []Case
	for _, p := range proj {
		n := c.Tokens
		if p.name == "classifier" {
			n = c.LogitChunk
		}
		for _, v := range []struct {
			pass           string
			m, nn, k       int
			transA, transB bool
			aRows, aCols   int
			bRows, bCols   int
		}{
			{"fwd", n, p.out, p.in, false, true, n, p.in, p.out, p.in},
			{"dx", n, p.in, p.out, false, false, n, p.out, p.out, p.in},
			{"dW", p.out, p.in, n, true, false, n, p.out, n, p.in},
		} {
			cases = append(cases, gemmCase(fmt.Sprintf("gemm/%s/%s/%s/%v/%dx%dx%d", c.Name, p.name, v.pass, dt, v.m, v.nn, v.k),
				dt, v.m, v.nn, v.k, v.transA, v.transB, v.aRows, v.aCols, v.bRows, v.bCols))
		}
	}
	return cases
}

// SquareGemm is C = A·B at m = n = k = size in dtype dt.
func SquareGemm(size int, dt engine.DType) Case {
	return gemmCase(fmt.Sprintf("gemm/square/%v/%d", dt, size), dt, size, size, size, false, false, size, size, size, size)
}

func gemmCase(name string, dt engine.DType, m, n, k int, ta, tb bool, ar, ac, br, bc int) Case {
	return Case{
		Name:  name,
		FLOPs: 2 * float64(m) * float64(n) * float64(k),
		Bytes: int64(dt.Size()) * int64(ar*ac+br*bc+m*n),
		Setup: func(b engine.Backend) func() {
			a, bm := filled(b, dt, 0.1, ar, ac), filled(b, dt, 0.1, br, bc)
			cm := engine.MustAlloc(b, engine.F32, m, n)
			if dt != engine.F32 {
				cm = engine.MustAlloc(b, dt, m, n)
			}
			p := engine.GemmParams{TransA: ta, TransB: tb, Alpha: 1}
			return func() { b.Gemm(cm, a, bm, p) }
		},
	}
}

// filled allocates a tensor holding a deterministic, non-trivial pattern in
// [−scale, scale].
func filled(b engine.Backend, dt engine.DType, scale float64, shape ...int) *engine.Tensor {
	n := engine.Shape(shape).Numel()
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(scale * math.Sin(float64(i)*0.7311))
	}
	return engine.FromF32(b, dt, vals, shape...)
}

func ids(b engine.Backend, n, v int) *engine.Tensor {
	x := make([]int32, n)
	for i := range x {
		x[i] = int32((i * 7919) % v)
	}
	return engine.FromI32(b, x, n)
}

// MemoryCases are the memory-bound ops at the shapes of c, in dtype dt.
func MemoryCases(c Config, dt engine.DType) []Case {
	n, d, f, v := c.Tokens, c.Dim, c.FFN, c.Vocab
	hd := d / c.Heads
	es := int64(dt.Size())
	nd := int64(n * d)
	chunk := c.LogitChunk
	name := func(op string) string { return fmt.Sprintf("%s/%s/%v", op, c.Name, dt) }
	return []Case{
		{Name: name("add"), Bytes: 3 * nd * es, Setup: func(b engine.Backend) func() {
			x, y, o := filled(b, dt, 1, n, d), filled(b, dt, 1, n, d), engine.MustAlloc(b, dt, n, d)
			return func() { b.Add(o, x, y) }
		}},
		{Name: name("axpy"), Bytes: 3 * nd * es, Setup: func(b engine.Backend) func() {
			x, y := filled(b, dt, 1, n, d), filled(b, dt, 1, n, d)
			return func() { b.AXPY(y, 1e-3, x) }
		}},
		{Name: name("cast_from_f32"), Bytes: nd * (4 + es), Setup: func(b engine.Backend) func() {
			x, o := filled(b, engine.F32, 1, n, d), engine.MustAlloc(b, dt, n, d)
			return func() { b.Cast(o, x) }
		}},
		{Name: name("embedding"), Bytes: 2*nd*es + int64(4*n), Setup: func(b engine.Backend) func() {
			t, o, id := filled(b, dt, 1, v, d), engine.MustAlloc(b, dt, n, d), ids(b, n, v)
			return func() { b.Embedding(o, t, id) }
		}},
		{Name: name("embedding_backward"), Bytes: 3*nd*es + int64(4*n), Setup: func(b engine.Backend) func() {
			t, g, id := engine.MustAlloc(b, dt, v, d), filled(b, dt, 1, n, d), ids(b, n, v)
			return func() { b.EmbeddingBackward(t, g, id) }
		}},
		{Name: name("rmsnorm"), Bytes: 2*nd*es + int64(4*n), Setup: func(b engine.Backend) func() {
			x, w, o, r := filled(b, dt, 1, n, d), filled(b, dt, 1, d), engine.MustAlloc(b, dt, n, d), engine.MustAlloc(b, engine.F32, n)
			return func() { b.RMSNorm(o, r, x, w, 1e-5) }
		}},
		{Name: name("add_rmsnorm"), Bytes: 4*nd*es + int64(4*n), Setup: func(b engine.Backend) func() {
			x, dl, w, o, r := filled(b, dt, 1, n, d), filled(b, dt, 1e-3, n, d), filled(b, dt, 1, d), engine.MustAlloc(b, dt, n, d), engine.MustAlloc(b, engine.F32, n)
			return func() { b.AddRMSNorm(x, o, r, x, dl, w, 1e-5) }
		}},
		{Name: name("rmsnorm_backward"), Bytes: 4*nd*es + int64(4*n), Setup: func(b engine.Backend) func() {
			x, w, g, r := filled(b, dt, 1, n, d), filled(b, dt, 1, d), filled(b, dt, 1, n, d), engine.MustAlloc(b, engine.F32, n)
			dx, dw := engine.MustAlloc(b, dt, n, d), engine.MustAlloc(b, dt, d)
			b.RMSNorm(engine.MustAlloc(b, dt, n, d), r, x, w, 1e-5)
			return func() { b.RMSNormBackward(dx, dw, g, x, w, r) }
		}},
		{Name: name("rope"), Bytes: 2 * nd * es, Setup: func(b engine.Backend) func() {
			x := filled(b, dt, 1, n, c.Heads, hd)
			pos := ids(b, n, c.SeqLen)
			fr := engine.FromF32(b, engine.F32, engine.RoPEFreqs(hd, 10000, nil), hd/2)
			return func() { b.RoPE(x, pos, fr) }
		}},
		{Name: name("swiglu"), Bytes: 3 * int64(n*f) * es, Setup: func(b engine.Backend) func() {
			g, u, o := filled(b, dt, 2, n, f), filled(b, dt, 1, n, f), engine.MustAlloc(b, dt, n, f)
			return func() { b.SwiGLU(o, g, u) }
		}},
		{Name: name("swiglu_backward"), Bytes: 5 * int64(n*f) * es, Setup: func(b engine.Backend) func() {
			g, u, do := filled(b, dt, 2, n, f), filled(b, dt, 1, n, f), filled(b, dt, 1, n, f)
			dg, du := engine.MustAlloc(b, dt, n, f), engine.MustAlloc(b, dt, n, f)
			return func() { b.SwiGLUBackward(dg, du, do, g, u) }
		}},
		{Name: name("logsoftmax_gather"), Bytes: int64(chunk*v)*es + int64(12*chunk), Setup: func(b engine.Backend) func() {
			l, t := filled(b, dt, 4, chunk, v), ids(b, chunk, v)
			lp, ls := engine.MustAlloc(b, engine.F32, chunk), engine.MustAlloc(b, engine.F32, chunk)
			return func() { b.LogSoftmaxGather(lp, ls, l, t) }
		}},
		{Name: name("logsoftmax_gather_backward"), Bytes: 2*int64(chunk*v)*es + int64(12*chunk), Setup: func(b engine.Backend) func() {
			l, t := filled(b, dt, 4, chunk, v), ids(b, chunk, v)
			lp, ls := engine.MustAlloc(b, engine.F32, chunk), engine.MustAlloc(b, engine.F32, chunk)
			dl := engine.MustAlloc(b, dt, chunk, v)
			b.LogSoftmaxGather(lp, ls, l, t)
			return func() { b.LogSoftmaxGatherBackward(dl, lp, l, ls, t) }
		}},
		{Name: name("segment_sum"), Bytes: int64(12 * n), Setup: func(b engine.Backend) func() {
			x, w := filled(b, engine.F32, 1, n), filled(b, engine.F32, 1, n)
			s, o := ids(b, n, 4), engine.MustAlloc(b, engine.F32, 4)
			return func() { b.SegmentSum(o, x, w, s) }
		}},
		{Name: name("sum_squares"), Bytes: int64(n*f) * es, Setup: func(b engine.Backend) func() {
			x, o := filled(b, dt, 1, n, f), engine.MustAlloc(b, engine.F32, 1)
			return func() { b.SumSquares(o, x) }
		}},
		{Name: name("adamw"), Bytes: int64(d*f) * (2*es + 4*4 + 4), Setup: func(b engine.Backend) func() {
			p, g := filled(b, dt, 1, f, d), filled(b, dt, 1, f, d)
			m, vv := engine.MustAlloc(b, engine.F32, f, d), engine.MustAlloc(b, engine.F32, f, d)
			var master *engine.Tensor
			if dt != engine.F32 {
				master = filled(b, engine.F32, 1, f, d)
			}
			hp := engine.AdamWParams{LR: 1e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: 1, GradScale: 1}
			return func() { b.AdamW(p, g, m, vv, master, hp) }
		}},
		{Name: name("sample_top_p"), Bytes: 8 * int64(v) * es, Setup: func(b engine.Backend) func() {
			uv := make([]float32, 8)
			for i := range uv {
				uv[i] = float32(i) / 8
			}
			l, u, o := filled(b, dt, 4, 8, v), engine.FromF32(b, engine.F32, uv, 8), engine.MustAlloc(b, engine.I32, 8)
			return func() { b.Sample(o, l, u, engine.SampleParams{Temperature: 1, TopP: 0.9}) }
		}},
	}
}

// AttentionCases are the attention forward and backward of c in dtype dt:
// Tokens/SeqLen causal sequences. FLOPs count the causal half of QKᵀ and PV
// (forward, 2·2·T²/2·Dh per head per sequence) and 2.5× that for the
// backward.
func AttentionCases(c Config, dt engine.DType) []Case {
	hd := c.Dim / c.Heads
	nseq := c.Tokens / c.SeqLen
	fwd := float64(nseq) * float64(c.Heads) * 2 * float64(c.SeqLen) * float64(c.SeqLen) * float64(hd)
	setup := func(b engine.Backend) (q, k, v, o, lse, seqs *engine.Tensor) {
		q = filled(b, dt, 1, c.Tokens, c.Heads, hd)
		k = filled(b, dt, 1, c.Tokens, c.KVHeads, hd)
		v = filled(b, dt, 1, c.Tokens, c.KVHeads, hd)
		o = engine.MustAlloc(b, dt, c.Tokens, c.Heads, hd)
		lse = engine.MustAlloc(b, engine.F32, c.Tokens, c.Heads)
		s := make([]int32, 0, 4*nseq)
		for i := 0; i < nseq; i++ {
			s = append(s, int32(i*c.SeqLen), int32(c.SeqLen), int32(i*c.SeqLen), int32(c.SeqLen))
		}
		seqs = engine.FromI32(b, s, nseq, 4)
		return
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	return []Case{
		{Name: fmt.Sprintf("attention/%s/%v/fwd", c.Name, dt), FLOPs: fwd, Setup: func(b engine.Backend) func() {
			q, k, v, o, lse, seqs := setup(b)
			return func() { b.Attention(o, lse, q, k, v, seqs, scale) }
		}},
		{Name: fmt.Sprintf("attention/%s/%v/bwd", c.Name, dt), FLOPs: 2.5 * fwd, Setup: func(b engine.Backend) func() {
			q, k, v, o, lse, seqs := setup(b)
			b.Attention(o, lse, q, k, v, seqs, scale)
			dq, dk, dv := engine.MustAlloc(b, dt, q.Shape()...), engine.MustAlloc(b, dt, k.Shape()...), engine.MustAlloc(b, dt, v.Shape()...)
			return func() { b.AttentionBackward(dq, dk, dv, o, o, lse, q, k, v, seqs, scale) }
		}},
	}
}
