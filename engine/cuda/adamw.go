//go:build cuda || cudaemu

package cuda

// #include <stdint.h>
// #include "kernels.h"
//
// static inline const tw_adamw_span *spans_at(uintptr_t a) { return (const tw_adamw_span *)a; }
import "C"

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/turnwise/turnwise/engine"
)

// biasCorrections returns bc1 = 1 − β1^t and bc2 = sqrt(1 − β2^t), formed in
// float64 as engine/cpu forms them.
func biasCorrections(p engine.AdamWParams) (bc1, bc2 C.float) {
	return C.float(1 - math.Pow(float64(p.Beta1), float64(p.Step))),
		C.float(math.Sqrt(1 - math.Pow(float64(p.Beta2), float64(p.Step))))
}

// AdamW implements engine.Backend.AdamW.
func (b *Backend) AdamW(param, grad, m, v, master *engine.Tensor, p engine.AdamWParams) {
	n := engine.AdamWShape(param, grad, m, v, master, p)
	bc1, bc2 := biasCorrections(p)
	var mp *C.float
	if master != nil {
		mp = fptr(master)
	}
	b.launch("AdamW", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_adamw(ptr(param), dt(param), ptr(grad), dt(grad), fptr(m), fptr(v), mp, i64(n),
			C.float(p.LR), C.float(p.Beta1), C.float(p.Beta2), C.float(p.Eps), C.float(p.WeightDecay),
			C.float(p.GradScale), bc1, bc2, str)
	})
}

// AdamWMulti implements engine.Backend.AdamWMulti. The table's spans go to
// device memory on the first call ([len(spans)] tw_adamw_span, kept in the
// table's cache); every call is then one launch.
func (b *Backend) AdamWMulti(t *engine.ParamTable, grad, m, v, master *engine.Tensor, p engine.AdamWParams) {
	engine.AdamWMultiShape(t, grad, m, v, master, p)
	spans := t.Spans()
	if len(spans) == 0 {
		return
	}
	if t.Cache() == nil {
		t.SetCache(b.uploadSpans(spans))
	}
	bc1, bc2 := biasCorrections(p)
	var mp *C.float
	if master != nil {
		mp = fptr(master)
	}
	table := C.spans_at(C.uintptr_t(bufOf(t.Cache()).addr))
	b.launch("AdamWMulti", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_adamw_multi(table, C.int64_t(len(spans)), i64(t.End()), ptr(grad), dt(grad), fptr(m), fptr(v), mp,
			C.float(p.LR), C.float(p.Beta1), C.float(p.Beta2), C.float(p.Eps), C.float(p.WeightDecay),
			C.float(p.GradScale), bc1, bc2, str)
	})
}

// uploadSpans copies spans, as the launcher's table, into a new device
// buffer.
func (b *Backend) uploadSpans(spans []engine.AdamWSpan) engine.Buffer {
	table := make([]C.tw_adamw_span, len(spans)) // [len(spans)] host copy
	for i, s := range spans {
		table[i] = C.tw_adamw_span{param: C.uint64_t(addr(s.W)), off: C.int64_t(s.Off), master_off: C.int64_t(s.MasterOff),
			n: C.int64_t(s.W.Numel()), dtype: C.int32_t(s.W.DType())}
	}
	nbytes := len(table) * C.sizeof_tw_adamw_span
	buf, err := b.NewBuffer(nbytes)
	if err != nil {
		panic(fmt.Sprintf("cuda: AdamWMulti: the table of %d parameters: %v", len(spans), err))
	}
	b.enter()
	defer b.exit()
	if err := b.dev.upload(bufOf(buf).addr, unsafe.Slice((*byte)(unsafe.Pointer(&table[0])), nbytes)); err != nil {
		panic(fmt.Sprintf("cuda: AdamWMulti: uploading the table of %d parameters: %v", len(spans), err))
	}
	return buf
}
