//go:build cuda || cudaemu

package cuda

// #include "kernels.h"
import "C"

import "github.com/turnwise/turnwise/engine"

// LayerNorm implements engine.Backend.LayerNorm.
func (b *Backend) LayerNorm(out, mean, rstd, x, w, bias *engine.Tensor, eps float32) {
	if bias == nil {
		panic("engine: LayerNorm: nil bias")
	}
	n, d := engine.LayerNormShape("LayerNorm", out, mean, rstd, x, w, bias)
	b.launch("LayerNorm", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_layernorm(ptr(out), fptr(mean), fptr(rstd), ptr(x), ptr(w), ptr(bias), dt(x), dt(w),
			i64(n), i64(d), C.float(eps), str)
	})
}

// LayerNormBackward implements engine.Backend.LayerNormBackward.
func (b *Backend) LayerNormBackward(dx, dw, db, dOut, x, w, mean, rstd *engine.Tensor) {
	n, d := engine.LayerNormShape("LayerNormBackward", dOut, mean, rstd, x, w, nil)
	engine.MustShape("LayerNormBackward", "dx", dx, n, d)
	engine.MustDType("LayerNormBackward", "dx", dx, x.DType())
	for _, g := range []struct {
		name string
		t    *engine.Tensor
	}{{"dw", dw}, {"db", db}} {
		if g.t != nil {
			engine.MustShape("LayerNormBackward", g.name, g.t, d)
			engine.MustDType("LayerNormBackward", g.name, g.t, w.DType())
		}
	}
	b.launch("LayerNormBackward", func(str C.cudaStream_t) C.cudaError_t {
		ws := b.workspace(int(C.tw_layernorm_backward_workspace(i64(n), i64(d))))
		return C.tw_layernorm_backward(ptr(dx), ptr(dw), ptr(db), ptr(dOut), ptr(x), ptr(w), fptr(mean), fptr(rstd),
			dt(x), dt(w), i64(n), i64(d), devPtr(ws), str)
	})
}
