//go:build cuda || cudaemu

package cuda

// #include "kernels.h"
import "C"

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
)

// Dropout implements engine.Backend.Dropout.
func (b *Backend) Dropout(out, x *engine.Tensor, p engine.DropoutParams) {
	engine.MustSameShape("Dropout", out, x)
	if out.DType() != x.DType() {
		panic(fmt.Sprintf("cuda: Dropout: dtypes differ: out %v, x %v", out, x))
	}
	p.Check("cuda: Dropout")
	b.launch("Dropout", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_dropout(ptr(out), ptr(x), dt(x), i64(x.Numel()), C.uint64_t(p.Seed), C.uint32_t(p.Threshold()), C.float(p.Scale()), str)
	})
}
