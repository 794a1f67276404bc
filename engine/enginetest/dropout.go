package enginetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/ref"
)

// testDropout checks Dropout against its float64 reference with the mask
// of engine.DropoutParams.Keep (indices counted from the tensor's first
// element, also for views that start inside their buffer), its use as its
// own backward against finite differences of the reference with that mask
// fixed, in place (out aliasing x), the share of elements kept (1 − P,
// within five standard deviations), and that a P of 0 copies x bit for
// bit and another seed drops other elements.
func testDropout(t *testing.T, b engine.Backend) {
	for _, prob := range []float32{0, 0.1, 0.5} {
		for _, dt := range FloatDTypes {
			for ci, c := range elementCases {
				t.Run(fmt.Sprintf("p=%g/%v/%s", prob, dt, c.name), func(t *testing.T) {
					r := Rand(uint64(ci) + 97)
					p := engine.DropoutParams{P: prob, Seed: engine.MixSeed(7, uint64(ci))}
					n := engine.Shape(c.shape).Numel()
					view := func(vals []float32) *engine.Tensor { return viewAt(b, dt, vals, c.skip, c.shape...) }
					keep := func(i int) bool { return p.Keep(int64(i)) }
					xv := Values(r, dt, n, 3)
					x, out := view(xv), view(filled(n, 9))
					b.Dropout(out, x, p)
					got := engine.ToF32(b, out)
					x64 := F64(xv)
					Close(t, "out", got, ref.Dropout(x64, keep, float64(p.Scale())), Tol(dt))
					kept := 0
					for i, v := range got {
						switch {
						case !keep(i) && v != 0:
							t.Fatalf("element %d is dropped by the mask but out holds %v", i, v)
						case prob == 0 && math.Float32bits(v) != math.Float32bits(xv[i]):
							t.Fatalf("P = 0: element %d is %v, x holds %v", i, v, xv[i])
						case keep(i):
							kept++
						}
					}
					if sd := math.Sqrt(float64(prob*(1-prob)) / float64(n)); math.Abs(float64(kept)/float64(n)-float64(1-prob)) > 5*sd+1e-9 && n > 1000 {
						t.Errorf("kept %d of %d elements (%.4f), want about %.4f", kept, n, float64(kept)/float64(n), 1-prob)
					}

					gv := Values(r, dt, n, 1)
					dx := view(filled(n, 9))
					b.Dropout(dx, view(gv), p)
					g64 := F64(gv)
					loss := func() float64 { return Dot(g64, ref.Dropout(x64, keep, float64(p.Scale()))) }
					GradCheck(t, "dx", r, x64, engine.ToF32(b, dx), loss, 64, GradTol(dt))

					b.Dropout(x, x, p) // in place
					if inPlace := engine.ToF32(b, x); !equalBits(inPlace, got) {
						t.Error("Dropout in place (out aliasing x) differs from Dropout into another tensor")
					}
					if prob > 0 && n > 1000 {
						other := view(filled(n, 9))
						b.Dropout(other, view(xv), engine.DropoutParams{P: prob, Seed: p.Seed + 1})
						if equalBits(engine.ToF32(b, other), got) {
							t.Error("another seed dropped the same elements")
						}
					}
				})
			}
		}
	}
}

// equalBits reports whether a and b hold the same bits.
func equalBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
