package optim

import (
	"math"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/engine/ref"
)

func newOpt(t *testing.T, c AdamWConfig) (*cpu.Backend, *AdamW) {
	b := cpu.New(cpu.Options{Threads: 1})
	o, err := NewAdamW(b, c)
	if err != nil {
		t.Fatal(err)
	}
	return b, o
}

// cfg has a large eps: Adam's update m/sqrt(v) does not depend on the
// gradient's scale, so with a tiny eps a wrongly scaled gradient would go
// unnoticed; with eps comparable to the gradients it changes the update.
var cfg = AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 0.1, WeightDecay: 0.1}

// TestStepsMatchReference runs three steps with a gradient scale and
// compares the weights with the float64 AdamW, in f32 and through a bf16
// parameter's f32 master copy.
func TestStepsMatchReference(t *testing.T) {
	for _, dt := range []engine.DType{engine.F32, engine.BF16} {
		b, o := newOpt(t, cfg)
		w0 := []float32{0.5, -1.25, 2, 0.0625, -0.75}
		w := engine.FromF32(b, dt, w0, 5)
		g := engine.MustAlloc(b, engine.F32, 5)
		if err := o.Add("w", w, g); err != nil {
			t.Fatal(err)
		}
		p64 := make([]float64, 5)
		for i, v := range engine.ToF32(b, w) {
			p64[i] = float64(v)
		}
		m64, v64 := make([]float64, 5), make([]float64, 5)
		for step := 1; step <= 3; step++ {
			gv := []float32{0.3 * float32(step), -0.2, 1.5, -0.01, 0.7}
			engine.SetF32(b, g, gv)
			r := o.Step(0.01, 0.5)
			if r.Skipped || r.Clip != 1 {
				t.Fatalf("step %d: %+v", step, r)
			}
			g64 := make([]float64, 5)
			for i, v := range gv {
				g64[i] = float64(v)
			}
			ref.AdamW(p64, g64, m64, v64, 0.01, 0.9, 0.95, 0.1, 0.1, 0.5, step)
		}
		got := engine.ToF32(b, w)
		if dt == engine.BF16 {
			got = engine.ToF32(b, o.Params[0].Master)
		}
		for i := range got {
			if math.Abs(float64(got[i])-p64[i]) > 1e-6 {
				t.Errorf("%v: w[%d] = %.8f, reference %.8f", dt, i, got[i], p64[i])
			}
		}
	}
}

func TestClippingAndSkipping(t *testing.T) {
	c := cfg
	c.MaxGradNorm = 1
	b, o := newOpt(t, c)
	w := engine.FromF32(b, engine.F32, []float32{1, 1}, 2)
	g := engine.MustAlloc(b, engine.F32, 2)
	if err := o.Add("w", w, g); err != nil {
		t.Fatal(err)
	}
	engine.SetF32(b, g, []float32{3, 4}) // norm 5
	r := o.Step(0.1, 1)
	if math.Abs(float64(r.GradNorm)-5) > 1e-6 || math.Abs(float64(r.Clip)-0.2) > 1e-6 {
		t.Errorf("norm %v clip %v, want 5 and 0.2", r.GradNorm, r.Clip)
	}
	before := engine.ToF32(b, w)
	engine.SetF32(b, g, []float32{float32(math.NaN()), 1})
	if r := o.Step(0.1, 1); !r.Skipped {
		t.Errorf("a NaN gradient was applied: %+v", r)
	}
	engine.SetF32(b, g, []float32{float32(math.Inf(1)), 1})
	if r := o.Step(0.1, 1); !r.Skipped {
		t.Errorf("an infinite gradient was applied: %+v", r)
	}
	after := engine.ToF32(b, w)
	if after[0] != before[0] || after[1] != before[1] || o.Skipped != 2 || o.Steps != 1 {
		t.Errorf("skipped steps changed the weights (%v → %v) or the counts (steps %d, skipped %d)", before, after, o.Steps, o.Skipped)
	}
	o.ZeroGrad()
	if v := engine.ToF32(b, g); v[0] != 0 || v[1] != 0 {
		t.Errorf("ZeroGrad left %v", v)
	}
	if err := o.Add("bad", w, engine.MustAlloc(b, engine.F32, 3)); err == nil {
		t.Error("a gradient of the wrong size was accepted")
	}
}

// TestAccumulation checks that two micro-batches' summed gradients, scaled by
// 1/2, step exactly like their mean applied at once.
func TestAccumulation(t *testing.T) {
	run := func(grads [][]float32, scale float32) []float32 {
		b, o := newOpt(t, cfg)
		w := engine.FromF32(b, engine.F32, []float32{0.2, -0.4, 0.8}, 3)
		g := engine.MustAlloc(b, engine.F32, 3)
		o.Add("w", w, g)
		for _, gv := range grads {
			b.AXPY(g, 1, engine.FromF32(b, engine.F32, gv, 3))
		}
		o.Step(0.05, scale)
		return engine.ToF32(b, w)
	}
	a := run([][]float32{{1, 2, -1}, {3, -2, 0}}, 0.5)
	m := run([][]float32{{2, 0, -0.5}}, 1)
	for i := range a {
		if math.Abs(float64(a[i]-m[i])) > 1e-7 {
			t.Errorf("w[%d]: %v accumulated, %v at once", i, a[i], m[i])
		}
	}
}

func TestSchedule(t *testing.T) {
	s := Schedule{Peak: 2e-7, Warmup: 3, Total: 103, Cosine: true, MinRatio: 0.1}
	cases := []struct {
		step int
		want float64
	}{
		{0, 2e-7 / 3}, {2, 2e-7}, {3, 2e-7}, {53, 0.1*2e-7 + 0.9*2e-7*0.5}, {103, 2e-8}, {500, 2e-8},
	}
	for _, c := range cases {
		if got := s.LR(c.step); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("LR(%d) = %g, want %g", c.step, got, c.want)
		}
	}
	if got := (Schedule{Peak: 1e-3}).LR(7); got != 1e-3 {
		t.Errorf("constant schedule: %g", got)
	}
}
