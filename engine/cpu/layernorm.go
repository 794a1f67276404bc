package cpu

import (
	"math"

	"github.com/turnwise/turnwise/engine"
)

// LayerNorm implements engine.Backend.LayerNorm: one goroutine per block of
// rows; mean and variance in f64 over the row's f32 values (two passes, so
// no cancellation), the row's output computed in f32 and rounded once.
func (b *Backend) LayerNorm(out, mean, rstd, x, w, bias *engine.Tensor, eps float32) {
	n, d := engine.LayerNormShape("LayerNorm", out, mean, rstd, x, w, bias)
	if bias == nil {
		panic("engine: LayerNorm: nil bias")
	}
	o, xs, ws, bs := floatsOf(out), floatsOf(x), floatsOf(w), floatsOf(bias)
	ms, rs := f32s(mean), f32s(rstd)
	b.parallel(n, 8, func(wk, lo, hi int) {
		buf := b.scratchOf(wk, 4*d)
		xb, wb, bb, ob := buf[:d], ws.load(0, d, buf[d:2*d]), bs.load(0, d, buf[2*d:3*d]), buf[3*d:]
		for i := lo; i < hi; i++ {
			xr := xs.load(i*d, d, xb)
			mu, r := meanRstd(xr, eps)
			ms[i], rs[i] = mu, r
			dst := ob
			if o.dt == engine.F32 {
				dst = o.f[i*d : (i+1)*d]
			}
			for j, v := range xr {
				dst[j] = (v-mu)*r*wb[j] + bb[j]
			}
			o.store(i*d, dst)
		}
	})
}

// meanRstd returns a row's mean and 1/sqrt(variance + eps), summed in f64.
func meanRstd(x []float32, eps float32) (mean, rstd float32) {
	var s float64
	for _, v := range x {
		s += float64(v)
	}
	mu := float32(s / float64(len(x)))
	var ss float64
	for _, v := range x {
		c := float64(v - mu)
		ss += c * c
	}
	return mu, float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
}

// LayerNormBackward implements engine.Backend.LayerNormBackward in one pass
// over the rows: fixed blocks of normRows rows (in parallel) each write dx
// row by row and sum their rows' terms of dw (dOut·n) and db (dOut) into f64
// partials while the row is loaded; addPartials then adds the partials to dw
// and db in block order and rounds once — the same sums whatever the thread
// count, and x and dOut are read once.
func (b *Backend) LayerNormBackward(dx, dw, db, dOut, x, w, mean, rstd *engine.Tensor) {
	n, d := engine.LayerNormShape("LayerNormBackward", dOut, mean, rstd, x, w, nil)
	engine.MustShape("LayerNormBackward", "dx", dx, n, d)
	engine.MustDType("LayerNormBackward", "dx", dx, x.DType())
	dxs, dos, xs, ws, ms, rs := floatsOf(dx), floatsOf(dOut), floatsOf(x), floatsOf(w), f32s(mean), f32s(rstd)
	var dsts []floats
	wantW, wantB := dw != nil, db != nil
	if wantW {
		engine.MustShape("LayerNormBackward", "dw", dw, d)
		engine.MustDType("LayerNormBackward", "dw", dw, w.DType())
		dsts = append(dsts, floatsOf(dw))
	}
	if wantB {
		engine.MustShape("LayerNormBackward", "db", db, d)
		engine.MustDType("LayerNormBackward", "db", db, w.DType())
		dsts = append(dsts, floatsOf(db))
	}
	nt := len(dsts)
	nblk := (n + normRows - 1) / normRows
	b.partials = grow(b.partials, nblk*nt*d)
	parts := b.partials // [nblk, nt·D] f64: dw's terms, then db's
	b.parallel(nblk, 1, func(wk, lo, hi int) {
		buf := b.scratchOf(wk, 4*d)
		xb, gb, ob, wb := buf[:d], buf[d:2*d], buf[2*d:3*d], ws.load(0, d, buf[3*d:])
		for k := lo; k < hi; k++ {
			acc := parts[k*nt*d : (k+1)*nt*d]
			clear(acc)
			for i := k * normRows; i < min((k+1)*normRows, n); i++ {
				xr, gr := xs.load(i*d, d, xb), dos.load(i*d, d, gb)
				mu, r := ms[i], rs[i]
				// cg = mean_j g_j, cn = mean_j g_j·n_j with g = dOut·w.
				var cg, cn float64
				for j, v := range xr {
					g := gr[j] * wb[j]
					cg += float64(g)
					cn += float64(g) * float64((v-mu)*r)
				}
				cgf, cnf := float32(cg/float64(d)), float32(cn/float64(d))
				dst := ob
				if dxs.dt == engine.F32 {
					dst = dxs.f[i*d : (i+1)*d]
				}
				for j, v := range xr {
					dst[j] = r * (gr[j]*wb[j] - cgf - (v-mu)*r*cnf)
				}
				a := acc
				if wantW {
					for j, v := range xr {
						a[j] += float64(gr[j] * ((v - mu) * r))
					}
					a = a[d:]
				}
				if wantB {
					for j, g := range gr {
						a[j] += float64(g)
					}
				}
				dxs.store(i*d, dst)
			}
		}
	})
	b.addPartials(dsts, parts, nblk, d)
}

// colSums adds to each dst[t], a [D] float vector, the sum over rows
// i = 0 … n−1 of a per-row term, rowTerms filling terms[t·D:(t+1)·D] with
// row i's terms (f32; buf holds extra·D floats of scratch for it). Fixed
// blocks of normRows rows each sum their rows into f64 partials (in
// parallel), then addPartials adds them to dst: the same sums whatever the
// thread count.
func (b *Backend) colSums(dst []floats, n, d, extra int, rowTerms func(buf []float32, i int, terms []float32)) {
	nt := len(dst)
	nblk := (n + normRows - 1) / normRows
	b.partials = grow(b.partials, nblk*nt*d)
	parts := b.partials // [nblk, nt·D] f64
	b.parallel(nblk, 1, func(wk, lo, hi int) {
		buf := b.scratchOf(wk, (nt+extra)*d)
		terms, sc := buf[:nt*d], buf[nt*d:]
		for k := lo; k < hi; k++ {
			acc := parts[k*nt*d : (k+1)*nt*d]
			clear(acc)
			for i := k * normRows; i < min((k+1)*normRows, n); i++ {
				rowTerms(sc, i, terms)
				for j, v := range terms {
					acc[j] += float64(v)
				}
			}
		}
	})
	b.addPartials(dst, parts, nblk, d)
}

// addPartials adds to each dst[t] the partials parts [nblk, len(dst)·D] in
// block order (in parallel over columns) and rounds once.
func (b *Backend) addPartials(dst []floats, parts []float64, nblk, d int) {
	nt := len(dst)
	if nt == 0 {
		return
	}
	b.parallel(nt*d, 64, func(wk, lo, hi int) {
		cur := b.scratchOf(wk, 1)
		for c := lo; c < hi; c++ {
			t, j := c/d, c%d
			s := float64(dst[t].at(j))
			for k := 0; k < nblk; k++ {
				s += parts[k*nt*d+c]
			}
			cur[0] = float32(s)
			dst[t].store(j, cur[:1])
		}
	})
}
