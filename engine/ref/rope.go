package ref

import "math"

// RoPE returns x (n tokens × h heads × dh) rotated in the rotate-half layout
// by angle pos[i]·invFreq[j] for pair (j, j+dh/2).
func RoPE(x []float64, pos []int32, invFreq []float64, n, h, dh int) []float64 {
	out := make([]float64, len(x))
	half := dh / 2
	for i := 0; i < n; i++ {
		for hd := 0; hd < h; hd++ {
			base := (i*h + hd) * dh
			for j := 0; j < half; j++ {
				a := float64(pos[i]) * invFreq[j]
				c, s := math.Cos(a), math.Sin(a)
				x1, x2 := x[base+j], x[base+j+half]
				out[base+j] = x1*c - x2*s
				out[base+j+half] = x2*c + x1*s
			}
		}
	}
	return out
}
