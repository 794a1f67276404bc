//go:build cuda || cudaemu

package cuda

import (
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// TestSumSquaresAlignment: SumSquares takes vector loads only when x is
// 16-byte aligned; views that are not (one to seven elements in) must give
// the same bits, at sizes on and around the kernels' parts of 2^14 elements
// and the CPU backend's chunks of 2^16, and so must a rerun.
func TestSumSquaresAlignment(t *testing.T) {
	g := newBackend(t)
	r := enginetest.Rand(5)
	for _, dt := range []engine.DType{engine.F32, engine.BF16, engine.F16} {
		for _, n := range []int{7, 16384, 16385, 3*16384 + 9, 70001} {
			xv := enginetest.Values(r, dt, n, 3)
			var want float32
			for k, off := range []int{0, 0, 1, 2, 3, 7} {
				acc := engine.FromF32(g, engine.F32, []float32{0.25}, 1)
				g.SumSquares(acc, at(g, dt, off*dt.Size(), xv))
				got := engine.ToF32(g, acc)[0]
				if k == 0 {
					want = got
				} else if got != want {
					t.Errorf("%v n=%d SumSquares: %v aligned, %v at element %d", dt, n, want, got, off)
				}
			}
		}
	}
}
