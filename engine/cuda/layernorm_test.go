//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/enginetest"
	"github.com/turnwise/turnwise/engine/ref"
)

// Kernel paths of the layernorm and bias families that the conformance
// suite checks only once: that dw and db, summed over row groups of several
// rows (colsum.cuh), come out with the same bits on a second run, and agree
// with float64 sums. Shapes stay small: the emulator runs every thread.

func TestLayerNormBiasBackwardGroups(t *testing.T) {
	b := newBackend(t)
	cases := []struct {
		n, d   int
		dt, wt engine.DType
	}{
		{2100, 9, engine.F32, engine.F32},    // 132 norm groups of 16 rows (the last 4), 33 bias groups of 64; element by element
		{1100, 24, engine.BF16, engine.BF16}, // 69 norm groups of 16 rows (the last 12), one pack per thread
		{1030, 16, engine.BF16, engine.F32},  // f32 weight and bias, bf16 activations
		{37, 4096, engine.BF16, engine.BF16}, // Llama's width: two packs per thread, two row slots, groups of 16, 16, 5
		{20, 2056, engine.F32, engine.F32},   // two packs per thread, the second pack of threads 226… past the row
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v_w%v/N=%d_D=%d", c.dt, c.wt, c.n, c.d), func(t *testing.T) {
			r := enginetest.Rand(uint64(c.n*c.d) + 11)
			xv, gv := enginetest.Values(r, c.dt, c.n*c.d, 2), enginetest.Values(r, c.dt, c.n*c.d, 1)
			wv, bv := enginetest.Values(r, c.wt, c.d, 1), enginetest.Values(r, c.wt, c.d, 1)
			x, g := engine.FromF32(b, c.dt, xv, c.n, c.d), engine.FromF32(b, c.dt, gv, c.n, c.d)
			w, bias := engine.FromF32(b, c.wt, wv, c.d), engine.FromF32(b, c.wt, bv, c.d)
			out := engine.MustAlloc(b, c.dt, c.n, c.d)
			mean, rstd := engine.MustAlloc(b, engine.F32, c.n), engine.MustAlloc(b, engine.F32, c.n)
			b.LayerNorm(out, mean, rstd, x, w, bias, 1e-5)
			wantOut, _, _ := ref.LayerNorm(enginetest.F64(xv), enginetest.F64(wv), enginetest.F64(bv), c.n, c.d, 1e-5)
			enginetest.Close(t, "out", engine.ToF32(b, out), wantOut, enginetest.Tol(c.dt))

			backward := func() (dx, dw, db, dbBias []float32) {
				dxT := engine.MustAlloc(b, c.dt, c.n, c.d)
				dwT, dbT := engine.MustAlloc(b, c.wt, c.d), engine.MustAlloc(b, c.wt, c.d)
				b.LayerNormBackward(dxT, dwT, dbT, g, x, w, mean, rstd)
				dbB := engine.MustAlloc(b, engine.F32, c.d)
				b.AddBiasBackward(dbB, g)
				return engine.ToF32(b, dxT), engine.ToF32(b, dwT), engine.ToF32(b, dbT), engine.ToF32(b, dbB)
			}
			dx, dw, db, dbBias := backward()
			// float64 sums of the contract, with the kernel's mean and rstd.
			ms, rs := engine.ToF32(b, mean), engine.ToF32(b, rstd)
			wantDw, wantDb := make([]float64, c.d), make([]float64, c.d)
			for i := 0; i < c.n; i++ {
				for j := 0; j < c.d; j++ {
					k := i*c.d + j
					wantDw[j] += float64(gv[k]) * (float64(xv[k]) - float64(ms[i])) * float64(rs[i])
					wantDb[j] += float64(gv[k])
				}
			}
			enginetest.Close(t, "dw", dw, wantDw, enginetest.Tol(c.wt))
			enginetest.Close(t, "db", db, wantDb, enginetest.Tol(c.wt))
			enginetest.Close(t, "AddBiasBackward db", dbBias, wantDb, enginetest.TolF32)
			dx2, dw2, db2, dbBias2 := backward()
			sameBits(t, "dx (second run)", dx2, dx)
			sameBits(t, "dw (second run)", dw2, dw)
			sameBits(t, "db (second run)", db2, db)
			sameBits(t, "AddBiasBackward db (second run)", dbBias2, dbBias)
		})
	}
}
