//go:build cuda || cudaemu

package cuda

import (
	"testing"

	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// TestConformanceShapes compares this backend with the CPU backend at a
// model's shapes: enginetest.Mini by default (CI runs it on the emulator),
// Llama-3.1-8B's with TW_CONFORMANCE_SHAPES=llama8B (on a GPU; most of its
// time is the CPU backend's). On a GPU the whole set runs a second time with
// GEMMs through cuBLASLt (subtest "cublas"; skipped where the machine has
// none); -test.run selects one, e.g. '^TestConformanceShapes$/^default$'.
func TestConformanceShapes(t *testing.T) {
	s, err := enginetest.ShapesFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	gemms := []string{"default"}
	if haveCUBLAS {
		gemms = append(gemms, "cublas")
	}
	ref := cpu.New(cpu.Options{})
	for _, g := range gemms {
		t.Run(g, func(t *testing.T) {
			opt := Options{}
			if g != "default" {
				opt.GEMM = g
			}
			b, err := New(opt)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if opt.GEMM == "cublas" && b.lt == nil {
				t.Skip("no cuBLASLt on this machine (see the notice above); TW_CUBLAS_PATH names where to look")
			}
			t.Logf("GEMM: %s", b.GEMMName())
			if b.Name() == "cudaemu" && s.Name != enginetest.Mini.Name {
				t.Skipf("shapes %s would take hours on the kernel emulator; it runs %s", s.Name, enginetest.Mini.Name)
			}
			enginetest.RunShapes(t, b, ref, s)
		})
	}
}
