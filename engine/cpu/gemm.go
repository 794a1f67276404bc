package cpu

import "github.com/turnwise/turnwise/engine"

// Gemm implements engine.Backend.Gemm.
//
// f32 operands go straight to cblas_sgemm, one call per batch entry. bf16
// operands go to cblas_sbgemm when the loaded OpenBLAS exports it; otherwise
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
