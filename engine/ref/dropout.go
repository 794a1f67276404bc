package ref

// Dropout returns x[i]·scale where keep(i), else 0, element-wise.
func Dropout(x []float64, keep func(i int) bool, scale float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		if keep(i) {
			out[i] = v * scale
		}
	}
	return out
}
