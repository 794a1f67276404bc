package llama

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/gguf"
	"github.com/turnwise/turnwise/internal/shapecheck"
)

// ConfigFromGGUF reads a llama-architecture configuration from GGUF metadata
// and, for Llama 3.1's RoPE scaling, the rope_freqs.weight tensor
// (ggufRopeScaling). Errors name the file and the metadata key.
func ConfigFromGGUF(f *gguf.File) (Config, error) {
	arch, err := f.String("general.architecture")
	if err != nil {
		return Config{}, err
	}
	if arch != "llama" {
		return Config{}, fmt.Errorf("%s: architecture %q, want llama", f.Name, arch)
	}
	n := ggufFields(f)
	get := func(key string) int {
		if err != nil {
			return 0
		}
		var v int64
		v, err = f.Int(key)
		return clampInt(v)
	}
	c := Config{
		Dim:     get(n.Dim),
		Layers:  get(n.Layers),
		Heads:   get(n.Heads),
		FFN:     get(n.FFN),
		KVHeads: get(n.KVHeads),
	}
	if err != nil {
		return Config{}, err
	}
	opt := func(key string, def int) int {
		if err != nil {
			return 0
		}
		var v int64
		if v, err = f.Int(key); errors.Is(err, gguf.ErrKeyNotFound) {
			v, err = int64(def), nil
		}
		return clampInt(v)
	}
	c.MaxSeqLen = opt(n.MaxSeqLen, 2048)
	c.HeadDim = c.Dim / max(c.Heads, 1)
	c.RopeTheta = 10000
	if v, err := f.Float32("llama.rope.freq_base"); err == nil {
		c.RopeTheta = float64(v)
	}
	c.NormEps = 1e-5
	if v, err := f.Float32("llama.attention.layer_norm_rms_epsilon"); err == nil {
		c.NormEps = v
	}
	if toks, err := f.Strings("tokenizer.ggml.tokens"); err == nil {
		c.Vocab = len(toks)
	}
	c.Vocab = opt(ggufVocabKey, c.Vocab)
	bos, eos := opt(n.BOS, 1), opt(n.EOS, 2)
	if err != nil {
		return Config{}, err
	}
	for _, id := range []struct {
		key string
		v   int
	}{{n.BOS, bos}, {n.EOS, eos}} {
		if id.v < 0 || id.v > math.MaxInt32 {
			return Config{}, fmt.Errorf("%s: %s = %d is not a token id", f.Name, id.key, id.v)
		}
	}
	c.BOS, c.EOS = int32(bos), []int32{int32(eos)}
	_, hasHead := f.Tensor("output.weight")
	c.TiedEmbed = !hasHead
	if err := c.validate(n); err != nil {
		return Config{}, fmt.Errorf("%s: %w", f.Name, err)
	}
	if c.RopeScale, err = ggufRopeScaling(f, c.HeadDim, c.RopeTheta); err != nil {
		return Config{}, err
	}
	return c, nil
}

// ggufVocabKey is the metadata key of the vocabulary size; without it, the
// size is the length of tokenizer.ggml.tokens.
const ggufVocabKey = "llama.vocab_size"

// ggufFields names a Config's fields by the metadata keys of f that give
// them.
func ggufFields(f *gguf.File) fieldNames {
	n := fieldNames{
		Dim: "llama.embedding_length", Layers: "llama.block_count", Heads: "llama.attention.head_count",
		KVHeads: "llama.attention.head_count_kv", HeadDim: "llama.embedding_length/llama.attention.head_count",
		FFN: "llama.feed_forward_length", Vocab: ggufVocabKey,
		MaxSeqLen: "llama.context_length", NormEps: "llama.attention.layer_norm_rms_epsilon",
		RopeTheta: "llama.rope.freq_base", BOS: "tokenizer.ggml.bos_token_id", EOS: "tokenizer.ggml.eos_token_id",
	}
	if _, ok := f.Meta[ggufVocabKey]; !ok {
		n.Vocab = "the length of tokenizer.ggml.tokens"
	}
	return n
}

// clampInt converts a metadata integer to an int, saturating at the int
// range, so that the limits Validate applies see a value too large as too
// large.
func clampInt(v int64) int {
	return int(max(min(v, math.MaxInt), math.MinInt))
}

// ggufNames maps GGUF tensor names to Hugging Face names.
func ggufName(hf string, layers int) string {
	switch hf {
	case "model.embed_tokens.weight":
		return "token_embd.weight"
	case "model.norm.weight":
		return "output_norm.weight"
	case "lm_head.weight":
		return "output.weight"
	}
	var i int
	if _, err := fmt.Sscanf(hf, "model.layers.%d.", &i); err != nil {
		return ""
	}
	p, ok := layerParamOf(hf)
	if !ok {
		return ""
	}
	return fmt.Sprintf("blk.%d.%s.weight", i, p.gguf)
}

// LoadGGUF reads a llama-architecture GGUF checkpoint with F32, F16 or BF16
// tensors onto b, storing weights in dtype dt. GGUF keeps Q and K rows in
// Meta's interleaved RoPE layout; they are permuted per head to the
// rotate-half layout the model uses.
func LoadGGUF(b engine.Backend, path string, dt engine.DType) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := ConfigFromGGUF(f)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(f.Tensors))
	for i, t := range f.Tensors {
		names[i] = t.Name
	}
	held := stored{config: f.Name, names: ggufFields(f), weights: f.Name, layers: shapecheck.Layers(names, "blk."),
		tensor: func(hf string) (string, []int, string, bool) {
			name := ggufName(hf, c.Layers)
			t, ok := f.Tensor(name)
			return name, ggufShape(t), f.Name, ok
		}}
	if err := held.checkHeld(c); err != nil {
		return nil, err
	}
	w, err := allocModel(b, c, dt)
	if err != nil {
		return nil, err
	}
	w.each(func(name string, t **engine.Tensor) {
		if err != nil || (name == "lm_head.weight" && c.TiedEmbed) {
			return
		}
		gname := ggufName(name, c.Layers)
		var vals []float32
		vals, err = ggufFloats(f, gname, c.shape(name))
		if err != nil {
			return
		}
		switch {
		case strings.HasSuffix(name, "q_proj.weight"):
			vals = unInterleave(vals, c.Heads, c.HeadDim, c.Dim)
		case strings.HasSuffix(name, "k_proj.weight"):
			vals = unInterleave(vals, c.KVHeads, c.HeadDim, c.Dim)
		}
		engine.SetF32(b, *t, vals)
	})
	if err != nil {
		return nil, err
	}
	return newModel(b, c, w, dt, path)
}

// ggufShape returns t's row-major shape, the reverse of GGUF's dims.
func ggufShape(t gguf.TensorInfo) []int {
	shape := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		shape[len(shape)-1-i] = int(d)
	}
	return shape
}

// ggufFloats returns tensor name's values as float32, checking that its
// shape (row-major, the reverse of GGUF's dims) is want.
func ggufFloats(f *gguf.File, name string, want []int) ([]float32, error) {
	data, info, err := f.TensorData(name)
	if err != nil {
		return nil, err
	}
	got := ggufShape(info)
	if !engine.Shape(got).Equal(want) {
		return nil, fmt.Errorf("%s: tensor %s has shape %v, the configuration needs %v", f.Name, name, engine.Shape(got), engine.Shape(want))
	}
	n := engine.Shape(want).Numel()
	out := make([]float32, n)
	switch info.Type {
	case gguf.TypeF32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
	case gguf.TypeF16:
		for i := range out {
			out[i] = engine.F16ToF32(binary.LittleEndian.Uint16(data[2*i:]))
		}
	case gguf.TypeBF16:
		for i := range out {
			out[i] = engine.BF16ToF32(binary.LittleEndian.Uint16(data[2*i:]))
		}
	default:
		return nil, fmt.Errorf("%s: tensor %s is %v; only F32, F16 and BF16 are supported (quantized checkpoints are not)", f.Name, name, info.Type)
	}
	return out, nil
}

// unInterleave permutes the rows of a Q or K projection [heads·dh, in] from
// the interleaved RoPE layout (pairs (2i, 2i+1)) to rotate-half (pairs
// (i, i+dh/2)): within each head, row 2i goes to i and row 2i+1 to i+dh/2.
func unInterleave(w []float32, heads, dh, in int) []float32 {
	out := make([]float32, len(w))
	half := dh / 2
	for h := 0; h < heads; h++ {
		for i := 0; i < half; i++ {
			for k, dst := range [2]int{i, i + half} {
				src := (h*dh + 2*i + k) * in
				copy(out[(h*dh+dst)*in:(h*dh+dst+1)*in], w[src:src+in])
			}
		}
	}
	return out
}
