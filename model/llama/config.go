// Package llama is the Llama model family (Llama 2 tiny checkpoints through
// Llama 3.1/3.2) written against engine.Backend alone: configuration, weights,
// the forward pass with a KV cache, and generation. The same code runs on the
// CPU backend, on the CUDA kernel emulator and on a GPU.
package llama

import (
	"errors"
	"fmt"

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

// Validate reports the first inconsistency in c, naming the fields.
func (c Config) Validate() error {
	var errs []error
	pos := func(name string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s = %d, must be positive", name, v))
		}
	}
	pos("dim", c.Dim)
	pos("layers", c.Layers)
	pos("heads", c.Heads)
	pos("kv_heads", c.KVHeads)
	pos("head_dim", c.HeadDim)
	pos("ffn", c.FFN)
	pos("vocab", c.Vocab)
	if c.Heads > 0 && c.KVHeads > 0 && c.Heads%c.KVHeads != 0 {
		errs = append(errs, fmt.Errorf("heads = %d is not a multiple of kv_heads = %d", c.Heads, c.KVHeads))
	}
	if c.HeadDim%2 != 0 {
		errs = append(errs, fmt.Errorf("head_dim = %d must be even for RoPE", c.HeadDim))
	}
	if !(c.NormEps > 0) {
		errs = append(errs, fmt.Errorf("norm_eps = %g, must be positive", c.NormEps))
	}
	if !(c.RopeTheta > 0) {
		errs = append(errs, fmt.Errorf("rope_theta = %g, must be positive", c.RopeTheta))
	}
	if c.BOS < 0 || int(c.BOS) >= c.Vocab && c.Vocab > 0 {
		errs = append(errs, fmt.Errorf("bos = %d outside the vocabulary of %d", c.BOS, c.Vocab))
	}
	return errors.Join(errs...)
}

// Params returns the number of parameters.
func (c Config) Params() int64 {
	d, hd := int64(c.Dim), int64(c.HeadDim)
	attn := d*int64(c.Heads)*hd*2 + d*int64(c.KVHeads)*hd*2 // q, o; k, v
	mlp := 3 * d * int64(c.FFN)
	layer := attn + mlp + 2*d
	n := int64(c.Layers)*layer + int64(c.Vocab)*d + d
	if !c.TiedEmbed {
		n += int64(c.Vocab) * d
	}
	return n
}
