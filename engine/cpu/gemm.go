package cpu

import "github.com/turnwise/turnwise/engine"

// Gemm implements engine.Backend.Gemm.
//
// A product of a few rows with Bᵀ (a decoding step's projections) reads
// B's rows once each, widening bf16 in registers (gemmFew). Otherwise f32
// operands go straight to cblas_sgemm and bf16 operands to cblas_sbgemm
// when the loaded OpenBLAS exports it, as blocks of C shared out to the
// workers (gemmSplit); otherwise (and for f16) they are widened once to
// f32 — exactly, so the product is the same — and multiplied by sgemm. A C
// that is not f32 is accumulated in an f32 copy and rounded once at the
// end.
func (b *Backend) Gemm(c, a, bm *engine.Tensor, p engine.GemmParams) {
	g := engine.GemmShape(c, a, bm, p)
	if g.M == 0 || g.N == 0 {
		return
	}

	// C as f32: the tensor itself, or an accumulator.
	var cf []float32
	if c.DType() == engine.F32 {
		cf = f32s(c)
	} else {
		b.gemmC = grow(b.gemmC, c.Numel())
		cf = b.gemmC
		if p.Beta != 0 {
			b.widen(cf, c)
		}
	}

	switch {
	case fewRows(a, p, g):
		b.gemmFew(cf, a, bm, p, g)
	case a.DType() == engine.F32:
		af, bf := f32s(a), f32s(bm)
		for i := 0; i < g.Batch; i++ {
			ai, bi, ci := af[i*g.StrideA:], bf[i*g.StrideB:], cf[i*g.M*g.N:]
			b.gemmSplit(g, func(r0, r1, c0, c1 int) {
				sgemm(p.TransA, p.TransB, r1-r0, c1-c0, g.K, p.Alpha, ai[blockOf(!p.TransA, r0, g.LDA):], g.LDA,
					bi[blockOf(p.TransB, c0, g.LDB):], g.LDB, p.Beta, ci[r0*g.N+c0:], g.N)
			})
		}
	case a.DType() == engine.BF16 && b.sbgemm != nil && g.K > 0:
		ah, bh := u16s(a), u16s(bm)
		for i := 0; i < g.Batch; i++ {
			ai, bi, ci := ah[i*g.StrideA:], bh[i*g.StrideB:], cf[i*g.M*g.N:]
			b.gemmSplit(g, func(r0, r1, c0, c1 int) {
				sbgemm(b.sbgemm, p.TransA, p.TransB, r1-r0, c1-c0, g.K, p.Alpha, ai[blockOf(!p.TransA, r0, g.LDA):], g.LDA,
					bi[blockOf(p.TransB, c0, g.LDB):], g.LDB, p.Beta, ci[r0*g.N+c0:], g.N)
			})
		}
	default:
		b.gemmA = grow(b.gemmA, a.Numel())
		b.gemmB = grow(b.gemmB, bm.Numel())
		b.widen(b.gemmA, a)
		b.widen(b.gemmB, bm)
		for i := 0; i < g.Batch; i++ {
			ai, bi, ci := b.gemmA[i*g.StrideA:], b.gemmB[i*g.StrideB:], cf[i*g.M*g.N:]
			b.gemmSplit(g, func(r0, r1, c0, c1 int) {
				sgemm(p.TransA, p.TransB, r1-r0, c1-c0, g.K, p.Alpha, ai[blockOf(!p.TransA, r0, g.LDA):], g.LDA,
					bi[blockOf(p.TransB, c0, g.LDB):], g.LDB, p.Beta, ci[r0*g.N+c0:], g.N)
			})
		}
	}

	if c.DType() != engine.F32 {
		o := floatsOf(c)
		b.parallel(len(cf), elemGrain, func(_, lo, hi int) { o.store(lo, cf[lo:hi]) })
	}
}

// fewRows reports whether C = A·Bᵀ is a few rows of A (a decoding step's
// projections, one row per sequence), which gemmFew computes reading B
// once: 1 to 8 rows of f32 (OpenBLAS 0.3.21's sgemm reads B at a third to
// a half of the bandwidth there, and is faster from about 16 rows on; its
// sgemv, blas.go, ran the 24.4M model's one-row projections at 0.4 to 0.5
// the speed, Llama-3.2-1B's at 0.8 to 1), 1 to 16 of bf16 (2 to 6 times faster
// than widening B to f32 for sgemm, which is what bf16 takes where
// OpenBLAS does not export sbgemm, as Debian's 0.3.21 does not).
func fewRows(a *engine.Tensor, p engine.GemmParams, g engine.GemmDims) bool {
	if p.TransA || !p.TransB || g.K == 0 {
		return false
	}
	switch a.DType() {
	case engine.F32:
		return g.M >= 1 && g.M <= 8
	case engine.BF16:
		return g.M <= 16
	}
	return false
}

// gemmFew computes C = alpha·A·Bᵀ + beta·C (fewRows) into cf, B's rows split
// over the workers, each read once for all rows of A and widened in
// registers when bf16; bf16 A is widened once.
func (b *Backend) gemmFew(cf []float32, a, bm *engine.Tensor, p engine.GemmParams, g engine.GemmDims) {
	var af, wf []float32
	var wh []uint16
	if a.DType() == engine.F32 {
		af, wf = f32s(a), f32s(bm)
	} else {
		b.gemmA = grow(b.gemmA, a.Numel())
		b.widen(b.gemmA, a)
		af, wh = b.gemmA, u16s(bm)
	}
	for i := 0; i < g.Batch; i++ {
		ai, ci, bo := af[i*g.StrideA:], cf[i*g.M*g.N:], i*g.StrideB
		b.parallel(g.N, max(1, (64<<10)/g.K), func(_, lo, hi int) {
			var wfi []float32
			var whi []uint16
			if wf != nil {
				wfi = wf[bo+lo*g.LDB:]
			} else {
				whi = wh[bo+lo*g.LDB:]
			}
			gemmNT(ci[lo:], g.N, ai, g.LDA, wfi, whi, g.LDB, g.M, hi-lo, g.K, p.Alpha, p.Beta)
		})
	}
}

// gemmSplit calls block once per block of C: its rows r0 … r1−1 and columns
// c0 … c1−1, the longer side of C cut into one block per worker when the
// product is large enough to share (else one block, the whole of C). Each
// block is one single-threaded BLAS call on a worker (OpenBLAS is held to
// one thread, New): OpenBLAS's own threads, idle after a call, spin for a
// while before they sleep, and beside as many workers as cores they took a
// core from every op of ours that followed (a training step's attention
// backward ran at two thirds of its speed). Every element is computed by
// one call, in BLAS's order for its block's shape.
func (b *Backend) gemmSplit(g engine.GemmDims, block func(r0, r1, c0, c1 int)) {
	parts := 1
	if float64(g.M)*float64(g.N)*float64(g.K) >= gemmShareFLOPs {
		parts = b.threads
	}
	if g.N >= g.M {
		b.parallel(g.N, max(1, (g.N+parts-1)/parts), func(_, lo, hi int) { block(0, g.M, lo, hi) })
	} else {
		b.parallel(g.M, max(1, (g.M+parts-1)/parts), func(_, lo, hi int) { block(lo, hi, 0, g.N) })
	}
}

// gemmShareFLOPs is the least m·n·k a GEMM is cut into blocks for the
// workers at: below it, one call is quicker than the hand-off.
const gemmShareFLOPs = 1 << 18

// blockOf is the offset of row (or column) i of a row-major operand with
// leading dimension ld: i·ld when the block's index runs along the stored
// rows (rows true), else i.
func blockOf(rows bool, i, ld int) int {
	if rows {
		return i * ld
	}
	return i
}

// widen converts a float tensor's elements into dst, in parallel.
func (b *Backend) widen(dst []float32, t *engine.Tensor) {
	s := floatsOf(t)
	b.parallel(s.len, elemGrain, func(_, lo, hi int) {
		if s.dt == engine.F32 {
			copy(dst[lo:hi], s.f[lo:hi])
			return
		}
		_ = s.load(lo, hi-lo, dst[lo:hi])
	})
}
