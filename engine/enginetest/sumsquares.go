package enginetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/turnwise/turnwise/engine"
)

// testSumSquares checks SumSquares, which accumulates into out, against a
// float64 sum, and GlobalNorm and ClipScale built on it.
func testSumSquares(t *testing.T, b engine.Backend) {
	for _, dt := range FloatDTypes {
		for _, n := range []int{1, 3, 65537, 300001} {
			t.Run(fmt.Sprintf("%v/n=%d", dt, n), func(t *testing.T) {
				r := Rand(uint64(n) + 31)
				xv := Values(r, dt, n, 2)
				acc := engine.FromF32(b, engine.F32, []float32{1.5}, 1)
				b.SumSquares(acc, engine.FromF32(b, dt, xv, n))
				want := 1.5
				for _, x := range xv {
					want += float64(x) * float64(x)
				}
				Close(t, "sum", engine.ToF32(b, acc), []float64{want}, TolF32)
			})
		}
	}
	t.Run("global_norm", func(t *testing.T) {
		r := Rand(37)
		av, bv := Values(r, engine.F32, 100, 1), Values(r, engine.BF16, 33, 1)
		acc := engine.MustAlloc(b, engine.F32, 1)
		norm := engine.GlobalNorm(b, acc, []*engine.Tensor{engine.FromF32(b, engine.F32, av, 100), engine.FromF32(b, engine.BF16, bv, 33)})
		var ss float64
		for _, x := range append(av, bv...) {
			ss += float64(x) * float64(x)
		}
		Close(t, "norm", []float32{norm}, []float64{math.Sqrt(ss)}, TolF32)
		if s := engine.ClipScale(norm, norm/2); math.Abs(float64(s)-0.5) > 1e-5 {
			t.Errorf("ClipScale(n, n/2) = %g, want 0.5", s)
		}
		if s := engine.ClipScale(norm, 2*norm); s != 1 {
			t.Errorf("ClipScale(n, 2n) = %g, want 1", s)
		}
		if s := engine.ClipScale(float32(math.Inf(1)), 1); !math.IsNaN(float64(s)) {
			t.Errorf("ClipScale(Inf) = %g, want NaN", s)
		}
	})
}
