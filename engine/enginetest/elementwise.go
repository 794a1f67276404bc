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

// testScatterRows scatters rows of several widths — 16-byte multiples, 4-byte
// multiples and odd byte counts, which a GPU copies in different word sizes —
// into a larger tensor, whose other rows must keep their values.
func testScatterRows(t *testing.T, b engine.Backend) {
	for _, dt := range []engine.DType{engine.F32, engine.BF16, engine.I32} {
		for _, w := range []int{1, 3, 8, 24, 1024} {
			t.Run(fmt.Sprintf("%v/w=%d", dt, w), func(t *testing.T) {
				const r, n = 11, 4
				rows := []int32{7, 0, 10, 3}
				r64 := Rand(uint64(w))
				dv, sv := make([]float32, r*w), make([]float32, n*w) // integers below 256: exact in bf16
				for i := range dv {
					dv[i] = float32(r64.IntN(256))
				}
				for i := range sv {
					sv[i] = float32(r64.IntN(256))
				}
				dst, src := engine.MustAlloc(b, dt, r, w), engine.MustAlloc(b, dt, n, w)
				if dt == engine.I32 {
					engine.SetI32(b, dst, toI32(dv))
					engine.SetI32(b, src, toI32(sv))
				} else {
					engine.SetF32(b, dst, dv)
					engine.SetF32(b, src, sv)
				}
				b.ScatterRows(dst, src, engine.FromI32(b, rows, n))
				want := F64(dv)
				for i, row := range rows {
					copy(want[int(row)*w:int(row+1)*w], F64(sv[i*w:(i+1)*w]))
				}
				var got []float32
				if dt == engine.I32 {
					for _, v := range engine.ToI32(b, dst) {
						got = append(got, float32(v))
					}
				} else {
					got = engine.ToF32(b, dst)
				}
				Close(t, "ScatterRows", got, want, 0)
			})
		}
	}
}

func toI32(v []float32) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
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
