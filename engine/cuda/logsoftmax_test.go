//go:build cuda || cudaemu

package cuda

import (
	"math"
	"testing"

	"github.com/turnwise/turnwise/engine"
)

// TestLogSoftmaxNonFinite reaches a kernel path the conformance suite's
// inputs do not: rows with infinite and NaN logits.
func TestLogSoftmaxNonFinite(t *testing.T) {
	b := newBackend(t)
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	const v = 16
	rows := []struct {
		head      []float32 // the rest of the row is −Inf
		target    int32
		lse, logp float64
	}{
		{[]float32{1, 2, nan, 3}, 0, math.NaN(), math.NaN()}, // a NaN: lse NaN
		{[]float32{1, inf, 2}, 2, math.Inf(1), math.Inf(-1)}, // +Inf maximum: lse = +Inf
		{nil, 1, math.Inf(-1), math.NaN()},                   // all −Inf: lse = −Inf
		{[]float32{-inf, 3, 1}, 1, 3 + math.Log1p(math.Exp(-2)), -math.Log1p(math.Exp(-2))},
	}
	lv, tg := make([]float32, len(rows)*v), make([]int32, len(rows))
	for i, row := range rows {
		for j := 0; j < v; j++ {
			lv[i*v+j] = -inf
			if j < len(row.head) {
				lv[i*v+j] = row.head[j]
			}
		}
		tg[i] = row.target
	}
	lp, ls := engine.MustAlloc(b, engine.F32, len(rows)), engine.MustAlloc(b, engine.F32, len(rows))
	b.LogSoftmaxGather(lp, ls, engine.FromF32(b, engine.F32, lv, len(rows), v), engine.FromI32(b, tg, len(rows)))
	gotP, gotL := engine.ToF32(b, lp), engine.ToF32(b, ls)
	same := func(got float32, want float64) bool {
		g := float64(got)
		return g == want || (math.IsNaN(g) && math.IsNaN(want)) || math.Abs(g-want) <= 1e-6*math.Abs(want)
	}
	for i, row := range rows {
		if !same(gotL[i], row.lse) || !same(gotP[i], row.logp) {
			t.Errorf("row %d: lse %v, logp %v; want %v, %v", i, gotL[i], gotP[i], row.lse, row.logp)
		}
	}
}
