package enginetest

import (
	"fmt"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/ref"
)

// testSwiGLU checks SwiGLU against ref.SwiGLU and SwiGLUBackward against
// finite differences.
func testSwiGLU(t *testing.T, b engine.Backend) {
	cases := []struct{ n, f int }{{1, 1}, {3, 37}, {16, 172}, {2, 14336}}
	for _, dt := range FloatDTypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/N=%d_F=%d", dt, c.n, c.f), func(t *testing.T) {
				r := Rand(uint64(c.n*c.f) + 9)
				gv, uv := Values(r, dt, c.n*c.f, 4), Values(r, dt, c.n*c.f, 2)
				gate, up := engine.FromF32(b, dt, gv, c.n, c.f), engine.FromF32(b, dt, uv, c.n, c.f)
				out := engine.MustAlloc(b, dt, c.n, c.f)
				b.SwiGLU(out, gate, up)
				Close(t, "out", engine.ToF32(b, out), ref.SwiGLU(F64(gv), F64(uv), rounder(dt)), Tol(dt))

				ov := Values(r, dt, c.n*c.f, 1)
				dg, du := engine.MustAlloc(b, dt, c.n, c.f), engine.MustAlloc(b, dt, c.n, c.f)
				b.SwiGLUBackward(dg, du, engine.FromF32(b, dt, ov, c.n, c.f), gate, up)
				g64, u64, o64 := F64(gv), F64(uv), F64(ov)
				loss := func() float64 { return Dot(o64, ref.SwiGLU(g64, u64, ref.Identity)) }
				GradCheck(t, "dGate", r, g64, engine.ToF32(b, dg), loss, 64, GradTol(dt))
				GradCheck(t, "dUp", r, u64, engine.ToF32(b, du), loss, 64, GradTol(dt))
			})
		}
	}
}
