//go:build cuda || cudaemu

package cuda

// #include "kernels.h"
import "C"

import (
	"fmt"

	"github.com/turnwise/turnwise/engine"
)

// mustHeadWidth panics, naming op and q's shape, unless the kernels take
// d's head width: a multiple of 8 up to 128 (attention.cuh's shapes_ok),
// where the launch would otherwise fail with a bare invalid argument.
func mustHeadWidth(op string, d engine.AttentionDims, q *engine.Tensor) {
	if d.Dh%8 != 0 || d.Dh > 128 {
		panic(fmt.Sprintf("cuda: %s: q %v has heads of width %d; the CUDA attention kernels take multiples of 8 up to 128",
			op, q.Shape(), d.Dh))
	}
}

// Attention implements engine.Backend.Attention. The rows of seqs are not
// validated here (that would need reading device memory); the kernels trust
// them.
func (b *Backend) Attention(out, lse, q, k, v, seqs *engine.Tensor, p engine.AttentionParams) {
	d := engine.AttentionShape("Attention", lse, q, k, v, seqs)
	mustHeadWidth("Attention", d, q)
	engine.MustShape("Attention", "out", out, d.NQ, d.H, d.Dh)
	engine.MustDType("Attention", "out", out, q.DType())
	cfg := b.attention.cConfig()
	b.launchSized("Attention", b.attentionSize(d), func(str C.cudaStream_t) C.cudaError_t {
		ws := b.workspace(int(C.tw_attention_workspace(i64(d.NQ), i64(d.NK), i64(d.H), i64(d.G), i64(d.Dh), i64(d.Seqs), &cfg)))
		return C.tw_attention(ptr(out), fptr(lse), ptr(q), ptr(k), ptr(v), iptr(seqs), i64(d.Seqs), dt(q),
			i64(d.NQ), i64(d.NK), i64(d.H), i64(d.G), i64(d.Dh), C.float(p.Scale), cbool(p.NonCausal), &cfg,
			devPtr(ws), str)
	})
}

// AttentionBackward implements engine.Backend.AttentionBackward.
func (b *Backend) AttentionBackward(dq, dk, dv, dOut, out, lse, q, k, v, seqs *engine.Tensor, p engine.AttentionParams) {
	d := engine.AttentionShape("AttentionBackward", lse, q, k, v, seqs)
	mustHeadWidth("AttentionBackward", d, q)
	for _, t := range []*engine.Tensor{dq, dOut, out} {
		engine.MustShape("AttentionBackward", "query-side tensor", t, d.NQ, d.H, d.Dh)
		engine.MustDType("AttentionBackward", "query-side tensor", t, q.DType())
	}
	for _, t := range []*engine.Tensor{dk, dv} {
		engine.MustShape("AttentionBackward", "key-side gradient", t, d.NK, d.G, d.Dh)
		engine.MustDType("AttentionBackward", "key-side gradient", t, q.DType())
	}
	cfg := b.attention.cConfig()
	b.launchSized("AttentionBackward", b.attentionSize(d), func(str C.cudaStream_t) C.cudaError_t {
		ws := b.workspace(int(C.tw_attention_backward_workspace(i64(d.NQ), i64(d.NK), i64(d.H), i64(d.G), i64(d.Dh), &cfg)))
		return C.tw_attention_backward(ptr(dq), ptr(dk), ptr(dv), ptr(dOut), ptr(out), fptr(lse),
			ptr(q), ptr(k), ptr(v), iptr(seqs), i64(d.Seqs), dt(q), i64(d.NQ), i64(d.NK), i64(d.H), i64(d.G), i64(d.Dh),
			C.float(p.Scale), cbool(p.NonCausal), &cfg, devPtr(ws), str)
	})
}
