package enginetest

import (
	"fmt"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/ref"
)

// testRMSNorm checks RMSNorm and AddRMSNorm (in place on the residual)
// against ref.RMSNorm, and RMSNormBackward, which accumulates, against finite
// differences, with and without dw. Shapes include many of a GPU's row
// groups (4100 rows), rows of more than 256 16-byte packs (D = 4104) and
// activations at an element offset (skip) that is not 16-byte aligned (1030
// such elements: more than a GPU block holds in registers); a
// second backward from the same starting values must give the same bits.
func testRMSNorm(t *testing.T, b engine.Backend) {
	const eps = 1e-5
	cases := []struct{ n, d, skip int }{{1, 1, 0}, {3, 8, 0}, {17, 129, 0}, {2, 4096, 0}, {5, 288, 0}, {4100, 24, 0},
		{3, 4104, 0}, {40, 64, 3}, {9, 96, 1}, {2, 1030, 1}}
	for _, dt := range FloatDTypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/N=%d_D=%d_skip%d", dt, c.n, c.d, c.skip), func(t *testing.T) {
				r := Rand(uint64(c.n*1000 + c.d))
				xv, dv := Values(r, dt, c.n*c.d, 2), Values(r, dt, c.n*c.d, 1)
				wv := make([]float32, c.d)
				for j := range wv {
					wv[j] = dt.Round(float32(0.5 + r.Float64()))
				}
				x, w := viewAt(b, dt, xv, c.skip, c.n, c.d), engine.FromF32(b, dt, wv, c.d)
				out, rstd := viewAt(b, dt, filled(c.n*c.d, 9), c.skip, c.n, c.d), engine.MustAlloc(b, engine.F32, c.n)
				b.RMSNorm(out, rstd, x, w, eps)
				wantOut, wantR := ref.RMSNorm(F64(xv), F64(wv), c.n, c.d, eps, rounder(dt))
				Close(t, "out", engine.ToF32(b, out), wantOut, Tol(dt))
				Close(t, "rstd", engine.ToF32(b, rstd), wantR, TolF32)

				// Fused residual add, in place on x.
				delta := viewAt(b, dt, dv, c.skip, c.n, c.d)
				b.AddRMSNorm(x, out, rstd, x, delta, w, eps)
				sum := make([]float64, len(xv))
				for i := range sum {
					sum[i] = float64(dt.Round(xv[i] + dv[i]))
				}
				Close(t, "resid", engine.ToF32(b, x), sum, Tol(dt))
				wantOut, wantR = ref.RMSNorm(sum, F64(wv), c.n, c.d, eps, rounder(dt))
				Close(t, "fused out", engine.ToF32(b, out), wantOut, Tol(dt))
				Close(t, "fused rstd", engine.ToF32(b, rstd), wantR, TolF32)

				// Backward, accumulating into non-zero dx and dw.
				engine.SetF32(b, x, xv)
				b.RMSNorm(out, rstd, x, w, eps)
				gv := Values(r, dt, c.n*c.d, 1)
				dx0, dw0 := Values(r, dt, c.n*c.d, 1), Values(r, dt, c.d, 1)
				dx, dw := viewAt(b, dt, dx0, c.skip, c.n, c.d), engine.FromF32(b, dt, dw0, c.d)
				dOut := viewAt(b, dt, gv, c.skip, c.n, c.d)
				b.RMSNormBackward(dx, dw, dOut, x, w, rstd)
				// A second run from the same starting values: the same bits.
				dx2, dw2 := viewAt(b, dt, dx0, c.skip, c.n, c.d), engine.FromF32(b, dt, dw0, c.d)
				b.RMSNormBackward(dx2, dw2, dOut, x, w, rstd)
				identical(t, "dx (second run)", engine.ToF32(b, dx2), engine.ToF32(b, dx))
				identical(t, "dw (second run)", engine.ToF32(b, dw2), engine.ToF32(b, dw))
				x64, w64, g64 := F64(xv), F64(wv), F64(gv)
				loss := func() float64 {
					o, _ := ref.RMSNorm(x64, w64, c.n, c.d, eps, ref.Identity)
					return Dot(g64, o)
				}
				GradCheck(t, "dx", r, x64, sub(engine.ToF32(b, dx), dx0), loss, 48, GradTol(dt))
				GradCheck(t, "dw", r, w64, sub(engine.ToF32(b, dw), dw0), loss, 48, GradTol(dt))

				// A frozen weight: dw nil.
				b.RMSNormBackward(dx, nil, dOut, x, w, rstd)
			})
		}
	}
}

// sub returns a − b element-wise: the increment an accumulating op added.
func sub(a, b []float32) []float32 {
	out := make([]float32, len(a))
	for i := range a {
		out[i] = a[i] - b[i]
	}
	return out
}
