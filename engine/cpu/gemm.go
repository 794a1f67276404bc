package cpu

import "github.com/turnwise/turnwise/engine"

// Gemm implements engine.Backend.Gemm.
//
// A product of a few rows with Bᵀ (a decoding step's projections) reads
// B's rows once each, widening bf16 in registers (gemmFew). Otherwise f32
// operands go straight to cblas_sgemm, one call per batch entry, and bf16
// operands to cblas_sbgemm when the loaded OpenBLAS exports it; otherwise
// (and for f16) they are widened once to f32 — exactly, so the product is the
// same — and multiplied by sgemm. A C that is not f32 is accumulated in an f32
// copy and rounded once at the end.
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
			sgemm(p.TransA, p.TransB, g.M, g.N, g.K, p.Alpha, af[i*g.StrideA:], g.LDA, bf[i*g.StrideB:], g.LDB, p.Beta, cf[i*g.M*g.N:], g.N)
		}
	case a.DType() == engine.BF16 && b.sbgemm != nil && g.K > 0:
		ah, bh := u16s(a), u16s(bm)
		for i := 0; i < g.Batch; i++ {
			sbgemm(b.sbgemm, p.TransA, p.TransB, g.M, g.N, g.K, p.Alpha, ah[i*g.StrideA:], g.LDA, bh[i*g.StrideB:], g.LDB, p.Beta, cf[i*g.M*g.N:], g.N)
		}
	default:
		b.gemmA = grow(b.gemmA, a.Numel())
		b.gemmB = grow(b.gemmB, bm.Numel())
		b.widen(b.gemmA, a)
		b.widen(b.gemmB, bm)
		for i := 0; i < g.Batch; i++ {
			sgemm(p.TransA, p.TransB, g.M, g.N, g.K, p.Alpha, b.gemmA[i*g.StrideA:], g.LDA, b.gemmB[i*g.StrideB:], g.LDB, p.Beta, cf[i*g.M*g.N:], g.N)
		}
	}

	if c.DType() != engine.F32 {
		o := floatsOf(c)
		b.parallel(len(cf), elemGrain, func(_, lo, hi int) { o.store(lo, cf[lo:hi]) })
	}
}

// fewRows reports whether C = A·Bᵀ is a few rows of A (a decoding step's
// projections, one row per sequence), which gemmFew computes reading B
// once: 2 to 8 rows of f32 (OpenBLAS 0.3.21's sgemm reads B at a third to
// a half of the bandwidth there, and is faster from about 16 rows on; one
// row stays with its GEMV, blas.go), 1 to 16 of bf16 (2 to 6 times faster
// than widening B to f32 for sgemm, which is what bf16 takes where
// OpenBLAS does not export sbgemm, as Debian's 0.3.21 does not).
func fewRows(a *engine.Tensor, p engine.GemmParams, g engine.GemmDims) bool {
	if p.TransA || !p.TransB || g.K == 0 {
		return false
	}
	switch a.DType() {
	case engine.F32:
		return g.M >= 2 && g.M <= 8
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
