package llama

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// LoRAConfig describes low-rank adapters: for each targeted projection
// W [out, in], A [r, in] and B [out, r], adding (α/r)·x·Aᵀ·Bᵀ to x·Wᵀ.
type LoRAConfig struct {
	Rank    int
	Alpha   float32
	Targets []string // projection names: q, k, v, o, gate, up, down
}

// AllProjections are the projections LoRA usually targets.
var AllProjections = []string{"q", "k", "v", "o", "gate", "up", "down"}

// projDims returns the [out, in] extents of a named projection.
func (c Config) projDims(name string) (out, in int, ok bool) {
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	switch name {
	case "q":
		return q, c.Dim, true
	case "k", "v":
		return kv, c.Dim, true
	case "o":
		return c.Dim, q, true
	case "gate", "up":
		return c.FFN, c.Dim, true
	case "down":
		return c.Dim, c.FFN, true
	}
	return 0, 0, false
}

// LoRAParams returns the number of adapter parameters of l on c.
func (c Config) LoRAParams(l LoRAConfig) (int64, error) {
	var n int64
	for _, t := range l.Targets {
		out, in, ok := c.projDims(t)
		if !ok {
			return 0, fmt.Errorf("unknown LoRA target %q (want one of %v)", t, AllProjections)
		}
		n += int64(l.Rank) * int64(in+out)
	}
	return n * int64(c.Layers), nil
}

// PlanOptions describe a training or inference job to plan memory for.
type PlanOptions struct {
	Batch, SeqLen int         // sequences per step and tokens per sequence
	WeightBytes   int         // bytes per weight element (2: bf16)
	LoRA          *LoRAConfig // nil: full fine-tuning
	Recompute     bool        // keep only each layer's input; recompute the rest in the backward
	LogitChunk    int         // tokens whose logits exist at once
	Inference     bool        // no gradients or optimizer state; a KV cache instead of activations
}

// PlanItem is one line of a memory plan.
type PlanItem struct {
	What  string
	Bytes int64
	Note  string
}

// Plan is the device memory a job needs, by component.
type Plan struct {
	Items []PlanItem
	Total int64
}

// Plan computes the memory plan of a job on c. Full fine-tuning keeps weights
// and gradients in the weight dtype plus f32 master weights and Adam's m and
// v (16 bytes per parameter in bf16); LoRA keeps the base frozen (no
// gradients) and f32 adapters with f32 gradients, m and v.
func (c Config) Plan(o PlanOptions) (Plan, error) {
	if o.Batch <= 0 || o.SeqLen <= 0 {
		return Plan{}, fmt.Errorf("plan: batch %d and sequence length %d must be positive", o.Batch, o.SeqLen)
	}
	if o.WeightBytes == 0 {
		o.WeightBytes = 2
	}
	if o.LogitChunk == 0 {
		o.LogitChunk = LogitChunk
	}
	var p Plan
	add := func(what string, b int64, note string) {
		p.Items = append(p.Items, PlanItem{what, b, note})
		p.Total += b
	}
	np := c.Params()
	wb := int64(o.WeightBytes)
	add("weights", np*wb, fmt.Sprintf("%d parameters × %d B", np, wb))
	n := int64(o.Batch) * int64(o.SeqLen) // tokens per step
	d, f, v := int64(c.Dim), int64(c.FFN), int64(c.Vocab)
	kv := int64(c.KVHeads * c.HeadDim)
	if o.Inference {
		cache := 2 * int64(c.Layers) * n * kv * wb
		add("KV cache", cache, fmt.Sprintf("2 × %d layers × %d tokens × %d × %d B", c.Layers, n, kv, wb))
		add("logits", int64(o.Batch)*v*(wb+4), "one token per sequence, activation dtype and f32")
		return p, nil
	}
	if o.LoRA != nil {
		la, err := c.LoRAParams(*o.LoRA)
		if err != nil {
			return Plan{}, err
		}
		add("LoRA adapters", la*4, fmt.Sprintf("%d parameters, rank %d, f32", la, o.LoRA.Rank))
		add("adapter gradients", la*4, "f32")
		add("optimizer state", la*8, "Adam m, v in f32")
	} else {
		add("gradients", np*wb, fmt.Sprintf("%d B per parameter", wb))
		add("master weights", np*4, "f32")
		add("optimizer state", np*8, "Adam m, v in f32")
	}
	// Per layer the backward needs: residual in and out, both norms' outputs,
	// q, attention output (D each), k and v, gate, up and their SwiGLU
	// (F each), in the activation dtype; two rstd and the attention's
	// log-sum-exp in f32.
	perLayer := (6*d+2*kv+3*f)*n*wb + (2+int64(c.Heads))*n*4
	if o.Recompute {
		add("activations", int64(c.Layers)*n*d*wb+perLayer, "recomputed: each layer's input, plus one layer in full")
	} else {
		add("activations", int64(c.Layers)*perLayer, fmt.Sprintf("%d layers × %.1f MB", c.Layers, float64(perLayer)/1e6))
	}
	add("final norm and gradient buffers", 4*n*d*wb+2*n*f*wb, "residual, norm, their gradients; SwiGLU gradients")
	add("logits chunk", int64(o.LogitChunk)*v*wb, fmt.Sprintf("%d tokens × %d", o.LogitChunk, v))
	return p, nil
}

// Write prints the plan as a table in decimal gigabytes.
func (p Plan) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, it := range p.Items {
		fmt.Fprintf(tw, "%s\t%8.2f GB\t%s\n", it.What, float64(it.Bytes)/1e9, it.Note)
	}
	fmt.Fprintf(tw, "total\t%8.2f GB\t\n", float64(p.Total)/1e9)
	return tw.Flush()
}
