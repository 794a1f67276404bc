package llama

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
)

// Batch is a training batch: sequences packed one after another, each causal
// within itself.
type Batch struct {
	IDs     []int32 // [N] input tokens
	Targets []int32 // [N] the token each position predicts; −1: no loss there
	Lens    []int   // tokens per sequence, summing to N
	// DropoutSeed seeds the dropout masks of a training pass over the
	// batch with an adapter that has dropout (LoRAConfig.Dropout): a
	// trainer sets one per micro-batch (see engine.MixSeed). 0: no dropout.
	DropoutSeed uint64
}

// Append adds the sequence ids [L] to the batch as a sequence of its own:
// the target of its position i is the next token, ids[i+1], when
// predicted(i+1) holds, and −1 otherwise; its last position has target −1.
// It is the one place where inputs and targets are shifted, for supervised
// and preference training alike.
func (b *Batch) Append(ids []int32, predicted func(i int) bool) {
	b.IDs = append(b.IDs, ids...)
	for i := range ids {
		t := int32(-1)
		if i+1 < len(ids) && predicted(i+1) {
			t = ids[i+1]
		}
		b.Targets = append(b.Targets, t)
	}
	b.Lens = append(b.Lens, len(ids))
}

// Pass is a forward pass kept for its backward: the activations, and the
// per-token log-probabilities of the targets.
type Pass struct {
	layerRun                      // the model, the adapter, positions; take holds until Release
	ids, tgt, seqs *engine.Tensor // [N] i32, [N] i32, [B, 4] i32
	layers         []layerActs
	resF, hF       *engine.Tensor // [N, D] final residual and its norm
	rstdF          *engine.Tensor // [N] f32
	LogP           *engine.Tensor // [N] f32: log π(target | prefix); 0 where target < 0
	dhF            *engine.Tensor // [N, D]: the classifier's input gradient, when fused
	lseT           *engine.Tensor // [N] f32: log-sum-exp of each position's logits
	mem            arena          // the activations, held until Release
	scratch        *layerActs     // with Recompute: the one layer's activations
}

// LogitChunk is how many tokens' logits exist at once: peak logits memory is
// LogitChunk·V elements of the activation dtype.
const LogitChunk = 256

// HeldBytes returns the bytes of activations the pass holds.
func (p *Pass) HeldBytes() int {
	return p.mem.bytes()
}

// Release returns the pass's activations to the model's pool.
func (p *Pass) Release() { p.mem.release() }

// ForwardTrain runs a batch through the model, with adapter ad (nil: the
// base alone), keeping every activation the backward needs, and computes the
// log-probability of each target.
func (m *Model) ForwardTrain(bt Batch, ad *Adapter) (*Pass, error) {
	return m.forwardTrain(bt, ad, nil, nil)
}

// ForwardBackward is ForwardTrain followed by Backward, for a loss whose
// gradient with respect to each log-probability, dLogP [N] f32, is known
// before the forward (a weighted sum of log-probabilities, as in
// cross-entropy): the classifier's gradient is formed in the same pass over
// the logits as the log-probabilities, which saves computing the logits
// twice. The returned pass holds LogP; Release it after use.
func (m *Model) ForwardBackward(bt Batch, ad *Adapter, dLogP *engine.Tensor, g *Weights, ga *Adapter) (*Pass, error) {
	var head *engine.Tensor
	if g != nil {
		head = g.Head
	}
	p, err := m.forwardTrain(bt, ad, dLogP, head)
	if err != nil {
		return nil, err
	}
	if err := p.Backward(nil, g, ga); err != nil {
		p.Release()
		return nil, err
	}
	return p, nil
}

// forwardTrain is ForwardTrain; with dLogP non-nil the classifier's backward
// is fused into the forward (see ForwardBackward), its head gradient
// accumulated into gHead (nil: frozen).
func (m *Model) forwardTrain(bt Batch, ad *Adapter, dLogP, gHead *engine.Tensor) (pass *Pass, err error) {
	c, b := m.Config, m.b
	n := len(bt.IDs)
	if n == 0 || len(bt.Targets) != n {
		return nil, fmt.Errorf("forward: %d inputs and %d targets", n, len(bt.Targets))
	}
	var seqs, pos []int32
	off := 0
	for i, l := range bt.Lens {
		if l <= 0 {
			return nil, fmt.Errorf("forward: sequence %d has length %d", i, l)
		}
		seqs = append(seqs, int32(off), int32(l), int32(off), int32(l))
		for j := 0; j < l; j++ {
			pos = append(pos, int32(j))
		}
		off += l
	}
	if off != n {
		return nil, fmt.Errorf("forward: sequence lengths sum to %d, the batch has %d tokens", off, n)
	}
	for i, t := range bt.IDs {
		if t < 0 || int(t) >= c.Vocab {
			return nil, fmt.Errorf("forward: token %d = %d is outside the vocabulary of %d", i, t, c.Vocab)
		}
		if g := bt.Targets[i]; g >= int32(c.Vocab) {
			return nil, fmt.Errorf("forward: target %d = %d is outside the vocabulary of %d", i, g, c.Vocab)
		}
	}
	p := &Pass{layerRun: layerRun{m: m, ad: ad, n: n}, mem: arena{pool: m.pool}}
	if ad != nil && ad.Config.Dropout > 0 {
		p.dropSeed = bt.DropoutSeed
	}
	defer func() {
		if err != nil {
			p.Release()
			pass = nil
		}
	}()
	defer catchOOM(&err, fmt.Sprintf("forward of %d tokens", n))
	take := p.mem.take
	d := c.Dim
	p.ids, p.tgt, p.pos = take(engine.I32, n), take(engine.I32, n), take(engine.I32, n)
	p.seqs = take(engine.I32, len(bt.Lens), 4)
	engine.SetI32(b, p.ids, bt.IDs)
	engine.SetI32(b, p.tgt, bt.Targets)
	engine.SetI32(b, p.pos, pos)
	engine.SetI32(b, p.seqs, seqs)

	p.take = take
	p.kv = func(_ int, k, v *engine.Tensor) (keys, values, seqs *engine.Tensor) { return k, v, p.seqs }
	x := take(m.dt, n, d) // the embedding: layer 0's residual input
	b.Embedding(x, m.Weights.Embed, p.ids)
	var delta *engine.Tensor // the previous layer's MLP output, added at the next norm
	p.layers = make([]layerActs, c.Layers)
	for l := range m.Weights.Layers {
		a := &p.layers[l]
		if m.Recompute {
			// Keep only the layer's input; its other activations live in one
			// scratch set shared by all layers and are recomputed in the
			// backward.
			if delta == nil {
				a.res1 = x
			} else {
				a.res1 = take(m.dt, n, d)
				b.Add(a.res1, x, delta)
			}
			if p.scratch == nil {
				p.scratch = &layerActs{}
			}
			p.scratch.res1 = a.res1
			x, delta = p.layerForward(l, p.scratch, a.res1, nil)
			continue
		}
		x, delta = p.layerForward(l, a, x, delta)
	}
	p.resF, p.hF, p.rstdF = take(m.dt, n, d), take(m.dt, n, d), take(engine.F32, n)
	b.AddRMSNorm(p.resF, p.hF, p.rstdF, x, delta, m.Weights.FinalNorm, c.NormEps)
	p.LogP, p.lseT = take(engine.F32, n), take(engine.F32, n)
	if dLogP != nil {
		engine.MustShape("ForwardBackward", "dLogP", dLogP, n)
		p.dhF = take(m.dt, n, d)
		err = engine.TokenLogProbsFused(b, m.pool, p.LogP, p.lseT, p.dhF, gHead, dLogP, p.hF, m.Weights.Head, p.tgt, LogitChunk)
	} else {
		err = engine.TokenLogProbs(b, m.pool, p.LogP, p.lseT, p.hF, m.Weights.Head, p.tgt, LogitChunk)
	}
	if err != nil {
		panic(outOfMemory{err})
	}
	return p, nil
}

// Hidden returns the final normalised hidden state [N, D] (the
// classifier's input) of every position of the pass, for heads other than
// the language-model classifier, such as a critic's scalar value head.
func (p *Pass) Hidden() *engine.Tensor { return p.hF }

// BackwardHidden is Backward for a loss of the final hidden states alone:
// dh [N, D], in the model's dtype, is the loss's gradient with respect to
// Hidden(); the classifier gets no gradient. The pass must come from
// ForwardTrain.
func (p *Pass) BackwardHidden(dh *engine.Tensor, g *Weights, ga *Adapter) error {
	if p.dhF != nil {
		panic("llama: BackwardHidden on a pass from ForwardBackward")
	}
	if !dh.Shape().Equal(p.hF.Shape()) || dh.DType() != p.hF.DType() {
		panic(fmt.Sprintf("llama: BackwardHidden with dh %v %v; the hidden states are %v %v", dh.Shape(), dh.DType(), p.hF.Shape(), p.hF.DType()))
	}
	p.dhF = dh
	defer func() { p.dhF = nil }()
	return p.Backward(nil, g, ga)
}

// NewGrads allocates zeroed gradient buffers shaped like the weights, in
// dtype dt (a tied classifier shares the embedding's gradient).
func (m *Model) NewGrads(dt engine.DType) (*Weights, error) { return allocWeights(m.b, m.Config, dt) }

// Backward accumulates the gradient of Σ_i dLogP[i]·LogP[i], mirroring
// ForwardTrain step by step in reverse: into g for the base weights (nil: a
// frozen base, which then needs no gradient buffers) and into ga for the
// adapter the pass ran with (nil: none, or a frozen adapter). dLogP is [N] f32
// (nil after a fused classifier: see ForwardBackward).
func (p *Pass) Backward(dLogP *engine.Tensor, g *Weights, ga *Adapter) (err error) {
	m := p.m
	c, b, n := m.Config, m.b, p.n
	if (dLogP == nil) != (p.dhF != nil) {
		panic("llama: Backward needs dLogP unless the pass came from ForwardBackward, and then not")
	}
	scratch := arena{pool: m.pool} // the gradients of activations, for this backward only
	defer scratch.release()
	defer catchOOM(&err, fmt.Sprintf("backward of %d tokens", n))
	take := scratch.take
	d, hd, nh, ng, f := c.Dim, c.HeadDim, c.Heads, c.KVHeads, c.FFN
	var head, finalNorm, embed *engine.Tensor
	if g != nil {
		head, finalNorm, embed = g.Head, g.FinalNorm, g.Embed
	}

	// Classifier and final norm. dres carries the residual stream's gradient
	// down through the layers: every sublayer's input gradient adds into it.
	dh := p.dhF // fused: the head's gradient is in g already
	if dh == nil {
		dh = take(m.dt, n, d)
		if err := engine.TokenLogProbsBackward(b, m.pool, dh, head, dLogP, p.hF, m.Weights.Head, p.lseT, p.tgt, LogitChunk); err != nil {
			panic(outOfMemory{err})
		}
	}
	dres := take(m.dt, n, d)
	b.Fill(dres, 0)
	b.RMSNormBackward(dres, finalNorm, dh, p.resF, m.Weights.FinalNorm, p.rstdF)

	gr := &layerGrads{dres: dres, dh: dh, ga: ga,
		dact: take(m.dt, n, f), dgate: take(m.dt, n, f), dup: take(m.dt, n, f),
		datt: take(m.dt, n, nh, hd), dq: take(m.dt, n, nh, hd),
		dk: take(m.dt, n, ng, hd), dv: take(m.dt, n, ng, hd)}
	if p.ad != nil {
		gr.dt = take(m.dt, p.ad.Config.widestGroup()*p.ad.Config.Rank, n)
	}
	for l := c.Layers - 1; l >= 0; l-- {
		a := &p.layers[l]
		if m.Recompute {
			p.layerForward(l, p.scratch, a.res1, nil)
			a = p.scratch
		}
		gr.g = nil // a frozen base
		if g != nil {
			gr.g = &g.Layers[l]
		}
		p.mlpBackward(l, a, gr)
		p.attentionBackward(l, a, gr, p.seqs)
		if m.LayerDone != nil {
			m.LayerDone(l)
		}
	}
	if embed != nil {
		b.EmbeddingBackward(embed, dres, p.ids)
	}
	return nil
}
