//go:build cuda || cudaemu

package cuda

// #cgo CFLAGS: -I${SRCDIR}/../../kernels
// #include "kernels.h"
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"

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

// Close releases what the backend holds on the device: its timers, cuBLASLt
// handle, plans and workspace, its own workspace, its stream and its
// reference to the device's primary context. Buffers from NewBuffer must be
// freed before. The backend cannot be used afterwards; closing it again does
// nothing.
func (b *Backend) Close() error {
	if b.dev == nil {
		return nil
	}
	b.enter()
	defer b.exit()
	var errs []error
	for t := range b.timers {
		errs = append(errs, t.destroy())
	}
	errs = append(errs, b.closeCUBLAS())
	if b.ws != 0 {
		b.dev.free(b.ws)
		b.ws, b.wsSize = 0, 0
	}
	errs = append(errs, b.dev.close())
	b.dev = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cuda: closing the backend: %w", err)
	}
	return nil
}
