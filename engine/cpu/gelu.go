package cpu

import (
	"math"

	"github.com/turnwise/turnwise/engine"
)

// GELU implements engine.Backend.GELU, a block at a time: values widened to
// f32, the GELU computed in f32 (erf and tanh through float64's, rounded to
// f32) and rounded once when stored; GELUQuick rounds its intermediates to
// the storage dtype as the contract says.
func (b *Backend) GELU(out, x *engine.Tensor, k engine.GELUKind) {
	engine.GELUShape("GELU", k, out, x)
	o, xs := floatsOf(out), floatsOf(x)
	b.parallel(o.len, elemGrain, func(w, lo, hi int) {
		buf := b.scratchOf(w, 2*blk)
		blocks(lo, hi, func(off, n int) {
			xv := xs.load(off, n, buf[:blk])
			ov := buf[blk : blk+n]
			if o.dt == engine.F32 {
				ov = o.f[off : off+n]
			}
			switch k {
			case engine.GELUErf:
				for i, v := range xv {
					ov[i] = geluErf(v)
				}
			case engine.GELUTanh:
				for i, v := range xv {
					ov[i] = geluTanh(v)
				}
			case engine.GELUQuick:
				for i, v := range xv {
					ov[i] = v * o.round(sigmoid(o.round(quickAlpha*v)))
				}
			}
			o.store(off, ov)
		})
	})
}

// GELUBackward implements engine.Backend.GELUBackward.
func (b *Backend) GELUBackward(dx, dOut, x *engine.Tensor, k engine.GELUKind) {
	engine.GELUShape("GELUBackward", k, dx, x, dOut)
	dxs, dos, xs := floatsOf(dx), floatsOf(dOut), floatsOf(x)
	b.parallel(xs.len, elemGrain, func(w, lo, hi int) {
		buf := b.scratchOf(w, 3*blk)
		blocks(lo, hi, func(off, n int) {
			xv, gv := xs.load(off, n, buf[:blk]), dos.load(off, n, buf[blk:2*blk])
			dv := buf[2*blk : 2*blk+n]
			if dxs.dt == engine.F32 {
				dv = dxs.f[off : off+n]
			}
			switch k {
			case engine.GELUErf:
				for i, v := range xv {
					dv[i] = gv[i] * geluErfGrad(v)
				}
			case engine.GELUTanh:
				for i, v := range xv {
					dv[i] = gv[i] * geluTanhGrad(v)
				}
			case engine.GELUQuick:
				for i, v := range xv {
					s := sigmoid(quickAlpha * v)
					dv[i] = gv[i] * (s + quickAlpha*v*s*(1-s))
				}
			}
			dxs.store(off, dv)
		})
	})
}

// Constants of the GELUs: quick_gelu's slope, √(2/π) and the cubic
// coefficient of the tanh approximation, 1/√2 and 1/√(2π).
const (
	quickAlpha  = 1.702
	sqrt2OverPi = 0.7978845608028654
	tanhCubic   = 0.044715
	invSqrt2    = 0.7071067811865476
	invSqrt2Pi  = 0.3989422804014327
)

func sigmoid(v float32) float32 { return 1 / (1 + expf(-v)) }

// geluErf is x·Φ(x).
func geluErf(v float32) float32 {
	return 0.5 * v * (1 + float32(math.Erf(float64(v*invSqrt2))))
}

// geluErfGrad is Φ(x) + x·φ(x).
func geluErfGrad(v float32) float32 {
	cdf := 0.5 * (1 + float32(math.Erf(float64(v*invSqrt2))))
	return cdf + v*invSqrt2Pi*expf(-0.5*v*v)
}

// geluTanh is x·(1 + tanh(u))/2 with u = √(2/π)·(x + 0.044715·x³).
func geluTanh(v float32) float32 {
	u := sqrt2OverPi * (v + tanhCubic*v*v*v)
	return 0.5 * v * (1 + float32(math.Tanh(float64(u))))
}

// geluTanhGrad is the derivative of geluTanh.
func geluTanhGrad(v float32) float32 {
	u := sqrt2OverPi * (v + tanhCubic*v*v*v)
	t := float32(math.Tanh(float64(u)))
	return 0.5*(1+t) + 0.5*v*(1-t*t)*sqrt2OverPi*(1+3*tanhCubic*v*v)
}
