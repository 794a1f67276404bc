package cpu

import "github.com/turnwise/turnwise/engine"

// AddBias implements engine.Backend.AddBias: rows in parallel, each widened
// to f32, summed with the bias and rounded once when stored.
func (b *Backend) AddBias(x, bias *engine.Tensor) {
	n, d := engine.BiasShape("AddBias", x, bias, false)
	xs, bs := floatsOf(x), floatsOf(bias)
	b.parallel(n, max(1, elemGrain/max(d, 1)), func(wk, lo, hi int) {
		buf := b.scratchOf(wk, 2*d)
		bb := bs.load(0, d, buf[:d])
		for i := lo; i < hi; i++ {
			xr := xs.load(i*d, d, buf[d:])
			for j := range xr {
				xr[j] += bb[j]
			}
			xs.store(i*d, xr)
		}
	})
}

// AddBiasBackward implements engine.Backend.AddBiasBackward with colSums.
func (b *Backend) AddBiasBackward(db, dOut *engine.Tensor) {
	n, d := engine.BiasShape("AddBiasBackward", dOut, db, true)
	dos := floatsOf(dOut)
	b.colSums([]floats{floatsOf(db)}, n, d, 1, func(buf []float32, i int, terms []float32) {
		copy(terms, dos.load(i*d, d, buf))
	})
}
