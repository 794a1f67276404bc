package cpu

import (
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// TestLayerNormBiasThreadCountInvariance checks that LayerNorm, its
// backward and AddBiasBackward give bit-identical results with 1 and 3
// threads: dw and db are summed over fixed row blocks in a fixed order
// (colSums), with more rows than one block.
func TestLayerNormBiasThreadCountInvariance(t *testing.T) {
	const n, d = 200, 77
	r := enginetest.Rand(5)
	xv, gv := enginetest.Values(r, engine.F32, n*d, 2), enginetest.Values(r, engine.F32, n*d, 1)
	wv, bv := enginetest.Values(r, engine.F32, d, 1), enginetest.Values(r, engine.F32, d, 1)
	run := func(threads int) map[string][]float32 {
		b := New(Options{Threads: threads})
		x, g := engine.FromF32(b, engine.F32, xv, n, d), engine.FromF32(b, engine.F32, gv, n, d)
		w, bias := engine.FromF32(b, engine.F32, wv, d), engine.FromF32(b, engine.F32, bv, d)
		out := engine.MustAlloc(b, engine.F32, n, d)
		mean, rstd := engine.MustAlloc(b, engine.F32, n), engine.MustAlloc(b, engine.F32, n)
		b.LayerNorm(out, mean, rstd, x, w, bias, 1e-5)
		dx := engine.MustAlloc(b, engine.F32, n, d)
		dw, db := engine.MustAlloc(b, engine.F32, d), engine.MustAlloc(b, engine.F32, d)
		b.LayerNormBackward(dx, dw, db, g, x, w, mean, rstd)
		dbBias := engine.MustAlloc(b, engine.F32, d)
		b.AddBiasBackward(dbBias, g)
		return map[string][]float32{
			"out": engine.ToF32(b, out), "mean": engine.ToF32(b, mean), "rstd": engine.ToF32(b, rstd),
			"dx": engine.ToF32(b, dx), "dw": engine.ToF32(b, dw), "db": engine.ToF32(b, db),
			"AddBiasBackward db": engine.ToF32(b, dbBias),
		}
	}
	one, three := run(1), run(3)
	for name, a := range one {
		for i := range a {
			if a[i] != three[name][i] {
				t.Errorf("%s[%d]: %v with 1 thread, %v with 3", name, i, a[i], three[name][i])
				break
			}
		}
	}
}

// TestNewOpsRejectBadArgs checks that LayerNorm, AddBias and GELU stop on a
// wrong shape, dtype or kind with a message naming what is wrong.
func TestNewOpsRejectBadArgs(t *testing.T) {
	b := New(Options{Threads: 1})
	f32 := func(shape ...int) *engine.Tensor { return engine.MustAlloc(b, engine.F32, shape...) }
	bf16 := func(shape ...int) *engine.Tensor { return engine.MustAlloc(b, engine.BF16, shape...) }
	for _, c := range []struct {
		name string
		run  func()
		want string
	}{
		{"LayerNorm weight width", func() { b.LayerNorm(f32(4, 8), f32(4), f32(4), f32(4, 8), f32(7), f32(8), 1e-5) }, "[7]"},
		{"LayerNorm bias dtype", func() { b.LayerNorm(f32(4, 8), f32(4), f32(4), f32(4, 8), f32(8), bf16(8), 1e-5) }, "bf16"},
		{"LayerNorm nil bias", func() { b.LayerNorm(f32(4, 8), f32(4), f32(4), f32(4, 8), f32(8), nil, 1e-5) }, "nil bias"},
		{"LayerNormBackward dw width", func() {
			b.LayerNormBackward(f32(4, 8), f32(9), nil, f32(4, 8), f32(4, 8), f32(8), f32(4), f32(4))
		}, "[9]"},
		{"AddBias bias width", func() { b.AddBias(f32(4, 8), f32(5)) }, "[5]"},
		{"AddBias bias dtype", func() { b.AddBias(bf16(4, 8), f32(8)) }, "f32"},
		{"AddBiasBackward rank", func() { b.AddBiasBackward(f32(8), f32(32)) }, "[32]"},
		{"GELU kind", func() { b.GELU(f32(6), f32(6), engine.GELUKind(7)) }, "GELUKind(7)"},
		{"GELU count", func() { b.GELU(f32(5), f32(6), engine.GELUQuick) }, "f32[5]"},
		{"GELUBackward dtype", func() { b.GELUBackward(f32(6), bf16(6), f32(6), engine.GELUErf) }, "bf16[6]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, c.want) {
					t.Errorf("panic %q, want one naming %q", msg, c.want)
				}
			}()
			c.run()
		})
	}
}
