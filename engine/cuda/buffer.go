//go:build cuda || cudaemu

package cuda

// #include <stdint.h>
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
	b.count(1)
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
	b.synced() // a copy from pageable memory waits for the stream first
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
	b.synced()
}

// Sync waits for all queued work.
func (b *Backend) Sync() error {
	b.enter()
	defer b.exit()
	defer b.synced()
	return b.dev.sync()
}

func dt(t *engine.Tensor) C.tw_dtype { return C.tw_dtype(t.DType()) }
func i64(n int) C.int64_t            { return C.int64_t(n) }

// devPtr returns a device address held as an integer (a workspace) as the
// pointer launchers take.
func devPtr(a uintptr) unsafe.Pointer { return C.p(C.uintptr_t(a)) }

func cbool(v bool) C.int {
	if v {
		return 1
	}
	return 0
}
