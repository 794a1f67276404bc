//go:build cuda || cudaemu

package clip

import (
	"testing"

	"github.com/turnwise/turnwise/engine/cuda"
)

// TestEmbedGoldenCUDA runs the random-weight tower with the CUDA kernels:
// on the CPU emulator under -tags cudaemu, on a GPU under -tags cuda.
func TestEmbedGoldenCUDA(t *testing.T) {
	b, err := cuda.New(cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, b)
}
