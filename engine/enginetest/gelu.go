package enginetest

import (
	"fmt"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/ref"
)

// geluRef returns the float64 reference of GELU kind k (round: the
// rounding of GELUQuick's intermediates).
func geluRef(k engine.GELUKind, x []float64, round func(float64) float64) []float64 {
	switch k {
	case engine.GELUErf:
		return ref.GELUErf(x)
	case engine.GELUTanh:
		return ref.GELUTanh(x)
	}
	return ref.QuickGELU(x, round)
}

// testGELU checks each GELU kind against its float64 reference and
// GELUBackward against finite differences of it, dx overwritten over
// arbitrary previous contents. Values span [−5, 5] (both tails); shapes
// include one element, odd lengths, CLIP's MLP [50, 3072] and a view that
// starts one or three elements into its buffer (unaligned: a GPU's
// vector path after a misaligned head).
func testGELU(t *testing.T, b engine.Backend) {
	cases := []struct {
		name  string
		shape []int
		skip  int // elements of the buffer before the tensor
	}{
		{"N=1", []int{1}, 0},
		{"N=37", []int{37}, 0},
		{"16x172", []int{16, 172}, 0},
		{"50x3072", []int{50, 3072}, 0},
		{"3x5x7_offset1", []int{3, 5, 7}, 1},
		{"5x37_offset3", []int{5, 37}, 3},
	}
	for _, k := range []engine.GELUKind{engine.GELUErf, engine.GELUTanh, engine.GELUQuick} {
		for _, dt := range FloatDTypes {
			for ci, c := range cases {
				t.Run(fmt.Sprintf("%v/%v/%s", k, dt, c.name), func(t *testing.T) {
					r := Rand(uint64(100*int(k)+ci) + 31)
					n := engine.Shape(c.shape).Numel()
					view := func(vals []float32) *engine.Tensor {
						all := engine.FromF32(b, dt, append(make([]float32, c.skip), vals...), c.skip+n)
						return all.Rows(c.skip, c.skip+n).Reshape(c.shape...)
					}
					xv := Values(r, dt, n, 5)
					x, out := view(xv), view(filled(n, 9))
					b.GELU(out, x, k)
					x64 := F64(xv)
					Close(t, "out", engine.ToF32(b, out), geluRef(k, x64, rounder(dt)), Tol(dt))

					gv := Values(r, dt, n, 1)
					dx := view(filled(n, 9))
					b.GELUBackward(dx, view(gv), x, k)
					g64 := F64(gv)
					loss := func() float64 { return Dot(g64, geluRef(k, x64, ref.Identity)) }
					GradCheck(t, "dx", r, x64, engine.ToF32(b, dx), loss, 64, GradTol(dt))
				})
			}
		}
	}
}
