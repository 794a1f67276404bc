package llama_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/model/llama"
)

// tinyConfig is small enough for finite differences over the whole model yet
// has every feature: GQA 2:1, several layers, an odd vocabulary.
func tinyConfig(tied bool) llama.Config {
	return llama.Config{Dim: 16, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 4, FFN: 24, Vocab: 37,
		NormEps: 1e-5, RopeTheta: 10000, TiedEmbed: tied, MaxSeqLen: 64, BOS: 1, EOS: []int32{2}}
}

func tinyBatch(r *rand.Rand, vocab int) llama.Batch {
	lens := []int{7, 5}
	var bt llama.Batch
	for _, l := range lens {
		for j := 0; j < l; j++ {
			bt.IDs = append(bt.IDs, int32(r.IntN(vocab)))
			t := int32(r.IntN(vocab))
			if j == 2 {
				t = -1 // a position without loss
			}
			bt.Targets = append(bt.Targets, t)
		}
	}
	bt.Lens = lens
	return bt
}

// loss runs a forward pass with adapter ad and returns −Σ logp (f64 on the
// host).
func loss(t *testing.T, m *llama.Model, bt llama.Batch, ad *llama.Adapter) float64 {
	p, err := m.ForwardTrain(bt, ad)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	var s float64
	for _, v := range engine.ToF32(m.Backend(), p.LogP) {
		s -= float64(v)
	}
	return s
}

// TestGradientsFiniteDifferences checks the whole model's backward — every
// parameter tensor, tied and untied classifiers — against central finite
// differences of the forward loss, on sampled coordinates.
func TestGradientsFiniteDifferences(t *testing.T) {
	for _, tied := range []bool{false, true} {
		t.Run(fmt.Sprintf("tied=%v", tied), func(t *testing.T) {
			b := cpu.New(cpu.Options{Threads: 2})
			m, err := llama.NewRandom(b, tinyConfig(tied), engine.F32, 0.5, 7)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(3, 4))
			bt := tinyBatch(r, m.Config.Vocab)

			p, err := m.ForwardTrain(bt, nil)
			if err != nil {
				t.Fatal(err)
			}
			dl := engine.MustAlloc(b, engine.F32, len(bt.IDs))
			b.Fill(dl, -1) // d(−Σ logp)/d logp
			g, err := m.NewGrads(engine.F32)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Backward(dl, g, nil); err != nil {
				t.Fatal(err)
			}
			p.Release()

			checkFD(t, b, r, m.Weights.Each, g.Each, func() float64 { return loss(t, m, bt, nil) })
		})
	}
}

// TestTrainingLowersLoss takes a few plain gradient steps on a fixed batch
// and checks that the loss falls: forward, backward and the gradients' signs
// work together.
func TestTrainingLowersLoss(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	m, err := llama.NewRandom(b, tinyConfig(false), engine.F32, 0.2, 11)
	if err != nil {
		t.Fatal(err)
	}
	bt := tinyBatch(rand.New(rand.NewPCG(5, 6)), m.Config.Vocab)
	first := loss(t, m, bt, nil)
	dl := engine.MustAlloc(b, engine.F32, len(bt.IDs))
	b.Fill(dl, -1)
	for step := 0; step < 20; step++ {
		p, err := m.ForwardTrain(bt, nil)
		if err != nil {
			t.Fatal(err)
		}
		g, _ := m.NewGrads(engine.F32)
		if err := p.Backward(dl, g, nil); err != nil {
			t.Fatal(err)
		}
		p.Release()
		grads := map[string]*engine.Tensor{}
		g.Each(func(name string, t *engine.Tensor) { grads[name] = t })
		m.Weights.Each(func(name string, w *engine.Tensor) { // w −= 0.05·g, on the host
			wv, gv := engine.ToF32(b, w), engine.ToF32(b, grads[name])
			for i := range wv {
				wv[i] -= 0.05 * gv[i]
			}
			engine.SetF32(b, w, wv)
		})
	}
	last := loss(t, m, bt, nil)
	if !(last < 0.5*first) {
		t.Errorf("loss %.4f → %.4f after 20 steps; want at least halved", first, last)
	}
}

// checkFD compares the gradients grads visits with central finite
// differences of lossOf over the parameters params visits (both by name), on
// six sampled coordinates per tensor. The forward is f32 and h = 3e-3:
// truncation O(h²)·|L‴| and rounding ~1e-7·|L|/h both stay near 1e-3 for
// these tiny models with weights of std 0.5.
func checkFD(t *testing.T, b engine.Backend, r *rand.Rand, params, grads func(func(string, *engine.Tensor)), lossOf func() float64) {
	t.Helper()
	g := map[string]*engine.Tensor{}
	grads(func(name string, t *engine.Tensor) { g[name] = t })
	params(func(name string, w *engine.Tensor) {
		analytic := engine.ToF32(b, g[name])
		vals := engine.ToF32(b, w)
		const h = 3e-3
		var maxDiff, maxRef float64
		for k := 0; k < 6; k++ {
			i := r.IntN(len(vals))
			orig := vals[i]
			vals[i] = orig + h
			engine.SetF32(b, w, vals)
			lp := lossOf()
			vals[i] = orig - h
			engine.SetF32(b, w, vals)
			lm := lossOf()
			vals[i] = orig
			engine.SetF32(b, w, vals)
			fd := (lp - lm) / (2 * h)
			maxDiff = math.Max(maxDiff, math.Abs(fd-float64(analytic[i])))
			maxRef = math.Max(maxRef, math.Abs(fd))
		}
		if maxDiff > 2e-3+2e-2*maxRef {
			t.Errorf("%s: gradient differs from finite differences by %.3g (largest |fd| %.3g)", name, maxDiff, maxRef)
		}
	})
}

// TestForwardBackwardFused checks that the fused classifier pass gives the
// same log-probabilities and gradients as ForwardTrain then Backward.
func TestForwardBackwardFused(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	for _, tied := range []bool{false, true} {
		m, err := llama.NewRandom(b, tinyConfig(tied), engine.F32, 0.5, 3)
		if err != nil {
			t.Fatal(err)
		}
		bt := tinyBatch(rand.New(rand.NewPCG(4, 4)), m.Config.Vocab)
		dl := engine.MustAlloc(b, engine.F32, len(bt.IDs))
		b.Fill(dl, -0.25)
		g1, _ := m.NewGrads(engine.F32)
		p, err := m.ForwardTrain(bt, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Backward(dl, g1, nil); err != nil {
			t.Fatal(err)
		}
		lp1 := engine.ToF32(b, p.LogP)
		p.Release()
		g2, _ := m.NewGrads(engine.F32)
		p, err = m.ForwardBackward(bt, nil, dl, g2, nil)
		if err != nil {
			t.Fatal(err)
		}
		lp2 := engine.ToF32(b, p.LogP)
		p.Release()
		for i := range lp1 {
			if lp1[i] != lp2[i] {
				t.Fatalf("tied=%v: logp[%d] %v unfused, %v fused", tied, i, lp1[i], lp2[i])
			}
		}
		want := map[string][]float32{}
		g1.Each(func(name string, t *engine.Tensor) { want[name] = engine.ToF32(b, t) })
		g2.Each(func(name string, tt *engine.Tensor) {
			got := engine.ToF32(b, tt)
			for i := range got {
				if math.Abs(float64(got[i]-want[name][i])) > 1e-6*(1+math.Abs(float64(want[name][i]))) {
					t.Fatalf("tied=%v: %s[%d] = %v fused, %v unfused", tied, name, i, got[i], want[name][i])
				}
			}
		})
	}
}

// TestRecompute checks that recomputing activations in the backward gives
// bit-identical log-probabilities and gradients (base and adapter) while
// holding less activation memory.
func TestRecompute(t *testing.T) {
	cfg := tinyConfig(false)
	cfg.Layers = 4
	run := func(recompute bool) (lp []float32, grads map[string][]float32, held int) {
		b := cpu.New(cpu.Options{Threads: 2})
		m, err := llama.NewRandom(b, cfg, engine.F32, 0.5, 21)
		if err != nil {
			t.Fatal(err)
		}
		m.Recompute = recompute
		ad, err := m.NewAdapter(llama.LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"q", "down"}}, 3)
		if err != nil {
			t.Fatal(err)
		}
		randomizeB(b, ad, rand.New(rand.NewPCG(7, 7)))
		bt := tinyBatch(rand.New(rand.NewPCG(6, 6)), m.Config.Vocab)
		p, err := m.ForwardTrain(bt, ad)
		if err != nil {
			t.Fatal(err)
		}
		held = p.HeldBytes()
		dl := engine.MustAlloc(b, engine.F32, len(bt.IDs))
		b.Fill(dl, -1)
		g, _ := m.NewGrads(engine.F32)
		ga, _ := m.NewAdapterGrads(ad, engine.F32)
		if err := p.Backward(dl, g, ga); err != nil {
			t.Fatal(err)
		}
		lp = engine.ToF32(b, p.LogP)
		p.Release()
		grads = map[string][]float32{}
		g.Each(func(name string, t *engine.Tensor) { grads[name] = engine.ToF32(b, t) })
		ga.Each(func(name string, t *engine.Tensor) { grads[name] = engine.ToF32(b, t) })
		return lp, grads, held
	}
	lp1, g1, held1 := run(false)
	lp2, g2, held2 := run(true)
	for i := range lp1 {
		if lp1[i] != lp2[i] {
			t.Fatalf("logp[%d]: %v stored, %v recomputed", i, lp1[i], lp2[i])
		}
	}
	for name, want := range g1 {
		for i, v := range g2[name] {
			if v != want[i] {
				t.Fatalf("%s[%d]: %v stored, %v recomputed", name, i, want[i], v)
			}
		}
	}
	if !(held2 < held1/2) {
		t.Errorf("activations held: %d bytes stored, %d recomputed; want less than half", held1, held2)
	}
}
