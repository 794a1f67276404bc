package enginetest

import (
	"fmt"
	"testing"

	"github.com/turnwise/turnwise/engine"
)

// testEmbedding checks Embedding against a plain gather (exactly) and
// EmbeddingBackward against finite differences.
func testEmbedding(t *testing.T, b engine.Backend) {
	cases := []struct{ v, d, n int }{{1, 1, 1}, {11, 5, 9}, {50, 64, 33}, {7, 129, 20}}
	for _, dt := range FloatDTypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/V=%d_D=%d_N=%d", dt, c.v, c.d, c.n), func(t *testing.T) {
				r := Rand(uint64(c.v*c.d + c.n))
				tv := Values(r, dt, c.v*c.d, 1)
				ids := make([]int32, c.n)
				for i := range ids {
					ids[i] = int32(r.IntN(c.v)) // repeats are likely: V < N in most cases
				}
				table := engine.FromF32(b, dt, tv, c.v, c.d)
				idt := engine.FromI32(b, ids, c.n)
				out := engine.MustAlloc(b, dt, c.n, c.d)
				b.Embedding(out, table, idt)
				want := make([]float64, c.n*c.d)
				for i, id := range ids {
					for j := 0; j < c.d; j++ {
						want[i*c.d+j] = float64(tv[int(id)*c.d+j])
					}
				}
				Close(t, "out", engine.ToF32(b, out), want, 0)

				// Backward: accumulate onto a non-zero dTable.
				gv := Values(r, dt, c.n*c.d, 1)
				base := Values(r, engine.F32, c.v*c.d, 1)
				dTable := engine.FromF32(b, engine.F32, base, c.v, c.d)
				b.EmbeddingBackward(dTable, engine.FromF32(b, dt, gv, c.n, c.d), idt)
				got := engine.ToF32(b, dTable)
				for i := range got {
					got[i] -= base[i]
				}
				t64, g64 := F64(tv), F64(gv)
				loss := func() float64 {
					var s float64
					for i, id := range ids {
						for j := 0; j < c.d; j++ {
							s += g64[i*c.d+j] * t64[int(id)*c.d+j]
						}
					}
					return s
				}
				GradCheck(t, "dTable", r, t64, got, loss, 64, GradTol(engine.F32))
			})
		}
	}
}
