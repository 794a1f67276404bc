package cpu

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
)

// Element-wise ops: Copy, Fill, Cast, Add, Scale, AXPY. Contracts on
// engine.Backend. Non-f32 data is widened to f32 a block at a time
// (see blocks), computed on, and rounded once when stored.

const elemGrain = 1 << 14 // elements per goroutine at least

// Copy implements engine.Backend.Copy.
func (b *Backend) Copy(dst, src *engine.Tensor) {
	if dst.DType() != src.DType() || dst.Numel() != src.Numel() {
		panic(fmt.Sprintf("cpu: Copy: dst %v, src %v differ in dtype or element count", dst, src))
	}
	copy(bytesOf(dst), bytesOf(src))
}

// Fill implements engine.Backend.Fill.
func (b *Backend) Fill(x *engine.Tensor, v float32) {
	if x.DType() == engine.I32 {
		xs := i32s(x)
		for i := range xs {
			xs[i] = int32(v)
		}
		return
	}
	a := floatsOf(x)
	b.parallel(a.len, elemGrain, func(_, lo, hi int) {
		if a.dt == engine.F32 {
			for i := lo; i < hi; i++ {
				a.f[i] = v
			}
			return
		}
		h := engine.F32ToBF16(v)
		if a.dt == engine.F16 {
			h = engine.F32ToF16(v)
		}
		for i := lo; i < hi; i++ {
			a.h[i] = h
		}
	})
}

// Cast implements engine.Backend.Cast.
func (b *Backend) Cast(dst, src *engine.Tensor) {
	if dst.Numel() != src.Numel() {
		panic(fmt.Sprintf("cpu: Cast: dst %v and src %v differ in element count", dst, src))
	}
	if dst.DType() == src.DType() {
		b.Copy(dst, src)
		return
	}
	d, s := floatsOf(dst), floatsOf(src)
	b.parallel(d.len, elemGrain, func(w, lo, hi int) {
		buf := b.scratchOf(w, blk)
		blocks(lo, hi, func(off, n int) { d.store(off, s.load(off, n, buf)) })
	})
}

// Add implements engine.Backend.Add.
func (b *Backend) Add(out, x, y *engine.Tensor) {
	engine.MustSameShape("Add", out, x)
	engine.MustSameShape("Add", out, y)
	if out.DType() != x.DType() || out.DType() != y.DType() {
		panic(fmt.Sprintf("cpu: Add: dtypes differ: out %v, a %v, b %v", out, x, y))
	}
	o, p, q := floatsOf(out), floatsOf(x), floatsOf(y)
	b.parallel(o.len, elemGrain, func(w, lo, hi int) {
		buf := b.scratchOf(w, 3*blk)
		blocks(lo, hi, func(off, n int) {
			pv, qv := p.load(off, n, buf[:blk]), q.load(off, n, buf[blk:2*blk])
			ov := buf[2*blk : 2*blk+n]
			if o.dt == engine.F32 {
				ov = o.f[off : off+n]
			}
			for i := range ov {
				ov[i] = pv[i] + qv[i]
			}
			o.store(off, ov)
		})
	})
}
