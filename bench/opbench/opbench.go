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
	"strings"

	"github.com/turnwise/turnwise/bench"
	"github.com/turnwise/turnwise/engine"
)

// Case is one benchmark: an op at one shape.
type Case struct {
	Name  string
	Bytes int64   // bytes the op must read and write
	FLOPs float64 // floating-point operations (0 for memory-bound ops)
	// Bound is bench.Compute when FLOP/s is the figure that matters,
	// bench.Memory when bytes per second is.
	Bound string
	// Setup allocates the inputs on b and returns the op to time. Each call
	// allocates a fresh, independent set, so that a timer can rotate
	// through several to keep them out of the cache.
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
	LoRARank   int // r of the LoRA GEMMs (0: none)
	// DecodeSeqs sequences of one new token each attend to DecodeLen cached
	// keys (0: no decoding case).
	DecodeSeqs, DecodeLen int
	// DecodeBatches are the decoding batch sizes whose projections, one
	// token per sequence, the GEMM cases include (DecodeGemmCases; none:
	// no such case). They do not depend on Tokens: one configuration of a
	// shape set carries them.
	DecodeBatches []int
}

// Reference24M is the 24.4M-parameter CPU reference configuration of the
// design: dim 288, 6 layers, 6 heads, FFN 768, vocab 32000, 4 × 256 tokens.
var Reference24M = Config{Name: "ref24M", Tokens: 1024, Dim: 288, Heads: 6, KVHeads: 6, FFN: 768, Vocab: 32000, SeqLen: 256, LogitChunk: 256}

// Llama8BLayer is one Llama-3.1-8B layer at 512 tokens (one sequence).
var Llama8BLayer = Config{Name: "llama8B", Tokens: 512, Dim: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 128256, SeqLen: 512, LogitChunk: 64}

// Llama8B2K and Llama8B8K are Llama-3.1-8B's shapes (hidden 4096, FFN 14336,
// vocab 128256, 32 query and 8 key/value heads of 128) at one sequence of
// 2048 and of 8192 tokens, with the model's 256-token logits chunks, LoRA
// rank 16, and 16 sequences decoding against as many cached tokens; the
// first also with the projections of decoding at batch 1 and 16.
var (
	Llama8B2K = Config{Name: "llama8b-2k", Tokens: 2048, Dim: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 128256,
		SeqLen: 2048, LogitChunk: 256, LoRARank: 16, DecodeSeqs: 16, DecodeLen: 2048, DecodeBatches: []int{1, 4, 16}}
	Llama8B8K = Config{Name: "llama8b-8k", Tokens: 8192, Dim: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 128256,
		SeqLen: 8192, LogitChunk: 256, LoRARank: 16, DecodeSeqs: 16, DecodeLen: 8192}
)

// ClipViTB32 is CLIP ViT-B/32's image tower at 8 images of 50 tokens (49
// patches and the class token): width 768, 12 heads of 64, MLP 3072. It has
// no vocabulary: only its attention (non-causal), LayerNorm, bias and GELU
// cases are meaningful (VisionCases).
var ClipViTB32 = Config{Name: "clip-vit-b32", Tokens: 400, Dim: 768, Heads: 12, KVHeads: 12, FFN: 3072, SeqLen: 50}

// Small is a shape set small enough for the kernel emulator: every case of
// it, emulated, takes well under a second.
var Small = Config{Name: "small", Tokens: 64, Dim: 128, Heads: 4, KVHeads: 2, FFN: 256, Vocab: 512,
	SeqLen: 32, LogitChunk: 32, LoRARank: 4, DecodeSeqs: 4, DecodeLen: 32, DecodeBatches: []int{1, 4}}

// ShapeSets are the named sets of configurations train bench measures.
var ShapeSets = map[string][]Config{
	"llama8b": {Llama8B2K, Llama8B8K},
	"ref24m":  {Reference24M},
	"small":   {Small},
}

// Cases are all cases of c in dtype dt: GEMMs, attention (causal and
// non-causal), memory-bound ops.
func Cases(c Config, dt engine.DType) []Case {
	cases := GemmCases(c, dt)
	cases = append(cases, LoRACases(c, dt)...)
	cases = append(cases, MLPLayoutCases(c, dt)...)
	cases = append(cases, DecodeGemmCases(c, dt)...)
	cases = append(cases, AttentionCases(c, dt)...)
	cases = append(cases, NonCausalAttentionCases(c, dt)...)
	return append(cases, MemoryCases(c, dt)...)
}

// projections are the GEMMs of one layer (and the classifier) of c: name,
// input and output width.
func projections(c Config) []struct {
	name    string
	in, out int
} {
	hd := c.Dim / c.Heads
	return []struct {
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
}

// GemmCases are the GEMMs of one training step of a layer of c: forward
// (y = x·Wᵀ), input gradient (dx = dy·W) and weight gradient (dW = dyᵀ·x) of
// each projection, in dtype dt.
func GemmCases(c Config, dt engine.DType) []Case {
	var cases []Case
	for _, p := range projections(c) {
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
				dt, v.m, v.nn, v.k, v.transA, v.transB, 0, v.aRows, v.aCols, v.bRows, v.bCols))
		}
	}
	return cases
}

// LoRACases are the GEMMs of a rank-r adapter on the q, gate and down
// projections: forward t = x·Aᵀ [N, r] and y += s·t·Bᵀ; as the model runs
// the first, the A matrices of the projections that read one input stacked
// and t transposed, [t_q; t_k; t_v] = [A_q; A_k; A_v]·xᵀ (and gate, up);
// backward dt = s·Bᵀ·dyᵀ [r, N] (over the output width), and the weight
// gradients gB += s·dyᵀ·tᵀ [out, r] and gA += dt·x [r, in] (over the
// tokens). Their inner or outer width is r (or a few r), so they are bound
// by memory, not arithmetic; all but y += s·t·Bᵀ have a long k and few
// output tiles, the shapes our GEMM splits along k.
//
// y += s·t·Bᵀ reads and writes y [N, out] for an r-deep product. The
// other order writes the LoRA term first, y = s·t·Bᵀ (lora_b_*_first: y
// written, not read), and adds the base product to it, y += x·Wᵀ
// (*_fwd_acc: the base GEMM, bound by arithmetic, reading y in its
// epilogue); the cases weigh the two orders — lora_b + the base's fwd
// (GemmCases) against lora_b_first + fwd_acc — before the model changes.
func LoRACases(c Config, dt engine.DType) []Case {
	r := c.LoRARank
	if r == 0 {
		return nil
	}
	var cases []Case
	for _, p := range []struct {
		name    string
		in, out int
	}{{"q", c.Dim, c.Dim}, {"gate", c.Dim, c.FFN}, {"down", c.FFN, c.Dim}} {
		n := c.Tokens
		a := gemmCase(fmt.Sprintf("gemm/%s/lora_a_%s/fwd/%v/%dx%dx%d", c.Name, p.name, dt, n, r, p.in),
			dt, n, r, p.in, false, true, 0, n, p.in, r, p.in)
		b := gemmCase(fmt.Sprintf("gemm/%s/lora_b_%s/fwd/%v/%dx%dx%d", c.Name, p.name, dt, n, p.out, r),
			dt, n, p.out, r, false, true, 1, n, r, p.out, r)
		// dt = s·Bᵀ·dyᵀ: B [out, r], dy [N, out]; gB += s·dyᵀ·tᵀ: t [r, N];
		// gA += dt·x: x [N, in].
		dT := gemmCase(fmt.Sprintf("gemm/%s/lora_dt_%s/bwd/%v/%dx%dx%d", c.Name, p.name, dt, r, n, p.out),
			dt, r, n, p.out, true, true, 0, p.out, r, n, p.out)
		gB := gemmCase(fmt.Sprintf("gemm/%s/lora_gB_%s/bwd/%v/%dx%dx%d", c.Name, p.name, dt, p.out, r, n),
			dt, p.out, r, n, true, true, 1, n, p.out, r, n)
		gA := gemmCase(fmt.Sprintf("gemm/%s/lora_gA_%s/bwd/%v/%dx%dx%d", c.Name, p.name, dt, r, p.in, n),
			dt, r, p.in, n, false, false, 1, r, n, n, p.in)
		first := gemmCase(fmt.Sprintf("gemm/%s/lora_b_%s_first/fwd/%v/%dx%dx%d", c.Name, p.name, dt, n, p.out, r),
			dt, n, p.out, r, false, true, 0, n, r, p.out, r)
		acc := gemmCase(fmt.Sprintf("gemm/%s/%s_fwd_acc/fwd/%v/%dx%dx%d", c.Name, p.name, dt, n, p.out, p.in),
			dt, n, p.out, p.in, false, true, 1, n, p.in, p.out, p.in)
		for _, x := range []*Case{&a, &b, &dT, &gB, &gA, &first} {
			x.Bound = bench.Memory
		}
		cases = append(cases, a, b, dT, gB, gA, first, acc)
	}
	for _, g := range []struct {
		name  string
		stack int // projections that read the input
		in    int
	}{{"qkv", 3, c.Dim}, {"gate_up", 2, c.Dim}} {
		n, rr := c.Tokens, g.stack*r
		a := gemmCase(fmt.Sprintf("gemm/%s/lora_a_%s/fwd/%v/%dx%dx%d", c.Name, g.name, dt, rr, n, g.in),
			dt, rr, n, g.in, false, true, 0, rr, g.in, n, g.in)
		a.Bound = bench.Memory
		cases = append(cases, a)
	}
	return cases
}

// DecodeGemmCases are the projections of a decoding step at each of
// c.DecodeBatches, y = x·Wᵀ with one token per sequence, as the model runs
// them: q, k (v alike), o, gate (up alike), down and the classifier. They
// read each weight once for a few rows, so they are bound by memory: at
// batch 1 a decoding step is these weights' bytes at the bandwidth they
// reach.
func DecodeGemmCases(c Config, dt engine.DType) []Case {
	hd := c.Dim / c.Heads
	var cases []Case
	for _, s := range c.DecodeBatches {
		for _, p := range []struct {
			name    string
			in, out int
		}{{"q", c.Dim, c.Dim}, {"k", c.Dim, c.KVHeads * hd}, {"o", c.Dim, c.Dim}, {"gate", c.Dim, c.FFN}, {"down", c.FFN, c.Dim},
			{"classifier", c.Dim, c.Vocab}} {
			g := gemmCase(fmt.Sprintf("gemm/%s/decode_%s/fwd/%v/%dx%dx%d", c.Name, p.name, dt, s, p.out, p.in),
				dt, s, p.out, p.in, false, true, 0, s, p.in, p.out, p.in)
			g.Bound = bench.Memory
			cases = append(cases, g)
		}
	}
	return cases
}

// MLPLayoutCases weigh fusing the MLP's gate and up projections into one
// GEMM each way, which the model could do only with its MLP activations
// stored feature-major (gate, up and SwiGLU's output [F, N], so that gate
// and up are the row blocks of one [2F, N] product and dx one GEMM over
// 2F): the model's GEMMs as they are (mlp_now: gate alone forward, the
// input gradient of gate and then of up, accumulated) against the fused
// ones and the down projection reading and writing the feature-major
// layout (mlp_fm). The down projection as it is, is GemmCases' down. A GPU
// run's table decides whether the other layout pays on that device's
// GEMMs: forward 2·gate against gate_up plus down's difference, backward
// gate's and up's dx against gate_up's.
func MLPLayoutCases(c Config, dt engine.DType) []Case {
	n, d, f := c.Tokens, c.Dim, c.FFN
	var cases []Case
	for _, v := range []struct {
		name           string
		m, nn, k       int
		transA, transB bool
		beta           float32
		aRows, aCols   int
		bRows, bCols   int
	}{
		{"mlp_now_gate/fwd", n, f, d, false, true, 0, n, d, f, d},              // gate = h2·Wgateᵀ
		{"mlp_now_gate/dx", n, d, f, false, false, 0, n, f, f, d},              // dh2 = dgate·Wgate
		{"mlp_now_up/dx", n, d, f, false, false, 1, n, f, f, d},                // dh2 += dup·Wup
		{"mlp_fm_gate_up/fwd", 2 * f, n, d, false, true, 0, 2 * f, d, n, d},    // [gate; up]ᵀ = [Wgate; Wup]·h2ᵀ
		{"mlp_fm_gate_up/dx", n, d, 2 * f, true, false, 0, 2 * f, n, 2 * f, d}, // dh2 = [dgate; dup]ᵀᵀ·[Wgate; Wup]
		{"mlp_fm_down/fwd", n, d, f, true, true, 0, f, n, d, f},                // down = (actᵀ)ᵀ·Wdownᵀ
		{"mlp_fm_down/dx", f, n, d, true, true, 0, d, f, n, d},                 // dactᵀ = Wdownᵀ·ddownᵀ
	} {
		cases = append(cases, gemmCase(fmt.Sprintf("gemm/%s/%s/%v/%dx%dx%d", c.Name, v.name, dt, v.m, v.nn, v.k),
			dt, v.m, v.nn, v.k, v.transA, v.transB, v.beta, v.aRows, v.aCols, v.bRows, v.bCols))
	}
	return cases
}

// adamwMultiLayers is the number of layers whose adapters adamwMulti
// steps: Llama-3.1-8B's.
const adamwMultiLayers = 32

// adamwMulti is one AdamWMulti over the rank-r LoRA adapters (A and B, in
// dtype dt) of the seven projections of adamwMultiLayers layers of c — 448
// tensors at Llama-3.1-8B's shapes — with their f32 gradients, moments and
// (for a non-f32 dt) masters end to end in flat buffers, as the optimizer
// lays them out. Per element it reads the f32 gradient and writes the
// weight, and reads and writes m, v and the master (or, in f32, the weight).
func adamwMulti(c Config, dt engine.DType) Case {
	r, kv := c.LoRARank, c.KVHeads*(c.Dim/c.Heads)
	var shapes [][2]int // [rows, cols] of every tensor
	for range adamwMultiLayers {
		for _, p := range [][2]int{{c.Dim, c.Dim}, {kv, c.Dim}, {kv, c.Dim}, {c.Dim, c.Dim}, {c.FFN, c.Dim}, {c.FFN, c.Dim}, {c.Dim, c.FFN}} {
			shapes = append(shapes, [2]int{r, p[1]}, [2]int{p[0], r}) // A [r, in], B [out, r]
		}
	}
	var n int64
	for _, sh := range shapes {
		n += int64(sh[0] * sh[1])
	}
	perElem := 4 + 2*int64(dt.Size()) + 16 // f32: the weights themselves read and written
	if dt != engine.F32 {
		perElem = 4 + int64(dt.Size()) + 16 + 8
	}
	return Case{Name: fmt.Sprintf("adamw_multi/%s/%v/%dx", c.Name, dt, len(shapes)), Bytes: n * perElem,
		Setup: func(b engine.Backend) func() {
			spans := make([]engine.AdamWSpan, len(shapes))
			off, moff := 0, 0
			for i, sh := range shapes {
				spans[i] = engine.AdamWSpan{W: filled(b, dt, 1, sh[0], sh[1]), Off: off, MasterOff: -1}
				off += sh[0] * sh[1]
				if dt != engine.F32 {
					spans[i].MasterOff = moff
					moff += sh[0] * sh[1]
				}
			}
			t := engine.NewParamTable(spans)
			g, m, v := filled(b, engine.F32, 1, off), engine.MustAlloc(b, engine.F32, off), engine.MustAlloc(b, engine.F32, off)
			var master *engine.Tensor
			if moff > 0 {
				master = filled(b, engine.F32, 1, moff)
			}
			hp := engine.AdamWParams{LR: 1e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: 1, GradScale: 1}
			return func() { b.AdamWMulti(t, g, m, v, master, hp) }
		}}
}

// SquareGemm is C = A·B at m = n = k = size in dtype dt.
func SquareGemm(size int, dt engine.DType) Case {
	return gemmCase(fmt.Sprintf("gemm/square/%v/%d", dt, size), dt, size, size, size, false, false, 0, size, size, size, size)
}

// gemmCase is C [m, n] = op(A)·op(B) + beta·C with A [ar, ac] and B [br, bc]
// in dtype dt; C is f32 for f32 operands, else of dt.
func gemmCase(name string, dt engine.DType, m, n, k int, ta, tb bool, beta float32, ar, ac, br, bc int) Case {
	cElems := int64(m) * int64(n)
	if beta != 0 {
		cElems *= 2 // read and written
	}
	return Case{
		Name:  name,
		FLOPs: 2 * float64(m) * float64(n) * float64(k),
		Bytes: int64(dt.Size()) * (int64(ar)*int64(ac) + int64(br)*int64(bc) + cElems),
		Bound: bench.Compute,
		Setup: func(b engine.Backend) func() {
			a, bm := filled(b, dt, 0.1, ar, ac), filled(b, dt, 0.1, br, bc)
			cm := filled(b, dt, 0.1, m, n)
			p := engine.GemmParams{TransA: ta, TransB: tb, Alpha: 1, Beta: beta}
			return func() { b.Gemm(cm, a, bm, p) }
		},
	}
}

// CopyCase is a device-to-device copy of n bytes: the memory ceiling. Its
// Bytes count the bytes read and the bytes written.
func CopyCase(n int) Case {
	return Case{
		Name:  fmt.Sprintf("copy/%dMiB", n>>20),
		Bytes: 2 * int64(n),
		Bound: bench.Memory,
		Setup: func(b engine.Backend) func() {
			src, dst := filled(b, engine.F32, 1, n/4), engine.MustAlloc(b, engine.F32, n/4)
			return func() { b.Copy(dst, src) }
		},
	}
}

// patternLen is the longest stretch of values computed on the host; longer
// tensors repeat it by device-to-device copies, which keeps setting up
// gigabyte-sized inputs fast.
const patternLen = 1 << 20

// filled allocates a tensor holding a deterministic, non-trivial pattern in
// [−scale, scale] (values that are not all alike, so that a GPU's power
// draw, and so its clocks, are those of real data).
func filled(b engine.Backend, dt engine.DType, scale float64, shape ...int) *engine.Tensor {
	t := engine.MustAlloc(b, dt, shape...)
	n := t.Numel()
	if n == 0 {
		return t
	}
	flat := t.Reshape(n)
	p := min(n, patternLen)
	vals := make([]float32, p)
	for i := range vals {
		vals[i] = float32(scale * math.Sin(float64(i)*0.7311))
	}
	engine.SetF32(b, flat.Rows(0, p), vals)
	for done := p; done < n; {
		k := min(done, n-done)
		b.Copy(flat.Rows(done, done+k), flat.Rows(0, k))
		done += k
	}
	return t
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
	// AdamW reads the gradient and the moments and writes the weights and
	// moments; a low-precision parameter is read and written through its f32
	// master copy instead of itself.
	adamBytes := 2*es + 16 + es
	if dt != engine.F32 {
		adamBytes = 2*es + 16 + 8
	}
	cases := []Case{
		{Name: name("fill"), Bytes: nd * es, Setup: func(b engine.Backend) func() {
			x := engine.MustAlloc(b, dt, n, d)
			return func() { b.Fill(x, 0.5) }
		}},
		{Name: name("add"), Bytes: 3 * nd * es, Setup: func(b engine.Backend) func() {
			x, y, o := filled(b, dt, 1, n, d), filled(b, dt, 1, n, d), engine.MustAlloc(b, dt, n, d)
			return func() { b.Add(o, x, y) }
		}},
		{Name: name("cast_from_f32"), Bytes: nd * (4 + es), Setup: func(b engine.Backend) func() {
			x, o := filled(b, engine.F32, 1, n, d), engine.MustAlloc(b, dt, n, d)
			return func() { b.Cast(o, x) }
		}},
		{Name: name("cast_to_f32"), Bytes: nd * (4 + es), Setup: func(b engine.Backend) func() {
			x, o := filled(b, dt, 1, n, d), engine.MustAlloc(b, engine.F32, n, d)
			return func() { b.Cast(o, x) }
		}},
		// The keys of a batch's tokens written to their rows of a KV cache
		// of twice as many rows (every other row).
		{Name: name("scatter_rows"), Bytes: 2*int64(n*c.KVHeads*hd)*es + int64(4*n), Setup: func(b engine.Backend) func() {
			src, cache := filled(b, dt, 1, n, c.KVHeads*hd), engine.MustAlloc(b, dt, 2*n, c.KVHeads*hd)
			rows := make([]int32, n)
			for i := range rows {
				rows[i] = int32(2 * i)
			}
			r := engine.FromI32(b, rows, n)
			return func() { b.ScatterRows(cache, src, r) }
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
		{Name: name("rope_backward"), Bytes: 2 * nd * es, Setup: func(b engine.Backend) func() {
			x := filled(b, dt, 1, n, c.Heads, hd)
			pos := ids(b, n, c.SeqLen)
			fr := engine.FromF32(b, engine.F32, engine.RoPEFreqs(hd, 10000, nil), hd/2)
			return func() { b.RoPEBackward(x, pos, fr) }
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
		{Name: name("layernorm"), Bytes: 2*nd*es + 2*int64(d)*es + int64(8*n), Setup: func(b engine.Backend) func() {
			x, w, bi := filled(b, dt, 1, n, d), filled(b, dt, 1, d), filled(b, dt, 1, d)
			o, m, r := engine.MustAlloc(b, dt, n, d), engine.MustAlloc(b, engine.F32, n), engine.MustAlloc(b, engine.F32, n)
			return func() { b.LayerNorm(o, m, r, x, w, bi, 1e-5) }
		}},
		{Name: name("layernorm_backward"), Bytes: 3*nd*es + 5*int64(d)*es + int64(8*n), Setup: func(b engine.Backend) func() {
			x, w, bi, g := filled(b, dt, 1, n, d), filled(b, dt, 1, d), filled(b, dt, 1, d), filled(b, dt, 1, n, d)
			m, r := engine.MustAlloc(b, engine.F32, n), engine.MustAlloc(b, engine.F32, n)
			dx, dw, db := engine.MustAlloc(b, dt, n, d), engine.MustAlloc(b, dt, d), engine.MustAlloc(b, dt, d)
			b.LayerNorm(engine.MustAlloc(b, dt, n, d), m, r, x, w, bi, 1e-5)
			return func() { b.LayerNormBackward(dx, dw, db, g, x, w, m, r) }
		}},
		{Name: name("add_bias"), Bytes: 2*nd*es + int64(d)*es, Setup: func(b engine.Backend) func() {
			x, bi := filled(b, dt, 1, n, d), filled(b, dt, 1e-3, d)
			return func() { b.AddBias(x, bi) }
		}},
		{Name: name("add_bias_backward"), Bytes: nd*es + 8*int64(d), Setup: func(b engine.Backend) func() {
			g, db := filled(b, dt, 1, n, d), engine.MustAlloc(b, engine.F32, d)
			return func() { b.AddBiasBackward(db, g) }
		}},
		{Name: name("gelu_quick"), Bytes: 2 * int64(n*f) * es, Setup: func(b engine.Backend) func() {
			x, o := filled(b, dt, 2, n, f), engine.MustAlloc(b, dt, n, f)
			return func() { b.GELU(o, x, engine.GELUQuick) }
		}},
		{Name: name("gelu_erf"), Bytes: 2 * int64(n*f) * es, Setup: func(b engine.Backend) func() {
			x, o := filled(b, dt, 2, n, f), engine.MustAlloc(b, dt, n, f)
			return func() { b.GELU(o, x, engine.GELUErf) }
		}},
		{Name: name("gelu_quick_backward"), Bytes: 3 * int64(n*f) * es, Setup: func(b engine.Backend) func() {
			x, g, dx := filled(b, dt, 2, n, f), filled(b, dt, 1, n, f), engine.MustAlloc(b, dt, n, f)
			return func() { b.GELUBackward(dx, g, x, engine.GELUQuick) }
		}},
		{Name: name("dropout"), Bytes: 2 * nd * es, Setup: func(b engine.Backend) func() {
			x, o := filled(b, dt, 1, n, d), engine.MustAlloc(b, dt, n, d)
			return func() { b.Dropout(o, x, engine.DropoutParams{P: 0.1, Seed: 1}) }
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
		{Name: name("sum_squares"), Bytes: int64(n*f) * es, Setup: func(b engine.Backend) func() {
			x, o := filled(b, dt, 1, n, f), engine.MustAlloc(b, engine.F32, 1)
			return func() { b.SumSquares(o, x) }
		}},
		{Name: name("adamw"), Bytes: int64(d*f) * adamBytes, Setup: func(b engine.Backend) func() {
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
		{Name: name("sample_top_k"), Bytes: 8 * int64(v) * es, Setup: func(b engine.Backend) func() {
			uv := make([]float32, 8)
			for i := range uv {
				uv[i] = float32(i) / 8
			}
			l, u, o := filled(b, dt, 4, 8, v), engine.FromF32(b, engine.F32, uv, 8), engine.MustAlloc(b, engine.I32, 8)
			return func() { b.Sample(o, l, u, engine.SampleParams{Temperature: 1, TopK: 50, TopP: 0.9}) }
		}},
	}
	if c.LoRARank > 0 {
		cases = append(cases, adamwMulti(c, dt))
	}
	if c.DecodeSeqs > 0 {
		cases = append(cases, DecodeAttention(c, dt))
	}
	for i := range cases {
		cases[i].Bound = bench.Memory
	}
	return cases
}

// AttentionName is the name of an attention case: pass ("fwd", "bwd"), dtype,
// seqs sequences of seqLen tokens, H query and G key/value heads of width
// Dh. PyTorch's peer (bench/peers) names its results the same way.
func AttentionName(pass string, dt engine.DType, seqs, seqLen, h, g, dh int) string {
	return fmt.Sprintf("attention/%s/%v/b%dxT%d/H%d/G%d/D%d", pass, dt, seqs, seqLen, h, g, dh)
}

// AttentionFLOPs is the forward's arithmetic of causal attention over seqs
// sequences of seqLen tokens with h query heads of width dh: QKᵀ and PV over
// the causal half, 2·2·T²/2·Dh per head and sequence.
func AttentionFLOPs(seqs, seqLen, h, dh int) float64 {
	return float64(seqs) * float64(h) * 2 * float64(seqLen) * float64(seqLen) * float64(dh)
}

// AttentionCases are the attention forward and backward of c in dtype dt:
// Tokens/SeqLen causal sequences. FLOPs count the causal half of QKᵀ and PV
// (AttentionFLOPs) for the forward and 2.5× that for the backward (dV, dP,
// dQ, dK and the recomputed scores).
func AttentionCases(c Config, dt engine.DType) []Case {
	return attentionCases(c, dt, false)
}

// VisionCases are the ops a vision transformer adds to a Llama layer's, at
// the shapes of c in dtype dt: non-causal attention, LayerNorm, the bias and
// the GELUs (the cases of MemoryCases whose names start with layernorm,
// add_bias or gelu).
func VisionCases(c Config, dt engine.DType) []Case {
	cases := NonCausalAttentionCases(c, dt)
	for _, k := range MemoryCases(c, dt) { // the others are dropped, never set up
		for _, p := range []string{"layernorm", "add_bias", "gelu"} {
			if strings.HasPrefix(k.Name, p) {
				cases = append(cases, k)
				break
			}
		}
	}
	return cases
}

// NonCausalAttentionCases are AttentionCases' sequences attended
// non-causally (a vision transformer's attention): every query meets every
// key of its sequence, twice the causal half's arithmetic.
func NonCausalAttentionCases(c Config, dt engine.DType) []Case {
	return attentionCases(c, dt, true)
}

// attentionCases are AttentionCases, or NonCausalAttentionCases when
// nonCausal ("_noncausal" after the pass in their names).
func attentionCases(c Config, dt engine.DType, nonCausal bool) []Case {
	hd := c.Dim / c.Heads
	nseq := c.Tokens / c.SeqLen
	fwd, suffix := AttentionFLOPs(nseq, c.SeqLen, c.Heads, hd), ""
	if nonCausal {
		fwd, suffix = 2*fwd, "_noncausal"
	}
	p := engine.AttentionParams{Scale: float32(1 / math.Sqrt(float64(hd))), NonCausal: nonCausal}
	setup := func(b engine.Backend) (q, k, v, o, lse, seqs *engine.Tensor) {
		q = filled(b, dt, 1, c.Tokens, c.Heads, hd)              // [N, H, Dh]
		k = filled(b, dt, 1, c.Tokens, c.KVHeads, hd)            // [N, G, Dh]
		v = filled(b, dt, 1, c.Tokens, c.KVHeads, hd)            // [N, G, Dh]
		o = engine.MustAlloc(b, dt, c.Tokens, c.Heads, hd)       // [N, H, Dh]
		lse = engine.MustAlloc(b, engine.F32, c.Tokens, c.Heads) // [N, H]
		s := make([]int32, 0, 4*nseq)
		for i := 0; i < nseq; i++ {
			s = append(s, int32(i*c.SeqLen), int32(c.SeqLen), int32(i*c.SeqLen), int32(c.SeqLen))
		}
		return q, k, v, o, lse, engine.FromI32(b, s, nseq, 4) // [nseq, 4]
	}
	es := int64(dt.Size())
	qBytes, kvBytes := int64(c.Tokens*c.Heads*hd)*es, int64(c.Tokens*c.KVHeads*hd)*es
	return []Case{
		{Name: AttentionName("fwd"+suffix, dt, nseq, c.SeqLen, c.Heads, c.KVHeads, hd), FLOPs: fwd, Bound: bench.Compute,
			Bytes: 2*qBytes + 2*kvBytes + int64(4*c.Tokens*c.Heads),
			Setup: func(b engine.Backend) func() {
				q, k, v, o, lse, seqs := setup(b)
				return func() { b.Attention(o, lse, q, k, v, seqs, p) }
			}},
		{Name: AttentionName("bwd"+suffix, dt, nseq, c.SeqLen, c.Heads, c.KVHeads, hd), FLOPs: 2.5 * fwd, Bound: bench.Compute,
			Bytes: 4*qBytes + 4*kvBytes + int64(4*c.Tokens*c.Heads),
			Setup: func(b engine.Backend) func() {
				q, k, v, o, lse, seqs := setup(b)
				b.Attention(o, lse, q, k, v, seqs, p)
				dq, dk, dv := engine.MustAlloc(b, dt, q.Shape()...), engine.MustAlloc(b, dt, k.Shape()...), engine.MustAlloc(b, dt, v.Shape()...)
				return func() { b.AttentionBackward(dq, dk, dv, o, o, lse, q, k, v, seqs, p) }
			}},
	}
}

// DecodeAttention is one decoding step's attention: DecodeSeqs sequences of
// one new query each, attending to DecodeLen cached keys and values. It is
// bound by reading the cache.
func DecodeAttention(c Config, dt engine.DType) Case {
	hd := c.Dim / c.Heads
	s, kl := c.DecodeSeqs, c.DecodeLen
	es := int64(dt.Size())
	return Case{
		Name:  fmt.Sprintf("attention/decode/%v/b%dxK%d/H%d/G%d/D%d", dt, s, kl, c.Heads, c.KVHeads, hd),
		Bytes: 2*int64(s*kl*c.KVHeads*hd)*es + 2*int64(s*c.Heads*hd)*es + int64(4*s*c.Heads),
		FLOPs: float64(s) * float64(c.Heads) * 4 * float64(kl) * float64(hd),
		Setup: func(b engine.Backend) func() {
			q := filled(b, dt, 1, s, c.Heads, hd)
			k, v := filled(b, dt, 1, s*kl, c.KVHeads, hd), filled(b, dt, 1, s*kl, c.KVHeads, hd)
			o, lse := engine.MustAlloc(b, dt, s, c.Heads, hd), engine.MustAlloc(b, engine.F32, s, c.Heads)
			rows := make([]int32, 0, 4*s)
			for i := 0; i < s; i++ {
				rows = append(rows, int32(i), 1, int32(i*kl), int32(kl))
			}
			seqs := engine.FromI32(b, rows, s, 4)
			scale := engine.AttentionParams{Scale: float32(1 / math.Sqrt(float64(hd)))}
			return func() { b.Attention(o, lse, q, k, v, seqs, scale) }
		},
	}
}
