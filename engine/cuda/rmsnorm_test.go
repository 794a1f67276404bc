//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/enginetest"
	"github.com/turnwise/turnwise/engine/ref"
)

// Kernel paths of the rmsnorm family that the conformance suite's shapes do
// not reach: the RMSNorm backward with many row groups and slots, rows of
// two packs per thread, a dw partial above 48 KiB of shared memory (the
// wide-row kernel), and an f32 weight with bf16 activations. Shapes stay
// small: the emulator runs every thread.

func TestRMSNormBackwardGroups(t *testing.T) {
	b := newBackend(t)
	cases := []struct {
		n, d   int
		dt, wt engine.DType
	}{
		{1100, 24, engine.F32, engine.F32},   // 69 groups of 16 rows (the last 12), four row slots
		{2100, 9, engine.BF16, engine.BF16},  // 132 groups of 16 rows (the last 4), element by element
		{300, 16, engine.BF16, engine.F32},   // f32 weight, bf16 activations
		{37, 4096, engine.BF16, engine.BF16}, // Llama's width: two packs per thread, two row slots
		{3, 12800, engine.F32, engine.F32},   // wide rows: dw partial of 50 KiB in shared memory
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v_w%v/N=%d_D=%d", c.dt, c.wt, c.n, c.d), func(t *testing.T) {
			r := enginetest.Rand(uint64(c.n*c.d) + 3)
			xv, gv := enginetest.Values(r, c.dt, c.n*c.d, 2), enginetest.Values(r, c.dt, c.n*c.d, 1)
			dx0, dw0 := enginetest.Values(r, c.dt, c.n*c.d, 1), enginetest.Values(r, c.wt, c.d, 1)
			wv := make([]float32, c.d)
			for j := range wv {
				wv[j] = c.wt.Round(float32(0.5 + r.Float64()))
			}
			x, w := engine.FromF32(b, c.dt, xv, c.n, c.d), engine.FromF32(b, c.wt, wv, c.d)
			out, rstd := engine.MustAlloc(b, c.dt, c.n, c.d), engine.MustAlloc(b, engine.F32, c.n)
			b.RMSNorm(out, rstd, x, w, 1e-5)
			round := func(v float64) float64 { return float64(c.dt.Round(float32(v))) }
			wantOut, wantR := ref.RMSNorm(enginetest.F64(xv), enginetest.F64(wv), c.n, c.d, 1e-5, round)
			enginetest.Close(t, "out", engine.ToF32(b, out), wantOut, enginetest.Tol(c.dt))
			enginetest.Close(t, "rstd", engine.ToF32(b, rstd), wantR, enginetest.TolF32)

			backward := func() (dx, dw []float32) {
				dxt, dwt := engine.FromF32(b, c.dt, dx0, c.n, c.d), engine.FromF32(b, c.wt, dw0, c.d)
				b.RMSNormBackward(dxt, dwt, engine.FromF32(b, c.dt, gv, c.n, c.d), x, w, rstd)
				return engine.ToF32(b, dxt), engine.ToF32(b, dwt)
			}
			dx, dw := backward()
			// float64 reference of the contract, with the kernel's rstd.
			rs := engine.ToF32(b, rstd)
			wantDx, wantDw := make([]float64, c.n*c.d), enginetest.F64(dw0)
			for i := 0; i < c.n; i++ {
				var s float64
				for j := 0; j < c.d; j++ {
					s += float64(gv[i*c.d+j]) * float64(wv[j]) * float64(xv[i*c.d+j]) * float64(rs[i])
				}
				s /= float64(c.d)
				for j := 0; j < c.d; j++ {
					k := i*c.d + j
					nv := float64(xv[k]) * float64(rs[i])
					wantDx[k] = float64(dx0[k]) + float64(rs[i])*(float64(gv[k])*float64(wv[j])-nv*s)
					wantDw[j] += float64(gv[k]) * nv
				}
			}
			enginetest.Close(t, "dx", dx, wantDx, enginetest.Tol(c.dt))
			enginetest.Close(t, "dw", dw, wantDw, enginetest.Tol(c.wt))
			// The same bits on a second run: dw's sums have a fixed order.
			dx2, dw2 := backward()
			sameBits(t, "dx (second run)", dx2, dx)
			sameBits(t, "dw (second run)", dw2, dw)
		})
	}
}
