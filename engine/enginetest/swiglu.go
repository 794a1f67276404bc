package enginetest

import (
	"fmt"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/ref"
)

// testSwiGLU checks SwiGLU against ref.SwiGLU and SwiGLUBackward against
// finite differences, on aligned tensors and on views at element offsets
// (skip: out's or dGate's, gate's and up's; dUp and dOut share gate's) that
// need a misaligned head or, when they differ, element-by-element access.
// With tails, every fifth gate is far out in the sigmoid's lower tail,
// where 1 + exp(−g) reaches 2^126 and beyond (sigmoid(g) subnormal in f32,
// or 0): the CUDA kernels' packs holding one take another reciprocal.
func testSwiGLU(t *testing.T, b engine.Backend) {
	cases := []struct {
		n, f  int
		skip  [3]int
		tails bool
	}{{1, 1, [3]int{}, false}, {3, 37, [3]int{}, false}, {16, 172, [3]int{}, false}, {2, 14336, [3]int{}, false},
		{3, 37, [3]int{3, 3, 3}, false}, {5, 67, [3]int{1, 2, 1}, false}, {4, 64, [3]int{}, true}}
	tails := []float32{-80, -87.5, -88, -90, -100}
	for _, dt := range FloatDTypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/N=%d_F=%d_skips=%d,%d,%d_tails=%v", dt, c.n, c.f, c.skip[0], c.skip[1], c.skip[2], c.tails), func(t *testing.T) {
				r := Rand(uint64(c.n*c.f) + 9)
				gv, uv := Values(r, dt, c.n*c.f, 4), Values(r, dt, c.n*c.f, 2)
				for i := 0; c.tails && i < len(gv); i += 5 {
					gv[i] = tails[(i/5)%len(tails)]
				}
				gate, up := viewAt(b, dt, gv, c.skip[1], c.n, c.f), viewAt(b, dt, uv, c.skip[2], c.n, c.f)
				out := viewAt(b, dt, filled(c.n*c.f, 9), c.skip[0], c.n, c.f)
				b.SwiGLU(out, gate, up)
				Close(t, "out", engine.ToF32(b, out), ref.SwiGLU(F64(gv), F64(uv), rounder(dt)), Tol(dt))

				ov := Values(r, dt, c.n*c.f, 1)
				dg, du := viewAt(b, dt, filled(c.n*c.f, 9), c.skip[0], c.n, c.f), viewAt(b, dt, filled(c.n*c.f, 9), c.skip[1], c.n, c.f)
				b.SwiGLUBackward(dg, du, viewAt(b, dt, ov, c.skip[1], c.n, c.f), gate, up)
				g64, u64, o64 := F64(gv), F64(uv), F64(ov)
				loss := func() float64 { return Dot(o64, ref.SwiGLU(g64, u64, ref.Identity)) }
				GradCheck(t, "dGate", r, g64, engine.ToF32(b, dg), loss, 64, GradTol(dt))
				GradCheck(t, "dUp", r, u64, engine.ToF32(b, du), loss, 64, GradTol(dt))
			})
		}
	}
}
