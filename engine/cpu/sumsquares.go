package cpu

import "github.com/turnwise/turnwise/engine"

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
