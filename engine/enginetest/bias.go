package enginetest

import (
	"fmt"
	"testing"

	"github.com/turnwise/turnwise/engine"
)

// testBias checks AddBias, in place, against x + b computed in f32 and
// rounded once (bit for bit: there is one way to do it), and
// AddBiasBackward, which accumulates into a non-zero db of f32 or of the
// activations' dtype, against finite differences of the float64 sum and
// against the float64 column sums. Shapes include one element, odd widths,
// CLIP's [50, 768], more rows than one row group of a GPU's column sum (130,
// 1030), many groups (4100 rows: 65 groups of 64), and views that start one
// or eight elements into their buffer (unaligned, or aligned only for
// bf16). A second AddBiasBackward into the same starting values must give
// the same bits (the column sums have a fixed order).
func testBias(t *testing.T, b engine.Backend) {
	cases := []struct{ n, d, skip int }{{1, 1, 0}, {3, 37, 0}, {130, 64, 0}, {50, 768, 0}, {1030, 5, 0}, {4100, 24, 0},
		{4, 16, 1}, {70, 32, 8}}
	for _, dt := range FloatDTypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/N=%d_D=%d_offset%d", dt, c.n, c.d, c.skip), func(t *testing.T) {
				r := Rand(uint64(c.n*1000+c.d) + 41)
				xv, bv := Values(r, dt, c.n*c.d, 2), Values(r, dt, c.d, 1)
				x := viewAt(b, dt, xv, c.skip, c.n, c.d)
				b.AddBias(x, engine.FromF32(b, dt, bv, c.d))
				want := make([]float64, len(xv))
				for i, v := range xv {
					want[i] = float64(dt.Round(v + bv[i%c.d]))
				}
				Close(t, "x + b", engine.ToF32(b, x), want, 0)

				gv := Values(r, dt, c.n*c.d, 1)
				dOut := viewAt(b, dt, gv, c.skip, c.n, c.d)
				x64, b64, g64 := F64(xv), F64(bv), F64(gv)
				loss := func() float64 {
					var s float64
					for i, v := range x64 {
						s += g64[i] * (v + b64[i%c.d])
					}
					return s
				}
				for _, bt := range []engine.DType{engine.F32, dt} {
					db0 := Values(r, bt, c.d, 1)
					db := engine.FromF32(b, bt, db0, c.d)
					b.AddBiasBackward(db, dOut)
					inc := sub(engine.ToF32(b, db), db0)
					GradCheck(t, fmt.Sprintf("db %v", bt), r, b64, inc, loss, 48, GradTol(bt))
					want := colSums(gv, c.n, c.d)
					for j := range want {
						want[j] += float64(db0[j])
					}
					Close(t, fmt.Sprintf("db %v against the column sums", bt), engine.ToF32(b, db), want, Tol(bt))
					again := engine.FromF32(b, bt, db0, c.d)
					b.AddBiasBackward(again, dOut)
					identical(t, fmt.Sprintf("db %v (second run)", bt), engine.ToF32(b, again), engine.ToF32(b, db))
				}
			})
		}
	}
}
