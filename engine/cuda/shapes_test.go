//go:build cuda || cudaemu

package cuda

import (
	"testing"

	"github.com/turnwise/turnwise/engine/cpu"
	"github.com/turnwise/turnwise/engine/enginetest"
)

// TestConformanceShapes runs every op at a model's shapes (see
// enginetest.RunShapes), once per GEMM: "own" (our kernel) and
// "cublas" (cuBLASLt; real GPUs only, skipped where the machine has none),
// which runs the GEMMs alone, every other op of it being the kernels "own"
// runs. At enginetest.Mini's shapes, the default (CI runs it on the
// emulator), the reference is the CPU backend. At Llama-3.1-8B's, with
// TW_CONFORMANCE_SHAPES=llama8B (on a GPU; the emulator skips them), the
// CPU cannot keep up and the backend is its own reference: bf16 against its
// f32 kernels, the GEMMs also against the other GEMM (ours against
// cuBLASLt and back), float64 spot checks of sampled rows throughout.
// Subtests are <gemm>/<shapes>/<dtype>/<op>, so that one process can run
// one op, e.g. -test.run '^TestConformanceShapes$/^(own|cublas)$/^llama8B$/./^gemm$'.
func TestConformanceShapes(t *testing.T) {
	s, err := enginetest.ShapesFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"own", "cublas"} {
		t.Run(g, func(t *testing.T) {
			b := openGEMM(t, g)
			if b == nil {
				t.Skip("no cuBLASLt: it runs on real GPUs only (-tags cuda), and there only where one is found (TW_CUBLAS_PATH names where to look)")
			}
			if b.Name() == "cudaemu" && s.Name != enginetest.Mini.Name {
				t.Skipf("shapes %s would take hours on the kernel emulator; it runs %s", s.Name, enginetest.Mini.Name)
			}
			var c enginetest.ShapesConfig
			if g == "cublas" { // the only ops of that backend that "own" does not run
				c.Ops = []string{"gemm"}
			}
			if s.Name == enginetest.Mini.Name {
				c.Ref = cpu.New(cpu.Options{})
			} else {
				other := map[string]string{"own": "cublas", "cublas": "own"}[g]
				if peer := openGEMM(t, other); peer != nil {
					c.GEMMPeer = peer
				} else {
					t.Logf("no cuBLASLt: the GEMMs are checked against our f32 GEMM and float64 alone")
				}
			}
			enginetest.RunShapes(t, b, c, s)
		})
	}
}

// TestConformanceShapesSelf runs the self-reference mode of RunShapes — the
// mode of Llama-3.1-8B's shapes on a GPU — at enginetest.Mini's shapes on
// this build's device (the emulator in CI), with the CPU backend as the
// GEMM peer, so that the mode's own code is tested where there is no GPU.
func TestConformanceShapesSelf(t *testing.T) {
	t.Run("own", func(t *testing.T) {
		b := openGEMM(t, "own")
		enginetest.RunShapes(t, b, enginetest.ShapesConfig{GEMMPeer: cpu.New(cpu.Options{})}, enginetest.Mini)
	})
}

// openGEMM opens a backend on device 0 with GEMM "own" (our kernel) or
// "cublas" (cuBLASLt), closed when t ends; nil for cuBLASLt where there is
// none.
func openGEMM(t *testing.T, gemm string) *Backend {
	t.Helper()
	opt := Options{GEMM: "own"}
	if gemm == "cublas" {
		if !haveCUBLAS {
			return nil
		}
		opt.GEMM = "cublas"
	}
	b, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	if gemm == "cublas" && b.lt == nil { // New said why on stderr
		b.Close()
		return nil
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("GEMM %s: %s", gemm, b.GEMMName())
	return b
}
