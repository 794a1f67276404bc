//go:build cuda || cudaemu

package cuda

// #include "kernels.h"
import "C"

import "github.com/turnwise/turnwise/engine"

// LogSoftmaxGather implements engine.Backend.LogSoftmaxGather.
func (b *Backend) LogSoftmaxGather(logp, lse, logits, targets *engine.Tensor) {
	n, v := engine.LogSoftmaxShape("LogSoftmaxGather", logp, lse, logits, targets)
	b.launch("LogSoftmaxGather", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_logsoftmax_gather(fptr(logp), fptr(lse), ptr(logits), dt(logits), iptr(targets),
			i64(n), i64(v), str)
	})
}

// LogSoftmaxGatherBackward implements engine.Backend.LogSoftmaxGatherBackward.
func (b *Backend) LogSoftmaxGatherBackward(dLogits, dLogp, logits, lse, targets *engine.Tensor) {
	n, v := engine.LogSoftmaxShape("LogSoftmaxGatherBackward", dLogp, lse, logits, targets)
	engine.MustSameShape("LogSoftmaxGatherBackward dLogits", dLogits, logits)
	engine.MustDType("LogSoftmaxGatherBackward", "dLogits", dLogits, logits.DType())
	b.launch("LogSoftmaxGatherBackward", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_logsoftmax_gather_backward(ptr(dLogits), fptr(dLogp), ptr(logits), fptr(lse),
			iptr(targets), dt(logits), i64(n), i64(v), str)
	})
}
