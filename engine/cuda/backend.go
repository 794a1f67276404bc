//go:build cuda || cudaemu

package cuda

// #cgo CFLAGS: -I${SRCDIR}/../../kernels
// #include <stdint.h>
// #include <stdlib.h>
// #include "kernels.h"
//
// // p turns a device address held by Go as an integer back into a pointer.
// static inline void *p(uintptr_t a) { return (void *)a; }
// static inline float *pf(uintptr_t a) { return (float *)a; }
// static inline int32_t *pi(uintptr_t a) { return (int32_t *)a; }
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/turnwise/turnwise/engine"
)

// Options configure a CUDA backend.
type Options struct {
	// Device is the GPU ordinal (ignored by the emulator).
	Device int
	// GEMM selects the GEMM implementation: "wmma" (default), the
	// hand-written tensor-core kernel, or "cublas" (real GPUs only).
	GEMM string
}

// Backend implements engine.Backend with the kernels of kernels/*.cu.
type Backend struct {
	dev    device
	stream C.cudaStream_t
	gemm   string
	ws     uintptr // workspace shared by launchers that need one, grown on demand
	wsSize int
	cublas unsafe.Pointer // cuBLAS handle, created on first use (cuda tag only)
}

var _ engine.Backend = (*Backend)(nil)

// New opens the device and returns a backend on its default stream.
func New(opt Options) (*Backend, error) {
	dev, err := openDevice(opt.Device)
	if err != nil {
		return nil, err
	}
	b := &Backend{dev: dev, stream: C.cudaStream_t(dev.stream()), gemm: opt.GEMM}
	switch b.gemm {
	case "", "wmma":
		b.gemm = "wmma"
	case "cublas":
		if !haveCUBLAS {
			return nil, fmt.Errorf("cuda: GEMM %q is only available on a real GPU (built with -tags cuda)", opt.GEMM)
		}
	default:
		return nil, fmt.Errorf("cuda: unknown GEMM implementation %q (want wmma or cublas)", opt.GEMM)
	}
	return b, nil
}

// Name returns "cuda" or "cudaemu".
func (b *Backend) Name() string { return b.dev.kind() }

// Device returns the device the buffers live on.
func (b *Backend) Device() engine.Device {
	return engine.Device{Kind: b.dev.kind(), Ordinal: b.dev.ordinal()}
}

// devBuffer is device memory.
type devBuffer struct {
	addr uintptr
	size int
	dev  engine.Device
}

func (d *devBuffer) Device() engine.Device { return d.dev }
func (d *devBuffer) Size() int             { return d.size }

// NewBuffer allocates nbytes of zeroed device memory.
func (b *Backend) NewBuffer(nbytes int) (engine.Buffer, error) {
	if nbytes < 0 {
		return nil, fmt.Errorf("cuda: negative buffer size %d", nbytes)
	}
	a, err := b.dev.alloc(max(nbytes, 1))
	if err != nil {
		return nil, fmt.Errorf("cuda: allocating %d bytes: %w", nbytes, err)
	}
	if err := b.dev.memset0(a, max(nbytes, 1)); err != nil {
		b.dev.free(a)
		return nil, fmt.Errorf("cuda: zeroing %d bytes: %w", nbytes, err)
	}
	return &devBuffer{addr: a, size: nbytes, dev: b.Device()}, nil
}

// FreeBuffer releases device memory.
func (b *Backend) FreeBuffer(buf engine.Buffer) { b.dev.free(bufOf(buf).addr) }

func bufOf(buf engine.Buffer) *devBuffer {
	d, ok := buf.(*devBuffer)
	if !ok {
		panic(fmt.Sprintf("cuda: buffer on %v is not device memory of this backend", buf.Device()))
	}
	return d
}

// addr returns the device address of t's first element.
func addr(t *engine.Tensor) uintptr { return bufOf(t.Buffer()).addr + uintptr(t.Offset()) }

// ptr, fptr and iptr return t's address as the C pointer types launchers take;
// nil tensors give NULL.
func ptr(t *engine.Tensor) unsafe.Pointer {
	if t == nil {
		return nil
	}
	return C.p(C.uintptr_t(addr(t)))
}
func fptr(t *engine.Tensor) *C.float   { return C.pf(C.uintptr_t(addr(t))) }
func iptr(t *engine.Tensor) *C.int32_t { return C.pi(C.uintptr_t(addr(t))) }

// Upload copies host bytes into dst.
func (b *Backend) Upload(dst *engine.Tensor, src []byte) {
	if len(src) != dst.Bytes() {
		panic(fmt.Sprintf("cuda: Upload of %d bytes into %v (%d bytes)", len(src), dst, dst.Bytes()))
	}
	if err := b.dev.upload(addr(dst), src); err != nil {
		panic(fmt.Sprintf("cuda: Upload into %v: %v", dst, err))
	}
}

// Download copies src into host bytes, after the work queued before it.
func (b *Backend) Download(dst []byte, src *engine.Tensor) {
	if len(dst) != src.Bytes() {
		panic(fmt.Sprintf("cuda: Download of %v (%d bytes) into %d bytes", src, src.Bytes(), len(dst)))
	}
	if err := b.dev.download(dst, addr(src)); err != nil {
		panic(fmt.Sprintf("cuda: Download of %v: %v", src, err))
	}
}

// Sync waits for all queued work.
func (b *Backend) Sync() error { return b.dev.sync() }

// check turns a launcher's result into a panic naming the op: launch
// failures are kernel or programming errors, not a user's.
func check(op string, e C.cudaError_t) {
	if e != C.cudaSuccess {
		panic(fmt.Sprintf("cuda: %s: %s (error %d)", op, C.GoString(C.cudaGetErrorString(e)), int(e)))
	}
}

// workspace returns a device scratch area of at least n bytes, valid until
// the next call (all work runs in order on one stream, so reuse is safe).
func (b *Backend) workspace(n int) uintptr {
	if n > b.wsSize {
		if b.ws != 0 {
			b.dev.free(b.ws)
		}
		a, err := b.dev.alloc(n)
		if err != nil {
			panic(fmt.Sprintf("cuda: allocating a %d-byte workspace: %v", n, err))
		}
		b.ws, b.wsSize = a, n
	}
	return b.ws
}

func dt(t *engine.Tensor) C.tw_dtype { return C.tw_dtype(t.DType()) }
func i64(n int) C.int64_t            { return C.int64_t(n) }

// Copy implements engine.Backend.Copy.
func (b *Backend) Copy(dst, src *engine.Tensor) {
	if dst.DType() != src.DType() || dst.Numel() != src.Numel() {
		panic(fmt.Sprintf("cuda: Copy: dst %v, src %v differ in dtype or element count", dst, src))
	}
	if err := b.dev.copy(addr(dst), addr(src), dst.Bytes()); err != nil {
		panic(fmt.Sprintf("cuda: Copy %v: %v", src, err))
	}
}

// Fill implements engine.Backend.Fill.
func (b *Backend) Fill(x *engine.Tensor, v float32) {
	check("Fill", C.tw_fill(ptr(x), dt(x), i64(x.Numel()), C.float(v), b.stream))
}

// Cast implements engine.Backend.Cast.
func (b *Backend) Cast(dst, src *engine.Tensor) {
	if dst.Numel() != src.Numel() {
		panic(fmt.Sprintf("cuda: Cast: dst %v and src %v differ in element count", dst, src))
	}
	check("Cast", C.tw_cast(ptr(dst), dt(dst), ptr(src), dt(src), i64(dst.Numel()), b.stream))
}

// Add implements engine.Backend.Add.
func (b *Backend) Add(out, x, y *engine.Tensor) {
	engine.MustSameShape("Add", out, x)
	engine.MustSameShape("Add", out, y)
	if out.DType() != x.DType() || out.DType() != y.DType() {
		panic(fmt.Sprintf("cuda: Add: dtypes differ: out %v, a %v, b %v", out, x, y))
	}
	check("Add", C.tw_add(ptr(out), ptr(x), ptr(y), dt(out), i64(out.Numel()), b.stream))
}

// Scale implements engine.Backend.Scale.
func (b *Backend) Scale(x *engine.Tensor, s float32) {
	check("Scale", C.tw_scale(ptr(x), dt(x), i64(x.Numel()), C.float(s), b.stream))
}

// AXPY implements engine.Backend.AXPY.
func (b *Backend) AXPY(y *engine.Tensor, alpha float32, x *engine.Tensor) {
	if y.Numel() != x.Numel() {
		panic(fmt.Sprintf("cuda: AXPY: y %v and x %v differ in element count", y, x))
	}
	check("AXPY", C.tw_axpy(ptr(y), dt(y), C.float(alpha), ptr(x), dt(x), i64(y.Numel()), b.stream))
}

// Gemm implements engine.Backend.Gemm.
func (b *Backend) Gemm(c, a, bm *engine.Tensor, p engine.GemmParams) {
	g := engine.GemmShape(c, a, bm, p)
	if g.M == 0 || g.N == 0 {
		return
	}
	if b.gemm == "cublas" {
		b.cublasGemm(c, a, bm, p, g)
		return
	}
	check("Gemm", C.tw_gemm(ptr(c), dt(c), ptr(a), ptr(bm), dt(a), cbool(p.TransA), cbool(p.TransB),
		i64(g.M), i64(g.N), i64(g.K), i64(g.Batch), i64(g.StrideA), i64(g.StrideB), i64(g.M*g.N),
		C.float(p.Alpha), C.float(p.Beta), b.stream))
}

func cbool(v bool) C.int {
	if v {
		return 1
	}
	return 0
}

// Embedding implements engine.Backend.Embedding.
func (b *Backend) Embedding(out, table, ids *engine.Tensor) {
	n, _, d := engine.EmbeddingShape("Embedding", out, table, ids)
	check("Embedding", C.tw_embedding(ptr(out), dt(out), ptr(table), dt(table), iptr(ids), i64(n), i64(d), b.stream))
}

// EmbeddingBackward implements engine.Backend.EmbeddingBackward.
func (b *Backend) EmbeddingBackward(dTable, dOut, ids *engine.Tensor) {
	n, v, d := engine.EmbeddingShape("EmbeddingBackward", dOut, dTable, ids)
	check("EmbeddingBackward", C.tw_embedding_backward(ptr(dTable), dt(dTable), ptr(dOut), dt(dOut), iptr(ids),
		i64(n), i64(v), i64(d), b.stream))
}

// RMSNorm implements engine.Backend.RMSNorm.
func (b *Backend) RMSNorm(out, rstd, x, w *engine.Tensor, eps float32) {
	n, d := engine.NormShape("RMSNorm", out, rstd, x, w)
	engine.MustDType("RMSNorm", "out", out, x.DType())
	check("RMSNorm", C.tw_rmsnorm(ptr(out), fptr(rstd), ptr(x), ptr(w), dt(x), dt(w), i64(n), i64(d), C.float(eps), b.stream))
}

// AddRMSNorm implements engine.Backend.AddRMSNorm.
func (b *Backend) AddRMSNorm(resid, out, rstd, x, delta, w *engine.Tensor, eps float32) {
	n, d := engine.NormShape("AddRMSNorm", out, rstd, x, w)
	engine.MustSameShape("AddRMSNorm resid/x", resid, x)
	engine.MustSameShape("AddRMSNorm delta/x", delta, x)
	for _, t := range []*engine.Tensor{resid, out, delta} {
		engine.MustDType("AddRMSNorm", "activation", t, x.DType())
	}
	check("AddRMSNorm", C.tw_add_rmsnorm(ptr(resid), ptr(out), fptr(rstd), ptr(x), ptr(delta), ptr(w), dt(x), dt(w),
		i64(n), i64(d), C.float(eps), b.stream))
}

// RMSNormBackward implements engine.Backend.RMSNormBackward.
func (b *Backend) RMSNormBackward(dx, dw, dOut, x, w, rstd *engine.Tensor) {
	n, d := engine.NormShape("RMSNormBackward", dOut, rstd, x, w)
	engine.MustSameShape("RMSNormBackward dx/x", dx, x)
	engine.MustDType("RMSNormBackward", "dx", dx, x.DType())
	engine.MustDType("RMSNormBackward", "dOut", dOut, x.DType())
	if dw != nil {
		engine.MustShape("RMSNormBackward", "dw", dw, d)
		engine.MustDType("RMSNormBackward", "dw", dw, w.DType())
	}
	ws := b.workspace(int(C.tw_rmsnorm_backward_workspace(i64(n), i64(d))))
	check("RMSNormBackward", C.tw_rmsnorm_backward(ptr(dx), ptr(dw), ptr(dOut), ptr(x), ptr(w), fptr(rstd), dt(x), dt(w),
		i64(n), i64(d), C.p(C.uintptr_t(ws)), b.stream))
}

// RoPE implements engine.Backend.RoPE.
func (b *Backend) RoPE(x, pos, invFreq *engine.Tensor) { b.rope("RoPE", x, pos, invFreq, 1) }

// RoPEBackward implements engine.Backend.RoPEBackward.
func (b *Backend) RoPEBackward(dx, pos, invFreq *engine.Tensor) {
	b.rope("RoPEBackward", dx, pos, invFreq, -1)
}

func (b *Backend) rope(op string, x, pos, invFreq *engine.Tensor, sign float32) {
	n, h, dh := engine.RoPEShape(op, x, pos, invFreq)
	check(op, C.tw_rope(ptr(x), dt(x), iptr(pos), fptr(invFreq), i64(n), i64(h), i64(dh), C.float(sign), b.stream))
}

// Attention implements engine.Backend.Attention. The rows of seqs are not
// validated here (that would need reading device memory); the kernels trust
// them.
func (b *Backend) Attention(out, lse, q, k, v, seqs *engine.Tensor, scale float32) {
	d := engine.AttentionShape("Attention", lse, q, k, v, seqs)
	engine.MustShape("Attention", "out", out, d.NQ, d.H, d.Dh)
	engine.MustDType("Attention", "out", out, q.DType())
	check("Attention", C.tw_attention(ptr(out), fptr(lse), ptr(q), ptr(k), ptr(v), iptr(seqs), i64(d.Seqs), dt(q),
		i64(d.NQ), i64(d.NK), i64(d.H), i64(d.G), i64(d.Dh), C.float(scale), b.stream))
}

// AttentionBackward implements engine.Backend.AttentionBackward.
func (b *Backend) AttentionBackward(dq, dk, dv, dOut, out, lse, q, k, v, seqs *engine.Tensor, scale float32) {
	d := engine.AttentionShape("AttentionBackward", lse, q, k, v, seqs)
	for _, t := range []*engine.Tensor{dq, dOut, out} {
		engine.MustShape("AttentionBackward", "query-side tensor", t, d.NQ, d.H, d.Dh)
		engine.MustDType("AttentionBackward", "query-side tensor", t, q.DType())
	}
	for _, t := range []*engine.Tensor{dk, dv} {
		engine.MustShape("AttentionBackward", "key-side gradient", t, d.NK, d.G, d.Dh)
		engine.MustDType("AttentionBackward", "key-side gradient", t, q.DType())
	}
	ws := b.workspace(int(C.tw_attention_backward_workspace(i64(d.NQ), i64(d.NK), i64(d.H), i64(d.G), i64(d.Dh))))
	check("AttentionBackward", C.tw_attention_backward(ptr(dq), ptr(dk), ptr(dv), ptr(dOut), ptr(out), fptr(lse),
		ptr(q), ptr(k), ptr(v), iptr(seqs), i64(d.Seqs), dt(q), i64(d.NQ), i64(d.NK), i64(d.H), i64(d.G), i64(d.Dh),
		C.float(scale), C.p(C.uintptr_t(ws)), b.stream))
}

// SwiGLU implements engine.Backend.SwiGLU.
func (b *Backend) SwiGLU(out, gate, up *engine.Tensor) {
	engine.SwiGLUShape("SwiGLU", out, gate, up)
	check("SwiGLU", C.tw_swiglu(ptr(out), ptr(gate), ptr(up), dt(out), i64(out.Numel()), b.stream))
}

// SwiGLUBackward implements engine.Backend.SwiGLUBackward.
func (b *Backend) SwiGLUBackward(dGate, dUp, dOut, gate, up *engine.Tensor) {
	engine.SwiGLUShape("SwiGLUBackward", dOut, gate, up)
	engine.SwiGLUShape("SwiGLUBackward", dGate, dUp, gate)
	check("SwiGLUBackward", C.tw_swiglu_backward(ptr(dGate), ptr(dUp), ptr(dOut), ptr(gate), ptr(up), dt(gate),
		i64(gate.Numel()), b.stream))
}

// LogSoftmaxGather implements engine.Backend.LogSoftmaxGather.
func (b *Backend) LogSoftmaxGather(logp, lse, logits, targets *engine.Tensor) {
	n, v := engine.LogSoftmaxShape("LogSoftmaxGather", logp, lse, logits, targets)
	check("LogSoftmaxGather", C.tw_logsoftmax_gather(fptr(logp), fptr(lse), ptr(logits), dt(logits), iptr(targets),
		i64(n), i64(v), b.stream))
}

// LogSoftmaxGatherBackward implements engine.Backend.LogSoftmaxGatherBackward.
func (b *Backend) LogSoftmaxGatherBackward(dLogits, dLogp, logits, lse, targets *engine.Tensor) {
	n, v := engine.LogSoftmaxShape("LogSoftmaxGatherBackward", dLogp, lse, logits, targets)
	engine.MustSameShape("LogSoftmaxGatherBackward dLogits", dLogits, logits)
	engine.MustDType("LogSoftmaxGatherBackward", "dLogits", dLogits, logits.DType())
	check("LogSoftmaxGatherBackward", C.tw_logsoftmax_gather_backward(ptr(dLogits), fptr(dLogp), ptr(logits), fptr(lse),
		iptr(targets), dt(logits), i64(n), i64(v), b.stream))
}

// SegmentSum implements engine.Backend.SegmentSum.
func (b *Backend) SegmentSum(out, x, w, seg *engine.Tensor) {
	n, s := engine.SegmentShape("SegmentSum", out, x, w, seg)
	check("SegmentSum", C.tw_segment_sum(fptr(out), fptr(x), fptr(w), iptr(seg), i64(n), i64(s), b.stream))
}

// SegmentSumBackward implements engine.Backend.SegmentSumBackward.
func (b *Backend) SegmentSumBackward(dx, dOut, w, seg *engine.Tensor) {
	n, _ := engine.SegmentShape("SegmentSumBackward", dOut, dx, w, seg)
	check("SegmentSumBackward", C.tw_segment_sum_backward(fptr(dx), fptr(dOut), fptr(w), iptr(seg), i64(n), b.stream))
}

// Sample implements engine.Backend.Sample.
func (b *Backend) Sample(ids, logits, u *engine.Tensor, p engine.SampleParams) {
	n, v := engine.SampleShape(ids, logits, u)
	ws := b.workspace(int(C.tw_sample_workspace(i64(n), i64(v))))
	check("Sample", C.tw_sample(iptr(ids), ptr(logits), dt(logits), fptr(u), i64(n), i64(v), C.float(p.Temperature),
		C.float(p.TopP), C.p(C.uintptr_t(ws)), b.stream))
}
