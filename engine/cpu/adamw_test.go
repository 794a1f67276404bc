package cpu

import (
	"bytes"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// TestAdamWThreadCountInvariance checks that AdamW and AdamWMulti give the
// same bits with 1 and 3 threads: where a worker's range starts decides
// which elements take the vector loop and which the scalar one, so the two
// must compute the same operations.
func TestAdamWThreadCountInvariance(t *testing.T) {
	const n = 100003 // splits into ranges that do not start at multiples of 8
	run := func(threads int) (single, multi []byte) {
		b := New(Options{Threads: threads})
		r := enginetest.Rand(5)
		wv, gv := enginetest.Values(r, engine.F32, n, 1), enginetest.Values(r, engine.F32, n, 1)
		p := engine.AdamWParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: 3, GradScale: 0.7}
		w, g := engine.FromF32(b, engine.F32, wv, n), engine.FromF32(b, engine.F32, gv, n)
		half := make([]float32, n)
		for i, x := range gv {
			half[i] = 0.5 * x
		}
		m, v := engine.FromF32(b, engine.F32, gv, n), engine.FromF32(b, engine.F32, half, n)
		b.AdamW(w, g, m, v, nil, p)
		single = raw(b, w)

		w2 := engine.FromF32(b, engine.BF16, wv[:n/2], n/2)
		master := engine.FromF32(b, engine.F32, wv[:n/2], n/2)
		table := engine.NewParamTable([]engine.AdamWSpan{{W: w2, Off: 3, MasterOff: 0}, {W: w, Off: n/2 + 7, MasterOff: -1}})
		big := n/2 + 7 + n
		gm := engine.FromF32(b, engine.F32, enginetest.Values(r, engine.F32, big, 1), big)
		mm, vm := engine.MustAlloc(b, engine.F32, big), engine.MustAlloc(b, engine.F32, big)
		b.AdamWMulti(table, gm, mm, vm, master, p)
		b.AdamWMulti(table, gm, mm, vm, master, engine.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, Step: 4, GradScale: 1})
		return single, append(append(raw(b, w), raw(b, w2)...), append(raw(b, master), raw(b, mm)...)...)
	}
	s1, m1 := run(1)
	s3, m3 := run(3)
	if !bytes.Equal(s1, s3) {
		t.Error("AdamW: the weights differ between 1 and 3 threads")
	}
	if !bytes.Equal(m1, m3) {
		t.Error("AdamWMulti: the weights, master or moments differ between 1 and 3 threads")
	}
}

func raw(b engine.Backend, x *engine.Tensor) []byte {
	out := make([]byte, x.Bytes())
	b.Download(out, x)
	return out
}
