package cpu

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
)

// LogSoftmaxGather implements engine.Backend.LogSoftmaxGather: rows split
// across goroutines, each row's log-sum-exp by the vector loop of vec.c
// (exponentials summed in f64).
func (b *Backend) LogSoftmaxGather(logp, lse, logits, targets *engine.Tensor) {
	n, v := checkLogSoftmax("LogSoftmaxGather", logp, lse, logits, targets)
	lp, ls, tg, lg := f32s(logp), f32s(lse), i32s(targets), floatsOf(logits)
	b.parallel(n, 1, func(w, lo, hi int) {
		buf := b.scratchOf(w, v)
		for i := lo; i < hi; i++ {
			row := lg.load(i*v, v, buf) // [V] f32
			lseRows(row, v, ls[i:i+1])
			if t := tg[i]; t >= 0 {
				lp[i] = row[t] - ls[i]
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
			src := lg.load(i*v, v, buf) // [V]: logits' storage (f32) or a widened copy
			dst := buf[:v]              // [V]: the gradient row, stored below
			if dl.dt == engine.F32 {
				dst = dl.f[i*v : (i+1)*v] // written directly; may be src itself
			}
			logSoftmaxGradRows(src, dst, v, ls[i:i+1], dp[i:i+1], tg[i:i+1])
			dl.store(i*v, dst)
		}
	})
}

func checkLogSoftmax(op string, logp, lse, logits, targets *engine.Tensor) (n, v int) {
	n, v = engine.LogSoftmaxShape(op, logp, lse, logits, targets)
	for i, t := range i32s(targets) {
		if int(t) >= v {
			panic(fmt.Sprintf("engine: %s: targets[%d] = %d ≥ V = %d", op, i, t, v))
		}
	}
	return n, v
}
