package ref

import (
	"math"
	"sort"
)

// Sample draws an index from logits by the rule documented on
// engine.SampleParams, in float64: temperature, then the topK heaviest
// tokens (0: all), then the top-p nucleus among them.
func Sample(logits []float64, u, temperature, topP float64, topK int) int {
	if temperature <= 0 {
		best := 0
		for j, x := range logits {
			if x > logits[best] {
				best = j
			}
		}
		return best
	}
	m := math.Inf(-1)
	for _, x := range logits {
		m = math.Max(m, x)
	}
	e := make([]float64, len(logits))
	for j, x := range logits {
		e[j] = math.Exp((x - m) / temperature)
	}
	// The ranking: descending weight, the lower index first among equals.
	order := make([]int, len(e))
	for j := range order {
		order[j] = j
	}
	sort.SliceStable(order, func(a, b int) bool { return e[order[a]] > e[order[b]] })
	keep := len(order) // candidates: order[:keep]
	var mass float64   // their total: in index order for all tokens, else in rank order
	if topK > 0 && topK < keep {
		keep = topK
		for _, j := range order[:keep] {
			mass += e[j]
		}
	} else {
		for _, w := range e {
			mass += w
		}
	}
	if topP > 0 && topP < 1 {
		target := topP * mass
		mass = 0
		k := 0
		for k < keep {
			mass += e[order[k]]
			k++
			if mass >= target {
				break
			}
		}
		keep = k
	}
	for _, j := range order[keep:] {
		e[j] = 0
	}
	var c float64
	last := 0
	for j, w := range e {
		c += w
		if w > 0 {
			last = j
		}
		if c > u*mass {
			return j
		}
	}
	return last
}
