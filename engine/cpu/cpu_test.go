package cpu

import (
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// TestConformance runs the whole op suite against the float64 reference.
func TestConformance(t *testing.T) {
	enginetest.Run(t, New(Options{}))
}

// TestThreadCountInvariance checks that the reductions whose order the
// contracts fix give bit-identical results with 1 and 3 threads.
func TestThreadCountInvariance(t *testing.T) {
	r := enginetest.Rand(1)
	const n, d = 37, 300
	xv, gv, wv := enginetest.Values(r, engine.F32, n*d, 2), enginetest.Values(r, engine.F32, n*d, 1), enginetest.Values(r, engine.F32, d, 1)
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(i % 5)
	}
	run := func(threads int) (sum float32, dx, dw, dTable []float32) {
		b := New(Options{Threads: threads})
		x, g, w := engine.FromF32(b, engine.F32, xv, n, d), engine.FromF32(b, engine.F32, gv, n, d), engine.FromF32(b, engine.F32, wv, d)
		acc := engine.MustAlloc(b, engine.F32, 1)
		big := engine.FromF32(b, engine.F32, enginetest.Values(r, engine.F32, 300000, 1), 300000)
		b.SumSquares(acc, big)
		out, rstd := engine.MustAlloc(b, engine.F32, n, d), engine.MustAlloc(b, engine.F32, n)
		b.RMSNorm(out, rstd, x, w, 1e-5)
		dxT, dwT := engine.MustAlloc(b, engine.F32, n, d), engine.MustAlloc(b, engine.F32, d)
		b.RMSNormBackward(dxT, dwT, g, x, w, rstd)
		tab := engine.MustAlloc(b, engine.F32, 5, d)
		b.EmbeddingBackward(tab, g, engine.FromI32(b, ids, n))
		return engine.ToF32(b, acc)[0], engine.ToF32(b, dxT), engine.ToF32(b, dwT), engine.ToF32(b, tab)
	}
	r = enginetest.Rand(2)
	s1, dx1, dw1, t1 := run(1)
	r = enginetest.Rand(2)
	s3, dx3, dw3, t3 := run(3)
	if s1 != s3 {
		t.Errorf("SumSquares: %v with 1 thread, %v with 3", s1, s3)
	}
	for name, pair := range map[string][2][]float32{"dx": {dx1, dx3}, "dw": {dw1, dw3}, "dTable": {t1, t3}} {
		for i := range pair[0] {
			if pair[0][i] != pair[1][i] {
				t.Errorf("%s[%d]: %v with 1 thread, %v with 3", name, i, pair[0][i], pair[1][i])
				break
			}
		}
	}
}

// TestShapeMismatchNamesShapes checks that a wrong shape stops with a message
// naming both shapes.
func TestShapeMismatchNamesShapes(t *testing.T) {
	b := New(Options{Threads: 1})
	cases := []struct {
		name string
		run  func()
		want []string
	}{
		{"gemm", func() {
			b.Gemm(engine.MustAlloc(b, engine.F32, 3, 4), engine.MustAlloc(b, engine.F32, 3, 5), engine.MustAlloc(b, engine.F32, 6, 4), engine.GemmParams{Alpha: 1})
		}, []string{"[3, 4]", "[3, 5]", "[6, 4]"}},
		{"add", func() {
			b.Add(engine.MustAlloc(b, engine.F32, 2, 3), engine.MustAlloc(b, engine.F32, 3, 2), engine.MustAlloc(b, engine.F32, 2, 3))
		}, []string{"[2, 3]", "[3, 2]"}},
		{"rmsnorm", func() {
			b.RMSNorm(engine.MustAlloc(b, engine.F32, 2, 8), engine.MustAlloc(b, engine.F32, 2), engine.MustAlloc(b, engine.F32, 2, 8), engine.MustAlloc(b, engine.F32, 7), 1e-5)
		}, []string{"[7]", "[8]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if msg == "" {
					t.Fatal("no panic for mismatched shapes")
				}
				for _, w := range c.want {
					if !strings.Contains(msg, w) {
						t.Errorf("panic %q does not name %s", msg, w)
					}
				}
			}()
			c.run()
		})
	}
}
