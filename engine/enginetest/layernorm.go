package enginetest

import (
	"fmt"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/ref"
)

// testLayerNorm checks LayerNorm against ref.LayerNorm (out, mean, rstd) and
// LayerNormBackward against finite differences of it: dx overwritten over
// arbitrary previous contents, dw and db accumulated into non-zero values;
// then with a frozen weight (dw nil) and with neither gradient, which must
// leave dx and the other increment as they were. Rows carry offsets of 1 to
// 3 (means far from zero, as the residual stream has), and the cases cover
// width 1, odd widths, CLIP's [50, 768], more rows than a GPU's row groups
// (1030, 4100: 242 groups of 17), rows of more than 256 16-byte packs (D =
// 4104: two packs per GPU thread), a weight and bias in f32 beside bf16
// activations, partials of dw and db above 48 KiB of GPU shared memory (D =
// 6200), and activations at an element offset (skip) that is not 16-byte
// aligned (1030 such elements: more than a GPU block holds in registers). A second backward into the same starting values must give the
// same bits (dw and db are summed in a fixed order).
func testLayerNorm(t *testing.T, b engine.Backend) {
	const eps = 1e-5
	cases := []struct {
		n, d  int
		wtF32 bool // weight and bias in f32 whatever the activations
		skip  int  // elements before x, dOut and dx in their buffers
	}{{1, 1, false, 0}, {3, 8, false, 0}, {17, 129, false, 0}, {50, 768, false, 0}, {5, 288, true, 0},
		{1030, 5, false, 0}, {4100, 24, false, 0}, {3, 4104, false, 0}, {2, 6200, false, 0}, {40, 64, false, 3},
		{9, 96, true, 1}, {2, 1030, false, 1}}
	for _, dt := range FloatDTypes {
		for _, c := range cases {
			wt := dt
			if c.wtF32 {
				wt = engine.F32
			}
			t.Run(fmt.Sprintf("%v_w%v/N=%d_D=%d_skip%d", dt, wt, c.n, c.d, c.skip), func(t *testing.T) {
				r := Rand(uint64(c.n*1000+c.d) + 17)
				xv := Values(r, dt, c.n*c.d, 2)
				for i := range xv {
					xv[i] = dt.Round(xv[i] + float32(1+(i/c.d)%3))
				}
				wv, bv := make([]float32, c.d), Values(r, wt, c.d, 1)
				for j := range wv {
					wv[j] = wt.Round(float32(0.5 + r.Float64()))
				}
				x, w, bias := viewAt(b, dt, xv, c.skip, c.n, c.d), engine.FromF32(b, wt, wv, c.d), engine.FromF32(b, wt, bv, c.d)
				out := viewAt(b, dt, filled(c.n*c.d, 9), c.skip, c.n, c.d)
				mean, rstd := engine.MustAlloc(b, engine.F32, c.n), engine.MustAlloc(b, engine.F32, c.n)
				b.LayerNorm(out, mean, rstd, x, w, bias, eps)
				x64, w64, b64 := F64(xv), F64(wv), F64(bv)
				wantOut, wantMean, wantR := ref.LayerNorm(x64, w64, b64, c.n, c.d, eps)
				Close(t, "out", engine.ToF32(b, out), wantOut, Tol(dt))
				Close(t, "mean", engine.ToF32(b, mean), wantMean, TolF32)
				Close(t, "rstd", engine.ToF32(b, rstd), wantR, TolF32)

				gv := Values(r, dt, c.n*c.d, 1)
				dOut := viewAt(b, dt, gv, c.skip, c.n, c.d)
				dw0, db0 := Values(r, wt, c.d, 1), Values(r, wt, c.d, 1)
				dx := viewAt(b, dt, filled(c.n*c.d, 7), c.skip, c.n, c.d)
				dw, db := engine.FromF32(b, wt, dw0, c.d), engine.FromF32(b, wt, db0, c.d)
				b.LayerNormBackward(dx, dw, db, dOut, x, w, mean, rstd)
				g64 := F64(gv)
				loss := func() float64 {
					o, _, _ := ref.LayerNorm(x64, w64, b64, c.n, c.d, eps)
					return Dot(g64, o)
				}
				dxv, dwInc, dbInc := engine.ToF32(b, dx), sub(engine.ToF32(b, dw), dw0), sub(engine.ToF32(b, db), db0)
				// A second run from the same starting values: the same bits.
				dx2 := viewAt(b, dt, filled(c.n*c.d, -1), c.skip, c.n, c.d)
				dw2, db2 := engine.FromF32(b, wt, dw0, c.d), engine.FromF32(b, wt, db0, c.d)
				b.LayerNormBackward(dx2, dw2, db2, dOut, x, w, mean, rstd)
				identical(t, "dx (second run)", engine.ToF32(b, dx2), dxv)
				identical(t, "dw (second run)", engine.ToF32(b, dw2), engine.ToF32(b, dw))
				identical(t, "db (second run)", engine.ToF32(b, db2), engine.ToF32(b, db))
				GradCheck(t, "dx", r, x64, dxv, loss, 48, GradTol(dt))
				GradCheck(t, "dw", r, w64, dwInc, loss, 48, GradTol(dt))
				GradCheck(t, "db", r, b64, dbInc, loss, 48, GradTol(dt))

				// A frozen weight: dx overwritten again (from other contents),
				// the same bits; db alone accumulated, into zero: the column
				// sums of dOut.
				engine.SetF32(b, dx, filled(c.n*c.d, -3))
				dbf := engine.MustAlloc(b, wt, c.d)
				b.LayerNormBackward(dx, nil, dbf, dOut, x, w, mean, rstd)
				Close(t, "dx (frozen weight)", engine.ToF32(b, dx), F64(dxv), 0)
				Close(t, "db (frozen weight)", engine.ToF32(b, dbf), colSums(gv, c.n, c.d), Tol(wt))
				// Neither gradient: dx alone.
				engine.SetF32(b, dx, filled(c.n*c.d, 5))
				b.LayerNormBackward(dx, nil, nil, dOut, x, w, mean, rstd)
				Close(t, "dx (frozen weight and bias)", engine.ToF32(b, dx), F64(dxv), 0)
			})
		}
	}
}

// colSums returns Σ_i x[i, j] for x n×d, in float64.
func colSums(x []float32, n, d int) []float64 {
	out := make([]float64, d)
	for i := 0; i < n; i++ {
		for j := 0; j < d; j++ {
			out[j] += float64(x[i*d+j])
		}
	}
	return out
}
