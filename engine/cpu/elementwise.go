package cpu

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
)

// Element-wise ops: Copy, Fill, Cast, Add, Scale, AXPY. Contracts on
// engine.Backend.

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
		switch a.dt {
		case engine.F32:
			for i := lo; i < hi; i++ {
				a.f[i] = v
			}
		default:
			h := engine.F32ToBF16(v)
			if a.dt == engine.F16 {
				h = engine.F32ToF16(v)
			}
			for i := lo; i < hi; i++ {
				a.h[i] = h
			}
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
		const blk = 1024
		buf := b.scratchOf(w, blk)
		for i := lo; i < hi; i += blk {
			n := min(blk, hi-i)
			d.store(i, s.load(i, n, buf))
		}
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
	if o.dt == engine.F32 {
		b.parallel(o.len, elemGrain, func(_, lo, hi int) {
			of, pf, qf := o.f[lo:hi], p.f[lo:hi], q.f[lo:hi]
			for i := range of {
				of[i] = pf[i] + qf[i]
			}
		})
		return
	}
	b.parallel(o.len, elemGrain, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			o.set(i, p.at(i)+q.at(i))
		}
	})
}

// Scale implements engine.Backend.Scale.
func (b *Backend) Scale(x *engine.Tensor, s float32) {
	a := floatsOf(x)
	b.parallel(a.len, elemGrain, func(_, lo, hi int) {
		if a.dt == engine.F32 {
			for i := lo; i < hi; i++ {
				a.f[i] *= s
			}
			return
		}
		for i := lo; i < hi; i++ {
			a.set(i, a.at(i)*s)
		}
	})
}

// AXPY implements engine.Backend.AXPY.
func (b *Backend) AXPY(y *engine.Tensor, alpha float32, x *engine.Tensor) {
	if y.Numel() != x.Numel() {
		panic(fmt.Sprintf("cpu: AXPY: y %v and x %v differ in element count", y, x))
	}
	yy, xx := floatsOf(y), floatsOf(x)
	if yy.dt == engine.F32 && xx.dt == engine.F32 {
		b.parallel(yy.len, elemGrain, func(_, lo, hi int) {
			yf, xf := yy.f[lo:hi], xx.f[lo:hi]
			for i := range yf {
				yf[i] += alpha * xf[i]
			}
		})
		return
	}
	b.parallel(yy.len, elemGrain, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			yy.set(i, yy.at(i)+alpha*xx.at(i))
		}
	})
}
