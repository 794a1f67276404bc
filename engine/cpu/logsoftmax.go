package cpu

import (
	"fmt"
	"math"

	"github.com/turnwise/turnwise/engine"
)

// LogSoftmaxGather implements engine.Backend.LogSoftmaxGather: one goroutine
// per block of rows; the row's exponentials are summed in f64.
func (b *Backend) LogSoftmaxGather(logp, lse, logits, targets *engine.Tensor) {
	n, v := checkLogSoftmax("LogSoftmaxGather", logp, lse, logits, targets)
	lp, ls, tg, lg := f32s(logp), f32s(lse), i32s(targets), floatsOf(logits)
	b.parallel(n, 1, func(w, lo, hi int) {
		buf := b.scratchOf(w, v)
		for i := lo; i < hi; i++ {
			row := lg.load(i*v, v, buf)
			l := rowLSE(row)
			ls[i] = l
			if t := tg[i]; t >= 0 {
				lp[i] = row[t] - l
			} else {
				lp[i] = 0
			}
		}
	})
}

// LogSoftmaxGatherBackward implements engine.Backend.LogSoftmaxGatherBackward.
func (b *Backend) LogSoftmaxGatherBackward(dLogits, dLogp, logits, lse, targets *engine.Tensor) {
	n, v := checkLogSoftmax("LogSoftmaxGatherBackward", dLogp, lse, logits, targets)
	engine.MustSameShape("LogSoftmaxGatherBackward dLogits", dLogits, logits)
	dl, dp, ls, tg, lg := floatsOf(dLogits), f32s(dLogp), f32s(lse), i32s(targets), floatsOf(logits)
	b.parallel(n, 1, func(w, lo, hi int) {
		buf := b.scratchOf(w, v)
		for i := lo; i < hi; i++ {
			t := tg[i]
			src := lg.load(i*v, v, buf) // [V]: logits' storage (f32) or a widened copy
			dst := buf[:v]              // [V]: the gradient row, stored below
			if dl.dt == engine.F32 {
				dst = dl.f[i*v : (i+1)*v] // written directly; may be src itself
			}
			if t < 0 {
				for j := range dst {
					dst[j] = 0
				}
			} else {
				g, l := dp[i], ls[i]
				for j, x := range src {
					dst[j] = -g * expf(x-l)
				}
				dst[t] += g
			}
			dl.store(i*v, dst)
		}
	})
}

// rowLSE returns log Σ exp(row) in f32, summed in f64 after subtracting the
// maximum.
func rowLSE(row []float32) float32 {
	m := float32(math.Inf(-1))
	for _, x := range row {
		if x > m {
			m = x
		}
	}
	if math.IsInf(float64(m), -1) {
		return m
	}
	var s float64
	for _, x := range row {
		s += float64(expf(x - m))
	}
	return m + float32(math.Log(s))
}

func checkLogSoftmax(op string, logp, lse, logits, targets *engine.Tensor) (n, v int) {
	if logits.Rank() != 2 {
		panic(fmt.Sprintf("engine: %s: logits has shape %v, want [N, V]", op, logits.Shape()))
	}
	n, v = logits.Dim(0), logits.Dim(1)
	engine.MustShape(op, "logp", logp, n)
	engine.MustShape(op, "lse", lse, n)
	engine.MustShape(op, "targets", targets, n)
	for i, t := range i32s(targets) {
		if int(t) >= v {
			panic(fmt.Sprintf("engine: %s: targets[%d] = %d ≥ V = %d", op, i, t, v))
		}
	}
	return n, v
}
