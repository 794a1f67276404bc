package cpu

import "github.com/turnwise/turnwise/engine"

// SwiGLU implements engine.Backend.SwiGLU with the vector loop of vec.c, a
// block at a time.
func (b *Backend) SwiGLU(out, gate, up *engine.Tensor) {
	engine.SwiGLUShape("SwiGLU", out, gate, up)
	o, g, u := floatsOf(out), floatsOf(gate), floatsOf(up)
	round := o.dt == engine.BF16
	b.parallel(o.len, elemGrain, func(w, lo, hi int) {
		buf := b.scratchOf(w, 3*blk)
		blocks(lo, hi, func(off, n int) {
			gv, uv := g.load(off, n, buf[:blk]), u.load(off, n, buf[blk:2*blk])
			ov := buf[2*blk : 2*blk+n]
			if o.dt == engine.F32 {
				ov = o.f[off : off+n]
			}
			if o.dt == engine.F16 {
				swigluRounded(gv, uv, ov, engine.RoundF16)
			} else {
				swiglu(gv, uv, ov, round)
			}
			o.store(off, ov)
		})
	})
}

// SwiGLUBackward implements engine.Backend.SwiGLUBackward.
func (b *Backend) SwiGLUBackward(dGate, dUp, dOut, gate, up *engine.Tensor) {
	engine.SwiGLUShape("SwiGLUBackward", dOut, gate, up)
	engine.MustSameShape("SwiGLUBackward dGate", dGate, gate)
	engine.MustSameShape("SwiGLUBackward dUp", dUp, gate)
	dg, du, do, g, u := floatsOf(dGate), floatsOf(dUp), floatsOf(dOut), floatsOf(gate), floatsOf(up)
	round := g.dt == engine.BF16
	b.parallel(g.len, elemGrain, func(w, lo, hi int) {
		buf := b.scratchOf(w, 5*blk)
		blocks(lo, hi, func(off, n int) {
			gv, uv, dv := g.load(off, n, buf[:blk]), u.load(off, n, buf[blk:2*blk]), do.load(off, n, buf[2*blk:3*blk])
			dgv, duv := buf[3*blk:3*blk+n], buf[4*blk:4*blk+n]
			if dg.dt == engine.F32 {
				dgv = dg.f[off : off+n]
			}
			if du.dt == engine.F32 {
				duv = du.f[off : off+n]
			}
			if g.dt == engine.F16 {
				swigluBwdRounded(gv, uv, dv, dgv, duv, engine.RoundF16)
			} else {
				swigluBwd(gv, uv, dv, dgv, duv, round)
			}
			dg.store(off, dgv)
			du.store(off, duv)
		})
	})
}

// swigluRounded is the vector loop's scalar twin for dtypes vec.c does not
// round to (f16): out = round(silu(g))·u.
func swigluRounded(g, u, out []float32, round func(float32) float32) {
	for i, gv := range g {
		out[i] = round(gv/(1+expf(-gv))) * u[i]
	}
}

// swigluBwdRounded is the backward of swigluRounded.
func swigluBwdRounded(g, u, dout, dg, du []float32, round func(float32) float32) {
	for i, gv := range g {
		s := 1 / (1 + expf(-gv))
		dg[i] = dout[i] * u[i] * (s * (1 + gv*(1-s)))
		du[i] = dout[i] * round(gv*s)
	}
}
