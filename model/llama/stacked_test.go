package llama_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/engine/enginetest"
	"github.com/turnwise/turnwise/model/llama"
)

func TestStackedLoRA(t *testing.T) { testStackedLoRA(t, cpu.New(cpu.Options{Threads: 2})) }

// testStackedLoRA runs a training step's forward and backward with an
// adapter in its own layout — each layer's A matrices of q, k and v stacked
// in one buffer, and of gate and up, so that their LoRA inputs are one GEMM
// per group — and with a copy whose every tensor has a buffer of its own (a
// GEMM per projection), gradients likewise, and compares: the forward's
// log-probabilities within Tol (each element is the same dot product, but
// a backend may choose its GEMM's summation order by the shape, and the
// stacked product has k times the rows: the CPU's few-row path takes 4
// rows and sgemm 12), the gradients within GradTol (the stacked dx GEMM
// sums the k·r columns of a group before rounding dx once; one by one, dx
// is rounded after each projection's term). It also wants the stacked
// layout to survive a PEFT save and load, and generation to give the same
// tokens either way, their log-probabilities within Tol.
func testStackedLoRA(t *testing.T, b engine.Backend) {
	for _, dt := range []engine.DType{engine.F32, engine.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			// Grouped-query attention with a head width the CUDA kernels take.
			c := llama.Config{Dim: 32, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 40, Vocab: 37,
				NormEps: 1e-5, RopeTheta: 10000, MaxSeqLen: 64, BOS: 1, EOS: []int32{2}}
			m, err := llama.NewRandom(b, c, dt, 0.5, 6)
			if err != nil {
				t.Fatal(err)
			}
			lc := llama.LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"q", "k", "v", "gate", "up", "down"}}
			ad, err := m.NewAdapter(lc, 7)
			if err != nil {
				t.Fatal(err)
			}
			randomizeB(b, ad, rand.New(rand.NewPCG(1, 1)))
			apart := func(x *engine.Tensor) *engine.Tensor {
				y := engine.MustAlloc(b, x.DType(), x.Shape()...)
				b.Copy(y, x)
				return y
			}
			sep := ad.Map(apart)
			stacked := func(a *llama.Adapter, l int, names ...string) bool {
				var as []*engine.Tensor
				for _, p := range names {
					as = append(as, a.Layers[l][p].A)
				}
				return engine.Stacked(as...) != nil
			}
			if !stacked(ad, 1, "q", "k", "v") || !stacked(ad, 0, "gate", "up") || stacked(sep, 0, "q", "k", "v") {
				t.Fatal("the adapter's A matrices are not stacked by input, or the copy's are")
			}
			dir := t.TempDir()
			if err := m.SavePEFT(ad, dir); err != nil {
				t.Fatal(err)
			}
			if back, err := m.LoadPEFT(dir); err != nil || !stacked(back, 1, "q", "k", "v") {
				t.Fatalf("the loaded adapter's A matrices are not stacked (error %v)", err)
			}

			bt := tinyBatch(rand.New(rand.NewPCG(2, 2)), m.Config.Vocab)
			dl := engine.MustAlloc(b, engine.F32, len(bt.IDs))
			b.Fill(dl, -1)
			step := func(a, ga *llama.Adapter) []float32 {
				p, err := m.ForwardTrain(bt, a)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Release()
				logp := engine.ToF32(b, p.LogP)
				if err := p.Backward(dl, nil, ga); err != nil {
					t.Fatal(err)
				}
				return logp
			}
			ga, err := m.NewAdapterGrads(ad, engine.F32)
			if err != nil {
				t.Fatal(err)
			}
			gsep := ga.Map(apart)
			with, without := step(ad, ga), step(sep, gsep)
			if err := enginetest.RelErr(with, enginetest.F64(without)); err > enginetest.Tol(dt) {
				t.Fatalf("log-probabilities stacked and apart differ by %.3g (relative to the largest), over %g", err, enginetest.Tol(dt))
			}
			want := map[string][]float32{}
			gsep.Each(func(name string, x *engine.Tensor) { want[name] = engine.ToF32(b, x) })
			ga.Each(func(name string, x *engine.Tensor) {
				if err := enginetest.RelErr(engine.ToF32(b, x), enginetest.F64(want[name])); err > enginetest.GradTol(dt) {
					t.Errorf("%s: stacked and apart differ by %.3g (relative to the largest), over %g", name, err, enginetest.GradTol(dt))
				}
			})

			prompts := [][]int32{{1, 5, 9}, {3, 4}}
			g1, err := m.Generate(prompts, llama.GenerateOptions{MaxNew: 6, Adapter: ad})
			if err != nil {
				t.Fatal(err)
			}
			g2, err := m.Generate(prompts, llama.GenerateOptions{MaxNew: 6, Adapter: sep})
			if err != nil {
				t.Fatal(err)
			}
			for s := range g1 {
				for i := range g1[s].Tokens {
					if g1[s].Tokens[i] != g2[s].Tokens[i] || math.Abs(float64(g1[s].LogProb[i]-g2[s].LogProb[i])) > enginetest.Tol(dt)*max(1, math.Abs(float64(g2[s].LogProb[i]))) {
						t.Fatalf("slot %d token %d: %d (%v) stacked, %d (%v) apart", s, i, g1[s].Tokens[i], g1[s].LogProb[i], g2[s].Tokens[i], g2[s].LogProb[i])
					}
				}
			}
		})
	}
}

func TestStackedWeights(t *testing.T) { testStackedWeights(t, cpu.New(cpu.Options{Threads: 2})) }

// opCounter is a backend that counts its GEMMs, RoPEs and ScatterRows.
type opCounter struct {
	engine.Backend
	gemms, ropes, scatters int
}

func (o *opCounter) ScatterRows(dst, src, rows *engine.Tensor) {
	o.scatters++
	o.Backend.ScatterRows(dst, src, rows)
}

func (o *opCounter) Gemm(c, a, b *engine.Tensor, p engine.GemmParams) {
	o.gemms++
	o.Backend.Gemm(c, a, b, p)
}

func (o *opCounter) RoPE(x, pos, invFreq *engine.Tensor) {
	o.ropes++
	o.Backend.RoPE(x, pos, invFreq)
}

// testStackedWeights generates with the base weights in their own layout —
// each layer's q, k and v stacked in one buffer, and gate and up, so that
// a pass of one token computes each group as one GEMM — and with a copy
// whose every tensor has a buffer of its own, and compares: the same tokens
// and log-probabilities bit for bit (each element is the same dot product,
// summed alike at these widths), with and without an adapter; and the
// ops, for each decoding step of one sequence 3 GEMMs fewer per layer (q,
// k, v one GEMM, gate and up one) and one RoPE (q and k, end to end in the
// decoding activations either way), as many for two sequences or the
// prefill; and one ScatterRows per layer and step, for the keys and values
// together (the cache's K and V are the halves of one buffer).
func testStackedWeights(t *testing.T, b engine.Backend) {
	for _, dt := range []engine.DType{engine.F32, engine.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			c := llama.Config{Dim: 32, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 40, Vocab: 37,
				NormEps: 1e-5, RopeTheta: 10000, MaxSeqLen: 64, BOS: 1, EOS: []int32{2}}
			oc := &opCounter{Backend: b}
			m, err := llama.NewRandom(oc, c, dt, 0.5, 6)
			if err != nil {
				t.Fatal(err)
			}
			ad, err := m.NewAdapter(llama.LoRAConfig{Rank: 4, Alpha: 8, Targets: llama.AllProjections}, 7)
			if err != nil {
				t.Fatal(err)
			}
			randomizeB(b, ad, rand.New(rand.NewPCG(1, 1)))
			w := &m.Weights.Layers[1]
			if engine.Stacked(w.Wq, w.Wk, w.Wv) == nil || engine.Stacked(w.Wgate, w.Wup) == nil {
				t.Fatal("the weights of q, k and v, or of gate and up, are not stacked")
			}
			stacked := m.Weights
			apart := stacked.Map(func(x *engine.Tensor) *engine.Tensor {
				y := engine.MustAlloc(b, x.DType(), x.Shape()...)
				b.Copy(y, x)
				return y
			})
			const newTokens = 6
			for _, tc := range []struct {
				name    string
				prompts [][]int32
				ad      *llama.Adapter
				fewer   int // GEMMs the stacked weights save
				ropes   int // RoPEs per layer and token of a decoding step
			}{
				// The prefill is 3 tokens; the 5 decoding steps one each.
				{"one sequence", [][]int32{{1, 5, 9}}, nil, (newTokens - 1) * 3 * c.Layers, 1},
				{"one sequence, adapted", [][]int32{{1, 5, 9}}, ad, (newTokens - 1) * 3 * c.Layers, 1},
				{"two sequences", [][]int32{{1, 5, 9}, {3, 4}}, nil, 0, 2},
			} {
				gen := func(w *llama.Weights) ([]llama.Generation, int, int) {
					m.Weights = w
					oc.gemms, oc.ropes, oc.scatters = 0, 0, 0
					g, err := m.Generate(tc.prompts, llama.GenerateOptions{MaxNew: newTokens, Adapter: tc.ad})
					if err != nil {
						t.Fatal(err)
					}
					if want := c.Layers * newTokens; oc.scatters != want {
						t.Errorf("%s: %d ScatterRows, want %d (one per layer and step)", tc.name, oc.scatters, want)
					}
					return g, oc.gemms, oc.ropes
				}
				g1, n1, r1 := gen(stacked)
				g2, n2, r2 := gen(apart)
				if n2-n1 != tc.fewer {
					t.Errorf("%s: %d GEMMs stacked, %d apart: want %d fewer", tc.name, n1, n2, tc.fewer)
				}
				// 2 RoPEs per layer for the prefill, tc.ropes for each decoding step.
				if want := c.Layers * (2 + (newTokens-1)*tc.ropes); r1 != want || r2 != want {
					t.Errorf("%s: %d RoPEs stacked, %d apart: want %d", tc.name, r1, r2, want)
				}
				for s := range g1 {
					if len(g1[s].Tokens) != newTokens {
						t.Fatalf("%s: slot %d: %d tokens, want %d", tc.name, s, len(g1[s].Tokens), newTokens)
					}
					for i := range g1[s].Tokens {
						if g1[s].Tokens[i] != g2[s].Tokens[i] || math.Abs(float64(g1[s].LogProb[i]-g2[s].LogProb[i])) > enginetest.Tol(dt)*max(1, math.Abs(float64(g2[s].LogProb[i]))) {
							t.Fatalf("%s: slot %d token %d: %d (%v) stacked, %d (%v) apart", tc.name, s, i,
								g1[s].Tokens[i], g1[s].LogProb[i], g2[s].Tokens[i], g2[s].LogProb[i])
						}
					}
				}
			}
			m.Weights = stacked
		})
	}
}

func TestCacheApart(t *testing.T) { testCacheApart(t, cpu.New(cpu.Options{Threads: 2})) }

// testCacheApart runs a prefill and a decoding step with a cache as
// NewCache makes it (each layer's K and V the halves of one buffer, the new
// keys and values written by one op) and with a copy whose K and V have
// buffers of their own (written one op each), and wants the same logits
// bit for bit, and the same cache contents.
func testCacheApart(t *testing.T, b engine.Backend) {
	c := llama.Config{Dim: 32, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 40, Vocab: 37,
		NormEps: 1e-5, RopeTheta: 10000, MaxSeqLen: 64, BOS: 1, EOS: []int32{2}}
	m, err := llama.NewRandom(b, c, engine.F32, 0.5, 6)
	if err != nil {
		t.Fatal(err)
	}
	joint, err := m.NewCache(2, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer m.FreeCache(joint)
	if engine.Stacked(joint.K[1], joint.V[1]) == nil {
		t.Fatal("NewCache's K and V are not the halves of one buffer")
	}
	apart := &llama.Cache{Len: make([]int, 2), MaxLen: 8}
	for l := range joint.K {
		apart.K = append(apart.K, engine.MustAlloc(b, engine.F32, joint.K[l].Shape()...))
		apart.V = append(apart.V, engine.MustAlloc(b, engine.F32, joint.V[l].Shape()...))
	}
	defer m.FreeCache(apart)
	for step, tokens := range [][][]int32{{{1, 5, 9}, {3, 4}}, {{7}, {8}}} {
		var logits [2][]float32
		for i, kc := range []*llama.Cache{joint, apart} {
			out, err := m.Forward(kc, tokens, nil)
			if err != nil {
				t.Fatal(err)
			}
			logits[i] = engine.ToF32(b, out)
		}
		if !sameBits(logits[0], logits[1]) {
			t.Errorf("step %d: the logits differ between the joint cache and the one apart", step)
		}
	}
	for l := range joint.K {
		if !sameBits(engine.ToF32(b, joint.K[l]), engine.ToF32(b, apart.K[l])) || !sameBits(engine.ToF32(b, joint.V[l]), engine.ToF32(b, apart.V[l])) {
			t.Errorf("layer %d: the cached keys or values differ between the joint cache and the one apart", l)
		}
	}
}
