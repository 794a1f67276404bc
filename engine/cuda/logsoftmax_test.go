//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// TestLogSoftmaxNonFinite reaches a kernel path the conformance suite's
// inputs do not: rows with infinite and NaN logits, f32 and bf16, in rows
// short enough that every thread's packs are one partial group and long
// enough that the values sit in a whole one.
func TestLogSoftmaxNonFinite(t *testing.T) {
	b := newBackend(t)
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	rows := []struct {
		head      []float32 // the rest of the row is −Inf …
		lastNaN   bool      // … but for a NaN last, among another thread's −Infs
		target    int32
		lse, logp float64
	}{
		{[]float32{1, 2, nan, 3}, false, 0, math.NaN(), math.NaN()}, // a NaN: lse NaN
		{[]float32{1, 2, 3}, true, 0, math.NaN(), math.NaN()},
		{[]float32{1, inf, 2}, false, 2, math.Inf(1), math.Inf(-1)}, // +Inf maximum: lse = +Inf
		{nil, false, 1, math.Inf(-1), math.NaN()},                   // all −Inf: lse = −Inf
		{[]float32{-inf, 3, 1}, false, 1, 3 + math.Log1p(math.Exp(-2)), -math.Log1p(math.Exp(-2))},
	}
	for _, dt := range []engine.DType{engine.F32, engine.BF16} {
		for _, v := range []int{16, 2000} {
			lv, tg := make([]float32, len(rows)*v), make([]int32, len(rows))
			for i, row := range rows {
				for j := 0; j < v; j++ {
					lv[i*v+j] = -inf
					if j < len(row.head) {
						lv[i*v+j] = row.head[j]
					}
				}
				if row.lastNaN {
					lv[i*v+v-1] = nan
				}
				tg[i] = row.target
			}
			lp, ls := engine.MustAlloc(b, engine.F32, len(rows)), engine.MustAlloc(b, engine.F32, len(rows))
			b.LogSoftmaxGather(lp, ls, engine.FromF32(b, dt, lv, len(rows), v), engine.FromI32(b, tg, len(rows)))
			gotP, gotL := engine.ToF32(b, lp), engine.ToF32(b, ls)
			same := func(got float32, want float64) bool {
				g := float64(got)
				return g == want || (math.IsNaN(g) && math.IsNaN(want)) || math.Abs(g-want) <= 1e-6*math.Abs(want)
			}
			for i, row := range rows {
				if !same(gotL[i], row.lse) || !same(gotP[i], row.logp) {
					t.Errorf("%v, width %d, row %d: lse %v, logp %v; want %v, %v", dt, v, i, gotL[i], gotP[i], row.lse, row.logp)
				}
			}
		}
	}
}

// TestLogSoftmaxViews: rows at element offsets off the 16-byte grid, widths
// that are not a multiple of a 16-byte pack and rows longer than a block's
// share of one pass, forward and backward (in place, and into a tensor at
// another offset from the grid), against the CPU backend; and reruns give
// the same bits.
func TestLogSoftmaxViews(t *testing.T) {
	b, c := newBackend(t), cpu.New(cpu.Options{})
	for _, cs := range []struct{ n, v, off, offD int }{
		{3, 13, 1, 1}, {4, 1001, 3, 0}, {2, 40000, 0, 5}, {3, 40003, 7, 7}, {2, 128256, 2, 0},
	} {
		for _, dt := range []engine.DType{engine.F32, engine.BF16, engine.F16} {
			t.Run(fmt.Sprintf("%v/N=%d_V=%d_at%d,%d", dt, cs.n, cs.v, cs.off, cs.offD), func(t *testing.T) {
				r := enginetest.Rand(uint64(cs.v + cs.off))
				lv := enginetest.Values(r, dt, cs.n*cs.v, 8)
				tg := make([]int32, cs.n)
				for i := range tg {
					tg[i] = int32(r.IntN(cs.v))
				}
				tg[0], tg[cs.n-1] = int32(cs.v-1), -1 // the last column; an ignored row
				gv := enginetest.Values(r, engine.F32, cs.n, 1)

				// The CPU backend's results.
				cl := engine.FromF32(c, dt, lv, cs.n, cs.v)
				ct, cg := engine.FromI32(c, tg, cs.n), engine.FromF32(c, engine.F32, gv, cs.n)
				clp, cls := engine.MustAlloc(c, engine.F32, cs.n), engine.MustAlloc(c, engine.F32, cs.n)
				c.LogSoftmaxGather(clp, cls, cl, ct)
				cdl := engine.MustAlloc(c, dt, cs.n, cs.v)
				c.LogSoftmaxGatherBackward(cdl, cg, cl, cls, ct)
				wantP, wantL, wantD := enginetest.F64(engine.ToF32(c, clp)), enginetest.F64(engine.ToF32(c, cls)), enginetest.F64(engine.ToF32(c, cdl))

				logits := at(b, dt, cs.off*dt.Size(), lv).Reshape(cs.n, cs.v)
				targets, g := engine.FromI32(b, tg, cs.n), engine.FromF32(b, engine.F32, gv, cs.n)
				var first [2][]float32
				for run := 0; run < 2; run++ {
					lp, ls := engine.MustAlloc(b, engine.F32, cs.n), engine.MustAlloc(b, engine.F32, cs.n)
					b.LogSoftmaxGather(lp, ls, logits, targets)
					gotP, gotL := engine.ToF32(b, lp), engine.ToF32(b, ls)
					if run == 0 {
						enginetest.Close(t, "logp", gotP, wantP, enginetest.TolF32)
						enginetest.Close(t, "lse", gotL, wantL, enginetest.TolF32)
						first = [2][]float32{gotP, gotL}
					} else {
						sameBits(t, "rerun logp", gotP, first[0])
						sameBits(t, "rerun lse", gotL, first[1])
					}
				}
				// Backward into a tensor at another offset, then in place.
				ls := engine.FromF32(b, engine.F32, engine.ToF32(c, cls), cs.n)
				dl := at(b, dt, cs.offD*dt.Size(), make([]float32, cs.n*cs.v)).Reshape(cs.n, cs.v)
				b.LogSoftmaxGatherBackward(dl, g, logits, ls, targets)
				got := engine.ToF32(b, dl)
				enginetest.Close(t, "dLogits", got, wantD, enginetest.Tol(dt))
				b.LogSoftmaxGatherBackward(logits, g, logits, ls, targets)
				sameBits(t, "in place", engine.ToF32(b, logits), got)
			})
		}
	}
}
