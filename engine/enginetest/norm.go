package enginetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/ref"
)

// rounder returns the float64 rounding function of dtype dt, used where the
// contract rounds an intermediate to the activation dtype.
func rounder(dt engine.DType) func(float64) float64 {
	return func(x float64) float64 { return float64(dt.Round(float32(x))) }
}

func testEmbedding(t *testing.T, b engine.Backend) {
	cases := []struct{ v, d, n int }{{1, 1, 1}, {11, 5, 9}, {50, 64, 33}, {7, 129, 20}}
	for _, dt := range FloatDTypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/V=%d_D=%d_N=%d", dt, c.v, c.d, c.n), func(t *testing.T) {
				r := Rand(uint64(c.v*c.d + c.n))
				tv := Values(r, dt, c.v*c.d, 1)
				ids := make([]int32, c.n)
				for i := range ids {
					ids[i] = int32(r.IntN(c.v)) // repeats are likely: V < N in most cases
				}
				table := engine.FromF32(b, dt, tv, c.v, c.d)
				idt := engine.FromI32(b, ids, c.n)
				out := engine.MustAlloc(b, dt, c.n, c.d)
				b.Embedding(out, table, idt)
				want := make([]float64, c.n*c.d)
				for i, id := range ids {
					for j := 0; j < c.d; j++ {
						want[i*c.d+j] = float64(tv[int(id)*c.d+j])
					}
				}
				Close(t, "out", engine.ToF32(b, out), want, 0)

				// Backward: accumulate onto a non-zero dTable.
				gv := Values(r, dt, c.n*c.d, 1)
				base := Values(r, engine.F32, c.v*c.d, 1)
				dTable := engine.FromF32(b, engine.F32, base, c.v, c.d)
				b.EmbeddingBackward(dTable, engine.FromF32(b, dt, gv, c.n, c.d), idt)
				got := engine.ToF32(b, dTable)
				for i := range got {
					got[i] -= base[i]
				}
				t64, g64 := F64(tv), F64(gv)
				loss := func() float64 {
					var s float64
					for i, id := range ids {
						for j := 0; j < c.d; j++ {
							s += g64[i*c.d+j] * t64[int(id)*c.d+j]
						}
					}
					return s
				}
				GradCheck(t, "dTable", r, t64, got, loss, 64, GradTol(engine.F32))
			})
		}
	}
}

func testRMSNorm(t *testing.T, b engine.Backend) {
	const eps = 1e-5
	cases := []struct{ n, d int }{{1, 1}, {3, 8}, {17, 129}, {2, 4096}, {5, 288}}
	for _, dt := range FloatDTypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/N=%d_D=%d", dt, c.n, c.d), func(t *testing.T) {
				r := Rand(uint64(c.n*1000 + c.d))
				xv, dv := Values(r, dt, c.n*c.d, 2), Values(r, dt, c.n*c.d, 1)
				wv := make([]float32, c.d)
				for j := range wv {
					wv[j] = dt.Round(float32(0.5 + r.Float64()))
				}
				x, w := engine.FromF32(b, dt, xv, c.n, c.d), engine.FromF32(b, dt, wv, c.d)
				out, rstd := engine.MustAlloc(b, dt, c.n, c.d), engine.MustAlloc(b, engine.F32, c.n)
				b.RMSNorm(out, rstd, x, w, eps)
				wantOut, wantR := ref.RMSNorm(F64(xv), F64(wv), c.n, c.d, eps, rounder(dt))
				Close(t, "out", engine.ToF32(b, out), wantOut, Tol(dt))
				Close(t, "rstd", engine.ToF32(b, rstd), wantR, TolF32)

				// Fused residual add, in place on x.
				delta := engine.FromF32(b, dt, dv, c.n, c.d)
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
				dx, dw := engine.FromF32(b, dt, dx0, c.n, c.d), engine.FromF32(b, dt, dw0, c.d)
				b.RMSNormBackward(dx, dw, engine.FromF32(b, dt, gv, c.n, c.d), x, w, rstd)
				x64, w64, g64 := F64(xv), F64(wv), F64(gv)
				loss := func() float64 {
					o, _ := ref.RMSNorm(x64, w64, c.n, c.d, eps, ref.Identity)
					return Dot(g64, o)
				}
				GradCheck(t, "dx", r, x64, sub(engine.ToF32(b, dx), dx0), loss, 48, GradTol(dt))
				GradCheck(t, "dw", r, w64, sub(engine.ToF32(b, dw), dw0), loss, 48, GradTol(dt))

				// A frozen weight: dw nil.
				b.RMSNormBackward(dx, nil, engine.FromF32(b, dt, gv, c.n, c.d), x, w, rstd)
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

func testRoPE(t *testing.T, b engine.Backend) {
	llama3 := &engine.RoPEScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}
	cases := []struct {
		n, h, dh int
		theta    float64
		scaling  *engine.RoPEScaling
		maxPos   int
	}{
		{1, 1, 2, 10000, nil, 4},
		{5, 3, 8, 10000, nil, 40},
		{7, 2, 64, 500000, llama3, 9000},
		{4, 8, 128, 500000, llama3, 131072},
	}
	for _, dt := range FloatDTypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/N=%d_H=%d_Dh=%d", dt, c.n, c.h, c.dh), func(t *testing.T) {
				r := Rand(uint64(c.n*c.h*c.dh) + 5)
				xv := Values(r, dt, c.n*c.h*c.dh, 1)
				pos := make([]int32, c.n)
				for i := range pos {
					pos[i] = int32(r.IntN(c.maxPos))
				}
				freqs := engine.RoPEFreqs(c.dh, c.theta, c.scaling)
				// The reference takes the angle as the backend does: an f32
				// product of position and frequency.
				f64 := make([]float64, len(freqs))
				for j, f := range freqs {
					f64[j] = float64(f)
				}
				x := engine.FromF32(b, dt, xv, c.n, c.h, c.dh)
				pt, ft := engine.FromI32(b, pos, c.n), engine.FromF32(b, engine.F32, freqs, len(freqs))
				b.RoPE(x, pt, ft)
				want := ropeRef(F64(xv), pos, freqs, c.n, c.h, c.dh)
				// Angles up to 1.3e5 rad lose absolute precision when formed in
				// f32 (ulp 2⁻⁷); the reference forms them the same way, so only
				// cos/sin rounding remains.
				Close(t, "x", engine.ToF32(b, x), want, Tol(dt))

				gv := Values(r, dt, len(xv), 1)
				dx := engine.FromF32(b, dt, gv, c.n, c.h, c.dh)
				b.RoPEBackward(dx, pt, ft)
				x64, g64 := F64(xv), F64(gv)
				loss := func() float64 { return Dot(g64, ropeRef(x64, pos, freqs, c.n, c.h, c.dh)) }
				GradCheck(t, "dx", r, x64, engine.ToF32(b, dx), loss, 64, GradTol(dt))
			})
		}
	}
	t.Run("freqs", testRoPEFreqs)
}

// ropeRef runs ref.RoPE with angles formed as f32 products, as the contract
// specifies, by folding each position's product into per-token frequencies.
func ropeRef(x []float64, pos []int32, freqs []float32, n, h, dh int) []float64 {
	out := make([]float64, len(x))
	one := []int32{1}
	for i := 0; i < n; i++ {
		ang := make([]float64, len(freqs))
		for j, f := range freqs {
			ang[j] = float64(float32(pos[i]) * f)
		}
		row := x[i*h*dh : (i+1)*h*dh]
		copy(out[i*h*dh:], ref.RoPE(row, one, ang, 1, h, dh))
	}
	return out
}

// testRoPEFreqs checks RoPEFreqs against the Llama 3.1 scaling rule.
func testRoPEFreqs(t *testing.T) {
	s := &engine.RoPEScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}
	plain := engine.RoPEFreqs(128, 500000, nil)
	scaled := engine.RoPEFreqs(128, 500000, s)
	if plain[0] != 1 {
		t.Errorf("inv_freq[0] = %g, want 1", plain[0])
	}
	for j := range plain {
		want := math.Pow(500000, -float64(2*j)/128)
		if math.Abs(float64(plain[j])-want) > 1e-6*want {
			t.Fatalf("inv_freq[%d] = %g, want %g", j, plain[j], want)
		}
		wave := 2 * math.Pi / float64(plain[j])
		switch {
		case wave < 2048:
			if scaled[j] != plain[j] {
				t.Errorf("j=%d wavelength %.0f < 2048 must keep its frequency: %g vs %g", j, wave, scaled[j], plain[j])
			}
		case wave > 8192:
			if math.Abs(float64(scaled[j])-float64(plain[j])/8) > 1e-6*float64(plain[j]) {
				t.Errorf("j=%d wavelength %.0f > 8192 must be divided by 8: %g vs %g", j, wave, scaled[j], plain[j])
			}
		default:
			if !(scaled[j] < plain[j] && scaled[j] > plain[j]/8) {
				t.Errorf("j=%d wavelength %.0f must interpolate between f/8 and f: %g (f = %g)", j, wave, scaled[j], plain[j])
			}
		}
	}
}

func testSwiGLU(t *testing.T, b engine.Backend) {
	cases := []struct{ n, f int }{{1, 1}, {3, 37}, {16, 172}, {2, 14336}}
	for _, dt := range FloatDTypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/N=%d_F=%d", dt, c.n, c.f), func(t *testing.T) {
				r := Rand(uint64(c.n*c.f) + 9)
				gv, uv := Values(r, dt, c.n*c.f, 4), Values(r, dt, c.n*c.f, 2)
				gate, up := engine.FromF32(b, dt, gv, c.n, c.f), engine.FromF32(b, dt, uv, c.n, c.f)
				out := engine.MustAlloc(b, dt, c.n, c.f)
				b.SwiGLU(out, gate, up)
				Close(t, "out", engine.ToF32(b, out), ref.SwiGLU(F64(gv), F64(uv), rounder(dt)), Tol(dt))

				ov := Values(r, dt, c.n*c.f, 1)
				dg, du := engine.MustAlloc(b, dt, c.n, c.f), engine.MustAlloc(b, dt, c.n, c.f)
				b.SwiGLUBackward(dg, du, engine.FromF32(b, dt, ov, c.n, c.f), gate, up)
				g64, u64, o64 := F64(gv), F64(uv), F64(ov)
				loss := func() float64 { return Dot(o64, ref.SwiGLU(g64, u64, ref.Identity)) }
				GradCheck(t, "dGate", r, g64, engine.ToF32(b, dg), loss, 64, GradTol(dt))
				GradCheck(t, "dUp", r, u64, engine.ToF32(b, du), loss, 64, GradTol(dt))
			})
		}
	}
}
