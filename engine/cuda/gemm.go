//go:build cuda || cudaemu

package cuda

// #include "kernels.h"
import "C"

import "github.com/turnwise/turnwise/engine"

// Gemm implements engine.Backend.Gemm.
func (b *Backend) Gemm(c, a, bm *engine.Tensor, p engine.GemmParams) {
	g := engine.GemmShape(c, a, bm, p)
	if g.M == 0 || g.N == 0 {
		return
	}
	if b.lt != nil && b.cublasGemm(c, a, bm, p, g) {
		return
	}
	b.launch("Gemm", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_gemm(ptr(c), dt(c), ptr(a), ptr(bm), dt(a), cbool(p.TransA), cbool(p.TransB),
			i64(g.M), i64(g.N), i64(g.K), i64(g.Batch), i64(g.StrideA), i64(g.StrideB), i64(g.M*g.N),
			C.float(p.Alpha), C.float(p.Beta), str)
	})
}
