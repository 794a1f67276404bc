package engine

import (
	"fmt"
	"math"
)

// This file composes backend ops into the larger operations that do not need
// kernels of their own; written against Backend alone, they run unchanged on
// every backend.

// TokenLogProbs computes per-token log-probabilities of targets under the
// classifier w, without ever holding logits for more than chunk tokens:
//
//	logits = h · wᵀ                      [chunk, V], h's dtype (as HF)
//	logp[i] = log softmax(logits[i])[targets[i]]   (f32)
//
//	logp [N] f32, lse [N] f32 (saved for the backward), h [N, D] float,
//	w [V, D] float (h's dtype), targets [N] i32 (negative: ignored, logp 0)
//
// Peak extra memory is chunk·V elements of h's dtype, taken from pool.
func TokenLogProbs(b Backend, pool *Pool, logp, lse, h, w, targets *Tensor, chunk int) error {
	MustShape("TokenLogProbs", "logp", logp, h.Dim(0))
	return logitChunks(b, pool, "TokenLogProbs", h, w, targets, lse, chunk, func(lo, hi int, l *Tensor) {
		b.LogSoftmaxGather(logp.Rows(lo, hi), lse.Rows(lo, hi), l, targets.Rows(lo, hi))
	})
}

// TokenLogProbsBackward is the backward of TokenLogProbs. It recomputes each
// chunk's logits, turns them into their gradient in place, and
//
//	dh  = dLogits · w          (overwritten)  [N, D]
//	dw += dLogitsᵀ · h         (accumulated)  [V, D]; nil when w is frozen
//
// dLogp [N] f32 is the gradient of the loss with respect to logp.
func TokenLogProbsBackward(b Backend, pool *Pool, dh, dw, dLogp, h, w, lse, targets *Tensor, chunk int) error {
	return logitChunks(b, pool, "TokenLogProbsBackward", h, w, targets, lse, chunk, func(lo, hi int, l *Tensor) {
		logitsBackward(b, lo, hi, l, dh, dw, dLogp, h, w, lse, targets)
	})
}

// TokenLogProbsFused is TokenLogProbs and TokenLogProbsBackward in one pass
// over the logits, for losses whose gradient with respect to each
// log-probability, dLogp, is known before the forward (a weighted sum of
// log-probabilities, such as cross-entropy): each chunk's logits are formed
// once, give their log-probabilities, and are turned in place into their
// gradient. dh is overwritten, dw accumulated (nil: a frozen classifier).
func TokenLogProbsFused(b Backend, pool *Pool, logp, lse, dh, dw, dLogp, h, w, targets *Tensor, chunk int) error {
	MustShape("TokenLogProbsFused", "logp", logp, h.Dim(0))
	return logitChunks(b, pool, "TokenLogProbsFused", h, w, targets, lse, chunk, func(lo, hi int, l *Tensor) {
		b.LogSoftmaxGather(logp.Rows(lo, hi), lse.Rows(lo, hi), l, targets.Rows(lo, hi))
		logitsBackward(b, lo, hi, l, dh, dw, dLogp, h, w, lse, targets)
	})
}

// logitChunks checks the shapes shared by the token log-prob passes, then
// forms the logits of chunk tokens at a time, l = h[lo:hi]·wᵀ, in one buffer
// from pool, and hands each chunk to fn.
func logitChunks(b Backend, pool *Pool, op string, h, w, targets, lse *Tensor, chunk int, fn func(lo, hi int, l *Tensor)) error {
	n, d := h.Dim(0), h.Dim(1)
	v := w.Dim(0)
	MustShape(op, "w", w, v, d)
	MustShape(op, "lse", lse, n)
	MustShape(op, "targets", targets, n)
	if chunk <= 0 {
		panic(fmt.Sprintf("engine: %s: chunk %d", op, chunk))
	}
	logits, err := pool.Get(h.DType(), min(chunk, n), v)
	if err != nil {
		return fmt.Errorf("token log-probs: %w", err)
	}
	defer pool.Put(logits)
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		l := logits.Rows(0, hi-lo)
		b.Gemm(l, h.Rows(lo, hi), w, GemmParams{TransB: true, Alpha: 1})
		fn(lo, hi, l)
	}
	return nil
}

// logitsBackward turns one chunk's logits l into their gradient in place and
// propagates it: dh[lo:hi] = dl·w, dw += dlᵀ·h[lo:hi] (dw nil: frozen).
func logitsBackward(b Backend, lo, hi int, l, dh, dw, dLogp, h, w, lse, targets *Tensor) {
	MustSameShape("TokenLogProbs dh", dh, h)
	b.LogSoftmaxGatherBackward(l, dLogp.Rows(lo, hi), l, lse.Rows(lo, hi), targets.Rows(lo, hi))
	b.Gemm(dh.Rows(lo, hi), l, w, GemmParams{Alpha: 1})
	if dw != nil {
		MustSameShape("TokenLogProbs dw", dw, w)
		b.Gemm(dw, l, h.Rows(lo, hi), GemmParams{TransA: true, Alpha: 1, Beta: 1})
	}
}

// GlobalNorm returns sqrt(Σ_t Σ x²) over all tensors, using the one-element
// f32 tensor acc as the accumulator. The sum's order is fixed, so the result
// does not depend on the thread count.
func GlobalNorm(b Backend, acc *Tensor, ts []*Tensor) float32 {
	MustShape("GlobalNorm", "acc", acc, 1)
	b.Fill(acc, 0)
	for _, t := range ts {
		b.SumSquares(acc, t)
	}
	return float32(math.Sqrt(float64(ToF32(b, acc)[0])))
}

// ClipScale returns the factor that scales gradients of global norm norm down
// to at most maxNorm: min(1, maxNorm/norm). A maxNorm ≤ 0 disables clipping.
// A non-finite norm yields NaN, which callers treat as a step to skip.
func ClipScale(norm, maxNorm float32) float32 {
	if math.IsNaN(float64(norm)) || math.IsInf(float64(norm), 0) {
		return float32(math.NaN())
	}
	if maxNorm <= 0 || norm <= maxNorm {
		return 1
	}
	return maxNorm / (norm + 1e-6)
}
