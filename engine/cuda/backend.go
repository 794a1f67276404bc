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
	"os"
	"runtime"
	"unsafe"

	"github.com/turnwise/turnwise/engine"
)

// Options configure a CUDA backend.
type Options struct {
	// Device is the GPU ordinal (under the emulator, one of TW_EMU_DEVICES
	// emulated devices).
	Device int
	// GEMM selects the GEMM implementation: "wmma" (default), the
	// hand-written tensor-core kernel, or "cublas": cuBLASLt, opened at run
	// time (real GPUs only; where no cuBLASLt is found the backend says so on
	// stderr and uses "wmma").
	GEMM string
}

// Backend implements engine.Backend with the kernels of kernels/*.cu. It is
// used by one goroutine at a time; backends on different devices may be used
// from different goroutines at once.
//
// With TW_CUDA_SYNC=1 in the environment when it is created, the backend
// waits for the device after every launch, so that a kernel failing on the
// device is reported by the op that launched it.
type Backend struct {
	dev      device
	stream   C.cudaStream_t
	gemm     string
	syncEach bool    // TW_CUDA_SYNC=1
	ws       uintptr // workspace shared by launchers that need one, grown on demand
	wsSize   int
	lt       *cublasLt // cuBLASLt state for GEMM "cublas" (cuda tag only), made on first use
	timers   map[*Timer]struct{}
}

var _ engine.Backend = (*Backend)(nil)

// New opens the device and returns a backend on a stream of its own.
func New(opt Options) (*Backend, error) {
	gemm := opt.GEMM
	switch gemm {
	case "", "wmma":
		gemm = "wmma"
	case "cublas":
		if !haveCUBLAS {
			return nil, fmt.Errorf("cuda: GEMM %q is only available on a real GPU (built with -tags cuda)", opt.GEMM)
		}
	default:
		return nil, fmt.Errorf("cuda: unknown GEMM implementation %q (want wmma or cublas)", opt.GEMM)
	}
	var lt *cublasLt
	if gemm == "cublas" {
		var err error
		if lt, err = newCUBLASLt(); err != nil {
			fmt.Fprintf(os.Stderr, "cuda: GEMM cublas: %v; turnwise's own GEMM (wmma) runs instead\n", err)
			gemm = "wmma"
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dev, err := openDevice(opt.Device)
	if err != nil {
		return nil, err
	}
	return &Backend{
		dev:      dev,
		stream:   C.cudaStream_t(dev.stream()),
		gemm:     gemm,
		syncEach: os.Getenv("TW_CUDA_SYNC") == "1",
		lt:       lt,
		timers:   map[*Timer]struct{}{},
	}, nil
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
	b.enter()
	defer b.exit()
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
func (b *Backend) FreeBuffer(buf engine.Buffer) {
	a := bufOf(buf).addr
	b.enter()
	defer b.exit()
	b.dev.free(a)
}

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
	b.enter()
	defer b.exit()
	if err := b.dev.upload(addr(dst), src); err != nil {
		panic(fmt.Sprintf("cuda: Upload into %v: %v", dst, err))
	}
}

// Download copies src into host bytes, after the work queued before it.
func (b *Backend) Download(dst []byte, src *engine.Tensor) {
	if len(dst) != src.Bytes() {
		panic(fmt.Sprintf("cuda: Download of %v (%d bytes) into %d bytes", src, src.Bytes(), len(dst)))
	}
	b.enter()
	defer b.exit()
	if err := b.dev.download(dst, addr(src)); err != nil {
		panic(fmt.Sprintf("cuda: Download of %v: %v", src, err))
	}
}

// Sync waits for all queued work.
func (b *Backend) Sync() error {
	b.enter()
	defer b.exit()
	return b.dev.sync()
}

func dt(t *engine.Tensor) C.tw_dtype { return C.tw_dtype(t.DType()) }
func i64(n int) C.int64_t            { return C.int64_t(n) }

// Copy implements engine.Backend.Copy.
func (b *Backend) Copy(dst, src *engine.Tensor) {
	if dst.DType() != src.DType() || dst.Numel() != src.Numel() {
		panic(fmt.Sprintf("cuda: Copy: dst %v, src %v differ in dtype or element count", dst, src))
	}
	b.enter()
	defer b.exit()
	if err := b.dev.copy(addr(dst), addr(src), dst.Bytes()); err != nil {
		panic(fmt.Sprintf("cuda: Copy %v: %v", src, err))
	}
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

// Gemm implements engine.Backend.Gemm.
func (b *Backend) Gemm(c, a, bm *engine.Tensor, p engine.GemmParams) {
	g := engine.GemmShape(c, a, bm, p)
	if g.M == 0 || g.N == 0 {
		return
	}
	if b.lt != nil && b.cublasGemm(c, a, bm, p, g) {
		return
	}
	b.launch("Gemm", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_gemm(ptr(c), dt(c), ptr(a), ptr(bm), dt(a), cbool(p.TransA), cbool(p.TransB),
			i64(g.M), i64(g.N), i64(g.K), i64(g.Batch), i64(g.StrideA), i64(g.StrideB), i64(g.M*g.N),
			C.float(p.Alpha), C.float(p.Beta), str)
	})
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
	b.launch("Embedding", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_embedding(ptr(out), dt(out), ptr(table), dt(table), iptr(ids), i64(n), i64(d), str)
	})
}

// EmbeddingBackward implements engine.Backend.EmbeddingBackward.
func (b *Backend) EmbeddingBackward(dTable, dOut, ids *engine.Tensor) {
	n, v, d := engine.EmbeddingShape("EmbeddingBackward", dOut, dTable, ids)
	b.launch("EmbeddingBackward", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_embedding_backward(ptr(dTable), dt(dTable), ptr(dOut), dt(dOut), iptr(ids),
			i64(n), i64(v), i64(d), str)
	})
}

// RMSNorm implements engine.Backend.RMSNorm.
func (b *Backend) RMSNorm(out, rstd, x, w *engine.Tensor, eps float32) {
	n, d := engine.NormShape("RMSNorm", out, rstd, x, w)
	engine.MustDType("RMSNorm", "out", out, x.DType())
	b.launch("RMSNorm", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_rmsnorm(ptr(out), fptr(rstd), ptr(x), ptr(w), dt(x), dt(w), i64(n), i64(d), C.float(eps), str)
	})
}

// AddRMSNorm implements engine.Backend.AddRMSNorm.
func (b *Backend) AddRMSNorm(resid, out, rstd, x, delta, w *engine.Tensor, eps float32) {
	n, d := engine.NormShape("AddRMSNorm", out, rstd, x, w)
	engine.MustSameShape("AddRMSNorm resid/x", resid, x)
	engine.MustSameShape("AddRMSNorm delta/x", delta, x)
	for _, t := range []*engine.Tensor{resid, out, delta} {
		engine.MustDType("AddRMSNorm", "activation", t, x.DType())
	}
	b.launch("AddRMSNorm", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_add_rmsnorm(ptr(resid), ptr(out), fptr(rstd), ptr(x), ptr(delta), ptr(w), dt(x), dt(w),
			i64(n), i64(d), C.float(eps), str)
	})
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
	b.launch("RMSNormBackward", func(str C.cudaStream_t) C.cudaError_t {
		ws := b.workspace(int(C.tw_rmsnorm_backward_workspace(i64(n), i64(d))))
		return C.tw_rmsnorm_backward(ptr(dx), ptr(dw), ptr(dOut), ptr(x), ptr(w), fptr(rstd), dt(x), dt(w),
			i64(n), i64(d), C.p(C.uintptr_t(ws)), str)
	})
}

// RoPE implements engine.Backend.RoPE.
func (b *Backend) RoPE(x, pos, invFreq *engine.Tensor) { b.rope("RoPE", x, pos, invFreq, 1) }

// RoPEBackward implements engine.Backend.RoPEBackward.
func (b *Backend) RoPEBackward(dx, pos, invFreq *engine.Tensor) {
	b.rope("RoPEBackward", dx, pos, invFreq, -1)
}

func (b *Backend) rope(op string, x, pos, invFreq *engine.Tensor, sign float32) {
	n, h, dh := engine.RoPEShape(op, x, pos, invFreq)
	b.launch(op, func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_rope(ptr(x), dt(x), iptr(pos), fptr(invFreq), i64(n), i64(h), i64(dh), C.float(sign), str)
	})
}

// Attention implements engine.Backend.Attention. The rows of seqs are not
// validated here (that would need reading device memory); the kernels trust
// them.
func (b *Backend) Attention(out, lse, q, k, v, seqs *engine.Tensor, scale float32) {
	d := engine.AttentionShape("Attention", lse, q, k, v, seqs)
	engine.MustShape("Attention", "out", out, d.NQ, d.H, d.Dh)
	engine.MustDType("Attention", "out", out, q.DType())
	b.launch("Attention", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_attention(ptr(out), fptr(lse), ptr(q), ptr(k), ptr(v), iptr(seqs), i64(d.Seqs), dt(q),
			i64(d.NQ), i64(d.NK), i64(d.H), i64(d.G), i64(d.Dh), C.float(scale), str)
	})
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
	b.launch("AttentionBackward", func(str C.cudaStream_t) C.cudaError_t {
		ws := b.workspace(int(C.tw_attention_backward_workspace(i64(d.NQ), i64(d.NK), i64(d.H), i64(d.G), i64(d.Dh))))
		return C.tw_attention_backward(ptr(dq), ptr(dk), ptr(dv), ptr(dOut), ptr(out), fptr(lse),
			ptr(q), ptr(k), ptr(v), iptr(seqs), i64(d.Seqs), dt(q), i64(d.NQ), i64(d.NK), i64(d.H), i64(d.G), i64(d.Dh),
			C.float(scale), C.p(C.uintptr_t(ws)), str)
	})
}

// SwiGLU implements engine.Backend.SwiGLU.
func (b *Backend) SwiGLU(out, gate, up *engine.Tensor) {
	engine.SwiGLUShape("SwiGLU", out, gate, up)
	b.launch("SwiGLU", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_swiglu(ptr(out), ptr(gate), ptr(up), dt(out), i64(out.Numel()), str)
	})
}

// SwiGLUBackward implements engine.Backend.SwiGLUBackward.
func (b *Backend) SwiGLUBackward(dGate, dUp, dOut, gate, up *engine.Tensor) {
	engine.SwiGLUShape("SwiGLUBackward", dOut, gate, up)
	engine.SwiGLUShape("SwiGLUBackward", dGate, dUp, gate)
	b.launch("SwiGLUBackward", func(str C.cudaStream_t) C.cudaError_t {
		return C.tw_swiglu_backward(ptr(dGate), ptr(dUp), ptr(dOut), ptr(gate), ptr(up), dt(gate),
			i64(gate.Numel()), str)
	})
}

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

// Sample implements engine.Backend.Sample.
func (b *Backend) Sample(ids, logits, u *engine.Tensor, p engine.SampleParams) {
	n, v := engine.SampleShape(ids, logits, u)
	b.launch("Sample", func(str C.cudaStream_t) C.cudaError_t {
		ws := b.workspace(int(C.tw_sample_workspace(i64(n), i64(v))))
		return C.tw_sample(iptr(ids), ptr(logits), dt(logits), fptr(u), i64(n), i64(v), C.float(p.Temperature),
			C.float(p.TopP), C.p(C.uintptr_t(ws)), str)
	})
}
