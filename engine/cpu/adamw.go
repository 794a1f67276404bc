package cpu

import (
	"math"

	"github.com/turnwise/turnwise/engine"
)

// sumChunk is the fixed chunk of SumSquares: partial sums over chunks of this
// many elements are added in chunk order, whatever the thread count.
const sumChunk = 1 << 16

// SumSquares implements engine.Backend.SumSquares.
func (b *Backend) SumSquares(out, x *engine.Tensor) {
	engine.MustShape("SumSquares", "out", out, 1)
	xs := floatsOf(x)
	chunks := (xs.len + sumChunk - 1) / sumChunk
	b.partials = grow(b.partials, chunks)
	parts := b.partials
	b.parallel(chunks, 1, func(w, lo, hi int) {
		buf := b.scratchOf(w, sumChunk)
		for c := lo; c < hi; c++ {
			off := c * sumChunk
			parts[c] = sumSq(xs.load(off, min(sumChunk, xs.len-off), buf))
		}
	})
	var s float64
	for _, p := range parts[:chunks] {
		s += p
	}
	o := f32s(out)
	o[0] += float32(s)
}

// AdamW implements engine.Backend.AdamW.
func (b *Backend) AdamW(param, grad, m, v, master *engine.Tensor, p engine.AdamWParams) {
	n := engine.AdamWShape(param, grad, m, v, master, p)
	ps, gs, ms, vs := floatsOf(param), floatsOf(grad), f32s(m), f32s(v)
	var mw []float32
	if master != nil {
		mw = f32s(master)
	}
	bc1 := float32(1 - math.Pow(float64(p.Beta1), float64(p.Step)))
	bc2 := float32(math.Sqrt(1 - math.Pow(float64(p.Beta2), float64(p.Step))))
	decay := 1 - p.LR*p.WeightDecay
	step := p.LR / bc1
	b.parallel(n, elemGrain, func(wk, lo, hi int) {
		buf := b.scratchOf(wk, 2*blk)
		blocks(lo, hi, func(off, k int) {
			g := gs.load(off, k, buf[:blk]) // [k] f32 gradient
			var w []float32                 // [k] f32 weights being updated
			if mw != nil {
				w = mw[off : off+k]
			} else {
				w = ps.f[off : off+k]
			}
			adamw(w, g, ms[off:off+k], vs[off:off+k], p.GradScale, p.Beta1, p.Beta2, p.Eps, decay, step, bc2)
			if mw != nil {
				ps.store(off, w)
			}
		})
	})
}
