package llama

import (
	"fmt"
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
// independent slots (sequences) of at most MaxLen tokens each.
type Cache struct {
	K, V   []*engine.Tensor // per layer: [Slots·MaxLen, G, Dh]
	Len    []int            // tokens cached per slot
	MaxLen int
}

// NewCache allocates an empty cache of slots × maxLen tokens.
func (m *Model) NewCache(slots, maxLen int) (*Cache, error) {
	c := m.Config
	kc := &Cache{Len: make([]int, slots), MaxLen: maxLen}
	for l := 0; l < c.Layers; l++ {
		k, err := engine.Alloc(m.b, m.dt, slots*maxLen, c.KVHeads, c.HeadDim)
		if err != nil {
			return nil, fmt.Errorf("KV cache of %d×%d tokens: %w", slots, maxLen, err)
		}
		v, err := engine.Alloc(m.b, m.dt, slots*maxLen, c.KVHeads, c.HeadDim)
		if err != nil {
			return nil, fmt.Errorf("KV cache of %d×%d tokens: %w", slots, maxLen, err)
		}
		kc.K, kc.V = append(kc.K, k), append(kc.V, v)
	}
	return kc, nil
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
	if len(tokens) != len(kc.Len) {
		return nil, fmt.Errorf("forward: %d token lists for a cache of %d slots", len(tokens), len(kc.Len))
	}
	var ids, pos, seqs []int32
	last := make([]int, len(tokens)) // row of each slot's last new token, or −1
	for s, toks := range tokens {
		last[s] = -1
		if len(toks) == 0 {
			continue
		}
		if kc.Len[s]+len(toks) > kc.MaxLen {
			return nil, fmt.Errorf("forward: slot %d would hold %d tokens, the cache holds %d", s, kc.Len[s]+len(toks), kc.MaxLen)
		}
		seqs = append(seqs, int32(len(ids)), int32(len(toks)), int32(s*kc.MaxLen), int32(kc.Len[s]+len(toks)))
		for j, t := range toks {
			if t < 0 || int(t) >= c.Vocab {
				return nil, fmt.Errorf("forward: slot %d token %d = %d is outside the vocabulary of %d", s, j, t, c.Vocab)
			}
			ids = append(ids, t)
			pos = append(pos, int32(kc.Len[s]+j))
		}
		last[s] = len(ids) - 1
	}
	n := len(ids)
	if n == 0 {
		return nil, fmt.Errorf("forward: no tokens")
	}
	scratch := arena{pool: m.pool} // one step's activations
	defer scratch.release()
	take := scratch.take

	d, hd := c.Dim, c.HeadDim
	idT := take(engine.I32, n)
	posT := take(engine.I32, n)
	seqT := take(engine.I32, len(seqs)/4, 4)
	engine.SetI32(b, idT, ids)
	engine.SetI32(b, posT, pos)
	engine.SetI32(b, seqT, seqs)

	// One set of activations for every layer, aliased where nothing needs
	// both: the residual stream (res1 = res2, updated in place), a norm's
	// output (h1 = h2), a sublayer's output (o = down), the normaliser
	// (rstd1 = rstd2), and one LoRA scratch for every projection.
	res := take(m.dt, n, d)     // [N, D]
	h := take(m.dt, n, d)       // [N, D]
	rstd := take(engine.F32, n) // [N]
	a := &layerActs{res1: res, res2: res, h1: h, h2: h, rstd1: rstd, rstd2: rstd}
	a.q = take(m.dt, n, c.Heads, hd)     // [N, H, Dh]
	a.k = take(m.dt, n, c.KVHeads, hd)   // [N, G, Dh]
	a.v = take(m.dt, n, c.KVHeads, hd)   // [N, G, Dh]
	a.att = take(m.dt, n, c.Heads, hd)   // [N, H, Dh]
	a.lse = take(engine.F32, n, c.Heads) // [N, H]
	a.o = take(m.dt, n, d)               // [N, D]
	a.down = a.o
	a.gate = take(m.dt, n, c.FFN) // [N, F]
	a.up = take(m.dt, n, c.FFN)   // [N, F]
	a.act = take(m.dt, n, c.FFN)  // [N, F]
	if ad != nil {
		t := take(m.dt, n, ad.Config.Rank) // [N, r] x·Aᵀ
		a.lora = map[string]*engine.Tensor{}
		for _, name := range ad.Config.Targets {
			a.lora[name] = t
		}
	}
	run := layerRun{m: m, ad: ad, n: n, pos: posT, take: take,
		// The cache hook: the new keys and values go to their slots' rows
		// of the cache, and attention reads the cache.
		kv: func(l int, k, v *engine.Tensor) (keys, values, seqTable *engine.Tensor) {
			for i := 0; i < len(seqs); i += 4 {
				qs, ql, ks, kl := int(seqs[i]), int(seqs[i+1]), int(seqs[i+2]), int(seqs[i+3])
				dst := ks + kl - ql
				b.Copy(kc.K[l].Rows(dst, dst+ql), k.Rows(qs, qs+ql))
				b.Copy(kc.V[l].Rows(dst, dst+ql), v.Rows(qs, qs+ql))
			}
			return kc.K[l], kc.V[l], seqT
		}}

	b.Embedding(res, m.Weights.Embed, idT)
	var delta *engine.Tensor // the previous layer's MLP output
	for l := range m.Weights.Layers {
		_, delta = run.layerForward(l, a, res, delta)
	}
	b.AddRMSNorm(res, h, rstd, res, delta, m.Weights.FinalNorm, c.NormEps)

	// Logits of each slot's last new token, in the activation dtype (as HF
	// computes them), then widened to f32.
	sel := take(m.dt, len(tokens), d) // [S, D]
	b.Fill(sel, 0)
	for s, r := range last {
		if r >= 0 {
			b.Copy(sel.Rows(s, s+1), h.Rows(r, r+1))
		}
	}
	logits := take(m.dt, len(tokens), c.Vocab)
	b.Gemm(logits, sel, m.Weights.Head, engine.GemmParams{TransB: true, Alpha: 1})
	if m.out == nil || m.out.Dim(0) != len(tokens) {
		if m.out != nil {
			b.FreeBuffer(m.out.Buffer())
		}
		if m.out, err = engine.Alloc(b, engine.F32, len(tokens), c.Vocab); err != nil {
			return nil, err
		}
	}
	out := m.out
	b.Cast(out, logits)
	for s, toks := range tokens {
		kc.Len[s] += len(toks)
	}
	return out, nil
}

// PoolStats returns the counters of the pool the model draws its
// activations from: its peak bytes and the high-water mark of what its
// tensors asked for.
func (m *Model) PoolStats() engine.PoolStats { return m.pool.Stats() }
