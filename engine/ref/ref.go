// Package ref holds plain float64 reference implementations of the engine's
// ops: the mathematics of each contract in engine.Backend, written for
// clarity, with no tiling, threading or reduced precision. The conformance
// suite (engine/enginetest) checks every backend against them, and takes
// finite differences of them to check every backward.
//
// Where a backend rounds an intermediate to the activation dtype (as Hugging
// Face's Llama does in bf16), the reference takes a round function so that
// it can reproduce that rounding; pass Identity for exact math.
package ref

// Identity is the rounding function of exact arithmetic.
func Identity(x float64) float64 { return x }
