package llama

import "github.com/turnwise/turnwise/engine"

// proj is one projection of a group that reads one input x [N, in] (q, k
// and v read h1; gate and up read h2), with what its forward or backward
// needs.
type proj struct {
	y   *engine.Tensor // [N, out]: the output, or in the backward its gradient dy
	w   *engine.Tensor // [out, in]
	lp  *LoRAPair      // its adapter (nil: not adapted)
	t   *engine.Tensor // [r, N]: (x·Aᵀ)ᵀ, written by the forward for the backward (adapted only)
	gw  *engine.Tensor // [out, in]: the weight gradient (backward; nil: a frozen base)
	glp *LoRAPair      // the adapter's gradients (backward; nil: a frozen adapter)
	dt  *engine.Tensor // [r, N]: scratch for (s·dy·B)ᵀ (backward, adapted only)
	// drop is the adapter's dropout on its input (P 0: none, adapted only),
	// and xd [N, in] the scratch that holds dropout(x), or in the backward
	// the dropped gradient that reaches dx; the group's projections use it
	// one after the other.
	drop engine.DropoutParams
	xd   *engine.Tensor
}

// linear computes the projections ps of x [N, in]:
//
//	y = x·Wᵀ + s·(dropout(x)·Aᵀ)·Bᵀ
//
// the second term for the adapted ones, whose t [r, N] receives
// (dropout(x)·Aᵀ)ᵀ; dropout is the projection's own (proj.drop, PEFT's
// lora_dropout: one mask per projection), or none.
// The t of the group are one GEMM, [t₁; …; t_k] = [A₁; …; A_k]·xᵀ, when
// the adapted A and t lie stacked in one buffer each (an adapter's own
// layout, newAdapter; and the activations', layerRun.projs): one launch
// that reads x once instead of k. Each element is the same dot product
// either way; a GEMM that chooses its summation order by the shape (our
// CUDA GEMM's split-K, cuBLASLt's algorithms, the CPU's path for a few
// rows) may round it differently where the two shapes fall on different
// plans.
//
// Likewise the base projections: with one token (N = 1: decoding one
// sequence), y₁ … y_k are the consecutive blocks of one row when they lie
// end to end in one buffer, and [y₁ … y_k] = x·[W₁; …; W_k]ᵀ is one GEMM
// when the W lie stacked too (the weights' own layout, allocWeights; the
// activations', forwardCached). With more tokens the y are column blocks
// of that product, which a contiguous tensor cannot view.
func linear(b engine.Backend, x *engine.Tensor, ps []proj, s float32) {
	if y, w := joinedRow(ps), stackOf(ps, func(p proj) *engine.Tensor { return p.w }); len(ps) > 1 && y != nil && w != nil {
		b.Gemm(y, x, w, engine.GemmParams{TransB: true, Alpha: 1})
	} else {
		for _, p := range ps {
			b.Gemm(p.y, x, p.w, engine.GemmParams{TransB: true, Alpha: 1})
		}
	}
	ad := adapted(ps)
	if len(ad) == 0 {
		return
	}
	if ad[0].drop.P > 0 {
		for _, p := range ad {
			b.Dropout(p.xd, x, p.drop)
			b.Gemm(p.t, p.lp.A, p.xd, engine.GemmParams{TransB: true, Alpha: 1})
			b.Gemm(p.y, p.t, p.lp.B, engine.GemmParams{TransA: true, TransB: true, Alpha: s, Beta: 1})
		}
		return
	}
	if a, t := stackOf(ad, func(p proj) *engine.Tensor { return p.lp.A }), stackOf(ad, func(p proj) *engine.Tensor { return p.t }); a != nil && t != nil {
		b.Gemm(t, a, x, engine.GemmParams{TransB: true, Alpha: 1})
	} else {
		for _, p := range ad {
			b.Gemm(p.t, p.lp.A, x, engine.GemmParams{TransB: true, Alpha: 1})
		}
	}
	for _, p := range ad {
		b.Gemm(p.y, p.t, p.lp.B, engine.GemmParams{TransA: true, TransB: true, Alpha: s, Beta: 1})
	}
}

// linearBackward is linear's backward, given each projection's dy in its y:
//
//	dx  = Σ dy·W + Σ dropout(dt·A)  (overwritten)
//	gw += dyᵀ·x                     (skipped when gw is nil: a frozen base)
//	dt  = s·dy·B                    (kept transposed, [r, N])
//	gB += s·dyᵀ·t, gA += dtᵀ·dropout(x)
//	                                (adapted projections; glp nil: a frozen adapter)
//
// where dropout is the forward's, its mask derived again from the same
// parameters (engine.Backend.Dropout), and none without one.
//
// As in the forward, the dt·A terms of a group are one GEMM when the A and
// dt lie stacked (dx += [dt₁ … dt_k]·[A₁; …; A_k], summed over the k·r
// columns in f32 before one rounding, where the projections one by one
// round dx after each: in bf16 the results differ by that rounding), and
// so are the gA when the gradients lie stacked.
func linearBackward(b engine.Backend, dx, x *engine.Tensor, ps []proj, s float32) {
	for i, p := range ps {
		beta := float32(1)
		if i == 0 {
			beta = 0
		}
		b.Gemm(dx, p.y, p.w, engine.GemmParams{Alpha: 1, Beta: beta})
		if p.gw != nil {
			b.Gemm(p.gw, p.y, x, engine.GemmParams{TransA: true, Alpha: 1, Beta: 1})
		}
	}
	ad := adapted(ps)
	if len(ad) == 0 {
		return
	}
	for _, p := range ad {
		b.Gemm(p.dt, p.lp.B, p.y, engine.GemmParams{TransA: true, TransB: true, Alpha: s})
	}
	if ad[0].drop.P > 0 {
		linearDropoutBackward(b, dx, x, ad, s)
		return
	}
	dt := stackOf(ad, func(p proj) *engine.Tensor { return p.dt })
	if a := stackOf(ad, func(p proj) *engine.Tensor { return p.lp.A }); a != nil && dt != nil {
		b.Gemm(dx, dt, a, engine.GemmParams{TransA: true, Alpha: 1, Beta: 1})
	} else {
		for _, p := range ad {
			b.Gemm(dx, p.dt, p.lp.A, engine.GemmParams{TransA: true, Alpha: 1, Beta: 1})
		}
	}
	if ad[0].glp == nil {
		return
	}
	for _, p := range ad {
		b.Gemm(p.glp.B, p.y, p.t, engine.GemmParams{TransA: true, TransB: true, Alpha: s, Beta: 1})
	}
	if ga := stackOf(ad, func(p proj) *engine.Tensor { return p.glp.A }); ga != nil && dt != nil {
		b.Gemm(ga, dt, x, engine.GemmParams{Alpha: 1, Beta: 1})
	} else {
		for _, p := range ad {
			b.Gemm(p.glp.A, p.dt, x, engine.GemmParams{Alpha: 1, Beta: 1})
		}
	}
}

// linearDropoutBackward is linearBackward's part after dt for adapted
// projections ad with dropout: the dropped gradient dropout(dt·A) added to
// dx, and the adapter's gradients from t and the dropped input, formed
// again in xd.
func linearDropoutBackward(b engine.Backend, dx, x *engine.Tensor, ad []proj, s float32) {
	for _, p := range ad {
		b.Gemm(p.xd, p.dt, p.lp.A, engine.GemmParams{TransA: true, Alpha: 1})
		b.Dropout(p.xd, p.xd, p.drop)
		b.Add(dx, dx, p.xd)
	}
	if ad[0].glp == nil {
		return
	}
	for _, p := range ad {
		b.Gemm(p.glp.B, p.y, p.t, engine.GemmParams{TransA: true, TransB: true, Alpha: s, Beta: 1})
		b.Dropout(p.xd, x, p.drop)
		b.Gemm(p.glp.A, p.dt, p.xd, engine.GemmParams{Alpha: 1, Beta: 1})
	}
}

// adapted returns the projections of ps that have an adapter.
func adapted(ps []proj) []proj {
	var out []proj
	for _, p := range ps {
		if p.lp != nil {
			out = append(out, p)
		}
	}
	return out
}

// joinedRow returns the one row [1, Σ out] that the outputs of ps make up
// when each is a single row [1, out] and they lie end to end in one buffer,
// in order; otherwise nil.
func joinedRow(ps []proj) *engine.Tensor {
	flat := make([]*engine.Tensor, len(ps))
	for i, p := range ps {
		if p.y.Rank() != 2 || p.y.Dim(0) != 1 {
			return nil
		}
		flat[i] = p.y.Reshape(p.y.Dim(1))
	}
	row := engine.Stacked(flat...)
	if row == nil {
		return nil
	}
	return row.Reshape(1, row.Dim(0))
}

// stackOf returns the tensor that part's tensors of ps are the consecutive
// row blocks of (engine.Stacked), or nil.
func stackOf(ps []proj, part func(proj) *engine.Tensor) *engine.Tensor {
	ts := make([]*engine.Tensor, len(ps))
	for i, p := range ps {
		ts[i] = part(p)
	}
	return engine.Stacked(ts...)
}
