// Package cpu is turnwise's CPU backend and the reference every other backend
// is tested against. GEMMs go to OpenBLAS through cgo; every other op is Go,
// split across goroutines, with its inner loops in C (vec.c). Each op is
// written so that every output element is produced by one goroutine in a
// fixed order, which makes results independent of scheduling and, for the
// GEMMs, deterministic for a fixed thread count.
//
// The op contracts are on engine.Backend. cpu.go holds the Backend, its
// buffers and the goroutine split; every op family has one file, named as
// its kernel file in kernels/ and its wrappers in engine/cuda are:
// elementwise.go, gemm.go, embedding.go, rmsnorm.go, layernorm.go, bias.go,
// rope.go, attention.go, swiglu.go, gelu.go, logsoftmax.go, sumsquares.go,
// adamw.go, sample.go. Beside them:
// blas.go (OpenBLAS's sgemm and sbgemm), vec.c with vec.h and vec.go (the C
// inner loops and their Go wrappers) and mathf.go (a float32 exp for loops
// that stay in Go).
package cpu

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/turnwise/turnwise/engine"
)

// Options configure a CPU backend.
type Options struct {
	// Threads is the number of goroutines the ops use, GEMMs included
	// (each a block of single-threaded BLAS calls); 0 means
	// runtime.NumCPU().
	Threads int
}

// Backend is the CPU implementation of engine.Backend.
type Backend struct {
	threads  int
	scratch  [][]float32    // per-worker f32 scratch, grown on demand
	keys     [][]uint64     // per-worker rank keys (sampling's nucleus)
	partials []float64      // per-chunk partial sums of reductions
	gemmA    []float32      // f32 copies of bf16/f16 GEMM operands
	gemmB    []float32      //
	gemmC    []float32      // f32 accumulator for a non-f32 C
	sbgemm   unsafe.Pointer // OpenBLAS cblas_sbgemm, nil when not exported
	pool     *pool          // the worker goroutines (pool.go)
}

var _ engine.Backend = (*Backend)(nil)

// New returns a CPU backend.
func New(opt Options) *Backend {
	n := opt.Threads
	if n <= 0 {
		n = runtime.NumCPU()
	}
	setBLASThreads(1) // the workers share out GEMMs themselves (gemmSplit)
	b := &Backend{
		threads: n,
		scratch: make([][]float32, n),
		keys:    make([][]uint64, n),
		sbgemm:  findSBGEMM(),
		pool:    newPool(n),
	}
	runtime.AddCleanup(b, (*pool).stop, b.pool)
	return b
}

// Name returns "cpu".
func (b *Backend) Name() string { return "cpu" }

// Device returns engine.CPU.
func (b *Backend) Device() engine.Device { return engine.CPU }

// Threads returns the number of worker goroutines.
func (b *Backend) Threads() int { return b.threads }

// hostBuffer is CPU memory. It is 64-byte aligned and, being plain Go memory,
// may be passed to C for the duration of a call.
type hostBuffer struct {
	data []byte
}

func (h *hostBuffer) Device() engine.Device { return engine.CPU }
func (h *hostBuffer) Size() int             { return len(h.data) }

// NewBuffer allocates nbytes of zeroed, 64-byte aligned host memory.
func (b *Backend) NewBuffer(nbytes int) (engine.Buffer, error) {
	if nbytes < 0 {
		return nil, fmt.Errorf("cpu: negative buffer size %d", nbytes)
	}
	// Over-allocate float64s (8-byte aligned) and slice to a 64-byte boundary.
	raw := make([]float64, (nbytes+64+7)/8)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(raw)))
	skip := int((64 - p%64) % 64)
	all := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(raw))), len(raw)*8)
	return &hostBuffer{data: all[skip : skip+nbytes : skip+nbytes]}, nil
}

// FreeBuffer drops the buffer; the garbage collector reclaims it.
func (b *Backend) FreeBuffer(engine.Buffer) {}

// Upload copies src into dst.
func (b *Backend) Upload(dst *engine.Tensor, src []byte) {
	d := bytesOf(dst)
	if len(src) != len(d) {
		panic(fmt.Sprintf("cpu: Upload of %d bytes into %v (%d bytes)", len(src), dst, len(d)))
	}
	copy(d, src)
}

// Download copies src into dst.
func (b *Backend) Download(dst []byte, src *engine.Tensor) {
	s := bytesOf(src)
	if len(dst) != len(s) {
		panic(fmt.Sprintf("cpu: Download of %v (%d bytes) into %d bytes", src, len(s), len(dst)))
	}
	copy(dst, s)
}

// Sync returns nil: CPU ops complete before they return.
func (b *Backend) Sync() error { return nil }

// Bytes returns the memory of a tensor on a CPU backend's buffer: its
// elements in little-endian layout, read and written in place (what a
// communicator hands to a library). It panics if t lives elsewhere.
func Bytes(t *engine.Tensor) []byte { return bytesOf(t) }

// bytesOf returns the bytes of a host tensor.
func bytesOf(t *engine.Tensor) []byte {
	h, ok := t.Buffer().(*hostBuffer)
	if !ok {
		panic(fmt.Sprintf("cpu: tensor %v is not in CPU memory", t))
	}
	return h.data[t.Offset() : t.Offset()+t.Bytes()]
}

// f32s returns an f32 tensor's elements.
func f32s(t *engine.Tensor) []float32 {
	engine.MustDType("cpu", "tensor", t, engine.F32)
	b := bytesOf(t)
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// i32s returns an i32 tensor's elements.
func i32s(t *engine.Tensor) []int32 {
	engine.MustDType("cpu", "tensor", t, engine.I32)
	b := bytesOf(t)
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// u16s returns a bf16 or f16 tensor's raw elements.
func u16s(t *engine.Tensor) []uint16 {
	b := bytesOf(t)
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

// floats is a window on a float tensor's elements that reads and writes
// float32 values whatever the storage dtype.
type floats struct {
	dt  engine.DType
	f   []float32 // F32 storage
	h   []uint16  // BF16 or F16 storage
	len int
}

func floatsOf(t *engine.Tensor) floats {
	switch t.DType() {
	case engine.F32:
		f := f32s(t)
		return floats{dt: engine.F32, f: f, len: len(f)}
	case engine.BF16, engine.F16:
		h := u16s(t)
		return floats{dt: t.DType(), h: h, len: len(h)}
	}
	panic(fmt.Sprintf("cpu: tensor %v is not a float tensor", t))
}

// at returns element i as float32.
func (a floats) at(i int) float32 {
	switch a.dt {
	case engine.F32:
		return a.f[i]
	case engine.BF16:
		return engine.BF16ToF32(a.h[i])
	default:
		return engine.F16ToF32(a.h[i])
	}
}

// set stores v, rounded to the storage dtype, at element i.
func (a floats) set(i int, v float32) {
	switch a.dt {
	case engine.F32:
		a.f[i] = v
	case engine.BF16:
		a.h[i] = engine.F32ToBF16(v)
	default:
		a.h[i] = engine.F32ToF16(v)
	}
}

// load returns elements [off, off+n) as float32: the storage itself for F32
// (writes through it change the tensor), otherwise converted into buf.
func (a floats) load(off, n int, buf []float32) []float32 {
	if a.dt == engine.F32 {
		return a.f[off : off+n]
	}
	buf = buf[:n]
	src := a.h[off : off+n]
	if a.dt == engine.BF16 {
		bf16ToF32(src, buf)
	} else {
		for i, h := range src {
			buf[i] = engine.F16ToF32(h)
		}
	}
	return buf
}

// store writes src, rounded to the storage dtype, to elements [off, off+len).
// Storing a slice that load returned for an F32 tensor is a no-op copy.
func (a floats) store(off int, src []float32) {
	switch a.dt {
	case engine.F32:
		dst := a.f[off : off+len(src)]
		if len(src) > 0 && &dst[0] == &src[0] {
			return
		}
		copy(dst, src)
	case engine.BF16:
		f32ToBF16(src, a.h[off:off+len(src)])
	default:
		dst := a.h[off : off+len(src)]
		for i, v := range src {
			dst[i] = engine.F32ToF16(v)
		}
	}
}

// round rounds v to the precision of the storage dtype.
func (a floats) round(v float32) float32 { return a.dt.Round(v) }

// blk is the block of elements that element-wise ops widen to f32 at a time.
const blk = 2048

// blocks calls fn on consecutive blocks of at most blk elements of [lo, hi).
func blocks(lo, hi int, fn func(off, n int)) {
	for off := lo; off < hi; off += blk {
		fn(off, min(blk, hi-off))
	}
}

// parallel runs fn over [0, n) split into contiguous ranges of at least grain
// items, one range per worker. fn receives the worker index, which selects
// that worker's scratch. The split depends only on n, grain and the thread
// count. The ranges go to the pool's workers; a split made while the pool
// is busy (a parallel call inside fn) runs on goroutines of its own.
func (b *Backend) parallel(n, grain int, fn func(worker, lo, hi int)) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	w := min(b.threads, (n+grain-1)/grain)
	if w <= 1 {
		fn(0, 0, n)
		return
	}
	if b.pool.run(n, w, fn) {
		return
	}
	var wg sync.WaitGroup
	wg.Add(w - 1)
	for i := 1; i < w; i++ {
		lo, hi := i*n/w, (i+1)*n/w
		go func() {
			defer wg.Done()
			fn(i, lo, hi)
		}()
	}
	fn(0, 0, n/w)
	wg.Wait()
}

// grow returns s resized to n, reallocating only when its capacity is short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// scratchOf returns worker w's scratch of at least n float32s. Callers carve
// it into pieces; its contents are undefined.
func (b *Backend) scratchOf(w, n int) []float32 {
	b.scratch[w] = grow(b.scratch[w], n)
	return b.scratch[w]
}
