package trainer

import (
	"maps"

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
	dLogP *engine.Tensor // [N] f32, the loss gradient; resized to each batch
}

// NewParams registers the trained parameters of model m — adapter ad's, or
// every weight of m when ad is nil — and extra (further parameters by name;
// nil: none) with one AdamW configured by c.
func NewParams(m *llama.Model, ad *llama.Adapter, c optim.AdamWConfig, extra map[string]*engine.Tensor) (*Params, error) {
	return newParams(m, ad, extra, func(ts checkpoint.Tensors) (*optim.AdamW, error) {
		return optim.NewAdamW(m.Backend(), c, ts)
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

// Free releases the optimizer's state and the loss-gradient buffer.
func (p *Params) Free() {
	p.Opt.Free()
	if p.dLogP != nil {
		p.m.Backend().FreeBuffer(p.dLogP.Buffer())
		p.dLogP = nil
	}
}
