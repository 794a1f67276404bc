//go:build cuda || cudaemu

package cuda

// #include "kernels.h"
import "C"

import "github.com/turnwise/turnwise/engine"

// GELU implements engine.Backend.GELU.
func (b *Backend) GELU(out, x *engine.Tensor, k engine.GELUKind) {
	engine.GELUShape("GELU", k, out, x)
	b.launch("GELU", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_gelu(ptr(out), ptr(x), dt(x), i64(x.Numel()), C.int(k), str)
	})
}

// GELUBackward implements engine.Backend.GELUBackward.
func (b *Backend) GELUBackward(dx, dOut, x *engine.Tensor, k engine.GELUKind) {
	engine.GELUShape("GELUBackward", k, dx, x, dOut)
	b.launch("GELUBackward", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_gelu_backward(ptr(dx), ptr(dOut), ptr(x), dt(x), i64(x.Numel()), C.int(k), str)
	})
}
