//go:build cuda || cudaemu

package cuda

// #include "kernels.h"
import "C"

import "github.com/turnwise/turnwise/engine"

// Sample implements engine.Backend.Sample.
func (b *Backend) Sample(ids, logits, u *engine.Tensor, p engine.SampleParams) {
	n, v := engine.SampleShape(ids, logits, u)
	b.launch("Sample", func(str C.cudaStream_t) C.cudaError_t {
		ws := b.workspace(int(C.tw_sample_workspace(i64(n), i64(v))))
		return C.tw_sample(iptr(ids), ptr(logits), dt(logits), fptr(u), i64(n), i64(v), C.float(p.Temperature),
			C.float(p.TopP), i64(p.TopK), devPtr(ws), str)
	})
}
