package optim

import (
	"fmt"
	"math"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/engine/enginetest"
	"github.com/turnwise/turnwise/engine/ref"
	"github.com/turnwise/turnwise/model/llama"
)

func newOpt(t testing.TB, b engine.Backend, c AdamWConfig, params map[string]*engine.Tensor) *AdamW {
	t.Helper()
	o, err := NewAdamW(b, c, params)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// cfg has a large eps: Adam's update m/sqrt(v) does not depend on the
// gradient's scale, so with a tiny eps a wrongly scaled gradient would go
// unnoticed; with eps comparable to the gradients it changes the update.
var cfg = AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 0.1, WeightDecay: 0.1}

// TestStepsMatchReference runs three steps with a gradient scale and
// compares the weights with the float64 AdamW, in f32 and through a bf16
// parameter's f32 master copy, with a second parameter beside it in the
// flat buffers.
func TestStepsMatchReference(t *testing.T) {
	for _, dt := range []engine.DType{engine.F32, engine.BF16} {
		b := cpu.New(cpu.Options{Threads: 1})
		w0 := []float32{0.5, -1.25, 2, 0.0625, -0.75}
		w := engine.FromF32(b, dt, w0, 5)
		other := engine.FromF32(b, engine.F16, []float32{1, 2, 3}, 3)
		o := newOpt(t, b, cfg, map[string]*engine.Tensor{"w": w, "other": other})
		g := o.Grad(w)
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
		p := o.Params[1] // "w" sorts after "other"
		got := engine.ToF32(b, w)
		if dt == engine.BF16 {
			got = engine.ToF32(b, p.Master)
		}
		for i := range got {
			if math.Abs(float64(got[i])-p64[i]) > 1e-6 {
				t.Errorf("%v: w[%d] = %.8f, reference %.8f", dt, i, got[i], p64[i])
			}
		}
		enginetest.Close(t, "m", engine.ToF32(b, p.M), m64, 1e-6)
	}
}

func TestClippingAndSkipping(t *testing.T) {
	c := cfg
	c.MaxGradNorm = 1
	b := cpu.New(cpu.Options{Threads: 1})
	w := engine.FromF32(b, engine.F32, []float32{1, 1}, 2)
	u := engine.FromF32(b, engine.BF16, []float32{1}, 1)
	o := newOpt(t, b, c, map[string]*engine.Tensor{"w": w, "u": u})
	g := o.Grad(w)
	engine.SetF32(b, g, []float32{3, 0})
	engine.SetF32(b, o.Grad(u), []float32{4}) // norm 5 over both
	r := o.Step(0.1, 1)
	if math.Abs(float64(r.GradNorm)-5) > 1e-6 || math.Abs(float64(r.Clip)-0.2) > 1e-6 {
		t.Errorf("norm %v clip %v, want 5 and 0.2", r.GradNorm, r.Clip)
	}
	before := append(engine.ToF32(b, w), engine.ToF32(b, u)...)
	engine.SetF32(b, g, []float32{float32(math.NaN()), 1})
	if r := o.Step(0.1, 1); !r.Skipped {
		t.Errorf("a NaN gradient was applied: %+v", r)
	}
	engine.SetF32(b, g, []float32{float32(math.Inf(1)), 1})
	if r := o.Step(0.1, 1); !r.Skipped {
		t.Errorf("an infinite gradient was applied: %+v", r)
	}
	after := append(engine.ToF32(b, w), engine.ToF32(b, u)...)
	if fmt.Sprint(after) != fmt.Sprint(before) || o.Skipped != 2 || o.Steps != 1 {
		t.Errorf("skipped steps changed the weights (%v → %v) or the counts (steps %d, skipped %d)", before, after, o.Steps, o.Skipped)
	}
	o.ZeroGrad()
	if v := append(engine.ToF32(b, g), engine.ToF32(b, o.Grad(u))...); v[0] != 0 || v[1] != 0 || v[2] != 0 {
		t.Errorf("ZeroGrad left %v", v)
	}
}

func TestNewAdamWRefuses(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	w := engine.MustAlloc(b, engine.F32, 2)
	for name, params := range map[string]map[string]*engine.Tensor{
		"no parameters": {},
		"twice":         {"a": w, "b": w},
		"integer":       {"ids": engine.MustAlloc(b, engine.I32, 3)},
	} {
		if _, err := NewAdamW(b, cfg, params); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestAccumulation checks that two micro-batches' summed gradients, scaled by
// 1/2, step exactly like their mean applied at once.
func TestAccumulation(t *testing.T) {
	run := func(grads [][]float32, scale float32) []float32 {
		b := cpu.New(cpu.Options{Threads: 1})
		w := engine.FromF32(b, engine.F32, []float32{0.2, -0.4, 0.8}, 3)
		o := newOpt(t, b, cfg, map[string]*engine.Tensor{"w": w})
		for _, gv := range grads {
			b.Add(o.Grad(w), o.Grad(w), engine.FromF32(b, engine.F32, gv, 3))
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

// perTensorZero and perTensorStep are the optimizer as it was before its
// state was flat: a Fill per gradient, a SumSquares per gradient for the
// norm, and an AdamW per parameter. They are the reference the flat path is
// checked and measured against.
func perTensorZero(o *AdamW) {
	for _, p := range o.Params {
		o.b.Fill(p.G, 0)
	}
}

func perTensorStep(o *AdamW, lr, gradScale float32) StepResult {
	grads := make([]*engine.Tensor, len(o.Params))
	for i, p := range o.Params {
		grads[i] = p.G
	}
	norm := engine.GlobalNorm(o.b, o.acc, grads) * gradScale
	clip := engine.ClipScale(norm, o.Config.MaxGradNorm)
	if math.IsNaN(float64(clip)) || math.IsNaN(float64(norm)) {
		o.Skipped++
		return StepResult{GradNorm: norm, Skipped: true}
	}
	o.Steps++
	hp := engine.AdamWParams{LR: lr, Beta1: o.Config.Beta1, Beta2: o.Config.Beta2, Eps: o.Config.Eps,
		WeightDecay: o.Config.WeightDecay, Step: o.Steps, GradScale: gradScale * clip}
	for _, p := range o.Params {
		o.b.AdamW(p.W, p.G, p.M, p.V, p.Master, hp)
	}
	return StepResult{GradNorm: norm, Clip: clip}
}

// mixedParams returns n parameters of assorted dtypes and odd shapes, with
// seeded values.
func mixedParams(b engine.Backend, n int, seed uint64) map[string]*engine.Tensor {
	r := enginetest.Rand(seed)
	ps := map[string]*engine.Tensor{}
	for i := range n {
		dt := []engine.DType{engine.F32, engine.BF16, engine.F16}[i%3]
		rows, cols := 1+i%5, 1+(7*i)%13
		ps[fmt.Sprintf("p%03d", i)] = engine.FromF32(b, dt, enginetest.Values(r, dt, rows*cols, 1), rows, cols)
	}
	return ps
}

// TestFlatMatchesPerTensor: without clipping the flat step makes the same
// bits as the per-tensor one (the norm then plays no part); with clipping,
// the norm is one f64 sum instead of f32 partial sums per tensor, so the
// results agree to f32 rounding.
func TestFlatMatchesPerTensor(t *testing.T) {
	for _, maxNorm := range []float32{0, 0.5} {
		t.Run(fmt.Sprintf("clip=%g", maxNorm), func(t *testing.T) {
			c := cfg
			c.MaxGradNorm = maxNorm
			run := func(step func(*AdamW) StepResult) ([]float32, []StepResult) {
				b := cpu.New(cpu.Options{Threads: 2})
				o := newOpt(t, b, c, mixedParams(b, 40, 9))
				r := enginetest.Rand(10)
				var res []StepResult
				for range 3 {
					o.ZeroGrad()
					for _, p := range o.Params {
						engine.SetF32(b, p.G, enginetest.Values(r, engine.F32, p.G.Numel(), 1))
					}
					res = append(res, step(o))
				}
				var out []float32
				for _, p := range o.Params {
					out = append(append(out, engine.ToF32(b, p.W)...), engine.ToF32(b, p.V)...)
				}
				return out, res
			}
			flat, fr := run(func(o *AdamW) StepResult { return o.Step(0.01, 0.5) })
			each, er := run(func(o *AdamW) StepResult { return perTensorStep(o, 0.01, 0.5) })
			if maxNorm > 0 && !(fr[0].Clip < 1) {
				t.Fatalf("the case does not clip: %+v", fr[0])
			}
			for i := range fr {
				if math.Abs(float64(fr[i].GradNorm-er[i].GradNorm)) > 1e-6*float64(er[i].GradNorm) {
					t.Errorf("step %d: norm %v flat, %v per tensor", i, fr[i].GradNorm, er[i].GradNorm)
				}
			}
			if maxNorm == 0 {
				for i := range flat {
					if math.Float32bits(flat[i]) != math.Float32bits(each[i]) {
						t.Fatalf("value %d: %v flat, %v per tensor", i, flat[i], each[i])
					}
				}
			} else {
				enginetest.Close(t, "weights and v", flat, enginetest.F64(each), 1e-6)
			}
		})
	}
}

// counting counts the ops an optimizer may run on its backend (every one it
// calls today, and the other element-wise ones) and the host transfers.
type counting struct {
	engine.Backend
	ops, transfers int
}

func (c *counting) Fill(x *engine.Tensor, v float32)      { c.ops++; c.Backend.Fill(x, v) }
func (c *counting) Copy(dst, src *engine.Tensor)          { c.ops++; c.Backend.Copy(dst, src) }
func (c *counting) Cast(dst, src *engine.Tensor)          { c.ops++; c.Backend.Cast(dst, src) }
func (c *counting) Add(out, a, b *engine.Tensor)          { c.ops++; c.Backend.Add(out, a, b) }
func (c *counting) SumSquares(out, x *engine.Tensor)      { c.ops++; c.Backend.SumSquares(out, x) }
func (c *counting) Upload(dst *engine.Tensor, b []byte)   { c.transfers++; c.Backend.Upload(dst, b) }
func (c *counting) Download(dst []byte, s *engine.Tensor) { c.transfers++; c.Backend.Download(dst, s) }
func (c *counting) AdamW(param, grad, m, v, master *engine.Tensor, p engine.AdamWParams) {
	c.ops++
	c.Backend.AdamW(param, grad, m, v, master, p)
}
func (c *counting) AdamWMulti(t *engine.ParamTable, grad, m, v, master *engine.Tensor, p engine.AdamWParams) {
	c.ops++
	c.Backend.AdamWMulti(t, grad, m, v, master, p)
}

// loraTensors is the number of adapter tensors of Llama-3.1-8B with LoRA on
// all seven projections: an A and a B per projection and layer.
const loraTensors = 32 * 7 * 2

// TestOpsPerStepIndependentOfParams: ZeroGrad and Step run the same four
// ops (a zeroing, the norm's zeroing and sum, one AdamWMulti) and one
// download (the norm) for 3 parameters as for as many as Llama-3.1-8B's LoRA
// adapter has; the per-tensor path they replace ran three ops per
// parameter.
func TestOpsPerStepIndependentOfParams(t *testing.T) {
	count := func(n int, zero func(*AdamW), step func(*AdamW) StepResult) (ops, transfers int) {
		c := &counting{Backend: cpu.New(cpu.Options{Threads: 1})}
		o := newOpt(t, c, AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, MaxGradNorm: 1}, mixedParams(c, n, 3))
		for _, p := range o.Params {
			engine.SetF32(c, p.G, enginetest.Values(enginetest.Rand(4), engine.F32, p.G.Numel(), 1))
		}
		c.ops, c.transfers = 0, 0
		zero(o)
		if r := step(o); r.Skipped {
			t.Fatalf("%d parameters: the step was skipped", n)
		}
		return c.ops, c.transfers
	}
	flat := func(o *AdamW) StepResult { return o.Step(1e-3, 1) }
	few, fewT := count(3, (*AdamW).ZeroGrad, flat)
	many, manyT := count(loraTensors, (*AdamW).ZeroGrad, flat)
	if few != 4 || many != 4 || fewT != 1 || manyT != 1 {
		t.Errorf("flat: %d ops and %d transfers for 3 parameters, %d and %d for %d; want 4 and 1", few, fewT, many, manyT, loraTensors)
	}
	old, _ := count(loraTensors, perTensorZero, func(o *AdamW) StepResult { return perTensorStep(o, 1e-3, 1) })
	if want := 3*loraTensors + 1; old != want {
		t.Errorf("per tensor: %d ops for %d parameters, want %d", old, loraTensors, want)
	}
	t.Logf("ops per ZeroGrad + Step for %d parameters: %d flat, %d per tensor", loraTensors, many, old)
}

// loraParams allocates the LoRA adapter of preset (rank r on all seven
// projections) in bf16, A and B of every projection of every layer.
func loraParams(b engine.Backend, preset string, r int) (map[string]*engine.Tensor, error) {
	c, err := llama.Preset(preset)
	if err != nil {
		return nil, err
	}
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	dims := map[string][2]int{ // out, in
		"q": {q, c.Dim}, "k": {kv, c.Dim}, "v": {kv, c.Dim}, "o": {c.Dim, q},
		"gate": {c.FFN, c.Dim}, "up": {c.FFN, c.Dim}, "down": {c.Dim, c.FFN},
	}
	ps := map[string]*engine.Tensor{}
	total := 0
	for l := range c.Layers {
		for _, p := range llama.AllProjections {
			out, in := dims[p][0], dims[p][1]
			if ps[fmt.Sprintf("%d.%s.A", l, p)], err = engine.Alloc(b, engine.BF16, r, in); err != nil {
				return nil, err
			}
			if ps[fmt.Sprintf("%d.%s.B", l, p)], err = engine.Alloc(b, engine.BF16, out, r); err != nil {
				return nil, err
			}
			total += r * (in + out)
		}
	}
	want, err := c.LoRAParams(llama.LoRAConfig{Rank: r, Targets: llama.AllProjections})
	if err != nil || int64(total) != want {
		return nil, fmt.Errorf("%s LoRA r=%d: %d parameters here, %d by the model (%v)", preset, r, total, want, err)
	}
	return ps, nil
}

// BenchmarkStep times ZeroGrad + Step over Llama-3.1-8B's LoRA r=16 adapter
// (448 bf16 tensors, 42 M parameters) on the CPU backend: the flat path and
// the per-tensor one it replaced, on the same optimizer state, interleaved
// (each iteration runs both, in alternating order) so that both see the
// same machine load. It reports the median wall-clock and CPU time of each
// per step; on a machine shared with other work the CPU time is the steadier
// measure of the work done.
func BenchmarkStep(b *testing.B) {
	be := cpu.New(cpu.Options{})
	ps, err := loraParams(be, "llama-3.1-8b", 16)
	if err != nil {
		b.Fatal(err)
	}
	o := newOpt(b, be, AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, MaxGradNorm: 1}, ps)
	o.ZeroGrad() // touch every page of the state before either path is timed
	o.Step(1e-4, 1)
	paths := [2]func(){
		func() { o.ZeroGrad(); o.Step(1e-4, 1) },
		func() { perTensorZero(o); perTensorStep(o, 1e-4, 1) },
	}
	var wall, cpu [2][]float64 // ns per step: flat, per tensor
	for i := 0; b.Loop(); i++ {
		for k := range 2 {
			p := (i + k) % 2
			start, startCPU := time.Now(), cpuTime()
			paths[p]()
			wall[p] = append(wall[p], float64(time.Since(start).Nanoseconds()))
			cpu[p] = append(cpu[p], float64(cpuTime()-startCPU))
		}
	}
	b.ReportMetric(median(wall[0]), "flat-ns/step")
	b.ReportMetric(median(wall[1]), "per-tensor-ns/step")
	b.ReportMetric(median(cpu[0]), "flat-cpu-ns/step")
	b.ReportMetric(median(cpu[1]), "per-tensor-cpu-ns/step")
}

// cpuTime returns the CPU time the process has used (user + system, all
// threads), in ns: unlike the wall clock, it does not count the time other
// processes on a busy machine hold the cores.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}
