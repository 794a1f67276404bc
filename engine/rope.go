package engine

import "math"

// RoPEScaling is Llama 3.1's frequency scaling ("rope_type": "llama3").
// Wavelengths shorter than OriginalContext/HighFreqFactor keep their
// frequency, those longer than OriginalContext/LowFreqFactor are divided by
// Factor, and the band between is interpolated smoothly.
type RoPEScaling struct {
	Factor          float64 // 8 for Llama 3.1
	LowFreqFactor   float64 // 1
	HighFreqFactor  float64 // 4
	OriginalContext int     // 8192
}

// RoPEFreqs returns the inverse frequencies inv_freq[j] = θ^(−2j/headDim),
// j < headDim/2, computed in f32 as Hugging Face does, then scaled when
// scaling is non-nil. The result is the invFreq argument of Backend.RoPE.
func RoPEFreqs(headDim int, theta float64, scaling *RoPEScaling) []float32 {
	out := make([]float32, headDim/2)
	for j := range out {
		exp := float32(2*j) / float32(headDim)
		out[j] = 1 / float32(math.Pow(theta, float64(exp)))
	}
	if scaling == nil {
		return out
	}
	lowWave := float64(scaling.OriginalContext) / scaling.LowFreqFactor
	highWave := float64(scaling.OriginalContext) / scaling.HighFreqFactor
	for j, f32 := range out {
		f := float64(f32)
		wave := 2 * math.Pi / f
		switch {
		case wave < highWave:
			// high frequency: unchanged
		case wave > lowWave:
			f /= scaling.Factor
		default:
			smooth := (float64(scaling.OriginalContext)/wave - scaling.LowFreqFactor) /
				(scaling.HighFreqFactor - scaling.LowFreqFactor)
			f = (1-smooth)*f/scaling.Factor + smooth*f
		}
		out[j] = float32(f)
	}
	return out
}
