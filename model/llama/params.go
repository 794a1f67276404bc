package llama

import (
	"fmt"
	"slices"
	"strings"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/internal/shapecheck"
)

// The parameter table. Every place that names, shapes, reads, writes or
// counts a layer's weights reads layerParams: weight iteration
// (Weights.each), shapes and the configuration fields behind them
// (Config.extents), GGUF names (ggufName), PEFT module names (peftModule),
// LoRA shapes and parameter counts (Config.projDims, LoRAParams, Plan) and
// Params.

// width is a dimension of a layer parameter, in terms of the configuration.
type width int

const (
	widthD  width = iota // Dim, the residual stream
	widthQ               // Heads·HeadDim, the queries
	widthKV              // KVHeads·HeadDim, the keys or values
	widthF               // FFN, the MLP's hidden width
)

// extent returns w's size in c and the fields behind it as n spells them.
func (c Config) extent(w width, n fieldNames) shapecheck.Extent {
	switch w {
	case widthD:
		return shapecheck.Extent{N: c.Dim, Field: n.Dim}
	case widthQ:
		return shapecheck.Extent{N: c.Heads * c.HeadDim, Field: n.Heads + "×" + n.HeadDim}
	case widthKV:
		return shapecheck.Extent{N: c.KVHeads * c.HeadDim, Field: n.KVHeads + "×" + n.HeadDim}
	case widthF:
		return shapecheck.Extent{N: c.FFN, Field: n.FFN}
	}
	panic(fmt.Sprintf("llama: unknown width %d", w))
}

// layerParam is one weight of a transformer block.
type layerParam struct {
	name  string  // our name; a projection's is its LoRA target name (q … down)
	hf    string  // Hugging Face module within a layer: model.layers.i.<hf>.weight
	gguf  string  // GGUF tensor within a block: blk.i.<gguf>.weight
	shape []width // [out, in] for a projection (y = x·Wᵀ), [D] for a norm
	// input names the activation a projection reads (layer.go): the
	// projections that read one are computed together, and an adapter's
	// A matrices of such projections lie stacked in one buffer, so that
	// their LoRA inputs x·Aᵀ are one GEMM.
	input string
	// residual marks the projections whose output is added to the residual
	// stream (o, down): NewRandom scales their initial weights.
	residual bool
	field    func(*Layer) **engine.Tensor
}

// isProjection reports whether p is a linear map (rather than a norm).
func (p *layerParam) isProjection() bool { return len(p.shape) == 2 }

// layerParams are a layer's weights in Hugging Face's order.
var layerParams = []layerParam{
	{name: "attn_norm", hf: "input_layernorm", gguf: "attn_norm", shape: []width{widthD},
		field: func(l *Layer) **engine.Tensor { return &l.AttnNorm }},
	{name: "q", input: "h1", hf: "self_attn.q_proj", gguf: "attn_q", shape: []width{widthQ, widthD},
		field: func(l *Layer) **engine.Tensor { return &l.Wq }},
	{name: "k", input: "h1", hf: "self_attn.k_proj", gguf: "attn_k", shape: []width{widthKV, widthD},
		field: func(l *Layer) **engine.Tensor { return &l.Wk }},
	{name: "v", input: "h1", hf: "self_attn.v_proj", gguf: "attn_v", shape: []width{widthKV, widthD},
		field: func(l *Layer) **engine.Tensor { return &l.Wv }},
	{name: "o", input: "att", hf: "self_attn.o_proj", gguf: "attn_output", shape: []width{widthD, widthQ}, residual: true,
		field: func(l *Layer) **engine.Tensor { return &l.Wo }},
	{name: "mlp_norm", hf: "post_attention_layernorm", gguf: "ffn_norm", shape: []width{widthD},
		field: func(l *Layer) **engine.Tensor { return &l.MLPNorm }},
	{name: "gate", input: "h2", hf: "mlp.gate_proj", gguf: "ffn_gate", shape: []width{widthF, widthD},
		field: func(l *Layer) **engine.Tensor { return &l.Wgate }},
	{name: "up", input: "h2", hf: "mlp.up_proj", gguf: "ffn_up", shape: []width{widthF, widthD},
		field: func(l *Layer) **engine.Tensor { return &l.Wup }},
	{name: "down", input: "act", hf: "mlp.down_proj", gguf: "ffn_down", shape: []width{widthD, widthF}, residual: true,
		field: func(l *Layer) **engine.Tensor { return &l.Wdown }},
}

// AllProjections are the names of a layer's projections, the targets LoRA
// can adapt: q, k, v, o, gate, up, down.
var AllProjections = projectionNames()

func projectionNames() []string {
	var out []string
	for i := range layerParams {
		if layerParams[i].isProjection() {
			out = append(out, layerParams[i].name)
		}
	}
	return out
}

// sharedInput groups names (projections) by the activation they read, in
// the table's order: one group per input, each in the table's order.
func sharedInput(names []string) [][]string {
	var groups [][]string
	at := map[string]int{} // input → its group
	for i := range layerParams {
		p := &layerParams[i]
		if !p.isProjection() || !slices.Contains(names, p.name) {
			continue
		}
		g, ok := at[p.input]
		if !ok {
			g = len(groups)
			at[p.input] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], p.name)
	}
	return groups
}

// projection returns the table entry of the projection named name.
func projection(name string) (*layerParam, bool) {
	for i := range layerParams {
		if p := &layerParams[i]; p.isProjection() && p.name == name {
			return p, true
		}
	}
	return nil, false
}

// layerParamOf returns the table entry of a layer parameter's Hugging Face
// name ("model.layers.3.mlp.up_proj.weight"), and whether it is one.
func layerParamOf(hf string) (*layerParam, bool) {
	rest, ok := strings.CutPrefix(hf, "model.layers.")
	if !ok {
		return nil, false
	}
	_, rest, _ = strings.Cut(rest, ".")
	for i := range layerParams {
		if rest == layerParams[i].hf+".weight" {
			return &layerParams[i], true
		}
	}
	return nil, false
}

// projDims returns the [out, in] extents of a named projection.
func (c Config) projDims(name string) (out, in int, ok bool) {
	p, ok := projection(name)
	if !ok {
		return 0, 0, false
	}
	return c.extent(p.shape[0], configNames).N, c.extent(p.shape[1], configNames).N, true
}

// proj returns the layer's projection named p.
func (w *Layer) proj(p string) *engine.Tensor {
	if e, ok := projection(p); ok {
		return *e.field(w)
	}
	panic(fmt.Sprintf("llama: unknown projection %q", p))
}
