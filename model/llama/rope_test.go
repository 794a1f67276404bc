package llama

import (
	"testing"

	"github.com/turnwise/turnwise/engine"
)

// TestRopeScalingFromFactors checks that the parameters of Llama 3.1's
// scaling are recovered from the divisors llama.cpp's converter writes,
// for the released models' shapes and for scalings with another low-band
// factor, which come back as the equivalent parameters with a low-band
// factor of 1.
func TestRopeScalingFromFactors(t *testing.T) {
	for _, tc := range []struct {
		name          string
		headDim       int
		theta         float64
		scale, expect engine.RoPEScaling
	}{
		{"llama-3.1-8b", 128, 500000, engine.RoPEScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}, engine.RoPEScaling{}},
		{"llama-3.2-1b", 64, 500000, engine.RoPEScaling{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}, engine.RoPEScaling{}},
		{"low 2", 128, 500000, engine.RoPEScaling{Factor: 16, LowFreqFactor: 2, HighFreqFactor: 8, OriginalContext: 16384},
			engine.RoPEScaling{Factor: 16, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.expect
			if want == (engine.RoPEScaling{}) {
				want = tc.scale
			}
			got := ropeScalingFromFactors(tc.headDim, tc.theta, ropeFactors(tc.headDim, tc.theta, tc.scale))
			if got == nil || *got != want {
				t.Fatalf("recovered %+v, want %+v", got, want)
			}
			a, b := engine.RoPEFreqs(tc.headDim, tc.theta, &tc.scale), engine.RoPEFreqs(tc.headDim, tc.theta, got)
			for j := range a {
				if d := a[j] - b[j]; d > 1e-6*a[j] || d < -1e-6*a[j] {
					t.Fatalf("frequency %d: %g from the recovered scaling, %g from the original", j, b[j], a[j])
				}
			}
		})
	}
	ones := []float32{1, 1, 1, 1}
	if s := ropeScalingFromFactors(8, 10000, ones); s != nil {
		t.Errorf("divisors of 1 gave scaling %+v, want none", s)
	}
}
