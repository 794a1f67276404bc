package llama

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/turnwise/turnwise/engine"
)

// Config is a Llama architecture.
type Config struct {
	Dim       int     // D: model width
	Layers    int     // transformer blocks
	Heads     int     // H: query heads
	KVHeads   int     // G: key/value heads (H a multiple of G)
	HeadDim   int     // Dh: width of one head (usually D/H)
	FFN       int     // F: SwiGLU hidden width
	Vocab     int     // V
	NormEps   float32 // RMSNorm epsilon
	RopeTheta float64 // RoPE base θ
	RopeScale *engine.RoPEScaling
	TiedEmbed bool // the classifier is the embedding table
	MaxSeqLen int  // longest sequence the model was trained for
	BOS       int32
	EOS       []int32
}

// Limits on a configuration's sizes. They lie far above every released
// Llama (the largest, Llama 3.1 405B, has width 16384, 126 layers, 128
// heads of 128, FFN 53248, a vocabulary of 128256 and a context of 131072)
// and low enough that every product of them the model forms (a tensor's
// elements, a layer's, the parameter count) fits an int64 many times over.
// A configuration within them is not thereby small: the loaders also check
// it against the tensors its checkpoint holds before allocating anything.
const (
	maxDim     = 1 << 16 // hidden width
	maxLayers  = 1 << 10
	maxHeads   = 1 << 10 // query and key/value heads
	maxHeadDim = 1 << 12
	maxFFN     = 1 << 20
	maxVocab   = 1 << 24 // token ids are int32
	maxSeqLen  = 1 << 24 // context length
)

// fieldNames spells a Config's fields as the source of a configuration
// does, so that errors name the field a user wrote.
type fieldNames struct {
	Dim, Layers, Heads, KVHeads, HeadDim, FFN, Vocab, MaxSeqLen string
	NormEps, RopeTheta, BOS, EOS                                string
}

// configNames are the names Validate uses.
var configNames = fieldNames{
	Dim: "dim", Layers: "layers", Heads: "heads", KVHeads: "kv_heads", HeadDim: "head_dim", FFN: "ffn",
	Vocab: "vocab", MaxSeqLen: "max_seq_len", NormEps: "norm_eps", RopeTheta: "rope_theta", BOS: "bos", EOS: "eos",
}

// Validate reports every inconsistency in c, naming the fields: sizes that
// are not positive or exceed the limits the loaders accept, heads that do
// not group, an odd head width, a non-positive epsilon or θ, BOS or EOS
// ids outside the vocabulary.
func (c Config) Validate() error { return c.validate(configNames) }

// validate is Validate with the fields named by n.
func (c Config) validate(n fieldNames) error {
	var errs []error
	size := func(name string, v, limit int) {
		switch {
		case v <= 0:
			errs = append(errs, fmt.Errorf("%s = %d, must be positive", name, v))
		case v > limit:
			errs = append(errs, fmt.Errorf("%s = %d exceeds the limit of %d", name, v, limit))
		}
	}
	size(n.Dim, c.Dim, maxDim)
	size(n.Layers, c.Layers, maxLayers)
	size(n.Heads, c.Heads, maxHeads)
	size(n.KVHeads, c.KVHeads, maxHeads)
	size(n.HeadDim, c.HeadDim, maxHeadDim)
	size(n.FFN, c.FFN, maxFFN)
	size(n.Vocab, c.Vocab, maxVocab)
	size(n.MaxSeqLen, c.MaxSeqLen, maxSeqLen)
	if c.Heads > 0 && c.KVHeads > 0 && c.Heads%c.KVHeads != 0 {
		errs = append(errs, fmt.Errorf("%s = %d is not a multiple of %s = %d", n.Heads, c.Heads, n.KVHeads, c.KVHeads))
	}
	if c.HeadDim%2 != 0 {
		errs = append(errs, fmt.Errorf("%s = %d must be even for RoPE", n.HeadDim, c.HeadDim))
	}
	if !(c.NormEps > 0) {
		errs = append(errs, fmt.Errorf("%s = %g, must be positive", n.NormEps, c.NormEps))
	}
	if !(c.RopeTheta > 0) {
		errs = append(errs, fmt.Errorf("%s = %g, must be positive", n.RopeTheta, c.RopeTheta))
	}
	if c.BOS < 0 || int(c.BOS) >= c.Vocab && c.Vocab > 0 {
		errs = append(errs, fmt.Errorf("%s = %d is outside the vocabulary of %d", n.BOS, c.BOS, c.Vocab))
	}
	for _, id := range c.EOS {
		if id < 0 || int(id) >= c.Vocab && c.Vocab > 0 {
			errs = append(errs, fmt.Errorf("%s %d is outside the vocabulary of %d", n.EOS, id, c.Vocab))
		}
	}
	return errors.Join(errs...)
}

// CheckVocab returns an error when a tokenizer of n tokens has ids outside
// the model's vocabulary.
func (c Config) CheckVocab(n int) error {
	if n > c.Vocab {
		return fmt.Errorf("the tokenizer has %d tokens, the model's vocabulary %d", n, c.Vocab)
	}
	return nil
}

// Params returns the number of parameters.
func (c Config) Params() int64 {
	d := int64(c.Dim)
	var layer int64
	for _, p := range layerParams {
		n := int64(1)
		for _, w := range p.shape {
			n *= int64(c.extent(w, configNames).N)
		}
		layer += n
	}
	n := int64(c.Layers)*layer + int64(c.Vocab)*d + d
	if !c.TiedEmbed {
		n += int64(c.Vocab) * d
	}
	return n
}

// PresetNames lists the names Preset knows.
func PresetNames() []string {
	return []string{"llama-3.1-8b", "llama-3.2-1b", "ref24M", "tiny"}
}

// Preset returns a named architecture: "llama-3.1-8b" and "llama-3.2-1b"
// (Meta's released shapes, 8.03 B and 1.24 B parameters), "ref24M" (the
// 24.4 M-parameter reference configuration of the CPU speed comparisons)
// and "tiny" (156 k parameters, for tests).
func Preset(name string) (Config, error) {
	llama3 := func(factor float64) *engine.RoPEScaling {
		return &engine.RoPEScaling{Factor: factor, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}
	}
	llama3EOS := []int32{128001, 128008, 128009}
	switch name {
	case "llama-3.1-8b":
		return Config{
			Dim: 4096, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 14336, Vocab: 128256,
			NormEps: 1e-5, RopeTheta: 500000, RopeScale: llama3(8), MaxSeqLen: 131072,
			BOS: 128000, EOS: llama3EOS,
		}, nil
	case "llama-3.2-1b":
		return Config{
			Dim: 2048, Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64, FFN: 8192, Vocab: 128256,
			NormEps: 1e-5, RopeTheta: 500000, RopeScale: llama3(32), TiedEmbed: true, MaxSeqLen: 131072,
			BOS: 128000, EOS: llama3EOS,
		}, nil
	case "ref24M":
		return Config{
			Dim: 288, Layers: 6, Heads: 6, KVHeads: 6, HeadDim: 48, FFN: 768, Vocab: 32000,
			NormEps: 1e-5, RopeTheta: 10000, MaxSeqLen: 256, BOS: 1, EOS: []int32{2},
		}, nil
	case "tiny":
		return Config{
			Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 172, Vocab: 512,
			NormEps: 1e-5, RopeTheta: 10000, MaxSeqLen: 256, BOS: 1, EOS: []int32{2},
		}, nil
	}
	return Config{}, fmt.Errorf("unknown preset %q (known: %v)", name, PresetNames())
}

// Describe writes the architecture and its parameter counts, with those of
// LoRA adapters of rank 8, 16 and 64 on every projection, as lines of text.
func (c Config) Describe(w io.Writer) error {
	fmt.Fprintf(w, "dim %d, layers %d, heads %d, kv heads %d (GQA %d:1), head dim %d, ffn %d, vocab %d\n",
		c.Dim, c.Layers, c.Heads, c.KVHeads, c.Heads/c.KVHeads, c.HeadDim, c.FFN, c.Vocab)
	fmt.Fprintf(w, "RMSNorm eps %g, RoPE θ %g", c.NormEps, c.RopeTheta)
	if s := c.RopeScale; s != nil {
		fmt.Fprintf(w, " with llama3 scaling (factor %g, low %g, high %g, original context %d)", s.Factor, s.LowFreqFactor, s.HighFreqFactor, s.OriginalContext)
	}
	fmt.Fprintf(w, ", tied embeddings %v, max sequence %d\n", c.TiedEmbed, c.MaxSeqLen)
	fmt.Fprintf(w, "parameters: %d (%.2f B); %.2f GB in bf16\n", c.Params(), float64(c.Params())/1e9, float64(2*c.Params())/1e9)
	for _, r := range []int{8, 16, 64} {
		n, err := c.LoRAParams(LoRAConfig{Rank: r, Targets: AllProjections})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "LoRA r=%d on %s: %d parameters (%.2f M)\n", r, strings.Join(AllProjections, ","), n, float64(n)/1e6)
	}
	return nil
}
