package llama

import (
	"fmt"
	"strconv"
	"strings"

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

// shape returns the shape of c's parameter of Hugging Face name name.
func (c Config) shape(name string) []int {
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	switch {
	case name == "model.embed_tokens.weight" || name == "lm_head.weight":
		return []int{c.Vocab, c.Dim}
	case strings.HasSuffix(name, "norm.weight"):
		return []int{c.Dim}
	case strings.HasSuffix(name, "q_proj.weight"):
		return []int{q, c.Dim}
	case strings.HasSuffix(name, "k_proj.weight"), strings.HasSuffix(name, "v_proj.weight"):
		return []int{kv, c.Dim}
	case strings.HasSuffix(name, "o_proj.weight"):
		return []int{c.Dim, q}
	case strings.HasSuffix(name, "gate_proj.weight"), strings.HasSuffix(name, "up_proj.weight"):
		return []int{c.FFN, c.Dim}
	case strings.HasSuffix(name, "down_proj.weight"):
		return []int{c.Dim, c.FFN}
	}
	panic(fmt.Sprintf("llama: no parameter named %q", name))
}

// allocWeights allocates zeroed weights of dtype dt for c on b.
func allocWeights(b engine.Backend, c Config, dt engine.DType) (*Weights, error) {
	w := &Weights{Layers: make([]Layer, c.Layers)}
	var err error
	w.each(func(name string, t **engine.Tensor) {
		if err != nil || (name == "lm_head.weight" && c.TiedEmbed) {
			return
		}
		*t, err = engine.Alloc(b, dt, c.shape(name)...)
	})
	if err != nil {
		return nil, fmt.Errorf("allocating %v weights: %w", dt, err)
	}
	if c.TiedEmbed {
		w.Head = w.Embed
	}
	return w, nil
}

// stored describes a checkpoint's tensors before any is read, for
// checkHeld.
type stored struct {
	config  string     // the file the configuration came from
	names   fieldNames // how that file spells the configuration's fields
	weights string     // the checkpoint: its directory or file
	layers  int        // the number of distinct layers it holds tensors for
	// tensor returns the tensor the model's parameter of Hugging Face
	// name hf is read from: its name in the checkpoint, its shape
	// (row-major), the file holding it, and whether there is one.
	tensor func(hf string) (name string, shape []int, file string, ok bool)
}

// checkHeld checks, before anything is allocated, that a checkpoint holds
// every parameter c needs with the shape c gives it. The readers check that
// each tensor lies inside its file and that no two overlap, so the weights
// a loader allocates after this check are bounded by the bytes its files
// hold (times at most 2, for f16 or bf16 widened to f32): a configuration
// its files do not back, such as a small config.json claiming a billion
// layers, is an error naming the file and the field, never an allocation of
// memory no file held.
func (s stored) checkHeld(c Config) error {
	if c.Layers > s.layers {
		return fmt.Errorf("%s: %s = %d, but the checkpoint holds tensors for %d layers", s.config, s.names.Layers, c.Layers, s.layers)
	}
	var err error
	(&Weights{Layers: make([]Layer, c.Layers)}).each(func(hf string, _ **engine.Tensor) {
		if err != nil || (hf == "lm_head.weight" && c.TiedEmbed) {
			return
		}
		want := c.shape(hf)
		name, got, file, ok := s.tensor(hf)
		switch {
		case !ok:
			err = fmt.Errorf("%s: tensor %s is missing (the configuration needs one of shape %v)", s.weights, name, engine.Shape(want))
		case !engine.Shape(got).Equal(want):
			err = fmt.Errorf("%s: tensor %s has shape %v, the configuration needs %v (%s in %s)",
				file, name, engine.Shape(got), engine.Shape(want), s.blame(hf, got, want), s.config)
		}
	})
	return err
}

// blame names the configuration fields behind the extents of parameter hf
// in which got differs from want (all of them when the ranks differ).
func (s stored) blame(hf string, got, want []int) string {
	n := s.names
	fields := []string{n.Dim}
	switch {
	case strings.HasSuffix(hf, "norm.weight"):
	case hf == "model.embed_tokens.weight" || hf == "lm_head.weight":
		fields = []string{n.Vocab, n.Dim}
	case strings.HasSuffix(hf, "q_proj.weight"):
		fields = []string{n.Heads + "×" + n.HeadDim, n.Dim}
	case strings.HasSuffix(hf, "k_proj.weight"), strings.HasSuffix(hf, "v_proj.weight"):
		fields = []string{n.KVHeads + "×" + n.HeadDim, n.Dim}
	case strings.HasSuffix(hf, "o_proj.weight"):
		fields = []string{n.Dim, n.Heads + "×" + n.HeadDim}
	case strings.HasSuffix(hf, "gate_proj.weight"), strings.HasSuffix(hf, "up_proj.weight"):
		fields = []string{n.FFN, n.Dim}
	case strings.HasSuffix(hf, "down_proj.weight"):
		fields = []string{n.Dim, n.FFN}
	}
	var out []string
	for i, f := range fields {
		if len(got) != len(want) {
			out = append(out, fmt.Sprintf("%s gives %d", f, want[i]))
		} else if got[i] != want[i] {
			out = append(out, fmt.Sprintf("%s gives %d where the tensor has %d", f, want[i], got[i]))
		}
	}
	return strings.Join(out, ", ")
}

// countLayers returns the number of distinct layer indices among names,
// read as prefix followed by a decimal index and a dot
// ("model.layers.3.mlp...").
func countLayers(names []string, prefix string) int {
	seen := map[int]bool{}
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		num, _, ok := strings.Cut(rest, ".")
		if i, err := strconv.Atoi(num); ok && err == nil && i >= 0 {
			seen[i] = true
		}
	}
	return len(seen)
}
