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
}
