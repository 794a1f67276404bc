//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/engine/enginetest"
	"github.com/turnwise/turnwise/engine/ref"
)

// Checks of the sample kernels beyond the conformance suite: draws that must
// equal the CPU backend's exactly (ties at the nucleus boundary, several draw
// tiles, every float dtype).

// TestSampleMatchesCPU draws from rows with many tied weights (logits on a
// coarse grid: ties at the top-k and the nucleus boundaries), over several
// draw tiles, in every float dtype, and requires
// the CPU backend's ids (the same f32 weights, sums in another f64 order)
// and the float64 reference's.
func TestSampleMatchesCPU(t *testing.T) {
	g, c := newBackend(t), cpu.New(cpu.Options{})
	params := []engine.SampleParams{
		{}, {Temperature: 1}, {Temperature: 0.7, TopP: 0.9}, {Temperature: 1.3, TopP: 0.5},
		{Temperature: 1, TopP: 0.999}, {Temperature: 0.5, TopP: 0.01}, {Temperature: 2, TopP: 0.3},
		{Temperature: 1, TopK: 1}, {Temperature: 0.7, TopK: 3}, {Temperature: 1.3, TopK: 40, TopP: 0.9},
		{Temperature: 1, TopK: 1000, TopP: 0.5}, {Temperature: 2, TopK: 4098},
	}
	for _, dt := range []engine.DType{engine.F32, engine.BF16, engine.F16} {
		for _, shape := range []struct{ rows, v, grid int }{{5, 1, 1}, {6, 2, 1}, {8, 50, 4}, {4, 4099, 8}, {3, 20011, 32}} {
			for pi, sp := range params {
				name := fmt.Sprintf("%v/V=%d/T=%g_k=%d_p=%g", dt, shape.v, sp.Temperature, sp.TopK, sp.TopP)
				t.Run(name, func(t *testing.T) {
					r := enginetest.Rand(uint64(7*shape.v + pi))
					lv := make([]float32, shape.rows*shape.v)
					for i := range lv {
						// A coarse grid: ties everywhere, and at the nucleus boundary.
						lv[i] = dt.Round(float32(r.IntN(shape.grid)) * 0.25)
					}
					uv := make([]float32, shape.rows)
					for i := range uv {
						uv[i] = float32(r.Float64())
					}
					uv[0] = 0 // the first positive candidate
					got, want := draw(g, dt, lv, uv, shape.rows, shape.v, sp), draw(c, dt, lv, uv, shape.rows, shape.v, sp)
					for i := range got {
						if got[i] != want[i] {
							t.Fatalf("row %d (u=%g): drew %d, CPU %d", i, uv[i], got[i], want[i])
						}
						if rf := ref.Sample(enginetest.F64(lv[i*shape.v:(i+1)*shape.v]), float64(uv[i]),
							float64(sp.Temperature), float64(sp.TopP), sp.TopK); int(got[i]) != rf {
							t.Errorf("row %d (u=%g): drew %d, reference %d", i, uv[i], got[i], rf)
						}
					}
				})
			}
		}
	}
}

func draw(b engine.Backend, dt engine.DType, lv, uv []float32, rows, v int, sp engine.SampleParams) []int32 {
	ids := engine.MustAlloc(b, engine.I32, rows)
	b.Sample(ids, engine.FromF32(b, dt, lv, rows, v), engine.FromF32(b, engine.F32, uv, rows), sp)
	return engine.ToI32(b, ids)
}

// TestSampleTies: all weights equal, so the nucleus keeps the lowest
// ⌈p·V⌉ indices and the draw is ⌊u·k⌋ among them.
func TestSampleTies(t *testing.T) {
	g := newBackend(t)
	const v = 40
	us := []float32{0, 0.1, 0.49, 0.5, 0.77, 0.999}
	lv := make([]float32, len(us)*v)
	got := draw(g, engine.F32, lv, us, len(us), v, engine.SampleParams{Temperature: 1, TopP: 0.25})
	for i, u := range us {
		if want := int32(u * 10); got[i] != want {
			t.Errorf("u=%g: drew %d, want %d", u, got[i], want)
		}
	}
	// Greedy: the lowest index among equal maxima; NaN never wins.
	nan := float32(math.NaN())
	rows := [][]float32{{1, 3, 3, 2}, {nan, 5, 6, 6}, {2, nan, 2, 1}, {-1, -1, -1, -1}}
	want := []int32{1, 0, 0, 0}
	var flat []float32
	for _, r := range rows {
		flat = append(flat, r...)
	}
	got = draw(g, engine.F32, flat, make([]float32, len(rows)), len(rows), 4, engine.SampleParams{})
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("greedy row %v: %d, want %d", rows[i], got[i], want[i])
		}
	}
}

// TestSampleChunks: rows split over many chunks — ties at the top-k and
// nucleus boundaries that are kept only in part and span chunks, a vocabulary of
// Llama 3's size, and one over 256 chunks of 4096 (larger chunks) — draw the
// CPU backend's ids, and a rerun draws the same.
func TestSampleChunks(t *testing.T) {
	g, c := newBackend(t), cpu.New(cpu.Options{})
	for _, cs := range []struct {
		rows, v, grid int
		sp            engine.SampleParams
	}{
		{5, 10000, 1, engine.SampleParams{Temperature: 1, TopP: 0.6}},  // all tied: 6000 kept, over two chunks
		{4, 12289, 3, engine.SampleParams{Temperature: 1, TopP: 0.45}}, // three values, a partial tie group
		{3, 128256, 64, engine.SampleParams{Temperature: 0.8, TopP: 0.9}},
		{3, 128256, 64, engine.SampleParams{Temperature: 1}},
		{3, 128256, 64, engine.SampleParams{}},
		{2, 1100003, 1000, engine.SampleParams{Temperature: 1, TopP: 0.95}},
		{5, 10000, 1, engine.SampleParams{Temperature: 1, TopK: 6000}},              // all tied: the first 6000, over two chunks
		{5, 10000, 1, engine.SampleParams{Temperature: 1, TopK: 6000, TopP: 0.5}},   // then the first 3000
		{4, 12289, 3, engine.SampleParams{Temperature: 1, TopK: 5000}},              // a partial tie group over chunks
		{4, 12289, 3, engine.SampleParams{Temperature: 0.5, TopK: 9000, TopP: 0.3}}, // top-p inside the k
		{3, 128256, 64, engine.SampleParams{Temperature: 0.8, TopK: 50, TopP: 0.9}},
		{3, 128256, 64, engine.SampleParams{Temperature: 1, TopK: 100000}},
		{2, 1100003, 1000, engine.SampleParams{Temperature: 1, TopK: 40000, TopP: 0.95}},
	} {
		for _, dt := range []engine.DType{engine.F32, engine.BF16} {
			t.Run(fmt.Sprintf("%v/V=%d/T=%g_k=%d_p=%g", dt, cs.v, cs.sp.Temperature, cs.sp.TopK, cs.sp.TopP), func(t *testing.T) {
				r := enginetest.Rand(uint64(cs.v + cs.grid))
				lv := make([]float32, cs.rows*cs.v)
				for i := range lv {
					lv[i] = dt.Round(float32(r.IntN(cs.grid)) * 0.0625)
				}
				uv := make([]float32, cs.rows)
				for i := range uv {
					uv[i] = float32(r.Float64())
				}
				uv[0] = 0.999
				want := draw(c, dt, lv, uv, cs.rows, cs.v, cs.sp)
				for run := 0; run < 2; run++ {
					got := draw(g, dt, lv, uv, cs.rows, cs.v, cs.sp)
					for i := range got {
						if got[i] != want[i] {
							t.Fatalf("run %d, row %d (u=%g): drew %d, CPU %d", run, i, uv[i], got[i], want[i])
						}
					}
				}
			})
		}
	}
}
