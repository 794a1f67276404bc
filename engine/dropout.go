package engine

import (
	"fmt"
	"math"
)

// DropoutParams select the mask and scale of Dropout: each element is
// dropped with probability P, independently, by a stateless counter-based
// hash of (Seed, the element's index) — DropoutHash — so that every backend
// drops the same elements for the same Seed, and a backward re-derives the
// forward's mask from the same parameters instead of storing it. Callers
// derive a Seed per use from a run's seed, the step and the call site with
// MixSeed.
type DropoutParams struct {
	P    float32 // drop probability, in [0, 1)
	Seed uint64
}

// Check panics unless P is in [0, 1): a programmer's mistake, as flags are
// checked before they get here.
func (p DropoutParams) Check(op string) {
	if !(p.P >= 0 && p.P < 1) {
		panic(fmt.Sprintf("%s: dropout probability %v, want [0, 1)", op, p.P))
	}
}

// Threshold is the 32-bit level below which DropoutHash drops an element:
// round(P·2³²), so that an element survives with probability 1 − P up to
// 2⁻³³.
func (p DropoutParams) Threshold() uint32 {
	return uint32(min(math.Round(float64(p.P)*(1<<32)), math.MaxUint32))
}

// Scale is 1/(1 − P) in f32: inverted dropout, which keeps each element's
// expectation.
func (p DropoutParams) Scale() float32 { return float32(1 / (1 - float64(p.P))) }

// Keep reports whether element i survives.
func (p DropoutParams) Keep(i int64) bool { return DropoutHash(p.Seed, i) >= p.Threshold() }

// DropoutHash returns the 32-bit hash of element i under seed: the high
// half of SplitMix64's (i+1)-th output from state seed. Every backend
// computes exactly this.
func DropoutHash(seed uint64, i int64) uint32 {
	return uint32(splitMix64(seed+uint64(i+1)*0x9e3779b97f4a7c15) >> 32)
}

// splitMix64 is SplitMix64's output function of state z.
func splitMix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// MixSeed returns a seed derived from seed and the values vs (a step, a
// layer, a call site), each changing the result unpredictably, so that
// the masks of different uses are independent.
func MixSeed(seed uint64, vs ...uint64) uint64 {
	z := splitMix64(seed + 0x9e3779b97f4a7c15)
	for _, v := range vs {
		z = splitMix64(z ^ splitMix64(v+0x9e3779b97f4a7c15))
	}
	return z
}
