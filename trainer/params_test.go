package trainer

import (
	"slices"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/optim"
)

// TestParams checks what NewParams registers — the adapter's tensors or
// every weight, and the extras — and that the model's gradient buffers are
// the optimizer's.
func TestParams(t *testing.T) {
	for _, lora := range []bool{false, true} {
		m, ad, _ := setup(t, lora)
		b := m.Backend()
		extra, err := engine.Alloc(b, engine.F32, 3)
		if err != nil {
			t.Fatal(err)
		}
		p, err := NewParams(m, ad, optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}, map[string]*engine.Tensor{"head.extra": extra})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]*engine.Tensor{"head.extra": extra}
		if lora {
			ad.Each(func(n string, w *engine.Tensor) { want[n] = w })
		} else {
			m.Weights.Each(func(n string, w *engine.Tensor) { want[n] = w })
		}
		if len(p.Tensors) != len(want) {
			t.Errorf("lora=%v: %d parameters registered, want %d", lora, len(p.Tensors), len(want))
		}
		for n, w := range want {
			if p.Tensors[n] != w {
				t.Errorf("lora=%v: parameter %s not registered", lora, n)
			}
		}
		if (p.Grads == nil) != lora || (p.AdapterGrads == nil) == lora {
			t.Fatalf("lora=%v: base gradients %v, adapter gradients %v", lora, p.Grads != nil, p.AdapterGrads != nil)
		}
		// A gradient written through the model's view is the optimizer's.
		var name string
		var g *engine.Tensor
		if lora {
			p.AdapterGrads.Each(func(n string, t *engine.Tensor) { name, g = n, t })
		} else {
			name, g = "model.norm.weight", p.Grads.FinalNorm
		}
		vals := make([]float32, g.Numel())
		vals[0] = 7
		engine.SetF32(b, g, vals)
		if got := engine.ToF32(b, p.Opt.Grad(p.Tensors[name]))[0]; got != 7 {
			t.Errorf("lora=%v: %s's gradient through the model is not the optimizer's (read %g)", lora, name, got)
		}
		p.Free()
	}
}

// TestLossGrad checks that the loss gradient reaches the device whole and
// that its buffer follows the batch size.
func TestLossGrad(t *testing.T) {
	m, ad, _ := setup(t, true)
	p, err := NewParams(m, ad, optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Free()
	for _, want := range [][]float32{{1, -2, 3}, {4, 5, 6}, {0.5, 0, -0.25, 8, 9}} {
		d, err := p.LossGrad(want)
		if err != nil {
			t.Fatal(err)
		}
		if got := engine.ToF32(m.Backend(), d); !slices.Equal(got, want) {
			t.Errorf("uploaded %v, read back %v", want, got)
		}
	}
}
