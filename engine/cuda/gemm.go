//go:build cuda || cudaemu

package cuda

// #include "kernels.h"
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/turnwise/turnwise/engine"
)

// Gemm implements engine.Backend.Gemm.
func (b *Backend) Gemm(c, a, bm *engine.Tensor, p engine.GemmParams) {
	g := engine.GemmShape(c, a, bm, p)
	if g.M == 0 || g.N == 0 {
		return
	}
	if b.lt != nil && b.cublasGemm(c, a, bm, p, g) {
		return
	}
	b.launchSized("Gemm", b.gemmSize(g, c, a, p.Beta), func(str C.cudaStream_t) C.cudaError_t {
		var ws unsafe.Pointer
		if n := gemmWorkspace(c.DType(), a.DType(), p.TransA, p.TransB, g.M, g.N, g.K, g.Batch); n > 0 {
			ws = devPtr(b.workspace(n))
		}
		return C.tw_gemm(ptr(c), dt(c), ptr(a), ptr(bm), dt(a), cbool(p.TransA), cbool(p.TransB),
			i64(g.M), i64(g.N), i64(g.K), i64(g.Batch), i64(g.StrideA), i64(g.StrideB), i64(g.M*g.N),
			C.float(p.Alpha), C.float(p.Beta), ws, str)
	})
}

// gemmWorkspace returns the bytes of workspace the GEMM kernel needs for
// these dtypes (C's, then A's and B's), layouts and extents: 0 unless it
// splits the GEMM along k.
func gemmWorkspace(cdt, abdt engine.DType, transA, transB bool, m, n, k, batch int) int {
	return int(C.tw_gemm_workspace(C.tw_dtype(cdt), C.tw_dtype(abdt), cbool(transA), cbool(transB), i64(m), i64(n),
		i64(k), i64(batch)))
}

// gemmTile returns the block tile our bf16 GEMM uses for an m × n output of
// batch entries (kernels/gemm.cu, "Grid"), as TW_GEMM_TILE and the device
// choose it.
func gemmTile(m, n, batch int) string {
	s := C.tw_gemm_tile(i64(m), i64(n), i64(batch))
	if s == nil {
		panic(fmt.Sprintf("cuda: no device to choose the GEMM tile of %d×%d×%d", m, n, batch))
	}
	return C.GoString(s)
}

// skinnyConfig returns the few-row kernel's rows of W per block and loads in
// flight per thread for one row of X against W of wide rows
// (kernels/gemm.cu, "Few rows"), as TW_GEMM_SKINNY and the current device
// make them.
func skinnyConfig(wide int) (rows, loads int) {
	var r, u C.int
	C.tw_gemm_skinny_config(i64(wide), &r, &u)
	return int(r), int(u)
}
