// Package ref holds plain float64 reference implementations of the engine's
// ops: the mathematics of each contract in engine.Backend, written for
// clarity, with no tiling, threading or reduced precision. The conformance
// suite (engine/enginetest) checks every backend against them, and takes
// finite differences of them to check every backward.
//
// One file per op family, named as in the backends: Gemm (gemm.go), RMSNorm
// (rmsnorm.go), LayerNorm (layernorm.go), RoPE (rope.go), Attention
// (attention.go), SwiGLU (swiglu.go), the GELUs (gelu.go),
// LogSoftmaxGather (logsoftmax.go), AdamW and AdamWMulti (adamw.go), Sample
// (sample.go). The element-wise ops, the bias, the embedding and the sum of
// squares need none: the suite writes their few lines inline.
//
// Where a backend rounds an intermediate to the activation dtype (as Hugging
// Face's Llama does in bf16), the reference takes a round function so that
// it can reproduce that rounding; pass Identity for exact math.
package ref

// Identity is the rounding function of exact arithmetic.
func Identity(x float64) float64 { return x }
