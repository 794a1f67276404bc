package llama

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
)

// Layer holds one transformer block's weights, in Hugging Face's layout:
// a projection from width in to width out is a [out, in] matrix, applied as
// y = x·Wᵀ. Q and K rows are in the rotate-half RoPE layout.
type Layer struct {
	AttnNorm *engine.Tensor // [D]
	Wq       *engine.Tensor // [H·Dh, D]
	Wk       *engine.Tensor // [G·Dh, D]
	Wv       *engine.Tensor // [G·Dh, D]
	Wo       *engine.Tensor // [D, H·Dh]
	MLPNorm  *engine.Tensor // [D]
	Wgate    *engine.Tensor // [F, D]
	Wup      *engine.Tensor // [F, D]
	Wdown    *engine.Tensor // [D, F]
}

// Weights holds every parameter of a model.
type Weights struct {
	Embed     *engine.Tensor // [V, D]
	Layers    []Layer
	FinalNorm *engine.Tensor // [D]
	Head      *engine.Tensor // [V, D]; the same tensor as Embed when tied
}

// each calls fn on every parameter with its Hugging Face name.
func (w *Weights) each(fn func(name string, t **engine.Tensor)) {
	fn("model.embed_tokens.weight", &w.Embed)
	for i := range w.Layers {
		l := &w.Layers[i]
		p := fmt.Sprintf("model.layers.%d.", i)
		fn(p+"input_layernorm.weight", &l.AttnNorm)
		fn(p+"self_attn.q_proj.weight", &l.Wq)
		fn(p+"self_attn.k_proj.weight", &l.Wk)
		fn(p+"self_attn.v_proj.weight", &l.Wv)
		fn(p+"self_attn.o_proj.weight", &l.Wo)
		fn(p+"post_attention_layernorm.weight", &l.MLPNorm)
		fn(p+"mlp.gate_proj.weight", &l.Wgate)
		fn(p+"mlp.up_proj.weight", &l.Wup)
		fn(p+"mlp.down_proj.weight", &l.Wdown)
	}
	fn("model.norm.weight", &w.FinalNorm)
	fn("lm_head.weight", &w.Head)
}

// shapes returns the shape of every parameter of c by its Hugging Face name.
func (c Config) shapes() map[string][]int {
	s := map[string][]int{
		"model.embed_tokens.weight": {c.Vocab, c.Dim},
		"model.norm.weight":         {c.Dim},
		"lm_head.weight":            {c.Vocab, c.Dim},
	}
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		s[p+"input_layernorm.weight"] = []int{c.Dim}
		s[p+"self_attn.q_proj.weight"] = []int{q, c.Dim}
		s[p+"self_attn.k_proj.weight"] = []int{kv, c.Dim}
		s[p+"self_attn.v_proj.weight"] = []int{kv, c.Dim}
		s[p+"self_attn.o_proj.weight"] = []int{c.Dim, q}
		s[p+"post_attention_layernorm.weight"] = []int{c.Dim}
		s[p+"mlp.gate_proj.weight"] = []int{c.FFN, c.Dim}
		s[p+"mlp.up_proj.weight"] = []int{c.FFN, c.Dim}
		s[p+"mlp.down_proj.weight"] = []int{c.Dim, c.FFN}
	}
	return s
}

// allocWeights allocates zeroed weights of dtype dt for c on b.
func allocWeights(b engine.Backend, c Config, dt engine.DType) (*Weights, error) {
	w := &Weights{Layers: make([]Layer, c.Layers)}
	shapes := c.shapes()
	var err error
	w.each(func(name string, t **engine.Tensor) {
		if err != nil || (name == "lm_head.weight" && c.TiedEmbed) {
			return
		}
		*t, err = engine.Alloc(b, dt, shapes[name]...)
	})
	if err != nil {
		return nil, fmt.Errorf("allocating %v weights: %w", dt, err)
	}
	if c.TiedEmbed {
		w.Head = w.Embed
	}
	return w, nil
}
