package cpu

import (
	"fmt"
	"testing"

	"github.com/turnwise/turnwise/bench/opbench"
	"github.com/turnwise/turnwise/engine"
)

// The op benchmarks: go test -bench . -run ^$ ./engine/cpu/
// GEMMs report GFLOP/s; memory-bound ops report MB/s through SetBytes.

func runCase(b *testing.B, be *Backend, c opbench.Case) {
	op := c.Setup(be)
	op()
	if c.Bytes > 0 {
		b.SetBytes(c.Bytes)
	}
	b.ResetTimer()
	for b.Loop() {
		op()
	}
	if c.FLOPs > 0 {
		b.ReportMetric(c.FLOPs*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	}
}

func BenchmarkGemm(b *testing.B) {
	be := New(Options{})
	var cases []opbench.Case
	for _, cfg := range []opbench.Config{opbench.Reference24M, opbench.Llama8BLayer} {
		cases = append(cases, opbench.GemmCases(cfg, engine.F32)...)
		cases = append(cases, opbench.GemmCases(cfg, engine.BF16)...)
	}
	for _, c := range cases {
		b.Run(c.Name, func(b *testing.B) { runCase(b, be, c) })
	}
}

func BenchmarkMemoryOps(b *testing.B) {
	be := New(Options{})
	for _, cfg := range []opbench.Config{opbench.Reference24M, opbench.Llama8BLayer} {
		for _, dt := range []engine.DType{engine.F32, engine.BF16} {
			for _, c := range opbench.MemoryCases(cfg, dt) {
				b.Run(c.Name, func(b *testing.B) { runCase(b, be, c) })
			}
		}
	}
}

// BenchmarkAttentionOps measures attention at the 24.4M model's heads over
// its 4 sequences of 256 tokens and over one sequence of 1024 (where the
// quadratic term dominates the step: docs/benchmarks.md).
func BenchmarkAttentionOps(b *testing.B) {
	be := New(Options{})
	long := opbench.Reference24M
	long.Tokens, long.SeqLen = 1024, 1024
	for _, dt := range []engine.DType{engine.F32, engine.BF16} {
		for _, cfg := range []opbench.Config{opbench.Reference24M, long} {
			for _, c := range opbench.AttentionCases(cfg, dt) {
				b.Run(c.Name, func(b *testing.B) { runCase(b, be, c) })
			}
		}
	}
}

// BenchmarkSgemm512 measures C = A·B at 512³ through Backend.Gemm and through
// a direct cgo call of OpenBLAS's cblas_sgemm on the same buffers, so the
// wrapper's cost shows as the ratio of the two.
func BenchmarkSgemm512(b *testing.B) {
	const n = 512
	be := New(Options{})
	a, bm := engine.MustAlloc(be, engine.F32, n, n), engine.MustAlloc(be, engine.F32, n, n)
	c := engine.MustAlloc(be, engine.F32, n, n)
	be.Fill(a, 0.5)
	be.Fill(bm, 0.25)
	flops := 2.0 * n * n * n
	for _, v := range []struct {
		name string
		run  func()
	}{
		{"engine", func() { be.Gemm(c, a, bm, engine.GemmParams{Alpha: 1}) }},
		{"cblas", func() { sgemm(false, false, n, n, n, 1, f32s(a), n, f32s(bm), n, 0, f32s(c), n) }},
	} {
		b.Run(fmt.Sprintf("%s/threads=%d", v.name, be.Threads()), func(b *testing.B) {
			v.run()
			for b.Loop() {
				v.run()
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

func BenchmarkVisionOps(b *testing.B) {
	be := New(Options{})
	for _, dt := range []engine.DType{engine.F32, engine.BF16} {
		for _, c := range opbench.VisionCases(opbench.ClipViTB32, dt) {
			b.Run(c.Name, func(b *testing.B) { runCase(b, be, c) })
		}
	}
}
