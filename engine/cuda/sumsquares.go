//go:build cuda || cudaemu

package cuda

// #include "kernels.h"
import "C"

import "github.com/turnwise/turnwise/engine"

// SumSquares implements engine.Backend.SumSquares.
func (b *Backend) SumSquares(out, x *engine.Tensor) {
	engine.MustShape("SumSquares", "out", out, 1)
	engine.MustDType("SumSquares", "out", out, engine.F32)
	b.launch("SumSquares", func(str C.cudaStream_t) C.cudaError_t {
		ws := b.workspace(int(C.tw_sum_squares_workspace(i64(x.Numel()))))
		return C.tw_sum_squares(fptr(out), ptr(x), dt(x), i64(x.Numel()), devPtr(ws), str)
	})
}
