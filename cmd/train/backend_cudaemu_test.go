//go:build cudaemu && !cuda

package main

import (
	"math"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine/cuda"
)

// TestBackendCUDAEmulated runs commands on --backend cuda over the kernel
// emulator: generation with our GEMM, cuBLAS refused (the emulator has
// none), and SFT with --recompute, whose losses must match the CPU's.
func TestBackendCUDAEmulated(t *testing.T) {
	if _, err := runCmd(t, runGenerate, "", "--preset", "tiny", "--bos-only", "--max-new", "4", "--backend", "cuda", "--gemm", "own"); err != nil {
		t.Errorf("generate on the emulator: %v", err)
	}
	_, err := runCmd(t, runGenerate, "", "--preset", "tiny", "--bos-only", "--max-new", "1", "--backend", "cuda", "--gemm", "cublas")
	if err == nil || !strings.Contains(err.Error(), "only available on a real GPU") {
		t.Errorf("--gemm cublas on the emulator: %v", err)
	}
	sft := func(backend ...string) map[int64]float64 {
		dir := t.TempDir()
		args := append([]string{"--out", dir, "--steps", "2", "--batch-tokens", "64", "--eval-every", "0", "--prompt", ""}, backend...)
		if _, err := runCmd(t, runSFT, "", args...); err != nil {
			t.Fatalf("sft %q: %v", backend, err)
		}
		return lossByStep(t, dir)
	}
	cpu, emu := sft("--threads", "1"), sft("--backend", "cuda", "--recompute")
	for step, want := range cpu {
		if got := emu[step]; math.Abs(got-want) > 1e-4 {
			t.Errorf("step %d: loss %v on the emulator with --recompute, %v on the CPU", step, got, want)
		}
	}
	if len(cpu) != 2 || len(emu) != 2 {
		t.Errorf("logged steps: %d on the CPU, %d on the emulator; want 2", len(cpu), len(emu))
	}
}

// TestBenchAttentionConfigs: train bench --attention-configs prints the
// sweep's configurations, the defaults first, each one that
// --attention-config accepts.
func TestBenchAttentionConfigs(t *testing.T) {
	out, err := runCmd(t, runBench, "", "--attention-configs")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(out)
	if len(lines) < 2 || lines[0] != "fwd.rows=128,fwd.keys=64,fwd.stages=2" {
		t.Fatalf("--attention-configs printed %q", out)
	}
	for _, l := range lines {
		if _, err := cuda.ParseAttentionConfig(l); err != nil {
			t.Errorf("%q: %v", l, err)
		}
	}
}
