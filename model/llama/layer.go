package llama

import (
	"math"

	"github.com/turnwise/turnwise/engine"
)

// A transformer block, written once for training and generation. Its two
// halves and their backwards, in the notation of the comments below (per
// token, · a matrix product, ⊙ element-wise):
//
//	attention:  res1 = x + δ           δ: the previous layer's MLP output (none before layer 0)
//	            h1   = rmsnorm(res1)·w_attn_norm
//	            q, k, v = h1·Wqᵀ, h1·Wkᵀ, h1·Wvᵀ
//	            q, k = rope(q), rope(k)
//	            [the KV-cache hook: where attention finds its keys and values]
//	            att  = softmax(q·kᵀ/√Dh)·v   (causal, grouped-query)
//	            o    = att·Woᵀ
//	MLP:        res2 = res1 + o
//	            h2   = rmsnorm(res2)·w_mlp_norm
//	            down = (silu(h2·Wgateᵀ) ⊙ h2·Wupᵀ)·Wdownᵀ
//
// The layer's output res2 + down is never formed: the next layer's
// attention norm (or the final norm) adds down to res2 as it normalises. A
// projection y = x·Wᵀ is linear (linear.go), which adds the LoRA term of an
// adapted projection; the projections of one input (q, k and v of h1, gate
// and up of h2) are computed together.

// layerActs are one layer's activations: what its backward reads. Training
// keeps one set per layer (or one shared set, recomputed, with
// Model.Recompute); generation runs every layer in one set whose buffers
// alias where generation needs no copy (res1 = res2, h1 = h2, o = down).
type layerActs struct {
	res1, h1 *engine.Tensor            // [N, D] residual stream in, its attention norm
	rstd1    *engine.Tensor            // [N] f32
	q        *engine.Tensor            // [N, H, Dh] after RoPE
	k, v     *engine.Tensor            // [N, G, Dh] (k after RoPE)
	att      *engine.Tensor            // [N, H, Dh] attention output
	lse      *engine.Tensor            // [N, H] f32
	o        *engine.Tensor            // [N, D] attention output projected
	res2, h2 *engine.Tensor            // [N, D] residual after attention, its MLP norm
	rstd2    *engine.Tensor            // [N] f32
	gate, up *engine.Tensor            // [N, F] projections before SwiGLU
	act      *engine.Tensor            // [N, F] SwiGLU output
	down     *engine.Tensor            // [N, D] MLP output
	lora     map[string]*engine.Tensor // [r, N] (x·Aᵀ)ᵀ of each adapted projection
}

// layerRun is what the layers of one pass share: the model, the adapter,
// the tokens, and where attention finds its keys and values.
type layerRun struct {
	m   *Model
	ad  *Adapter       // nil: the base model alone
	n   int            // tokens
	pos *engine.Tensor // [N] i32 position of each token in its sequence
	// kv is the KV-cache hook, called between RoPE and attention with layer
	// l's new keys and values k, v [N, G, Dh]: it returns the keys and
	// values attention reads and the sequence table [B, 4] i32 that
	// indexes them (see engine.Backend.Attention). Training attends to k
	// and v themselves; generation stores them in its cache and attends to
	// the cache.
	kv func(l int, k, v *engine.Tensor) (keys, values, seqs *engine.Tensor)
	// take allocates a buffer from the model's pool, held for the pass.
	take func(engine.DType, ...int) *engine.Tensor
	// dropSeed seeds the adapter's dropout masks (LoRAConfig.Dropout) of a
	// training pass (Batch.DropoutSeed); 0: no dropout.
	dropSeed uint64
}

// buf returns *t, first allocating it from the pass's pool when nil.
func (r *layerRun) buf(t **engine.Tensor, dt engine.DType, shape ...int) *engine.Tensor {
	if *t == nil {
		*t = r.take(dt, shape...)
	}
	return *t
}

// named pairs a projection's name with its output (or output gradient).
type named struct {
	name string
	y    *engine.Tensor
}

// projs returns the projections outs of layer l, which read one input,
// with their weights and adapters (and, when gr is non-nil, their
// gradients and the backward's LoRA scratch). A group's LoRA inputs (x·Aᵀ)ᵀ
// in a.lora are row blocks of one [k·r, N] buffer, taken at the first
// forward, so that linear computes them in one GEMM.
func (r *layerRun) projs(l int, a *layerActs, gr *layerGrads, outs ...named) []proj {
	w := &r.m.Weights.Layers[l]
	ps := make([]proj, len(outs))
	k := 0 // adapted projections so far
	var group *engine.Tensor
	for i, o := range outs {
		p := proj{y: o.y, w: w.proj(o.name), lp: r.ad.pair(l, o.name)}
		if gr != nil {
			if gr.g != nil {
				p.gw = gr.g.proj(o.name)
			}
			p.glp = gr.ga.pair(l, o.name)
		}
		if p.lp != nil {
			rank := r.ad.Config.Rank
			if a.lora == nil {
				a.lora = map[string]*engine.Tensor{}
			}
			if a.lora[o.name] == nil {
				if group == nil {
					group = r.take(r.m.dt, len(adaptedOf(r.ad, l, outs))*rank, r.n)
				}
				a.lora[o.name] = group.Rows(k*rank, (k+1)*rank)
			}
			p.t = a.lora[o.name]
			if r.dropSeed != 0 {
				p.drop = engine.DropoutParams{P: r.ad.Config.Dropout, Seed: engine.MixSeed(r.dropSeed, uint64(l), uint64(projIndex(o.name)))}
			}
			if gr != nil {
				p.dt = gr.dt.Rows(k*rank, (k+1)*rank)
			}
			k++
		}
		ps[i] = p
	}
	return ps
}

// adaptedOf returns the projections of outs that ad adapts in layer l.
func adaptedOf(ad *Adapter, l int, outs []named) []named {
	var out []named
	for _, o := range outs {
		if ad.pair(l, o.name) != nil {
			out = append(out, o)
		}
	}
	return out
}

// project computes layer l's projections outs of x (linear).
func (r *layerRun) project(l int, a *layerActs, x *engine.Tensor, outs ...named) {
	ps := r.projs(l, a, nil, outs...)
	defer r.dropScratch(ps, x)()
	linear(r.m.b, x, ps, r.ad.scale())
}

// dropScratch gives the adapted projections of ps that have dropout one
// scratch buffer shaped like their input x, from the model's pool, and
// returns what gives it back (the ops that use it are queued before any
// later user's).
func (r *layerRun) dropScratch(ps []proj, x *engine.Tensor) func() {
	var xd *engine.Tensor
	for i := range ps {
		if ps[i].lp == nil || ps[i].drop.P == 0 {
			continue
		}
		if xd == nil {
			t, err := r.m.pool.Get(x.DType(), x.Dim(0), x.Dim(1))
			if err != nil {
				panic(outOfMemory{err})
			}
			xd = t
		}
		ps[i].xd = xd
	}
	return func() {
		if xd != nil {
			r.m.pool.Put(xd)
		}
	}
}

// projectBackward is project's backward: given each projection's dy in
// grads, it overwrites dx and accumulates the weight and adapter gradients
// (linearBackward).
func (r *layerRun) projectBackward(l int, a *layerActs, gr *layerGrads, dx, x *engine.Tensor, grads ...named) {
	ps := r.projs(l, a, gr, grads...)
	defer r.dropScratch(ps, x)()
	linearBackward(r.m.b, dx, x, ps, r.ad.scale())
}

// attentionForward is layer l's attention half, from the residual stream x
// and δ (nil before layer 0), into a.
func (r *layerRun) attentionForward(l int, a *layerActs, x, delta *engine.Tensor) {
	m, b, n := r.m, r.m.b, r.n
	c, w := m.Config, &m.Weights.Layers[l]
	d, hd, nh, ng := c.Dim, c.HeadDim, c.Heads, c.KVHeads
	r.buf(&a.h1, m.dt, n, d)
	r.buf(&a.rstd1, engine.F32, n)
	if delta == nil {
		a.res1 = x
		b.RMSNorm(a.h1, a.rstd1, a.res1, w.AttnNorm, c.NormEps)
	} else {
		r.buf(&a.res1, m.dt, n, d)
		b.AddRMSNorm(a.res1, a.h1, a.rstd1, x, delta, w.AttnNorm, c.NormEps)
	}
	r.buf(&a.q, m.dt, n, nh, hd)
	r.buf(&a.k, m.dt, n, ng, hd)
	r.buf(&a.v, m.dt, n, ng, hd)
	r.project(l, a, a.h1, named{"q", a.q.Reshape(n, nh*hd)}, named{"k", a.k.Reshape(n, ng*hd)}, named{"v", a.v.Reshape(n, ng*hd)})
	r.rope(a.q, a.k)
	keys, values, seqs := r.kv(l, a.k, a.v)
	r.buf(&a.att, m.dt, n, nh, hd)
	r.buf(&a.lse, engine.F32, n, nh)
	b.Attention(a.att, a.lse, a.q, keys, values, seqs, engine.AttentionParams{Scale: attentionScale(hd)})
	r.buf(&a.o, m.dt, n, d)
	r.project(l, a, a.att.Reshape(n, nh*hd), named{"o", a.o})
}

// rope applies RoPE to q [N, H, Dh] and k [N, G, Dh] at the pass's
// positions: as one op on the heads of one [1, H+G, Dh] when there is one
// token and k follows q in their buffer (decoding one sequence, in
// forwardCached's layout), else one op each.
func (r *layerRun) rope(q, k *engine.Tensor) {
	b, inv := r.m.b, r.m.invFreq
	if r.n == 1 {
		if qk := engine.Stacked(q.Reshape(q.Dim(1), q.Dim(2)), k.Reshape(k.Dim(1), k.Dim(2))); qk != nil {
			b.RoPE(qk.Reshape(1, qk.Dim(0), qk.Dim(1)), r.pos, inv)
			return
		}
	}
	b.RoPE(q, r.pos, inv)
	b.RoPE(k, r.pos, inv)
}

// mlpForward is layer l's MLP half, after attentionForward filled a.
func (r *layerRun) mlpForward(l int, a *layerActs) {
	m, b, n := r.m, r.m.b, r.n
	c, w := m.Config, &m.Weights.Layers[l]
	r.buf(&a.res2, m.dt, n, c.Dim)
	r.buf(&a.h2, m.dt, n, c.Dim)
	r.buf(&a.rstd2, engine.F32, n)
	b.AddRMSNorm(a.res2, a.h2, a.rstd2, a.res1, a.o, w.MLPNorm, c.NormEps)
	r.buf(&a.gate, m.dt, n, c.FFN)
	r.buf(&a.up, m.dt, n, c.FFN)
	r.buf(&a.act, m.dt, n, c.FFN)
	r.project(l, a, a.h2, named{"gate", a.gate}, named{"up", a.up})
	b.SwiGLU(a.act, a.gate, a.up)
	r.buf(&a.down, m.dt, n, c.Dim)
	r.project(l, a, a.act, named{"down", a.down})
}

// layerForward runs layer l on the residual stream x plus δ (nil before
// layer 0), filling a — allocating any buffer a lacks — and returns the
// stream after attention (res2) and the MLP's output, which the next layer
// adds.
func (r *layerRun) layerForward(l int, a *layerActs, x, delta *engine.Tensor) (res2, down *engine.Tensor) {
	r.attentionForward(l, a, x, delta)
	r.mlpForward(l, a)
	return a.res2, a.down
}

// attentionScale is 1/√Dh, the scale of the attention scores.
func attentionScale(headDim int) float32 { return float32(1 / math.Sqrt(float64(headDim))) }

// layerGrads are the backward's buffers for one layer's activation
// gradients, reused by every layer.
type layerGrads struct {
	dres       *engine.Tensor // [N, D] the residual stream's gradient, carried down the layers
	dh         *engine.Tensor // [N, D] a norm's output gradient (h1 or h2)
	dact       *engine.Tensor // [N, F]
	dgate, dup *engine.Tensor // [N, F]
	datt, dq   *engine.Tensor // [N, H, Dh]
	dk, dv     *engine.Tensor // [N, G, Dh]
	dt         *engine.Tensor // [k·r, N] LoRA scratch, k the largest group (nil without an adapter)
	g          *Layer         // the layer's weight gradients (nil: a frozen base)
	ga         *Adapter       // adapter gradients (nil: a frozen adapter, or none)
}

// mlpBackward mirrors mlpForward: from gr.dres, the gradient of res2 + down,
// it adds the MLP's contribution to gr.dres, which becomes res2's gradient.
func (r *layerRun) mlpBackward(l int, a *layerActs, gr *layerGrads) {
	b, w := r.m.b, &r.m.Weights.Layers[l]
	var gNorm *engine.Tensor
	if gr.g != nil {
		gNorm = gr.g.MLPNorm
	}
	r.projectBackward(l, a, gr, gr.dact, a.act, named{"down", gr.dres})
	b.SwiGLUBackward(gr.dgate, gr.dup, gr.dact, a.gate, a.up)
	r.projectBackward(l, a, gr, gr.dh, a.h2, named{"gate", gr.dgate}, named{"up", gr.dup})
	b.RMSNormBackward(gr.dres, gNorm, gr.dh, a.res2, w.MLPNorm, a.rstd2)
}

// attentionBackward mirrors attentionForward: from gr.dres, the gradient of
// res2 = res1 + o, it adds attention's contribution, leaving res1's
// gradient (the previous layer's output's) in gr.dres.
func (r *layerRun) attentionBackward(l int, a *layerActs, gr *layerGrads, seqs *engine.Tensor) {
	m, b, n := r.m, r.m.b, r.n
	c, w := m.Config, &m.Weights.Layers[l]
	nh, ng, hd := c.Heads, c.KVHeads, c.HeadDim
	var gNorm *engine.Tensor
	if gr.g != nil {
		gNorm = gr.g.AttnNorm
	}
	r.projectBackward(l, a, gr, gr.datt.Reshape(n, nh*hd), a.att.Reshape(n, nh*hd), named{"o", gr.dres})
	b.AttentionBackward(gr.dq, gr.dk, gr.dv, gr.datt, a.att, a.lse, a.q, a.k, a.v, seqs, engine.AttentionParams{Scale: attentionScale(hd)})
	b.RoPEBackward(gr.dq, r.pos, m.invFreq)
	b.RoPEBackward(gr.dk, r.pos, m.invFreq)
	r.projectBackward(l, a, gr, gr.dh, a.h1, named{"q", gr.dq.Reshape(n, nh*hd)}, named{"k", gr.dk.Reshape(n, ng*hd)},
		named{"v", gr.dv.Reshape(n, ng*hd)})
	b.RMSNormBackward(gr.dres, gNorm, gr.dh, a.res1, w.AttnNorm, a.rstd1)
}
