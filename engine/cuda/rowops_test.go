//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/enginetest"
	"github.com/turnwise/turnwise/engine/ref"
)

// Kernel paths of the embedding, rmsnorm and logsoftmax families that the
// conformance suite's shapes do not reach: the RMSNorm backward with several
// rows per dw group and with a dw partial above 48 KiB of shared memory, an
// f32 weight with bf16 activations, the embedding backward's id scan over
// several chunks, and non-finite logits. Shapes stay small: the emulator runs
// every thread.

func newBackend(t *testing.T) *Backend {
	t.Helper()
	b, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameBits fails unless got and want are identical.
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func TestRMSNormBackwardGroups(t *testing.T) {
	b := newBackend(t)
	cases := []struct {
		n, d   int
		dt, wt engine.DType
	}{
		{1100, 24, engine.F32, engine.F32},  // two rows per dw group
		{2100, 9, engine.BF16, engine.BF16}, // three rows per group, scalar path
		{300, 16, engine.BF16, engine.F32},  // f32 weight, bf16 activations
		{3, 12800, engine.F32, engine.F32},  // dw partial of 50 KiB
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v_w%v/N=%d_D=%d", c.dt, c.wt, c.n, c.d), func(t *testing.T) {
			r := enginetest.Rand(uint64(c.n*c.d) + 3)
			xv, gv := enginetest.Values(r, c.dt, c.n*c.d, 2), enginetest.Values(r, c.dt, c.n*c.d, 1)
			dx0, dw0 := enginetest.Values(r, c.dt, c.n*c.d, 1), enginetest.Values(r, c.wt, c.d, 1)
			wv := make([]float32, c.d)
			for j := range wv {
				wv[j] = c.wt.Round(float32(0.5 + r.Float64()))
			}
			x, w := engine.FromF32(b, c.dt, xv, c.n, c.d), engine.FromF32(b, c.wt, wv, c.d)
			out, rstd := engine.MustAlloc(b, c.dt, c.n, c.d), engine.MustAlloc(b, engine.F32, c.n)
			b.RMSNorm(out, rstd, x, w, 1e-5)
			round := func(v float64) float64 { return float64(c.dt.Round(float32(v))) }
			wantOut, wantR := ref.RMSNorm(enginetest.F64(xv), enginetest.F64(wv), c.n, c.d, 1e-5, round)
			enginetest.Close(t, "out", engine.ToF32(b, out), wantOut, enginetest.Tol(c.dt))
			enginetest.Close(t, "rstd", engine.ToF32(b, rstd), wantR, enginetest.TolF32)

			backward := func() (dx, dw []float32) {
				dxt, dwt := engine.FromF32(b, c.dt, dx0, c.n, c.d), engine.FromF32(b, c.wt, dw0, c.d)
				b.RMSNormBackward(dxt, dwt, engine.FromF32(b, c.dt, gv, c.n, c.d), x, w, rstd)
				return engine.ToF32(b, dxt), engine.ToF32(b, dwt)
			}
			dx, dw := backward()
			// float64 reference of the contract, with the kernel's rstd.
			rs := engine.ToF32(b, rstd)
			wantDx, wantDw := make([]float64, c.n*c.d), enginetest.F64(dw0)
			for i := 0; i < c.n; i++ {
				var s float64
				for j := 0; j < c.d; j++ {
					s += float64(gv[i*c.d+j]) * float64(wv[j]) * float64(xv[i*c.d+j]) * float64(rs[i])
				}
				s /= float64(c.d)
				for j := 0; j < c.d; j++ {
					k := i*c.d + j
					nv := float64(xv[k]) * float64(rs[i])
					wantDx[k] = float64(dx0[k]) + float64(rs[i])*(float64(gv[k])*float64(wv[j])-nv*s)
					wantDw[j] += float64(gv[k]) * nv
				}
			}
			enginetest.Close(t, "dx", dx, wantDx, enginetest.Tol(c.dt))
			enginetest.Close(t, "dw", dw, wantDw, enginetest.Tol(c.wt))
			// The same bits on a second run: dw's sums have a fixed order.
			dx2, dw2 := backward()
			sameBits(t, "dx (second run)", dx2, dx)
			sameBits(t, "dw (second run)", dw2, dw)
		})
	}
}

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

func TestLogSoftmaxNonFinite(t *testing.T) {
	b := newBackend(t)
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	const v = 16
	rows := []struct {
		head      []float32 // the rest of the row is −Inf
		target    int32
		lse, logp float64
	}{
		{[]float32{1, 2, nan, 3}, 0, math.NaN(), math.NaN()}, // a NaN: lse NaN
		{[]float32{1, inf, 2}, 2, math.Inf(1), math.Inf(-1)}, // +Inf maximum: lse = +Inf
		{nil, 1, math.Inf(-1), math.NaN()},                   // all −Inf: lse = −Inf
		{[]float32{-inf, 3, 1}, 1, 3 + math.Log1p(math.Exp(-2)), -math.Log1p(math.Exp(-2))},
	}
	lv, tg := make([]float32, len(rows)*v), make([]int32, len(rows))
	for i, row := range rows {
		for j := 0; j < v; j++ {
			lv[i*v+j] = -inf
			if j < len(row.head) {
				lv[i*v+j] = row.head[j]
			}
		}
		tg[i] = row.target
	}
	lp, ls := engine.MustAlloc(b, engine.F32, len(rows)), engine.MustAlloc(b, engine.F32, len(rows))
	b.LogSoftmaxGather(lp, ls, engine.FromF32(b, engine.F32, lv, len(rows), v), engine.FromI32(b, tg, len(rows)))
	gotP, gotL := engine.ToF32(b, lp), engine.ToF32(b, ls)
	same := func(got float32, want float64) bool {
		g := float64(got)
		return g == want || (math.IsNaN(g) && math.IsNaN(want)) || math.Abs(g-want) <= 1e-6*math.Abs(want)
	}
	for i, row := range rows {
		if !same(gotL[i], row.lse) || !same(gotP[i], row.logp) {
			t.Errorf("row %d: lse %v, logp %v; want %v, %v", i, gotL[i], gotP[i], row.lse, row.logp)
		}
	}
}
