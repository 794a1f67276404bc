package cpu

import (
	"fmt"
	"math"

	"github.com/turnwise/turnwise/engine"
)

// RMSNorm implements engine.Backend.RMSNorm: one goroutine per block of rows.
func (b *Backend) RMSNorm(out, rstd, x, w *engine.Tensor, eps float32) {
	n, d := engine.NormShape("RMSNorm", out, rstd, x, w)
	o, xs, ws, rs := floatsOf(out), floatsOf(x), floatsOf(w), f32s(rstd)
	b.parallel(n, 8, func(wk, lo, hi int) {
		buf := b.scratchOf(wk, 3*d)
		xb, wb, ob := buf[:d], ws.load(0, d, buf[d:2*d]), buf[2*d:]
		for i := lo; i < hi; i++ {
			xr := xs.load(i*d, d, xb)
			rs[i] = normRow(o, i*d, xr, wb, ob, eps)
		}
	})
}

// AddRMSNorm implements engine.Backend.AddRMSNorm.
func (b *Backend) AddRMSNorm(resid, out, rstd, x, delta, w *engine.Tensor, eps float32) {
	n, d := engine.NormShape("AddRMSNorm", out, rstd, x, w)
	engine.MustSameShape("AddRMSNorm resid/x", resid, x)
	engine.MustSameShape("AddRMSNorm delta/x", delta, x)
	if resid.DType() != x.DType() || delta.DType() != x.DType() {
		panic(fmt.Sprintf("cpu: AddRMSNorm: resid %v, x %v, delta %v must share a dtype", resid, x, delta))
	}
	o, r, xs, ds, ws, rs := floatsOf(out), floatsOf(resid), floatsOf(x), floatsOf(delta), floatsOf(w), f32s(rstd)
	b.parallel(n, 8, func(wk, lo, hi int) {
		buf := b.scratchOf(wk, 4*d)
		xb, db, wb, ob := buf[:d], buf[d:2*d], ws.load(0, d, buf[2*d:3*d]), buf[3*d:]
		for i := lo; i < hi; i++ {
			xr := xs.load(i*d, d, xb)
			dr := ds.load(i*d, d, db)
			// xr may be resid's own storage (f32, aliased): write the sum into
			// the scratch copy first, then store.
			sum := xb[:d]
			for j := range sum {
				sum[j] = r.round(xr[j] + dr[j])
			}
			r.store(i*d, sum)
			rs[i] = normRow(o, i*d, sum, wb, ob, eps)
		}
	})
}

// normRow writes w·round(x·rstd) for one row into o at off and returns rstd.
// buf [D] holds the row before it is stored when o is not f32.
func normRow(o floats, off int, x, w, buf []float32, eps float32) float32 {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	r := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	if o.dt == engine.F32 {
		dst := o.f[off : off+len(x)]
		for j, v := range x {
			dst[j] = w[j] * (v * r)
		}
		return r
	}
	dst := buf[:len(x)]
	for j, v := range x {
		dst[j] = v * r
	}
	o.store(off, dst) // round(x·rstd) …
	o.load(off, len(x), dst)
	for j := range dst {
		dst[j] *= w[j] // … times the weight, rounded again on store
	}
	o.store(off, dst)
	return r
}

// RMSNormBackward implements engine.Backend.RMSNormBackward in one pass
// over the rows: fixed blocks of normRows rows (in parallel) each update dx
// row by row and, when dw is wanted, sum their rows' dOut·n into an f64
// partial [D] while the row is loaded; then the partials are added to dw in
// block order (in parallel over columns) and rounded once — the same sums
// whatever the thread count, and x and dOut are read once.
func (b *Backend) RMSNormBackward(dx, dw, dOut, x, w, rstd *engine.Tensor) {
	n, d := engine.NormShape("RMSNormBackward", dOut, rstd, x, w)
	engine.MustSameShape("RMSNormBackward dx/x", dx, x)
	dxs, dos, xs, ws, rs := floatsOf(dx), floatsOf(dOut), floatsOf(x), floatsOf(w), f32s(rstd)
	var dws floats
	if dw != nil {
		engine.MustShape("RMSNormBackward", "dw", dw, d)
		dws = floatsOf(dw)
	}
	nblk := (n + normRows - 1) / normRows
	var parts []float64 // [nblk, D] f64, when dw is wanted
	if dw != nil {
		b.partials = grow(b.partials, nblk*d)
		parts = b.partials
	}
	b.parallel(nblk, 1, func(wk, lo, hi int) {
		buf := b.scratchOf(wk, 4*d)
		xb, gb, db, wb := buf[:d], buf[d:2*d], buf[2*d:3*d], ws.load(0, d, buf[3*d:])
		for k := lo; k < hi; k++ {
			var acc []float64
			if parts != nil {
				acc = parts[k*d : (k+1)*d]
				clear(acc)
			}
			for i := k * normRows; i < min((k+1)*normRows, n); i++ {
				xr := xs.load(i*d, d, xb)
				gr := dos.load(i*d, d, gb)
				r := rs[i]
				// c = mean_j (dOut·w)_j · n_j
				var c float64
				for j := range xr {
					c += float64(gr[j]*wb[j]) * float64(xr[j]*r)
				}
				cf := float32(c / float64(d))
				dxr := dxs.load(i*d, d, db)
				for j := range xr {
					dxr[j] += r * (gr[j]*wb[j] - xr[j]*r*cf)
				}
				if acc != nil {
					for j := range acc {
						acc[j] += float64(gr[j] * (xr[j] * r))
					}
				}
				dxs.store(i*d, dxr)
			}
		}
	})
	if dw == nil {
		return
	}
	b.parallel(d, 64, func(wk, lo, hi int) {
		cur := dws.load(lo, hi-lo, b.scratchOf(wk, hi-lo))
		for j := lo; j < hi; j++ {
			s := float64(cur[j-lo])
			for k := 0; k < nblk; k++ {
				s += parts[k*d+j]
			}
			cur[j-lo] = float32(s)
		}
		dws.store(lo, cur)
	})
}

// normRows is the row block of the norm backwards and of colSums: each
// block's column sums form one f64 partial.
const normRows = 64
