package llama_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/model/llama"
)

// flatViews returns a function that gives each tensor it is called with an
// f32 view of the same shape in one flat buffer (laid out in call order),
// and counts the calls.
func flatViews(b engine.Backend, n int, calls *int) func(*engine.Tensor) *engine.Tensor {
	flat := engine.MustAlloc(b, engine.F32, n)
	off := 0
	return func(w *engine.Tensor) *engine.Tensor {
		*calls++
		v := engine.NewTensor(flat.Buffer(), 4*off, engine.F32, w.Shape()...)
		off += w.Numel()
		return v
	}
}

// TestMapGradsAreBackwardsBuffers: gradients accumulated into mapped views
// of one flat buffer are the same bits as into separately allocated
// buffers, for the base weights (tied and untied classifier) and for an
// adapter; a tied classifier's gradient stays the embedding's.
func TestMapGradsAreBackwardsBuffers(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	for _, tied := range []bool{false, true} {
		t.Run(fmt.Sprintf("tied=%v", tied), func(t *testing.T) {
			m, err := llama.NewRandom(b, tinyConfig(tied), engine.F32, 0.5, 5)
			if err != nil {
				t.Fatal(err)
			}
			ad, err := m.NewAdapter(llama.LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"q", "down"}}, 4)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(8, 9))
			randomizeB(b, ad, r)
			bt := tinyBatch(r, m.Config.Vocab)
			backward := func(g *llama.Weights, ga *llama.Adapter) {
				p, err := m.ForwardTrain(bt, ad)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Release()
				dl := engine.MustAlloc(b, engine.F32, len(bt.IDs))
				b.Fill(dl, -1)
				if err := p.Backward(dl, g, ga); err != nil {
					t.Fatal(err)
				}
			}
			g1, err := m.NewGrads(engine.F32)
			if err != nil {
				t.Fatal(err)
			}
			ga1, err := m.NewAdapterGrads(ad, engine.F32)
			if err != nil {
				t.Fatal(err)
			}
			backward(g1, ga1)

			var n, calls, want int
			m.Weights.Each(func(_ string, w *engine.Tensor) { n += w.Numel(); want++ })
			g2 := m.Weights.Map(flatViews(b, n, &calls))
			if calls != want {
				t.Errorf("Weights.Map called fn %d times for %d distinct tensors", calls, want)
			}
			if tied != (g2.Head == g2.Embed) {
				t.Errorf("tied %v, but the mapped Head and Embed are the same tensor: %v", tied, g2.Head == g2.Embed)
			}
			n, calls, want = 0, 0, 0
			ad.Each(func(_ string, w *engine.Tensor) { n += w.Numel(); want++ })
			ga2 := ad.Map(flatViews(b, n, &calls))
			if calls != want {
				t.Errorf("Adapter.Map called fn %d times for %d tensors", calls, want)
			}
			backward(g2, ga2)

			same := func(what string, each1, each2 func(func(string, *engine.Tensor))) {
				got := map[string][]byte{}
				each2(func(name string, x *engine.Tensor) { got[name] = raw(b, x) })
				nonzero := false
				each1(func(name string, x *engine.Tensor) {
					r := raw(b, x)
					if !bytes.Equal(r, got[name]) {
						t.Errorf("%s %s: the mapped gradient differs", what, name)
					}
					nonzero = nonzero || slices.ContainsFunc(r, func(c byte) bool { return c != 0 })
				})
				if !nonzero {
					t.Errorf("%s: every gradient is zero; the comparison shows nothing", what)
				}
			}
			same("base", g1.Each, g2.Each)
			same("adapter", ga1.Each, ga2.Each)
		})
	}
}

func raw(b engine.Backend, x *engine.Tensor) []byte {
	out := make([]byte, x.Bytes())
	b.Download(out, x)
	return out
}
