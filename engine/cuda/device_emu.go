//go:build cudaemu && !cuda

package cuda

// #cgo CFLAGS: -I${SRCDIR}/../../kernels/emu/include
// #cgo LDFLAGS: -L${SRCDIR}/../../build/emu -ltwkernels_emu -lubsan -lstdc++ -lm -lpthread
// #include <stdint.h>
// #include <cuda_runtime_api.h>
// #include "bind.h"
// static inline void *addr_ptr(uintptr_t a) { return (void *)a; }
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// haveCUBLAS reports whether cuBLAS can be selected: not under the emulator.
const haveCUBLAS = false

// emuDevice is a device of the CPU emulator (kernels/emu): host memory
// behind the CUDA runtime API, kernels run as CPU fibers, every call
// synchronous. It takes the same steps as the real device: it retains the
// device's primary context, binds it, and queues everything on a stream of
// that context, which the emulator refuses to run from a thread where
// another context is current.
type emuDevice struct {
	ord int
	ctx C.CUcontext
	str C.cudaStream_t
}

func openDevice(ordinal int) (device, error) {
	var n C.int
	if r := C.cuDeviceGetCount(&n); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("cudaemu: counting devices: driver error %d", int(r))
	}
	if ordinal < 0 || ordinal >= int(n) {
		return nil, fmt.Errorf("cudaemu: device %d requested, %d present (TW_EMU_DEVICES)", ordinal, int(n))
	}
	d := &emuDevice{ord: ordinal}
	if r := C.cuDevicePrimaryCtxRetain(&d.ctx, C.CUdevice(ordinal)); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("cudaemu: retaining device %d's primary context: driver error %d", ordinal, int(r))
	}
	if err := d.bind(); err != nil {
		C.cuDevicePrimaryCtxRelease(C.CUdevice(ordinal))
		return nil, err
	}
	if err := rtErr("cudaStreamCreateWithFlags", C.cudaStreamCreateWithFlags(&d.str, C.cudaStreamNonBlocking)); err != nil {
		C.cuDevicePrimaryCtxRelease(C.CUdevice(ordinal))
		return nil, fmt.Errorf("cudaemu: creating a stream: %w", err)
	}
	return d, nil
}

func (d *emuDevice) kind() string { return "cudaemu" }
func (d *emuDevice) ordinal() int { return d.ord }

func (d *emuDevice) bind() error {
	if r := C.tw_bind_ctx(d.ctx); r != C.CUDA_SUCCESS {
		return fmt.Errorf("cudaemu: making device %d's context current: driver error %d", d.ord, int(r))
	}
	return nil
}

func (d *emuDevice) alloc(n int) (uintptr, error) {
	var p unsafe.Pointer
	if err := rtErr("cudaMalloc", C.cudaMalloc(&p, C.size_t(n))); err != nil {
		return 0, err
	}
	if p == nil {
		return 0, errors.New("cudaMalloc returned NULL")
	}
	return uintptr(p), nil
}

func (d *emuDevice) free(a uintptr) { _ = rtErr("cudaFree", C.cudaFree(C.addr_ptr(C.uintptr_t(a)))) }

func (d *emuDevice) memset0(a uintptr, n int) error {
	return rtErr("cudaMemsetAsync", C.cudaMemsetAsync(C.addr_ptr(C.uintptr_t(a)), 0, C.size_t(n), d.str))
}

func (d *emuDevice) memcpy(dst, src unsafe.Pointer, n int, kind C.cudaMemcpyKind) error {
	if n == 0 {
		return nil
	}
	if err := rtErr("cudaMemcpyAsync", C.cudaMemcpyAsync(dst, src, C.size_t(n), kind, d.str)); err != nil {
		return err
	}
	return d.sync()
}

func (d *emuDevice) upload(dst uintptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return d.memcpy(C.addr_ptr(C.uintptr_t(dst)), unsafe.Pointer(&src[0]), len(src), C.cudaMemcpyHostToDevice)
}

func (d *emuDevice) download(dst []byte, src uintptr) error {
	if len(dst) == 0 {
		return nil
	}
	return d.memcpy(unsafe.Pointer(&dst[0]), C.addr_ptr(C.uintptr_t(src)), len(dst), C.cudaMemcpyDeviceToHost)
}

func (d *emuDevice) copy(dst, src uintptr, n int) error {
	if n == 0 {
		return nil
	}
	return rtErr("cudaMemcpyAsync", C.cudaMemcpyAsync(C.addr_ptr(C.uintptr_t(dst)), C.addr_ptr(C.uintptr_t(src)),
		C.size_t(n), C.cudaMemcpyDeviceToDevice, d.str))
}

func (d *emuDevice) stream() unsafe.Pointer { return unsafe.Pointer(d.str) }

func (d *emuDevice) sync() error {
	return rtErr("cudaStreamSynchronize", C.cudaStreamSynchronize(d.str))
}

func (d *emuDevice) close() error {
	err := rtErr("cudaStreamDestroy", C.cudaStreamDestroy(d.str))
	if r := C.cuDevicePrimaryCtxRelease(C.CUdevice(d.ord)); r != C.CUDA_SUCCESS {
		err = errors.Join(err, fmt.Errorf("cuDevicePrimaryCtxRelease: driver error %d", int(r)))
	}
	return err
}

// ---- Emulator controls, for the tests -------------------------------------------

// emuCounters is what the emulator has alive (tw_emu_get_counters).
type emuCounters struct {
	streams, events int
	allocations     int
	bytes           int
	mallocs         int // cudaMalloc calls so far
	graphs          int // graphs and instantiated graphs alive
}

func readEmuCounters() emuCounters {
	var c C.tw_emu_counters
	C.tw_emu_get_counters(&c)
	return emuCounters{streams: int(c.streams), events: int(c.events), allocations: int(c.allocations),
		bytes: int(c.bytes), mallocs: int(c.mallocs), graphs: int(c.graphs)}
}

// emuPrimaryRefs returns the references held to device's primary context.
func emuPrimaryRefs(device int) int { return int(C.tw_emu_primary_ctx_refs(C.int(device))) }

// emuFault names what tw_emu_inject_fault can make fail.
type emuFault int

const (
	emuFaultFuncAttribute emuFault = C.TW_EMU_FAULT_FUNC_ATTRIBUTE
	emuFaultKernel        emuFault = C.TW_EMU_FAULT_KERNEL
)

// emuInjectFault makes the next call of kind fail with cudaErrorLaunchFailure
// (a kernel) or cudaErrorInvalidDeviceFunction (an attribute call).
func emuInjectFault(kind emuFault) {
	e := C.cudaErrorLaunchFailure
	if kind == emuFaultFuncAttribute {
		e = C.cudaErrorInvalidDeviceFunction
	}
	C.tw_emu_inject_fault(C.tw_emu_fault(kind), C.cudaError_t(e))
}

// emuSetSwitchDelay makes each context switch take us microseconds.
func emuSetSwitchDelay(us int) { C.tw_emu_set_ctx_switch_delay_us(C.int(us)) }

// emuSetCurrent makes device's primary context current on the calling
// thread, or none when device < 0, without taking a reference: what another
// library on the same thread might do.
func emuSetCurrent(device int) {
	var ctx C.CUcontext
	if device >= 0 {
		C.cuDevicePrimaryCtxRetain(&ctx, C.CUdevice(device))
		C.cuDevicePrimaryCtxRelease(C.CUdevice(device))
	}
	C.cuCtxSetCurrent(ctx)
}
