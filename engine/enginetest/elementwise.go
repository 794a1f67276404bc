package enginetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/turnwise/turnwise/engine"
)

func testElementwise(t *testing.T, b engine.Backend) {
	t.Run("views", func(t *testing.T) { testElementwiseViews(t, b) })
	for _, dt := range FloatDTypes {
		for _, n := range []int{1, 7, 3000, 65537} {
			t.Run(fmt.Sprintf("%v/n=%d", dt, n), func(t *testing.T) {
				r := Rand(uint64(n))
				xv, yv := Values(r, dt, n, 2), Values(r, dt, n, 2)
				x, y := engine.FromF32(b, dt, xv, n), engine.FromF32(b, dt, yv, n)
				out := engine.MustAlloc(b, dt, n)

				b.Add(out, x, y)
				Close(t, "Add", engine.ToF32(b, out), mapF64(xv, yv, func(a, c float64) float64 { return a + c }), Tol(dt))

				b.Add(x, x, y) // aliased output
				Close(t, "Add in place", engine.ToF32(b, x), mapF64(xv, yv, func(a, c float64) float64 { return a + c }), Tol(dt))
				engine.SetF32(b, x, xv)

				b.Fill(out, 3.25)
				Close(t, "Fill", engine.ToF32(b, out), mapF64(xv, xv, func(float64, float64) float64 { return 3.25 }), 0)

				b.Copy(out.Reshape(1, n), x.Reshape(1, n))
				Close(t, "Copy", engine.ToF32(b, out), F64(xv), 0)
			})
		}
	}
}

func mapF64(a, c []float32, f func(a, c float64) float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = f(float64(a[i]), float64(c[i]))
	}
	return out
}

func testCast(t *testing.T, b engine.Backend) {
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 3.14159, 1e-40, -1e-30, 65504, 70000, 1e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), 1.00390625, 1.01171875, 0.333333}
	r := Rand(3)
	vals := append(append([]float32(nil), special...), Values(r, engine.F32, 1001, 100)...)
	n := len(vals)
	rounders := map[engine.DType]func(float32) float32{
		engine.F32: func(f float32) float32 { return f }, engine.BF16: engine.RoundBF16, engine.F16: engine.RoundF16,
	}
	for _, from := range []engine.DType{engine.F32, engine.BF16, engine.F16} {
		for _, to := range []engine.DType{engine.F32, engine.BF16, engine.F16} {
			t.Run(fmt.Sprintf("%v_to_%v", from, to), func(t *testing.T) {
				src := engine.FromF32(b, from, vals, n)
				dst := engine.MustAlloc(b, to, n)
				b.Cast(dst, src)
				got := engine.ToF32(b, dst)
				for i, v := range vals {
					want := rounders[to](rounders[from](v))
					if math.Float32bits(got[i]) != math.Float32bits(want) {
						t.Fatalf("Cast %v→%v of %g: got %g (%#x), want %g (%#x)", from, to, v, got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
					}
				}
			})
		}
	}
	t.Run("nan", func(t *testing.T) {
		src := engine.FromF32(b, engine.F32, []float32{float32(math.NaN())}, 1)
		for _, to := range []engine.DType{engine.BF16, engine.F16} {
			dst := engine.MustAlloc(b, to, 1)
			b.Cast(dst, src)
			if got := engine.ToF32(b, dst)[0]; !math.IsNaN(float64(got)) {
				t.Errorf("Cast NaN to %v gave %g", to, got)
			}
		}
	})
}
