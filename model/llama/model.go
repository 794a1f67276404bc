package llama

import (
	"fmt"
	"math"
	"path/filepath"

	"github.com/turnwise/turnwise/engine"
)

// Model is a Llama model on a backend: its configuration, weights, and the
// RoPE frequencies and temporaries the forward pass uses.
type Model struct {
	Config  Config
	Weights *Weights
	b       engine.Backend
	dt      engine.DType   // weights and activations
	invFreq *engine.Tensor // [Dh/2] f32
	pool    *engine.Pool   // activations, reused across calls
	out     *engine.Tensor // [S, V] f32: the logits Forward returns

	// Recompute makes ForwardTrain keep only each layer's input and the
	// backward recompute the layer's other activations: activation memory
	// falls from layers × (a layer's activations) to layers × [N, D] plus
	// one layer's, for about one more forward pass of compute.
	Recompute bool

	// LayerDone, when set, is called by a backward once it has issued the
	// last write of layer l's parameter gradients (base and adapter) in that
	// pass — on the CPU backend, once they are written; on a GPU, once the
	// writes are queued on the backend's stream — for l = Layers−1 down to 0
	// in turn, on the backward's goroutine: from then on the pass leaves
	// those buffers alone, so that another goroutine may read and write them
	// (a data-parallel job all-reduces them while the backward goes on). The
	// embedding, final norm and classifier gradients are not reported.
	LayerDone func(l int)

	// Source is where the weights were read from (a Hugging Face directory
	// or a GGUF file, as an absolute path; "" for a model made here). An
	// adapter saved without a base of its own names it as its base.
	Source string
}

// allocModel returns fresh weights for a model of configuration c at dtype
// dt on b, once b has said that its attention runs c's heads at dt
// (engine.CheckAttention): a backend configured for other shapes fails
// before any weight is allocated or read.
func allocModel(b engine.Backend, c Config, dt engine.DType) (*Weights, error) {
	if err := engine.CheckAttention(b, dt, c.HeadDim); err != nil {
		return nil, err
	}
	return allocWeights(b, c, dt)
}

// newModel returns the model of weights w, read from source ("" for none;
// see Model.Source).
func newModel(b engine.Backend, c Config, w *Weights, dt engine.DType, source string) (*Model, error) {
	freqs := engine.RoPEFreqs(c.HeadDim, c.RopeTheta, c.RopeScale)
	inv, err := engine.Alloc(b, engine.F32, len(freqs))
	if err != nil {
		return nil, err
	}
	engine.SetF32(b, inv, freqs)
	if source != "" {
		if abs, err := filepath.Abs(source); err == nil {
			source = abs
		}
	}
	return &Model{Config: c, Weights: w, b: b, dt: dt, invFreq: inv, pool: engine.NewPool(b), Source: source}, nil
}

// Backend returns the backend the model runs on.
func (m *Model) Backend() engine.Backend { return m.b }

// DType returns the dtype of the weights and activations.
func (m *Model) DType() engine.DType { return m.dt }

// TrimPool frees the activation buffers the model keeps for reuse between
// calls, as after a change of batch shape that will not be seen again.
func (m *Model) TrimPool() { m.pool.Trim() }

// Cache holds the keys and values of the tokens seen so far, for a batch of
// independent slots (sequences) of at most MaxLen tokens each. A layer's K
// and V are the two halves of one buffer (NewCache), so that a step writes
// its new keys and values with one op.
type Cache struct {
	K, V   []*engine.Tensor // per layer: [Slots·MaxLen, G, Dh]
	Len    []int            // tokens cached per slot
	MaxLen int
}

// NewCache allocates an empty cache of slots × maxLen tokens; FreeCache
// frees it.
func (m *Model) NewCache(slots, maxLen int) (*Cache, error) {
	c := m.Config
	kc := &Cache{Len: make([]int, slots), MaxLen: maxLen}
	n := slots * maxLen
	for l := 0; l < c.Layers; l++ {
		kv, err := engine.Alloc(m.b, m.dt, 2*n, c.KVHeads, c.HeadDim) // [K; V]
		if err != nil {
			m.FreeCache(kc)
			return nil, fmt.Errorf("KV cache of %d×%d tokens: %w", slots, maxLen, err)
		}
		kc.K, kc.V = append(kc.K, kv.Rows(0, n)), append(kc.V, kv.Rows(n, 2*n))
	}
	return kc, nil
}

// FreeCache frees kc's buffers.
func (m *Model) FreeCache(kc *Cache) {
	for l := range kc.K {
		m.b.FreeBuffer(kc.K[l].Buffer())
		if kc.V[l].Buffer() != kc.K[l].Buffer() {
			m.b.FreeBuffer(kc.V[l].Buffer())
		}
	}
	kc.K, kc.V = nil, nil
}

// Forward appends tokens[s] to slot s of the cache and runs them through
// the model with adapter ad (nil: the base alone), returning f32 logits
// [S, V] for the last new token of each slot (rows of slots without new
// tokens are zero). The result is valid until the next call. The layers are
// the training pass's (layer.go), with the cache hooked in between RoPE and
// attention.
func (m *Model) Forward(kc *Cache, tokens [][]int32, ad *Adapter) (logitsOut *engine.Tensor, err error) {
	c, b := m.Config, m.b
	defer func() {
		if err != nil {
			logitsOut = nil
		}
	}()
	defer catchOOM(&err, fmt.Sprintf("forward of %d slots", len(tokens)))
	st, err := m.planStep(kc, tokens)
	if err != nil {
		return nil, err
	}
	scratch := arena{pool: m.pool} // one step's activations
	defer scratch.release()
	in := newStepInputs(scratch.take, st, 0)
	in.upload(b, st, nil)
	if m.out == nil || m.out.Dim(0) != len(tokens) {
		if m.out != nil {
			b.FreeBuffer(m.out.Buffer())
		}
		if m.out, err = engine.Alloc(b, engine.F32, len(tokens), c.Vocab); err != nil {
			return nil, err
		}
	}
	m.forwardCached(scratch.take, kc, ad, in, st.last, m.out)
	st.advance(kc)
	return m.out, nil
}

// stepPlan is what a forward over the cache computes on the host before its
// first op: each new token, its position, the cache row its key and value
// go to, the attention's sequence table, and the row of each slot's last
// new token.
type stepPlan struct {
	ids, pos []int32 // [N]
	// rows [2N] are the tokens' rows of a layer's cache [K; V] (NewCache):
	// each token's K row, then each token's V row, Slots·MaxLen further.
	rows []int32
	seqs []int32 // [B, 4]: qStart, qLen, kStart, kLen
	last []int   // [S]: each slot's last new token's row, or −1
	lens []int   // [S]: new tokens per slot
}

// planStep checks tokens against the cache and plans their forward.
func (m *Model) planStep(kc *Cache, tokens [][]int32) (stepPlan, error) {
	if len(tokens) != len(kc.Len) {
		return stepPlan{}, fmt.Errorf("forward: %d token lists for a cache of %d slots", len(tokens), len(kc.Len))
	}
	st := stepPlan{last: make([]int, len(tokens)), lens: make([]int, len(tokens))}
	for s, toks := range tokens {
		st.last[s] = -1
		st.lens[s] = len(toks)
		if len(toks) == 0 {
			continue
		}
		if kc.Len[s]+len(toks) > kc.MaxLen {
			return stepPlan{}, fmt.Errorf("forward: slot %d would hold %d tokens, the cache holds %d", s, kc.Len[s]+len(toks), kc.MaxLen)
		}
		st.seqs = append(st.seqs, int32(len(st.ids)), int32(len(toks)), int32(s*kc.MaxLen), int32(kc.Len[s]+len(toks)))
		for j, t := range toks {
			if t < 0 || int(t) >= m.Config.Vocab {
				return stepPlan{}, fmt.Errorf("forward: slot %d token %d = %d is outside the vocabulary of %d", s, j, t, m.Config.Vocab)
			}
			st.ids = append(st.ids, t)
			st.pos = append(st.pos, int32(kc.Len[s]+j))
			st.rows = append(st.rows, int32(s*kc.MaxLen+kc.Len[s]+j))
		}
		st.last[s] = len(st.ids) - 1
	}
	if len(st.ids) == 0 {
		return stepPlan{}, fmt.Errorf("forward: no tokens")
	}
	for _, r := range st.rows {
		st.rows = append(st.rows, r+int32(len(kc.Len)*kc.MaxLen))
	}
	return st, nil
}

// advance counts the step's tokens into the cache.
func (st stepPlan) advance(kc *Cache) {
	for s, n := range st.lens {
		kc.Len[s] += n
	}
}

// stepInputs are a forward's inputs on the device: views of one i32 buffer,
// end to end, so that one upload sets them all.
type stepInputs struct {
	all      *engine.Tensor // the buffer
	ids, pos *engine.Tensor // [N] i32
	rows     *engine.Tensor // [2N] i32 (stepPlan.rows)
	seqs     *engine.Tensor // [B, 4] i32
	u        *engine.Tensor // [S] f32: a sampler's uniforms (decode), or nil
}

// newStepInputs takes the buffer for st's inputs, with room for s uniforms.
func newStepInputs(take func(engine.DType, ...int) *engine.Tensor, st stepPlan, s int) *stepInputs {
	n, nb := len(st.ids), len(st.seqs)/4
	in := &stepInputs{all: take(engine.I32, 4*n+4*nb+s)}
	off := 0
	view := func(dt engine.DType, shape ...int) *engine.Tensor {
		t := engine.NewTensor(in.all.Buffer(), in.all.Offset()+4*off, dt, shape...)
		off += engine.Shape(shape).Numel()
		return t
	}
	in.ids, in.pos, in.rows = view(engine.I32, n), view(engine.I32, n), view(engine.I32, 2*n)
	in.seqs = view(engine.I32, nb, 4)
	if s > 0 {
		in.u = view(engine.F32, s)
	}
	return in
}

// upload writes st and the uniforms u (nil without a sampler) to the device.
func (in *stepInputs) upload(b engine.Backend, st stepPlan, u []float32) {
	words := make([]int32, in.all.Numel())
	put := func(t *engine.Tensor, v []int32) {
		copy(words[(t.Offset()-in.all.Offset())/4:], v)
	}
	put(in.ids, st.ids)
	put(in.pos, st.pos)
	put(in.rows, st.rows)
	put(in.seqs, st.seqs)
	if in.u != nil {
		bits := make([]int32, len(u))
		for i, x := range u {
			bits[i] = int32(math.Float32bits(x))
		}
		put(in.u, bits)
	}
	engine.SetI32(b, in.all, words)
}

// forwardCached is Forward's ops, with its inputs on the device: tokens in
// through the layers, their keys and values into the cache, and the f32
// logits of each slot's last new token (row last[s] of the tokens; −1: a
// slot without new tokens, whose row is zero) into out [S, V]. It issues ops
// alone — no upload, download or host decision on device data — so that a
// decoding step can be recorded and replayed (generate.go).
func (m *Model) forwardCached(take func(engine.DType, ...int) *engine.Tensor, kc *Cache, ad *Adapter, in *stepInputs, last []int, out *engine.Tensor) {
	c, b := m.Config, m.b
	n, d, hd := in.ids.Numel(), c.Dim, c.HeadDim

	// One set of activations for every layer, aliased where nothing needs
	// both: the residual stream (res1 = res2, updated in place), a norm's
	// output (h1 = h2), a sublayer's output (o = down), the normaliser
	// (rstd1 = rstd2), and one LoRA scratch for every projection.
	res := take(m.dt, n, d)     // [N, D]
	h := take(m.dt, n, d)       // [N, D]
	rstd := take(engine.F32, n) // [N]
	a := &layerActs{res1: res, res2: res, h1: h, h2: h, rstd1: rstd, rstd2: rstd}
	// q, k and v end to end in one buffer, and gate and up: with one token
	// (decoding one sequence) each group is then one row, one GEMM (linear).
	qkv := take(m.dt, n*(c.Heads+2*c.KVHeads), hd)                                           // [N·(H+2G), Dh]
	a.q = qkv.Rows(0, n*c.Heads).Reshape(n, c.Heads, hd)                                     // [N, H, Dh]
	a.k = qkv.Rows(n*c.Heads, n*(c.Heads+c.KVHeads)).Reshape(n, c.KVHeads, hd)               // [N, G, Dh]
	a.v = qkv.Rows(n*(c.Heads+c.KVHeads), n*(c.Heads+2*c.KVHeads)).Reshape(n, c.KVHeads, hd) // [N, G, Dh]
	a.att = take(m.dt, n, c.Heads, hd)                                                       // [N, H, Dh]
	a.lse = take(engine.F32, n, c.Heads)                                                     // [N, H]
	a.o = take(m.dt, n, d)                                                                   // [N, D]
	a.down = a.o
	gu := take(m.dt, 2*n, c.FFN)                  // [2N, F]
	a.gate, a.up = gu.Rows(0, n), gu.Rows(n, 2*n) // [N, F] each
	a.act = take(m.dt, n, c.FFN)                  // [N, F]
	if ad != nil {
		// One scratch for the (x·Aᵀ)ᵀ of every group of projections that
		// read one input, each group's stacked in its first rows.
		r := ad.Config.Rank
		t := take(m.dt, ad.Config.widestGroup()*r, n) // [k·r, N]
		a.lora = map[string]*engine.Tensor{}
		for _, g := range sharedInput(ad.Config.Targets) {
			for i, name := range g {
				a.lora[name] = t.Rows(i*r, (i+1)*r)
			}
		}
	}
	run := layerRun{m: m, ad: ad, n: n, pos: in.pos, take: take,
		// The cache hook: the new keys and values go to their rows of the
		// cache — one op when k and v lie end to end, as here, and the
		// cache's K and V too, as NewCache makes them — and attention reads
		// the cache.
		kv: func(l int, k, v *engine.Tensor) (keys, values, seqs *engine.Tensor) {
			if dst, src := engine.Stacked(kc.K[l], kc.V[l]), engine.Stacked(k, v); dst != nil && src != nil {
				b.ScatterRows(dst, src, in.rows)
			} else {
				b.ScatterRows(kc.K[l], k, in.rows.Rows(0, n))
				b.ScatterRows(kc.V[l], v, in.rows.Rows(0, n))
			}
			return kc.K[l], kc.V[l], in.seqs
		}}

	b.Embedding(res, m.Weights.Embed, in.ids)
	var delta *engine.Tensor // the previous layer's MLP output
	for l := range m.Weights.Layers {
		_, delta = run.layerForward(l, a, res, delta)
	}
	b.AddRMSNorm(res, h, rstd, res, delta, m.Weights.FinalNorm, c.NormEps)

	// Logits of each slot's last new token, in the activation dtype (as HF
	// computes them), then widened to f32. When every slot has one new
	// token, in slot order (decoding), those rows are h itself.
	sel := h
	if !oneEach(last, n) {
		sel = take(m.dt, len(last), d) // [S, D]
		b.Fill(sel, 0)
		for s, r := range last {
			if r >= 0 {
				b.Copy(sel.Rows(s, s+1), h.Rows(r, r+1))
			}
		}
	}
	logits := take(m.dt, len(last), c.Vocab)
	b.Gemm(logits, sel, m.Weights.Head, engine.GemmParams{TransB: true, Alpha: 1})
	b.Cast(out, logits)
}

// oneEach reports whether the n tokens are one per slot, slot s's at row s.
func oneEach(last []int, n int) bool {
	if len(last) != n {
		return false
	}
	for s, r := range last {
		if r != s {
			return false
		}
	}
	return true
}

// PoolStats returns the counters of the pool the model draws its
// activations from: its peak bytes and the high-water mark of what its
// tensors asked for.
func (m *Model) PoolStats() engine.PoolStats { return m.pool.Stats() }
