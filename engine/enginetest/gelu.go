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

// farTails are inputs far out in GELU's lower tail, exact in every dtype.
var farTails = []float32{-52, -60, -100}

// testGELU checks each GELU kind against its float64 reference and
// GELUBackward against finite differences of it, dx overwritten over
// arbitrary previous contents. Values span [−5, 5] (both tails), and every
// seventh lies far out in the lower tail (−52 to −100: there quick's
// sigmoid is subnormal in f32, or 0, which the CUDA kernels' packs take
// another reciprocal for); shapes
// include one element, odd lengths, CLIP's MLP [50, 3072] and a view that
// starts one or three elements into its buffer (unaligned: a GPU's
// vector path after a misaligned head).
func testGELU(t *testing.T, b engine.Backend) {
	for _, k := range []engine.GELUKind{engine.GELUErf, engine.GELUTanh, engine.GELUQuick} {
		for _, dt := range FloatDTypes {
			for ci, c := range elementCases {
				t.Run(fmt.Sprintf("%v/%v/%s", k, dt, c.name), func(t *testing.T) {
					r := Rand(uint64(100*int(k)+ci) + 31)
					n := engine.Shape(c.shape).Numel()
					view := func(vals []float32) *engine.Tensor { return viewAt(b, dt, vals, c.skip, c.shape...) }
					xv := Values(r, dt, n, 5)
					for i := 3; i < n; i += 7 {
						xv[i] = farTails[(i/7)%len(farTails)]
					}
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
