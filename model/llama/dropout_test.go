package llama_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/model/llama"
)

// trainPass runs bt forward and backward with adapter ad (dlogp −1 at every
// token) and returns the log-probabilities and the adapter's gradients.
func trainPass(t *testing.T, m *llama.Model, ad *llama.Adapter, bt llama.Batch) ([]float32, map[string][]float32) {
	t.Helper()
	logp, ga := adapterBackward(t, m, ad, bt)
	grads := map[string][]float32{}
	ga.Each(func(name string, g *engine.Tensor) { grads[name] = engine.ToF32(m.Backend(), g) })
	return logp, grads
}

// sameBits reports whether two runs' values are equal bit for bit.
func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestLoRADropout checks an adapter's dropout in training passes: with P 0
// a batch's dropout seed changes no bit of the log-probabilities or the
// gradients; with P > 0 a training pass drops (it differs from the pass
// without a seed, which evaluation makes, and with another seed), the
// pass without a seed is exactly the adapter without dropout, and the
// adapter's gradients match finite differences of the loss with the mask
// held fixed (the backward derives the forward's mask again) — through
// grouped projections (q, k, v; gate, up) and the gradient each dropout
// passes back to its input.
func TestLoRADropout(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	m, err := llama.NewRandom(b, tinyConfig(true), engine.F32, 0.5, 5)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(8, 10))
	lc := llama.LoRAConfig{Rank: 3, Alpha: 6, Targets: llama.AllProjections}
	ad, err := m.NewAdapter(lc, 4)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(b, ad, r)
	bt := tinyBatch(r, m.Config.Vocab)
	seeded := bt
	seeded.DropoutSeed = 77

	plainLogP, plainGrads := trainPass(t, m, ad, bt)
	logP, grads := trainPass(t, m, ad, seeded)
	if !sameBits(logP, plainLogP) {
		t.Error("P = 0: a dropout seed changed the log-probabilities")
	}
	for name, g := range grads {
		if !sameBits(g, plainGrads[name]) {
			t.Errorf("P = 0: a dropout seed changed the gradient of %s", name)
		}
	}

	ad.Config.Dropout = 0.3
	evalLogP, _ := trainPass(t, m, ad, bt)
	if !sameBits(evalLogP, plainLogP) {
		t.Error("P = 0.3 without a dropout seed (evaluation) differs from the adapter without dropout")
	}
	dropLogP, _ := trainPass(t, m, ad, seeded)
	other := bt
	other.DropoutSeed = 78
	otherLogP, _ := trainPass(t, m, ad, other)
	if sameBits(dropLogP, plainLogP) || sameBits(dropLogP, otherLogP) {
		t.Error("P = 0.3: a training pass equals the pass without dropout or the pass of another seed")
	}
	again, _ := trainPass(t, m, ad, seeded)
	if !sameBits(again, dropLogP) {
		t.Error("P = 0.3: two passes with one seed differ")
	}

	_, ga := adapterBackward(t, m, ad, seeded)
	checkFD(t, b, r, ad.Each, ga.Each, func() float64 { return loss(t, m, seeded, ad) })
}
