//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// TestEmbeddingBackwardChunks reaches a kernel path the conformance suite's
// shapes do not: the embedding backward's id scan over several chunks.
func TestEmbeddingBackwardChunks(t *testing.T) {
	b := newBackend(t)
	const n, v, d = 700, 5, 16 // every id repeats across the 256-token chunks of the scan
	for _, dts := range [][2]engine.DType{{engine.F32, engine.F32}, {engine.BF16, engine.BF16}, {engine.F32, engine.BF16}} {
		t.Run(fmt.Sprintf("%v/%v", dts[0], dts[1]), func(t *testing.T) {
			r := enginetest.Rand(11)
			ids := make([]int32, n)
			for i := range ids {
				ids[i] = int32(r.IntN(v))
			}
			base, gv := enginetest.Values(r, dts[0], v*d, 1), enginetest.Values(r, dts[1], n*d, 1)
			table := engine.FromF32(b, dts[0], base, v, d)
			b.EmbeddingBackward(table, engine.FromF32(b, dts[1], gv, n, d), engine.FromI32(b, ids, n))
			// Token order, rounding after every addition, as the CPU backend
			// does: the bits must agree.
			want := append([]float32(nil), base...)
			for i, id := range ids {
				for j := 0; j < d; j++ {
					k := int(id)*d + j
					want[k] = dts[0].Round(want[k] + gv[i*d+j])
				}
			}
			sameBits(t, "dTable", engine.ToF32(b, table), want)
		})
	}
}
