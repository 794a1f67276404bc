package enginetest

import (
	"fmt"
	"testing"

	"github.com/turnwise/turnwise/engine"
	"github.com/turnwise/turnwise/engine/ref"
)

// testSample checks Sample's draws against ref.Sample for greedy,
// temperature and top-p parameters, and that the logits are left unchanged.
func testSample(t *testing.T, b engine.Backend) {
	const rows, v = 64, 50
	for _, dt := range FloatDTypes {
		for _, sp := range []engine.SampleParams{{}, {Temperature: 1}, {Temperature: 0.7, TopP: 0.9}, {Temperature: 1.3, TopP: 0.5}} {
			t.Run(fmt.Sprintf("%v/T=%g_p=%g", dt, sp.Temperature, sp.TopP), func(t *testing.T) {
				r := Rand(uint64(43 + 10*sp.Temperature))
				// Distinct logits (a shuffled ramp) so no draw hinges on a tie.
				lv := make([]float32, rows*v)
				for i := 0; i < rows; i++ {
					for j, k := range r.Perm(v) {
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
					want := ref.Sample(F64(lv[i*v:(i+1)*v]), float64(uv[i]), float64(sp.Temperature), float64(sp.TopP))
					if int(got[i]) != want {
						t.Fatalf("row %d (u=%g): sampled %d, want %d", i, uv[i], got[i], want)
					}
				}
				// The logits are an input: they must be left intact.
				Close(t, "logits unchanged", engine.ToF32(b, logits), F64(lv), 0)
			})
		}
	}
}
