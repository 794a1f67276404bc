//go:build cuda || cudaemu

package cuda

// #include "kernels.h"
import "C"

import "github.com/turnwise/turnwise/engine"

// RoPE implements engine.Backend.RoPE.
func (b *Backend) RoPE(x, pos, invFreq *engine.Tensor) { b.rope("RoPE", x, pos, invFreq, 1) }

// RoPEBackward implements engine.Backend.RoPEBackward.
func (b *Backend) RoPEBackward(dx, pos, invFreq *engine.Tensor) {
	b.rope("RoPEBackward", dx, pos, invFreq, -1)
}

func (b *Backend) rope(op string, x, pos, invFreq *engine.Tensor, sign float32) {
	n, h, dh := engine.RoPEShape(op, x, pos, invFreq)
	b.launch(op, func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_rope(ptr(x), dt(x), iptr(pos), fptr(invFreq), i64(n), i64(h), i64(dh), C.float(sign), str)
	})
}
