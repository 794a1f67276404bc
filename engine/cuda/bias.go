//go:build cuda || cudaemu

package cuda

// #include "kernels.h"
import "C"

import "github.com/turnwise/turnwise/engine"

// AddBias implements engine.Backend.AddBias.
func (b *Backend) AddBias(x, bias *engine.Tensor) {
	n, d := engine.BiasShape("AddBias", x, bias, false)
	b.launch("AddBias", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_add_bias(ptr(x), ptr(bias), dt(x), i64(n), i64(d), str)
	})
}

// AddBiasBackward implements engine.Backend.AddBiasBackward.
func (b *Backend) AddBiasBackward(db, dOut *engine.Tensor) {
	n, d := engine.BiasShape("AddBiasBackward", dOut, db, true)
	b.launch("AddBiasBackward", func(str C.cudaStream_t) C.cudaError_t {
		ws := b.workspace(int(C.tw_add_bias_backward_workspace(i64(n), i64(d))))
		return C.tw_add_bias_backward(ptr(db), dt(db), ptr(dOut), dt(dOut), i64(n), i64(d), devPtr(ws), str)
	})
}
