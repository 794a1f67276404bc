package ref

import "math"

// GELUErf returns x·Φ(x) = x·(1 + erf(x/√2))/2 element-wise.
func GELUErf(x []float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = 0.5 * v * (1 + math.Erf(v/math.Sqrt2))
	}
	return out
}

// GELUTanh returns the tanh approximation of the GELU element-wise:
// x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))/2.
func GELUTanh(x []float64) []float64 {
	out := make([]float64, len(x))
	c := math.Sqrt(2 / math.Pi)
	for i, v := range x {
		out[i] = 0.5 * v * (1 + math.Tanh(c*(v+0.044715*v*v*v)))
	}
	return out
}

// QuickGELU returns CLIP's quick_gelu x·σ(1.702·x) element-wise, rounding
// as the contract does: x·round(σ(round(1.702·x))).
func QuickGELU(x []float64, round func(float64) float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * round(1/(1+math.Exp(-round(1.702*v))))
	}
	return out
}
