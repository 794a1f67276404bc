package clip

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/shapecheck"
)

// The parameter table. Every place that names, shapes, allocates or loads
// a weight reads towerParams and layerParams.

// dim is an extent of a parameter, in terms of the configuration.
type dim int

const (
	dimD dim = iota // Hidden
	dimF            // FFN
	dimE            // Projection
	dimT            // Tokens: 1 + (image_size/patch_size)²
	dimC            // the 3 colour channels
	dimP            // Patch
)

// extent returns d's size in c and the config.json fields behind it.
func (c Config) extent(d dim) shapecheck.Extent {
	switch d {
	case dimD:
		return shapecheck.Extent{N: c.Hidden, Field: "hidden_size"}
	case dimF:
		return shapecheck.Extent{N: c.FFN, Field: "intermediate_size"}
	case dimE:
		return shapecheck.Extent{N: c.Projection, Field: "projection_dim"}
	case dimT:
		return shapecheck.Extent{N: c.Tokens(), Field: "1+(image_size/patch_size)²"}
	case dimC:
		return shapecheck.Extent{N: 3, Field: "num_channels"}
	case dimP:
		return shapecheck.Extent{N: c.Patch, Field: "patch_size"}
	}
	panic(fmt.Sprintf("clip: unknown dim %d", d))
}

// extents returns the extents of dims in c.
func (c Config) extents(dims []dim) []shapecheck.Extent {
	ext := make([]shapecheck.Extent, len(dims))
	for i, d := range dims {
		ext[i] = c.extent(d)
	}
	return ext
}

// shape returns the sizes of dims in c.
func (c Config) shape(dims []dim) engine.Shape {
	s := make(engine.Shape, len(dims))
	for i, d := range dims {
		s[i] = c.extent(d).N
	}
	return s
}

// param is one weight: its Hugging Face name, its shape in the file, and
// the field holding it. A weight is stored on the backend with the file's
// shape, except the patch convolution's [D, 3, P, P], which is stored
// flattened as [D, 3·P·P] (the same bytes) to be a GEMM's operand.
type param struct {
	hf    string // the full name, or the name within a layer (encoder.layers.i.<hf>)
	shape []dim
	flat  bool // stored as [shape[0], product of the rest]
	tower func(*Weights) **engine.Tensor
	layer func(*Layer) **engine.Tensor
}

// layerPrefix precedes the index of an encoder block's weights.
const layerPrefix = "vision_model.encoder.layers."

// towerParams are the weights outside the encoder blocks.
var towerParams = []param{
	{hf: "vision_model.embeddings.patch_embedding.weight", shape: []dim{dimD, dimC, dimP, dimP}, flat: true,
		tower: func(w *Weights) **engine.Tensor { return &w.PatchEmbed }},
	{hf: "vision_model.embeddings.class_embedding", shape: []dim{dimD},
		tower: func(w *Weights) **engine.Tensor { return &w.ClassEmbed }},
	{hf: "vision_model.embeddings.position_embedding.weight", shape: []dim{dimT, dimD},
		tower: func(w *Weights) **engine.Tensor { return &w.PosEmbed }},
	{hf: "vision_model.pre_layrnorm.weight", shape: []dim{dimD},
		tower: func(w *Weights) **engine.Tensor { return &w.PreNormW }},
	{hf: "vision_model.pre_layrnorm.bias", shape: []dim{dimD},
		tower: func(w *Weights) **engine.Tensor { return &w.PreNormB }},
	{hf: "vision_model.post_layernorm.weight", shape: []dim{dimD},
		tower: func(w *Weights) **engine.Tensor { return &w.PostNormW }},
	{hf: "vision_model.post_layernorm.bias", shape: []dim{dimD},
		tower: func(w *Weights) **engine.Tensor { return &w.PostNormB }},
	{hf: "visual_projection.weight", shape: []dim{dimE, dimD},
		tower: func(w *Weights) **engine.Tensor { return &w.Proj }},
}

// layerParams are an encoder block's weights, in Hugging Face's order.
var layerParams = []param{
	{hf: "self_attn.k_proj.weight", shape: []dim{dimD, dimD}, layer: func(l *Layer) **engine.Tensor { return &l.Wk }},
	{hf: "self_attn.k_proj.bias", shape: []dim{dimD}, layer: func(l *Layer) **engine.Tensor { return &l.Bk }},
	{hf: "self_attn.v_proj.weight", shape: []dim{dimD, dimD}, layer: func(l *Layer) **engine.Tensor { return &l.Wv }},
	{hf: "self_attn.v_proj.bias", shape: []dim{dimD}, layer: func(l *Layer) **engine.Tensor { return &l.Bv }},
	{hf: "self_attn.q_proj.weight", shape: []dim{dimD, dimD}, layer: func(l *Layer) **engine.Tensor { return &l.Wq }},
	{hf: "self_attn.q_proj.bias", shape: []dim{dimD}, layer: func(l *Layer) **engine.Tensor { return &l.Bq }},
	{hf: "self_attn.out_proj.weight", shape: []dim{dimD, dimD}, layer: func(l *Layer) **engine.Tensor { return &l.Wo }},
	{hf: "self_attn.out_proj.bias", shape: []dim{dimD}, layer: func(l *Layer) **engine.Tensor { return &l.Bo }},
	{hf: "layer_norm1.weight", shape: []dim{dimD}, layer: func(l *Layer) **engine.Tensor { return &l.Norm1W }},
	{hf: "layer_norm1.bias", shape: []dim{dimD}, layer: func(l *Layer) **engine.Tensor { return &l.Norm1B }},
	{hf: "mlp.fc1.weight", shape: []dim{dimF, dimD}, layer: func(l *Layer) **engine.Tensor { return &l.W1 }},
	{hf: "mlp.fc1.bias", shape: []dim{dimF}, layer: func(l *Layer) **engine.Tensor { return &l.B1 }},
	{hf: "mlp.fc2.weight", shape: []dim{dimD, dimF}, layer: func(l *Layer) **engine.Tensor { return &l.W2 }},
	{hf: "mlp.fc2.bias", shape: []dim{dimD}, layer: func(l *Layer) **engine.Tensor { return &l.B2 }},
	{hf: "layer_norm2.weight", shape: []dim{dimD}, layer: func(l *Layer) **engine.Tensor { return &l.Norm2W }},
	{hf: "layer_norm2.bias", shape: []dim{dimD}, layer: func(l *Layer) **engine.Tensor { return &l.Norm2B }},
}

// Weights are the image tower's parameters, f32 on one backend.
type Weights struct {
	PatchEmbed *engine.Tensor // [D, 3·P·P] the patch convolution (no bias), flattened
	ClassEmbed *engine.Tensor // [D]
	PosEmbed   *engine.Tensor // [T, D]
	PreNormW   *engine.Tensor // [D] pre_layrnorm
	PreNormB   *engine.Tensor // [D]
	Layers     []Layer
	PostNormW  *engine.Tensor // [D] post_layernorm, of the class token
	PostNormB  *engine.Tensor // [D]
	Proj       *engine.Tensor // [E, D] visual_projection (no bias)
}

// Layer is one pre-LayerNorm encoder block's parameters. Projections are
// [out, in]: y = x·Wᵀ + b.
type Layer struct {
	Norm1W, Norm1B *engine.Tensor // [D] layer_norm1
	Wq, Wk, Wv, Wo *engine.Tensor // [D, D]
	Bq, Bk, Bv, Bo *engine.Tensor // [D]
	Norm2W, Norm2B *engine.Tensor // [D] layer_norm2
	W1             *engine.Tensor // [F, D] mlp.fc1
	B1             *engine.Tensor // [F]
	W2             *engine.Tensor // [D, F] mlp.fc2
	B2             *engine.Tensor // [D]
}

// each calls fn with every parameter of w: its full Hugging Face name, its
// table entry and the field that holds it (w.Layers sets the number of
// blocks). The tower's weights come first, then the blocks'.
func (w *Weights) each(fn func(name string, p *param, t **engine.Tensor)) {
	for i := range towerParams {
		p := &towerParams[i]
		fn(p.hf, p, p.tower(w))
	}
	for l := range w.Layers {
		for i := range layerParams {
			p := &layerParams[i]
			fn(fmt.Sprintf("%s%d.%s", layerPrefix, l, p.hf), p, p.layer(&w.Layers[l]))
		}
	}
}

// storedShape is the shape a parameter has on the backend.
func (c Config) storedShape(p *param) engine.Shape {
	s := c.shape(p.shape)
	if p.flat {
		return engine.Shape{s[0], s.Numel() / s[0]}
	}
	return s
}

// Each calls fn with every parameter's Hugging Face name and tensor.
func (w *Weights) Each(fn func(name string, t *engine.Tensor)) {
	w.each(func(name string, _ *param, t **engine.Tensor) { fn(name, *t) })
}
