package cpu

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
)

// SegmentSum implements engine.Backend.SegmentSum. N is a batch's token count,
// small next to the GEMMs, so one goroutine sums in index order (f64).
func (b *Backend) SegmentSum(out, x, w, seg *engine.Tensor) {
	s, xs, ws, gs := checkSegment("SegmentSum", out, x, w, seg)
	b.partials = grow(b.partials, len(s))
	acc := b.partials
	for i := range acc {
		acc[i] = 0
	}
	for i, g := range gs {
		if g >= 0 {
			acc[g] += float64(ws[i]) * float64(xs[i])
		}
	}
	for i := range s {
		s[i] += float32(acc[i])
	}
}

// SegmentSumBackward implements engine.Backend.SegmentSumBackward.
func (b *Backend) SegmentSumBackward(dx, dOut, w, seg *engine.Tensor) {
	d, dxs, ws, gs := checkSegment("SegmentSumBackward", dOut, dx, w, seg)
	for i, g := range gs {
		if g >= 0 {
			dxs[i] = ws[i] * d[g]
		} else {
			dxs[i] = 0
		}
	}
}

func checkSegment(op string, out, x, w, seg *engine.Tensor) (o, xs, ws []float32, gs []int32) {
	engine.SegmentShape(op, out, x, w, seg)
	o, xs, ws, gs = f32s(out), f32s(x), f32s(w), i32s(seg)
	for i, g := range gs {
		if int(g) >= len(o) {
			panic(fmt.Sprintf("engine: %s: seg[%d] = %d ≥ S = %d", op, i, g, len(o)))
		}
	}
	return o, xs, ws, gs
}
