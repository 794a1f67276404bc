package cpu

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
)

// Gemm implements engine.Backend.Gemm.
//
// f32 operands go straight to cblas_sgemm, one call per batch entry. bf16
// operands go to cblas_sbgemm when the loaded OpenBLAS exports it; otherwise
// (and for f16) they are widened once to f32 — exactly, so the product is the
// same — and multiplied by sgemm. A C that is not f32 is accumulated in an f32
// copy and rounded once at the end.
func (b *Backend) Gemm(c, a, bm *engine.Tensor, p engine.GemmParams) {
	g := gemmShape(c, a, bm, p)
	if a.DType() != bm.DType() {
		panic(fmt.Sprintf("cpu: Gemm: A %v and B %v must share a dtype", a, bm))
	}
	if c.DType() != engine.F32 && c.DType() != a.DType() {
		panic(fmt.Sprintf("cpu: Gemm: C %v must be f32 or A's dtype %v", c, a.DType()))
	}
	if g.m == 0 || g.n == 0 {
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
		for i := 0; i < g.batch; i++ {
			sgemm(p.TransA, p.TransB, g.m, g.n, g.k, p.Alpha, af[i*g.strideA:], g.lda, bf[i*g.strideB:], g.ldb, p.Beta, cf[i*g.m*g.n:], g.n)
		}
	case a.DType() == engine.BF16 && b.sbgemm != nil && g.k > 0:
		ah, bh := u16s(a), u16s(bm)
		for i := 0; i < g.batch; i++ {
			sbgemm(b.sbgemm, p.TransA, p.TransB, g.m, g.n, g.k, p.Alpha, ah[i*g.strideA:], g.lda, bh[i*g.strideB:], g.ldb, p.Beta, cf[i*g.m*g.n:], g.n)
		}
	default:
		b.gemmA = grow(b.gemmA, a.Numel())
		b.gemmB = grow(b.gemmB, bm.Numel())
		b.widen(b.gemmA, a)
		b.widen(b.gemmB, bm)
		for i := 0; i < g.batch; i++ {
			sgemm(p.TransA, p.TransB, g.m, g.n, g.k, p.Alpha, b.gemmA[i*g.strideA:], g.lda, b.gemmB[i*g.strideB:], g.ldb, p.Beta, cf[i*g.m*g.n:], g.n)
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

// gemmDims are the extents and strides of one (strided-batched) GEMM.
type gemmDims struct {
	batch            int
	m, n, k          int
	lda, ldb         int
	strideA, strideB int // elements between batch entries (0: broadcast)
}

// gemmShape checks the shapes of C = op(A)·op(B) and returns their extents.
// It panics naming all three shapes when they do not fit together.
func gemmShape(c, a, b *engine.Tensor, p engine.GemmParams) gemmDims {
	bad := func(why string) {
		panic(fmt.Sprintf("engine: Gemm (transA=%v, transB=%v): %s: C %v, A %v, B %v",
			p.TransA, p.TransB, why, c.Shape(), a.Shape(), b.Shape()))
	}
	if c.Rank() < 2 || a.Rank() < 2 || b.Rank() < 2 {
		bad("operands must have rank ≥ 2")
	}
	cs, as, bs := c.Shape(), a.Shape(), b.Shape()
	m, n := cs[len(cs)-2], cs[len(cs)-1]
	ar, ac := as[len(as)-2], as[len(as)-1]
	br, bc := bs[len(bs)-2], bs[len(bs)-1]
	am, ak := ar, ac
	if p.TransA {
		am, ak = ac, ar
	}
	bk, bn := br, bc
	if p.TransB {
		bk, bn = bc, br
	}
	if am != m || bn != n || ak != bk {
		bad("inner or outer extents disagree")
	}
	batch := cs[:len(cs)-2].Numel()
	g := gemmDims{batch: batch, m: m, n: n, k: ak, lda: ac, ldb: bc}
	for _, op := range []struct {
		s      engine.Shape
		stride *int
		mat    int
	}{{as, &g.strideA, ar * ac}, {bs, &g.strideB, br * bc}} {
		lead := op.s[:len(op.s)-2]
		switch {
		case len(lead) == 0:
			*op.stride = 0
		case lead.Equal(cs[:len(cs)-2]):
			*op.stride = op.mat
		default:
			bad("batch dimensions must equal C's or be absent")
		}
	}
	return g
}
