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

// BenchmarkDecodeGemm measures a decoding step's projections (one token
// per sequence, at batch 1, 4 and 16) of the 24.4M model and of
// Llama-3.2-1B, whose weights (4 to 128 MB each in f32 besides the
// classifier) come from memory as they do in a step.
func BenchmarkDecodeGemm(b *testing.B) {
	be := New(Options{})
	l1b := opbench.Config{Name: "llama1B", Dim: 2048, Heads: 32, KVHeads: 8, FFN: 8192, Vocab: 128256}
	for _, dt := range []engine.DType{engine.F32, engine.BF16} {
		for _, cfg := range []opbench.Config{opbench.Reference24M, l1b} {
			cfg.DecodeBatches = []int{1, 4, 16}
			for _, c := range opbench.DecodeGemmCases(cfg, dt) {
				b.Run(c.Name, func(b *testing.B) { runCold(b, be, c, 64<<20) })
			}
		}
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

// BenchmarkDecodeAttention measures one decoding step's attention: the
// 24.4M model's heads (no grouping) and Llama-3.2-1B's (32 query heads
// reading 8 key/value heads of 64), one and four sequences, each query
// against 1024 cached keys. As in a decoding step, where the weights pass
// through the cache between two layers' attention, the keys and values come
// from memory: each call takes the next of enough sets of inputs to
// overflow the last-level cache.
func BenchmarkDecodeAttention(b *testing.B) {
	be := New(Options{})
	gqa := opbench.Config{Name: "llama1B", Dim: 2048, Heads: 32, KVHeads: 8}
	for _, dt := range []engine.DType{engine.F32, engine.BF16} {
		for _, cfg := range []opbench.Config{opbench.Reference24M, gqa} {
			for _, seqs := range []int{1, 4} {
				cfg.DecodeSeqs, cfg.DecodeLen = seqs, 1024
				c := opbench.DecodeAttention(cfg, dt)
				b.Run(c.Name, func(b *testing.B) { runCold(b, be, c, 256<<20) })
			}
		}
	}
}

// runCold is runCase over sets of c's inputs that together take at least
// bytes, one call per set in turn.
func runCold(b *testing.B, be *Backend, c opbench.Case, bytes int64) {
	ops := make([]func(), max(1, int(bytes/max(c.Bytes, 1))))
	for i := range ops {
		ops[i] = c.Setup(be)
		ops[i]()
	}
	b.SetBytes(c.Bytes)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		ops[i%len(ops)]()
		i++
	}
	if c.FLOPs > 0 {
		b.ReportMetric(c.FLOPs*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
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
