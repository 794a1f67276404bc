//go:build cuda || cudaemu

package cuda

import (
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// TestSumSquaresAlignment: SumSquares takes vector loads only when x is
// 16-byte aligned; a view that is not (two elements in) must give the same
// bits.
func TestSumSquaresAlignment(t *testing.T) {
	g := newBackend(t)
	r := enginetest.Rand(5)
	for _, dt := range []engine.DType{engine.F32, engine.BF16, engine.F16} {
		const n = 70001 // two chunks, and a tail
		xv := enginetest.Values(r, dt, n, 3)
		var sums [2]float32
		for k, off := range []int{0, 2 * dt.Size()} {
			acc := engine.FromF32(g, engine.F32, []float32{0.25}, 1)
			g.SumSquares(acc, at(g, dt, off, xv))
			sums[k] = engine.ToF32(g, acc)[0]
		}
		if sums[0] != sums[1] {
			t.Errorf("%v SumSquares: %v aligned, %v misaligned", dt, sums[0], sums[1])
		}
	}
}
