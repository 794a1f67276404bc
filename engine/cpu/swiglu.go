package cpu

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
)

// SwiGLU implements engine.Backend.SwiGLU.
func (b *Backend) SwiGLU(out, gate, up *engine.Tensor) {
	checkSwiGLU("SwiGLU", out, gate, up)
	o, g, u := floatsOf(out), floatsOf(gate), floatsOf(up)
	b.parallel(o.len, elemGrain, func(_, lo, hi int) {
		if o.dt == engine.F32 {
			of, gf, uf := o.f[lo:hi], g.f[lo:hi], u.f[lo:hi]
			for i, gv := range gf {
				of[i] = gv * sigmoid(gv) * uf[i]
			}
			return
		}
		for i := lo; i < hi; i++ {
			gv := g.at(i)
			o.set(i, o.round(gv*sigmoid(gv))*u.at(i))
		}
	})
}

// SwiGLUBackward implements engine.Backend.SwiGLUBackward.
func (b *Backend) SwiGLUBackward(dGate, dUp, dOut, gate, up *engine.Tensor) {
	checkSwiGLU("SwiGLUBackward", dOut, gate, up)
	engine.MustSameShape("SwiGLUBackward dGate", dGate, gate)
	engine.MustSameShape("SwiGLUBackward dUp", dUp, gate)
	dg, du, do, g, u := floatsOf(dGate), floatsOf(dUp), floatsOf(dOut), floatsOf(gate), floatsOf(up)
	b.parallel(g.len, elemGrain, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			gv, d := g.at(i), do.at(i)
			s := sigmoid(gv)
			silu := g.round(gv * s)
			dg.set(i, d*u.at(i)*s*(1+gv*(1-s)))
			du.set(i, d*silu)
		}
	})
}

func checkSwiGLU(op string, out, gate, up *engine.Tensor) {
	engine.MustSameShape(op+" gate", out, gate)
	engine.MustSameShape(op+" up", out, up)
	if out.DType() != gate.DType() || out.DType() != up.DType() {
		panic(fmt.Sprintf("engine: %s: dtypes differ: %v, gate %v, up %v", op, out, gate, up))
	}
}
