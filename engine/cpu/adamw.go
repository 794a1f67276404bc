package cpu

import (
	"math"
	"sort"

	"github.com/turnwise/turnwise/engine"
)

// adamwStep holds one AdamW update's f32 constants, formed once per call
// as kernels/adamw.cu forms them: decay = 1 − LR·WeightDecay,
// step = LR/bc1, bc2 = sqrt(1 − β2^t).
type adamwStep struct {
	gscale, b1, b2, eps, decay, step, bc2 float32
}

func newAdamwStep(p engine.AdamWParams) adamwStep {
	bc1 := float32(1 - math.Pow(float64(p.Beta1), float64(p.Step)))
	return adamwStep{
		gscale: p.GradScale, b1: p.Beta1, b2: p.Beta2, eps: p.Eps,
		decay: 1 - p.LR*p.WeightDecay,
		step:  p.LR / bc1,
		bc2:   float32(math.Sqrt(1 - math.Pow(float64(p.Beta2), float64(p.Step)))),
	}
}

// update applies the step to elements [lo, hi) of one parameter: ps are its
// weights, master its f32 master copy (nil: none, ps is f32), g its gradient
// from flat element gOff on, and m, v its moments (indexed like ps). buf is
// scratch of at least blk floats. Each element's arithmetic (vec.c) does not
// depend on where a block starts, so neither does the result.
func (h adamwStep) update(ps floats, master []float32, g floats, gOff int, m, v []float32, lo, hi int, buf []float32) {
	blocks(lo, hi, func(off, k int) {
		gk := g.load(gOff+off, k, buf[:blk]) // [k] f32 gradient
		var w []float32                      // [k] f32 weights being updated
		if master != nil {
			w = master[off : off+k]
		} else {
			w = ps.f[off : off+k]
		}
		adamw(w, gk, m[off:off+k], v[off:off+k], h.gscale, h.b1, h.b2, h.eps, h.decay, h.step, h.bc2)
		if master != nil {
			ps.store(off, w)
		}
	})
}

// AdamW implements engine.Backend.AdamW.
func (b *Backend) AdamW(param, grad, m, v, master *engine.Tensor, p engine.AdamWParams) {
	n := engine.AdamWShape(param, grad, m, v, master, p)
	ps, gs, ms, vs := floatsOf(param), floatsOf(grad), f32s(m), f32s(v)
	var mw []float32
	if master != nil {
		mw = f32s(master)
	}
	h := newAdamwStep(p)
	b.parallel(n, elemGrain, func(wk, lo, hi int) {
		h.update(ps, mw, gs, 0, ms, vs, lo, hi, b.scratchOf(wk, blk))
	})
}

// multiPiece is the flat elements AdamWMulti hands a worker at a time.
const multiPiece = 1 << 16

// AdamWMulti implements engine.Backend.AdamWMulti: the flat range [0, End)
// is cut into pieces of multiPiece elements that the workers claim one
// after another (a worker held up by the machine does not hold the others
// up), and each updates the parts of the spans in its piece (the gaps
// between spans are skipped). Which worker updates an element does not
// change its bits.
func (b *Backend) AdamWMulti(t *engine.ParamTable, grad, m, v, master *engine.Tensor, p engine.AdamWParams) {
	engine.AdamWMultiShape(t, grad, m, v, master, p)
	spans := t.Spans()
	gs, ms, vs := floatsOf(grad), f32s(m), f32s(v)
	var mw []float32
	if master != nil {
		mw = f32s(master)
	}
	h := newAdamwStep(p)
	b.attnItems((t.End()+multiPiece-1)/multiPiece, func(wk, piece int) {
		buf := b.scratchOf(wk, blk)
		lo, hi := piece*multiPiece, min((piece+1)*multiPiece, t.End())
		// The first span that ends after lo.
		i := sort.Search(len(spans), func(i int) bool { return spans[i].Off+spans[i].W.Numel() > lo })
		for ; i < len(spans) && spans[i].Off < hi; i++ {
			s := spans[i]
			n := s.W.Numel()
			var sm []float32 // [n] the span's master, or nil
			if s.MasterOff >= 0 {
				sm = mw[s.MasterOff : s.MasterOff+n]
			}
			h.update(floatsOf(s.W), sm, gs, s.Off, ms[s.Off:s.Off+n], vs[s.Off:s.Off+n],
				max(lo, s.Off)-s.Off, min(hi, s.Off+n)-s.Off, buf)
		}
	})
}
