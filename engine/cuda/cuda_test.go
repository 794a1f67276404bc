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

// TestConformanceCUBLAS runs the suite with GEMM "cublas": cuBLASLt, where
// the machine has one (real GPUs only).
func TestConformanceCUBLAS(t *testing.T) {
	if !haveCUBLAS {
		t.Skip("cuBLASLt runs on real GPUs only (-tags cuda)")
	}
	b, err := New(Options{GEMM: "cublas"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.lt == nil {
		t.Skip("no cuBLASLt on this machine (see the notice above); TW_CUBLAS_PATH names where to look")
	}
	t.Logf("GEMM: %s", b.GEMMName())
	enginetest.Run(t, b)
}
