//go:build cudaemu && !cuda

package cuda

// #cgo CFLAGS: -I${SRCDIR}/../../kernels/emu/include
// #cgo LDFLAGS: -L${SRCDIR}/../../build/emu -ltwkernels_emu -lstdc++ -lm -lpthread
// #include <stdint.h>
// #include <cuda_runtime_api.h>
// static inline void *addr_ptr(uintptr_t a) { return (void *)a; }
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/turnwise/turnwise/engine"
)

// haveCUBLAS reports whether cuBLAS can be selected: not under the emulator.
const haveCUBLAS = false

// emuDevice is the CPU emulator of kernels/emu: host memory behind the CUDA
// runtime API, kernels run as CPU fibers, every call synchronous.
type emuDevice struct{}

func openDevice(int) (device, error) { return emuDevice{}, nil }

func (emuDevice) kind() string { return "cudaemu" }
func (emuDevice) ordinal() int { return 0 }

func emuErr(what string, e C.cudaError_t) error {
	if e == C.cudaSuccess {
		return nil
	}
	return fmt.Errorf("%s: %s", what, C.GoString(C.cudaGetErrorString(e)))
}

func (emuDevice) alloc(n int) (uintptr, error) {
	var p unsafe.Pointer
	if err := emuErr("cudaMalloc", C.cudaMalloc(&p, C.size_t(n))); err != nil {
		return 0, err
	}
	if p == nil {
		return 0, errors.New("cudaMalloc returned NULL")
	}
	return uintptr(p), nil
}

func (emuDevice) free(a uintptr) { C.cudaFree(C.addr_ptr(C.uintptr_t(a))) }

func (emuDevice) memset0(a uintptr, n int) error {
	return emuErr("cudaMemset", C.cudaMemset(C.addr_ptr(C.uintptr_t(a)), 0, C.size_t(n)))
}

func (emuDevice) upload(dst uintptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return emuErr("cudaMemcpy", C.cudaMemcpy(C.addr_ptr(C.uintptr_t(dst)), unsafe.Pointer(&src[0]), C.size_t(len(src)), C.cudaMemcpyHostToDevice))
}

func (emuDevice) download(dst []byte, src uintptr) error {
	if len(dst) == 0 {
		return nil
	}
	return emuErr("cudaMemcpy", C.cudaMemcpy(unsafe.Pointer(&dst[0]), C.addr_ptr(C.uintptr_t(src)), C.size_t(len(dst)), C.cudaMemcpyDeviceToHost))
}

func (emuDevice) copy(dst, src uintptr, n int) error {
	if n == 0 {
		return nil
	}
	return emuErr("cudaMemcpy", C.cudaMemcpy(C.addr_ptr(C.uintptr_t(dst)), C.addr_ptr(C.uintptr_t(src)), C.size_t(n), C.cudaMemcpyDeviceToDevice))
}

func (emuDevice) stream() unsafe.Pointer { return nil }

func (emuDevice) sync() error { return emuErr("cudaDeviceSynchronize", C.cudaDeviceSynchronize()) }

// cublasGemm is never reached under the emulator: New refuses GEMM "cublas".
func (b *Backend) cublasGemm(_, _, _ *engine.Tensor, _ engine.GemmParams, _ engine.GemmDims) {
	panic("cuda: cuBLAS is not available under the emulator")
}
