//go:build cuda || cudaemu

package cuda

import (
	"testing"

	"github.com/turnwise/turnwise/engine/enginetest"
)

// TestConformance runs the whole op suite — every kernel, forward and
// backward, against the float64 reference — on this backend: on the CPU
// emulator under -tags cudaemu, on a GPU under -tags cuda.
func TestConformance(t *testing.T) {
	b, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Run(t, b)
}
