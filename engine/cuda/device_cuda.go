//go:build cuda

package cuda

// The link of a -tags cuda binary, all of it here:
//   - build/cuda/libtwkernels_cuda.a: the kernels (nvcc; make kernels-cuda);
//   - the CUDA runtime linked statically (libcudart_static.a, which needs
//     libdl, librt and libpthread), and the C++ runtime;
//   - the driver, libcuda.so.1, the one CUDA library needed at run time:
//     gorgonia.org/cu links -lcuda; where no driver is installed, the
//     toolkit's stub libcuda.so serves for linking (the Makefile passes its
//     directory, CUDA_STUBS, in CGO_LDFLAGS).
// cuBLASLt is not linked: it is opened at run time (cublaslt.go).

// #cgo LDFLAGS: -L${SRCDIR}/../../build/cuda -ltwkernels_cuda
// #cgo LDFLAGS: -lcudart_static -ldl -lrt -lpthread -lstdc++ -lm
// #include <cuda.h>
// #include "bind.h"
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"
)

// haveCUBLAS reports whether GEMM "cublas" can be selected: on a real GPU,
// yes (cuBLASLt is looked for when a backend asks for it).
const haveCUBLAS = true

// gpuDevice is a real GPU through the CUDA driver API (gorgonia.org/cu): its
// primary context (the one the runtime API, and so the kernel launchers,
// use), device memory and one non-blocking stream that every op is queued on.
type gpuDevice struct {
	ord int
	dev cu.Device
	ctx C.CUcontext // the primary context, retained by openDevice
	str cu.Stream
}

// openDevice retains the device's primary context, makes it current and
// creates the stream. The caller has locked its goroutine to its thread.
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
	d := &gpuDevice{ord: ordinal, dev: dev}
	// gorgonia.org/cu keeps the handle to itself: make the context current
	// through it once and read the handle back.
	if err := cu.SetCurrentContext(ctx); err != nil {
		dev.ReleasePrimaryCtx()
		return nil, fmt.Errorf("cuda: making device %d's context current: %w", ordinal, err)
	}
	if r := C.cuCtxGetCurrent(&d.ctx); r != C.CUDA_SUCCESS || d.ctx == nil {
		dev.ReleasePrimaryCtx()
		return nil, fmt.Errorf("cuda: reading device %d's context: driver error %d", ordinal, int(r))
	}
	if d.str, err = cu.MakeStream(cu.NonBlocking); err != nil {
		dev.ReleasePrimaryCtx()
		return nil, fmt.Errorf("cuda: creating a stream: %w", err)
	}
	return d, nil
}

func (d *gpuDevice) bind() error {
	if r := C.tw_bind_ctx(d.ctx); r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuda: making device %d's context current: driver error %d", d.ord, int(r))
	}
	return nil
}

func (d *gpuDevice) kind() string { return "cuda" }
func (d *gpuDevice) ordinal() int { return d.ord }

func (d *gpuDevice) alloc(n int) (uintptr, error) {
	p, err := cu.MemAlloc(int64(n))
	if err != nil {
		return 0, err
	}
	return p.Uintptr(), nil
}

func (d *gpuDevice) free(a uintptr) { cu.MemFree(cu.DevicePtr(a)) }

func (d *gpuDevice) memset0(a uintptr, n int) error {
	return cu.MemsetD8Async(cu.DevicePtr(a), 0, int64(n), d.str)
}

// upload and download are synchronous with respect to the stream: upload
// waits for the copy so the caller may reuse src; download waits for the work
// queued before it.
func (d *gpuDevice) upload(dst uintptr, src []byte) error {
	if len(src) == 0 {
		return nil
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
	return cu.MemcpyDtoDAsync(cu.DevicePtr(dst), cu.DevicePtr(src), int64(n), d.str)
}

func (d *gpuDevice) stream() unsafe.Pointer { return unsafe.Pointer(d.str.C()) }

func (d *gpuDevice) sync() error { return d.str.Synchronize() }

func (d *gpuDevice) close() error {
	var errs []error
	if err := d.str.Synchronize(); err != nil {
		errs = append(errs, fmt.Errorf("synchronising the stream: %w", err))
	}
	if err := d.str.Destroy(); err != nil {
		errs = append(errs, fmt.Errorf("destroying the stream: %w", err))
	}
	if err := d.dev.ReleasePrimaryCtx(); err != nil {
		errs = append(errs, fmt.Errorf("releasing device %d's primary context: %w", d.ord, err))
	}
	return errors.Join(errs...)
}
