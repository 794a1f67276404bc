package cpu

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
)

// Embedding implements engine.Backend.Embedding: rows gathered in parallel.
func (b *Backend) Embedding(out, table, ids *engine.Tensor) {
	n, v, d := engine.EmbeddingShape("Embedding", out, table, ids)
	idx := i32s(ids)
	checkIDs("Embedding", idx, v)
	o, t := floatsOf(out), floatsOf(table)
	b.parallel(n, 16, func(w, lo, hi int) {
		buf := b.scratchOf(w, d)
		for i := lo; i < hi; i++ {
			row := int(idx[i]) * d
			if o.dt == t.dt {
				copyElems(o, i*d, t, row, d)
				continue
			}
			o.store(i*d, t.load(row, d, buf))
		}
	})
}

// EmbeddingBackward implements engine.Backend.EmbeddingBackward. Goroutines
// split the D columns, and each walks all tokens in order, so repeated ids
// accumulate in token order whatever the thread count: per token, its window
// of the table row and of dOut are widened to f32 (vector conversions for
// bf16), added, and the row rounded back to the table's dtype — the rounding
// after every addition that the contract's token order implies.
func (b *Backend) EmbeddingBackward(dTable, dOut, ids *engine.Tensor) {
	_, v, d := engine.EmbeddingShape("EmbeddingBackward", dOut, dTable, ids)
	idx := i32s(ids)
	checkIDs("EmbeddingBackward", idx, v)
	dt, do := floatsOf(dTable), floatsOf(dOut)
	b.parallel(d, 16, func(w, lo, hi int) {
		if dt.dt == engine.F32 && do.dt == engine.F32 {
			for i, id := range idx {
				src, dst := i*d, int(id)*d
				s, t := do.f[src+lo:src+hi], dt.f[dst+lo:dst+hi]
				for j := range t {
					t[j] += s[j]
				}
			}
			return
		}
		n := hi - lo
		buf := b.scratchOf(w, 2*n)
		tb, gb := buf[:n], buf[n:2*n]
		for i, id := range idx {
			src, dst := i*d+lo, int(id)*d+lo
			t := dt.load(dst, n, tb) // the table's storage itself when it is f32
			g := do.load(src, n, gb)
			for j, x := range g {
				t[j] += x
			}
			dt.store(dst, t)
		}
	})
}

// checkIDs panics naming the op and the offending id when one is outside
// [0, v).
func checkIDs(op string, ids []int32, v int) {
	for i, id := range ids {
		if id < 0 || int(id) >= v {
			panic(fmt.Sprintf("engine: %s: ids[%d] = %d outside the table's %d rows", op, i, id, v))
		}
	}
}

// copyElems copies n elements between two windows of one dtype.
func copyElems(dst floats, doff int, src floats, soff, n int) {
	if dst.dt == engine.F32 {
		copy(dst.f[doff:doff+n], src.f[soff:soff+n])
		return
	}
	copy(dst.h[doff:doff+n], src.h[soff:soff+n])
}
