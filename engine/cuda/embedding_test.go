//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// Checks of the embedding kernels beyond the conformance suite: the
// backward's sort over several tiles, heavy repeats, unused and extreme ids,
// the element-by-element path (odd widths, views off the 16-byte grid), and
// bits that equal the token-order sum, the CPU backend's and a rerun's.

// embeddingBackwardWant is dTable after EmbeddingBackward by the contract:
// token order, rounding to the table's dtype after every addition.
func embeddingBackwardWant(tdt engine.DType, base, gv []float32, ids []int32, d int) []float32 {
	want := append([]float32(nil), base...)
	for i, id := range ids {
		for j := 0; j < d; j++ {
			k := int(id)*d + j
			want[k] = tdt.Round(want[k] + gv[i*d+j])
		}
	}
	return want
}

func TestEmbeddingBackwardExact(t *testing.T) {
	b, c := newBackend(t), cpu.New(cpu.Options{})
	type idsOf func(r interface{ IntN(int) int }, n, v int) []int32
	random := func(r interface{ IntN(int) int }, n, v int) []int32 {
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = int32(r.IntN(v))
		}
		return ids
	}
	cases := []struct {
		name    string
		n, v, d int
		ids     idsOf
		offT    int // element offset of dTable in its buffer (views off the 16-byte grid)
		offO    int // element offset of dOut
	}{
		// Every id repeated ~140 times, in one sort tile.
		{"heavy", 700, 5, 16, random, 0, 0},
		// Several sort tiles (2048 tokens each), ids repeated across tiles,
		// most table rows never used.
		{"tiles", 5000, 300, 24, random, 0, 0},
		// A single id for every token: one run across three tiles, and a
		// row wider than one block's span of columns.
		{"one_id", 4500, 7, 2056, func(_ interface{ IntN(int) int }, n, v int) []int32 {
			ids := make([]int32, n)
			for i := range ids {
				ids[i] = int32(v - 1) // the largest id
			}
			return ids
		}, 0, 0},
		// Rows of two column spans in every dtype (a span is up to 128
		// threads of 4 packs: 4096 bf16 or 2048 f32), the second ragged.
		{"two_spans", 90, 4, 4104, random, 0, 0},
		// Distinct ids over a large vocabulary: no repeats at all, with the
		// first and the last rows of the table.
		{"distinct", 2100, 128256, 8, func(_ interface{ IntN(int) int }, n, v int) []int32 {
			ids := make([]int32, n)
			for i := range ids {
				ids[i] = int32((i * 7919) % v)
			}
			ids[0], ids[n-1] = int32(v-1), 0
			return ids
		}, 0, 0},
		// Odd widths: element-by-element accesses.
		{"odd_d", 300, 11, 13, random, 0, 0},
		// Views one element past the 16-byte grid: element by element too.
		{"misaligned_table", 257, 9, 32, random, 1, 0},
		{"misaligned_dout", 257, 9, 32, random, 0, 3},
	}
	dtypes := [][2]engine.DType{{engine.F32, engine.F32}, {engine.BF16, engine.BF16}, {engine.F32, engine.BF16}, {engine.BF16, engine.F32}}
	for _, cs := range cases {
		for _, dts := range dtypes {
			t.Run(fmt.Sprintf("%s/%v_%v", cs.name, dts[0], dts[1]), func(t *testing.T) {
				r := enginetest.Rand(uint64(cs.n + cs.v + cs.d))
				ids := cs.ids(r, cs.n, cs.v)
				base, gv := enginetest.Values(r, dts[0], cs.v*cs.d, 1), enginetest.Values(r, dts[1], cs.n*cs.d, 1)
				want := embeddingBackwardWant(dts[0], base, gv, ids, cs.d)
				idt := engine.FromI32(b, ids, cs.n)
				dout := at(b, dts[1], cs.offO*dts[1].Size(), gv).Reshape(cs.n, cs.d)
				for run := 0; run < 2; run++ { // a rerun gives the same bits
					table := at(b, dts[0], cs.offT*dts[0].Size(), base).Reshape(cs.v, cs.d)
					b.EmbeddingBackward(table, dout, idt)
					sameBits(t, fmt.Sprintf("run %d: dTable", run), engine.ToF32(b, table), want)
				}
				// The CPU backend: the same bits.
				ct := engine.FromF32(c, dts[0], base, cs.v, cs.d)
				c.EmbeddingBackward(ct, engine.FromF32(c, dts[1], gv, cs.n, cs.d), engine.FromI32(c, ids, cs.n))
				sameBits(t, "CPU dTable", engine.ToF32(c, ct), want)
			})
		}
	}
}

// TestEmbeddingBackwardSkipsOutOfRange: ids outside [0, v) change nothing
// (the kernels' addition to the contract).
func TestEmbeddingBackwardSkipsOutOfRange(t *testing.T) {
	b := newBackend(t)
	const v, d = 4, 8
	ids := []int32{2, -1, 4, 2, 1 << 30, 0}
	r := enginetest.Rand(3)
	base, gv := enginetest.Values(r, engine.F32, v*d, 1), enginetest.Values(r, engine.F32, len(ids)*d, 1)
	table := engine.FromF32(b, engine.F32, base, v, d)
	b.EmbeddingBackward(table, engine.FromF32(b, engine.F32, gv, len(ids), d), engine.FromI32(b, ids, len(ids)))
	var kept []int32
	var kg []float32
	for i, id := range ids {
		if id >= 0 && id < v {
			kept = append(kept, id)
			kg = append(kg, gv[i*d:(i+1)*d]...)
		}
	}
	sameBits(t, "dTable", engine.ToF32(b, table), embeddingBackwardWant(engine.F32, base, kg, kept, d))
}

// TestEmbeddingForwardViews: the gather at widths wider than one block's
// span, odd widths and views off the 16-byte grid copies the rows exactly.
func TestEmbeddingForwardViews(t *testing.T) {
	b := newBackend(t)
	for _, cs := range []struct{ n, v, d, offT, offO int }{{9, 5, 4104, 0, 0}, {7, 6, 13, 0, 0}, {5, 4, 24, 1, 0}, {5, 4, 24, 0, 3}} {
		for _, dts := range [][2]engine.DType{{engine.F32, engine.F32}, {engine.BF16, engine.BF16}, {engine.BF16, engine.F32}, {engine.F32, engine.F16}} {
			t.Run(fmt.Sprintf("V=%d_D=%d_at%d,%d/%v_%v", cs.v, cs.d, cs.offT, cs.offO, dts[0], dts[1]), func(t *testing.T) {
				r := enginetest.Rand(uint64(cs.d))
				tv := enginetest.Values(r, dts[0], cs.v*cs.d, 1)
				ids := make([]int32, cs.n)
				for i := range ids {
					ids[i] = int32(r.IntN(cs.v))
				}
				table := at(b, dts[0], cs.offT*dts[0].Size(), tv).Reshape(cs.v, cs.d)
				out := at(b, dts[1], cs.offO*dts[1].Size(), make([]float32, cs.n*cs.d)).Reshape(cs.n, cs.d)
				b.Embedding(out, table, engine.FromI32(b, ids, cs.n))
				want := make([]float32, cs.n*cs.d)
				for i, id := range ids {
					for j := 0; j < cs.d; j++ {
						want[i*cs.d+j] = dts[1].Round(tv[int(id)*cs.d+j])
					}
				}
				sameBits(t, "out", engine.ToF32(b, out), want)
			})
		}
	}
}
