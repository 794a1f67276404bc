//go:build cuda || cudaemu

package cuda

import (
	"os"
	"strconv"
	"testing"

	"github.com/turnwise/turnwise/bench/opbench"
	"github.com/turnwise/turnwise/engine"
)

// GPU benchmarks: every kernel at the shapes of the 24.4M reference model and
// of one Llama-3.1-8B layer, reporting TFLOP/s (GEMM, attention) or GB/s
// (memory-bound ops) and the fraction of the device's peak; and the
// hand-written GEMM against cuBLAS on the 8B shapes.
//
//	make bench-gpu          # = go test -tags cuda -run '^$' -bench . ./engine/cuda/
//
// Peaks default to an H100 SXM (989 TFLOP/s dense bf16, 3350 GB/s HBM3); set
// TW_PEAK_TFLOPS and TW_PEAK_GBS for another device. Under the emulator
// (-tags cudaemu) the benchmarks are skipped: emulated time means nothing.

func peak(env string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(env), 64); err == nil && v > 0 {
		return v
	}
	return def
}

func newBench(b *testing.B, opt Options) *Backend {
	be, err := New(opt)
	if err != nil {
		b.Fatal(err)
	}
	if be.Name() == "cudaemu" {
		b.Skip("GPU benchmarks need a GPU (-tags cuda); the emulator's timings are meaningless")
	}
	return be
}

func runGPUCase(b *testing.B, be *Backend, c opbench.Case) {
	op := c.Setup(be)
	op()
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		op()
	}
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	if c.FLOPs > 0 {
		tf := c.FLOPs / sec / 1e12
		b.ReportMetric(tf, "TFLOP/s")
		b.ReportMetric(100*tf/peak("TW_PEAK_TFLOPS", 989), "%peak")
	} else if c.Bytes > 0 {
		gbs := float64(c.Bytes) / sec / 1e9
		b.ReportMetric(gbs, "GB/s")
		b.ReportMetric(100*gbs/peak("TW_PEAK_GBS", 3350), "%peak")
	}
}

func BenchmarkKernels(b *testing.B) {
	be := newBench(b, Options{})
	for _, cfg := range []opbench.Config{opbench.Reference24M, opbench.Llama8BLayer} {
		for _, dt := range []engine.DType{engine.BF16, engine.F32} {
			cases := append(opbench.GemmCases(cfg, dt), opbench.AttentionCases(cfg, dt)...)
			cases = append(cases, opbench.MemoryCases(cfg, dt)...)
			if cfg.Name == opbench.Reference24M.Name {
				cases = append(cases, opbench.VisionCases(opbench.ClipViTB32, dt)...)
			}
			for _, c := range cases {
				b.Run(c.Name, func(b *testing.B) { runGPUCase(b, be, c) })
			}
		}
	}
}

// BenchmarkGemmVsCUBLAS runs each 8B-layer GEMM with our kernel and with
// cuBLAS, one after the other, so their ratio is measured side by side.
func BenchmarkGemmVsCUBLAS(b *testing.B) {
	ours := newBench(b, Options{GEMM: "own"})
	ref := newBench(b, Options{GEMM: "cublas"})
	for _, c := range opbench.GemmCases(opbench.Llama8BLayer, engine.BF16) {
		b.Run(c.Name+"/own", func(b *testing.B) { runGPUCase(b, ours, c) })
		b.Run(c.Name+"/cublas", func(b *testing.B) { runGPUCase(b, ref, c) })
	}
}
