package llama_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/model/llama"
)

func logProbs(t *testing.T, m *llama.Model, bt llama.Batch, ad *llama.Adapter) []float32 {
	t.Helper()
	p, err := m.ForwardTrain(bt, ad)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	return engine.ToF32(m.Backend(), p.LogP)
}

// randomizeB gives every B a random value, so the adapter changes outputs.
func randomizeB(b engine.Backend, ad *llama.Adapter, r *rand.Rand) {
	ad.Each(func(name string, t *engine.Tensor) {
		if len(name) > 13 && name[len(name)-13:] == "lora_B.weight" {
			v := make([]float32, t.Numel())
			for i := range v {
				v[i] = float32(r.NormFloat64() * 0.3)
			}
			engine.SetF32(b, t, v)
		}
	})
}

func TestFreshAdapterChangesNothing(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	m, err := llama.NewRandom(b, tinyConfig(false), engine.F32, 0.5, 1)
	if err != nil {
		t.Fatal(err)
	}
	ad, err := m.NewAdapter(llama.LoRAConfig{Rank: 4, Alpha: 8, Targets: llama.AllProjections}, 2)
	if err != nil {
		t.Fatal(err)
	}
	bt := tinyBatch(rand.New(rand.NewPCG(1, 2)), m.Config.Vocab)
	base, with := logProbs(t, m, bt, nil), logProbs(t, m, bt, ad)
	for i := range base {
		if base[i] != with[i] {
			t.Fatalf("token %d: log-prob %v without the adapter, %v with a fresh one", i, base[i], with[i])
		}
	}
	randomizeB(b, ad, rand.New(rand.NewPCG(3, 3)))
	changed := logProbs(t, m, bt, ad)
	same := true
	for i := range base {
		same = same && base[i] == changed[i]
	}
	if same {
		t.Error("a trained adapter (random B) changes no output")
	}
}

// TestLoRAGradients checks adapter gradients against finite differences
// with a frozen base: the base gets no gradient buffers at all.
func TestLoRAGradients(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	m, err := llama.NewRandom(b, tinyConfig(true), engine.F32, 0.5, 5)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(8, 9))
	ad, err := m.NewAdapter(llama.LoRAConfig{Rank: 3, Alpha: 6, Targets: []string{"q", "v", "o", "down", "gate"}}, 4)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(b, ad, r)
	bt := tinyBatch(r, m.Config.Vocab)
	baseBefore := map[string][]float32{}
	m.Weights.Each(func(name string, w *engine.Tensor) { baseBefore[name] = engine.ToF32(b, w) })

	_, ga := adapterBackward(t, m, ad, bt)
	checkFD(t, b, r, ad.Each, ga.Each, func() float64 { return loss(t, m, bt, ad) })
	m.Weights.Each(func(name string, w *engine.Tensor) {
		after := engine.ToF32(b, w)
		for i := range after {
			if after[i] != baseBefore[name][i] {
				t.Fatalf("base weight %s changed", name)
			}
		}
	})
}

func TestPEFTRoundTripAndMerge(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	for _, dt := range []engine.DType{engine.F32, engine.BF16} {
		m, err := llama.NewRandom(b, tinyConfig(false), dt, 0.5, 6)
		if err != nil {
			t.Fatal(err)
		}
		ad, err := m.NewAdapter(llama.LoRAConfig{Rank: 4, Alpha: 16, Targets: []string{"q", "k", "up"}}, 7)
		if err != nil {
			t.Fatal(err)
		}
		randomizeB(b, ad, rand.New(rand.NewPCG(1, 1)))
		dir := t.TempDir()
		if err := m.SavePEFT(ad, dir); err != nil {
			t.Fatal(err)
		}
		back, err := m.LoadPEFT(dir)
		if err != nil {
			t.Fatal(err)
		}
		if back.Config.Rank != 4 || back.Config.Alpha != 16 || len(back.Config.Targets) != 3 {
			t.Errorf("%v: loaded config %+v", dt, back.Config)
		}
		orig := map[string][]float32{}
		ad.Each(func(name string, t *engine.Tensor) { orig[name] = engine.ToF32(b, t) })
		back.Each(func(name string, tt *engine.Tensor) {
			got := engine.ToF32(b, tt)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(orig[name][i]) {
					t.Fatalf("%v: %s[%d] = %v after the round trip, want %v", dt, name, i, got[i], orig[name][i])
				}
			}
		})
		if dt != engine.F32 {
			continue
		}
		bt := tinyBatch(rand.New(rand.NewPCG(2, 2)), m.Config.Vocab)
		with := logProbs(t, m, bt, ad)
		m.Merge(ad)
		merged := logProbs(t, m, bt, nil)
		for i := range with {
			if math.Abs(float64(with[i]-merged[i])) > 1e-4 {
				t.Fatalf("token %d: %v with the adapter, %v merged", i, with[i], merged[i])
			}
		}
	}
	b2 := cpu.New(cpu.Options{Threads: 1})
	m, _ := llama.NewRandom(b2, tinyConfig(false), engine.F32, 0.5, 6)
	if _, err := m.LoadPEFT(t.TempDir()); err == nil {
		t.Error("LoadPEFT of an empty directory succeeded")
	}
	if _, err := m.NewAdapter(llama.LoRAConfig{Rank: 0, Targets: []string{"q"}}, 1); err == nil {
		t.Error("rank 0 accepted")
	}
}

// TestBackwardHidden checks the gradient of a loss of the final hidden
// states, L = Σ c ⊙ Hidden() for fixed c, against finite differences, for
// the base weights and an adapter.
func TestBackwardHidden(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	m, err := llama.NewRandom(b, tinyConfig(false), engine.F32, 0.5, 6)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(2, 3))
	ad, err := m.NewAdapter(llama.LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"k", "up"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(b, ad, r)
	bt := tinyBatch(r, m.Config.Vocab)
	n, d := len(bt.IDs), m.Config.Dim
	c := make([]float32, n*d)
	for i := range c {
		c[i] = float32(r.NormFloat64())
	}
	lossOf := func() float64 {
		p, err := m.ForwardTrain(bt, ad)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release()
		var l float64
		for i, h := range engine.ToF32(b, p.Hidden()) {
			l += float64(c[i]) * float64(h)
		}
		return l
	}
	p, err := m.ForwardTrain(bt, ad)
	if err != nil {
		t.Fatal(err)
	}
	dh := engine.MustAlloc(b, engine.F32, n, d)
	engine.SetF32(b, dh, c)
	g, _ := m.NewGrads(engine.F32)
	ga, _ := m.NewAdapterGrads(ad, engine.F32)
	if err := p.BackwardHidden(dh, g, ga); err != nil {
		t.Fatal(err)
	}
	p.Release()
	if h := engine.ToF32(b, g.Head); slices.ContainsFunc(h, func(v float32) bool { return v != 0 }) {
		t.Error("the classifier got a gradient from a loss of the hidden states")
	}
	checkFD(t, b, r, ad.Each, ga.Each, lossOf)
	checkFD(t, b, r, func(fn func(string, *engine.Tensor)) {
		m.Weights.Each(func(name string, w *engine.Tensor) {
			if name != "lm_head.weight" {
				fn(name, w)
			}
		})
	}, g.Each, lossOf)
}

// TestCheckLoRARank checks that a fresh adapter's rank is bounded by the
// smaller dimension of every projection it adapts.
func TestCheckLoRARank(t *testing.T) {
	c := tinyConfig(false) // q, o [16, 16]; k, v [8, 16]; gate, up [24, 16]; down [16, 24]
	tests := []struct {
		rank    int
		targets []string
		want    string // "" : accepted
	}{
		{8, llama.AllProjections, ""},
		{9, llama.AllProjections, "LoRA rank 9 exceeds projection k's smaller dimension (8×16)"},
		{16, []string{"q", "o", "gate", "up", "down"}, ""},
		{17, []string{"q"}, "want a rank of 1 to 16"},
		{100000, llama.AllProjections, "want a rank of 1 to 8"},
		{0, llama.AllProjections, "LoRA rank 0: must be positive"},
	}
	b := cpu.New(cpu.Options{Threads: 1})
	m, err := llama.NewRandom(b, c, engine.F32, 0.5, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		lc := llama.LoRAConfig{Rank: tc.rank, Alpha: 8, Targets: tc.targets}
		err := c.CheckLoRARank(lc)
		_, errNew := m.NewAdapter(lc, 1)
		for _, e := range []error{err, errNew} {
			switch {
			case tc.want == "" && e != nil:
				t.Errorf("rank %d on %v: %v, want it accepted", tc.rank, tc.targets, e)
			case tc.want != "" && (e == nil || !strings.Contains(e.Error(), tc.want)):
				t.Errorf("rank %d on %v: error %v, want one containing %q", tc.rank, tc.targets, e, tc.want)
			}
		}
	}
}

// adapterBackward runs a training pass of bt with adapter ad and its
// backward with every token's log-probability gradient −1 (the gradient
// of −Σ log p), and returns the log-probabilities and the adapter's
// gradients.
func adapterBackward(t *testing.T, m *llama.Model, ad *llama.Adapter, bt llama.Batch) ([]float32, *llama.Adapter) {
	t.Helper()
	b := m.Backend()
	p, err := m.ForwardTrain(bt, ad)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	dl := engine.MustAlloc(b, engine.F32, len(bt.IDs))
	b.Fill(dl, -1)
	ga, err := m.NewAdapterGrads(ad, engine.F32)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Backward(dl, nil, ga); err != nil {
		t.Fatal(err)
	}
	return engine.ToF32(b, p.LogP), ga
}
