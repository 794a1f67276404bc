// Package optim holds the optimizer side of training: AdamW over a set of
// parameters with f32 master weights for low-precision ones, global-norm
// gradient clipping, gradient accumulation, the skipping of non-finite
// steps, and learning-rate schedules. It is written against engine.Backend,
// so the same code steps parameters on every backend, and its state lives
// in flat buffers, so that a step is a handful of ops (on a GPU, of kernel
// launches) whatever the number of parameters.
package optim

import (
	"fmt"
	"maps"
	"math"
	"slices"

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

// align is the multiple of elements every parameter's offsets in the flat
// buffers are rounded up to: 256 bytes of f32, so that a GPU reads each
// parameter's gradient, moments and master with aligned vector loads.
const align = 64

// Param is one optimized tensor with its gradient and state. The weights
// stay where their owner allocated them; the rest are views of the
// optimizer's flat buffers.
type Param struct {
	Name   string
	W      *engine.Tensor // the weights, float
	G      *engine.Tensor // [W's shape] f32: the accumulated gradient
	M, V   *engine.Tensor // [W's shape] f32: Adam's moments; nil when sharded (NewShardedAdamW)
	Master *engine.Tensor // [W's shape] f32 copy of W when W is not f32, else nil; nil when sharded
}

// AdamW steps a fixed set of parameters. It owns their gradients, moments
// and master weights, each kind laid end to end in one flat f32 buffer, so
// that a step costs the same few ops however many parameters there are: one
// zeroing of the gradients (ZeroGrad), one global norm over them, and one
// multi-tensor AdamW update (Step). Gradients accumulate in each Param's G
// — which the model is handed as its gradient buffer (Grad) — over any
// number of micro-batches; Step applies them, scaled by 1/micro-batches.
type AdamW struct {
	Config  AdamWConfig
	Params  []*Param // in name order
	Steps   int      // steps applied
	Skipped int      // steps skipped because the gradient norm was NaN or infinite
	b       engine.Backend
	grad    *engine.Tensor // [n] f32: every parameter's gradient, end to end (gaps of zeros between)
	m, v    *engine.Tensor // [n] f32: the moments, laid out as grad
	master  *engine.Tensor // [nm] f32: the masters of the non-f32 parameters, end to end; nil if none
	table   *engine.ParamTable
	acc     *engine.Tensor // [1] f32: the sum of squares of the gradients
	byW     map[*engine.Tensor]*Param

	// The sharded mode (NewShardedAdamW); comm is nil otherwise.
	comm     engine.Communicator
	shardOff int                // this rank's first element of the flat gradient
	shardLen int                // elements of a shard, S: m, v and master are [S]
	gshard   *engine.Tensor     // [S] f32: the summed gradient of the shard
	spans    []engine.AdamWSpan // every parameter's span in the flat gradient
	owned    []*engine.Tensor   // parameters the optimizer allocated (Twin), freed with it
	window   int                // elements per rank of one all-gather of GatherTo
}

// NewAdamW returns an optimizer over params (by name; the optimizer keeps
// them in name order), with zeroed gradients and moments and, for every
// non-f32 parameter, an f32 master copy of its current weights.
func NewAdamW(b engine.Backend, c AdamWConfig, params map[string]*engine.Tensor) (*AdamW, error) {
	o, spans, n, nm, err := layout(b, c, params)
	if err != nil {
		return nil, err
	}
	o.table = engine.NewParamTable(spans)
	o.spans = spans
	for _, buf := range []**engine.Tensor{&o.grad, &o.m, &o.v} {
		if *buf, err = engine.Alloc(b, engine.F32, n); err != nil {
			o.Free()
			return nil, fmt.Errorf("optim: %d parameters of %d elements: %w", len(params), n, err)
		}
	}
	if nm > 0 {
		if o.master, err = engine.Alloc(b, engine.F32, nm); err != nil {
			o.Free()
			return nil, fmt.Errorf("optim: f32 masters of %d elements: %w", nm, err)
		}
	}
	if o.acc, err = engine.Alloc(b, engine.F32, 1); err != nil {
		o.Free()
		return nil, err
	}
	for i, p := range o.Params {
		s := spans[i]
		p.G, p.M, p.V = view(o.grad, s.Off, p.W), view(o.m, s.Off, p.W), view(o.v, s.Off, p.W)
		if s.MasterOff >= 0 {
			p.Master = view(o.master, s.MasterOff, p.W)
			b.Cast(p.Master, p.W)
		}
	}
	return o, nil
}

// layout returns an optimizer over params with no buffers yet, the spans of
// its parameters in the flat buffers (in name order), and the flat lengths
// of the gradients and moments (n) and of the masters (nm).
func layout(b engine.Backend, c AdamWConfig, params map[string]*engine.Tensor) (o *AdamW, spans []engine.AdamWSpan, n, nm int, err error) {
	if len(params) == 0 {
		return nil, nil, 0, 0, fmt.Errorf("optim: no parameters to optimize")
	}
	o = &AdamW{Config: c, b: b, byW: map[*engine.Tensor]*Param{}}
	spans = make([]engine.AdamWSpan, 0, len(params))
	for _, name := range slices.Sorted(maps.Keys(params)) {
		w := params[name]
		if !w.DType().IsFloat() {
			return nil, nil, 0, 0, fmt.Errorf("optim: parameter %s is %v, not a float tensor", name, w)
		}
		if q, dup := o.byW[w]; dup {
			return nil, nil, 0, 0, fmt.Errorf("optim: parameters %s and %s are the same tensor", q.Name, name)
		}
		p := &Param{Name: name, W: w}
		o.Params = append(o.Params, p)
		o.byW[w] = p
		s := engine.AdamWSpan{W: w, Off: n, MasterOff: -1}
		n = roundUp(n+w.Numel(), align)
		if w.DType() != engine.F32 {
			s.MasterOff = nm
			nm = roundUp(nm+w.Numel(), align)
		}
		spans = append(spans, s)
	}
	return o, spans, n, nm, nil
}

// roundUp returns x rounded up to a multiple of k.
func roundUp(x, k int) int { return (x + k - 1) / k * k }

// view returns the elements [off, off+w.Numel()) of the flat f32 tensor
// flat, shaped like w.
func view(flat *engine.Tensor, off int, w *engine.Tensor) *engine.Tensor {
	return engine.NewTensor(flat.Buffer(), flat.Offset()+4*off, engine.F32, w.Shape()...)
}

// Grad returns the gradient buffer of parameter w: the tensor the model
// accumulates w's gradient into. It panics if w is not one of the
// optimizer's parameters.
func (o *AdamW) Grad(w *engine.Tensor) *engine.Tensor {
	p, ok := o.byW[w]
	if !ok {
		panic(fmt.Sprintf("optim: Grad of %v, which is not a parameter of this optimizer", w))
	}
	return p.G
}

// Backend returns the backend the optimizer's buffers live on.
func (o *AdamW) Backend() engine.Backend { return o.b }

// FlatGrad returns the flat f32 buffer every parameter's gradient is a view
// of (Grad), in the optimizer's fixed parameter order: what data-parallel
// training all-reduces. A sharded optimizer pads it to a multiple of its
// shards, and its step leaves the gathered weights in it.
func (o *AdamW) FlatGrad() *engine.Tensor { return o.grad }

// ZeroGrad clears every gradient (one op over the flat gradient buffer).
func (o *AdamW) ZeroGrad() { o.b.Fill(o.grad, 0) }

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
	if o.comm != nil {
		panic("optim: Step of a sharded optimizer; use StepSharded")
	}
	norm := engine.GlobalNorm(o.b, o.acc, []*engine.Tensor{o.grad}) * gradScale
	clip := engine.ClipScale(norm, o.Config.MaxGradNorm)
	if math.IsNaN(float64(clip)) || math.IsNaN(float64(norm)) {
		o.Skipped++
		return StepResult{GradNorm: norm, Skipped: true}
	}
	o.Steps++
	o.b.AdamWMulti(o.table, o.grad, o.m, o.v, o.master, engine.AdamWParams{LR: lr, Beta1: o.Config.Beta1,
		Beta2: o.Config.Beta2, Eps: o.Config.Eps, WeightDecay: o.Config.WeightDecay, Step: o.Steps,
		GradScale: gradScale * clip})
	return StepResult{GradNorm: norm, Clip: clip}
}

// Free releases the optimizer's buffers — the gradients, moments and masters
// of every parameter — and the backend's copy of its parameter table. The
// parameters themselves stay. The optimizer must not be used afterwards.
func (o *AdamW) Free() {
	for _, t := range []*engine.Tensor{o.grad, o.m, o.v, o.master, o.acc, o.gshard} {
		if t != nil {
			o.b.FreeBuffer(t.Buffer())
		}
	}
	o.grad, o.m, o.v, o.master, o.acc, o.gshard = nil, nil, nil, nil, nil, nil
	for _, t := range o.owned {
		o.b.FreeBuffer(t.Buffer())
	}
	o.owned = nil
	if o.table != nil {
		o.table.Free(o.b)
	}
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
