//go:build cudaemu && !cuda

package main

import (
	"math"
	"strings"
	"testing"

	"github.com/turnwise/turnwise/engine/cuda"
)

// TestBackendCUDAEmulated runs commands on --backend cuda over the kernel
// emulator: generation with our GEMM, with an attention configuration and
// the same text, a configuration that does not parse or does not fit the
// model refused, cuBLAS
// refused (the emulator has none), and SFT with --recompute, whose losses
// must match the CPU's.
func TestBackendCUDAEmulated(t *testing.T) {
	gen := []string{"--preset", "tiny", "--bos-only", "--max-new", "4", "--backend", "cuda", "--gemm", "own"}
	plain, err := runCmd(t, runGenerate, "", gen...)
	if err != nil {
		t.Errorf("generate on the emulator: %v", err)
	}
	tuned, err := runCmd(t, runGenerate, "", append(gen, "--attention-config", "dec.split=1")...)
	if err != nil || tuned != plain {
		t.Errorf("generate with --attention-config dec.split=1: %q, %v; want %q as with the defaults", tuned, err, plain)
	}
	_, err = runCmd(t, runGenerate, "", append(gen, "--attention-config", "fwd.rows")...)
	if err == nil || !strings.Contains(err.Error(), "--attention-config") {
		t.Errorf("--attention-config fwd.rows: %v, want an error naming the flag", err)
	}
	// A configuration the kernels are not built for at this model's dtype
	// and head width (bf16 at 16; f32 runs one tiling whatever it says) is
	// an error before the model runs, not a failed launch.
	_, err = runCmd(t, runGenerate, "", append(gen, "--dtype", "bf16", "--attention-config", "dec.keys=128")...)
	if err == nil || !strings.Contains(err.Error(), `attention configuration "dec.keys=128"`) {
		t.Errorf("--attention-config dec.keys=128 at the tiny model's head width: %v, want an error naming the configuration", err)
	}
	_, err = runCmd(t, runGenerate, "", "--preset", "tiny", "--bos-only", "--max-new", "1", "--backend", "cuda", "--gemm", "cublas")
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
	if len(lines) < 2 || lines[0] != "fwd.rows=128,fwd.keys=128,fwd.stages=2" {
		t.Fatalf("--attention-configs printed %q", out)
	}
	for _, l := range lines {
		if _, err := cuda.ParseAttentionConfig(l); err != nil {
			t.Errorf("%q: %v", l, err)
		}
	}
}
