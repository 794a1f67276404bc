//go:build cuda || cudaemu

package cuda

// #include "kernels.h"
import "C"

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
)

// Copy implements engine.Backend.Copy.
func (b *Backend) Copy(dst, src *engine.Tensor) {
	if dst.DType() != src.DType() || dst.Numel() != src.Numel() {
		panic(fmt.Sprintf("cuda: Copy: dst %v, src %v differ in dtype or element count", dst, src))
	}
	b.enter()
	defer b.exit()
	start := b.opMark()
	if err := b.dev.copy(addr(dst), addr(src), dst.Bytes()); err != nil {
		panic(fmt.Sprintf("cuda: Copy %v: %v", src, err))
	}
	if dst.Bytes() > 0 {
		b.count(1)
		b.opDone("Copy", opSize{}, start, 1)
	} else {
		b.opDone("Copy", opSize{}, start, 0)
	}
}

// ScatterRows implements engine.Backend.ScatterRows.
func (b *Backend) ScatterRows(dst, src, rows *engine.Tensor) {
	n, w := engine.ScatterRowsShape(dst, src, rows)
	b.launch("ScatterRows", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_scatter_rows(ptr(dst), ptr(src), iptr(rows), i64(n), i64(w), str)
	})
}

// Fill implements engine.Backend.Fill.
func (b *Backend) Fill(x *engine.Tensor, v float32) {
	b.launch("Fill", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_fill(ptr(x), dt(x), i64(x.Numel()), C.float(v), str)
	})
}

// Cast implements engine.Backend.Cast.
func (b *Backend) Cast(dst, src *engine.Tensor) {
	if dst.Numel() != src.Numel() {
		panic(fmt.Sprintf("cuda: Cast: dst %v and src %v differ in element count", dst, src))
	}
	b.launch("Cast", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_cast(ptr(dst), dt(dst), ptr(src), dt(src), i64(dst.Numel()), str)
	})
}

// Add implements engine.Backend.Add.
func (b *Backend) Add(out, x, y *engine.Tensor) {
	engine.MustSameShape("Add", out, x)
	engine.MustSameShape("Add", out, y)
	if out.DType() != x.DType() || out.DType() != y.DType() {
		panic(fmt.Sprintf("cuda: Add: dtypes differ: out %v, a %v, b %v", out, x, y))
	}
	b.launch("Add", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_add(ptr(out), ptr(x), ptr(y), dt(out), i64(out.Numel()), str)
	})
}
