//go:build cuda || cudaemu

package cuda

// #include "kernels.h"
import "C"

import "github.com/turnwise/turnwise/engine"

// SwiGLU implements engine.Backend.SwiGLU.
func (b *Backend) SwiGLU(out, gate, up *engine.Tensor) {
	engine.SwiGLUShape("SwiGLU", out, gate, up)
	b.launch("SwiGLU", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_swiglu(ptr(out), ptr(gate), ptr(up), dt(out), i64(out.Numel()), str)
	})
}

// SwiGLUBackward implements engine.Backend.SwiGLUBackward.
func (b *Backend) SwiGLUBackward(dGate, dUp, dOut, gate, up *engine.Tensor) {
	engine.SwiGLUShape("SwiGLUBackward", dOut, gate, up)
	engine.SwiGLUShape("SwiGLUBackward", dGate, dUp, gate)
	b.launch("SwiGLUBackward", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_swiglu_backward(ptr(dGate), ptr(dUp), ptr(dOut), ptr(gate), ptr(up), dt(gate),
			i64(gate.Numel()), str)
	})
}
