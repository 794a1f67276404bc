//go:build cuda || cudaemu

package cuda

// #include "kernels.h"
import "C"

import "github.com/turnwise/turnwise/engine"

// RMSNorm implements engine.Backend.RMSNorm.
func (b *Backend) RMSNorm(out, rstd, x, w *engine.Tensor, eps float32) {
	n, d := engine.NormShape("RMSNorm", out, rstd, x, w)
	engine.MustDType("RMSNorm", "out", out, x.DType())
	b.launch("RMSNorm", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_rmsnorm(ptr(out), fptr(rstd), ptr(x), ptr(w), dt(x), dt(w), i64(n), i64(d), C.float(eps), str)
	})
}

// AddRMSNorm implements engine.Backend.AddRMSNorm.
func (b *Backend) AddRMSNorm(resid, out, rstd, x, delta, w *engine.Tensor, eps float32) {
	n, d := engine.NormShape("AddRMSNorm", out, rstd, x, w)
	engine.MustSameShape("AddRMSNorm resid/x", resid, x)
	engine.MustSameShape("AddRMSNorm delta/x", delta, x)
	for _, t := range []*engine.Tensor{resid, out, delta} {
		engine.MustDType("AddRMSNorm", "activation", t, x.DType())
	}
	b.launch("AddRMSNorm", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_add_rmsnorm(ptr(resid), ptr(out), fptr(rstd), ptr(x), ptr(delta), ptr(w), dt(x), dt(w),
			i64(n), i64(d), C.float(eps), str)
	})
}

// RMSNormBackward implements engine.Backend.RMSNormBackward.
func (b *Backend) RMSNormBackward(dx, dw, dOut, x, w, rstd *engine.Tensor) {
	n, d := engine.NormShape("RMSNormBackward", dOut, rstd, x, w)
	engine.MustSameShape("RMSNormBackward dx/x", dx, x)
	engine.MustDType("RMSNormBackward", "dx", dx, x.DType())
	engine.MustDType("RMSNormBackward", "dOut", dOut, x.DType())
	if dw != nil {
		engine.MustShape("RMSNormBackward", "dw", dw, d)
		engine.MustDType("RMSNormBackward", "dw", dw, w.DType())
	}
	b.launch("RMSNormBackward", func(str C.cudaStream_t) C.cudaError_t {
		ws := b.workspace(int(C.tw_rmsnorm_backward_workspace(i64(n), i64(d))))
		return C.tw_rmsnorm_backward(ptr(dx), ptr(dw), ptr(dOut), ptr(x), ptr(w), fptr(rstd), dt(x), dt(w),
			i64(n), i64(d), devPtr(ws), str)
	})
}
