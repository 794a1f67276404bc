package llama

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/turnwise/turnwise/engine"
)

// PlanOptions describe a training or inference job to plan memory for.
type PlanOptions struct {
	Batch, SeqLen int         // sequences per step and tokens per sequence
	WeightBytes   int         // bytes per element of the weights and activations (2: bf16)
	LoRA          *LoRAConfig // nil: full fine-tuning (or, with Inference, the base alone)
	Recompute     bool        // Model.Recompute: keep each layer's input, recompute the rest in the backward
	LogitChunk    int         // tokens whose logits exist at once (0: LogitChunk)
	Inference     bool        // a prefill of every token and a KV cache instead of training
	// Ranks is the number of data-parallel ranks (0 or 1: one process) and
	// Zero the ZeRO stage: with Zero 1 on several ranks the f32 master
	// weights (of every parameter, f32 ones too) and Adam's moments are
	// sharded, each rank keeping 1/Ranks of them, plus the summed gradient
	// of its shard (optim.NewShardedAdamW). The plan is per rank.
	Ranks, Zero int
}

// PlanItem is one line of a memory plan.
type PlanItem struct {
	// Key is a stable name: weights, lora_adapters, gradients,
	// master_weights, optimizer_state, token_ids, layer_activations,
	// final_norm, head_gradient, logits_chunk, layer_gradients (training);
	// kv_cache, prefill_activations, sampling (inference).
	Key   string `json:"key"`
	What  string `json:"what"`  // the same in words
	Bytes int64  `json:"bytes"` // exact, before any allocator rounding
	Note  string `json:"note"`  // how Bytes is made up
	// Transient items exist one after another, never together: the plan's
	// total counts the largest of them.
	Transient bool `json:"transient,omitempty"`
}

// Plan is the device memory a job needs at its peak, by component.
type Plan struct {
	Items []PlanItem `json:"items"`
	Total int64      `json:"total_bytes"` // every item that is not transient, plus the largest transient one
	// Pooled is the part of Total the model draws from its engine.Pool
	// (activations and their gradients), which the pool's HighWater
	// measures; the rest (weights, gradients, optimizer state, KV cache) is
	// allocated once.
	Pooled int64 `json:"pooled_bytes"`
}

// Item returns the item of the given key, and whether the plan has one.
func (p Plan) Item(key string) (PlanItem, bool) {
	for _, it := range p.Items {
		if it.Key == key {
			return it, true
		}
	}
	return PlanItem{}, false
}

// Plan computes the memory plan of a job on c, counting every buffer the
// code keeps at the job's peak: the weights; for full fine-tuning f32
// gradients, f32 master weights (for weights not in f32) and Adam's m and v
// (18 B per parameter in bf16); for LoRA a frozen base and adapters in the
// weights' dtype with the same f32 state; and the buffers the forward and
// backward take from the model's pool, as ForwardTrain and Backward (or,
// with Inference, Forward and Generate) take them. The loss's own buffers
// (per-token weights, a few bytes per token) are the caller's and not
// counted.
func (c Config) Plan(o PlanOptions) (Plan, error) {
	if o.Batch <= 0 || o.SeqLen <= 0 {
		return Plan{}, fmt.Errorf("plan: batch %d and sequence length %d must be positive", o.Batch, o.SeqLen)
	}
	if o.Zero < 0 || o.Zero > 1 || o.Ranks < 0 {
		return Plan{}, fmt.Errorf("plan: ZeRO stage %d on %d ranks; want stage 0 or 1 on ≥ 1 ranks", o.Zero, o.Ranks)
	}
	if o.WeightBytes == 0 {
		o.WeightBytes = 2
	}
	if o.LogitChunk == 0 {
		o.LogitChunk = LogitChunk
	}
	var p Plan
	var transient int64 // the largest transient item
	add := func(pooled bool, key, what string, b int64, note string, a ...any) {
		p.Items = append(p.Items, PlanItem{Key: key, What: what, Bytes: b, Note: fmt.Sprintf(note, a...)})
		p.Total += b
		if pooled {
			p.Pooled += b
		}
	}
	addTransient := func(key, what string, b int64, note string, a ...any) {
		p.Items = append(p.Items, PlanItem{Key: key, What: what, Bytes: b, Note: fmt.Sprintf(note, a...), Transient: true})
		if b > transient {
			p.Total += b - transient
			p.Pooled += b - transient
			transient = b
		}
	}
	np := c.Params()
	wb := int64(o.WeightBytes)
	const f32 = 4
	add(false, "weights", "weights", np*wb, "%d parameters × %d B", np, wb)
	var la, rank, targets int64 // LoRA parameters, rank and adapted projections
	var widest int64            // the most adapted projections that read one input
	if o.LoRA != nil {
		var err error
		if la, err = c.LoRAParams(*o.LoRA); err != nil {
			return Plan{}, err
		}
		rank, targets, widest = int64(o.LoRA.Rank), int64(len(o.LoRA.Targets)), int64(o.LoRA.widestGroup())
		add(false, "lora_adapters", "LoRA adapters", la*wb, "%d parameters, rank %d, %d B each", la, rank, wb)
	}

	n, b := int64(o.Batch)*int64(o.SeqLen), int64(o.Batch) // tokens and sequences
	d, f, v := int64(c.Dim), int64(c.FFN), int64(c.Vocab)
	q, kv, h := int64(c.Heads*c.HeadDim), int64(c.KVHeads*c.HeadDim), int64(c.Heads)
	if o.Inference {
		add(false, "kv_cache", "KV cache", 2*int64(c.Layers)*n*kv*wb, "2 × %d layers × %d tokens × %d × %d B", c.Layers, n, kv, wb)
		// Forward's temporaries for a prefill of all n tokens: ids and
		// positions [N] i32, cache rows [2N] i32 (K's and V's), the
		// sequence table [B, 4] i32;
		// the residual,
		// a sublayer's input and output [N, D], q and the attention output
		// [N, H·Dh], k and v [N, G·Dh], gate, up and SwiGLU [N, F], the
		// LoRA scratch [k·r, N] (k the most adapted projections of one
		// input); rstd [N] and log-sum-exp [N, H] in f32;
		// each sequence's last hidden state [B, D] and logits [B, V].
		perToken := (3*d+2*q+2*kv+3*f+widest*rank)*wb + (1+h)*f32 + 4*4
		add(true, "prefill_activations", "prefill activations", n*perToken+b*16+b*(d+v)*wb,
			"%d tokens × %d B, plus each sequence's last hidden state and logits", n, perToken)
		add(false, "sampling", "logits and sampling", b*v*f32+4*b*4, "f32 logits [%d, %d], the sampler's ids, uniforms, log-probabilities, log-sum-exps", b, v)
		return p, nil
	}
	trained, what := np, "" // the optimized parameters
	if o.LoRA != nil {
		trained, what = la, "adapter "
	}
	if ranks := int64(o.Ranks); o.Zero == 1 && ranks > 1 {
		shard := (trained + ranks - 1) / ranks
		add(false, "gradients", what+"gradients", (trained+shard)*f32, "f32, and the summed gradient of this rank's shard of %d", shard)
		add(false, "master_weights", what+"master weights", shard*f32, "f32, ZeRO-1: this rank's shard, 1/%d", ranks)
		add(false, "optimizer_state", "optimizer state", shard*8, "Adam m, v in f32, ZeRO-1: this rank's shard, 1/%d", ranks)
	} else {
		add(false, "gradients", what+"gradients", trained*f32, "f32")
		if wb != f32 {
			add(false, "master_weights", what+"master weights", trained*f32, "f32")
		}
		add(false, "optimizer_state", "optimizer state", trained*8, "Adam m, v in f32")
	}

	// The forward keeps, for the backward (ForwardTrain): token ids,
	// targets and positions [N] i32, the sequence table [B, 4] i32; per
	// layer its input res1 [N, D] (layer 0's is the embedding) and
	// layerActs: h1, o, res2, h2, down [N, D], q and att [N, H·Dh], k and v
	// [N, G·Dh], gate, up and act [N, F], x·Aᵀ [N, r] per adapted
	// projection, rstd1, rstd2 [N] and lse [N, H] in f32.
	add(true, "token_ids", "token ids and positions", n*3*4+b*16, "ids, targets, positions [%d] i32; sequence table [%d, 4]", n, b)
	layer := n * ((5*d+2*q+2*kv+3*f+targets*rank)*wb + (2+h)*f32)
	input := n * d * wb
	L := int64(c.Layers)
	if o.Recompute {
		add(true, "layer_activations", "layer activations", L*input+layer,
			"recomputed: %d layer inputs × %.1f MB, one layer's other activations %.1f MB", L, float64(input)/1e6, float64(layer)/1e6)
	} else {
		add(true, "layer_activations", "layer activations", L*(input+layer), "%d layers × %.1f MB", L, float64(input+layer)/1e6)
	}
	// The final residual and its norm [N, D], rstd, the log-probabilities
	// and the logits' log-sum-exp [N] f32; the classifier's input gradient
	// [N, D], taken before the first logits chunk.
	add(true, "final_norm", "final norm and log-probabilities", n*(2*d*wb+3*f32), "residual and norm [%d, %d], rstd, log-probabilities, log-sum-exp [%d] f32", n, d, n)
	add(true, "head_gradient", "classifier input gradient", n*d*wb, "[%d, %d]", n, d)
	// One after the other: the logits of a chunk of tokens, then the
	// backward's gradients — of the residual stream [N, D], of act, gate
	// and up [N, F], of att and q [N, H·Dh], of k and v [N, G·Dh], and the
	// LoRA scratch [k·r, N] (k the most adapted projections of one input).
	chunk := min(int64(o.LogitChunk), n)
	addTransient("logits_chunk", "logits chunk", chunk*v*wb, "%d tokens × %d", chunk, v)
	var dt int64
	if o.LoRA != nil {
		dt = widest * rank
	}
	addTransient("layer_gradients", "backward buffers", n*(d+3*f+2*q+2*kv+dt)*wb, "gradients of one layer's activations, reused by every layer")
	return p, nil
}

// Write prints the plan as a table in decimal gigabytes; transient items
// are starred.
func (p Plan) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	starred := false
	for _, it := range p.Items {
		what := it.What
		if it.Transient {
			what, starred = what+" *", true
		}
		fmt.Fprintf(tw, "%s\t%8.2f GB\t%s\n", what, float64(it.Bytes)/1e9, it.Note)
	}
	fmt.Fprintf(tw, "total\t%8.2f GB\t\n", float64(p.Total)/1e9)
	if err := tw.Flush(); err != nil {
		return err
	}
	if starred {
		_, err := fmt.Fprintln(w, "* exist one after the other: the total counts the largest")
		return err
	}
	return nil
}

// planJSON is a plan as WriteJSON writes it.
type planJSON struct {
	Model struct {
		Dim     int `json:"dim"`
		Layers  int `json:"layers"`
		Heads   int `json:"heads"`
		KVHeads int `json:"kv_heads"`
		HeadDim int `json:"head_dim"`
		FFN     int `json:"ffn"`
		Vocab   int `json:"vocab"`
	} `json:"model"`
	Mode        string `json:"mode"`
	LoRARank    int    `json:"lora_rank"`
	Batch       int    `json:"batch"`
	Seq         int    `json:"seq"`
	WeightDType string `json:"weight_dtype"`
	Recompute   bool   `json:"recompute"`
	Ranks       int    `json:"ranks"`
	Zero        int    `json:"zero"`
	Plan
}

// Title says in words what job o plans: full fine-tuning, LoRA of its
// rank, or inference (with a LoRA adapter of its rank).
func (o PlanOptions) Title() string {
	switch {
	case o.Inference && o.LoRA != nil:
		return fmt.Sprintf("inference with a LoRA adapter of rank %d", o.LoRA.Rank)
	case o.Inference:
		return "inference"
	case o.LoRA != nil:
		return fmt.Sprintf("LoRA r=%d", o.LoRA.Rank)
	}
	return "full fine-tuning"
}

// PerRank says, for a job of several ranks, that the plan is each rank's
// (", per rank of 8, ZeRO-1"); "" for one rank.
func (o PlanOptions) PerRank() string {
	if o.Ranks <= 1 {
		return ""
	}
	return fmt.Sprintf(", per rank of %d, ZeRO-%d", o.Ranks, o.Zero)
}

// WriteJSON writes the plan of architecture c for the job o as one
// indented JSON object: model (dim, layers, heads, kv_heads, head_dim, ffn,
// vocab), mode ("full", "lora" or "inference"), lora_rank (0: none), batch,
// seq, weight_dtype ("bf16" or "f32"), recompute, ranks, zero, and the plan's items,
// total_bytes and pooled_bytes.
func (p Plan) WriteJSON(w io.Writer, c Config, o PlanOptions) error {
	out := planJSON{Mode: "full", Batch: o.Batch, Seq: o.SeqLen, WeightDType: engine.F32.String(), Recompute: o.Recompute,
		Ranks: max(o.Ranks, 1), Zero: o.Zero, Plan: p}
	if o.WeightBytes == 2 {
		out.WeightDType = engine.BF16.String()
	}
	if o.LoRA != nil {
		out.Mode, out.LoRARank = "lora", o.LoRA.Rank
	}
	if o.Inference {
		out.Mode = "inference"
	}
	out.Model.Dim, out.Model.Layers, out.Model.Heads, out.Model.KVHeads = c.Dim, c.Layers, c.Heads, c.KVHeads
	out.Model.HeadDim, out.Model.FFN, out.Model.Vocab = c.HeadDim, c.FFN, c.Vocab
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
