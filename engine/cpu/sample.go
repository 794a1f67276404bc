package cpu

import (
	"cmp"
	"math"
	"slices"

	"github.com/turnwise/turnwise/engine"
)

// Sample implements engine.Backend.Sample; rows in parallel.
func (b *Backend) Sample(ids, logits, u *engine.Tensor, p engine.SampleParams) {
	n, v := engine.SampleShape(ids, logits, u)
	out, us, lg := i32s(ids), f32s(u), floatsOf(logits)
	b.parallel(n, 1, func(w, lo, hi int) {
		buf := b.scratchOf(w, v)
		for i := lo; i < hi; i++ {
			row := lg.load(i*v, v, buf)
			if lg.dt == engine.F32 {
				row = append(buf[:0], row...) // keep the caller's logits intact
			}
			out[i] = int32(b.sampleRow(w, row, us[i], p))
		}
	})
}

// sampleRow draws one index from row (which it overwrites) with uniform u.
func (b *Backend) sampleRow(w int, row []float32, u float32, p engine.SampleParams) int {
	if p.Temperature <= 0 {
		best := 0
		for j, x := range row {
			if x > row[best] {
				best = j
			}
		}
		return best
	}
	// Probabilities ∝ exp((x − max)/T).
	m := float32(math.Inf(-1))
	for _, x := range row {
		m = max(m, x)
	}
	inv := 1 / p.Temperature
	var total float64
	for j, x := range row {
		e := float32(math.Exp(float64((x - m) * inv)))
		row[j] = e
		total += float64(e)
	}
	if p.TopP <= 0 || p.TopP >= 1 {
		return drawIndexOrder(row, float64(u)*total)
	}
	// Nucleus: rank by weight, descending, ties by index.
	b.iscratch[w] = grow(b.iscratch[w], len(row))
	order := b.iscratch[w]
	for j := range order {
		order[j] = int32(j)
	}
	slices.SortFunc(order, func(x, y int32) int {
		if c := cmp.Compare(row[y], row[x]); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	keep, mass := 0, 0.0
	for keep < len(order) {
		mass += float64(row[order[keep]])
		keep++
		if mass >= float64(p.TopP)*total {
			break
		}
	}
	// Zero the tokens outside the nucleus, then draw in index order.
	for _, j := range order[keep:] {
		row[j] = 0
	}
	return drawIndexOrder(row, float64(u)*mass)
}

// drawIndexOrder returns the first index at which the running sum of the
// weights exceeds target, or the last positive weight's index when rounding
// leaves target at the very end of the sum.
func drawIndexOrder(row []float32, target float64) int {
	var c float64
	for j, e := range row {
		c += float64(e)
		if c > target {
			return j
		}
	}
	return lastPositive(row)
}

// lastPositive returns the last index with a positive weight.
func lastPositive(row []float32) int {
	for j := len(row) - 1; j >= 0; j-- {
		if row[j] > 0 {
			return j
		}
	}
	return 0
}
