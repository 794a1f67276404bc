package llama

import (
	"fmt"
	"slices"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/shapecheck"
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

// each calls fn on every parameter with its Hugging Face name, each layer's
// in layerParams' order.
func (w *Weights) each(fn func(name string, t **engine.Tensor)) {
	fn("model.embed_tokens.weight", &w.Embed)
	for i := range w.Layers {
		for _, p := range layerParams {
			fn(fmt.Sprintf("model.layers.%d.%s.weight", i, p.hf), p.field(&w.Layers[i]))
		}
	}
	fn("model.norm.weight", &w.FinalNorm)
	fn("lm_head.weight", &w.Head)
}

// shape returns the shape of c's parameter of Hugging Face name name.
func (c Config) shape(name string) []int {
	ext := c.extents(name, configNames)
	shape := make([]int, len(ext))
	for i, e := range ext {
		shape[i] = e.N
	}
	return shape
}

// extents returns the dimensions of c's parameter of Hugging Face name
// name, with the fields behind each as n spells them.
func (c Config) extents(name string, n fieldNames) []shapecheck.Extent {
	d := c.extent(widthD, n)
	switch name {
	case "model.embed_tokens.weight", "lm_head.weight":
		return []shapecheck.Extent{{N: c.Vocab, Field: n.Vocab}, d}
	case "model.norm.weight":
		return []shapecheck.Extent{d}
	}
	p, ok := layerParamOf(name)
	if !ok {
		panic(fmt.Sprintf("llama: no parameter named %q", name))
	}
	ext := make([]shapecheck.Extent, len(p.shape))
	for i, w := range p.shape {
		ext[i] = c.extent(w, n)
	}
	return ext
}

// allocWeights allocates zeroed weights of dtype dt for c on b. A layer's
// projections that read one input (q, k and v; gate and up) are the
// consecutive row blocks of one buffer [Σ out, in], each its own [out, in]
// view, so that linear can compute them as one GEMM (see linear).
func allocWeights(b engine.Backend, c Config, dt engine.DType) (*Weights, error) {
	w := &Weights{Layers: make([]Layer, c.Layers)}
	var err error
	alloc := func(t **engine.Tensor, shape ...int) {
		if err == nil {
			*t, err = engine.Alloc(b, dt, shape...)
		}
	}
	alloc(&w.Embed, c.shape("model.embed_tokens.weight")...)
	groups := sharedInput(AllProjections)
	for l := range w.Layers {
		layer := &w.Layers[l]
		for i := range layerParams {
			p := &layerParams[i]
			switch {
			case !p.isProjection():
				alloc(p.field(layer), c.extent(p.shape[0], configNames).N)
			case *p.field(layer) == nil: // the first of its group: the group's buffer
				group := groups[slices.IndexFunc(groups, func(g []string) bool { return g[0] == p.name })]
				rows, in := 0, c.extent(p.shape[1], configNames).N
				for _, q := range group {
					out, _, _ := c.projDims(q)
					rows += out
				}
				var stack *engine.Tensor
				if alloc(&stack, rows, in); err != nil {
					break
				}
				r := 0
				for _, q := range group {
					out, _, _ := c.projDims(q)
					e, _ := projection(q)
					*e.field(layer) = stack.Rows(r, r+out)
					r += out
				}
			}
		}
	}
	alloc(&w.FinalNorm, c.Dim)
	if c.TiedEmbed {
		w.Head = w.Embed
	} else {
		alloc(&w.Head, c.shape("lm_head.weight")...)
	}
	if err != nil {
		return nil, fmt.Errorf("allocating %v weights: %w", dt, err)
	}
	return w, nil
}

// free frees every buffer w's tensors view, each once.
func (w *Weights) free(b engine.Backend) {
	seen := map[engine.Buffer]bool{}
	w.Each(func(_ string, t *engine.Tensor) {
		if t != nil && !seen[t.Buffer()] {
			seen[t.Buffer()] = true
			b.FreeBuffer(t.Buffer())
		}
	})
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
				file, name, engine.Shape(got), engine.Shape(want), shapecheck.Blame(c.extents(hf, s.names), got), s.config)
		}
	})
	return err
}
