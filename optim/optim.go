// Package optim holds the optimizer side of training: AdamW over a set of
// parameters with f32 master weights for low-precision ones, global-norm
// gradient clipping, gradient accumulation, the skipping of non-finite
// steps, and learning-rate schedules. It is written against engine.Backend,
// so the same code steps parameters on every backend.
package optim

import (
	"fmt"
	"math"

	"github.com/turnwise/turnwise/engine"
)

// AdamWConfig are AdamW's hyper-parameters (the learning rate comes from a
// Schedule at each step).
type AdamWConfig struct {
	Beta1, Beta2 float32 // 0.9, 0.95 in the SWEET-RL reference
	Eps          float32 // 1e-8
	WeightDecay  float32 // decoupled, as torch.optim.AdamW
	MaxGradNorm  float32 // clip the global gradient norm to this; ≤ 0: no clipping
}

// Param is one optimized tensor with its gradient and state.
type Param struct {
	Name   string
	W, G   *engine.Tensor // the weights and their accumulated gradient
	M, V   *engine.Tensor // Adam's moments, f32
	Master *engine.Tensor // f32 copy of W when W is not f32, else nil
}

// AdamW steps a set of parameters. Gradients accumulate in each Param's G
// over any number of micro-batches; Step applies them, scaled by
// 1/micro-batches, and ZeroGrad clears them.
type AdamW struct {
	Config  AdamWConfig
	Params  []*Param
	Steps   int // steps applied
	Skipped int // steps skipped because the gradient norm was NaN or infinite
	b       engine.Backend
	acc     *engine.Tensor // [1] f32: the sum of squares of the gradients
}

// NewAdamW returns an optimizer with no parameters yet.
func NewAdamW(b engine.Backend, c AdamWConfig) (*AdamW, error) {
	acc, err := engine.Alloc(b, engine.F32, 1)
	if err != nil {
		return nil, err
	}
	return &AdamW{Config: c, b: b, acc: acc}, nil
}

// Add registers a parameter w with gradient buffer g (same element count),
// allocating its moments and, for a non-f32 w, an f32 master copy.
func (o *AdamW) Add(name string, w, g *engine.Tensor) error {
	if w.Numel() != g.Numel() {
		return fmt.Errorf("optim: %s: weights %v and gradient %v differ in size", name, w, g)
	}
	p := &Param{Name: name, W: w, G: g}
	var err error
	if p.M, err = engine.Alloc(o.b, engine.F32, w.Shape()...); err != nil {
		return fmt.Errorf("optim: %s: %w", name, err)
	}
	if p.V, err = engine.Alloc(o.b, engine.F32, w.Shape()...); err != nil {
		return fmt.Errorf("optim: %s: %w", name, err)
	}
	if w.DType() != engine.F32 {
		if p.Master, err = engine.Alloc(o.b, engine.F32, w.Shape()...); err != nil {
			return fmt.Errorf("optim: %s: %w", name, err)
		}
		o.b.Cast(p.Master, w)
	}
	o.Params = append(o.Params, p)
	return nil
}

// ZeroGrad clears every gradient.
func (o *AdamW) ZeroGrad() {
	for _, p := range o.Params {
		o.b.Fill(p.G, 0)
	}
}

// StepResult reports one call of Step.
type StepResult struct {
	GradNorm float32 // global norm of the (scaled) gradient, before clipping
	Clip     float32 // factor the gradient was multiplied by (1: no clipping)
	Skipped  bool    // the norm was NaN or infinite: nothing was applied
}

// Step applies one AdamW update at learning rate lr to every parameter, with
// the accumulated gradients multiplied by gradScale (1/micro-batches for a
// mean over micro-batches) and clipped to MaxGradNorm. A gradient whose norm
// is NaN or infinite is not applied: the step is counted in Skipped and the
// weights and moments stay as they were.
func (o *AdamW) Step(lr, gradScale float32) StepResult {
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

// Schedule gives the learning rate at each step.
type Schedule struct {
	Peak     float64 // the learning rate after warm-up
	Warmup   int     // steps of linear warm-up from Peak/Warmup to Peak
	Total    int     // steps in the run (cosine only)
	Cosine   bool    // after warm-up: cosine decay to MinRatio·Peak at Total; else constant
	MinRatio float64 // floor of the cosine, as a fraction of Peak (0.1 in the SWEET-RL reference)
}

// LR returns the learning rate of 0-based step s.
func (c Schedule) LR(s int) float64 {
	if s < c.Warmup {
		return c.Peak * float64(s+1) / float64(c.Warmup)
	}
	if !c.Cosine || c.Total <= c.Warmup {
		return c.Peak
	}
	progress := math.Min(1, float64(s-c.Warmup)/float64(c.Total-c.Warmup))
	lo := c.MinRatio * c.Peak
	return lo + (c.Peak-lo)*0.5*(1+math.Cos(math.Pi*progress))
}
