package ref

import "math"

// SwiGLU returns round(silu(gate))·up element-wise.
func SwiGLU(gate, up []float64, round func(float64) float64) []float64 {
	out := make([]float64, len(gate))
	for i, g := range gate {
		out[i] = round(g/(1+math.Exp(-g))) * up[i]
	}
	return out
}
