package cpu

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
)

// Dropout implements engine.Backend.Dropout, a block at a time: values
// widened to f32, each kept one multiplied by the scale in f32 and rounded
// once when stored. Each element's mask is engine.DropoutHash of its own
// index, so the result does not depend on the thread count.
func (b *Backend) Dropout(out, x *engine.Tensor, p engine.DropoutParams) {
	engine.MustSameShape("Dropout", out, x)
	if out.DType() != x.DType() {
		panic(fmt.Sprintf("cpu: Dropout: dtypes differ: out %v, x %v", out, x))
	}
	p.Check("cpu: Dropout")
	thr, scale := p.Threshold(), p.Scale()
	o, xs := floatsOf(out), floatsOf(x)
	b.parallel(o.len, elemGrain, func(w, lo, hi int) {
		buf := b.scratchOf(w, 2*blk)
		blocks(lo, hi, func(off, n int) {
			xv := xs.load(off, n, buf[:blk])
			ov := buf[blk : blk+n]
			if o.dt == engine.F32 {
				ov = o.f[off : off+n]
			}
			for i, v := range xv {
				if engine.DropoutHash(p.Seed, int64(off+i)) >= thr {
					ov[i] = v * scale
				} else {
					ov[i] = 0
				}
			}
			o.store(off, ov)
		})
	})
}
