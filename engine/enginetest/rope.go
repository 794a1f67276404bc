package enginetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/ref"
)

// testRoPE checks RoPE against ref.RoPE and RoPEBackward against finite
// differences, with and without Llama 3.1 frequency scaling.
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
		{3, 40, 128, 500000, llama3, 9000}, // more packs per token than a GPU block has threads
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
