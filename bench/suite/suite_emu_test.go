//go:build cudaemu

package suite

import (
	"testing"

	"github.com/turnwise/turnwise/bench/target"
)

// TestEmulatorSmall runs the whole train bench suite through the CUDA
// kernels on the emulator: the GPU path's measuring code, exercised here.
func TestEmulatorSmall(t *testing.T) {
	tg, err := target.Open(target.Options{Backend: "cuda"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Measure(tg, quick("cuda"))
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, r, true)
	if r.Meta.Backend != "cudaemu" || r.Meta.Shapes != "small" || r.Meta.Timer != "CUDA events on the backend's stream" {
		t.Errorf("meta %+v", r.Meta)
	}
	// The emulator has no cuBLASLt: its default GEMM is ours, and the
	// results say so.
	if r.Meta.GEMM != "own" {
		t.Errorf("meta GEMM %q, want own", r.Meta.GEMM)
	}
	for _, s := range r.Steps {
		if s.GEMM != "own" {
			t.Errorf("step %s: GEMM %q, want own", s.Name, s.GEMM)
		}
	}
	if tg.Own != tg.Backend || tg.Vendor != nil {
		t.Errorf("target: own GEMM backend %v (backend %v), vendor %v; want the backend itself and no vendor", tg.Own, tg.Backend, tg.Vendor)
	}
	if _, err := target.Open(target.Options{Backend: "cuda", GEMM: "cublas"}); err == nil {
		t.Error("GEMM cublas on the emulator: opened, want an error")
	}
}
