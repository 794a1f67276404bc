package ref

import (
	"math"
	"sort"
)

// Sample draws an index from logits by the rule documented on
// engine.SampleParams, in float64.
func Sample(logits []float64, u, temperature, topP float64) int {
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
	var total float64
	for j, x := range logits {
		e[j] = math.Exp((x - m) / temperature)
		total += e[j]
	}
	mass := total
	if topP > 0 && topP < 1 {
		order := make([]int, len(e))
		for j := range order {
			order[j] = j
		}
		sort.SliceStable(order, func(a, b int) bool { return e[order[a]] > e[order[b]] })
		mass = 0
		k := 0
		for k < len(order) {
			mass += e[order[k]]
			k++
			if mass >= topP*total {
				break
			}
		}
		for _, j := range order[k:] {
			e[j] = 0
		}
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
