package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// TestEmbeddingBackwardBits: repeated ids accumulate in token order with
// the table's rounding after every addition — the same bits as the plain
// loop — in every pairing of dtypes, at widths that split over workers
// unevenly.
func TestEmbeddingBackwardBits(t *testing.T) {
	b := New(Options{})
	for _, cs := range []struct{ n, v, d int }{{700, 5, 16}, {300, 40, 291}, {64, 3, 4096}} {
		for _, dts := range [][2]engine.DType{{engine.BF16, engine.BF16}, {engine.F32, engine.BF16}, {engine.BF16, engine.F32}, {engine.F16, engine.F32}, {engine.F32, engine.F32}} {
			t.Run(fmt.Sprintf("N=%d_V=%d_D=%d/%v_%v", cs.n, cs.v, cs.d, dts[0], dts[1]), func(t *testing.T) {
				r := enginetest.Rand(uint64(cs.n + cs.d))
				ids := make([]int32, cs.n)
				for i := range ids {
					ids[i] = int32(r.IntN(cs.v))
				}
				base, gv := enginetest.Values(r, dts[0], cs.v*cs.d, 1), enginetest.Values(r, dts[1], cs.n*cs.d, 1)
				want := append([]float32(nil), base...)
				for i, id := range ids {
					for j := 0; j < cs.d; j++ {
						k := int(id)*cs.d + j
						want[k] = dts[0].Round(want[k] + gv[i*cs.d+j])
					}
				}
				table := engine.FromF32(b, dts[0], base, cs.v, cs.d)
				b.EmbeddingBackward(table, engine.FromF32(b, dts[1], gv, cs.n, cs.d), engine.FromI32(b, ids, cs.n))
				for i, g := range engine.ToF32(b, table) {
					if math.Float32bits(g) != math.Float32bits(want[i]) {
						t.Fatalf("dTable[%d] = %v, want %v", i, g, want[i])
					}
				}
			})
		}
	}
}
