package llama

import "github.com/turnwise/turnwise/engine"

// Map returns weights of w's structure whose every tensor is fn of w's
// tensor in the same place; a tied classifier stays tied (Head is the mapped
// Embed, fn is called once for it). It gives gradient buffers that live
// elsewhere — views of an optimizer's flat gradient, for one — the layout
// Backward expects.
func (w *Weights) Map(fn func(*engine.Tensor) *engine.Tensor) *Weights {
	tied := w.Head == w.Embed
	var src []*engine.Tensor // w's tensors in each's order
	w.each(func(_ string, t **engine.Tensor) { src = append(src, *t) })
	out := &Weights{Layers: make([]Layer, len(w.Layers))}
	i := 0
	out.each(func(name string, t **engine.Tensor) {
		if s := src[i]; s != nil && !(tied && name == "lm_head.weight") {
			*t = fn(s)
		}
		i++
	})
	if tied {
		out.Head = out.Embed
	}
	return out
}

// Map returns an adapter of a's configuration whose every tensor is fn of
// a's tensor in the same place (see Weights.Map).
func (a *Adapter) Map(fn func(*engine.Tensor) *engine.Tensor) *Adapter {
	out := &Adapter{Config: a.Config, Layers: make([]map[string]*LoRAPair, len(a.Layers))}
	for l, m := range a.Layers {
		out.Layers[l] = make(map[string]*LoRAPair, len(m))
		for p, pr := range m {
			out.Layers[l][p] = &LoRAPair{A: fn(pr.A), B: fn(pr.B)}
		}
	}
	return out
}
