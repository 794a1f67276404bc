package llama

import "github.com/turnwise/turnwise/engine"

// linear computes a projection of x [N, in] by w [out, in] into y [N, out]:
//
//	y = x·Wᵀ + s·(x·Aᵀ)·Bᵀ
//
// the second term only when lp (a LoRA pair) is non-nil; t [N, r] then
// receives x·Aᵀ, which the backward needs.
func linear(b engine.Backend, y, x, w *engine.Tensor, lp *LoRAPair, s float32, t *engine.Tensor) {
	b.Gemm(y, x, w, engine.GemmParams{TransB: true, Alpha: 1})
	if lp != nil {
		b.Gemm(t, x, lp.A, engine.GemmParams{TransB: true, Alpha: 1})
		b.Gemm(y, t, lp.B, engine.GemmParams{TransB: true, Alpha: s, Beta: 1})
	}
}

// linearBackward is linear's backward, given dy [N, out]:
//
//	dx  = dy·W + dt·A         (added to dx when accumulate, else overwriting it)
//	gw += dyᵀ·x               (skipped when gw is nil: a frozen base)
//	dt  = s·dy·B              [N, r] scratch
//	gB += s·dyᵀ·t, gA += dtᵀ·x (when lp is non-nil; glp nil: a frozen adapter)
func linearBackward(b engine.Backend, dx *engine.Tensor, accumulate bool, dy, x, w, gw *engine.Tensor,
	lp, glp *LoRAPair, s float32, t, dt *engine.Tensor) {
	beta := float32(0)
	if accumulate {
		beta = 1
	}
	b.Gemm(dx, dy, w, engine.GemmParams{Alpha: 1, Beta: beta})
	if gw != nil {
		b.Gemm(gw, dy, x, engine.GemmParams{TransA: true, Alpha: 1, Beta: 1})
	}
	if lp == nil {
		return
	}
	b.Gemm(dt, dy, lp.B, engine.GemmParams{Alpha: s})
	b.Gemm(dx, dt, lp.A, engine.GemmParams{Alpha: 1, Beta: 1})
	if glp != nil {
		b.Gemm(glp.B, dy, t, engine.GemmParams{TransA: true, Alpha: s, Beta: 1})
		b.Gemm(glp.A, dt, x, engine.GemmParams{TransA: true, Alpha: 1, Beta: 1})
	}
}
