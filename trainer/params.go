package trainer

import (
	"fmt"
	"maps"
	"strings"

	"github.com/turnwise/turnwise/checkpoint"
	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/model/llama"
	"github.com/turnwise/turnwise/optim"
)

// Params is what a run trains, for every trainer of the project (the
// supervised Trainer, and sweetrl/rl's preference and value-head trainers):
// the parameters — an adapter's, or every weight of the model — and any
// further ones (a value head), registered with one AdamW; the model's
// gradient buffers, views of the optimizer's so that a backward accumulates
// straight into them; and the device buffer the loss gradient is uploaded
// to. It is not safe for concurrent use.
type Params struct {
	// Opt steps the parameters; its Grad buffers hold their gradients.
	Opt *optim.AdamW
	// Grads are the base weights' gradients (nil with an adapter: a frozen
	// base) and AdapterGrads the adapter's (nil without one).
	Grads        *llama.Weights
	AdapterGrads *llama.Adapter
	// Tensors are the trained parameters by name, as checkpoints save them.
	Tensors checkpoint.Tensors

	m     *llama.Model
	ad    *llama.Adapter
	dLogP *engine.Tensor  // [N] f32, the loss gradient; resized to each batch
	ov    *overlapReducer // nil: the gradients are all-reduced after the backward
	norm  *engine.Tensor  // [1] f32: CheckFinite's sum of squares; nil until it runs
}

// NewParams registers the trained parameters of model m — adapter ad's, or
// every weight of m when ad is nil — and extra (further parameters by name;
// nil: none) with one AdamW configured by c.
func NewParams(m *llama.Model, ad *llama.Adapter, c optim.AdamWConfig, extra map[string]*engine.Tensor) (*Params, error) {
	return newParams(m, ad, extra, func(ts checkpoint.Tensors) (*optim.AdamW, error) {
		return optim.NewAdamW(m.Backend(), c, ts)
	})
}

// NewParamsZero is NewParams for one rank of the data-parallel job comm
// (nil, or a job of one rank: one process) at ZeRO stage zero: with 1 and
// several ranks the optimizer is sharded across them (ZeRO-1,
// optim.NewShardedAdamW) — Step, SaveCheckpoint and LoadCheckpoint are then
// collectives, which every rank calls; 0 keeps it whole on every rank.
func NewParamsZero(m *llama.Model, ad *llama.Adapter, c optim.AdamWConfig, extra map[string]*engine.Tensor, comm engine.Communicator, zero int) (*Params, error) {
	return newParams(m, ad, extra, func(ts checkpoint.Tensors) (*optim.AdamW, error) {
		return newOptimizer(m.Backend(), c, ts, comm, zero)
	})
}

// newParams is NewParams with the optimizer that newOpt makes for the
// trained tensors (a sharded one, under ZeRO-1).
func newParams(m *llama.Model, ad *llama.Adapter, extra map[string]*engine.Tensor, newOpt func(checkpoint.Tensors) (*optim.AdamW, error)) (*Params, error) {
	p := &Params{Tensors: trainedTensors(m, ad, extra), m: m, ad: ad}
	opt, err := newOpt(p.Tensors)
	if err != nil {
		return nil, err
	}
	p.Opt = opt
	if ad != nil {
		p.AdapterGrads = ad.Map(opt.Grad)
	} else {
		p.Grads = m.Weights.Map(opt.Grad)
	}
	return p, nil
}

// trainedTensors returns, by name, the parameters a run of model m trains:
// adapter ad's, or every weight of m when ad is nil, and extra.
func trainedTensors(m *llama.Model, ad *llama.Adapter, extra map[string]*engine.Tensor) checkpoint.Tensors {
	t := checkpoint.Tensors{}
	maps.Copy(t, extra)
	if ad != nil {
		ad.Each(func(n string, w *engine.Tensor) { t[n] = w })
	} else {
		m.Weights.Each(func(n string, w *engine.Tensor) { t[n] = w })
	}
	return t
}

// LossGrad uploads dlogp [N] — a loss's gradient with respect to each
// log-probability of a batch of N tokens — to the device, into a buffer kept
// for the next batch, and returns that buffer. It is the one place a loss
// gradient goes to the device.
func (p *Params) LossGrad(dlogp []float32) (*engine.Tensor, error) {
	b := p.m.Backend()
	if p.dLogP == nil || p.dLogP.Numel() != len(dlogp) {
		if p.dLogP != nil {
			b.FreeBuffer(p.dLogP.Buffer())
			p.dLogP = nil
		}
		d, err := engine.Alloc(b, engine.F32, len(dlogp))
		if err != nil {
			return nil, err
		}
		p.dLogP = d
	}
	engine.SetF32(b, p.dLogP, dlogp)
	return p.dLogP, nil
}

// Backward runs pass's backward for the loss gradient dlogp [N] (see
// LossGrad), accumulating into the gradients. The pass must have run with
// the trained adapter.
func (p *Params) Backward(pass *llama.Pass, dlogp []float32) error {
	d, err := p.LossGrad(dlogp)
	if err != nil {
		return err
	}
	return pass.Backward(d, p.Grads, p.AdapterGrads)
}

// ForwardBackward runs batch bt forward and backward with the trained
// adapter for a loss gradient dlogp [N] known before the forward (see
// llama.Model.ForwardBackward), accumulating into the gradients. Release
// the returned pass after use.
func (p *Params) ForwardBackward(bt llama.Batch, dlogp []float32) (*llama.Pass, error) {
	d, err := p.LossGrad(dlogp)
	if err != nil {
		return nil, err
	}
	return p.m.ForwardBackward(bt, p.ad, d, p.Grads, p.AdapterGrads)
}

// OverlapReduce has Reduce's all-reduce of the gradients of the job of c
// overlap the backward of each step's last micro-batch, announced by
// LastMicroBatch: each layer's gradients are all-reduced as soon as the
// backward has passed the layer (see overlap.go). It reports whether it
// will; it will not in one process, on a GPU, with a sharded optimizer.
func (p *Params) OverlapReduce(c engine.Communicator) bool {
	p.ov = newOverlapReducer(c, p.m, p.Opt)
	return p.ov != nil
}

// LastMicroBatch says that the next backward is the last before Reduce:
// with OverlapReduce, its layers' gradients are all-reduced while it runs,
// and no other backward may run before Reduce.
func (p *Params) LastMicroBatch() {
	if p.ov != nil {
		p.ov.arm()
	}
}

// reduceGrads sums the flat gradient across the ranks of c: what the
// overlapped reduction has left, or the whole buffer.
func (p *Params) reduceGrads(c engine.Communicator) error {
	switch {
	case p.ov != nil && p.ov.armed:
		return p.ov.finish()
	case p.ov != nil:
		return p.ov.all()
	}
	return allReduceGrad(c, p.Opt)
}

// Step updates the parameters at learning rate lr with their gradients
// times gradScale (optim.AdamW.Step). With a sharded optimizer it is a
// collective of its ranks (optim.AdamW.StepSharded: the gradients are
// reduce-scattered, not summed by Reduce), and an error means the job
// cannot go on.
func (p *Params) Step(lr, gradScale float32) (optim.StepResult, error) {
	if p.Opt.Sharded() {
		return p.Opt.StepSharded(lr, gradScale)
	}
	return p.Opt.Step(lr, gradScale), nil
}

// DataParallel says how the optimizer's state is split across ranks under
// ZeRO-1 — "optimizer state sharded across 2 ranks (ZeRO-1): 1536 f32
// elements on each" — and how the gradients are all-reduced when they
// overlap the backward (OverlapReduce), a line each; "" for neither.
func (p *Params) DataParallel() string {
	var s string
	if p.Opt.Sharded() {
		s = fmt.Sprintf("optimizer state sharded across %d ranks (ZeRO-1): %d f32 elements on each\n", p.Opt.Ranks(), p.Opt.StateElems())
	}
	if p.ov != nil {
		s += fmt.Sprintf("gradients all-reduced layer by layer during the backward (%d layers, then %d other ranges)\n", len(p.ov.layers), len(p.ov.rest))
	}
	return strings.TrimSuffix(s, "\n")
}

// Free releases the optimizer's state and the buffers of the loss
// gradient and of CheckFinite.
func (p *Params) Free() {
	p.Opt.Free()
	for _, t := range []**engine.Tensor{&p.dLogP, &p.norm} {
		if *t != nil {
			p.m.Backend().FreeBuffer((*t).Buffer())
			*t = nil
		}
	}
}
