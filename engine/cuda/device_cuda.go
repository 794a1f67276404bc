//go:build cuda

package cuda

// #cgo LDFLAGS: -L${SRCDIR}/../../build/cuda -ltwkernels_cuda -lcudart -lstdc++ -lm
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"
)

// gpuDevice is a real GPU through the CUDA driver API (gorgonia.org/cu): its
// primary context (the one the runtime API, and so the kernel launchers,
// use), device memory and one non-blocking stream that every op is queued on.
type gpuDevice struct {
	ord int
	dev cu.Device
	ctx cu.CUContext
	str cu.Stream
}

func openDevice(ordinal int) (device, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: counting devices: %w", err)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: device %d requested, %d present", ordinal, n)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return nil, fmt.Errorf("cuda: retaining device %d's primary context: %w", ordinal, err)
	}
	d := &gpuDevice{ord: ordinal, dev: dev, ctx: ctx}
	if err := d.bind(); err != nil {
		return nil, err
	}
	if d.str, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return nil, fmt.Errorf("cuda: creating a stream: %w", err)
	}
	return d, nil
}

// bind makes the primary context current on the calling OS thread. Go moves
// goroutines between threads, so every driver call is preceded by it; it
// costs a few nanoseconds when the context is already current.
func (d *gpuDevice) bind() error {
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		return fmt.Errorf("cuda: making device %d's context current: %w", d.ord, err)
	}
	return nil
}

func (d *gpuDevice) kind() string { return "cuda" }
func (d *gpuDevice) ordinal() int { return d.ord }

func (d *gpuDevice) alloc(n int) (uintptr, error) {
	if err := d.bind(); err != nil {
		return 0, err
	}
	p, err := cu.MemAlloc(int64(n))
	if err != nil {
		return 0, err
	}
	return p.Uintptr(), nil
}

func (d *gpuDevice) free(a uintptr) {
	if d.bind() == nil {
		cu.MemFree(cu.DevicePtr(a))
	}
}

func (d *gpuDevice) memset0(a uintptr, n int) error {
	if err := d.bind(); err != nil {
		return err
	}
	return cu.MemsetD8Async(cu.DevicePtr(a), 0, int64(n), d.str)
}

// upload and download are synchronous with respect to the stream: upload
// waits for the copy so the caller may reuse src; download waits for the work
// queued before it.
func (d *gpuDevice) upload(dst uintptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if err := d.bind(); err != nil {
		return err
	}
	if err := cu.MemcpyHtoDAsync(cu.DevicePtr(dst), unsafe.Pointer(&src[0]), int64(len(src)), d.str); err != nil {
		return err
	}
	err := d.str.Synchronize()
	runtime.KeepAlive(src)
	return err
}

func (d *gpuDevice) download(dst []byte, src uintptr) error {
	if len(dst) == 0 {
		return nil
	}
	if err := d.bind(); err != nil {
		return err
	}
	if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), cu.DevicePtr(src), int64(len(dst)), d.str); err != nil {
		return err
	}
	err := d.str.Synchronize()
	runtime.KeepAlive(dst)
	return err
}

func (d *gpuDevice) copy(dst, src uintptr, n int) error {
	if n == 0 {
		return nil
	}
	if err := d.bind(); err != nil {
		return err
	}
	return cu.MemcpyDtoDAsync(cu.DevicePtr(dst), cu.DevicePtr(src), int64(n), d.str)
}

func (d *gpuDevice) stream() unsafe.Pointer { return unsafe.Pointer(d.str.C()) }

func (d *gpuDevice) sync() error {
	if err := d.bind(); err != nil {
		return err
	}
	return d.str.Synchronize()
}
