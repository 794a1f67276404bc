package enginetest

import (
	"fmt"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/ref"
)

// testSample checks Sample's draws against ref.Sample for greedy,
// temperature, top-k and top-p parameters, and that the logits are left
// unchanged. Rows of distinct logits (a shuffled ramp) keep every draw off a
// tie; rows on a coarse grid of four values put ties at the top-k and top-p
// boundaries, which the rule breaks by index, the same in f32 and f64.
func testSample(t *testing.T, b engine.Backend) {
	const rows, v = 64, 50
	for ci, c := range []struct {
		sp   engine.SampleParams
		grid bool // logits on a coarse grid: ties
	}{
		{sp: engine.SampleParams{}},
		{sp: engine.SampleParams{Temperature: 1}},
		{sp: engine.SampleParams{Temperature: 0.7, TopP: 0.9}},
		{sp: engine.SampleParams{Temperature: 1.3, TopP: 0.5}},
		{sp: engine.SampleParams{Temperature: 1, TopK: 1}},
		{sp: engine.SampleParams{Temperature: 0.8, TopK: 7}},
		{sp: engine.SampleParams{Temperature: 1, TopK: v - 1}},
		{sp: engine.SampleParams{Temperature: 1, TopK: v}},
		{sp: engine.SampleParams{Temperature: 1.2, TopK: 12, TopP: 0.8}},
		{sp: engine.SampleParams{Temperature: 2, TopK: 30, TopP: 0.3}},
		{sp: engine.SampleParams{Temperature: 1, TopK: 5}, grid: true},
		{sp: engine.SampleParams{Temperature: 1, TopK: 20, TopP: 0.7}, grid: true},
	} {
		sp := c.sp
		for _, dt := range FloatDTypes {
			t.Run(fmt.Sprintf("%v/T=%g_k=%d_p=%g_grid=%t", dt, sp.Temperature, sp.TopK, sp.TopP, c.grid), func(t *testing.T) {
				r := Rand(uint64(43 + ci))
				lv := make([]float32, rows*v)
				for i := 0; i < rows; i++ {
					for j, k := range r.Perm(v) {
						if c.grid {
							k %= 4
						}
						lv[i*v+j] = dt.Round(float32(k)*0.125 - 3)
					}
				}
				uv := make([]float32, rows)
				for i := range uv {
					uv[i] = float32(r.Float64())
				}
				logits := engine.FromF32(b, dt, lv, rows, v)
				ids := engine.MustAlloc(b, engine.I32, rows)
				b.Sample(ids, logits, engine.FromF32(b, engine.F32, uv, rows), sp)
				got := engine.ToI32(b, ids)
				for i := range got {
					row := F64(lv[i*v : (i+1)*v])
					want := ref.Sample(row, float64(uv[i]), float64(sp.Temperature), float64(sp.TopP), sp.TopK)
					if int(got[i]) != want {
						t.Fatalf("row %d (u=%g): sampled %d, want %d", i, uv[i], got[i], want)
					}
					// k = 1 is greedy, k ≥ V is no limit: the reference
					// must agree, or the checks above prove nothing.
					switch {
					case sp.TopK == 1 && want != ref.Sample(row, 0, 0, 0, 0):
						t.Fatalf("row %d: top-1 drew %d, not the argmax", i, want)
					case sp.TopK >= v && want != ref.Sample(row, float64(uv[i]), float64(sp.Temperature), float64(sp.TopP), 0):
						t.Fatalf("row %d: k = %d ≥ V drew %d, not the draw without top-k", i, sp.TopK, want)
					}
				}
				// The logits are an input: they must be left intact.
				Close(t, "logits unchanged", engine.ToF32(b, logits), F64(lv), 0)
			})
		}
	}
	t.Run("top-k ties", func(t *testing.T) { testSampleTopKTies(t, b) })
}

// testSampleTopKTies: with all weights equal the k candidates are the
// lowest k indices, and the draw is ⌊u·k⌋ among them (every running sum is
// an exact integer); top-p then keeps the lowest ⌈p·k⌉ of those.
func testSampleTopKTies(t *testing.T, b engine.Backend) {
	const v = 40
	us := []float32{0, 0.1, 0.49, 0.5, 0.77, 0.999}
	for _, c := range []struct {
		sp engine.SampleParams
		n  int // candidates
	}{
		{engine.SampleParams{Temperature: 1, TopK: 8}, 8},
		{engine.SampleParams{Temperature: 0.5, TopK: 1}, 1},
		{engine.SampleParams{Temperature: 1, TopK: 20, TopP: 0.5}, 10},
		{engine.SampleParams{Temperature: 1, TopK: 10, TopP: 0.9}, 9},
	} {
		lv := make([]float32, len(us)*v)
		for i := range lv {
			lv[i] = 1.5
		}
		ids := engine.MustAlloc(b, engine.I32, len(us))
		b.Sample(ids, engine.FromF32(b, engine.F32, lv, len(us), v), engine.FromF32(b, engine.F32, us, len(us)), c.sp)
		for i, g := range engine.ToI32(b, ids) {
			if want := int32(us[i] * float32(c.n)); g != want {
				t.Errorf("%+v, u=%g: drew %d, want %d", c.sp, us[i], g, want)
			}
		}
	}
}
